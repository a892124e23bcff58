#!/usr/bin/env python3
"""Renders perf/report.py's page in headless Chromium and checks the charts (tests/README.md).

  check_report.py --report perf/report.py [--screenshot FILE] [--json IN.json ...]

Writes benchmark JSON in the shapes perf/compare, perf/dpdk_bench.py, perf/load_ramp.py and
perf/loss_compare write, and the generic shape, filled with seeded random numbers (several runs, missing
values, failed runs), renders one page from all of them, loads it with `chromium --headless
--dump-dom`, and compares what every chart holds (the page reads it back from its Chart.js
objects) with figures this script computes from the JSON on its own. Then takes a screenshot
and checks that every chart's canvas has something drawn in it, in the series' colours.
--json adds real result files: their page must render with every chart holding data.
Exit 0 on success, 1 on a failed check, 77 when Chromium or Chart.js is missing.
"""
import argparse
import html
import json
import math
import os
import random
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import zlib

CHARTJS = "/usr/share/javascript/chart.js/chart.min.js"
PALETTE = [(0x1f, 0x77, 0xb4), (0xd6, 0x27, 0x28), (0x2c, 0xa0, 0x2c)]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


# ---- inputs, and what their charts must hold ----------------------------------------------

def make_compare(rng):
    runs, relays = [], ("tern-socket", "tern-uring", "libenet")
    for run in (1, 2, 3):
        for d in ("unreliable", "reliable"):
            for r in relays:
                for rate in (10, 14, 20, 28):
                    rec = {"phase": "saturation", "run": run, "relay": r, "delivery": d,
                           "rate": rate, "offered_copies_per_s": rate * 7000,
                           "status": "ok", "delivered_per_s": rng.uniform(5e4, 2e5)}
                    if rng.random() < 0.1:
                        rec["status"] = "failed"  # must not be plotted
                    runs.append(rec)
    summary = {"saturation": {}, "latency": {}}
    for d in ("unreliable", "reliable"):
        for r in relays:
            summary["saturation"].setdefault(d, {})[r] = {
                "delivered_per_s": rng.uniform(1e5, 3e5), "runs_ok": 3}
            summary["latency"].setdefault(d, {})[r] = {
                "p50_us": rng.uniform(50, 200), "p90_us": rng.uniform(200, 400),
                "p99_us": rng.uniform(400, 900), "p99.9_us": rng.uniform(900, 2000),
                "loss_pct": 0.0, "runs_ok": 3}
        for r in relays[:2]:
            for part, k in (("saturation", "delivered_per_s"), ("latency", "p50_us"),
                            ("latency", "p99_us")):
                row = summary[part][d][r]
                row[f"{k}_vs_libenet"] = round(row[k] / summary[part][d]["libenet"][k], 3)
    doc = {"benchmark": "compare", "date_utc": "2026-11-26T00:00:00Z", "git_rev": "test",
           "config": {"runs": 3, "quick": False, "clients": 1000, "room_size": 8, "size": 64},
           "summary": summary, "runs": runs}
    expect = {}
    for d in ("unreliable", "reliable"):
        series = {}
        for r in relays:
            by = {}
            for x in runs:
                if (x["relay"], x["delivery"], x["status"], x["phase"]) == (r, d, "ok",
                                                                             "saturation"):
                    by.setdefault(x["offered_copies_per_s"], []).append(x["delivered_per_s"])
            series[r] = [[o, med(v)] for o, v in sorted(by.items())]
        expect[f"throughput-{d}"] = ("line", None, series)
        expect[f"latency-{d}"] = ("bar", ["p50", "p90", "p99", "p99.9"], {
            r: [summary["latency"][d][r][f"{p}_us"] for p in ("p50", "p90", "p99", "p99.9")]
            for r in relays})
    cats, sv, uv = [], [], []
    for d in ("unreliable", "reliable"):
        for part, k, label in (("saturation", "delivered_per_s", "saturation copies/s"),
                               ("latency", "p50_us", "p50 latency"),
                               ("latency", "p99_us", "p99 latency")):
            cats.append(f"{d}: {label}")
            sv.append(summary[part][d]["tern-socket"][f"{k}_vs_libenet"])
            uv.append(summary[part][d]["tern-uring"][f"{k}_vs_libenet"])
    expect["ratios"] = ("bar", cats, {"tern-socket": sv, "tern-uring": uv})
    return doc, expect


