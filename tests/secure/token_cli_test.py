#!/usr/bin/env python3
"""tern-token as a process: keygen writes a 0600 key file and never overwrites, mint prints a
token of the documented size, and every bad input exits non-zero naming what is wrong."""
import os
import stat
import subprocess
import sys
import tempfile

TOKEN_HEX = 2 * (555 + 64)


def run(*args):
    return subprocess.run([sys.argv[1], *args], capture_output=True, text=True, timeout=30)


def expect(cond, what, proc=None):
    if not cond:
        detail = f"\nstdout: {proc.stdout}\nstderr: {proc.stderr}" if proc else ""
        print(f"FAIL: {what}{detail}")
        sys.exit(1)


with tempfile.TemporaryDirectory() as d:
    key = os.path.join(d, "key")
    p = run("keygen", key, "--id", "7")
    expect(p.returncode == 0, "keygen succeeds", p)
    expect(stat.S_IMODE(os.stat(key).st_mode) == 0o600, "key file is 0600")
    text = open(key).read()
    expect("id 7\n" in text and "key " in text, "key file holds id and key")
    p = run("keygen", key)
    expect(p.returncode == 1 and key in p.stderr, "keygen refuses to overwrite", p)

    p = run("mint", "--key", key, "--client-id", "5", "--server", "127.0.0.1:7777,[::1]:7777",
            "--user-data", "room=a", "--expire", "60")
    expect(p.returncode == 0, "mint succeeds", p)
    line = p.stdout.strip()
    expect(len(line) == TOKEN_HEX and all(c in "0123456789abcdef" for c in line),
           f"mint prints {TOKEN_HEX} hex digits", p)
    again = run("mint", "--key", key, "--client-id", "5", "--server", "127.0.0.1:7777")
    expect(again.stdout.strip() != line, "two tokens differ (fresh nonce and keys)", again)

    out = os.path.join(d, "token")
    p = run("mint", "--key", key, "--client-id", "1", "--server", "127.0.0.1:1", "--out", out)
    expect(p.returncode == 0 and len(open(out).read().strip()) == TOKEN_HEX, "--out writes", p)

    bad = os.path.join(d, "bad")
    with open(bad, "w") as f:
        f.write("id 1\nkey zz\n")
    p = run("mint", "--key", bad, "--client-id", "1", "--server", "127.0.0.1:1")
    expect(p.returncode == 1 and f"{bad}:2: key" in p.stderr, "bad key file names file:line", p)
    p = run("mint", "--key", os.path.join(d, "none"), "--client-id", "1", "--server", "1.2.3.4:5")
    expect(p.returncode == 1 and "cannot open" in p.stderr, "missing key file", p)

    for args, what in [
        ((), "no command"),
        (("frobnicate",), "unknown command"),
        (("keygen",), "keygen without FILE"),
        (("mint", "--client-id", "1", "--server", "127.0.0.1:1"), "mint without --key"),
        (("mint", "--key", key, "--server", "127.0.0.1:1"), "mint without --client-id"),
        (("mint", "--key", key, "--client-id", "1"), "mint without --server"),
        (("mint", "--key", key, "--client-id", "1", "--server", "nowhere"), "bad --server"),
        (("mint", "--key", key, "--client-id", "1", "--server", "127.0.0.1:1", "--expire", "0"),
         "zero --expire"),
        (("mint", "--key", key, "--client-id", "1", "--server", "127.0.0.1:1",
          "--user-data", "x" * 257), "user data too long"),
        (("mint", "--key", key, "--client-id", "1", "--server", ",".join(["127.0.0.1:1"] * 9)),
         "nine servers"),
    ]:
        p = run(*args)
        expect(p.returncode == 2 and "usage:" in p.stderr, f"{what}: exit 2 with usage", p)
print("tern-token: all checks passed")
