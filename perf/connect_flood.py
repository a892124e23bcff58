#!/usr/bin/env python3
"""Connect flood (issue 29, "Done when"): a relay with established clients under a CONNECT flood
from many sources that never finish the handshake, tern-relay (socket driver, then DPDK memif)
against the libenet reference relay in one run.

    perf/connect_flood.py [--build build-release] [--runs 3]
                          [--relays tern-socket,tern-memif,libenet]
                          [--clients 1000] [--rate 5] [--flood-rate 100000] [--flood-seconds 6]
                          [--sources 1024] [--new-clients 100] [--tern-config FILE]
                          [--quick] [--out FILE]

Per relay and run (a fresh relay process each, pinned to CPU 0; everything else on CPU 1):
tern-loadgen plays --clients established clients in rooms of 8 (reliable, 64 B, --rate Hz each,
--per-second). After 3 measured seconds without a flood, perf/reference connect-flood sends
--flood-rate libenet CONNECTs/s (two processes, each half) from --sources loopback addresses
(127.77.x.y and 127.78.x.y) for --flood-seconds, reading back whatever the relay sends them
and never answering. One second into the flood, enet-connect-time starts --new-clients new
libenet clients (127.88.0.x) at once and times each connect (10 s limit).

Figures per run: the relay's CPU (share of a core) before and during the flood; established
p99 without the flood (the median of the per-second p99s before
it) and with it (the median over the flood's seconds but its first); the new clients' connect
times (p50, max) and how many failed; for tern-relay, new clients connected on their side
that the relay never promoted ("unknown": legitimate connects minus peers promoted, from
/metrics; seen when the relay reads far behind the flood, most likely their half-open entry
pushed out of the full table by the flood's before their acknowledgement was read); peer
slots held by flood sources (tern-relay: peers promoted minus legitimate connects, at least 0,
so one would hide an "unknown"; libenet: slots in use but not connected, from enet-relay's
SIGUSR1 status line in the middle of the flood); bytes the flood sources
received per byte they sent (read back on their sockets: both relays measured the same way;
tern-relay's own unverified_bytes_out/in counters beside it); the flood rate reached; the
established clients' losses and disconnects. Summary: medians over the runs.

tern-memif: tern-relay on DPDK net_memif (1 shard, busy polling, pinned to CPU 0). A memif
port talks to exactly one other DPDK process, so the flood, the established clients and the
new clients all come from tern-loadgen on the other end (CPU 1): --flood-rate forges the
CONNECTs as frames from 10.99.0.0/16 (off the relay's link: the relay's answers go to its
gateway, the load generator, which drops them), --late-clients are Tern's ENet-personality
clients (libenet cannot speak memif), connecting one second into the flood. The flood's
read-back is not measured there (the relay's unverified_bytes_out/in counters are), and the
relay's CPU is always a whole core (it polls): its busy share (busy_seconds_total, polls that
found nothing excluded) stands beside the CPU columns for every tern-relay row.
tern-socket-lg: the same tern-loadgen-only method on the socket driver (the flood from a raw
socket, from 127.99.0.0/16), for a row comparable with tern-memif; libenet-lg: the same against
the libenet relay (its flood slots from its SIGUSR1 status line, as for libenet).

Every wait is bounded (the load generator's own duration plus 60 s at most). --quick (the CI
smoke): 200 clients, a 20,000/s flood for 3 s from 256 sources, 20 new clients, one run; exits
1 when a tern-relay row fails its goals (every new client connects, no flood-held slot, no
amplification, no established client lost, the flood was sent). A tern-memif row is skipped
(said so; exit 77 when no row is left) when the build has no DPDK driver or the user is not
root, a tern-socket-lg row when not root (its raw socket).
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from runtime_bench import free_port, parse_kv, proc_cpu_s  # noqa: E402

BASE_SECONDS = 3  # measured seconds before the flood
MEMIF_SOCK = f"/tmp/tern-connect-flood-{os.getpid()}.sock"
MEMIF_RELAY_IP, MEMIF_CLIENT_IP = "10.216.0.1", "10.216.0.2"
# Flood and new clients from tern-loadgen.
LOADGEN_RELAYS = ("tern-memif", "tern-socket-lg", "libenet-lg")


class Skip(Exception):
    pass


def unavailable(build, name):
    """Why relay `name` cannot run here (None when it can)."""
    if name in ("tern-socket-lg", "libenet-lg") and os.geteuid() != 0:
        return "tern-loadgen's forged flood needs a raw socket (root)"
    if name != "tern-memif":
        return None
    if os.geteuid() != 0:
        return "DPDK memif needs root"
    r = subprocess.run([os.path.join(build, "apps/relay/tern-relay"), "--help"],
                       capture_output=True, text=True, timeout=30)
    if "dpdk" not in r.stdout + r.stderr:
        return "tern-relay has no DPDK driver in this build"
    return None


def memif_relay_config():
    """A tern-relay config for the server end of MEMIF_SOCK. The gateway is the load
    generator: forged sources off the link are answered through it (as through a router),
    one ARP entry for all of them."""
    if os.path.exists(MEMIF_SOCK):
        os.unlink(MEMIF_SOCK)
    conf = MEMIF_SOCK + ".toml"
    with open(conf, "w") as f:
        f.write(f'[dpdk]\nport = "net_memif0,role=server,socket={MEMIF_SOCK}"\n'
                f'ip = "{MEMIF_RELAY_IP}/24"\ngateway = "{MEMIF_CLIENT_IP}"\nmbufs = 16383\n')
    return conf


def start_on_cpu0(cmd, what):
    """A relay on CPU 0 in its own session, once it says "relaying" (DPDK's and the port's
    lines come first): the process and that line."""
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    line = p.stdout.readline()
    for _ in range(20):
        if line.startswith("relaying") or not line:
            break
        line = p.stdout.readline()
    if not line.startswith("relaying"):
        p.kill()
        p.wait()
        raise RuntimeError(f"{what} did not start: {line!r}")
    return p, line


def start_relay(build, name, peers, tern_config=None):
    port = free_port()
    target = f"127.0.0.1:{port}"
    metrics = None
    if name.startswith("libenet"):
        cmd = [os.path.join(build, "perf/reference/enet-relay"), "--listen", target,
               "--peers", str(peers), "--quiet"]
    elif name == "tern-memif":
        dpdk_conf = memif_relay_config()
        metrics = f"127.0.0.1:{free_port()}"
        target = f"{MEMIF_RELAY_IP}:{port}"
        cmd = [os.path.join(build, "apps/relay/tern-relay"), "--listen", f"0.0.0.0:{port}",
               "--shards", "1", "--pin", "off", "--driver", "dpdk", "--dpdk-config", dpdk_conf,
               "--idle", "busy", "--peers", str(peers), "--metrics", metrics]
        if tern_config:
            cmd[1:1] = ["--config", tern_config]
    else:
        metrics = f"127.0.0.1:{free_port()}"
        cmd = [os.path.join(build, "apps/relay/tern-relay"), "--listen", target, "--shards", "1",
               "--pin", "off", "--driver", "socket", "--peers", str(peers), "--metrics", metrics]
        if tern_config:
            cmd[1:1] = ["--config", tern_config]
    p, _ = start_on_cpu0(cmd, name)
    lines = []
    threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True).start()
    return p, target, metrics, lines


def stop(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def scrape(metrics):
    if metrics is None:  # the libenet relay: no /metrics
        return {}
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as r:
        body = r.read().decode()
    out = {}
    for line in body.splitlines():
        m = re.match(r"(tern_relay_[a-z_]+)(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(3))
    return out


def loadgen_client_args(name):
    """tern-loadgen's flags that reach relay `name` (memif: the client end of its pair)."""
    if name == "tern-memif":
        return ["--driver", "dpdk", "--dpdk-port", f"net_memif0,role=client,socket={MEMIF_SOCK}",
                "--dpdk-ip", f"{MEMIF_CLIENT_IP}/24", "--dpdk-mbufs", "16383", "--idle", "busy"]
    return []