def make_dpdk(rng):
    relay = []
    for rate in (30, 40, 50):
        row = {"rate_hz": rate, "offered": 1000 * rate * 7}
        for t in ("dpdk", "uring", "enet"):
            row[t] = [None if rng.random() < 0.15 else
                      {"delivered_per_s": rng.uniform(1e5, 4e5), "lost": 0,
                       "p99_us": rng.uniform(100, 5000)} for _ in range(3)]
        relay.append(row)
    ping = {t: [{"p50_us": rng.uniform(5, 20), "p99_us": rng.uniform(20, 60)} for _ in range(3)]
            for t in ("dpdk", "uring")}
    doc = {"relay": relay, "ping": ping, "echo": [], "echo_udp_checksum_0": [], "testpmd": None,
           "runs": 3, "best": {"dpdk": 4e5, "uring": 2e5, "enet": 1e5},
           "sustained": {"dpdk": 3e5, "uring": 1e5, "enet": 9e4}, "client_ack_delay": "0"}
    names = {"dpdk": "tern DPDK memif", "uring": "tern io_uring", "enet": "libenet"}

    def per(key, t):
        pts = []
        for r in relay:
            v = med([x[key] for x in r[t] if x])
            if v is not None:
                pts.append([r["offered"], v])
        return pts
    expect = {"throughput": ("line", None, {names[t]: per("delivered_per_s", t) for t in names}),
              "relay-p99": ("line", None, {names[t]: per("p99_us", t) for t in names}),
              "ping": ("bar", ["p50", "p99"], {
                  "DPDK memif": [med([x["p50_us"] for x in ping["dpdk"]]),
                                 med([x["p99_us"] for x in ping["dpdk"]])],
                  "io_uring loopback": [med([x["p50_us"] for x in ping["uring"]]),
                                        med([x["p99_us"] for x in ping["uring"]])]})}
    de, du = [], []
    for r in relay:
        d, e, u = (med([x["delivered_per_s"] for x in r[t] if x]) for t in ("dpdk", "enet", "uring"))
        de.append(d / e if d and e else None)
        du.append(d / u if d and u else None)
    expect["ratios"] = ("bar", [f"{r['rate_hz']} Hz" for r in relay],
                        {"DPDK / libenet": de, "DPDK / io_uring": du})
    return doc, expect


def make_ramp(rng):
    steps, clients = [25, 100, 300, 50], 200
    capacity = {"tern-socket": 40.0, "libenet": 20.0}
    runs = {}
    for relay, cap in capacity.items():
        runs[relay] = [[{"rate": cap * p / 100, "pct": p, "goodput": rng.uniform(1e4, 5e4),
                         "p99_us": rng.uniform(1e3, 1e5), "ok": True} for p in steps]
                       for _ in range(2)]
    summary = {r: {"capacity_hz": c, "share_200": None, "share_300": 80.0, "p99_before_us": 900,
                   "p99_after_us": 1200, "peak_rss_kib": 5000} for r, c in capacity.items()}
    doc = {"steps": steps, "clients": clients, "step_seconds": 2, "capacity": capacity,
           "runs": runs, "status": {}, "summary": summary}
    thr, p99 = {}, {}
    for relay, rr in runs.items():
        thr[relay] = [[med([rows[k]["rate"] for rows in rr]) * clients * 7,
                       med([rows[k]["goodput"] for rows in rr])] for k in range(len(steps))]
        p99[relay] = [med([rows[k]["p99_us"] for rows in rr]) for k in range(len(steps))]
    return doc, {"throughput": ("line", None, thr),
                 "p99": ("bar", [f"{p:g}%" for p in steps], p99)}


