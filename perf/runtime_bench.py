#!/usr/bin/env python3
"""Runtime figures side by side: Tern (socket and io_uring drivers), plain libenet and raw UDP
echo servers under the same loads, in one run.

    python3 perf/runtime_bench.py [--build build-release] [--runs N] [--quick]
                                  [--only SCENARIO,...] [--out FILE]

Scenarios (--only takes a comma-separated subset):
  echo      1000 peers (flows), 1 and 8 in flight each, unreliable and reliable:
            msgs/s, server CPU us per message and per datagram
  tick      4000 peers x 30 msg/s unreliable: server CPU %
  idle      4000 idle connected peers (tern socket and io_uring, libenet): server CPU %,
            ping-pong RTT with them vs alone
  connect   4000 clients connecting at once: connect_ms
  busypoll  ping-pong RTT with busy-polling server and client (tern --idle busy vs
            raw-udp-echo --busy-poll + raw-udp-flood --busy-poll), plus sleeping baselines

Every cell gets a fresh server on a free port, pinned to CPU 0 (taskset -c 0); load clients
run on CPU 1, and so does this script. Every process runs under `timeout`. Each scenario runs
RUNS times (env RUNS or --runs, default 3; --quick: 1 run of tiny durations), alternating the
order of the servers between runs; the table shows medians. Results: perf/results/runtime.json.

Server CPU comes from /proc/PID/stat (utime+stime of the whole process, all threads), sampled
every 20 ms; the delta is taken over the client's measured window only (after its connect and
warm-up, before its end, trimmed by min(0.1 s, 5 %) at each edge), so it is a rate: CPU % of
one core. "us/msg" = server CPU time / messages echoed (client's received count); "us/dgram" =
server CPU time / UDP datagrams in and out of the server, counted from /proc/net/snmp
(InDatagrams over the same window: on loopback every datagram is received exactly once, by the
server or by the client, so that is server-in + server-out). Run as root, the script re-executes
itself in a private network namespace (unshare --net, loopback up) so those counters see only
its own traffic; otherwise (or with --no-netns) they count all UDP on the host. For raw UDP that is 2 datagrams per echo; for ENet it includes
acknowledgements, keep-alive pings and whatever batching each implementation does.
"""
import argparse
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = ("echo", "tick", "idle", "connect", "busypoll")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_S = 0.02


class BenchError(Exception):
    """A measurement cell failed; the message says why."""


class Skip(Exception):
    """A cell cannot run with this build (a missing flag, say)."""


# ---- configuration ------------------------------------------------------------------------


def config_for(quick):
    if quick:
        return {
            "runs": 1,
            "echo": {"peers": 1000, "windows": [1, 8], "duration": 1, "warmup": 1},
            "tick": {"peers": 4000, "rate": 30, "duration": 1, "warmup": 1},
            "idle": {"peers": 4000, "window": 1, "ping_count": 2000, "settle_max": 15},
            "connect": {"peers": 4000},
            "busypoll": {"ping_count": 2000, "raw_duration": 1, "raw_warmup": 0.2},
        }
    return {
        "runs": 3,
        "echo": {"peers": 1000, "windows": [1, 8], "duration": 5, "warmup": 1},
        "tick": {"peers": 4000, "rate": 30, "duration": 5, "warmup": 1},
        "idle": {"peers": 4000, "window": 5, "ping_count": 20000, "settle_max": 30},
        "connect": {"peers": 4000},
        "busypoll": {"ping_count": 20000, "raw_duration": 3, "raw_warmup": 0.5},
    }


def secs(v):
    """Seconds as a command-line value: integral values without a fraction."""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


# ---- processes ----------------------------------------------------------------------------

LIVE = set()  # every Proc not yet stopped, for the exit handler


