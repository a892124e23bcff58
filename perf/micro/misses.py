#!/usr/bin/env python3
"""Instructions and cache misses per relayed copy of BM_RelayFanout's server, from callgrind's
cache simulation.

  python3 perf/micro/misses.py 1000/8/16 [--bin build-release/perf/micro/tern-micro]
      [--ticks 20] [--annotate]

Wall time on a shared machine swings; a simulated cache's miss counts repeat. Only the
server's iterations after the warm-up are counted (`FanoutRig::serve_measured`, callgrind's
--toggle-collect; TERN_FANOUT_TICKS makes the benchmark run a fixed number of ticks); the
client's work still runs and evicts lines, as it does in the timed benchmark. Per copy means
divided by the copies those ticks relayed (7,000 a tick at 1000/8). The counts include the
rig's own work in the server's iterations (copying datagrams in and out): compare builds,
not these figures with wall-time ones. The simulated caches are one core's (48 KiB 12-way
L1D, 2 MiB 16-way last level): this machine's L3 is shared by every guest and far larger
than a core ever keeps. Callgrind counts a software prefetch as a load: a prefetched line
shows as a miss where it is prefetched. --annotate prints the source lines with the most
last-level misses (build with -Ddebug=true for line numbers). Needs valgrind; a /16 run
takes minutes (its warm-up is 325 ticks).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHES = {"l1": ["--D1=49152,12,64", "--LL=2097152,16,64"],
          "l2": ["--D1=2097152,16,64", "--LL=33554432,16,64"]}


def run(binary, args, ticks, out, levels):
    env = dict(os.environ, TERN_FANOUT_TICKS=str(ticks))
    cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", *CACHES[levels], "--collect-atstart=no",
           "--toggle-collect=*FanoutRig::serve_measured*", f"--callgrind-out-file={out}",
           binary, f"--benchmark_filter=^BM_RelayFanout/{re.escape(args)}/iterations:{ticks}$"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0 or "ERROR" in r.stdout or "iterations:" not in r.stdout:
        sys.exit(f"misses.py: the benchmark failed:\n{r.stdout[-800:]}\n{r.stderr[-800:]}")
    events, totals = None, None
    with open(out) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:") or line.startswith("summary:"):
                totals = [int(x) for x in line.split()[1:]]
    if events is None or totals is None:
        sys.exit("misses.py: no totals in the profile")
    return dict(zip(events, totals))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("args", help="BM_RelayFanout's arguments, e.g. 1000/8/16")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-release/perf/micro/tern-micro"))
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--levels", choices=CACHES.keys(), default="l1",
                    help="l1: a 48 KiB L1D and a 2 MiB last level (one core's L1 and L2); "
                    "l2: a 2 MiB first level and a 32 MiB last level (L2 and a share of L3)")
    ap.add_argument("--annotate", action="store_true")
    a = ap.parse_args()
    clients, room, _ = (int(x) for x in a.args.split("/"))
    copies_per_tick = clients // room * room * (room - 1) + (clients % room) * (clients % room - 1)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "callgrind.out")
        t = run(a.bin, a.args, a.ticks, out, a.levels)
        copies = a.ticks * copies_per_tick
        per = {k: v / copies for k, v in t.items()}
        print(f"BM_RelayFanout/{a.args} server, per copy ({copies} copies):")
        print(f"  instructions {per['Ir']:.1f}  data reads {per['Dr']:.1f}  writes {per['Dw']:.1f}")
        first, last = ("L1D", "LL") if a.levels == "l1" else ("L2", "L3")
        print(f"  {first} misses {per['D1mr'] + per['D1mw']:.3f} (read {per['D1mr']:.3f}, "
              f"write {per['D1mw']:.3f})")
        print(f"  {last} data misses {per['DLmr'] + per['DLmw']:.3f} (read {per['DLmr']:.3f}, "
              f"write {per['DLmw']:.3f})")
        if a.annotate:
            r = subprocess.run(["callgrind_annotate", "--sort=DLmr,DLmw,D1mr,D1mw",
                                "--show=DLmr,DLmw,D1mr,D1mw,Ir", "--inclusive=no",
                                "--auto=yes", "--context=0", "--threshold=95", out],
                               capture_output=True, text=True)
            print(r.stdout)


if __name__ == "__main__":
    main()
