#!/usr/bin/env python3
"""Two builds of Tern side by side: alternating pairs, medians, the ratio B/A.

  python3 perf/build_ab.py --a /tmp/base/build-release [--b build-release] [--pairs 5]
                           [--micro-only] [--pair-seconds 4]

For a change that must not cost speed (a refactor, a new extension switched off): build the
baseline in a worktree (`git worktree add /tmp/base REV && meson setup /tmp/base/build-release
--buildtype=release -Db_lto=true && ninja -C /tmp/base/build-release`), then run this. Each pair
runs A then B (B then A in every other pair, so drift hits both alike):

  micro  tern-micro's BM_EchoUnsequenced/1000 (server ns per echo) and BM_RelayFanout/1000/8/0
         and /16 (server ns per copy), `taskset -c 1`, 1 s each, each in a process of its own;
  echo   the memif echo of dpdk_bench.py (tern-ping --serve on DPDK net_memif against
         tern-ping --flood, 1000 peers, unsequenced 16 B): the server's busy ns per datagram
         and the client's messages per second. Needs root and DPDK; --micro-only skips it.

Prints one line per figure: median of A, median of B, B/A - 1 (lower is better for ns, higher
for rates), and every pair's values. The machine is shared: read the ratio, not the figures,
and a ratio within the pairs' spread is noise.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "perf"))

# One process per benchmark: run after the fan-out's in the same process, the echo measured
# up to 5% apart between two builds that measured within 2% on their own (the heap and caches
# the earlier benchmark leaves differ from build to build).
MICRO_FILTERS = ("BM_EchoUnsequenced/1000$", "BM_RelayFanout/1000/8/0$",
                 "BM_RelayFanout/1000/8/16$")
MICRO_COUNTERS = ("server_ns_per_echo", "server_ns_per_copy")


def micro(build):
    figures = {}
    for flt in MICRO_FILTERS:
        out = subprocess.run(["taskset", "-c", "1", os.path.join(build, "perf/micro/tern-micro"),
                              f"--benchmark_filter={flt}", "--benchmark_min_time=1",
                              "--benchmark_format=json"], capture_output=True, text=True,
                             check=True)
        for bench in json.loads(out.stdout)["benchmarks"]:
            for counter in MICRO_COUNTERS:
                if counter in bench:
                    figures[f"{bench['name']} {counter}"] = bench[counter]
    return figures


def echo(build, args, n):
    import dpdk_bench  # DPDK and root only when the echo runs
    r = dpdk_bench.echo_case(build, args, n)
    if r is None:
        return {}
    return {"memif echo server_ns_per_datagram": r["server_ns_per_datagram"],
            "memif echo msgs_per_s": r["msgs_per_s"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="the baseline build directory")
    ap.add_argument("--b", default=os.path.join(ROOT, "build-release"),
                    help="the candidate build directory")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--pair-seconds", type=int, default=4, help="echo: seconds per window")
    ap.add_argument("--micro-only", action="store_true")
    args = ap.parse_args()
    if args.pairs < 1:
        ap.error("--pairs: at least 1")
    builds = {"A": os.path.abspath(args.a), "B": os.path.abspath(args.b)}
    for name, build in builds.items():
        if not os.path.exists(os.path.join(build, "perf/micro/tern-micro")):
            ap.error(f"--{name.lower()}: no perf/micro/tern-micro under {build}")
    if not args.micro_only and os.geteuid() != 0:
        ap.error("the memif echo needs root (DPDK vdevs); run as root or pass --micro-only")
    values = {}
    for i in range(args.pairs):
        for name in ("A", "B") if i % 2 == 0 else ("B", "A"):
            figures = micro(builds[name])
            if not args.micro_only:
                figures.update(echo(builds[name], args, 2 * i + (name == "B")))
            for key, v in figures.items():
                values.setdefault(key, {"A": [], "B": []})[name].append(v)
        print(f"pair {i + 1}/{args.pairs} done", file=sys.stderr, flush=True)
    for key, by in sorted(values.items()):
        if not by["A"] or not by["B"]:
            print(f"{key}: not measured on both builds")
            continue
        a, b = statistics.median(by["A"]), statistics.median(by["B"])
        pairs = " ".join(f"{x:.1f}/{y:.1f}" for x, y in zip(by["A"], by["B"]))
        print(f"{key:48s} A {a:10.1f}  B {b:10.1f}  B/A-1 {100 * (b / a - 1):+5.1f}%  "
              f"pairs A/B: {pairs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
