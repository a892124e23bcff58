#!/usr/bin/env python3
"""tern-relay and tern-loadgen on DPDK net_memif in two processes (suite 'dpdk').

  run_relay_memif_test.py --tern-relay PATH --tern-loadgen PATH [--secure]

The relay runs `--driver dpdk` on net_memif in the server role, configured from the [dpdk]
section of its TOML file (relay.driver = "dpdk"); tern-loadgen runs `--driver dpdk` on the
same memif socket in the client role, configured from the --dpdk-* flags, one shard. 64
clients in rooms of 8, reliable, 50 Hz, 2 s: every copy owed must arrive exactly once, in
order, to the right room (lost=0 duplicates=0 out_of_order=0 misrouted=0, delivered ==
expected). Then the relay must drain on SIGTERM and exit 0 with a summary that agrees.

Also: a bad [dpdk] key in the relay's file is refused with file, key and reason (exit 2).

--secure: the same run with secure sessions (engine/protocol/WIRE.md, "Secure sessions"): the
relay's [security] policy is "required" with a fresh key file and no public_address (on DPDK
the tokens must list the port's address, dpdk.ip, which the relay takes by default), and
every loadgen client mints a connect token under that key (--token-key). On top of the exact
accounting: every client connected with a token (tern_relay_tokens_accepted_total == 64, none
refused), datagrams were sealed and opened, and none was refused as unauthentic or replayed
(tern_relay_seal_refused_total == 0).

Sets up and tears down everything it uses (socket and config files in /tmp). Exit 77
(skipped) when not root.
"""

import argparse
import os
import re
import subprocess
import sys
import time
import urllib.request

from dpdk_test_support import STEP_TIMEOUT_S, Failures, fields, read, stop


