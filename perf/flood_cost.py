#!/usr/bin/env python3
"""What a CONNECT flood costs tern-relay per datagram, per driver (issue 29, item 6): the flood
alone at a fixed rate against one shard on the socket, io_uring and DPDK memif drivers.

    perf/flood_cost.py [--build build-release] [--runs 3] [--drivers socket,uring,memif]
                       [--rate 100000] [--seconds 5] [--out FILE]

Per driver and run: a fresh tern-relay (1 shard, pinned to CPU 0, sleeping when idle: memif
too, at most 50 µs at a time) and tern-loadgen on CPU 1 with one idle client and
--flood-rate forged libenet CONNECTs for --seconds (spoofed sources: 127.99.0.0/16 through a
raw socket, or 10.99.0.0/16 as frames of its own on the memif pair; never answered). The
relay's /metrics are read just before the flood and just after it; over that window:

- datagrams handled: tern_relay_datagrams_in_total (the flood and the client's few pings);
- ns per flood datagram: the relay process's CPU time over the flood (the threads'
  /proc schedstat run time: system calls included) less its idle CPU over as long (measured in the LEAD_S
  seconds before: a memif relay waking every 50 µs to poll costs some), per datagram handled.
  Beside it the shard's busy time per datagram (tern_relay_busy_seconds_total: its poll
  iterations less those that found nothing), which counts any time the relay's thread was
  preempted inside an iteration: on a shared machine read the CPU column;
- datagrams per second per core: 1e9 / (ns per datagram), by either measure: what one core
  could take at full load;
- the rate the relay handled, its answers per datagram (VERIFY_CONNECTs, datagrams_out), and
  what the kernel dropped before the relay read it (rx_kernel_dropped, kernel drivers).

Medians of the runs, the drivers alternating within each run. Needs root (the raw socket, the
memif port); a driver whose relay does not come up (no DPDK, no io_uring: the relay's line
names the driver it got) is reported as such. Every wait is bounded by the load generator's
duration plus 60 s.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from connect_flood import (MEMIF_RELAY_IP, MEMIF_SOCK, loadgen_client_args,  # noqa: E402
                           memif_relay_config, scrape, start_on_cpu0, stop)
from runtime_bench import free_port, parse_kv  # noqa: E402

LEAD_S = 2  # measured seconds before the flood starts: the idle baseline


def proc_cpu_s(pid):
    """CPU time of the process's threads (schedstat: nanoseconds, where /proc/PID/stat counts
    10 ms ticks), in seconds."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that just ended
    return total / 1e9


def start_relay(build, driver):
    port = free_port()
    metrics = f"127.0.0.1:{free_port()}"
    relay = os.path.join(build, "apps/relay/tern-relay")
    if driver == "memif":
        conf = memif_relay_config()
        target = f"{MEMIF_RELAY_IP}:{port}"
        # Sleeping when idle (50 µs at most), so its CPU time says what the flood cost.
        cmd = [relay, "--listen", f"0.0.0.0:{port}", "--driver", "dpdk", "--dpdk-config", conf,
               "--idle", "wait"]
    else:
        target = f"127.0.0.1:{port}"
        cmd = [relay, "--listen", target, "--driver", driver]
    cmd += ["--shards", "1", "--pin", "off", "--metrics", metrics]
    p, line = start_on_cpu0(cmd, f"tern-relay on {driver}")
    threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
    return p, target, metrics, parse_kv(line).get("driver")


