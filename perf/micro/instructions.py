#!/usr/bin/env python3
"""Instructions per datagram a tern-micro benchmark's cores receive, counted by callgrind.

  python3 perf/micro/instructions.py BM_EchoUnsequenced/1000 [--bin build-release/perf/micro/tern-micro]

Wall-clock figures on this shared machine swing by 2x within minutes; an instruction count
repeats to the instruction. Google Benchmark calls a benchmark function several times while it
sizes the run, and each call builds and connects its cores again, so the steady state is
taken apart from that: one run with no benchmark (the process alone), one whose only call
does one iteration (the process, one set-up, the warm-up and one iteration), and one full
run whose calls to the benchmark and to HostCore's on_datagram are counted. Per datagram:

  (full - process - calls * (one - process)) / (datagrams_full - calls * datagrams_one)

It counts every instruction of those iterations, the rig's copying of datagrams between the
cores included: compare two builds of one benchmark, not benchmarks with each other. Fewer
instructions need not mean less time where the work waits on memory. Needs valgrind;
takes a minute or two.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def callgrind(binary, flt, min_time, workdir, tag):
    out = os.path.join(workdir, f"{tag}.out")
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
                        f"--benchmark_filter={flt}", f"--benchmark_min_time={min_time}"],
                       capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode != 0 or m is None:
        sys.exit(f"instructions.py: {flt} under callgrind failed:\n{r.stderr[-800:]}")
    return int(m.group(1)), out


CALLER = re.compile(r"^\s*[\d,]+ \([\s\d.]+%\)\s+<\s.*\(([\d,]+)x\)")
CALLEE = re.compile(r"^\s*[\d,]+ \([\s\d.]+%\)\s+\*\s")


def calls(profile, function):
    """How often `function` (a substring of callgrind's name for it) was called: the sum of
    the call counts on the caller lines ("< caller (Nx)") above its "*" line."""
    text = subprocess.run(["callgrind_annotate", "--tree=caller", "--threshold=100", profile],
                          capture_output=True, text=True).stdout
    total = 0
    pending = []
    for line in text.splitlines():
        m = CALLER.match(line)
        if m:
            pending.append(int(m.group(1).replace(",", "")))
            continue
        if CALLEE.match(line) and function in line:
            total += sum(pending)
        pending = []
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("benchmark", help="full name, e.g. BM_EchoUnsequenced/1000")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-release/perf/micro/tern-micro"))
    a = ap.parse_args()
    flt = f"^{re.escape(a.benchmark)}$"
    function = a.benchmark.split("/")[0] + "(benchmark::State&)"
    with tempfile.TemporaryDirectory() as d:
        process, _ = callgrind(a.bin, "^none$", 0, d, "process")
        one, one_out = callgrind(a.bin, flt, 0, d, "one")
        full, full_out = callgrind(a.bin, flt, 0.3, d, "full")
        runs_one, runs_full = calls(one_out, function), calls(full_out, function)
        dg_one = calls(one_out, "HostCore::Impl::on_datagram(")
        dg_full = calls(full_out, "HostCore::Impl::on_datagram(")
    if runs_one != 1 or runs_full < 1:
        sys.exit(f"instructions.py: expected one call of {function}, then more; saw "
                 f"{runs_one} and {runs_full}")
    datagrams = dg_full - runs_full * dg_one
    if datagrams <= 0:
        sys.exit("instructions.py: the full run received no more datagrams than its set-ups")
    work = full - process - runs_full * (one - process)
    print(f"{a.benchmark}: {work / datagrams:.0f} instructions per datagram received "
          f"({datagrams} datagrams past {runs_full} set-ups)")


if __name__ == "__main__":
    main()
