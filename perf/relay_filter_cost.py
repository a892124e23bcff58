#!/usr/bin/env python3
"""What the payload filter costs tern-relay: the same tern-loadgen load against tern-relay
with 100 rules (50 datagram-scope, 50 message-scope, none matching the traffic, so every
payload is scanned in full) and without rules, side by side, several runs.

Reports, per configuration, the median delivered copies/s, the relay's CPU% (from
/proc/PID/stat over the loadgen's run) and the relay's CPU µs per delivered copy, and the
ratio rules/no-rules. The relay is pinned to CPU 0 and the load to CPU 1.

usage: perf/relay_filter_cost.py [--build build-release] [--runs 3] [--clients 1000]
                                 [--rate 60] [--duration 5] [--out FILE]"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_rules(path, count=100, seed=7):
    rnd = random.Random(seed)
    words = ["cheat", "aimbot", "wallhack", "speedhack", "exploit", "inject", "overflow",
             "admin", "token", "session", "password", "select", "union", "script", "eval"]
    lines = []
    for i in range(count):
        scope = "datagram" if i % 2 == 0 else "message"
        w = rnd.choice(words) + str(i)
        kind = i % 5
        if kind == 0:
            pat = f"/{w}/i"
        elif kind == 1:
            pat = f"/^{w}[0-9]{{2,8}}/"
        elif kind == 2:
            pat = f"/{w}\\s*=\\s*[a-f0-9]{{16}}/i"
        elif kind == 3:
            pat = f"/\\x{rnd.randrange(0x80, 0xff):02x}\\x{rnd.randrange(0, 0xff):02x}{w}/"
        else:
            pat = f"/(?:{w}|{rnd.choice(words)}{i}x)[^\\n]{{4}}$/"
        action = ["count", "drop", "ban:60", "limit:100/s", "count"][i % 5]
        lines.append(f"{1000 + i} {scope} {action} {pat}")
    with open(path, "w") as f:
        f.write("# 100 rules that never match tern-loadgen's payloads\n" + "\n".join(lines) + "\n")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(build, rules, args):
    relay_cmd = ["taskset", "-c", "0", f"{build}/apps/relay/tern-relay", "--listen", "127.0.0.1:0",
                 "--shards", "1", "--pin", "off"]
    if rules:
        relay_cmd += ["--rules", rules]
    relay = subprocess.Popen(["timeout", "300"] + relay_cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        ready = relay.stdout.readline().split()
        if ready[:1] != ["relaying"]:
            raise RuntimeError(f"relay did not start: {ready}")
        # The relay process under `timeout` is its child.
        pid = int(subprocess.check_output(["pgrep", "-P", str(relay.pid)]).split()[0])
        load = subprocess.Popen(
            ["timeout", "120", "taskset", "-c", "1", f"{build}/apps/loadgen/tern-loadgen",
             "--target", ready[1], "--clients", str(args.clients), "--room-size", "8",
             "--rate", str(args.rate), "--size", "64", "--delivery", "reliable",
             "--warmup", "1", "--duration", str(args.duration), "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)  # connect + warm-up
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(args.duration - 0.5)
        c1, t1 = cpu_seconds(pid), time.monotonic()
        out, err = load.communicate(timeout=120)
        line = next((l for l in out.splitlines() if l.startswith("loadgen ")), "")
        f = dict(re.findall(r"(\S+)=(\S+)", line))
        if not f:
            raise RuntimeError(f"loadgen said nothing useful: {err.strip()[-300:]}")
        delivered = float(f["delivered_per_s"])
        cpu = (c1 - c0) / (t1 - t0)
        return {"delivered_per_s": delivered, "lost": int(f["lost"]), "relay_cpu_pct": 100 * cpu,
                "relay_us_per_copy": 1e6 * cpu / delivered if delivered else None,
                "p99_us": float(f["p99"])}
    finally:
        relay.terminate()
        relay.wait(timeout=20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build-release")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=60)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "perf/results/relay_filter_cost.json"))
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(ROOT, args.build)
    for exe in ("apps/relay/tern-relay", "apps/loadgen/tern-loadgen"):
        if not os.access(f"{build}/{exe}", os.X_OK):
            sys.exit(f"relay_filter_cost: {build}/{exe} not built")
    with tempfile.TemporaryDirectory() as d:
        rules = os.path.join(d, "100.rules")
        make_rules(rules)
        results = {"off": [], "on": []}
        for run in range(args.runs):
            order = ["off", "on"] if run % 2 == 0 else ["on", "off"]
            for cfg in order:
                r = one_run(build, rules if cfg == "on" else None, args)
                results[cfg].append(r)
                print(f"run {run + 1} rules={cfg:3}  " +
                      "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                for k, v in r.items()), flush=True)
    med = {cfg: {k: statistics.median(x[k] for x in rs if x[k] is not None)
                 for k in rs[0]} for cfg, rs in results.items()}
    print(f"\nmedians of {args.runs} runs, {args.clients} clients in rooms of 8, "
          f"{args.rate} Hz reliable 64 B")
    print(f"{'':10}{'copies/s':>12}{'relay CPU%':>12}{'µs/copy':>10}{'p99 µs':>10}")
    for cfg in ("off", "on"):
        m = med[cfg]
        print(f"{'rules ' + cfg:10}{m['delivered_per_s']:>12,.0f}{m['relay_cpu_pct']:>12.1f}"
              f"{m['relay_us_per_copy']:>10.3f}{m['p99_us']:>10.0f}")
    ratio = med["on"]["relay_us_per_copy"] / med["off"]["relay_us_per_copy"]
    print(f"CPU per delivered copy, 100 rules / none: {ratio:.3f}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"runs": results, "medians": med, "cpu_per_copy_ratio": ratio}, f, indent=1)


if __name__ == "__main__":
    main()
