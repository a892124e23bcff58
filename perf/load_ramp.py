#!/usr/bin/env python3
"""Load ramp: offered load rising in steps past each relay's capacity, held, then back down.

    perf/load_ramp.py [--build build-release] [--runs 3]
                      [--relays tern-socket,tern-uring,tern-memif,libenet]
                      [--capacity NAME=HZ,...] [--find-capacity HZ,HZ,...]
                      [--steps 25,50,100,150,200,300,50] [--step-seconds 3]
                      [--clients 1000] [--tern-args "FLAGS"] [--quick] [--out FILE]

Relays: tern-relay on the socket, io_uring and DPDK net_memif drivers (memif: relay and load
generator busy-polling the two ends of a memif pair, as in perf/dpdk_bench.py (a)), and the
libenet reference relay. For every relay (a fresh process per run, pinned to CPU 0) one
tern-loadgen run (pinned to CPU 1; 1 s warm-up) goes through all the steps with --schedule,
--step-seconds each, at CAPACITY x STEP% messages per second per client: the same clients
see the load rise and fall. Reliable, 64 B, rooms of 8, each client's own queue bounded at
4 KiB (--max-queued 4096, 64 messages: an application that cannot send more is told so; those
copies count as lost, not as latency). Per step: goodput (copies that arrived in the step, per
second), loss (by send time), p99 (the worst of the step's seconds, by send time, and each
second's), the relay's peak RSS, and the relay's and the load generator's CPU (share of a
core).

CAPACITY is the per-client rate at 100%: --capacity, or found first with --find-capacity (the
relay's sustainable rate on a fresh process: swept upwards, the last rate before a step loses
more than 1%, its p99 passes --capacity-p99-ms (default 50 ms: a 20 Hz game frame), or goodput
stops rising by 3%). The built-in defaults are rough.

Summary per relay (medians of the runs): goodput at 200% and 300% as a share of the ramp's peak
goodput; "p99 before", the step before the overload with the last step's load (else the step
just before the first one past 100%: the median of its seconds' p99), against "p99 after", the
p99 of the messages sent 1-2 s after the load fell; peak RSS; the load generator's CPU at 300%.
Results: perf/results/load_ramp.json. --quick (the CI smoke): 200 clients, steps 25,100,300,50
of 2 s, one run, tern-socket and libenet.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from runtime_bench import free_port, parse_kv  # noqa: E402

DEFAULT_CAPACITY = {"tern-socket": 300, "tern-uring": 60, "tern-memif": 900, "libenet": 40}
MEMIF_SOCK = f"/tmp/tern-load-ramp-{os.getpid()}.sock"


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def start_relay(build, name, tern_args=()):
    """Starts relay `name` on CPU 0; returns its process, the loadgen's target and the loadgen
    flags that reach it (memif: the client end of the relay's memif pair)."""
    port = free_port()
    target = f"127.0.0.1:{port}"
    client = ["--sources", "127.0.0.0/29"]
    relay = os.path.join(build, "apps/relay/tern-relay")
    if name == "libenet":
        cmd = [os.path.join(build, "perf/reference/enet-relay"), "--listen", target, "--quiet"]
    elif name == "tern-memif":
        if os.path.exists(MEMIF_SOCK):
            os.unlink(MEMIF_SOCK)
        cmd = [relay, "--listen", f"0.0.0.0:{port}", "--driver", "dpdk", "--dpdk-port",
               f"net_memif0,role=server,socket={MEMIF_SOCK}", "--dpdk-ip", "10.215.0.1/24",
               "--dpdk-mbufs", "16383", "--shards", "1", "--idle", "busy", "--pin", "off"]
        target = f"10.215.0.1:{port}"
        client = ["--driver", "dpdk", "--dpdk-port", f"net_memif0,role=client,socket={MEMIF_SOCK}",
                  "--dpdk-ip", "10.215.0.2/24", "--dpdk-mbufs", "16383", "--idle", "busy",
                  "--timeout-ms", "15000"]
    else:
        cmd = [relay, "--listen", target, "--shards", "1", "--pin", "off", "--driver",
               name.split("-", 1)[1]]
    if name != "libenet":
        cmd += list(tern_args)
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    if name == "libenet":
        time.sleep(0.3)
    else:
        for line in p.stdout:  # EAL may speak first; "relaying ..." once it serves
            if line.startswith("relaying"):
                break
        else:
            p.wait()
            raise RuntimeError(f"{name} did not start (exit {p.returncode}): is DPDK built?")
    return p, target, client


def stop_relay(p):
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def loadgen_cmd(build, target, clients, rate, seconds):
    """tern-loadgen on CPU 1: rooms of 8, 64 B reliable, 1 s warm-up, each client's queue
    bounded at 4 KiB."""
    return ["taskset", "-c", "1", os.path.join(build, "apps/loadgen/tern-loadgen"), "--target",
            target, "--quiet", "--clients", str(clients), "--room-size", "8", "--rate",
            f"{rate:g}", "--size", "64", "--duration", f"{seconds:g}", "--warmup", "1",
            "--delivery", "reliable", "--max-queued", "4096"]


def step(build, target, client_args, clients, rate, seconds, relay_pid):
    peak = [0]
    done = [False]

    def sample():
        while not done[0]:
            peak[0] = max(peak[0], rss_kib(relay_pid))
            time.sleep(0.05)

    t = threading.Thread(target=sample)
    t.start()
    cmd = loadgen_cmd(build, target, clients, rate, seconds) + client_args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 90)
    done[0] = True
    t.join()
    line = next((l for l in r.stdout.splitlines() if l.startswith("loadgen ")), "")
    f = parse_kv(line)
    p99 = re.search(r"p99=([\d.]+)", line)
    expected = float(f.get("expected", 0))
    lost = float(f.get("lost", 0))
    return {"rate": rate, "goodput": float(f.get("delivered_per_s", 0)),
            "p99_us": float(p99.group(1)) if p99 else None,
            "loss": lost / expected if expected > 0 else None,
            "rss_kib": peak[0], "ok": bool(line)}


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def ramp(build, target, client_args, clients, rates, seconds, relay_pid):
    """One tern-loadgen run through every step (--schedule), against the same connections:
    the load rises past capacity and falls again without the clients going away. Per step:
    goodput (copies that arrived in it, per second), loss by send time (refused messages
    included), p99 (the worst of its seconds, by send time), each second's p99, the relay's
    peak RSS and both processes' CPU."""
    n = len(rates)
    json_path = f"/tmp/tern-load-ramp-{os.getpid()}.json"
    schedule = ",".join(f"{k * seconds:g}:{rates[k]}" for k in range(1, n))
    cmd = (loadgen_cmd(build, target, clients, rates[0], n * seconds)
           + ["--per-second", "--json", json_path] + (["--schedule", schedule] if n > 1 else [])
           + client_args)
    lg = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = []  # (time, relay cpu s, loadgen cpu s, relay rss KiB)
    done = [False]

    def sample():
        while not done[0]:
            samples.append((time.monotonic(), cpu_seconds(relay_pid), cpu_seconds(lg.pid),
                            rss_kib(relay_pid)))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    traffic = None
    out = []
    try:
        for line in lg.stdout:
            out.append(line)
            if traffic is None and line.startswith("connected "):
                traffic = time.monotonic()  # the load generator starts sending now
        lg.wait(timeout=seconds * n * 4 + 90)
    finally:
        done[0] = True
        sampler.join()
    err = lg.stderr.read()
    try:
        with open(json_path) as f:
            result = json.load(f)
        os.unlink(json_path)
    except (OSError, ValueError):
        result = {}
    per_second = result.get("per_second", [])
    rows = []
    for k in range(n):
        secs = [r for r in per_second if k * seconds <= r["t"] < (k + 1) * seconds]
        t0 = (traffic or 0) + 1 + k * seconds
        window = [x for x in samples if t0 <= x[0] <= t0 + seconds]
        share = lambda i: ((window[-1][i] - window[0][i]) / (window[-1][0] - window[0][0])
                           if len(window) > 1 and window[-1][0] > window[0][0] else None)
        expected = sum(r["expected"] for r in secs)
        rows.append({
            "rate": rates[k],
            "goodput": sum(r["arrived"] for r in secs) / seconds,
            "delivered_by_send": sum(r["delivered"] for r in secs) / seconds,
            "loss": 1 - sum(r["delivered"] for r in secs) / expected if expected else None,
            "refused": sum(r["refused"] for r in secs),
            "p99_us": max((r["p99_us"] for r in secs), default=None),
            "p99_by_second_us": [r["p99_us"] for r in secs],
            "rss_kib": max((x[3] for x in window), default=0),
            "relay_cpu": share(1), "loadgen_cpu": share(2),
            "ok": bool(secs) and traffic is not None})
    # Copies owed for messages the clients did send (not refused for a full queue) that never
    # arrived: a relay that keeps its promise loses none of these for clients that stayed.
    # Rooms of 8: exact when the clients fill every room (each refused message owed 7 copies).
    lost_sent = (result["expected"] - result["delivered"] - 7 * result["refused"]
                 if clients % 8 == 0 and {"expected", "delivered", "refused"} <= result.keys()
                 else None)
    return rows, {"dropped": result.get("dropped"), "exit": lg.returncode,
                  "lost_sent": lost_sent, "duplicates": result.get("duplicates"),
                  "out_of_order": result.get("out_of_order"), "stderr": err.strip()[-300:]}


