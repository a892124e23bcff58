#!/usr/bin/env python3
"""End-to-end tests of the DPDK driver through tern-ping (suite 'dpdk').

  run_dpdk_test.py af_packet --tern-ping PATH --enet-ping PATH --echo-check PATH
  run_dpdk_test.py memif --tern-ping PATH

af_packet: a network namespace with one end of a veth pair (kernel IP stack, IP 10.X.Y.2/24),
the other end in the root namespace without an IP, driven by DPDK's net_af_packet PMD under
`tern-ping --serve` (IP 10.X.Y.1). Real libenet clients in the namespace (enet-ping reliable and
unreliable, enet-echo-check) talk to it through the kernel. No neighbour entry is configured:
the kernel must ARP for the server and the DPDK driver must answer (checked afterwards in the
namespace's neighbour table against the port's MAC).

memif: `tern-ping --serve` on net_memif (server role) and `tern-ping --connect` / `--flood` on
net_memif (client role) in a second process: ping-pong and flood must account exactly (lost=0,
sent == received) and the server's summary must agree with the clients.

Each test sets up and tears down what it needs. Exit 77 (skipped) when not root.
"""

import argparse
import os
import re
import subprocess
import sys
import time

from dpdk_test_support import STEP_TIMEOUT_S, Failures, fields, read, stop