def make_loss(rng):
    stacks = ["libenet", "tern-all", "kcp-nodelay"]

    def game(loss, rtt):
        return {"workload": "game", "hz": 60, "rtt_ms": rtt, "jitter_ms": 0,
                "loss_model": "random", "loss": loss, "id": f"game60 {loss} {rtt}"}

    cases = [game(0.0, 50), game(0.05, 50), game(0.20, 50), game(0.05, 20),
             {"workload": "bulk", "bytes": 4 << 20, "rtt_ms": 50, "jitter_ms": 0,
              "loss_model": "random", "loss": 0.01, "id": "bulk"}]
    for c in cases:
        c["summary"] = {}
        for s in stacks:
            failed = c["rtt_ms"] == 20 and s == "kcp-nodelay"  # no run delivered: no points
            lat = sorted(rng.uniform(1, 500) for _ in range(rng.randint(3, 12)))
            c["summary"][s] = {
                "p50_ms": None if failed else lat[0], "p99_ms": None if failed else lat[-1],
                "p999_ms": None, "max_ms": None, "runs": 3, "runs_ok": 0 if failed else 3,
                "wire_per_delivered": None if failed else rng.uniform(1, 4),
                "goodput_mbit": rng.uniform(1, 20) if c["workload"] == "bulk" else None,
                "cdf": [] if failed else [[v, (k + 1) / len(lat)] for k, v in enumerate(lat)]}
    doc = {"benchmark": "loss_compare", "date_utc": "2026-11-27 00:00", "git_rev": "test",
           "config": {"runs": 3, "mode": "default"}, "stacks": stacks, "cases": cases,
           "goals": [{"goal": "x", "value": 0.2, "target": 1 / 3, "met": True}]}
    expect = {}
    for i in (1, 2):  # the 50 ms group's lossy cases, by index among the game cases
        expect[f"cdf-{i}"] = ("line", None, {s: cases[i]["summary"][s]["cdf"] for s in stacks})
    for g, rtt in ((0, 50), (1, 20)):
        expect[f"p99-{g}"] = ("line", None, {
            s: sorted([c["loss"] * 100, c["summary"][s]["p99_ms"]] for c in cases[:4]
                      if c["rtt_ms"] == rtt and c["summary"][s]["p99_ms"] is not None)
            for s in stacks})
    expect["overhead"] = ("bar", ["0%", "5%", "20%"], {
        s: [c["summary"][s]["wire_per_delivered"] for c in cases[:3]] for s in stacks})
    expect["bulk"] = ("bar", ["1%, RTT 50 ms"], {
        s: [cases[4]["summary"][s]["goodput_mbit"]] for s in stacks})
    return doc, expect


def make_generic(rng):
    pts = [[loss, rng.uniform(0, 100)] for loss in (0, 1, 2, 5, 10)]
    doc = {"report": {"title": "Loss comparison", "notes": "synthetic",
                      "charts": [
                          {"kind": "line", "title": "Goodput against loss", "x_label": "loss (%)",
                           "y_label": "goodput (%)", "series": [{"name": "tern", "points": pts}]},
                          {"kind": "bar", "title": "p99 at 5 % loss", "y_label": "p99 (ms)",
                           "categories": ["tern", "libenet"],
                           "series": [{"name": "p99", "values": [12.5, 40.25]}]}],
                      "table": {"columns": ["relay", "p99 ms"], "rows": [["tern", 12.5]]}}}
    return doc, {"0": ("line", None, {"tern": pts}),
                 "1": ("bar", ["tern", "libenet"], {"p99": [12.5, 40.25]})}


# ---- rendering ---------------------------------------------------------------------------

def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    return None