def find_capacity(a, name, grid):
    """The relay's sustainable rate on a fresh process: rates of `grid` in turn, each run like a
    ramp step, until a step loses more than 1% (refused sends included), its p99 passes
    --capacity-p99-ms, or goodput stops rising (by 3%); the last rate before that. The latency
    bound matters: what a relay cannot read yet waits in its socket's receive buffer, so a short
    step past capacity can still deliver everything, late."""
    relay, target, client = start_relay(a.build, name, a.tern_args.split())
    best_rate, best = grid[0], 0.0
    try:
        for rate in grid:
            row = step(a.build, target, client, a.clients, rate, a.step_seconds, relay.pid)
            print(f"capacity {name:12s} rate={rate:7.1f} Hz goodput={row['goodput']:11.0f}/s "
                  f"loss={row['loss']} p99={row['p99_us']} us", flush=True)
            if (not row["ok"] or row["loss"] is None or row["loss"] > 0.01
                    or row["p99_us"] is None or row["p99_us"] > a.capacity_p99_ms * 1000
                    or row["goodput"] < best * 1.03):
                break
            best_rate, best = rate, row["goodput"]
    finally:
        stop_relay(relay)
    print(f"capacity {name}: {best_rate:g} Hz ({best:.0f} copies/s)", flush=True)
    return best_rate


