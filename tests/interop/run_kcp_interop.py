#!/usr/bin/env python3
"""One kcp-go interop case: builds the kcp-go peer from Debian's packaged source (offline,
GO111MODULE=off, GOPATH=/usr/share/gocode), starts the server side, runs the client side.
Exits 77 (skip) with the reason printed when Go or kcp-go's source is absent."""
import argparse
import os
import shutil
import subprocess
import sys
import time

GOPATH = "/usr/share/gocode"
KCP_SRC = os.path.join(GOPATH, "src/github.com/xtaci/kcp-go")


def build_go_peer(src, workdir, case):
    go = shutil.which("go")
    if go is None:
        print("SKIP: go not found (apt-get install golang-go; scripts/setup.sh installs it)")
        sys.exit(77)
    if not os.path.isdir(KCP_SRC):
        print("SKIP: kcp-go source not found at %s (apt-get install golang-github-xtaci-kcp-dev)"
              % KCP_SRC)
        sys.exit(77)
    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    out = os.path.join(workdir, "kcp_go_peer_" + case)
    # GOPROXY=off: the build must never reach the network.
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOPATH,
               GOCACHE=os.path.join(workdir, "gocache"), GOPROXY="off")
    subprocess.run([go, "build", "-o", out, src], env=env, check=True, timeout=300)
    return out


def start_server(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not (line.startswith("listening") or line.startswith("serving")):
        proc.kill()
        out, err = proc.communicate()
        sys.exit("server did not start: %r %s" % (line, err))
    port = int(line.split()[1].rsplit(":", 1)[-1])
    return proc, port


def stop_server(proc):
    proc.terminate()
    try:
        out, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    sys.stdout.write(err)
    return proc.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tern-peer", required=True)
    ap.add_argument("--go-src", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--case", required=True,
                    choices=["msg", "stream", "fec", "tern_client", "tern_client_fec",
                             "tern_ping_serve", "tern_ping_client"])
    ap.add_argument("--tern-ping", help="tern-ping, for the tern_ping_* cases")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--loss", default="0.05")
    a = ap.parse_args()
    go_peer = build_go_peer(a.go_src, a.workdir, a.case)
    started = time.monotonic()
    if a.case == "tern_ping_serve":
        # tern-ping --serve --protocol kcp echoes plainly: no "BIG" request.
        server, port = start_server([a.tern_ping, "--serve", "127.0.0.1:0", "--protocol", "kcp"])
        cmd = [go_peer, "-connect", "127.0.0.1:%d" % port, "-mode", "msg", "-big=false",
               "-count", str(a.count)]
    elif a.case == "tern_ping_client":
        server, port = start_server([go_peer, "-listen", "127.0.0.1:0"])
        cmd = [a.tern_ping, "--connect", "127.0.0.1:%d" % port, "--protocol", "kcp",
               "--count", "1000", "--size", "3000"]
    elif a.case in ("msg", "stream", "fec"):
        server, port = start_server([a.tern_peer, "--serve", "--loss", a.loss])
        mode = "stream" if a.case == "stream" else "msg"
        cmd = [go_peer, "-connect", "127.0.0.1:%d" % port, "-mode", mode,
               "-count", str(a.count)] + (["-fec"] if a.case == "fec" else [])
    else:
        fec = a.case == "tern_client_fec"
        server, port = start_server([go_peer, "-listen", "127.0.0.1:0"] + (["-fec"] if fec else []))
        cmd = [a.tern_peer, "--connect", str(port), "--count", str(a.count), "--loss", a.loss] + (
            ["--send-fec"] if fec else [])
    print("run:", " ".join(cmd))
    client = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    sys.stdout.write(client.stdout)
    sys.stdout.write(client.stderr)
    server_rc = stop_server(server)
    print("case %s: client exit %d, server exit %s, %.1f s" % (
        a.case, client.returncode, server_rc, time.monotonic() - started))
    # The Tern server exits 0 on SIGTERM when it refused no echo; kcp-go's dies by the signal.
    if client.returncode != 0:
        return 1
    if a.case in ("msg", "stream", "fec", "tern_ping_serve") and server_rc != 0:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