def browser(exe, args, timeout=120):
    # A profile of its own (no lock shared with any other Chromium), and /tmp instead of a
    # container's small /dev/shm.
    with tempfile.TemporaryDirectory(prefix="tern-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               f"--user-data-dir={profile}", "--hide-scrollbars",
               "--force-device-scale-factor=1", "--virtual-time-budget=10000"] + args
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


WIDTH = 1200  # the same window width for the read-back and the screenshot: the same layout


def readback(exe, page):
    p = browser(exe, ["--dump-dom", f"--window-size={WIDTH},1000", "file://" + page])
    m = re.search(r'<pre id="tern-chart-readback"[^>]*data-ready="1"[^>]*>(.*?)</pre>',
                  p.stdout, re.S)
    if not check(m, f"no chart read-back in the rendered page (chromium exit {p.returncode}: "
                    f"{p.stderr[-400:]})"):
        return []
    return json.loads(html.unescape(m.group(1)))


def png_pixels(path):
    """RGB rows of an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes)."""
    data = open(path, "rb").read()
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack("!I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack("!IIBBBBB", chunk)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError(f"unexpected PNG format depth={depth} type={ctype}")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 0xFF
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def check_drawn(shot, charts, colours_per_chart):
    w, h, bpp, rows = png_pixels(shot)
    for c in charts:
        r = c["rect"]
        x0, y0 = int(r["x"]), int(r["y"])
        x1, y1 = min(w, int(r["x"] + r["w"])), min(h, int(r["y"] + r["h"]))
        if not check(x1 > x0 and y1 > y0, f"{c['id']}: canvas outside the screenshot ({r})"):
            continue
        inked, colours = 0, set()
        for y in range(y0, y1, 2):
            row = rows[y]
            for x in range(x0, x1, 2):
                px = tuple(row[x * bpp:x * bpp + 3])
                if px != (255, 255, 255):
                    inked += 1
                for k, pal in enumerate(PALETTE[:colours_per_chart[c["id"]]]):
                    if all(abs(px[j] - pal[j]) <= 6 for j in range(3)):
                        colours.add(k)
        total = ((x1 - x0 + 1) // 2) * ((y1 - y0 + 1) // 2)
        check(inked > total * 0.01, f"{c['id']}: canvas nearly blank ({inked}/{total} pixels)")
        check(len(colours) == colours_per_chart[c["id"]],
              f"{c['id']}: series colours drawn {sorted(colours)} of "
              f"{colours_per_chart[c['id']]}")


def compare_chart(got, kind, cats, series, label):
    check(got["type"] == kind, f"{label}: type {got['type']} != {kind}")
    check(got["title"] and got["x_title"] is not None and got["y_title"],
          f"{label}: missing title or axis title")
    want = {k: v for k, v in series.items() if v}
    names = [d["label"] for d in got["datasets"]]
    check(sorted(names) == sorted(want), f"{label}: series {names} != {sorted(want)}")
    if kind == "bar":
        check(got["labels"] == cats, f"{label}: categories {got['labels']} != {cats}")
    for d in got["datasets"]:
        check(d["outside"] == 0, f"{label} / {d['label']}: {d['outside']} points drawn outside "
                                 f"the plotting area")
        exp = want.get(d["label"])
        if exp is None:
            continue
        for what in ("data", "parsed"):
            vals = d[what]
            if kind == "line":
                ok = len(vals) == len(exp) and all(close(a[0], b[0]) and close(a[1], b[1])
                                                   for a, b in zip(vals, exp))
            else:
                ok = len(vals) == len(exp) and all(close(a, b) for a, b in zip(vals, exp))
            check(ok, f"{label} / {d['label']}: chart {what} {vals} != JSON {exp}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", required=True)
    ap.add_argument("--screenshot")
    ap.add_argument("--json", nargs="*", default=[])
    args = ap.parse_args()
    exe = chromium()
    if exe is None or not os.path.exists(CHARTJS):
        print("SKIP: needs chromium and libjs-chart.js (scripts/setup.sh installs both)")
        return 77
    seed = 34
    rng = random.Random(seed)
    print(f"seed {seed}", flush=True)
    tmp = tempfile.mkdtemp(prefix="tern-report-")
    inputs = [("compare", make_compare(rng)), ("dpdk_bench", make_dpdk(rng)),
              ("load_ramp", make_ramp(rng)), ("generic", make_generic(rng)),
              ("loss_compare", make_loss(rng))]
    paths = []
    for name, (doc, _) in inputs:
        paths.append(os.path.join(tmp, name + ".json"))
        with open(paths[-1], "w") as f:
            json.dump(doc, f)
    page = os.path.join(tmp, "report.html")
    p = subprocess.run([sys.executable, args.report] + paths + ["-o", page],
                       capture_output=True, text=True, timeout=60)
    if not check(p.returncode == 0, f"report.py exited {p.returncode}: {p.stderr}"):
        return 1
    text = open(page).read()
    check("<script src" not in text and "http://" not in text.split("<script>", 1)[0]
          and "https://cdn" not in text, "the page refers to something outside itself")
    charts = readback(exe, page)
    by_id = {c["id"]: c for c in charts}
    want_ids = set()
    colours = {}
    for i, (name, (_, expect)) in enumerate(inputs):
        for suffix, (kind, cats, series) in expect.items():
            cid = f"s{i}-{suffix}"
            want_ids.add(cid)
            colours[cid] = min(len([v for v in series.values() if v]), len(PALETTE))
            if check(cid in by_id, f"{name}: chart {cid} missing (have {sorted(by_id)})"):
                compare_chart(by_id[cid], kind, cats, series, f"{name} {cid}")
                # Latency CDFs span orders of magnitude: drawn on a log axis.
                want_x = "logarithmic" if "-cdf-" in cid else ("linear" if kind == "line"
                                                               else "category")
                check(by_id[cid].get("x_type") == want_x,
                      f"{cid}: x axis {by_id[cid].get('x_type')} != {want_x}")
                # So do the stacks' p99s against loss (tens of ms to seconds).
                want_y = "logarithmic" if "-p99-" in cid and name == "loss_compare" else "linear"
                check(by_id[cid].get("y_type") == want_y,
                      f"{cid}: y axis {by_id[cid].get('y_type')} != {want_y}")
    check(set(by_id) == want_ids, f"unexpected charts {sorted(set(by_id) - want_ids)}")
    print(f"{len(charts)} charts read back and compared", flush=True)

    height = int(max((c["rect"]["y"] + c["rect"]["h"] for c in charts), default=800)) + 100
    shot = args.screenshot or os.path.join(tmp, "report.png")
    p = browser(exe, [f"--screenshot={shot}", f"--window-size={WIDTH},{height}", "file://" + page])
    if check(os.path.exists(shot), f"no screenshot ({p.stderr[-400:]})"):
        check_drawn(shot, charts, colours)

    # Real results, if given: every chart holds data, the page renders.
    if args.json:
        real = os.path.join(tmp, "real.html")
        p = subprocess.run([sys.executable, args.report] + args.json + ["-o", real],
                           capture_output=True, text=True, timeout=60)
        if check(p.returncode == 0, f"report.py on {args.json}: {p.stderr}"):
            for c in readback(exe, real):
                check(any(d["parsed"] for d in c["datasets"]), f"real {c['id']}: no data")
    # Inputs report.py must refuse with a message naming the file.
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        json.dump({"something": "else"}, f)
    p = subprocess.run([sys.executable, args.report, bad, "-o", os.path.join(tmp, "x.html")],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and bad in p.stderr, f"unknown shape not refused: {p.stderr}")
    p = subprocess.run([sys.executable, args.report], capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "usage" in p.stderr, "no arguments: not usage + exit 2")
    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS" if not failures else f"FAIL ({len(failures)} checks)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
