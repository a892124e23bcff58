#!/usr/bin/env python3
"""Secure sessions' cost: tern-relay's capacity encrypted against plain, and the crypto figures.

    perf/secure_compare.py [--build build-release] [--runs 3] [--drivers socket,memif]
                           [--clients 1000] [--step-seconds 2] [--start socket=HZ,...]
                           [--step-factor 1.25]
                           [--quick] [--out FILE]

For each driver (socket: tern-relay on the kernel's UDP sockets, loopback; memif: tern-relay
and tern-loadgen busy-polling the two ends of a DPDK net_memif pair, as in perf/load_ramp.py)
and each mode (plain; aes: [security] policy = "required" with a fresh key, every client
connecting with a connect token it mints, --token-key, the cipher as negotiated: AES-256-GCM
where both ends have AES-NI; chacha: the same with the relay's [security] aes = false,
ChaCha20-Poly1305), one capacity sweep on a fresh relay (pinned to CPU 0, loadgen on CPU 1):
tern-loadgen runs (1 s warm-up, --step-seconds each; reliable 64 B messages in rooms of 8,
each client's queue bounded at 4 KiB) at per-client rates rising by 25% a step (--step-factor)
from --start (8 Hz on sockets, 15 Hz on memif: below capacity even on a loaded machine; at
most 20 steps) until a step loses more than 1% (refused sends included) or its p99 passes
--capacity-p99-ms (100: a relay behind keeps what it cannot read yet in its socket buffer and
delivers it late, which a 2 s step would not count as loss) twice in a row, or goodput stops
rising (by 3%, the plateau). The configuration's **capacity** is the highest goodput
(delivered copies/s) of a step within those bounds. The modes alternate (plain, aes, chacha
in odd runs, the reverse in even ones), --runs times; the table gives medians, each
encrypted mode's median as a share of plain's, and the median of each run's own share.

Then tern-micro (the same build) for the per-datagram and handshake costs: BM_SealDatagram and
BM_OpenDatagram at 64 and 1,200 B (ns each), BM_OpenToken, and BM_SecureConnectFlood (ns per
token-carrying CONNECT at a server whose policy is required: token, nonce table, half-open
entry, key derivations, sealed VERIFY_CONNECT), given as token handshakes/s per core; and
BM_RelayFanoutSecure (tern-relay's and tern-loadgen's protocol work per copy with no network
between them, plain and with each cipher, the client lending payloads as tern-loadgen does):
CPU ns per copy of both sides together, as a share of plain's rate, and each side's own ns per
copy (wall clock, so only on a quiet machine). CPU time, medians of 3 repetitions.

--quick (the CI check, suite perf): 200 clients at 20 Hz in each mode, on sockets (and memif
when run as root with the DPDK driver built), and tern-micro briefly. Asserts correctness
only, never time: every copy owed arrived exactly once, in order, to the right room, and
every client connected (with a token, to a relay that requires one). Results:
perf/results/secure_compare.json.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from runtime_bench import free_port, parse_kv  # noqa: E402

START_HZ = {"socket": 8, "memif": 15}
STEP_FACTOR = 1.25
MAX_STEPS = 20
TAG = os.getpid()
MEMIF_SOCK = f"/tmp/tern-secure-compare-{TAG}.sock"
KEY_FILE = f"/tmp/tern-secure-compare-{TAG}.key"
CONF_FILE = f"/tmp/tern-secure-compare-{TAG}.toml"
CHACHA_CONF_FILE = f"/tmp/tern-secure-compare-{TAG}-chacha.toml"
# plain; aes: encrypted as negotiated (AES-256-GCM where both ends have AES-NI, as here);
# chacha: encrypted with the relay's [security] aes = false, ChaCha20-Poly1305.
MODES = ["plain", "aes", "chacha"]
MICRO = ["BM_SealDatagram/64", "BM_SealDatagram/1200", "BM_OpenDatagram/64",
         "BM_OpenDatagram/1200", "BM_SealDatagramAes/64", "BM_SealDatagramAes/1200",
         "BM_OpenDatagramAes/64", "BM_OpenDatagramAes/1200", "BM_OpenToken",
         "BM_SecureConnectFlood"]
# The relay's protocol work per copy without a network (bench_core.cpp, FanoutRig): 1,000
# lending clients in rooms of 8, plain, AES-256-GCM, ChaCha20-Poly1305. CPU time per tick
# (7,000 copies, both cores' work) and each side's ns per copy.
FANOUT = ["BM_RelayFanoutSecure/1000/8/0/0", "BM_RelayFanoutSecure/1000/8/0/1",
          "BM_RelayFanoutSecure/1000/8/0/2"]
FANOUT_COPIES = 7000


def write_key():
    with open(KEY_FILE, "w") as k:
        k.write(f"id 1\nkey {os.urandom(32).hex()}\n")
    os.chmod(KEY_FILE, 0o600)
    for path, extra in ((CONF_FILE, ""), (CHACHA_CONF_FILE, "aes = false\n")):
        with open(path, "w") as c:
            c.write(f'[security]\npolicy = "required"\nkey_file = "{KEY_FILE}"\n{extra}')


def start_relay(build, driver, mode):
    """tern-relay on CPU 0; returns the process, the loadgen's target and the loadgen flags
    that reach it."""
    port = free_port()
    relay = os.path.join(build, "apps/relay/tern-relay")
    secure = mode != "plain"
    cmd = [relay] + (["--config", CHACHA_CONF_FILE if mode == "chacha" else CONF_FILE]
                     if secure else [])
    if driver == "memif":
        if os.path.exists(MEMIF_SOCK):
            os.unlink(MEMIF_SOCK)
        cmd += ["--listen", f"0.0.0.0:{port}", "--driver", "dpdk", "--dpdk-port",
                f"net_memif0,role=server,socket={MEMIF_SOCK}", "--dpdk-ip", "10.216.0.1/24",
                "--dpdk-mbufs", "16383", "--shards", "1", "--idle", "busy", "--pin", "off"]
        target = f"10.216.0.1:{port}"
        client = ["--driver", "dpdk", "--dpdk-port",
                  f"net_memif0,role=client,socket={MEMIF_SOCK}", "--dpdk-ip", "10.216.0.2/24",
                  "--dpdk-mbufs", "16383", "--idle", "busy", "--timeout-ms", "15000"]
    else:
        target = f"127.0.0.1:{port}"
        cmd += ["--listen", target, "--shards", "1", "--pin", "off", "--driver", "socket"]
        client = ["--sources", "127.0.0.0/29"]
    if secure:
        client += ["--token-key", KEY_FILE]
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    for line in p.stdout:  # EAL may speak first; "relaying ..." once it serves
        if line.startswith("relaying"):
            break
    else:
        p.wait()
        raise RuntimeError(f"tern-relay ({driver}) did not start (exit {p.returncode})")
    return p, target, client


def stop_relay(p):
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def step(build, target, client_args, clients, rate, seconds):
    """One tern-loadgen run on CPU 1 (new connections): its summary line's fields."""
    cmd = ["taskset", "-c", "1", os.path.join(build, "apps/loadgen/tern-loadgen"), "--target",
           target, "--quiet", "--clients", str(clients), "--room-size", "8", "--rate",
           f"{rate:g}", "--size", "64", "--duration", f"{seconds:g}", "--warmup", "1",
           "--delivery", "reliable", "--max-queued", "4096"] + client_args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 4 + 90)
    line = next((l for l in r.stdout.splitlines() if l.startswith("loadgen ")), "")
    f = parse_kv(line)
    expected = float(f.get("expected", 0))
    return {"rate": rate, "goodput": float(f.get("delivered_per_s", 0)),
            "loss": float(f.get("lost", 0)) / expected if expected > 0 else None,
            "p99_us": f.get("p99"),
            "fields": f, "exit": r.returncode, "ok": bool(line) and r.returncode == 0,
            "stderr": r.stderr.strip()[-300:]}


