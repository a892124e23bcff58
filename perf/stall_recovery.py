#!/usr/bin/env python3
"""Does a memif relay catch up after a stall? tern-relay and tern-loadgen on DPDK net_memif.

  sudo python3 perf/stall_recovery.py [--build build-release] [--rate 600] [--duration 10]
                                      [--stall relay|loadgen] [--stall-ms 100] [--stalls 3]
                                      [--gap-ms 1500] [--runs 2] [--variant NAME=ARGS ...]
                                      [--json FILE] [--smoke]

The load is dpdk_bench.py's relay case (1000 clients in rooms of 8, 64 B reliable, both sides
busy-polling, the relay on CPU 0 and the load generator on CPU 1). From the third second on,
the stalled process is stopped with SIGSTOP for --stall-ms, --stalls times, --gap-ms apart:
what a shared machine does to a process now and then, made repeatable. A run has recovered
when, in its last two measured seconds, every copy offered was delivered and the p99 latency
was under 50 ms; its loss (copies never delivered) and p50/p99 over the whole run are
reported as well.

Each variant is a set of flags given to both tern-relay and tern-loadgen, or, after a
'relay:' or 'loadgen:' token, to that program only; the runs alternate the variants. The
defaults compare Tern's settings with ENet's windows and a 30 ms floor under the
retransmission timeout (the relay's defaults before 2026-11-25). Needs root.
"""

import argparse
import json
import os
import re
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dpdk_bench  # noqa: E402  (relay_commands, Server, load, kv, line_with, unlink)

DEFAULT_VARIANTS = [
    "tern=",
    "enet-window,30ms-floor=--throttle-window on --min-rto-ms 30",
]
PROGRESS = re.compile(r"^t=(\d+)s .*delivered/s=(\d+) p99_ms=([0-9.]+)")


def stall_later(name, first_s, stall_s, count, gap_s, stop):
    """SIGSTOPs the process called `name` `count` times (stall_s each, gap_s apart)."""
    if stop.wait(first_s):
        return
    pid = None
    for line in os.popen(f"pgrep -x {name}").read().split():
        pid = int(line)
        break
    if pid is None:
        return
    for _ in range(count):
        try:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stall_s)
        finally:
            os.kill(pid, signal.SIGCONT)
        if stop.wait(gap_s):
            return


def split_flags(text):
    """'--a 1 relay: --b 2 loadgen: --c' -> relay and load generator flag lists.

    Flags before any 'relay:' or 'loadgen:' marker go to both programs."""
    relay, loadgen = [], []
    targets = (relay, loadgen)
    for token in text.split():
        if token == "relay:":
            targets = (relay,)
        elif token == "loadgen:":
            targets = (loadgen,)
        else:
            for t in targets:
                t.append(token)
    return relay, loadgen