def scrape(metrics_port):
    """The relay's /metrics as {name or name{shard="0"}: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as m:
        text = m.read().decode()
    return dict(re.findall(r'^(tern_relay_[a-z_]+(?:\{shard="0"\})?) (\S+)$', text, re.M))


def run(args):
    tag = f"{os.getpid() % 100000}{'s' if args.secure else ''}"
    key_file = f"/tmp/tern-relay-memif-{tag}.key"
    sock = f"/tmp/tern-relay-memif-{tag}.sock"
    conf = f"/tmp/tern-relay-memif-{tag}.toml"
    bad_conf = f"/tmp/tern-relay-memif-bad-{tag}.toml"
    logs = [f"/tmp/tern-relay-memif-{tag}.out", f"/tmp/tern-relay-memif-{tag}.err"]
    relay_ip, client_ip = "10.214.0.1", "10.214.0.2"
    port = 7000 + os.getpid() % 1000
    security = ""
    token_args = []
    if args.secure:
        with open(key_file, "w") as k:
            k.write(f"id 7\nkey {os.urandom(32).hex()}\n")
        os.chmod(key_file, 0o600)
        security = f'[security]\npolicy = "required"\nkey_file = "{key_file}"\n'
        token_args = ["--token-key", key_file]
    f = Failures()
    relay = None
    try:
        for path in [sock]:
            if os.path.exists(path):
                os.unlink(path)
        # Refused: an unknown key in [dpdk] names the file and the key, exit 2.
        with open(bad_conf, "w") as c:
            c.write('[relay]\ndriver = "dpdk"\nlisten = "0.0.0.0:7777"\n'
                    '[dpdk]\nport = "net_memif0,role=server"\nip = "10.214.0.1/24"\nmbuf = 4096\n')
        r = subprocess.run([args.tern_relay, "--config", bad_conf], capture_output=True, text=True,
                           timeout=STEP_TIMEOUT_S)
        f.check(r.returncode == 2 and f"{bad_conf}: dpdk.mbuf: unknown key" in r.stderr,
                f"bad [dpdk] key refused: exit {r.returncode}, {r.stderr.strip()!r}")

        with open(conf, "w") as c:
            c.write(f'[relay]\nlisten = "0.0.0.0:{port}"\ndriver = "dpdk"\nshards = 1\n'
                    f'[metrics]\nlisten = "127.0.0.1:{port + 1000}"\n[shutdown]\ndrain_timeout_ms = 5000\n'
                    f'[dpdk]\nport = "net_memif0,role=server,socket={sock}"\n'
                    f'ip = "{relay_ip}/24"\nhugepages = false\nmemory_mb = 512\nmbufs = 4096\n'
                    + security)
        out = open(logs[0], "w+")
        err = open(logs[1], "w+")
        cmd = [args.tern_relay, "--config", conf]
        print("relay:", " ".join(cmd), flush=True)
        relay = subprocess.Popen(cmd, stdout=out, stderr=err)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "relaying" not in read(out):
            if relay.poll() is not None:
                break
            time.sleep(0.05)
        ready = read(out)
        if "relaying" not in ready:
            stop(relay)
            raise RuntimeError(f"relay did not start: {read(err).strip()}")
        f.check(f"relaying {relay_ip}:{port}" in ready and "driver=dpdk" in ready,
                f"relay up on DPDK: {ready.strip()!r}")

        cmd = [args.tern_loadgen, "--target", f"{relay_ip}:{port}", "--driver", "dpdk",
               "--dpdk-port", f"net_memif0,role=client,socket={sock}",
               "--dpdk-ip", f"{client_ip}/24", "--dpdk-local-port", "40003",
               "--clients", "64", "--room-size", "8", "--delivery", "reliable", "--rate", "50",
               "--duration", "2", "--warmup", "0.5", "--quiet"] + token_args
        print("loadgen:", " ".join(cmd), flush=True)
        loadgen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # While the run lasts, the port's own counters and link (read every 100 ms) reach
        # /metrics through the shard counters: polled until they show the traffic, or the run
        # ends (the check below then says what they did show).
        def port_busy(m):
            return (m.get("tern_relay_port_link_up") == "1" and
                    int(m.get("tern_relay_port_rx_packets_total", "0")) > 1000 and
                    int(m.get("tern_relay_port_tx_packets_total", "0")) > 1000)
        during = scrape(port + 1000)
        while not port_busy(during) and loadgen.poll() is None:
            time.sleep(0.05)
            during = scrape(port + 1000)
        stdout, stderr = loadgen.communicate(timeout=STEP_TIMEOUT_S)
        r = subprocess.CompletedProcess(cmd, loadgen.returncode, stdout, stderr)
        port_rx = int(during.get("tern_relay_port_rx_packets_total", "0"))
        port_tx = int(during.get("tern_relay_port_tx_packets_total", "0"))
        f.check(during.get("tern_relay_port_link_up") == "1" and port_rx > 1000 and
                port_tx > 1000,
                f"/metrics during the run: link_up={during.get('tern_relay_port_link_up')} "
                f"port_rx_packets={port_rx} port_tx_packets={port_tx}")
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        v = fields(r.stdout, "loadgen")
        f.check(r.returncode == 0, f"loadgen exit {r.returncode}")
        f.check(v.get("clients") == "64" and v.get("rooms") == "8",
                f"loadgen ran 64 clients in 8 rooms: {v.get('clients')} / {v.get('rooms')}")
        f.check(all(v.get(k) == "0" for k in
                    ["lost", "duplicates", "out_of_order", "misrouted", "mismatched"]),
                "exact delivery: " + " ".join(f"{k}={v.get(k)}" for k in
                                              ["lost", "duplicates", "out_of_order", "misrouted",
                                               "mismatched"]))
        expected = int(v.get("expected", "0"))
        f.check(expected > 0 and v.get("delivered") == str(expected),
                f"delivered == expected: {v.get('delivered')} / {v.get('expected')}")
        # 64 senders x 50 Hz x 2 s = 6400 messages, 7 copies each (give or take pacing edges).
        f.check(abs(int(v.get("sent", "0")) - 6400) <= 64,
                f"sent ~6400 messages: {v.get('sent')}")
        if args.secure:
            m = scrape(port + 1000)
            got = {k: m.get(f'tern_relay_{k}_total{{shard="0"}}') for k in
                   ["tokens_accepted", "tokens_refused", "sealed_out", "opened_in",
                    "seal_refused"]}
            # Every message's datagram was opened and every copy's sealed (several ride in one
            # datagram, so the counts are at least the datagrams, not the copies).
            f.check(got["tokens_accepted"] == "64" and got["tokens_refused"] == "0" and
                    got["seal_refused"] == "0" and int(got["sealed_out"] or 0) > 1000 and
                    int(got["opened_in"] or 0) > 1000,
                    "secure: " + " ".join(f"{k}={v}" for k, v in got.items()))

        # With the loadgen gone the memif peer has disconnected: the link is reported down
        # (polled; the deadline only ends a wait for a link that never goes down).
        deadline = time.monotonic() + 15
        after = scrape(port + 1000)
        while after.get("tern_relay_port_link_up") != "0" and time.monotonic() < deadline:
            time.sleep(0.05)
            after = scrape(port + 1000)
        tx_dropped = after.get('tern_relay_tx_dropped_total{shard="0"}')
        f.check(after.get("tern_relay_port_link_up") == "0" and tx_dropped == "0",
                f"/metrics after the loadgen left: link_up={after.get('tern_relay_port_link_up')}"
                f" tx_dropped={tx_dropped}")

        stopped, rc = stop(relay)
        relay = None
        f.check(stopped and rc == 0, f"relay drained on SIGTERM and exited {rc}")
        s = fields(read(out).replace("relay stopped", "relay_stopped"), "relay_stopped")
        f.check(s.get("drained") == "yes" and s.get("connects") == "64" and
                s.get("disconnects") == "64" and s.get("send_failed") == "0" and
                s.get("cross_shard_full") == "0" and s.get("no_room") == "0",
                "relay summary: " + " ".join(f"{k}={s.get(k)}" for k in
                                             ["drained", "connects", "disconnects", "messages_in",
                                              "copies_out", "send_failed", "no_room"]))
        msgs = int(s.get("messages_in", "0"))
        f.check(msgs > 0 and s.get("copies_out") == str(msgs * 7),
                f"relay copies_out == 7 x messages_in: {s.get('copies_out')} / {msgs}")
        sys.stderr.write(read(err))
    finally:
        if relay is not None:
            stop(relay)
        for path in [sock, conf, bad_conf, key_file]:
            if os.path.exists(path):
                os.unlink(path)
    if not f.items:
        for path in logs:
            if os.path.exists(path):
                os.unlink(path)
    else:
        print(f"relay logs kept: {', '.join(logs)}", flush=True)
    return f.items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tern-relay", required=True)
    ap.add_argument("--tern-loadgen", required=True)
    ap.add_argument("--secure", action="store_true",
                    help="[security] policy required, loadgen clients with connect tokens")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: the dpdk suite needs root", flush=True)
        return 77
    try:
        failed = run(args)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}", flush=True)
        return 1
    if failed:
        print(f"{len(failed)} check(s) failed", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