def rates(start, factor=STEP_FACTOR):
    """The sweep's per-client rates: whole Hz (tern-loadgen's --rate), rising by `factor`."""
    out = []
    for k in range(MAX_STEPS):
        out.append(max(round(start * factor ** k), out[-1] + 1 if out else 1))
    return out


def sweep(a, driver, mode, grid):
    """Capacity of one configuration on a fresh relay: the best goodput of a step that lost
    at most 1% with its p99 within --capacity-p99-ms, sweeping up the grid until a step does
    not, or goodput stops rising by 3%."""
    relay, target, client = start_relay(a.build, driver, mode)
    name = f"{driver}-{mode}"
    best, best_rate, steps = 0.0, None, []
    try:
        for rate in grid:
            # A step past the bounds is run once more before the sweep ends: on a shared
            # machine one descheduled second can put a single step's p99 past them.
            for attempt in range(2):
                row = step(a.build, target, client, a.clients, rate, a.step_seconds)
                steps.append(row)
                loss = row["loss"]
                p99 = row["p99_us"]
                within = (row["ok"] and loss is not None and loss <= 0.01
                          and isinstance(p99, (int, float)) and p99 <= a.capacity_p99_ms * 1000)
                print(f"  {name:16s} rate={rate:5d} Hz goodput={row['goodput']:11.0f}/s "
                      f"loss={'-' if loss is None else f'{loss:.4f}'} p99={p99} us"
                      f"{'' if within else ' (past the bounds)'}", flush=True)
                if within:
                    break
            if not within:
                break
            rising = row["goodput"] >= best * 1.03
            if row["goodput"] > best:
                best, best_rate = row["goodput"], rate
            if not rising:
                break
    finally:
        stop_relay(relay)
    return {"capacity": best, "rate": best_rate, "steps": [
        {k: v for k, v in s.items() if k != "fields"} for s in steps]}


