#!/usr/bin/env python3
"""Tern's KCP echo server against kcp-go's, side by side in one run (issue 31, item 6).

Both servers echo every message on its session; both use the same KCP settings (nodelay 1,
10 ms interval, fast resend 2, no congestion window, windows 128). The load is Debian's kcp-go
itself (perf/kcp_load.go): N client sessions, each on its own UDP socket, first idle, then a
closed loop of 64-byte messages. For each server the script reads the server process's CPU
time (utime + stime, /proc/PID/stat) at the phase boundaries the load prints, and reports:

  idle_cpu_pct    server CPU while N sessions are open and silent, % of one core
  msgs_per_cpu_s  echoes completed during the load phase / server CPU seconds in it
  echoes_per_s    echoes completed per wall second (bounded by the load side on 2 cores)

Servers alternate within each repetition; medians over --reps. Go programs are built offline
(GO111MODULE=off, GOPATH=/usr/share/gocode). The Tern server is perf/tern-kcp-echo from
--build (tern::Host with the KCP personality, one thread, the socket driver's batched I/O; use a
release build: meson setup build-release --buildtype=release -Db_lto=true).

  perf/kcp_compare.py --build build-release [--sessions 1000,10000] [--reps 3] [--json FILE]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOPATH = "/usr/share/gocode"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def go_build(src, out, cache):
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH, GOCACHE=cache, GOPROXY="off")
    subprocess.run(["go", "build", "-o", out, src], env=env, check=True)


def start_server(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening"):
        proc.kill()
        sys.exit("server did not start: %r" % line)
    return proc, int(line.rsplit(":", 1)[-1].split()[-1])


def one_run(name, server_cmd, load_bin, sessions, idle, load):
    server, port = start_server(server_cmd)
    cmd = [load_bin, "-addr", "127.0.0.1:%d" % port, "-sessions", str(sessions),
           "-idle", str(idle), "-load", str(load)]
    gen = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    marks = {}
    echoes = None
    try:
        for line in gen.stdout:
            line = line.strip()
            key = line.split()[0]
            marks[key] = (time.monotonic(), cpu_seconds(server.pid))
            if key == "load_end":
                echoes = int(line.split("echoes=")[1])
        gen.wait(timeout=120)
    finally:
        server.terminate()
        server.wait(timeout=20)
    if gen.returncode != 0 or echoes is None:
        raise RuntimeError("%s: load failed at %d sessions (exit %s)" % (name, sessions, gen.returncode))
    (t0, c0), (t1, c1) = marks["idle_start"], marks["idle_end"]
    (t2, c2), (t3, c3) = marks["load_start"], marks["load_end"]
    return {
        "server": name, "sessions": sessions,
        "idle_cpu_pct": 100.0 * (c1 - c0) / (t1 - t0),
        "msgs_per_cpu_s": echoes / max(c3 - c2, 1.0 / TICK),
        "echoes_per_s": echoes / (t3 - t2),
        "load_cpu_s": c3 - c2,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build-release")
    ap.add_argument("--sessions", default="1000,10000")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--idle", type=float, default=3)
    ap.add_argument("--load", type=float, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    if shutil.which("go") is None:
        sys.exit("kcp_compare: go not found (apt-get install golang-go golang-github-xtaci-kcp-dev)")
    build = a.build if os.path.isabs(a.build) else os.path.join(ROOT, a.build)
    tern_echo = os.path.join(build, "perf/tern-kcp-echo")
    if not os.access(tern_echo, os.X_OK):
        sys.exit("kcp_compare: %s not built (ninja -C %s perf/tern-kcp-echo)" % (tern_echo, a.build))
    work = os.path.join(ROOT, "perf/results/kcp")
    os.makedirs(work, exist_ok=True)
    cache = os.path.join(work, "gocache")
    load_bin = os.path.join(work, "kcp_load")
    go_server = os.path.join(work, "kcp_go_peer")
    go_build(os.path.join(ROOT, "perf/kcp_load.go"), load_bin, cache)
    go_build(os.path.join(ROOT, "tests/interop/kcpgo/kcp_go_peer.go"), go_server, cache)
    # One socket per kcp-go client session.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    servers = {
        "tern": [tern_echo, "--sessions", "50000"],
        "kcp-go": [go_server, "-listen", "127.0.0.1:0"],
    }
    results = []
    for n in [int(x) for x in a.sessions.split(",")]:
        for rep in range(a.reps):
            order = list(servers) if rep % 2 == 0 else list(reversed(list(servers)))
            for name in order:
                r = one_run(name, servers[name], load_bin, n, a.idle, a.load)
                r["rep"] = rep
                results.append(r)
                print("  %-6s %6d sessions rep %d: idle %.1f%% cpu, %.0f msgs/cpu-s, %.0f echoes/s"
                      % (name, n, rep, r["idle_cpu_pct"], r["msgs_per_cpu_s"], r["echoes_per_s"]),
                      flush=True)
    print("\nmedians over %d reps (server process CPU; 2-core machine, load generator on the same cores)" % a.reps)
    print("%-8s %-7s %12s %16s %12s" % ("sessions", "server", "idle cpu %", "msgs per cpu-s", "echoes/s"))
    summary = []
    for n in sorted({r["sessions"] for r in results}):
        row = {}
        for name in servers:
            rs = [r for r in results if r["sessions"] == n and r["server"] == name]
            m = {k: statistics.median(r[k] for r in rs) for k in ("idle_cpu_pct", "msgs_per_cpu_s", "echoes_per_s")}
            row[name] = m
            print("%-8d %-7s %12.2f %16.0f %12.0f" % (n, name, m["idle_cpu_pct"], m["msgs_per_cpu_s"], m["echoes_per_s"]))
        ratio = row["tern"]["msgs_per_cpu_s"] / row["kcp-go"]["msgs_per_cpu_s"]
        print("%-8d ratio   tern/kcp-go msgs per cpu-s: %.1fx" % (n, ratio))
        summary.append({"sessions": n, "medians": row, "msgs_per_cpu_s_ratio": ratio})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": results, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