class Established:
    """tern-loadgen on CPU 1 playing the established clients (and whatever `extra` adds);
    notes when they have all connected, and reads its JSON result at the end."""

    def __init__(self, build, name, target, a, duration, extra=()):
        self.name, self.duration = name, duration
        self.out_json = f"/tmp/connect-flood-{os.getpid()}-{name}.json"
        cmd = ["taskset", "-c", "1", os.path.join(build, "apps/loadgen/tern-loadgen"),
               "--target", target, "--clients", str(a.clients), "--rate", str(a.rate),
               "--room-size", "8", "--warmup", "1", "--duration", str(duration),
               "--per-second", "--timeout-ms", "30000", "--json", self.out_json] + list(extra)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self.connected_at = []
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("connected ") and not self.connected_at:
                self.connected_at.append(time.monotonic())
            self.lines.append(line)

    def wait_connected(self):
        limit = time.monotonic() + 40
        while not self.connected_at and time.monotonic() < limit and self.proc.poll() is None:
            time.sleep(0.01)
        if not self.connected_at:
            raise RuntimeError(f"{self.name}: the established clients did not connect: "
                               + "".join(self.lines[-5:]))
        return self.connected_at[0]

    def wait_done(self):
        self.proc.wait(timeout=self.duration + 60)
        self.reader.join(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            stop(self.proc)

    def result(self):
        if not os.path.exists(self.out_json):
            raise RuntimeError(f"{self.name}: tern-loadgen wrote no result (exit "
                               f"{self.proc.returncode}): " + "".join(self.lines[-5:]))
        with open(self.out_json) as f:
            res = json.load(f)
        os.unlink(self.out_json)
        return res


def established_p99(res, flood_s):
    """The established clients' p99 before the flood (median of its per-second p99s) and
    during it (median over the flood's seconds but its first, and the worst of them)."""
    secs = res.get("per_second", [])
    quiet = [s["p99_us"] / 1000 for s in secs if s["t"] < BASE_SECONDS and s.get("delivered")]
    during = [s["p99_us"] / 1000 for s in secs
              if BASE_SECONDS + 1 <= s["t"] < BASE_SECONDS + flood_s and s.get("delivered")]
    return {
        "p99_ms_without": statistics.median(quiet) if quiet else None,
        "p99_ms_with": statistics.median(during) if during else None,
        "p99_ms_with_worst": max(during) if during else None,
        "established_lost": res.get("lost"), "established_dropped": res.get("dropped"),
        "established_connected": res.get("connected"),
    }


def relay_load(r, cpu, busy):
    """The relay's share of a core from (cpu seconds, time) before the quiet seconds, at the
    flood's start and at its end; its busy share likewise from /metrics (None: no metrics)."""
    (cpu0, t0), (cpu1, t1), (cpu2, t2) = cpu
    r["relay_cpu_without"] = round((cpu1 - cpu0) / (t1 - t0), 2)
    r["relay_cpu_with"] = round((cpu2 - cpu1) / (t2 - t1), 2)
    if busy is not None:
        b0, b1, b2 = (m.get("tern_relay_busy_seconds_total", 0) for m in busy)
        r["relay_busy_without"] = round((b1 - b0) / (t1 - t0), 2)
        r["relay_busy_with"] = round((b2 - b1) / (t2 - t1), 2)


def relay_accounting(r, a, before, after, new_connected):
    """tern-relay's own view of the flood, from /metrics before it and after the run."""
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    promoted = after.get("tern_relay_peers_promoted_total", 0)
    r["flood_slots"] = max(0, int(promoted - a.clients - new_connected))
    r["new_unknown"] = max(0, int(a.clients + new_connected - promoted))
    r["unverified_out_per_in"] = round(d.get("tern_relay_unverified_bytes_out_total", 0) /
                                       max(1, d.get("tern_relay_unverified_bytes_in_total", 0)),
                                       3)
    r["half_open_evicted"] = int(d.get("tern_relay_half_open_evicted_total", 0))


def finish(r):
    if r["p99_ms_without"] and r["p99_ms_with"]:
        r["p99_ratio"] = round(r["p99_ms_with"] / r["p99_ms_without"], 2)
    return r


def slots_mid_flood(r, relay, metrics, relay_lines):
    """Peer slots in use in the middle of the flood: tern-relay's from /metrics; the libenet
    relay's from its SIGUSR1 status line, with those not connected (held by the flood)."""
    if metrics:
        r["slots_in_use_mid_flood"] = int(scrape(metrics).get("tern_relay_peers", 0))
        return
    relay.send_signal(signal.SIGUSR1)
    limit = time.monotonic() + 5
    while not any(l.startswith("status") for l in relay_lines) and time.monotonic() < limit:
        time.sleep(0.01)
    status = next((parse_kv(l) for l in relay_lines if l.startswith("status")), {})
    r["slots_in_use_mid_flood"] = status.get("peers_in_use")
    r["flood_slots"] = status.get("peers_in_use", 0) - status.get("connected", 0)


def one_run_loadgen(build, name, a):
    """tern-memif, tern-socket-lg, libenet-lg: tern-loadgen is the established clients, the flood
    (--flood-rate) and the new clients (--late-clients) at once."""
    flood_s, new = a.flood_seconds, a.new_clients
    duration = BASE_SECONDS + flood_s + 2
    relay, target, metrics, relay_lines = start_relay(build, name,
                                                      a.clients + new + a.sources * 2 + 64,
                                                      a.tern_config)
    lg = Established(build, name, target, a, duration,
                     ["--flood-rate", f"{a.flood_rate:.0f}", "--flood-at", str(BASE_SECONDS),
                      "--flood-for", str(flood_s), "--late-clients", str(new),
                      "--late-at", str(BASE_SECONDS + 1)] + loadgen_client_args(name))
    r = {"relay": name}
    try:
        connected_at = lg.wait_connected()
        flood_at = connected_at + 1 + BASE_SECONDS  # 1 s warm-up, then the quiet seconds
        time.sleep(max(0.0, connected_at + 1 - time.monotonic()))
        cpu0, t0, before0 = proc_cpu_s(relay.pid), time.monotonic(), scrape(metrics)
        time.sleep(max(0.0, flood_at - time.monotonic()))
        cpu1, t1, before = proc_cpu_s(relay.pid), time.monotonic(), scrape(metrics)
        time.sleep(max(0.0, flood_at + flood_s / 2 - time.monotonic()))
        slots_mid_flood(r, relay, metrics, relay_lines)
        time.sleep(max(0.0, flood_at + flood_s - time.monotonic()))
        cpu2, t2, after_flood = proc_cpu_s(relay.pid), time.monotonic(), scrape(metrics)
        relay_load(r, ((cpu0, t0), (cpu1, t1), (cpu2, t2)),
                   (before0, before, after_flood) if metrics else None)
        lg.wait_done()
        after = scrape(metrics)
    finally:
        lg.stop()
        stop(relay)
    res = lg.result()
    r.update(established_p99(res, flood_s))
    r.update({
        "new_connected": res.get("late_connected", 0),
        "new_failed": new - res.get("late_connected", 0),
        "new_p50_ms": res.get("late_p50_ms"), "new_max_ms": res.get("late_max_ms"),
        "flood_sent": res.get("flood_sent"), "flood_rate": res.get("flood_rate"),
        "flood_bytes_out_per_in": None,  # the load generator does not read the answers back
        "loadgen_exit": lg.proc.returncode,
    })
    if metrics:
        relay_accounting(r, a, before, after, r["new_connected"])
    return finish(r)


def one_run(build, name, a):
    if name in LOADGEN_RELAYS:
        return one_run_loadgen(build, name, a)
    flood_s, new = a.flood_seconds, a.new_clients
    duration = BASE_SECONDS + flood_s + 2
    relay, target, metrics, relay_lines = start_relay(build, name,
                                                      a.clients + new + a.sources * 2 + 64,
                                                      a.tern_config)
    on1 = ["taskset", "-c", "1"]
    lg = Established(build, name, target, a, duration)
    r = {"relay": name}
    try:
        connected_at = lg.wait_connected()
        flood_at = connected_at + 1 + BASE_SECONDS  # 1 s warm-up, then the quiet seconds
        time.sleep(max(0.0, connected_at + 1 - time.monotonic()))
        cpu0, t0 = proc_cpu_s(relay.pid), time.monotonic()
        before0 = scrape(metrics)
        time.sleep(max(0.0, flood_at - time.monotonic()))
        cpu1, t1 = proc_cpu_s(relay.pid), time.monotonic()
        before = scrape(metrics)
        floods = [subprocess.Popen(on1 + [os.path.join(build, "perf/reference/connect-flood"),
                                          "--target", target, "--rate", str(a.flood_rate / 2),
                                          "--duration", str(flood_s), "--sources",
                                          str(a.sources), "--base", str(77 + i)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for i in range(2)]
        time.sleep(1)
        ct = subprocess.Popen(on1 + [os.path.join(build, "perf/reference/enet-connect-time"),
                                     "--target", target, "--clients", str(new),
                                     "--timeout-ms", "10000", "--base", "88"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(max(0.0, flood_s / 2 - 1))
        slots_mid_flood(r, relay, metrics, relay_lines)
        flood = [parse_kv(f.communicate(timeout=flood_s + 30)[0]) for f in floods]
        cpu2, t2 = proc_cpu_s(relay.pid), time.monotonic()
        relay_load(r, ((cpu0, t0), (cpu1, t1), (cpu2, t2)),
                   (before0, before, scrape(metrics)) if metrics else None)
        conn = parse_kv(ct.communicate(timeout=30)[0])
        lg.wait_done()
        after = scrape(metrics)
    finally:
        lg.stop()
        stop(relay)
    r.update(established_p99(lg.result(), flood_s))
    sent = sum(f.get("sent", 0) for f in flood)
    bytes_sent = sum(f.get("bytes_sent", 0) for f in flood)
    bytes_back = sum(f.get("bytes_received", 0) for f in flood)
    seconds = max([f.get("seconds", 0) for f in flood] + [1e-9])
    r.update({
        "new_connected": conn.get("connected", 0), "new_failed": conn.get("failed", new),
        "new_p50_ms": conn.get("p50_ms"), "new_max_ms": conn.get("max_ms"),
        "flood_sent": sent, "flood_rate": round(sent / seconds),
        "flood_bytes_out_per_in": round(bytes_back / bytes_sent, 3) if bytes_sent else None,
        "flood_sources_answered": sum(f.get("sources_answered", 0) for f in flood),
    })
    if metrics:
        relay_accounting(r, a, before, after, r["new_connected"])
    return finish(r)


def median_of(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


KEYS = ["relay_cpu_without", "relay_cpu_with", "relay_busy_without", "relay_busy_with",
        "p99_ms_without", "p99_ms_with", "p99_ratio", "new_connected", "new_failed", "new_p50_ms",
        "new_max_ms", "new_unknown", "flood_slots", "flood_bytes_out_per_in", "unverified_out_per_in",
        "flood_rate", "established_lost", "established_dropped"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--relays", default="tern-socket,tern-memif,libenet",
                    help="of tern-socket, tern-socket-lg, tern-memif, libenet, libenet-lg")
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=5)
    ap.add_argument("--flood-rate", type=float, default=100000)
    ap.add_argument("--flood-seconds", type=int, default=6)
    ap.add_argument("--sources", type=int, default=1024)
    ap.add_argument("--new-clients", type=int, default=100)
    ap.add_argument("--tern-config", help="a tern-relay config file (e.g. [security] limits)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "connect_flood.json"))
    a = ap.parse_args()
    if a.quick:
        a.runs, a.clients, a.flood_rate, a.flood_seconds = 1, 200, 20000, 3
        a.sources, a.new_clients = 256, 20
    relays = a.relays.split(",")
    unknown = [n for n in relays if n not in ("tern-socket", "libenet") + LOADGEN_RELAYS]
    if unknown:
        ap.error(f"unknown relay {unknown[0]}")
    skipped = {}
    for n in list(relays):
        why = unavailable(a.build, n)
        if why:
            print(f"SKIP {n}: {why}", flush=True)
            skipped[n] = why
            relays.remove(n)
    if not relays:
        return 77
    runs = {n: [] for n in relays}
    try:
        for i in range(a.runs):
            for n in relays:  # side by side: the relays alternate within each run
                r = one_run(a.build, n, a)
                print(f"run {i + 1} " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
                runs[n].append(r)
    finally:
        for path in (MEMIF_SOCK, MEMIF_SOCK + ".toml"):
            if os.path.exists(path):
                os.unlink(path)
    summary = {n: {k: median_of(rs, k) for k in KEYS} for n, rs in runs.items()}
    print(f"\nconnect flood: {a.clients} established clients at {a.rate:g} Hz, "
          f"{a.flood_rate:.0f} CONNECTs/s asked for {a.flood_seconds} s ({2 * a.sources} "
          f"loopback sources for connect-flood; 10.99.0.0/16 or 127.99.0.0/16 forged by "
          f"tern-loadgen), {a.new_clients} new clients (libenet; Tern's ENet clients in "
          f"tern-loadgen rows); medians of {a.runs} run(s)")
    cols = [("relay", 14), ("p99 no flood", 13), ("p99 flood", 10), ("ratio", 6),
            ("new ok", 9), ("new p50", 8), ("new max", 8), ("unknown", 8), ("flood slots", 12),
            ("out/in", 7), ("ctr out/in", 11), ("flood/s", 8), ("lost", 6), ("dropped", 8),
            ("cpu", 5), ("cpu flood", 10), ("busy", 5), ("busy flood", 11)]
    print(" ".join(h.rjust(w) for h, w in cols))
    for n, s in summary.items():
        vals = [n, s["p99_ms_without"], s["p99_ms_with"], s["p99_ratio"],
                f'{s["new_connected"]}/{a.new_clients}', s["new_p50_ms"], s["new_max_ms"],
                s["new_unknown"], s["flood_slots"], s["flood_bytes_out_per_in"], s["unverified_out_per_in"],
                s["flood_rate"], s["established_lost"], s["established_dropped"],
                s["relay_cpu_without"], s["relay_cpu_with"], s["relay_busy_without"],
                s["relay_busy_with"]]
        print(" ".join((f"{v:.2f}" if isinstance(v, float) else "-" if v is None else str(v))
                       .rjust(w) for v, (_, w) in zip(vals, cols)))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"args": vars(a), "runs": runs, "summary": summary, "skipped": skipped}, f,
                  indent=1)
    print(f"wrote {a.out}")
    if a.quick:
        bad = []
        for n, s in summary.items():
            if n.startswith("libenet"):
                continue
            bad += [f"{n}: {what}" for what, ok in [
                ("a new client failed to connect", s["new_failed"] == 0),
                ("a flood source holds a peer slot", s["flood_slots"] == 0),
                ("flood sources were sent more than they sent",
                 (s["flood_bytes_out_per_in"] or 0) <= 1 and (s["unverified_out_per_in"] or 0) <= 1),
                ("established clients lost copies or were dropped",
                 s["established_lost"] == 0 and s["established_dropped"] == 0),
                ("the flood was not sent", (s["flood_rate"] or 0) > 0)] if not ok]
        for b in bad:
            print("FAIL " + b)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