def exact(row, clients):
    """Exact accounting of one loadgen run: what failed, or an empty list."""
    f = row["fields"]
    bad = [f"loadgen exit {row['exit']} {row['stderr']}"] if not row["ok"] else []
    if f.get("clients") != clients:
        bad.append(f"clients={f.get('clients')} (of {clients})")
    for k in ["lost", "duplicates", "out_of_order", "misrouted", "mismatched", "refused"]:
        if f.get(k) != 0:
            bad.append(f"{k}={f.get(k)}")
    if not f.get("expected") or f.get("delivered") != f.get("expected"):
        bad.append(f"delivered {f.get('delivered')} != expected {f.get('expected')}")
    return bad


def micro(build, quick):
    """tern-micro's secure benchmarks: {name: ns per iteration} (medians of 3 repetitions)."""
    exe = os.path.join(build, "perf/micro/tern-micro")
    if not os.path.exists(exe):
        return None, "tern-micro not built (Google Benchmark missing)"
    flt = "^(" + "|".join(MICRO + FANOUT) + ")$"
    args = [exe, f"--benchmark_filter={flt}", "--benchmark_format=json"]
    args += (["--benchmark_min_time=0.01"] if quick else
             ["--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true",
              "--benchmark_min_time=0.5"])
    r = subprocess.run(["taskset", "-c", "0"] + args, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        return None, f"tern-micro exit {r.returncode}: {r.stderr.strip()[-300:]}"
    out = {}
    skipped = set()
    for b in json.loads(r.stdout)["benchmarks"]:
        name = b.get("run_name", b["name"])
        if b.get("error_occurred"):
            if "no AES-NI" in str(b.get("error_message")):
                skipped.add(name)  # this CPU cannot, so no session would use it
                continue
            return None, f"{b['name']}: {b.get('error_message')}"
        if quick or b.get("aggregate_name") == "median":
            # CPU time: on a shared machine wall time also counts the time others ran.
            unit = {"ns": 1, "us": 1e3, "ms": 1e6}[b.get("time_unit", "ns")]
            out[name] = b["cpu_time"] * unit
            if name in FANOUT:
                out[name] /= FANOUT_COPIES
                for side in ("server", "client"):
                    out[f"{name} {side}"] = b.get(f"{side}_ns_per_copy")
    missing = [m for m in MICRO + FANOUT if m not in out and m not in skipped]
    return out, (f"missing: {missing} (built without libsodium?)" if missing else "")


def quick(a, drivers):
    failures = []
    write_key()
    for driver in drivers:
        for mode in MODES:
            relay, target, client = start_relay(a.build, driver, mode)
            name = f"{driver}-{mode}"
            try:
                row = step(a.build, target, client, 200, 20, 2)
            finally:
                stop_relay(relay)
            bad = exact(row, 200)
            f = row["fields"]
            print(f"{name}: clients={f.get('clients')} delivered={f.get('delivered')} "
                  f"expected={f.get('expected')} {'OK' if not bad else 'FAIL ' + ', '.join(bad)}",
                  flush=True)
            failures += [f"{name}: {b}" for b in bad]
    figures, why = micro(a.build, True)
    if figures is None and "not built" in why:
        print(f"tern-micro: {why}", flush=True)
    elif figures is None or why:
        failures.append(f"tern-micro: {why}")
    else:
        print("tern-micro: " + " ".join(f"{k}={v:.0f}ns" for k, v in figures.items()
                                        if isinstance(v, (int, float))))
    return failures


def main():
    # SIGTERM ends the run through the finally clauses: relays stopped, files removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--drivers", default="socket,memif")
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--step-seconds", type=float, default=2)
    ap.add_argument("--start", default="", help="DRIVER=HZ,...: the first rate per driver")
    ap.add_argument("--step-factor", type=float, default=STEP_FACTOR,
                    help="each step's rate over the last's (default 1.25: the share's resolution; "
                    "1.05 with a --start near capacity for a finer one)")
    ap.add_argument("--capacity-p99-ms", type=float, default=100,
                    help="a step whose p99 passes this is past capacity")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "secure_compare.json"))
    a = ap.parse_args()
    drivers = [d for d in a.drivers.split(",") if d]
    for d in drivers:
        if d not in START_HZ:
            ap.error(f"--drivers: unknown driver {d!r} (socket, memif)")
    base = dict(START_HZ)
    for item in filter(None, a.start.split(",")):
        d, _, hz = item.partition("=")
        if d not in START_HZ or not hz.replace(".", "", 1).isdigit():
            ap.error("--start: expected DRIVER=HZ")
        base[d] = float(hz)
    try:
        if a.quick:
            if os.geteuid() != 0 and "memif" in drivers:
                print("memif skipped: needs root", flush=True)
                drivers = [d for d in drivers if d != "memif"]
            failures = quick(a, drivers)
            for f in failures:
                print("FAIL:", f, flush=True)
            print("all checks passed" if not failures else f"{len(failures)} check(s) failed")
            return 1 if failures else 0

        write_key()
        load = os.getloadavg()
        print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
        runs = {f"{d}-{m}": [] for d in drivers for m in MODES}
        for run in range(a.runs):
            for driver in drivers:
                grid = rates(base[driver], a.step_factor)
                order = MODES if run % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    name = f"{driver}-{mode}"
                    r = sweep(a, driver, mode, grid)
                    print(f"run {run + 1} {name}: capacity {r['capacity']:.0f} copies/s "
                          f"at {r['rate']} Hz", flush=True)
                    runs[name].append(r)
        figures, why = micro(a.build, False)
        load_end = os.getloadavg()
    finally:
        for path in (KEY_FILE, CONF_FILE, CHACHA_CONF_FILE, MEMIF_SOCK):
            if os.path.exists(path):
                os.unlink(path)

    print(f"\nload average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    print("configuration      capacity (median copies/s)  runs                       share of plain")
    summary = {}
    for driver in drivers:
        plain = statistics.median(r["capacity"] for r in runs[f"{driver}-plain"])
        for mode in MODES:
            name = f"{driver}-{mode}"
            med = statistics.median(r["capacity"] for r in runs[name])
            caps = [round(r["capacity"]) for r in runs[name]]
            share = med / plain if plain else None
            # Each run's own pair too: the modes of one run ran minutes apart, not hours.
            pairs = [r["capacity"] / p["capacity"]
                     for r, p in zip(runs[name], runs[f"{driver}-plain"]) if p["capacity"]]
            per_run = statistics.median(pairs) if pairs else None
            text = (f"{share * 100:.1f}% (median of each run's share: {per_run * 100:.1f}%)"
                    if mode != "plain" and share is not None and per_run is not None else "")
            print(f"{name:18s} {med:12.0f}                {str(caps):26s} {text}")
            summary[name] = {"capacity": med, "runs": caps, "share": share,
                             "share_per_run": per_run}
    if figures:
        print("\ntern-micro (median of 3, CPU ns):")
        for k in MICRO:
            if k in figures:
                print(f"  {k:24s} {figures[k]:9.1f} ns")
        if FANOUT[0] in figures:
            print("  relay fan-out without a network (CPU ns per copy, both sides; each side's "
                  "ns per copy, wall clock):")
            for k in FANOUT:
                if k not in figures:
                    continue
                share = figures[FANOUT[0]] / figures[k]
                print(f"  {k:34s} {figures[k]:7.1f} ns ({share * 100:.0f}% of plain's rate)"
                      f"  server {figures[k + ' server'] or 0:.1f}"
                      f"  client {figures[k + ' client'] or 0:.1f}")
        if "BM_SecureConnectFlood" in figures:
            print(f"  token handshakes/s per core (server, first step): "
                  f"{1e9 / figures['BM_SecureConnectFlood']:.0f}")
    elif why:
        print(f"\ntern-micro: {why}")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"clients": a.clients, "step_seconds": a.step_seconds, "start_hz": base,
                   "load_start": load, "load_end": load_end, "summary": summary, "runs": runs,
                   "micro_ns": figures}, f, indent=1)
    print(f"\nresults: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