def sh(*cmd, check=True, ns=None):
    full = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    r = subprocess.run(full, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(full)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


LOGS = []  # server logs: removed when every check passed


def start_server(cmd, log_prefix):
    LOGS.extend([log_prefix + ".out", log_prefix + ".err"])
    out = open(log_prefix + ".out", "w+")
    err = open(log_prefix + ".err", "w+")
    print("server:", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=out, stderr=err)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        out.seek(0)
        if "serving" in out.read():
            return proc, out, err
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    stop(proc)
    err.seek(0)
    raise RuntimeError(f"server did not start: {err.read().strip()}")


def server_mac(err_text):
    m = re.search(r"mac ([0-9a-f:]{17})", err_text)
    return m.group(1) if m else None


def served_fields(out_text):
    return fields(out_text, "served")


def run_client(cmd, ns=None):
    full = (["ip", "netns", "exec", ns] if ns else []) + cmd
    print("client:", " ".join(full), flush=True)
    r = subprocess.run(full, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    return r


def rtt_fields(text):
    return fields(text, "rtt_us", "flood")


# ---- af_packet on a veth pair --------------------------------------------------------------------


def test_af_packet(args):
    tag = f"{os.getpid() % 100000}"
    ns = f"tern{tag}"
    host_if, ns_if = f"tdh{tag}", f"tdn{tag}"
    octet = 100 + os.getpid() % 100
    server_ip, client_ip = f"10.{octet}.77.1", f"10.{octet}.77.2"
    port = 7000 + os.getpid() % 1000
    f = Failures()
    server = None
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        sh("ip", "link", "set", ns_if, "netns", ns)
        sh("ip", "addr", "add", f"{client_ip}/24", "dev", ns_if, ns=ns)
        sh("ip", "link", "set", ns_if, "up", ns=ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "link", "set", host_if, "up")
        # veth leaves checksums to the receiver's kernel (CHECKSUM_PARTIAL); a packet socket
        # would see them unfilled.
        sh("ethtool", "-K", host_if, "tx", "off")
        sh("ethtool", "-K", ns_if, "tx", "off", ns=ns)
        neigh = sh("ip", "neigh", "show", server_ip, ns=ns).stdout.strip()
        f.check(neigh == "", f"no neighbour entry for {server_ip} before the test ({neigh!r})")

        spec = f"net_af_packet0,iface={host_if}" + (f",qpairs={args.qpairs}" if args.qpairs else "")
        server, out, err = start_server(
            [args.tern_ping, "--serve", f"0.0.0.0:{port}", "--driver", "dpdk", "--shards",
             str(args.shards), "--dpdk-port", spec, "--dpdk-ip", f"{server_ip}/24"],
            f"/tmp/tern-dpdk-afp-{tag}")
        mac = server_mac(read(err))
        f.check(mac is not None, f"server reports its port MAC ({mac})")
        if args.shards > 1:
            want = "kernel_fanout" if args.qpairs else "software"
            f.check(f"steering {want}" in read(err), f"{args.shards} shards steered by {want}")
            # Several clients at once, each its own 4-tuple, spread over the shards.
            procs = []
            for i in range(args.clients):
                cmd = ["ip", "netns", "exec", ns, args.enet_ping, "--connect",
                       f"{server_ip}:{port}", "--count", "200", "--warmup", "10",
                       "--timeout-ms", "5000"]
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
            for i, p in enumerate(procs):
                text, _ = p.communicate(timeout=STEP_TIMEOUT_S)
                v = rtt_fields(text)
                f.check(p.returncode == 0 and v.get("count") == "200" and v.get("lost") == "0",
                        f"concurrent client {i}: exit {p.returncode} count={v.get('count')} "
                        f"lost={v.get('lost')}")

        for delivery in ["--reliable", "--unreliable"]:
            r = run_client([args.enet_ping, "--connect", f"{server_ip}:{port}", "--count", "300",
                            "--warmup", "20", delivery, "--timeout-ms", "5000"], ns=ns)
            v = rtt_fields(r.stdout)
            f.check(r.returncode == 0 and v.get("count") == "300",
                    f"enet-ping {delivery}: exit {r.returncode}, count={v.get('count')}, "
                    f"lost={v.get('lost')}")
            if delivery == "--reliable":
                f.check(v.get("lost") == "0", "enet-ping --reliable lost nothing")

        r = run_client([args.echo_check, "--connect", f"{server_ip}:{port}"], ns=ns)
        f.check(r.returncode == 0, f"enet-echo-check against the DPDK server: exit {r.returncode}")

        neigh = sh("ip", "neigh", "show", server_ip, ns=ns).stdout.strip()
        f.check(mac is not None and f"lladdr {mac}" in neigh,
                f"the kernel resolved {server_ip} by ARP to the DPDK port's MAC ({neigh!r})")
        f.check("PERMANENT" not in neigh, "the neighbour entry was learned, not static")

        stopped, rc = stop(server)
        server = None
        f.check(stopped and rc == 0, f"server stopped on SIGTERM with status {rc}")
        s = served_fields(read(out))
        expected = 3 + (args.clients if args.shards > 1 else 0)
        f.check(int(s.get("connects", "0")) == expected and s.get("echo_failed") == "0" and
                s.get("disconnected_at_exit") == "0",
                f"server summary: connects={s.get('connects')} (want {expected}) "
                f"echo_failed={s.get('echo_failed')}"
                f" disconnected_at_exit={s.get('disconnected_at_exit')}")
        sys.stderr.write(read(err))
        if args.shards > 1:
            # Every shard served some clients: under software steering the others' replies
            # left through queue 0's hand-off rings.
            m = re.search(r"datagrams_in per shard ([0-9,]+)", read(err))
            per = [int(x) for x in m.group(1).split(",")] if m else []
            f.check(len(per) == args.shards and min(per) > 0,
                    f"per-shard datagrams: {m.group(1) if m else None}")
        # The port's counters and link reach the shard counters.
        pm = re.search(r"tern-ping: port (.*)", read(err))
        port = dict(re.findall(r"(\w+)=(\S+)", pm.group(1))) if pm else {}
        f.check(port.get("link") == "up" and
                int(port.get("rx_packets", "0")) >= int(s.get("datagrams_in", "1")) and
                int(port.get("tx_packets", "0")) >= int(s.get("datagrams_out", "1")),
                f"port stats in the shard counters: link={port.get('link')} "
                f"rx_packets={port.get('rx_packets')} (datagrams_in {s.get('datagrams_in')}) "
                f"tx_packets={port.get('tx_packets')} (datagrams_out {s.get('datagrams_out')})")
    finally:
        if server is not None:
            stop(server)
        sh("ip", "link", "del", host_if, check=False)
        sh("ip", "netns", "del", ns, check=False)
    return f.items


# ---- memif between two processes -----------------------------------------------------------------


def test_memif(args):
    tag = f"{os.getpid() % 100000}"
    sock = f"/tmp/tern-memif-{tag}.sock"
    conf = f"/tmp/tern-memif-{tag}.toml"
    server_ip, client_ip = "10.213.0.1", "10.213.0.2"
    port = 7000 + os.getpid() % 1000
    f = Failures()
    server = None
    try:
        if os.path.exists(sock):
            os.unlink(sock)
        # The server takes its set-up from a [dpdk] TOML section (--dpdk-config). It sends
        # UDP checksum 0 (udp_checksum = false), the client real checksums: each must accept
        # the other's.
        with open(conf, "w") as c:
            c.write(f'[dpdk]\nport = "net_memif0,role=server,socket={sock}"\n'
                    f'ip = "{server_ip}/24"\nhugepages = false\nmemory_mb = 512\n'
                    f'mbufs = 4096\nstatic_arp = ["10.213.0.9 02:00:00:00:00:09"]\n'
                    f'udp_checksum = false\n')
        server, out, err = start_server(
            [args.tern_ping, "--serve", f"0.0.0.0:{port}", "--driver", "dpdk",
             "--dpdk-config", conf], f"/tmp/tern-dpdk-memif-{tag}")
        client = [args.tern_ping, "--connect", f"{server_ip}:{port}", "--driver", "dpdk",
                  "--dpdk-port", f"net_memif0,role=client,socket={sock}",
                  "--dpdk-ip", f"{client_ip}/24"]
        expect_messages = 0
        count = 500
        for delivery in ["--reliable", "--unreliable"]:
            r = run_client(client + ["--count", str(count), "--warmup", "20", delivery,
                                     "--dpdk-local-port", "40001"])
            v = rtt_fields(r.stdout)
            f.check(r.returncode == 0 and v.get("count") == str(count),
                    f"tern-ping {delivery} over memif: exit {r.returncode}, count={v.get('count')}"
                    f" lost={v.get('lost')}")
            if delivery == "--reliable":
                f.check(v.get("lost") == "0", "reliable ping-pong lost nothing")
                expect_messages += count + 20
        r = run_client(client + ["--flood", "--peers", "16", "--window", "4", "--duration", "2",
                                 "--warmup", "0.5", "--dpdk-local-port", "40002"])
        v = rtt_fields(r.stdout)
        f.check(r.returncode == 0 and v.get("connected") == "16" and v.get("lost") == "0" and
                v.get("sent") == v.get("received") and int(v.get("sent", "0")) > 0,
                f"flood over memif: exit {r.returncode} connected={v.get('connected')} "
                f"sent={v.get('sent')} received={v.get('received')} lost={v.get('lost')}")
        stopped, rc = stop(server)
        server = None
        f.check(stopped and rc == 0, f"server stopped on SIGTERM with status {rc}")
        f.check("tx checksum none" in read(err),
                "server: udp_checksum = false puts checksum 0 on its datagrams")
        s = served_fields(read(out))
        f.check(s.get("connects") == "18" and s.get("disconnects") == "18" and
                s.get("timeouts") == "0" and s.get("echo_failed") == "0" and
                s.get("messages_in") == s.get("messages_out"),
                f"server summary: connects={s.get('connects')} disconnects={s.get('disconnects')}"
                f" timeouts={s.get('timeouts')} echo_failed={s.get('echo_failed')} "
                f"messages_in={s.get('messages_in')} messages_out={s.get('messages_out')}")
        sys.stderr.write(read(err))
    finally:
        if server is not None:
            stop(server)
        for path in [sock, conf]:
            if os.path.exists(path):
                os.unlink(path)
    return f.items


# ---- net_tap: checksum offloads ------------------------------------------------------------------


def test_tap(args):
    """tern-ping --serve on net_tap (the PMD offers TX and RX checksum offload, so the offload
    paths run); the kernel side of the tap, in the root namespace, carries the client's
    address. The driver picks its own MAC (the tap's is the kernel's) and answers ARP."""
    tag = f"{os.getpid() % 100000}"
    iface = f"ttp{tag}"
    octet = 100 + os.getpid() % 100
    server_ip, client_ip = f"10.{octet}.79.2", f"10.{octet}.79.1"
    port = 7000 + os.getpid() % 1000
    f = Failures()
    server = None
    try:
        server, out, err = start_server(
            [args.tern_ping, "--serve", f"0.0.0.0:{port}", "--driver", "dpdk",
             "--dpdk-port", f"net_tap0,iface={iface}", "--dpdk-ip", f"{server_ip}/24"],
            f"/tmp/tern-dpdk-tap-{tag}")
        f.check("tx checksum offload" in read(err) and "rx checksum offload" in read(err),
                "net_tap: TX and RX checksum offload in use")
        mac = server_mac(read(err))
        sh("ip", "addr", "add", f"{client_ip}/24", "dev", iface)
        sh("ip", "link", "set", iface, "up")
        for delivery in ["--reliable", "--unreliable"]:
            r = run_client([args.enet_ping, "--connect", f"{server_ip}:{port}", "--count", "300",
                            "--warmup", "20", delivery, "--timeout-ms", "5000"])
            v = rtt_fields(r.stdout)
            f.check(r.returncode == 0 and v.get("count") == "300",
                    f"enet-ping {delivery} over net_tap: exit {r.returncode}, "
                    f"count={v.get('count')}, lost={v.get('lost')}")
        r = run_client([args.echo_check, "--connect", f"{server_ip}:{port}"])
        f.check(r.returncode == 0, f"enet-echo-check over net_tap: exit {r.returncode}")
        neigh = sh("ip", "neigh", "show", server_ip, "dev", iface).stdout.strip()
        f.check(mac is not None and f"lladdr {mac}" in neigh,
                f"the kernel resolved {server_ip} by ARP to the driver's MAC ({neigh!r})")
        stopped, rc = stop(server)
        server = None
        f.check(stopped and rc == 0, f"server stopped on SIGTERM with status {rc}")
        s = served_fields(read(out))
        f.check(s.get("connects") == "3" and s.get("echo_failed") == "0",
                f"server summary: connects={s.get('connects')} echo_failed={s.get('echo_failed')}")
        sys.stderr.write(read(err))
    finally:
        if server is not None:
            stop(server)
        # The tap goes with the process; in case it did not:
        sh("ip", "link", "del", iface, check=False)
    return f.items


# ---- refusals ----------------------------------------------------------------------------------


def test_errors(args):
    """Bad DPDK set-ups fail with a clear message and the documented exit status."""
    f = Failures()
    null = ["--driver", "dpdk", "--dpdk-port", "net_null0", "--dpdk-ip", "10.212.0.1/24"]
    cases = [
        (["--serve", "0.0.0.0:7000", "--driver", "dpdk", "--dpdk-port", "net_null0"], 2,
         "needs --dpdk-port SPEC and --dpdk-ip"),
        (["--serve", "0.0.0.0:7000", "--dpdk-port", "net_null0"], 2, "needs --driver dpdk"),
        (["--serve", "0.0.0.0:7000", "--driver", "dpdk", "--dpdk-port", "net_null0",
          "--dpdk-ip", "10.1.2/24"], 1, "--dpdk-ip wants A.B.C.D/NN"),
        (["--serve", "0.0.0.0:0"] + null, 1, "needs a UDP port"),
        (["--serve", "0.0.0.0:7000", "--driver", "dpdk", "--dpdk-port", "net_nosuch0",
          "--dpdk-ip", "10.212.0.1/24"], 1, "rte_eal_init failed"),
        (["--connect", "10.212.0.2:7000", "--flood", "--shards", "2"] + null, 2,
         "runs on one shard"),
    ]
    bad_conf = f"/tmp/tern-dpdk-bad-{os.getpid()}.toml"
    with open(bad_conf, "w") as c:
        c.write('[dpdk]\nport = "net_null0"\nip = "10.212.0.1/24"\nqueues = 4\n')
    cases.append((["--serve", "0.0.0.0:7000", "--driver", "dpdk", "--dpdk-config", bad_conf], 1,
                  "dpdk.queues: unknown key"))
    bad_arp = f"/tmp/tern-dpdk-badarp-{os.getpid()}.toml"
    with open(bad_arp, "w") as c:
        c.write('[dpdk]\nport = "net_null0"\nip = "10.212.0.1/24"\nstatic_arp = ["10.1.1.1"]\n')
    cases.append((["--serve", "0.0.0.0:7000", "--driver", "dpdk", "--dpdk-config", bad_arp], 1,
                  "dpdk.static_arp: entries are"))
    bad_lcores = f"/tmp/tern-dpdk-badlcores-{os.getpid()}.toml"
    with open(bad_lcores, "w") as c:
        c.write('[dpdk]\nport = "net_null0"\nip = "10.212.0.1/24"\nlcores = "all"\n')
    cases.append((["--serve", "0.0.0.0:7000", "--driver", "dpdk", "--dpdk-config", bad_lcores],
                  1, f"{bad_lcores}: dpdk.lcores: wants a core list"))
    # A PCI allow-list that names no device here: the EAL finds no port by that name.
    pci = f"/tmp/tern-dpdk-pci-{os.getpid()}.toml"
    with open(pci, "w") as c:
        c.write('[dpdk]\nport = "0000:7f:1f.7"\nip = "10.212.0.1/24"\nlcores = "0"\n'
                'pci_allow = ["0000:7f:1f.7"]\n')
    cases.append((["--serve", "0.0.0.0:7000", "--driver", "dpdk", "--dpdk-config", pci], 1,
                  "DPDK port '0000:7f:1f.7' not found"))
    for extra, want_rc, want_text in cases:
        cmd = [args.tern_ping] + extra
        print("run:", " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S)
        first = (r.stderr.strip().splitlines() or [""])
        msg = next((l for l in first if l.startswith("tern-ping:")), first[0])
        f.check(r.returncode == want_rc and want_text in r.stderr,
                f"{' '.join(extra)}: exit {r.returncode} (want {want_rc}), {msg!r}")
    for path in (bad_conf, bad_arp, bad_lcores, pci):
        os.unlink(path)
    return f.items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("test", choices=["af_packet", "memif", "tap", "errors"])
    ap.add_argument("--tern-ping", required=True)
    ap.add_argument("--enet-ping")
    ap.add_argument("--echo-check")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--qpairs", type=int, default=0, help="net_af_packet qpairs (kernel fanout)")
    ap.add_argument("--clients", type=int, default=6, help="concurrent clients when shards > 1")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: the dpdk suite needs root (netns, veth, packet sockets)", flush=True)
        return 77
    try:
        tests = {"af_packet": test_af_packet, "memif": test_memif, "tap": test_tap,
                 "errors": test_errors}
        failed = tests[args.test](args)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"FAIL: {e}", flush=True)
        return 1
    if failed:
        print(f"{len(failed)} check(s) failed (server logs kept: {', '.join(LOGS)})", flush=True)
        return 1
    for path in LOGS:
        if os.path.exists(path):
            os.unlink(path)
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
