#!/usr/bin/env python3
"""Checks tools/wireshark/tern.lua with Debian's tshark (tests/wireshark/README.md).

  check_dissector.py reference --lua tern.lua --pcap tests/wireshark/reference.pcapng
  check_dissector.py capture   --lua tern.lua --tern-ping PATH --exercise PATH [--keep FILE]
  check_dissector.py malformed --lua tern.lua
  check_dissector.py show      --lua tern.lua --pcap FILE     (one datagram per command, -V)

reference: the committed capture of the scenario below, decoded and checked.
capture:   the scenario live on loopback, captured with dumpcap (root only; exit 77 otherwise):
           enet-exercise (libenet) against `tern-ping --serve`, once plain and once with
           checksums, then `tern-ping --connect` against the plain server (Tern to Tern: the
           extension commands). Every datagram must be found by the heuristic, decode without
           expert info, and every command type must carry the fields the programs put there.
malformed: a pcap written here byte by byte (truncated header, truncated command, unknown
           command, payload past the end, bad fragment fields, a channel past the handshake's
           count, compressed, bad checksum, seeded random bytes): each flagged with its expert info, never a Lua error; and
           datagrams that are not ENet are left alone by the heuristic.
Exit 0 on success, 1 on a failed check, 77 when tshark (or, for capture, root) is missing.
"""
import argparse
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
import zlib

# What enet_exercise.c sends (keep in step with its constants).
CONNECT_DATA = 0x7E57DA7A
DISCONNECT_DATA = 0xD15C
THROTTLE = (1000, 3, 4)
CHANNELS = 5
SMALL, LARGE = 32, 3000
SENDS = {0: (6, SMALL), 1: (7, SMALL), 2: (9, SMALL), 3: (8, LARGE), 4: (12, LARGE)}