def run_case(b, args, flags, n):
    relay_flags, loadgen_flags = flags
    port = 7600 + n % 200
    sock = f"/tmp/tern-stall-recovery-{os.getpid()}.sock"
    dpdk_bench.unlink(sock)
    relay, loadgen = dpdk_bench.relay_commands(b, "dpdk", port, sock, args.rate, args.duration,
                                               subnet="10.218.0")
    relay += relay_flags
    loadgen += loadgen_flags
    srv = dpdk_bench.Server(relay, "relaying", "stall-relay")
    stop = threading.Event()
    # The load generator connects its clients in about a second; the stalls start two
    # seconds into the run (one into the measured period).
    staller = threading.Thread(
        target=stall_later,
        args=("tern-relay" if args.stall == "relay" else "tern-loadgen", 3.0,
              args.stall_ms / 1000, args.stalls, args.gap_ms / 1000, stop))
    staller.start()
    try:
        r = dpdk_bench.load(loadgen, 120)
    finally:
        stop.set()
        staller.join()
        relay_text = srv.stop()
        dpdk_bench.unlink(sock)
    v = dpdk_bench.kv(dpdk_bench.line_with(r.stdout, "loadgen "))
    if "delivered_per_s" not in v:
        dpdk_bench.log(f"  loadgen exit {r.returncode}: {r.stderr[-400:]}")
        return None
    seconds = [(int(m.group(1)), int(m.group(2)), float(m.group(3)))
               for m in map(PROGRESS.match, r.stderr.splitlines()) if m]
    offered = 1000 * args.rate * 7
    # The measured period's last two whole seconds (t counts from the first traffic).
    last = [s for s in seconds if s[0] <= args.duration][-2:]
    recovered = len(last) == 2 and all(d >= 0.99 * offered and p99 < 50 for _, d, p99 in last)
    stopped = dpdk_bench.kv(dpdk_bench.line_with(relay_text, "relay stopped"))
    return {"recovered": recovered, "lost": int(v["lost"]), "expected": int(v["expected"]),
            "p50_us": float(v["p50"]), "p99_us": float(v["p99"]),
            "last_seconds": [{"t": t, "delivered_per_s": d, "p99_ms": p} for t, d, p in last],
            "relay_retransmits": int(stopped.get("retransmits", 0)),
            "client_retransmits": int(v.get("retransmits", 0)),
            "loadgen_exit": r.returncode}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(dpdk_bench.ROOT, "build-release"))
    ap.add_argument("--rate", type=int, default=600)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--stall", choices=("relay", "loadgen"), default="relay")
    ap.add_argument("--stall-ms", type=int, default=100)
    ap.add_argument("--stalls", type=int, default=3)
    ap.add_argument("--gap-ms", type=int, default=1500)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--variant", action="append",
                    help="NAME=FLAGS (repeatable): flags for both programs; after 'relay:' or "
                         "'loadgen:' for that one only (default: " +
                         "; ".join(DEFAULT_VARIANTS) + ")")
    ap.add_argument("--json", default=os.path.join(dpdk_bench.ROOT,
                                                   "perf/results/stall_recovery.json"))
    ap.add_argument("--smoke", action="store_true",
                    help="the test suite's short version: one run of each variant at 50 Hz, "
                         "one 50 ms stall; fails unless each run measured something")
    args = ap.parse_args()
    if os.geteuid() != 0:
        dpdk_bench.log("needs root (DPDK vdevs)")
        return 77
    if args.smoke:
        args.rate, args.duration, args.stall_ms, args.stalls, args.runs = 50, 3, 50, 1, 1
    variants = []
    for text in args.variant or DEFAULT_VARIANTS:
        name, sep, flags = text.partition("=")
        if not sep or not name:
            ap.error(f"--variant '{text}': expected NAME=FLAGS")
        variants.append((name, flags))
    b = os.path.abspath(args.build)
    rows = {name: [] for name, _ in variants}
    n = 0
    for run in range(args.runs):
        for name, flags in (variants if run % 2 == 0 else variants[::-1]):
            n += 1
            res = run_case(b, args, split_flags(flags), n)
            rows[name].append(res)
            if res:
                dpdk_bench.log(
                    f"  run {run + 1} {name}: {'recovered' if res['recovered'] else 'BEHIND'} "
                    f"lost={res['lost']} p50={res['p50_us']:.0f} us p99={res['p99_us']:.0f} us "
                    f"relay retransmits={res['relay_retransmits']}")
    print(f"## {args.stalls} x {args.stall_ms} ms stalls of the {args.stall} ({args.gap_ms} ms "
          f"apart), memif relay at {args.rate} Hz ({1000 * args.rate * 7:,} copies/s), "
          f"{args.duration} s; {args.runs} runs each\n")
    print("| variant | flags | runs recovered | runs lossless | median p50 us | median p99 us "
          "| median relay retransmits |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, flags in variants:
        got = [r for r in rows[name] if r]
        med = (lambda k: f"{statistics.median(r[k] for r in got):,.0f}") if got else \
            (lambda k: "—")
        print(f"| {name} | `{' '.join(flags.split()) or '(defaults)'}` "
              f"| {sum(r['recovered'] for r in got)}/{len(rows[name])} "
              f"| {sum(r['lost'] == 0 for r in got)}/{len(rows[name])} | {med('p50_us')} "
              f"| {med('p99_us')} | {med('relay_retransmits')} |")
    if args.smoke:
        missing = [name for name, got in rows.items() if not all(got)]
        print(f"\nsmoke: {'FAILED: ' + ', '.join(missing) if missing else 'every run measured'}")
        return 1 if missing else 0
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"settings": vars(args), "variants": dict(variants), "runs": rows}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
