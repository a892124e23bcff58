#!/usr/bin/env python3
"""A short tern-loadgen run against tern-relay on two shards, with exact accounting: on
loopback no reliable copy may be lost, duplicated, reordered or misrouted, and every copy
owed must arrive. Clients come from 16 source addresses so the relay's shards both get
members and rooms span shards. The same with clients delaying their acks (fewer datagrams
into the relay), with the relay's protocol settings (checksums; ENet's retransmission
timing; the relay delaying its acks; selective acks off), then a broadcast-room run and a
delivery mix (routing and duplicates exact; the unreliable kinds may lose on a loaded
machine, so their loss is only reported), and KCP clients on the relay's KCP port.

usage: loadgen_accounting.py TERN_RELAY TERN_LOADGEN"""
import re
import signal
import subprocess
import sys
import time

RELAY, LOADGEN = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def fields(out):
    line = next((l for l in out.splitlines() if l.startswith("loadgen ")), "")
    return {k: v for k, v in re.findall(r"(\S+)=(\S+)", line)}, line


def start_relay(relay_args=()):
    """tern-relay on two shards on an ephemeral loopback port; its 'relaying ...' line read."""
    relay = subprocess.Popen([RELAY, "--listen", "127.0.0.1:0", "--shards", "2", "--pin", "off"]
                             + list(relay_args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    return relay, relay.stdout.readline().split()


def run(relay_args, loadgen_args, what, exact):
    relay, ready = start_relay(relay_args)
    try:
        check(ready[:1] == ["relaying"], f"{what}: relay ready ({ready})")
        r = subprocess.run([LOADGEN, "--target", ready[1], "--quiet"] + loadgen_args,
                           capture_output=True, text=True, timeout=90)
        f, line = fields(r.stdout)
        print("  " + line)
        check(r.returncode == 0, f"{what}: loadgen exit 0 ({r.stderr.strip()[-300:]})")
        for k in ("duplicates", "out_of_order", "misrouted", "mismatched"):
            check(f.get(k) == "0", f"{what}: {k}=0 (got {f.get(k)})")
        expected, delivered = int(f.get("expected", -1)), int(f.get("delivered", -2))
        check(expected > 0, f"{what}: copies were owed ({expected})")
        if exact:
            check(delivered == expected and f.get("lost") == "0",
                  f"{what}: delivered == expected ({delivered} of {expected})")
        # The client side's reliability work and its own working time are reported.
        check(all(f.get(k, "").isdigit() for k in ("retransmits", "busy_us", "slow_polls")),
              f"{what}: retransmits, busy_us and slow_polls reported")
        check(int(f.get("busy_us", "0")) > 0, f"{what}: the load took working time")
    finally:
        relay.terminate()
        out, _ = relay.communicate(timeout=20)
        check(relay.returncode == 0 and "drained=yes" in out, f"{what}: relay drained ({out.strip()[:200]})")
        stopped = dict(re.findall(r"(\S+)=(\S+)", out))
        check(stopped.get("retransmits", "").isdigit() and
              stopped.get("fast_retransmits", "").isdigit(),
              f"{what}: relay reports retransmits and fast_retransmits")
        check(stopped.get("timeouts") == "0", f"{what}: no client timed out ({stopped.get('timeouts')})")
    return stopped


# A bad flag value: exit 2, naming the flag and the value, with the usage.
r = subprocess.run([LOADGEN, "--target", "127.0.0.1:1", "--throttle-window", "yes"],
                   capture_output=True, text=True, timeout=10)
check(r.returncode == 2 and "--throttle-window wants on or off, got 'yes'" in r.stderr
      and "usage: tern-loadgen" in r.stderr, "bad --throttle-window value: exit 2 and usage")

common = ["--clients", "400", "--room-size", "8", "--rate", "20", "--duration", "2",
          "--warmup", "1", "--sources", "127.0.0.0/27", "--channels", "3"]
plain = run([], common + ["--delivery", "reliable"], "reliable rooms", exact=True)
# Clients that hold their acks for 5 ms: still exact, and the relay receives fewer datagrams
# per message (acks of several of its datagrams share one).
held = run([], common + ["--delivery", "reliable", "--ack-delay-ms", "5"], "delayed acks",
           exact=True)


def per_message(stopped):
    return int(stopped.get("datagrams_in", 0)) / max(int(stopped.get("messages_in", 0)), 1)


check(per_message(held) < 0.9 * per_message(plain),
      f"delayed acks: fewer datagrams into the relay per message ({per_message(held):.2f} "
      f"against {per_message(plain):.2f})")


# The relay's [protocol] settings, here from its flags (the config keys set the same fields).
run(["--checksum", "on"], common + ["--delivery", "reliable", "--checksum"], "checksums",
    exact=True)
# ENet's retransmission timing and windows on both sides (no fast retransmit, no congestion
# window, no floor under the timeout, the throttle shrinking the reliable window).
enet_timing = ["--fast-retransmit", "off", "--congestion-window", "off", "--min-rto-ms", "0",
               "--throttle-window", "on"]
run(enet_timing, common + ["--delivery", "reliable"] + enet_timing,
    "ENet retransmission timing", exact=True)
# A relay that holds its acks: still exact.
run(["--ack-delay-ms", "5"], common + ["--delivery", "reliable"], "relay delays acks",
    exact=True)


def alone(relay_args):
    """Clients in rooms of one: the relay sends them nothing but acks."""
    relay, ready = start_relay(relay_args)
    try:
        r = subprocess.run([LOADGEN, "--target", ready[1], "--quiet", "--clients", "100",
                            "--room-size", "1", "--rate", "100", "--duration", "1", "--warmup",
                            "0.5"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"rooms of one, relay {relay_args}: loadgen exit 0")
    finally:
        relay.terminate()
        out, _ = relay.communicate(timeout=20)
    stopped = dict(re.findall(r"(\S+)=(\S+)", out))
    return int(stopped.get("datagrams_out", 0)) / max(int(stopped.get("messages_in", 0)), 1)


# There, acks held for 20 ms (two messages apart at 100 Hz) share datagrams.
at_once, held_20 = alone([]), alone(["--ack-delay-ms", "20"])
check(held_20 < 0.7 * at_once,
      f"relay delays acks: fewer datagrams per message to clients that get only acks "
      f"({held_20:.2f} against {at_once:.2f})")
# With selective acks off the relay agrees to none, so clients that hold acks still send one
# ENet ack per copy instead of ranges: more commands reach the relay per message.
plain_acks = run(["--selective-acks", "off"],
                 common + ["--delivery", "reliable", "--ack-delay-ms", "5"],
                 "selective acks off", exact=True)


def commands_per_message(stopped):
    return int(stopped.get("commands_in", 0)) / max(int(stopped.get("messages_in", 0)), 1)


check(commands_per_message(plain_acks) > 1.5 * commands_per_message(held),
      f"selective acks off: more commands into the relay per message "
      f"({commands_per_message(plain_acks):.2f} against {commands_per_message(held):.2f})")
run(["--broadcast-rooms", "1-1000"], common + ["--delivery", "reliable", "--broadcast"],
    "broadcast rooms", exact=True)
run([], common + ["--delivery", "mix"], "delivery mix", exact=False)


def stalled_relay():
    """The relay stops for 1.5 s in the middle of the measured window. Clients whose held
    payload reaches --max-queued have their next messages refused: counted, owed and lost,
    never queued. Everything the clients did send still arrives, so the loss is exactly the
    refused messages' copies."""
    relay, ready = start_relay()
    what = "relay stalled, clients' queues bounded"
    try:
        # 20 clients in 5 full rooms of 4 (3 copies a message), 100 Hz of 64 B: 4 KiB holds
        # 64 messages, 0.64 s of one client's traffic, so the stall overflows every client.
        loadgen = subprocess.Popen([LOADGEN, "--target", ready[1], "--quiet", "--clients", "20",
                                    "--room-size", "4", "--rate", "100", "--size", "64",
                                    "--duration", "4", "--warmup", "1", "--max-queued", "4096",
                                    "--delivery", "reliable"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Timed from the load generator's own start of traffic (its "connected" line), not
        # from its launch: the stall lands a second into the window however long connecting
        # took.
        connected = loadgen.stdout.readline()
        check(connected.startswith("connected 20/20"),
              f"{what}: clients connected ({connected.strip()})")
        time.sleep(2.0)  # the 1 s warm-up, then a second into the window
        relay.send_signal(signal.SIGSTOP)
        time.sleep(1.5)
        relay.send_signal(signal.SIGCONT)
        out, err = loadgen.communicate(timeout=60)
        f, line = fields(out)
        print("  " + line)
        check(loadgen.returncode == 0, f"{what}: loadgen exit 0 ({err.strip()[-300:]})")
        refused = int(f.get("refused", -1))
        check(refused > 0, f"{what}: messages refused ({refused})")
        check("messages held back" in out, f"{what}: the summary names the refusals")
        expected, delivered = int(f.get("expected", -1)), int(f.get("delivered", -1))
        check(expected - delivered == 3 * refused and f.get("lost") == str(3 * refused),
              f"{what}: lost == 3 copies per refused message ({expected - delivered} lost, "
              f"{refused} refused)")
        for k in ("duplicates", "out_of_order", "misrouted", "mismatched"):
            check(f.get(k) == "0", f"{what}: {k}=0 (got {f.get(k)})")
    finally:
        relay.send_signal(signal.SIGCONT)
        relay.terminate()
        relay.communicate(timeout=20)


def scheduled_rates():
    """--schedule changes the rate within the measured period and --per-second accounts for
    each second by send time: 60 Hz from 1 s, paused from 2 s to the end of a 5 s period. The
    rows add up to the totals, every copy owed in each second arrives, and nothing is sent in
    the last, paused second (whatever was due before the pause went out by then)."""
    relay, ready = start_relay()
    what = "scheduled rates"
    try:
        r = subprocess.run([LOADGEN, "--target", ready[1], "--quiet", "--clients", "80",
                            "--rate", "20", "--duration", "5", "--warmup", "1",
                            "--schedule", "1:60,2:0", "--per-second", "--sources",
                            "127.0.0.0/29"], capture_output=True, text=True, timeout=90)
        f, line = fields(r.stdout)
        print("  " + line)
        check(r.returncode == 0, f"{what}: loadgen exit 0 ({r.stderr.strip()[-300:]})")
        rows = [dict((k, float(v)) for k, v in re.findall(r"(\S+)=(\S+)", l))
                for l in r.stdout.splitlines() if l.startswith("loadgen_second ")]
        check([row["t"] for row in rows] == [0, 1, 2, 3, 4], f"{what}: one row per second ({rows})")
        for k in ("sent", "expected", "delivered"):
            check(sum(row[k] for row in rows) == int(f.get(k, -1)),
                  f"{what}: the rows' {k} add up to the total ({f.get(k)})")
        check(all(row["delivered"] == row["expected"] for row in rows),
              f"{what}: every second's copies delivered")
        if len(rows) == 5:
            check(rows[1]["sent"] > rows[0]["sent"] > 0,
                  f"{what}: 60 Hz sends more than 20 Hz ({rows[1]['sent']} > {rows[0]['sent']})")
            check(rows[4]["sent"] == 0, f"{what}: paused ({rows[4]['sent']} sent)")
            check(rows[1]["p99_us"] > 0 and rows[1]["arrived"] > 0,
                  f"{what}: latency and arrivals per second")
    finally:
        relay.terminate()
        relay.communicate(timeout=20)
    bad = subprocess.run([LOADGEN, "--target", "127.0.0.1:1", "--schedule", "2:50,1:20"],
                         capture_output=True, text=True, timeout=10)
    check(bad.returncode == 2 and "--schedule: times must increase" in bad.stderr,
          "--schedule out of order: exit 2 with the reason")


def kcp_members():
    """--protocol kcp: every client a KCP session on the relay's KCP port, joined with
    "join:<room>"; exact accounting as for ENet clients, and the relay's /metrics-free stop
    summary and a drain that lets every session go."""
    what = "KCP clients"
    f = {}
    relay, ready = start_relay(["--kcp-port", "0"])
    try:
        kcp = next((w.split("=", 1)[1] for w in ready if w.startswith("kcp=")), None)
        check(kcp is not None, f"{what}: relay names its KCP port ({ready})")
        r = subprocess.run([LOADGEN, "--target", kcp, "--quiet", "--protocol", "kcp",
                            "--clients", "200", "--room-size", "8", "--rate", "20",
                            "--duration", "2", "--warmup", "1", "--sources", "127.0.0.0/28"],
                           capture_output=True, text=True, timeout=90)
        f, line = fields(r.stdout)
        print("  " + line)
        check(r.returncode == 0, f"{what}: loadgen exit 0 ({r.stderr.strip()[-300:]})")
        check(f.get("protocol") == "kcp", f"{what}: the report says protocol=kcp")
        for k in ("duplicates", "out_of_order", "misrouted", "mismatched", "lost"):
            check(f.get(k) == "0", f"{what}: {k}=0 (got {f.get(k)})")
        expected, delivered = int(f.get("expected", -1)), int(f.get("delivered", -2))
        check(expected > 0 and delivered == expected,
              f"{what}: delivered == expected ({delivered} of {expected})")
        bad = subprocess.run([LOADGEN, "--target", kcp, "--protocol", "kcp", "--channels", "2"],
                             capture_output=True, text=True, timeout=10)
        check(bad.returncode == 2 and "--protocol kcp: reliable delivery on one channel" in
              bad.stderr, "--protocol kcp with two channels: exit 2 with the reason")
    finally:
        relay.terminate()
        out, _ = relay.communicate(timeout=30)
        check(relay.returncode == 0 and "drained=yes" in out,
              f"{what}: relay drained ({out.strip()[:200]})")
        stopped = dict(re.findall(r"(\S+)=(\S+)", out))
        # The only segments the relay may drop are copies of ones it had: a resend that crossed
        # its original's ack (the load generator's resends; none on a quiet machine).
        resends = int(f.get("retransmits", -1))
        check(stopped.get("kcp_connects") == "200"
              and 0 <= int(stopped.get("kcp_drops", -1)) <= resends,
              f"{what}: the stop summary counts 200 KCP sessions and no KCP drop beyond the "
              f"clients' resends ({stopped.get('kcp_connects')}, {stopped.get('kcp_drops')}, "
              f"resends {resends})")


scheduled_rates()
stalled_relay()
kcp_members()
print(f"{'FAILED' if failures else 'passed'}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
