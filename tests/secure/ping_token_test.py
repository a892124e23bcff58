#!/usr/bin/env python3
"""tern-ping with --token-key on both sides over loopback: a server whose security is
optional echoes a client that minted its own token (encrypted) and a plain client alike; a
client whose key differs from the server's never connects; a bad key file exits 2 naming
the file and line."""
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

token_bin, ping_bin = sys.argv[1], sys.argv[2]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail(what, p=None):
    detail = f"\nstdout: {p.stdout}\nstderr: {p.stderr}" if p is not None else ""
    print(f"FAIL: {what}{detail}")
    sys.exit(1)


with tempfile.TemporaryDirectory() as d:
    key, other = os.path.join(d, "key"), os.path.join(d, "other")
    for k in (key, other):
        if subprocess.run([token_bin, "keygen", k]).returncode != 0:
            fail("keygen")
    port = free_port()
    server = subprocess.Popen([ping_bin, "--serve", f"127.0.0.1:{port}", "--token-key", key],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def ping(*extra, timeout_ms=5000):
            return subprocess.run([ping_bin, "--connect", f"127.0.0.1:{port}", "--count", "300",
                                   "--warmup", "10", "--timeout-ms", str(timeout_ms), *extra],
                                  capture_output=True, text=True, timeout=120)
        # The server may still be binding: the first client retries within its timeout.
        p = ping("--token-key", key, timeout_ms=20000)
        if p.returncode != 0 or "lost=0" not in p.stdout:
            fail("token client echoes", p)
        p = ping()
        if p.returncode != 0 or "lost=0" not in p.stdout:
            fail("plain client still echoes under optional", p)
        p = ping("--token-key", other, timeout_ms=1500)
        if p.returncode == 0:
            fail("a token under an unknown key connected", p)
    finally:
        server.terminate()
        server.wait(timeout=30)
    bad = os.path.join(d, "bad")
    with open(bad, "w") as f:
        f.write("id 1\nkey nothex\n")
    p = subprocess.run([ping_bin, "--connect", "127.0.0.1:1", "--token-key", bad],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 2 or f"{bad}:2:" not in p.stderr:
        fail("bad key file: exit 2 naming file:line", p)
print("tern-ping --token-key: all checks passed")