def one_run(build, driver, a):
    relay, target, metrics, got = start_relay(build, driver)
    lg_driver = "socket" if driver == "memif" else driver
    duration = LEAD_S + a.seconds + 1
    cmd = ["taskset", "-c", "1", os.path.join(build, "apps/loadgen/tern-loadgen"), "--target",
           target, "--clients", "1", "--rate", "0", "--warmup", "0", "--duration",
           str(duration), "--quiet", "--timeout-ms", "15000", "--flood-rate", str(a.rate),
           "--flood-at", str(LEAD_S), "--flood-for", str(a.seconds)]
    cmd += loadgen_client_args("tern-memif") if driver == "memif" else ["--driver", lg_driver]
    lg = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)
    lines, connected_at = [], []

    def read_lg():
        for line in lg.stdout:
            if line.startswith("connected ") and not connected_at:
                connected_at.append(time.monotonic())
            lines.append(line)
    reader = threading.Thread(target=read_lg, daemon=True)
    reader.start()
    try:
        limit = time.monotonic() + 30
        while not connected_at and time.monotonic() < limit and lg.poll() is None:
            time.sleep(0.01)
        if not connected_at:
            raise RuntimeError(f"{driver}: the client did not connect: " + "".join(lines[-5:]))
        flood_at = connected_at[0] + LEAD_S
        time.sleep(max(0.0, connected_at[0] + 0.3 - time.monotonic()))
        cpu_idle0, t_idle0 = proc_cpu_s(relay.pid), time.monotonic()
        time.sleep(max(0.0, flood_at - 0.2 - time.monotonic()))
        cpu0, t0, before = proc_cpu_s(relay.pid), time.monotonic(), scrape(metrics)
        time.sleep(max(0.0, flood_at + a.seconds + 0.3 - time.monotonic()))
        cpu1, t1, after = proc_cpu_s(relay.pid), time.monotonic(), scrape(metrics)
        lg.wait(timeout=duration + 60)
        reader.join(timeout=10)
    finally:
        if lg.poll() is None:
            stop(lg)
        stop(relay)
        for path in (MEMIF_SOCK, MEMIF_SOCK + ".toml"):
            if os.path.exists(path):
                os.unlink(path)
    res = parse_kv(next((l for l in lines if l.startswith("loadgen ")), ""))

    def d(key):
        return after.get(key, 0) - before.get(key, 0)
    dgrams = d("tern_relay_datagrams_in_total")
    busy = d("tern_relay_busy_seconds_total")
    # The relay's CPU over the flood's window less what it spends idle over as long (waking
    # to poll, timers): the flood's own cost.
    idle_rate = (cpu0 - cpu_idle0) / (t0 - t_idle0)
    cpu = (cpu1 - cpu0) - idle_rate * (t1 - t0)
    r = {"driver": driver, "relay_driver": got, "flood_sent": res.get("flood_sent"),
         "flood_rate": res.get("flood_rate"), "datagrams": int(dgrams),
         "handled_per_s": round(dgrams / a.seconds),
         "answers_per_datagram": round(d("tern_relay_datagrams_out_total") / max(1, dgrams), 3),
         "kernel_dropped": int(d("tern_relay_rx_kernel_dropped_total")),
         "busy_s": round(busy, 4),
         "idle_cpu": round(idle_rate, 3),
         "busy_ns_per_datagram": round(busy * 1e9 / dgrams, 1) if dgrams else None,
         "cpu_ns_per_datagram": round(cpu * 1e9 / dgrams, 1) if dgrams else None}
    r["per_core_per_s"] = (round(1e9 / r["cpu_ns_per_datagram"])
                           if r["cpu_ns_per_datagram"] and r["cpu_ns_per_datagram"] > 0 else None)
    r["per_core_per_s_busy"] = (round(1e9 / r["busy_ns_per_datagram"])
                                if r["busy_ns_per_datagram"] else None)
    return r


KEYS = ["flood_rate", "handled_per_s", "idle_cpu", "cpu_ns_per_datagram", "busy_ns_per_datagram",
        "per_core_per_s", "per_core_per_s_busy", "answers_per_datagram", "kernel_dropped"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--drivers", default="socket,uring,memif")
    ap.add_argument("--rate", type=int, default=100000)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "flood_cost.json"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: the forged flood needs a raw socket or a memif port (root)")
        return 77
    drivers = a.drivers.split(",")
    runs = {n: [] for n in drivers}
    for i in range(a.runs):
        for n in drivers:
            r = one_run(a.build, n, a)
            print(f"run {i + 1} " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
            runs[n].append(r)
    summary = {}
    for n, rs in runs.items():
        summary[n] = {k: (statistics.median([r[k] for r in rs if r.get(k) is not None])
                          if any(r.get(k) is not None for r in rs) else None) for k in KEYS}
        summary[n]["relay_driver"] = rs[0]["relay_driver"]
    print(f"\nflood cost: {a.rate} forged CONNECTs/s for {a.seconds} s, flood alone, tern-relay "
          f"1 shard on CPU 0; medians of {a.runs} run(s)")
    cols = [("driver", 8), ("relay got", 10), ("flood/s", 8), ("handled/s", 10),
            ("idle cpu", 9), ("cpu ns/dgram", 13), ("busy ns/dgram", 14), ("/s/core cpu", 12),
            ("/s/core busy", 13), ("answers/dgram", 14), ("kernel drops", 13)]
    print(" ".join(h.rjust(w) for h, w in cols))
    for n, s in summary.items():
        vals = [n, s["relay_driver"], s["flood_rate"], s["handled_per_s"], s["idle_cpu"],
                s["cpu_ns_per_datagram"], s["busy_ns_per_datagram"], s["per_core_per_s"],
                s["per_core_per_s_busy"],
                s["answers_per_datagram"], s["kernel_dropped"]]
        print(" ".join((f"{v:.0f}" if isinstance(v, float) and abs(v) >= 10 else
                        f"{v:.3f}" if isinstance(v, float) else "-" if v is None else str(v))
                       .rjust(w) for v, (_, w) in zip(vals, cols)))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"args": vars(a), "runs": runs, "summary": summary}, f, indent=1)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
