#!/usr/bin/env python3
"""tern-relay as a process: bad command lines and configurations are refused with a message
naming the file, key and reason; /metrics answers in Prometheus text; SIGTERM drains real
libenet clients (enet-echo-check would echo; here the drain client is enet-relay-drain, a
small libenet program that connects N peers and reports how its connections ended).

usage: relay_process_test.py RELAY_BINARY DRAIN_CLIENT"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

RELAY, DRAIN = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(args, timeout=20):
    return subprocess.run([RELAY] + args, capture_output=True, text=True, timeout=timeout)


# ---- command line and configuration errors --------------------------------------------
r = run(["--bogus"])
check(r.returncode == 2 and "usage:" in r.stderr, "unknown flag: exit 2 with usage")
r = run(["--shards", "zero"])
check(r.returncode == 2 and "--shards" in r.stderr, "bad --shards value: exit 2 naming the flag")
r = run(["--selective-acks", "maybe"])
check(r.returncode == 2 and "--selective-acks: on or off" in r.stderr,
      "bad --selective-acks value: exit 2 naming the flag")
r = run(["--congestion-window", "1"])
check(r.returncode == 2 and "--congestion-window: on or off" in r.stderr,
      "bad --congestion-window value: exit 2 naming the flag")
r = run(["--throttle-window", "yes"])
check(r.returncode == 2 and "--throttle-window: on or off" in r.stderr,
      "bad --throttle-window value: exit 2 naming the flag")
r = run(["--ack-delay-ms", "1001"])
check(r.returncode == 2 and "--ack-delay-ms: must be 0..1000" in r.stderr,
      "--ack-delay-ms out of range: exit 2 naming the flag")
r = run(["--min-rto-ms", "1001"])
check(r.returncode == 2 and "--min-rto-ms: must be 0..1000" in r.stderr,
      "--min-rto-ms out of range: exit 2 naming the flag")
r = run(["--slow-member-ms", "1"])
check(r.returncode == 2 and "--slow-member-ms: must be 10..60000" in r.stderr,
      "--slow-member-ms out of range: exit 2 naming the flag")
r = run(["--receive-buffer", "4096"])
check(r.returncode == 2 and "--receive-buffer: must be 65536..2^30 bytes" in r.stderr,
      "--receive-buffer out of range: exit 2 naming the flag")
r = run(["--help"])
check(r.returncode == 0 and "usage:" in r.stdout, "--help: usage on stdout, exit 0")


def socket_receive_buffer(addr):
    """The kernel's receive buffer (ss's skmem rb) of the UDP socket bound to addr."""
    out = subprocess.run(["ss", "-uamnH", "src", addr], capture_output=True, text=True,
                         timeout=10).stdout
    for word in out.replace("(", " ").replace(")", " ").replace(",", " ").split():
        if word.startswith("rb") and word[2:].isdigit():
            return int(word[2:])
    return None


# The receive buffer a relay asks for is the one its socket gets (as root, past rmem_max).
if os.geteuid() != 0:
    print("skip receive buffer size: not root, the kernel clamps it to net.core.rmem_max "
          "(CI runs as root)")
else:
    relay = subprocess.Popen([RELAY, "--listen", "127.0.0.1:0", "--shards", "1", "--pin", "off",
                              "--receive-buffer", str(48 << 20)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        addr = relay.stdout.readline().split()[1]
        rb = socket_receive_buffer(addr)
        # The kernel doubles the request for its bookkeeping.
        check(rb is not None and rb >= 48 << 20, f"--receive-buffer 48 MiB: socket rb={rb}")
    finally:
        relay.terminate()
        relay.communicate(timeout=20)

with tempfile.TemporaryDirectory() as d:
    def bad_config(text, must_contain, what):
        path = os.path.join(d, "relay.toml")
        with open(path, "w") as f:
            f.write(text)
        r = run(["--config", path])
        ok = r.returncode != 0 and all(s in r.stderr for s in [path] + must_contain)
        check(ok, f"{what}: exit {r.returncode}, stderr {r.stderr.strip()!r}")

    bad_config("[limits]\nroom_size = 1\n", ["limits.room_size", "between 2 and"], "room_size out of range")
    bad_config("[relay]\ndriver = \"dpdk-please\"\n", ["relay.driver"], "unknown driver")
    bad_config("[limits]\npeers = \"many\"\n", ["limits.peers", "integer"], "wrong type")
    bad_config("[relay]\nlisten = \"nowhere\"\n", ["relay.listen", "HOST:PORT"], "bad address")
    bad_config("[limits]\nroom_sise = 8\n", ["limits.room_sise", "unknown key"], "misspelt key")
    bad_config("[rooms]\nbroadcast = [\"9-3\"]\n", ["rooms.broadcast[0]"], "backwards room range")
    bad_config("[relay\nlisten = 1\n", [":1:"], "TOML syntax error with line")
    bad_config("[protocol]\nack_delay_ms = 5000\n", ["protocol.ack_delay_ms", "between 0 and 1000"],
               "ack_delay_ms out of range")
    bad_config("[overload]\nslow_member_ms = 5\n", ["overload.slow_member_ms", "between 10 and"],
               "slow_member_ms out of range")
    bad_config("[overload]\nhold = 5\n", ["overload.hold", "unknown key"], "misspelt overload key")
    bad_config("[relay]\nreceive_buffer = 100\n", ["relay.receive_buffer", "between 65536 and"],
               "receive_buffer out of range")
    bad_config("[protocol]\nchecksum = 1\n", ["protocol.checksum", "true or false"],
               "checksum not a boolean")
    bad_config("[protocol]\nthrottle_window = 0\n", ["protocol.throttle_window", "true or false"],
               "throttle_window not a boolean")
    bad_config("[protocol]\nfast_retransmit = \"yes\"\n", ["protocol.fast_retransmit", "true or false"],
               "fast_retransmit not a boolean")
    bad_config("[protocol]\nselective_ack = false\n", ["protocol.selective_ack", "unknown key"],
               "misspelt protocol key")
    bad_config("[protocol]\nchannel_options = [\"1=no-such-switch\"]\n",
               ["protocol.channel_options[0]", "unknown switch 'no-such-switch'"],
               "unknown per-channel switch")
    bad_config("[protocol]\nchannel_options = [\"300=low\"]\n",
               ["protocol.channel_options[0]", "0..254"], "channel out of range")
    bad_config("[kcp]\nroom_rule = \"first\"\n", ["kcp.room_rule", "\"join\" or \"conv\""],
               "unknown KCP room rule")
    bad_config("[kcp]\nport = 70000\n", ["kcp.port", "between 0 and 65535"], "KCP port out of range")
    bad_config("[kcp]\nwindow = 64\n", ["kcp.window", "unknown key"], "misspelt kcp key")
    bad_config("[kcp]\nmtu = 9000\n", ["kcp.mtu", "between 100 and 1500"], "KCP mtu out of range")
    bad_config("[protocol]\npath_mtu = 1\n", ["protocol.path_mtu", "true or false"],
               "path_mtu not a boolean")
    bad_config("[discovery]\nnmae = \"arena\"\n", ["discovery.nmae", "unknown key"],
               "misspelt discovery key")
    bad_config("[discovery]\nname = \"two\\nlines\"\n", ["discovery.name", "one line"],
               "discovery name of two lines")
    bad_config("[discovery]\nrate_per_address = -1\n", ["discovery.rate_per_address"],
               "negative discovery rate")
    rules = os.path.join(d, "bad.rules")
    with open(rules, "w") as f:
        f.write("# a comment\n5 message drop /(never closed/\n")
    r = run(["--listen", "127.0.0.1:0", "--rules", rules])
    check(r.returncode != 0 and "rule 5 (line 2)" in r.stderr,
          f"uncompilable rule named by id and line: {r.stderr.strip()!r}")
    with open(rules, "w") as f:
        f.write("5 message obliterate /x/\n")
    r = run(["--listen", "127.0.0.1:0", "--rules", rules])
    check(r.returncode != 0 and rules + ":1:" in r.stderr,
          f"bad rule syntax named by file and line: {r.stderr.strip()!r}")
    r = run(["--config", os.path.join(d, "missing.toml")])
    check(r.returncode != 0 and "missing.toml" in r.stderr, "missing config file named")

    # ---- the shipped sample parses (run with a port that cannot bind, so it stops) -----
    sample = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                          "config", "relay.toml")
    r = run(["--config", sample, "--listen", "127.0.0.1:0", "--metrics", "256.0.0.1:1"])
    check(r.returncode == 2 and "--metrics" in r.stderr and sample not in r.stderr,
          f"config/relay.toml loads cleanly (only the bad flag is refused): {r.stderr.strip()[:120]!r}")

    # ---- a good config file, /metrics, SIGTERM drain --------------------------------
    path = os.path.join(d, "good.toml")
    with open(path, "w") as f:
        f.write("[relay]\nlisten = \"127.0.0.1:0\"\nshards = 2\npin = false\n"
                "[metrics]\nlisten = \"127.0.0.1:0\"\n[shutdown]\ndrain_timeout_ms = 3000\n"
                f"[filter]\nrules = \"{os.path.abspath(os.path.join(os.path.dirname(sample), 'filter.rules'))}\"\n")
    relay = subprocess.Popen([RELAY, "--config", path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = relay.stdout.readline().split()
        check(len(line) >= 2 and line[0] == "relaying", f"ready line: {line}")
        addr = line[1]
        metrics = next((w.split("=", 1)[1] for w in line if w.startswith("metrics=")), None)
        check(metrics is not None, "metrics address announced")
        drain = subprocess.Popen([DRAIN, addr, "6", "42"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        ready = drain.stdout.readline().strip()
        check(ready == "connected 6", f"drain client connected: {ready!r}")
        # A shard publishes its counters every 16 loop iterations and before it sleeps, so a
        # shard descheduled on a loaded machine shows its connections a little late: poll.
        deadline = time.monotonic() + 5
        while True:
            body = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5).read().decode()
            peers = sum(int(l.split()[-1]) for l in body.splitlines()
                        if l.startswith("tern_relay_peers{"))
            if peers == 6 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        check(peers == 6, f"/metrics tern_relay_peers sums to 6 within 5 s (got {peers})")
        check("tern_relay_loop_seconds_bucket{shard=\"1\",le=\"+Inf\"}" in body,
              "/metrics has the per-shard loop histogram")
        check("tern_relay_drops_total{reason=\"room_full\"}" in body, "/metrics drops by reason")
        check("tern_relay_messages_relayed_total{shard=\"0\"}" in body,
              "/metrics messages relayed per shard")
        try:
            urllib.request.urlopen(f"http://{metrics}/other", timeout=5)
            check(False, "unknown path answers 404")
        except urllib.error.HTTPError as e:
            check(e.code == 404, "unknown path answers 404")
        relay.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        started = time.monotonic()
        relay.send_signal(signal.SIGTERM)
        out, err = relay.communicate(timeout=20)
        took = time.monotonic() - started
        check(relay.returncode == 0, f"SIGTERM: exit 0 (got {relay.returncode}; {err.strip()})")
        check("rules reloaded" in err, f"SIGHUP reloaded the sample rules: {err.strip()!r}")
        check("drained=yes" in out and "peers_at_stop=6" in out, f"summary: {out.strip()}")
        check(took < 3.0, f"drain finished in {took:.2f} s, inside the timeout")
        dout, derr = drain.communicate(timeout=20)
        check(drain.returncode == 0 and "remote_disconnects=6" in dout,
              f"every client saw a graceful disconnect: {dout.strip()} {derr.strip()}")
    finally:
        for p in (relay,):
            if p.poll() is None:
                p.kill()

print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
