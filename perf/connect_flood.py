#!/usr/bin/env python3
"""Connect flood (issue 29, "Done when"): a relay with established clients under a CONNECT flood
from many sources that never finish the handshake, tern-relay against the libenet reference
relay in one run.

    perf/connect_flood.py [--build build-release] [--runs 3] [--relays tern-socket,libenet]
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
times (p50, max) and how many failed; peer slots held by flood sources (tern-relay: peers
promoted minus legitimate connects, from /metrics; libenet: slots in use but not connected,
from enet-relay's SIGUSR1 status line in the middle of the flood); bytes the flood sources
received per byte they sent (read back on their sockets: both relays measured the same way;
tern-relay's own unverified_bytes_out/in counters beside it); the flood rate reached; the
established clients' losses and disconnects. Summary: medians over the runs.

The DPDK memif driver is not in it: a memif port is one end of a shared-memory link to one
other DPDK process, which kernel sockets (the flood, the libenet clients) cannot reach.

Every wait is bounded (the load generator's own duration plus 60 s at most). --quick (the CI
smoke): 200 clients, a 20,000/s flood for 3 s from 256 sources, 20 new clients, one run; exits
1 when tern-relay fails its goals (every new client connects, no flood-held slot, no
amplification, no established client lost).
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


def start_relay(build, name, peers, tern_config=None):
    port = free_port()
    target = f"127.0.0.1:{port}"
    metrics = None
    if name == "libenet":
        cmd = [os.path.join(build, "perf/reference/enet-relay"), "--listen", target,
               "--peers", str(peers), "--quiet"]
    else:
        metrics = f"127.0.0.1:{free_port()}"
        cmd = [os.path.join(build, "apps/relay/tern-relay"), "--listen", target, "--shards", "1",
               "--pin", "off", "--driver", "socket", "--peers", str(peers), "--metrics", metrics]
        if tern_config:
            cmd[1:1] = ["--config", tern_config]
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    line = p.stdout.readline()
    if not line.startswith("relaying"):
        p.kill()
        raise RuntimeError(f"{name} did not start: {line!r}")
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
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as r:
        body = r.read().decode()
    out = {}
    for line in body.splitlines():
        m = re.match(r"(tern_relay_[a-z_]+)(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(3))
    return out


def one_run(build, name, a):
    flood_s, new = a.flood_seconds, a.new_clients
    duration = BASE_SECONDS + flood_s + 2
    relay, target, metrics, relay_lines = start_relay(build, name,
                                                      a.clients + new + a.sources * 2 + 64,
                                                      a.tern_config)
    on1 = ["taskset", "-c", "1"]
    out_json = f"/tmp/connect-flood-{os.getpid()}-{name}.json"
    lg = subprocess.Popen(on1 + [os.path.join(build, "apps/loadgen/tern-loadgen"), "--target",
                                 target, "--clients", str(a.clients), "--rate", str(a.rate),
                                 "--room-size", "8", "--warmup", "1", "--duration", str(duration),
                                 "--per-second", "--timeout-ms", "30000", "--json", out_json],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)
    connected_at = []
    lg_lines = []

    def read_lg():
        for line in lg.stdout:
            if line.startswith("connected ") and not connected_at:
                connected_at.append(time.monotonic())
            lg_lines.append(line)
    reader = threading.Thread(target=read_lg, daemon=True)
    reader.start()
    r = {"relay": name}
    try:
        limit = time.monotonic() + 40
        while not connected_at and time.monotonic() < limit and lg.poll() is None:
            time.sleep(0.01)
        if not connected_at:
            raise RuntimeError(f"{name}: the established clients did not connect: "
                               + "".join(lg_lines[-5:]))
        flood_at = connected_at[0] + 1 + BASE_SECONDS  # 1 s warm-up, then the quiet seconds
        time.sleep(max(0.0, connected_at[0] + 1 - time.monotonic()))
        cpu0, t0 = proc_cpu_s(relay.pid), time.monotonic()
        time.sleep(max(0.0, flood_at - time.monotonic()))
        cpu1, t1 = proc_cpu_s(relay.pid), time.monotonic()
        before = scrape(metrics) if metrics else {}
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
        if name == "libenet":
            relay.send_signal(signal.SIGUSR1)
            limit = time.monotonic() + 5
            while not any(l.startswith("status") for l in relay_lines) and \
                    time.monotonic() < limit:
                time.sleep(0.01)
            status = next((parse_kv(l) for l in relay_lines if l.startswith("status")), {})
            r["slots_in_use_mid_flood"] = status.get("peers_in_use")
            r["flood_slots"] = status.get("peers_in_use", 0) - status.get("connected", 0)
        else:
            mid = scrape(metrics)
            r["slots_in_use_mid_flood"] = int(mid.get("tern_relay_peers", 0))
        flood = [parse_kv(f.communicate(timeout=flood_s + 30)[0]) for f in floods]
        cpu2, t2 = proc_cpu_s(relay.pid), time.monotonic()
        # Share of one core the relay used, before and during the flood.
        r["relay_cpu_without"] = round((cpu1 - cpu0) / (t1 - t0), 2)
        r["relay_cpu_with"] = round((cpu2 - cpu1) / (t2 - t1), 2)
        conn = parse_kv(ct.communicate(timeout=30)[0])
        lg.wait(timeout=duration + 60)
        reader.join(timeout=10)
        after = scrape(metrics) if metrics else {}
    finally:
        for p in [lg]:
            if p.poll() is None:
                stop(p)
        stop(relay)
    with open(out_json) as f:
        res = json.load(f)
    os.unlink(out_json)
    secs = res.get("per_second", [])
    quiet = [s["p99_us"] / 1000 for s in secs if s["t"] < BASE_SECONDS and s.get("delivered")]
    during = [s["p99_us"] / 1000 for s in secs
              if BASE_SECONDS + 1 <= s["t"] < BASE_SECONDS + flood_s and s.get("delivered")]
    sent = sum(f.get("sent", 0) for f in flood)
    bytes_sent = sum(f.get("bytes_sent", 0) for f in flood)
    bytes_back = sum(f.get("bytes_received", 0) for f in flood)
    seconds = max([f.get("seconds", 0) for f in flood] + [1e-9])
    r.update({
        "p99_ms_without": statistics.median(quiet) if quiet else None,
        "p99_ms_with": statistics.median(during) if during else None,
        "p99_ms_with_worst": max(during) if during else None,
        "established_lost": res.get("lost"), "established_dropped": res.get("dropped"),
        "established_connected": res.get("connected"),
        "new_connected": conn.get("connected", 0), "new_failed": conn.get("failed", new),
        "new_p50_ms": conn.get("p50_ms"), "new_max_ms": conn.get("max_ms"),
        "flood_sent": sent, "flood_rate": round(sent / seconds),
        "flood_bytes_out_per_in": round(bytes_back / bytes_sent, 3) if bytes_sent else None,
        "flood_sources_answered": sum(f.get("sources_answered", 0) for f in flood),
    })
    if metrics:
        d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        promoted = after.get("tern_relay_peers_promoted_total", 0)
        r["flood_slots"] = int(promoted - a.clients - r["new_connected"])
        r["unverified_out_per_in"] = round(d.get("tern_relay_unverified_bytes_out_total", 0) /
                                           max(1, d.get("tern_relay_unverified_bytes_in_total",
                                                        0)), 3)
        r["half_open_evicted"] = int(d.get("tern_relay_half_open_evicted_total", 0))
    if r["p99_ms_without"] and r["p99_ms_with"]:
        r["p99_ratio"] = round(r["p99_ms_with"] / r["p99_ms_without"], 2)
    return r


def median_of(runs, key):
    vals = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


KEYS = ["relay_cpu_without", "relay_cpu_with", "p99_ms_without", "p99_ms_with", "p99_ratio", "new_connected", "new_failed", "new_p50_ms",
        "new_max_ms", "flood_slots", "flood_bytes_out_per_in", "flood_rate", "established_lost",
        "established_dropped"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--relays", default="tern-socket,libenet")
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
    runs = {n: [] for n in relays}
    for i in range(a.runs):
        for n in relays:  # side by side: the relays alternate within each run
            r = one_run(a.build, n, a)
            print(f"run {i + 1} " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
            runs[n].append(r)
    summary = {n: {k: median_of(rs, k) for k in KEYS} for n, rs in runs.items()}
    print(f"\nconnect flood: {a.clients} established clients at {a.rate:g} Hz, "
          f"{a.flood_rate:.0f} CONNECTs/s asked for {a.flood_seconds} s from {2 * a.sources} "
          f"sources, {a.new_clients} new libenet clients; medians of {a.runs} run(s)")
    cols = [("relay", 12), ("p99 no flood", 13), ("p99 flood", 10), ("ratio", 6),
            ("new ok", 7), ("new p50", 8), ("new max", 8), ("flood slots", 12),
            ("out/in", 7), ("flood/s", 8), ("lost", 6), ("dropped", 8), ("cpu", 5),
            ("cpu flood", 10)]
    print(" ".join(h.rjust(w) for h, w in cols))
    for n, s in summary.items():
        vals = [n, s["p99_ms_without"], s["p99_ms_with"], s["p99_ratio"],
                f'{s["new_connected"]}/{a.new_clients}', s["new_p50_ms"], s["new_max_ms"],
                s["flood_slots"], s["flood_bytes_out_per_in"], s["flood_rate"],
                s["established_lost"], s["established_dropped"], s["relay_cpu_without"],
                s["relay_cpu_with"]]
        print(" ".join((f"{v:.2f}" if isinstance(v, float) else str(v)).rjust(w)
                       for v, (_, w) in zip(vals, cols)))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"args": vars(a), "runs": runs, "summary": summary}, f, indent=1)
    print(f"wrote {a.out}")
    if a.quick and "tern-socket" in summary:
        s = summary["tern-socket"]
        bad = [what for what, ok in [
            ("a new client failed to connect", s["new_failed"] == 0),
            ("a flood source holds a peer slot", s["flood_slots"] == 0),
            ("flood sources were sent more than they sent", (s["flood_bytes_out_per_in"] or 0) <= 1),
            ("established clients lost copies or were dropped",
             s["established_lost"] == 0 and s["established_dropped"] == 0)] if not ok]
        for b in bad:
            print("FAIL tern-socket: " + b)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