CMD_NAMES = {1: "ACKNOWLEDGE", 2: "CONNECT", 3: "VERIFY_CONNECT", 4: "DISCONNECT", 5: "PING",
             6: "SEND_RELIABLE", 7: "SEND_UNRELIABLE", 8: "SEND_FRAGMENT", 9: "SEND_UNSEQUENCED",
             10: "BANDWIDTH_LIMIT", 11: "THROTTLE_CONFIGURE", 12: "SEND_UNRELIABLE_FRAGMENT",
             13: "TERN_HELLO", 14: "ACK_RANGE"}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def payload_byte(channel, i):
    return (0xA0 + channel * 16 + i % 7 + i // 256) & 0xFF


# ---- running tshark ----------------------------------------------------------------------

def tshark(lua, pcap, extra=()):
    cmd = ["tshark", "-n", "-r", pcap, "-X", f"lua_script:{lua}"] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    # Lua errors reach stderr (or the tree as "Lua Error"); either is a failure here.
    noise = [l for l in p.stderr.splitlines() if l.strip() and "Running as user" not in l]
    check(p.returncode == 0, f"tshark exited {p.returncode}: {p.stderr[-500:]}")
    check(not any("lua" in l.lower() for l in noise), "tshark reported Lua trouble: "
          + " | ".join(noise)[:500])
    check("Lua Error" not in p.stdout, "a Lua error appeared in the decoded tree")
    return p.stdout


def num(text):
    token = text.split()[0]
    if token in ("True", "False"):
        return int(token == "True")
    return int(token, 0)


class Command:
    def __init__(self, index):
        self.index = index
        self.f = {}  # field name -> show text (first occurrence)

    def n(self, name):
        return num(self.f[name])


class Packet:
    def __init__(self):
        self.frame = 0
        self.sport = self.dport = 0
        self.tern = False
        self.h = {}
        self.commands = []
        self.experts = []
        self.payloads = {}  # command index -> bytes
        self.protocols = []

    def hn(self, name):
        return num(self.h[name])


def parse_pdml(xml_text):
    packets = []
    for pkt in ET.fromstring(xml_text).iter("packet"):
        p = Packet()
        for proto in pkt.findall("proto"):
            name = proto.get("name")
            p.protocols.append(name)
            if name == "frame":
                for fld in proto.iter("field"):
                    if fld.get("name") == "frame.number":
                        p.frame = int(fld.get("show"))
            elif name == "udp":
                for fld in proto.iter("field"):
                    if fld.get("name") == "udp.srcport":
                        p.sport = int(fld.get("show"))
                    elif fld.get("name") == "udp.dstport":
                        p.dport = int(fld.get("show"))
            elif name == "tern":
                p.tern = True
                walk_tern(proto, p, None)
            elif name == "_ws.expert" or name == "_ws.malformed":
                for fld in proto.iter("field"):
                    if fld.get("name", "").startswith(("tern.expert", "_ws.malformed")):
                        p.experts.append(fld.get("name"))
        packets.append(p)
    return packets


def walk_tern(node, p, cmd):
    for fld in node.findall("field"):
        name = fld.get("name", "")
        if name == "tern.command":
            c = Command(len(p.commands))
            p.commands.append(c)
            walk_tern(fld, p, c)
            continue
        if name.startswith("tern.expert") or name == "_ws.expert":
            for e in fld.iter("field"):
                if e.get("name", "").startswith("tern.expert"):
                    p.experts.append(e.get("name"))
            if name.startswith("tern.expert"):
                p.experts.append(name)
            continue
        if name == "tern.payload" and cmd is not None:
            p.payloads[cmd.index] = bytes.fromhex(fld.get("value", ""))
        target = cmd.f if cmd is not None else p.h
        target.setdefault(name, fld.get("show", ""))
        walk_tern(fld, p, cmd)


def decode(lua, pcap, extra=()):
    return parse_pdml(tshark(lua, pcap, ["-T", "pdml"] + list(extra)))


# ---- the scenario's checks -----------------------------------------------------------------

def conversations(packets):
    conv = {}
    for p in packets:
        conv.setdefault(tuple(sorted((p.sport, p.dport))), []).append(p)
    return conv


def cmds_of(pkts, number):
    return [(p, c) for p in pkts for c in p.commands if c.n("tern.cmd") == number]


def check_acks(pkts, label):
    """Every ACKNOWLEDGE names a command sent the other way with the acknowledge flag, on its
    channel and sequence number, in a datagram whose sent time it echoes."""
    sent = {}
    for p in pkts:
        for c in p.commands:
            if c.n("tern.flags.acknowledge"):
                sent.setdefault((p.sport, c.n("tern.channel"), c.n("tern.reliable_seq")),
                                set()).add(p.hn("tern.sent_time"))
    acks = cmds_of(pkts, 1)
    check(acks, f"{label}: no ACKNOWLEDGE")
    for p, c in acks:
        key = (p.dport, c.n("tern.channel"), c.n("tern.ack.reliable_seq"))
        check(key in sent, f"{label}: frame {p.frame} acknowledges {key[1:]} never sent")
        if key in sent:
            check(c.n("tern.ack.sent_time") in sent[key],
                  f"{label}: frame {p.frame} echoes a sent time no such datagram had")
    return sent


def reassemble(pkts, sport, number, channel):
    parts = {}
    total = None
    for p, c in cmds_of(pkts, number):
        if p.sport != sport or c.n("tern.channel") != channel:
            continue
        total = c.n("tern.fragment.total_length")
        count = c.n("tern.fragment.count")
        check(c.n("tern.fragment.number") < count, f"frame {p.frame}: fragment number >= count")
        parts[c.n("tern.fragment.offset")] = p.payloads.get(c.index, b"")
        check(len(parts[c.n("tern.fragment.offset")]) == c.n("tern.data_length"),
              f"frame {p.frame}: payload field length differs from data length")
    data = b"".join(parts[o] for o in sorted(parts))
    return total, data


def check_exercise(pkts, label, checksum):
    connects = cmds_of(pkts, 2)
    if not check(len(connects) >= 1, f"{label}: no CONNECT"):
        return
    cp, cc = connects[0]
    client = cp.sport
    check(cp.hn("tern.peer_id") == 0xFFF, f"{label}: CONNECT datagram's peer ID is not 0xFFF")
    check(cc.n("tern.channel") == 0xFF and cc.n("tern.flags.acknowledge") == 1,
          f"{label}: CONNECT not on the system channel with the acknowledge flag")
    check(cc.n("tern.connect.channel_count") == CHANNELS, f"{label}: CONNECT channel count")
    check(cc.n("tern.connect.data") == CONNECT_DATA, f"{label}: CONNECT data")
    check(cc.n("tern.connect.mtu") == 1400, f"{label}: CONNECT MTU (libenet's default 1400)")
    verifies = [(p, c) for p, c in cmds_of(pkts, 3) if p.dport == client]
    if check(verifies, f"{label}: no VERIFY_CONNECT"):
        vc = verifies[0][1]
        check(vc.n("tern.connect.connect_id") == cc.n("tern.connect.connect_id"),
              f"{label}: VERIFY_CONNECT's connect ID differs from CONNECT's")
        check(vc.n("tern.connect.channel_count") == CHANNELS, f"{label}: VERIFY channel count")
        check("tern.connect.data" not in vc.f, f"{label}: VERIFY_CONNECT shows a data field")
    thr = [c for p, c in cmds_of(pkts, 11) if p.sport == client]
    if check(thr, f"{label}: no THROTTLE_CONFIGURE"):
        got = (thr[0].n("tern.throttle.interval"), thr[0].n("tern.throttle.acceleration"),
               thr[0].n("tern.throttle.deceleration"))
        check(got == THROTTLE, f"{label}: THROTTLE_CONFIGURE fields {got}")
    pings = [c for p, c in cmds_of(pkts, 5) if p.sport == client]
    check(pings and all(c.n("tern.channel") == 0xFF for c in pings), f"{label}: PING")
    bw = [c for p, c in cmds_of(pkts, 10) if p.sport == client]
    if check(bw, f"{label}: no BANDWIDTH_LIMIT"):
        check(bw[0].n("tern.bandwidth.incoming") == 0 and bw[0].n("tern.bandwidth.outgoing") == 0,
              f"{label}: BANDWIDTH_LIMIT of a host without limits is not 0/0")
    disc = [c for p, c in cmds_of(pkts, 4) if p.sport == client]
    if check(disc, f"{label}: no DISCONNECT"):
        check(disc[0].n("tern.disconnect.data") == DISCONNECT_DATA, f"{label}: DISCONNECT data")
    for ch, (number, size) in SENDS.items():
        want = bytes(payload_byte(ch, i) for i in range(size))
        for direction, side in (("sent", lambda p: p.sport == client),
                                ("echoed", lambda p: p.dport == client)):
            found = [(p, c) for p, c in cmds_of(pkts, number)
                     if side(p) and c.n("tern.channel") == ch]
            what = f"{label}: {CMD_NAMES[number]} on channel {ch} {direction}"
            if not check(found, what + ": none"):
                continue
            if size == LARGE:
                port = client if direction == "sent" else found[0][0].sport
                total, data = reassemble(pkts, port, number, ch)
                check(total == LARGE and data == want, what + ": fragments do not rebuild it")
            else:
                p, c = found[0]
                check(c.n("tern.data_length") == size and p.payloads.get(c.index) == want,
                      what + ": data length or payload")
            if number == 9:
                check(all(c.n("tern.flags.unsequenced") == 1 for _, c in found),
                      what + ": unsequenced flag")
    check_acks(pkts, label)
    for p in pkts:
        if checksum:
            check(p.h.get("tern.checksum.status", "").startswith("1"),
                  f"{label}: frame {p.frame} checksum not verified good "
                  f"({p.h.get('tern.checksum.status')})")
        else:
            check("tern.checksum" not in p.h, f"{label}: frame {p.frame} shows a checksum")


def check_tern_pair(pkts, label):
    connects = cmds_of(pkts, 2)
    if not check(connects, f"{label}: no CONNECT"):
        return
    client = connects[0][0].sport
    for side, name in ((lambda p: p.sport == client, "client"),
                       (lambda p: p.dport == client, "server")):
        hellos = [(p, c) for p, c in cmds_of(pkts, 13) if side(p)]
        if not check(hellos, f"{label}: no TERN_HELLO from the {name}"):
            continue
        for p, c in hellos:
            check(c.index == len(p.commands) - 1, f"{label}: frame {p.frame} hello not last")
            check(c.n("tern.channel") == 0xFF and c.n("tern.reliable_seq") == 0,
                  f"{label}: frame {p.frame} hello channel/seq")
            check(c.n("tern.hello.selective_acks") == 1, f"{label}: hello without selective acks")
            first = p.commands[0].n("tern.cmd")
            check(first == (2 if name == "client" else 3),
                  f"{label}: frame {p.frame} {name} hello not with CONNECT/VERIFY_CONNECT")
    sent = {}
    for p in pkts:
        for c in p.commands:
            if c.n("tern.flags.acknowledge"):
                sent.setdefault((p.sport, c.n("tern.channel"), c.n("tern.reliable_seq")),
                                set()).add(p.hn("tern.sent_time"))
    ranges = cmds_of(pkts, 14)
    check(ranges, f"{label}: no ACK_RANGE")
    for p, c in ranges:
        seqs = [int(s) for s in c.f["tern.ack_range.acked"].split(",")]
        check(seqs[0] == c.n("tern.reliable_seq") and len(seqs) == c.n("tern.ack_range.count"),
              f"{label}: frame {p.frame} ACK_RANGE base/count")
        bits = c.n("tern.ack_range.bitfield")
        check(seqs[1:] == [(seqs[0] + 1 + i) % 65536 for i in range(32) if bits >> i & 1],
              f"{label}: frame {p.frame} ACK_RANGE list differs from its bitfield")
        times = set()
        for s in seqs:
            key = (p.dport, c.n("tern.channel"), s)
            check(key in sent, f"{label}: frame {p.frame} ACK_RANGE names {key[1:]} never sent")
            times |= sent.get(key, set())
        check(c.n("tern.ack_range.sent_time") in times,
              f"{label}: frame {p.frame} ACK_RANGE sent time matches none of its commands")


def check_scenario(lua, pcap):
    packets = decode(lua, pcap)
    print(f"{pcap}: {len(packets)} datagrams", flush=True)
    check(len(packets) > 20, "too few datagrams captured")
    for p in packets:
        check(p.tern, f"frame {p.frame}: not found by the heuristic ({p.protocols})")
        check(not p.experts, f"frame {p.frame}: expert info {p.experts}")
    seen = {c.n("tern.cmd") for p in packets for c in p.commands}
    for n, name in CMD_NAMES.items():
        check(n in seen, f"no {name} ({n}) in the capture")
    kinds = {}
    for key, pkts in conversations(packets).items():
        connect = cmds_of(pkts, 2)
        if not connect:
            check(False, f"conversation {key} without a CONNECT")
            continue
        c = connect[0][1]
        if c.n("tern.connect.data") == CONNECT_DATA:
            kind = "exercise_checksum" if "tern.checksum" in pkts[0].h else "exercise"
        else:
            kind = "tern"
        kinds[kind] = kinds.get(kind, 0) + 1
        print(f"  conversation {key}: {kind}, {len(pkts)} datagrams", flush=True)
        if kind == "tern":
            check_tern_pair(pkts, f"tern-ping {key}")
        else:
            check_exercise(pkts, f"{kind} {key}", kind == "exercise_checksum")
    check(kinds == {"exercise": 1, "exercise_checksum": 1, "tern": 1},
          f"expected one conversation of each kind, got {kinds}")
    return packets


def show(lua, pcap, packets=None):
    """One datagram of each command type as tshark prints it (-V, Tern layer only)."""
    packets = packets or decode(lua, pcap)
    for n, name in CMD_NAMES.items():
        # The datagram with the fewest commands that holds one, to keep the print short.
        holders = [p for p in packets if any(c.n("tern.cmd") == n for c in p.commands)]
        if not holders:
            continue
        frame = min(holders, key=lambda p: (len(p.commands), p.frame)).frame
        print(f"==== {name} ({n}): frame {frame}")
        print(tshark(lua, pcap, ["-V", "-O", "tern", "-Y", f"frame.number == {frame}"]).rstrip())


# ---- live capture --------------------------------------------------------------------------

class Server:
    def __init__(self, exe, checksum):
        cmd = [exe, "--serve", "127.0.0.1:0"] + (["--checksum"] if checksum else [])
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        line = self.p.stdout.readline()
        m = re.search(r"serving \S+:(\d+)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"tern-ping --serve did not start: {line!r}")
        self.port = int(m.group(1))

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def run(cmd, what):
    print("run:", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"{what} exited {p.returncode}: {p.stdout[-300:]} {p.stderr[-300:]}")


class Dumpcap:
    """dumpcap on loopback with a BPF filter, and its running packet count (from the
    "Packets: N" reports it writes to stderr), so the test can tell when the capture is live
    and when everything sent has been written, instead of sleeping."""

    def __init__(self, bpf, path):
        self.count = 0
        self.p = subprocess.Popen(["dumpcap", "-i", "lo", "-f", bpf, "-w", path],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        buf = b""
        while True:
            b = self.p.stderr.read(1)
            if not b:
                return
            if b in b"\r\n":
                line = buf.decode(errors="replace")
                self.lines.append(line)
                m = re.match(r"Packets: (\d+)", line.strip())
                if m:
                    self.count = int(m.group(1))
                buf = b""
            else:
                buf += b

    def grow_by(self, n, marker_port, deadline_s=30):
        """Sends marker datagrams (20 ms apart) until the count has grown by n: the capture is
        live, and whatever was sent before the first marker has been counted."""
        start = self.count
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        deadline = time.monotonic() + deadline_s
        sent = 0
        while self.count < start + n and time.monotonic() < deadline and self.p.poll() is None:
            sock.sendto(b"tern-ws-marker %d" % sent, ("127.0.0.1", marker_port))
            sent += 1
            time.sleep(0.02)
        sock.close()
        return self.count >= start + n

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.reader.join(timeout=5)


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def capture(args):
    if os.geteuid() != 0:
        print("SKIP: capturing on loopback needs root (CI runs as root)")
        return 77
    if not shutil.which("dumpcap"):
        print("SKIP: dumpcap not installed (scripts/setup.sh installs tshark)")
        return 77
    tmp = tempfile.mkdtemp(prefix="tern-ws-")
    raw = os.path.join(tmp, "raw.pcapng")
    pcap = os.path.join(tmp, "capture.pcapng")
    plain = Server(args.tern_ping, False)
    summed = Server(args.tern_ping, True)
    marker = free_udp_port()  # nothing listens there: markers go nowhere but into the capture
    dump = None
    try:
        dump = Dumpcap(f"udp port {plain.port} or udp port {summed.port} or udp port {marker}",
                       raw)
        if not check(dump.grow_by(1, marker), "dumpcap did not start capturing: "
                     + " | ".join(dump.lines)):
            return 1
        run([args.exercise, "--connect", f"127.0.0.1:{plain.port}"], "enet-exercise")
        run([args.exercise, "--connect", f"127.0.0.1:{summed.port}", "--checksum"],
            "enet-exercise --checksum")
        run([args.tern_ping, "--connect", f"127.0.0.1:{plain.port}", "--count", "10",
             "--warmup", "0"], "tern-ping --connect")
        plain.stop()
        summed.stop()
        # The servers' last datagrams (disconnects at SIGTERM) are sent by now.
        check(dump.grow_by(3, marker), "dumpcap's count stopped growing")
    finally:
        plain.stop()
        summed.stop()
        if dump is not None:
            dump.stop()
    if failures:
        return 1
    # Keep the scenario, drop the markers; at least one marker after the scenario must have
    # been written, or the capture may lack the scenario's end.
    out = subprocess.run(["tshark", "-n", "-r", raw, "-T", "fields", "-e", "udp.dstport"],
                         capture_output=True, text=True, timeout=60).stdout.split()
    ports = [int(x) for x in out if x.isdigit()]
    last_scenario = max((i for i, port in enumerate(ports) if port != marker), default=-1)
    check(any(port == marker for port in ports[last_scenario + 1:]),
          "no marker after the scenario's last datagram: the capture may be cut short")
    subprocess.run(["tshark", "-n", "-r", raw, "-Y", f"not udp.port == {marker}", "-w", pcap],
                   capture_output=True, timeout=60, check=True)
    packets = check_scenario(args.lua, pcap)
    if args.keep:
        shutil.copyfile(pcap, args.keep)
        print("kept", args.keep)
    if not failures:
        show(args.lua, pcap, packets)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


# ---- malformed datagrams -------------------------------------------------------------------

PORT = 40404


def udp_frame(payload, sport=50000, dport=PORT):
    """Ethernet + IPv4 + UDP around payload (checksums: IPv4 computed, UDP 0 = none)."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 2]))
    s = sum(struct.unpack("!10H", ip))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    ip = ip[:10] + struct.pack("!H", ~s & 0xFFFF) + ip[12:]
    eth = b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
    return eth + ip + udp


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            f.write(struct.pack("<IIII", 1700000000 + i, 0, len(frame), len(frame)))
            f.write(frame)


def cmd_hdr(number, channel, seq, flags=0):
    return struct.pack("!BBH", number | flags, channel, seq)


def connect_cmd(connect_id=0x01020304):
    return cmd_hdr(2, 0xFF, 1, 0x80) + struct.pack("!HBBIIIIIIIIII", 0, 0xFF, 0xFF, 1400,
                                                     65536, 2, 0, 0, 5000, 2, 2, connect_id, 0)


def malformed(args):
    rng_seed = 34
    rng = random.Random(rng_seed)
    # (payload, expert info it must carry or None for a clean decode, what it is)
    cases = [
        (b"\x80", "tern.expert.truncated_header", "one byte"),
        (b"\x8f\xff\x00", "tern.expert.truncated_header", "sent-time flag, one byte of it"),
        (b"\x00\x01" + cmd_hdr(6, 0, 1, 0x80)[:3], "tern.expert.truncated_command",
         "command header cut"),
        (b"\x80\x01\x12\x34" + cmd_hdr(6, 0, 1, 0x80) + b"\x00", "tern.expert.truncated_command",
         "SEND_RELIABLE body cut"),
        (b"\x00\x01" + cmd_hdr(15, 0, 1) + b"\x00" * 8, "tern.expert.unknown_command",
         "command 15"),
        (b"\x00\x01" + cmd_hdr(0, 0, 1) + b"\x00" * 8, "tern.expert.unknown_command",
         "command 0"),
        (b"\x80\x01\x12\x34" + cmd_hdr(6, 0, 1, 0x80) + struct.pack("!H", 100) + b"x" * 10,
         "tern.expert.payload_past_datagram", "data length 100, 10 bytes"),
        (b"\x80\x01\x12\x34" + cmd_hdr(8, 0, 2, 0x80) + struct.pack("!HHIIII", 2, 4, 0, 0, 8, 0)
         + b"abcd", "tern.expert.bad_fragment", "fragment count 0"),
        (b"\x80\x01\x12\x34" + cmd_hdr(12, 0, 0) + struct.pack("!HHIIII", 2, 4, 2, 1, 8, 6)
         + b"abcd", "tern.expert.bad_fragment", "offset + length past total"),
        (b"\x40\x01" + b"\x99" * 12, "tern.expert.compressed", "compressed flag"),
        (b"\x00\x01", "tern.expert.truncated_command", "header only"),
        # Valid first command, garbage after: the first decodes, then the stop is flagged.
        (b"\x00\x01" + cmd_hdr(5, 0xFF, 3) + b"\x0e\x00", "tern.expert.truncated_command",
         "PING then 2 stray bytes"),
        (b"\x8f\xff\x00\x10" + connect_cmd(), None, "a clean CONNECT"),
        # That CONNECT asked for 2 channels: channel 1 is fine, channel 5 is not.
        (b"\x00\x00" + cmd_hdr(9, 1, 0, 0x40) + struct.pack("!HH", 1, 2) + b"ok", None,
         "unsequenced on channel 1 of 2"),
        (b"\x00\x00" + cmd_hdr(9, 5, 0, 0x40) + struct.pack("!HH", 2, 2) + b"no",
         "tern.expert.bad_channel", "unsequenced on channel 5 of 2"),
    ]
    for _ in range(40):
        cases.append((bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 80))), "any",
                      "random bytes"))
    tmp = tempfile.mkdtemp(prefix="tern-ws-")
    pcap = os.path.join(tmp, "malformed.pcap")
    write_pcap(pcap, [udp_frame(c[0]) for c in cases])
    print(f"malformed: {len(cases)} datagrams (random ones seeded with {rng_seed})", flush=True)
    packets = decode(args.lua, pcap, ["-d", f"udp.port=={PORT},tern"])
    check(len(packets) == len(cases), f"decoded {len(packets)} of {len(cases)} datagrams")
    for (payload, expect, what), p in zip(cases, packets):
        check(p.tern, f"frame {p.frame} ({what}): not decoded as tern")
        check("tern.expert.internal" not in p.experts, f"frame {p.frame} ({what}): Lua error")
        if expect is None:
            check(not p.experts, f"frame {p.frame} ({what}): flagged {p.experts}")
        elif expect != "any":
            check(expect in p.experts, f"frame {p.frame} ({what}): {expect} missing "
                                       f"(got {p.experts})")
    ping = packets[11]
    check(ping.commands and ping.commands[0].n("tern.cmd") == 5,
          "the PING before stray bytes was not decoded")

    # Checksums: a handshake datagram checksums with a zero connect ID (WIRE.md), zlib's
    # CRC-32 is the same function; one good, one with a flipped bit.
    body = b"\x8f\xff\x00\x10"
    good = bytearray(body + b"\x00\x00\x00\x00" + connect_cmd())
    good[4:8] = struct.pack("!I", zlib.crc32(bytes(good)))
    bad = bytearray(good)
    bad[-1] ^= 1
    sums = os.path.join(tmp, "checksum.pcap")
    write_pcap(sums, [udp_frame(bytes(good)), udp_frame(bytes(bad))])
    sp = decode(args.lua, sums, ["-d", f"udp.port=={PORT},tern", "-o", "tern.checksum:present"])
    if check(len(sp) == 2, "checksum pcap: two datagrams"):
        check(sp[0].h.get("tern.checksum.status", "").startswith("1") and not sp[0].experts,
              f"good CRC not verified: {sp[0].h.get('tern.checksum.status')} {sp[0].experts}")
        check(sp[1].h.get("tern.checksum.status", "").startswith("2")
              and "tern.expert.checksum_bad" in sp[1].experts, "bad CRC not flagged")
        check(sp[0].commands and sp[0].commands[0].n("tern.cmd") == 2,
              "CONNECT after a checksum not decoded")
    # The checksum found without the preference: only the summed layout parses, and the CRC
    # with a zero connect ID matches.
    sa = decode(args.lua, sums, ["-d", f"udp.port=={PORT},tern"])
    check(sa and sa[0].h.get("tern.checksum.status", "").startswith("1"),
          "auto mode did not find the handshake checksum")

    # The heuristic (no -d): ENet on an arbitrary port is claimed, other UDP is not.
    dns_like = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\x00"
    others = [dns_like, b"hello world, not enet", bytes(range(64)), b"\x00" * 20]
    heur = os.path.join(tmp, "heuristic.pcap")
    frames = [udp_frame(b"\x8f\xff\x00\x10" + connect_cmd(), dport=61234)]
    frames += [udp_frame(o, sport=61000 + i, dport=62000 + i) for i, o in enumerate(others)]
    write_pcap(heur, frames)
    hp = decode(args.lua, heur)
    check(hp and hp[0].tern, "the heuristic missed a CONNECT on an arbitrary port")
    for p in hp[1:]:
        check(not p.tern, f"heuristic claimed frame {p.frame}, which is not ENet")
    # The port preference decodes a port without the heuristic.
    pp = decode(args.lua, heur, ["-o", "tern.heuristic:FALSE", "-o", "tern.udp_port:61234"])
    check(pp and pp[0].tern and pp[0].commands and pp[0].commands[0].n("tern.cmd") == 2,
          "the udp_port preference did not decode its port")
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["reference", "capture", "malformed", "show"])
    ap.add_argument("--lua", required=True)
    ap.add_argument("--pcap")
    ap.add_argument("--tern-ping")
    ap.add_argument("--exercise")
    ap.add_argument("--keep")
    args = ap.parse_args()
    if not shutil.which("tshark"):
        print("SKIP: tshark not installed (scripts/setup.sh installs it)")
        return 77
    if args.mode == "capture":
        rc = capture(args)
    elif args.mode == "malformed":
        rc = malformed(args)
    elif args.mode == "show":
        show(args.lua, args.pcap)
        rc = 0
    else:
        check_scenario(args.lua, args.pcap)
        rc = 1 if failures else 0
    print("PASS" if rc == 0 else ("SKIP" if rc == 77 else f"FAIL ({len(failures)} checks)"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