def summarize(results, capacity, status):
    """Per relay, medians over its runs: goodput at 200% and 300% as a share of the peak of the
    steps before the fall (the last step's arrivals include the drained backlog); p99 before
    (the median of the seconds of the step before the overload with the last step's load,
    else of the step just before the first past 100%) and after (the messages sent 1-2 s and
    2-3 s after the load fell); peak RSS; CPU at 300%; connections the clients lost."""
    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def before_overload(rows):
        first_over = next((i for i, r in enumerate(rows) if r["pct"] > 100), 0)
        same = [r for r in rows[:first_over] if r["pct"] == rows[-1]["pct"]]
        row = same[-1] if same else rows[first_over - 1] if first_over > 0 else None
        return med(row["p99_by_second_us"]) if row else None

    def after_fall(rows, second):
        by_second = rows[-1]["p99_by_second_us"]
        return by_second[second] if len(by_second) > second else None

    summary = {}
    print("\nrelay         capacity  goodput@200%  goodput@300%  p99 before  p99 1-2s after  "
          "ratio  p99 2-3s after  ratio  peak RSS  cpu@300% relay/loadgen  clients lost  "
          "copies sent but lost")
    fmt = lambda v, f: (f % v) if v is not None else "-"
    for name, runs in results.items():
        def share(pct):
            out = []
            for rows in runs:
                peak = max(r["goodput"] for r in (rows[:-1] if len(rows) > 1 else rows)) or 1
                out += [r["goodput"] / peak for r in rows if r["pct"] == pct]
            return med(out)

        pct = lambda v: v * 100 if v is not None else None
        before = med([before_overload(rows) for rows in runs])
        after1 = med([after_fall(rows, 1) for rows in runs])
        after2 = med([after_fall(rows, 2) for rows in runs])
        s = {"capacity_hz": capacity[name], "share_200": pct(share(200)),
             "share_300": pct(share(300)), "p99_before_us": before,
             "p99_after_us": after1, "recovery": after1 / before if before and after1 else None,
             "p99_after_2s_us": after2,
             "recovery_2s": after2 / before if before and after2 else None,
             "peak_rss_kib": med([max(r["rss_kib"] for r in rows) for rows in runs]),
             "loadgen_cpu_300": med([r["loadgen_cpu"] for rows in runs for r in rows
                                     if r["pct"] == 300]),
             "relay_cpu_300": med([r["relay_cpu"] for rows in runs for r in rows
                                   if r["pct"] == 300]),
             "clients_lost": [st.get("dropped") for st in status.get(name, [])],
             "sent_but_lost": [st.get("lost_sent") for st in status.get(name, [])]}
        summary[name] = s
        print(f"{name:12s} {capacity[name]:7.0f}Hz {fmt(s['share_200'], '%11.1f%%'):>13s} "
              f"{fmt(s['share_300'], '%11.1f%%'):>13s} {fmt(before, '%9.0fus'):>11s} "
              f"{fmt(after1, '%13.0fus'):>15s} {fmt(s['recovery'], '%5.2fx'):>6s} "
              f"{fmt(after2, '%13.0fus'):>15s} {fmt(s['recovery_2s'], '%5.2fx'):>6s} "
              f"{fmt(s['peak_rss_kib'], '%7.0fKiB'):>9s}  {fmt(s['relay_cpu_300'], '%.2f')}/"
              f"{fmt(s['loadgen_cpu_300'], '%.2f')}  {s['clients_lost']}  "
              f"sent but lost {s['sent_but_lost']}")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--relays", default="tern-socket,tern-uring,tern-memif,libenet")
    ap.add_argument("--capacity", default="")
    ap.add_argument("--find-capacity", default="",
                    help="per-client rates (Hz) to sweep for each relay's capacity first")
    ap.add_argument("--capacity-p99-ms", type=float, default=50,
                    help="--find-capacity: a rate whose p99 passes this is past capacity")
    ap.add_argument("--steps", default="25,50,100,150,200,300,50")
    ap.add_argument("--step-seconds", type=float, default=3)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tern-args", default="", help="extra tern-relay flags, space separated")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "load_ramp.json"))
    ap.add_argument("--summarize", metavar="FILE", help="print the summary of a results file")
    a = ap.parse_args()
    if a.summarize:
        with open(a.summarize) as f:
            saved = json.load(f)
        capacity = saved.get("capacity") or {n: s["capacity_hz"]
                                             for n, s in saved["summary"].items()}
        summarize(saved["runs"], capacity, saved.get("status", {}))
        return 0
    if a.quick:
        a.runs, a.clients, a.step_seconds = 1, 200, 2
        a.steps, a.relays = "25,100,300,50", "tern-socket,libenet"
    capacity = dict(DEFAULT_CAPACITY)
    for item in filter(None, a.capacity.split(",")):
        name, _, hz = item.partition("=")
        if name not in DEFAULT_CAPACITY or not hz.replace(".", "", 1).isdigit():
            ap.error(f"--capacity: expected NAME=HZ with NAME one of {sorted(DEFAULT_CAPACITY)}")
        capacity[name] = float(hz)
    relays = [r for r in a.relays.split(",") if r]
    for r in relays:
        if r not in DEFAULT_CAPACITY:
            ap.error(f"--relays: unknown relay {r!r}")
    try:
        steps = [float(s) for s in a.steps.split(",")]
    except ValueError:
        ap.error("--steps: comma-separated percentages")

    if a.find_capacity:
        try:
            grid = sorted(float(x) for x in a.find_capacity.split(","))
        except ValueError:
            ap.error("--find-capacity: comma-separated rates")
        for name in relays:
            capacity[name] = find_capacity(a, name, grid)

    results = {r: [] for r in relays}
    status = {r: [] for r in relays}
    for run in range(a.runs):
        order = relays if run % 2 == 0 else list(reversed(relays))
        for name in order:
            relay, target, client = start_relay(a.build, name, a.tern_args.split())
            rates = [max(1, round(capacity[name] * pct / 100)) for pct in steps]
            try:
                rows, status_of_run = ramp(a.build, target, client, a.clients, rates,
                                           a.step_seconds, relay.pid)
            finally:
                stop_relay(relay)
            fmt = lambda v, f: (f % v) if v is not None else "-"
            for pct, row in zip(steps, rows):
                row["pct"] = pct
                print(f"run {run + 1} {name:12s} {pct:5.0f}% rate={row['rate']:5d} Hz "
                      f"goodput={row['goodput']:11.0f}/s p99={fmt(row['p99_us'], '%.0f')} us "
                      f"by second={row['p99_by_second_us']} loss={fmt(row['loss'], '%.4f')} "
                      f"rss={row['rss_kib']} KiB cpu relay={fmt(row['relay_cpu'], '%.2f')} "
                      f"loadgen={fmt(row['loadgen_cpu'], '%.2f')}", flush=True)
            print(f"run {run + 1} {name:12s} sent but lost: {status_of_run['lost_sent']} copies, "
                  f"duplicates {status_of_run['duplicates']}, out of order "
                  f"{status_of_run['out_of_order']}", flush=True)
            if status_of_run["exit"] != 0 or status_of_run["dropped"]:
                print(f"run {run + 1} {name}: load generator exit {status_of_run['exit']}, "
                      f"{status_of_run['dropped']} connections lost "
                      f"({status_of_run['stderr']})", flush=True)
            results[name].append(rows)
            status[name].append(status_of_run)

    summary = summarize(results, capacity, status)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"steps": steps, "clients": a.clients, "step_seconds": a.step_seconds,
                   "capacity": {n: capacity[n] for n in relays}, "runs": results,
                   "status": status, "summary": summary}, f, indent=1)
    ok = all(rows and all(r["ok"] for r in rows) for runs in results.values() for rows in runs)
    print(f"\nresults: {a.out}" + ("" if ok else "  (some steps failed to run: see above)"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
