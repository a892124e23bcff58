#!/usr/bin/env python3
"""tern-relay's [security] secure-session keys as a process: every bad value exits non-zero
naming the file, the key and the reason; a relay with a valid key and policy required runs
until SIGTERM and drains; with tern-loadgen given, its clients with tokens go through that relay
with exact accounting and clients without tokens do not connect."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

token_bin, relay_bin = sys.argv[1], sys.argv[2]


def fail(what, p=None):
    detail = f"\nstderr: {p.stderr}" if p is not None else ""
    print(f"FAIL: {what}{detail}")
    sys.exit(1)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


with tempfile.TemporaryDirectory() as d:
    key = os.path.join(d, "relay.key")
    if subprocess.run([token_bin, "keygen", key]).returncode != 0:
        fail("keygen")
    cfg = os.path.join(d, "relay.toml")
    port = free_port()

    def run_with(security):
        with open(cfg, "w") as f:
            f.write(f'[relay]\nlisten = "127.0.0.1:{port}"\n[security]\n{security}\n')
        return subprocess.run([relay_bin, "--config", cfg], capture_output=True, text=True,
                              timeout=30)

    for security, expect in [
        ('policy = "bogus"', "security.policy: must be plain, optional or required"),
        ('policy = "required"', "security.key_file: policy required needs a key file"),
        ('policy = "optional"\nkey_file = "missing.key"', "security.key_file: " + d),
        ('policy = "required"\nkey_file_old = "relay.key"', "security.key_file_old: needs"),
        ('policy = "required"\nkey_file = "relay.key"\npublic_address = "0.0.0.0:1"',
         "security.public_address: must be a specific address:port"),
        ('policy = "required"\nkey_file = 5', "security.key_file: must be a string"),
    ]:
        p = run_with(security)
        if p.returncode == 0 or cfg not in p.stderr or expect not in p.stderr:
            fail(f"{security!r}: non-zero exit naming {expect!r}", p)

    with open(cfg, "w") as f:
        f.write(f'[relay]\nlisten = "127.0.0.1:{port}"\n[security]\npolicy = "required"\n'
                f'key_file = "relay.key"\nkey_file_old = "relay.key"\n')
    relay = subprocess.Popen([relay_bin, "--config", cfg], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    # Up when its port is taken (bounded wait on a condition).
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                break
        if relay.poll() is not None:
            fail("relay exited with a valid [security]", relay)
        time.sleep(0.05)
    else:
        fail("relay never bound its port")
    relay.send_signal(signal.SIGTERM)
    try:
        rc = relay.wait(timeout=30)
    except subprocess.TimeoutExpired:
        relay.kill()
        fail("relay did not stop on SIGTERM")
    if rc != 0:
        fail(f"relay exit {rc} after SIGTERM")
print("tern-relay [security]: all checks passed")


# End to end: a relay that requires tokens, tern-loadgen clients whose tokens name their rooms
# (as their connect data does too: this checks the encrypted path's accounting, not that the
# token's room wins), and a loadgen without tokens that cannot connect at all.
if len(sys.argv) > 3:
    loadgen_bin = sys.argv[3]
    with tempfile.TemporaryDirectory() as d:
        key = os.path.join(d, "relay.key")
        subprocess.run([token_bin, "keygen", key], check=True)
        port = free_port()
        cfg = os.path.join(d, "relay.toml")
        with open(cfg, "w") as f:
            f.write(f'[relay]\nlisten = "127.0.0.1:{port}"\nshards = 1\n[security]\n'
                    f'policy = "required"\nkey_file = "relay.key"\n')
        relay = subprocess.Popen([relay_bin, "--config", cfg], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        try:
            lg = subprocess.run([loadgen_bin, "--target", f"127.0.0.1:{port}", "--clients", "64",
                                 "--room-size", "8", "--rate", "20", "--duration", "2",
                                 "--warmup", "1", "--timeout-ms", "20000", "--quiet",
                                 "--token-key", key],
                                capture_output=True, text=True, timeout=120)
            line = [l for l in lg.stdout.splitlines() if l.startswith("loadgen ")]
            if lg.returncode != 0 or not line:
                fail("loadgen with tokens against a relay that requires them", lg)
            fields = dict(kv.split("=", 1) for kv in line[-1].split() if "=" in kv)
            for k in ("lost", "duplicates", "out_of_order", "misrouted", "mismatched"):
                if fields.get(k) != "0":
                    fail(f"{k}={fields.get(k)} (want 0): {line[-1]}")
            if fields.get("delivered") != fields.get("expected") or fields.get("delivered") == "0":
                fail(f"delivered != expected: {line[-1]}")
            plain = subprocess.run([loadgen_bin, "--target", f"127.0.0.1:{port}", "--clients",
                                    "8", "--room-size", "8", "--rate", "20", "--duration", "1",
                                    "--timeout-ms", "1500", "--quiet"],
                                   capture_output=True, text=True, timeout=120)
            if plain.returncode == 0:
                fail("a loadgen without tokens ran against a relay that requires them", plain)
        finally:
            relay.send_signal(signal.SIGTERM)
            try:
                relay.wait(timeout=30)
            except subprocess.TimeoutExpired:
                relay.kill()
    print("tern-relay + tern-loadgen with tokens: exact accounting")