class Proc:
    """A process started as `timeout -k 5 T [taskset -c CPU] CMD` in its own session, with its
    stdout and stderr read line by line (each line time-stamped) by two threads."""

    def __init__(self, name, cmd, cpu, limit_s, pin, line_buffered=False):
        self.name = name
        self.cmd = cmd
        full = ["timeout", "-k", "5", str(int(limit_s))]
        if pin:
            full += ["taskset", "-c", str(cpu)]
        if line_buffered:
            full += ["stdbuf", "-oL"]
        full += cmd
        self.t_start = time.monotonic()
        self.p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, text=True, errors="replace",
                                  start_new_session=True)
        LIVE.add(self)
        self.lines = []  # (monotonic time, stream, text)
        self.cond = threading.Condition()
        self.readers = [threading.Thread(target=self._read, args=(s, tag), daemon=True)
                        for s, tag in ((self.p.stdout, "out"), (self.p.stderr, "err"))]
        for r in self.readers:
            r.start()
        self._real_pid = None

    def _read(self, stream, tag):
        for line in stream:
            with self.cond:
                self.lines.append((time.monotonic(), tag, line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_line(self, pattern, timeout_s):
        """(time, match) of the first line matching `pattern`, or None on timeout or exit."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self.cond:
            while True:
                for t, _, text in self.lines[seen:]:
                    m = rx.search(text)
                    if m:
                        return t, m
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (self.p.poll() is not None and
                                 not any(r.is_alive() for r in self.readers)):
                    return None
                self.cond.wait(min(left, 0.05))

    def real_pid(self):
        """The pid of CMD itself: `timeout`'s child (taskset and stdbuf exec into it)."""
        if self._real_pid is None:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    with open(f"/proc/{self.p.pid}/task/{self.p.pid}/children") as f:
                        kids = f.read().split()
                except OSError:
                    kids = []
                if kids:
                    self._real_pid = int(kids[0])
                    break
                if self.p.poll() is not None:
                    break
                time.sleep(0.005)
        return self._real_pid

    def wait(self, timeout_s):
        try:
            rc = self.p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise BenchError(f"{self.name} did not finish within {timeout_s:.0f} s")
        for r in self.readers:
            r.join(timeout=5)
        LIVE.discard(self)
        return rc

    def stop(self, grace_s=5):
        """SIGTERM (timeout forwards it), then SIGKILL to the whole session we started."""
        if self.p.poll() is None:
            try:
                self.p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.p.wait(timeout=10)
        for r in self.readers:
            r.join(timeout=2)
        LIVE.discard(self)

    def output(self, stream=None):
        return [text for _, tag, text in self.lines if stream is None or tag == stream]

    def tail(self, n=6):
        return "\n".join(f"      {self.name}: {t}" for t in self.output()[-n:])


def stop_all():
    for p in list(LIVE):
        try:
            p.stop(grace_s=2)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- sampling -----------------------------------------------------------------------------


def proc_cpu_s(pid):
    """utime + stime of the whole process (all threads), in seconds; None once it is gone."""
    times = proc_times_s(pid)
    return times[0] if times is not None else None


def proc_times_s(pid):
    """(utime + stime, utime) of the whole process (all threads), in seconds; None once it is
    gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    user = int(fields[11]) / CLK_TCK  # fields 14 and 15 of stat(5)
    return user + int(fields[12]) / CLK_TCK, user


def udp_in_datagrams():
    try:
        with open("/proc/net/snmp") as f:
            rows = [line.split() for line in f if line.startswith("Udp:")]
        return int(rows[1][rows[0].index("InDatagrams")])
    except (OSError, IndexError, ValueError):
        return None


class Sampler:
    """Samples the CPU time of some pids and the host's UDP InDatagrams every 20 ms."""

    def __init__(self, pids):
        self.pids = {k: v for k, v in pids.items() if v}
        self.series = {k: [] for k in self.pids}
        self.series["udp_in"] = []
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def add(self, key, pid):
        """Starts sampling one more pid (thread-safe: the sampler iterates a copy)."""
        if pid:
            self.series.setdefault(key, [])
            self.pids = {**self.pids, key: pid}

    def _run(self):
        while True:
            t = time.monotonic()
            for k, pid in list(self.pids.items()):
                v = proc_times_s(pid)
                if v is not None:
                    self.series[k].append((t, v[0]))
                    self.series.setdefault(k + "_user", []).append((t, v[1]))
            v = udp_in_datagrams()
            if v is not None:
                self.series["udp_in"].append((t, v))
            if self.stop_ev.wait(SAMPLE_S):
                return

    def stop(self):
        self.stop_ev.set()
        self.thread.join(timeout=5)

    def at(self, key, t):
        """Linear interpolation of a series at time t; None outside what was sampled."""
        s = self.series.get(key, [])
        if not s or t < s[0][0] - SAMPLE_S or t > s[-1][0] + SAMPLE_S:
            return None
        for (t0, v0), (t1, v1) in zip(s, s[1:]):
            if t0 <= t <= t1:
                return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return s[0][1] if t < s[0][0] else s[-1][1]

    def rate(self, key, a, b):
        """Increase per second of a series over [a, b]."""
        va, vb = self.at(key, a), self.at(key, b)
        if va is None or vb is None or b <= a:
            return None
        return (vb - va) / (b - a)


def inner(a, b):
    trim = min(0.1, 0.05 * (b - a))
    return a + trim, b - trim


def parse_kv(line):
    out = {}
    for tok in line.split():
        k, sep, v = tok.partition("=")
        if not sep:
            continue
        try:
            out[k] = float(v) if re.fullmatch(r"-?\d+\.\d*|-?\d*\.\d+|.*[eE].*", v) else int(v)
        except ValueError:
            out[k] = v
    return out


# ---- the bench ----------------------------------------------------------------------------


class Bench:
    def __init__(self, build, pinned, cfg):
        self.build = build
        self.pinned = pinned
        self.cfg = cfg
        self.exe = {
            "tern-ping": os.path.join(build, "apps/ping/tern-ping"),
            "enet-echo-server": os.path.join(build, "perf/reference/enet-echo-server"),
            "enet-ping": os.path.join(build, "perf/reference/enet-ping"),
            "raw-udp-echo": os.path.join(build, "perf/reference/raw-udp-echo"),
            "raw-udp-flood": os.path.join(build, "perf/reference/raw-udp-flood"),
        }
        self.tern_help = ""
        if os.access(self.exe["tern-ping"], os.X_OK):
            try:
                r = subprocess.run(["timeout", "10", self.exe["tern-ping"], "--help"],
                                   capture_output=True, text=True, timeout=15)
                self.tern_help = r.stdout + r.stderr
            except subprocess.TimeoutExpired:
                pass

    def tern_needs(self, *flags):
        missing = [f for f in flags if not re.search(re.escape(f) + r"\b", self.tern_help)]
        if missing:
            raise Skip(f"tern-ping --help does not list {' '.join(missing)} yet")

    # -- servers --

    def server_cmd(self, kind, addr):
        t = self.exe["tern-ping"]
        if kind == "tern-socket":
            self.tern_needs("--shards", "--driver")
            return [t, "--serve", addr, "--shards", "1", "--driver", "socket"]
        if kind == "tern-uring":
            self.tern_needs("--shards", "--driver")
            return [t, "--serve", addr, "--shards", "1", "--driver", "uring"]
        if kind == "tern-busy":
            self.tern_needs("--shards", "--driver", "--idle")
            return [t, "--serve", addr, "--shards", "1", "--driver", "socket", "--idle", "busy"]
        if kind == "libenet":
            return [self.exe["enet-echo-server"], "--listen", addr, "--peers", "4095"]
        if kind == "raw":
            return [self.exe["raw-udp-echo"], "--listen", addr]
        if kind == "raw-busy":
            return [self.exe["raw-udp-echo"], "--listen", addr, "--busy-poll"]
        raise ValueError(kind)

    def start_server(self, kind):
        """A ready server on a free port: (Proc, "127.0.0.1:PORT")."""
        last = ""
        for _ in range(3):
            addr = f"127.0.0.1:{free_port()}"
            srv = Proc(f"server[{kind}]", self.server_cmd(kind, addr), 0, 3600, self.pinned,
                       line_buffered=True)
            if srv.wait_line(r"^serving |listening on", 10):
                if srv.real_pid() is None:
                    srv.stop()
                    raise BenchError(f"{kind}: cannot find the server's pid")
                return srv, addr
            srv.stop()
            last = srv.tail()
            if "bind" not in last.lower() and "listen" not in last.lower():
                break
        raise BenchError(f"{kind} server did not come up on {addr}:\n{last}")

    # -- clients --

    def enet_flood_cmd(self, addr, peers, *, window=None, rate=None, duration, warmup=None,
                       delivery="unreliable", json_path=None):
        self.tern_needs("--flood")
        cmd = [self.exe["tern-ping"], "--connect", addr, "--flood", "--peers", str(peers)]
        cmd += ["--window", str(window)] if window is not None else ["--rate", str(rate)]
        cmd += ["--duration", secs(duration)]
        if warmup is not None:
            cmd += ["--warmup", secs(warmup)]
        # Thousands of peers connecting at once can take libenet more than the default 5 s.
        cmd += ["--size", "64", f"--{delivery}", "--timeout-ms", "30000"]
        if json_path:
            cmd += ["--json", json_path]
        return cmd

    def raw_flood_cmd(self, addr, flows, *, window=None, rate=None, duration, warmup,
                      busy=False, json_path=None):
        cmd = [self.exe["raw-udp-flood"], "--target", addr, "--flows", str(flows)]
        cmd += ["--window", str(window)] if window is not None else ["--rate", str(rate)]
        cmd += ["--duration", secs(duration), "--warmup", secs(warmup), "--size", "64"]
        if busy:
            cmd += ["--busy-poll"]
        if json_path:
            cmd += ["--json", json_path]
        return cmd

    def run_flood(self, srv, cmd, *, raw, duration, warmup, tmp):
        """Runs a flood client against `srv`, sampling the server's CPU, and returns the
        client's figures plus the server's over the client's measured window."""
        limit = warmup + duration + 90
        sampler = Sampler({"server": srv.real_pid()})
        cli = Proc("client", cmd, 1, limit, self.pinned, line_buffered=True)
        try:
            sampler.add("client", cli.real_pid())
            rc = cli.wait(limit + 10)
        finally:
            cli.stop()
            sampler.stop()
        flood = [(t, l) for t, tag, l in cli.lines if tag == "out" and l.startswith("flood ")]
        if not flood:
            raise BenchError(f"client exited {rc} without a flood line:\n{cli.tail()}")
        rec = parse_kv(flood[-1][1])
        if rc != 0 and not rec.get("received"):
            raise BenchError(f"client exited {rc}, nothing echoed:\n{cli.tail()}")
        rec["client_rc"] = rc
        if raw:
            start = cli.t_start + warmup
        else:
            conn = [(t, l) for t, tag, l in cli.lines if tag == "out" and l.startswith("connected")]
            m = re.search(r"connected\s+(\d+)/(\d+)\s+in\s+([\d.]+)\s*ms", conn[0][1]) if conn \
                else None
            if m:
                rec.setdefault("connected", int(m.group(1)))
                rec.setdefault("connect_ms", float(m.group(3)))
            # The connected line is streamed (stdbuf -oL) if the client uses stdio; if it came
            # only at exit, the client's own connect_ms places the window.
            if conn and conn[0][0] < flood[-1][0] - 0.5 * duration:
                start = conn[0][0] + warmup
            else:
                start = cli.t_start + rec.get("connect_ms", 0) / 1000 + warmup
        a, b = inner(start, start + duration)
        self.add_server_figures(rec, sampler, a, b)
        cpu_c = sampler.rate("client", a, b)
        rec["client_cpu_pct"] = round(100 * cpu_c, 1) if cpu_c is not None else None
        return rec

    def add_server_figures(self, rec, sampler, a, b):
        cpu = sampler.rate("server", a, b)
        dgrams = sampler.rate("udp_in", a, b)
        rec["window_s"] = round(b - a, 3)
        rec["server_cpu_pct"] = round(100 * cpu, 2) if cpu is not None else None
        rec["dgrams_per_s"] = round(dgrams, 1) if dgrams is not None else None
        mps = rec.get("msgs_per_s")
        if cpu is not None and mps:
            rec["server_us_per_msg"] = round(1e6 * cpu / mps, 3)
        if cpu is not None and dgrams:
            rec["server_us_per_dgram"] = round(1e6 * cpu / dgrams, 3)
            user = sampler.rate("server_user", a, b)
            if user is not None:
                rec["server_user_us_per_dgram"] = round(1e6 * user / dgrams, 3)
        if dgrams is not None and mps:
            rec["dgrams_per_msg"] = round(dgrams / mps, 3)

    def run_ping(self, srv, kind, count=None, raw_duration=None, raw_warmup=None, busy=False,
                 delivery="unreliable"):
        """Ping-pong RTT against `srv` with the matching client; returns the rtt figures and
        the server's CPU % while it ran."""
        addr = srv.addr
        if kind.startswith("raw"):
            cmd = self.raw_flood_cmd(addr, 1, window=1, duration=raw_duration,
                                     warmup=raw_warmup, busy=busy)
            limit = raw_duration + raw_warmup + 60
        elif kind == "libenet":
            cmd = [self.exe["enet-ping"], "--connect", addr, "--count", str(count),
                   f"--{delivery}"]
            limit = 120 + count / 1000
        else:
            cmd = [self.exe["tern-ping"], "--connect", addr, "--count", str(count),
                   f"--{delivery}"]
            if busy:
                self.tern_needs("--idle")
                cmd += ["--idle", "busy"]
            limit = 120 + count / 1000
        sampler = Sampler({"server": srv.real_pid()})
        cli = Proc("ping", cmd, 1, limit, self.pinned)
        try:
            rc = cli.wait(limit + 10)
            t_end = time.monotonic()
            time.sleep(1.5 * SAMPLE_S)  # one more sample past t_end
        finally:
            cli.stop()
            sampler.stop()
        lines = [l for l in cli.output("out") if l.startswith(("rtt_us ", "flood "))]
        if rc != 0 or not lines:
            raise BenchError(f"ping client exited {rc}:\n{cli.tail()}")
        kv = parse_kv(lines[-1])
        rec = {k: kv.get(k) for k in ("p50", "p90", "p99", "p99.9", "max", "lost")}
        rec["count"] = kv.get("count", kv.get("received"))
        # Server CPU over the client's life after start-up (ping-pong has no separate window):
        # the raw client's warm-up, or the first fifth (at most 0.2 s) for the ENet clients.
        skip = raw_warmup if raw_warmup is not None else min(0.2, 0.2 * (t_end - cli.t_start))
        a, b = inner(cli.t_start + skip, t_end)
        cpu = sampler.rate("server", a, b)
        rec["server_cpu_pct"] = round(100 * cpu, 1) if cpu is not None else None
        return rec

    # -- scenarios: each yields (cell name, function) --

    def cells(self, scenario):
        c = self.cfg[scenario]
        if scenario == "echo":
            for server in ("tern-socket", "tern-uring", "libenet", "raw"):
                for w in c["windows"]:
                    for d in ("unreliable", "reliable"):
                        if server == "raw" and d == "reliable":
                            continue
                        yield server, f"{server} w={w} {d}", \
                            lambda tmp, s=server, w=w, d=d: self.cell_load(
                                s, tmp, window=w, delivery=d, **c)
        elif scenario == "tick":
            for server in ("tern-socket", "libenet", "raw"):
                yield server, f"{server} {c['peers']}x{c['rate']}Hz", \
                    lambda tmp, s=server: self.cell_load(s, tmp, **c)
        elif scenario == "idle":
            for server in ("tern-socket", "tern-uring", "libenet"):
                yield server, f"{server} {c['peers']} idle", \
                    lambda tmp, s=server: self.cell_idle(s, tmp, **c)
        elif scenario == "connect":
            for server in ("tern-socket", "tern-uring", "libenet"):
                yield server, f"{server} {c['peers']} connects", \
                    lambda tmp, s=server: self.cell_connect(s, tmp, **c)
        elif scenario == "busypoll":
            for server, busy in (("tern-busy", True), ("raw-busy", True),
                                 ("tern-socket", False), ("raw", False)):
                yield server, f"{server}{' busy' if busy else ' sleep'}", \
                    lambda tmp, s=server, b=busy: self.cell_busypoll(s, b, **c)

    def cell_load(self, server, tmp, *, peers, duration, warmup, window=None, rate=None,
                  delivery="unreliable", windows=None):
        raw = server.startswith("raw")
        jp = os.path.join(tmp, "client.json")
        if raw:
            cmd = self.raw_flood_cmd("ADDR", peers, window=window, rate=rate, duration=duration,
                                     warmup=warmup, json_path=jp)
        else:
            cmd = self.enet_flood_cmd("ADDR", peers, window=window, rate=rate,
                                      duration=duration, warmup=warmup, delivery=delivery,
                                      json_path=jp)
        srv, addr = self.start_server(server)
        srv.addr = addr
        try:
            cmd = [addr if x == "ADDR" else x for x in cmd]
            rec = self.run_flood(srv, cmd, raw=raw, duration=duration, warmup=warmup, tmp=tmp)
        finally:
            srv.stop()
        rec["delivery"] = delivery
        return rec

    def cell_idle(self, server, tmp, *, peers, window, ping_count, settle_max):
        cmd_idle = self.enet_flood_cmd("ADDR", peers, rate=0, duration=3600,
                                       delivery="unreliable")
        srv, addr = self.start_server(server)
        srv.addr = addr
        idle = None
        try:
            rec = {}
            alone = self.run_ping(srv, server, count=ping_count, delivery="reliable")
            rec.update({f"alone_{k}": v for k, v in alone.items()})
            cmd_idle = [addr if x == "ADDR" else x for x in cmd_idle]
            idle = Proc("idle-client", cmd_idle, 1, 3600, self.pinned, line_buffered=True)
            got = idle.wait_line(r"connected\s+(\d+)/(\d+)\s+in\s+([\d.]+)\s*ms", settle_max)
            if got is None:
                if idle.p.poll() is not None:
                    raise BenchError(f"idle client exited {idle.p.returncode}:\n{idle.tail()}")
                rec["connected_line"] = "not seen (buffered?); waited settle_max"
            else:
                rec["connected"] = int(got[1].group(1))
                rec["connect_ms"] = float(got[1].group(3))
            time.sleep(0.5)  # let the connect burst's retransmissions and acks settle
            sampler = Sampler({"server": srv.real_pid(), "client": idle.real_pid()})
            time.sleep(window)
            sampler.stop()
            s = sampler.series["server"]
            if len(s) >= 2:
                a, b = inner(s[0][0], s[-1][0])
                self.add_server_figures(rec, sampler, a, b)
                cpu_c = sampler.rate("client", a, b)
                rec["client_cpu_pct"] = round(100 * cpu_c, 1) if cpu_c is not None else None
            if idle.p.poll() is not None:
                raise BenchError(f"idle client exited early:\n{idle.tail()}")
            loaded = self.run_ping(srv, server, count=ping_count, delivery="reliable")
            rec.update({f"idle_{k}": v for k, v in loaded.items()})
            return rec
        finally:
            if idle is not None:
                idle.stop()
            srv.stop()

    def cell_connect(self, server, tmp, *, peers):
        cmd = self.enet_flood_cmd("ADDR", peers, rate=0, duration=1, delivery="unreliable")
        srv, addr = self.start_server(server)
        try:
            cmd = [addr if x == "ADDR" else x for x in cmd]
            cli = Proc("client", cmd, 1, 120, self.pinned, line_buffered=True)
            try:
                rc = cli.wait(130)
            finally:
                cli.stop()
            text = "\n".join(cli.output("out"))
            m = re.search(r"connected\s+(\d+)/(\d+)\s+in\s+([\d.]+)\s*ms", text)
            fl = [l for l in cli.output("out") if l.startswith("flood ")]
            rec = parse_kv(fl[-1]) if fl else {}
            if m:
                rec["connected"] = int(m.group(1))
                rec["connect_ms"] = float(m.group(3))
            if "connect_ms" not in rec:
                raise BenchError(f"client exited {rc} without connect_ms:\n{cli.tail()}")
            rec["client_rc"] = rc
            return rec
        finally:
            srv.stop()

    def cell_busypoll(self, server, busy, *, ping_count, raw_duration, raw_warmup):
        srv, addr = self.start_server(server)
        srv.addr = addr
        try:
            # A busy-polled round trip is ~10x shorter: 10x the pings for a similar duration.
            count = ping_count * 10 if busy else ping_count
            return self.run_ping(srv, server, count=count, raw_duration=raw_duration,
                                 raw_warmup=raw_warmup, busy=busy)
        finally:
            srv.stop()


# ---- reporting ----------------------------------------------------------------------------

COLUMNS = {
    "echo": [("msgs/s", "msgs_per_s", 0), ("srv CPU%", "server_cpu_pct", 1),
             ("us/msg", "server_us_per_msg", 2), ("us/dgram", "server_us_per_dgram", 2),
             ("usr us/dg", "server_user_us_per_dgram", 2), ("dgr/msg", "dgrams_per_msg", 2),
             ("p50 us", "p50", 0), ("p99 us", "p99", 0), ("lost", "lost", 0),
             ("cli CPU%", "client_cpu_pct", 0)],
    "tick": [("msgs/s", "msgs_per_s", 0), ("srv CPU%", "server_cpu_pct", 1),
             ("us/msg", "server_us_per_msg", 2), ("us/dgram", "server_us_per_dgram", 2),
             ("p50 us", "p50", 0), ("p99 us", "p99", 0), ("lost", "lost", 0),
             ("cli CPU%", "client_cpu_pct", 0)],
    "idle": [("connected", "connected", 0), ("srv CPU%", "server_cpu_pct", 2),
             ("dgrams/s", "dgrams_per_s", 0), ("alone p50", "alone_p50", 1),
             ("alone p99", "alone_p99", 1), ("idle p50", "idle_p50", 1),
             ("idle p99", "idle_p99", 1)],
    "connect": [("connected", "connected", 0), ("connect_ms", "connect_ms", 1)],
    "busypoll": [("p50 us", "p50", 1), ("p90 us", "p90", 1), ("p99 us", "p99", 1),
                 ("p99.9 us", "p99.9", 1), ("srv CPU%", "server_cpu_pct", 0),
                 ("count", "count", 0)],
}


def summarize(records):
    """Median of every numeric field over the successful runs of each cell."""
    cells = {}
    for r in records:
        cells.setdefault((r["scenario"], r["cell"]), []).append(r)
    out = {}
    for (scen, cell), rs in cells.items():
        ok = [r for r in rs if r["status"] == "ok"]
        row = {"cell": cell, "server": rs[0]["server"], "runs_ok": len(ok), "runs": len(rs)}
        if not ok:
            row["status"] = rs[-1]["status"]
            row["reason"] = rs[-1].get("reason", "")
        keys = {k for r in ok for k, v in r["result"].items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)}
        for k in sorted(keys):
            vals = [r["result"][k] for r in ok if isinstance(r["result"].get(k), (int, float))]
            if vals:
                row[k] = round(statistics.median(vals), 3)
        out.setdefault(scen, []).append(row)
    return out


def fmt(v, digits):
    if isinstance(v, (int, float)):
        return f"{v:,.{digits}f}"
    return "-"


def print_table(summary):
    for scen in SCENARIOS:
        rows = summary.get(scen)
        if not rows:
            continue
        cols = COLUMNS[scen]
        width = max(len(r["cell"]) for r in rows) + 2
        print(f"\n[{scen}] medians")
        print(f"{'cell':<{width}}" + "".join(f"{h:>11}" for h, _, _ in cols) + "  runs")
        for r in rows:
            if r["runs_ok"] == 0:
                reason = r["reason"].splitlines()[0] if r["reason"] else ""
                print(f"{r['cell']:<{width}}  {r['status'].upper()}: {reason}")
                continue
            print(f"{r['cell']:<{width}}" + "".join(f"{fmt(r.get(k), d):>11}" for _, k, d in cols)
                  + f"  {r['runs_ok']}/{r['runs']}")


# ---- main ---------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-release", help="meson build dir (default "
                    "build-release; relative to the repository root)")
    ap.add_argument("--runs", type=int, default=None, help="runs per cell (default $RUNS or 3;"
                    " 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="tiny durations, one run: a smoke test")
    ap.add_argument("--only", default="", help="comma-separated scenarios: " + ",".join(SCENARIOS))
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/runtime.json"))
    ap.add_argument("--no-netns", action="store_true", help="stay in the host's network "
                    "namespace (datagram counts then include everyone's UDP traffic)")
    args = ap.parse_args()

    # Own network namespace (root only): /proc/net/snmp then counts our datagrams alone, and
    # nobody else's loopback traffic shares our ports. Re-exec under unshare, same pid.
    netns = os.environ.get("RUNTIME_BENCH_NETNS") == "1"
    if not netns and not args.no_netns and os.geteuid() == 0 and subprocess.run(
            ["timeout", "10", "unshare", "--net", "true"], capture_output=True).returncode == 0:
        os.environ["RUNTIME_BENCH_NETNS"] = "1"
        os.execvp("unshare", ["unshare", "--net", "--", "sh", "-c",
                              'ip link set lo up && exec "$@"', "sh", sys.executable,
                              os.path.abspath(__file__)] + sys.argv[1:])
    if not netns:
        print("runtime_bench: not in a private network namespace (needs root and unshare); "
              "us/dgram counts every UDP datagram on the host", file=sys.stderr)

    only = [s for s in args.only.split(",") if s] or list(SCENARIOS)
    bad = [s for s in only if s not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenario(s) {','.join(bad)}; choose from {','.join(SCENARIOS)}")
    cfg = config_for(args.quick)
    runs = args.runs if args.runs is not None else int(os.environ.get("RUNS", cfg["runs"]))
    if runs < 1:
        ap.error("--runs must be at least 1")
    build = args.build if os.path.isabs(args.build) else os.path.join(ROOT, args.build)

    bench = Bench(build, pinned=False, cfg=cfg)
    need = {"echo": ["tern-ping", "enet-echo-server", "raw-udp-echo", "raw-udp-flood"],
            "tick": ["tern-ping", "enet-echo-server", "raw-udp-echo", "raw-udp-flood"],
            "idle": ["tern-ping", "enet-echo-server", "enet-ping"],
            "connect": ["tern-ping", "enet-echo-server"],
            "busypoll": ["tern-ping", "raw-udp-echo", "raw-udp-flood"]}
    missing = sorted({bench.exe[n] for s in only for n in need[s]
                      if not os.access(bench.exe[n], os.X_OK)})
    if missing:
        print("runtime_bench: missing binaries:\n  " + "\n  ".join(missing) +
              f"\nbuild them: meson setup {args.build} --buildtype=release -Db_lto=true && ninja -C "
              f"{args.build}", file=sys.stderr)
        return 2
    for tool in ("timeout", "taskset", "stdbuf"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            print(f"runtime_bench: {tool} not found (coreutils / util-linux)", file=sys.stderr)
            return 2

    pinned = subprocess.run(["taskset", "-c", "0,1", "true"], capture_output=True).returncode == 0
    if pinned:
        os.sched_setaffinity(0, {1})  # this script's sampling stays off the server's CPU
    else:
        print("runtime_bench: CPUs 0 and 1 not both available; running unpinned",
              file=sys.stderr)
    bench.pinned = pinned

    def on_signal(sig, _frame):
        stop_all()
        sys.exit(128 + sig)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    print(f"runtime_bench: scenarios {','.join(only)}; {runs} run(s); "
          f"{'quick' if args.quick else 'full'} durations; server CPU 0, load CPU 1 "
          f"(pinned={pinned}); build {build}")
    records = []
    t_begin = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="runtime_bench.") as tmp:
            for scen in only:
                for run in range(1, runs + 1):
                    cells = list(bench.cells(scen))
                    if run % 2 == 0:
                        cells.reverse()
                    for server, name, fn in cells:
                        rec = {"scenario": scen, "cell": name, "server": server, "run": run}
                        t0 = time.monotonic()
                        try:
                            rec["result"] = fn(tmp)
                            rec["status"] = "ok"
                        except Skip as e:
                            rec["status"], rec["reason"] = "skipped", str(e)
                        except BenchError as e:
                            rec["status"], rec["reason"] = "failed", str(e)
                        rec["elapsed_s"] = round(time.monotonic() - t0, 2)
                        records.append(rec)
                        show = rec.get("result", {})
                        brief = " ".join(f"{k}={show[k]}" for _, k, _ in COLUMNS[scen]
                                         if show.get(k) is not None)
                        print(f"  {scen} run {run} {name:<28} {rec['status']:<7} "
                              f"{brief if rec['status'] == 'ok' else rec.get('reason', '')}",
                              flush=True)
    finally:
        stop_all()

    summary = summarize(records)
    print_table(summary)
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    doc = {
        "benchmark": "runtime",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_rev": rev or "unknown",
        "build_dir": build,
        "host": {"machine": platform.machine(), "kernel": platform.release(),
                 "cpus": os.cpu_count()},
        "config": {"runs": runs, "quick": args.quick, "scenarios": only, "pinned": pinned,
                   "private_netns": netns,
                   "server_cpu": 0, "client_cpu": 1, "cpu_sample_s": SAMPLE_S,
                   "clk_tck": CLK_TCK, "scenario_params": {s: cfg[s] for s in only}},
        "definitions": {
            "server_cpu_pct": "utime+stime of the server process over the client's measured "
                              "window (edges trimmed), % of one core",
            "server_us_per_msg": "server CPU time / messages echoed (client received count)",
            "server_us_per_dgram": "server CPU time / UDP datagrams in+out of the server "
                                   "(/proc/net/snmp InDatagrams delta over the window, in the "
                                   "bench's private network namespace when private_netns)",
            "server_user_us_per_dgram": "the user-space part (utime) of server_us_per_dgram: "
                                        "the rest is the kernel's, the same work for every "
                                        "server given the same datagrams",
            "dgrams_per_msg": "datagrams in+out of the server per echoed message "
                              "(2 for raw UDP)",
        },
        "summary": summary,
        "runs": records,
        "elapsed_s": round(time.monotonic() - t_begin, 1),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"\nwrote {args.out} ({doc['elapsed_s']} s)")
    failed = sum(1 for r in records if r["status"] == "failed")
    skipped = sum(1 for r in records if r["status"] == "skipped")
    if skipped:
        print(f"runtime_bench: {skipped} measurement(s) skipped (see reasons above)")
    if failed:
        print(f"runtime_bench: {failed} measurement(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
