#!/usr/bin/env python3
"""One self-contained HTML page with charts from the benchmarks' JSON.

    perf/report.py IN.json [IN.json ...] -o report.html [--title TEXT] [--chartjs FILE]

Each input becomes one section of the page; report.py recognises the JSON that
perf/compare (compare.json), perf/dpdk_bench.py (dpdk_bench.json), perf/load_ramp.py
(load_ramp.json) and perf/loss_compare (loss_compare.json) write, and a generic shape any other benchmark can write (perf/README.md,
"Reports"). Charts: throughput against offered load, latency percentiles, ratios against
libenet, latency CDFs and p99 against loss per protocol, and a table of the key figures. Where a benchmark ran several times, points are
medians over the runs, as in the benchmarks' own tables.

Chart.js (Debian's libjs-chart.js, /usr/share/javascript/chart.js/chart.min.js, installed by
scripts/setup.sh) is copied into the page, so it opens from a file with no network. After
drawing, the page writes what each chart holds (read back from the Chart.js objects) as JSON
into <pre id="tern-chart-readback">, which tests/report checks against the input.

Exit 0 on success; 1 with a message naming the file on an input it cannot read; 2 on a bad
command line.
"""
import argparse
import html
import json
import os
import statistics
import sys
import time

CHARTJS_DEFAULT = "/usr/share/javascript/chart.js/chart.min.js"


class InputError(Exception):
    pass


def med(values):
    vals = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(vals) if vals else None


def line_chart(cid, title, x_label, y_label, series, note=""):
    """series: [(name, [(x, y), ...])]; points sorted by x unless the order matters (ramps)."""
    return {"id": cid, "title": title, "kind": "line", "x_label": x_label, "y_label": y_label,
            "note": note,
            "series": [{"name": n, "points": [[x, y] for x, y in pts]} for n, pts in series]}


def bar_chart(cid, title, y_label, categories, series, note="", x_label=""):
    """series: [(name, [value per category])]; None for a missing value."""
    return {"id": cid, "title": title, "kind": "bar", "x_label": x_label, "y_label": y_label,
            "note": note, "categories": list(categories),
            "series": [{"name": n, "values": list(v)} for n, v in series]}


# ---- perf/compare ----------------------------------------------------------------------------

COMPARE_RELAYS = ("tern-socket", "tern-uring", "libenet")
PERCENTILES = ("p50", "p90", "p99", "p99.9")


def from_compare(doc, name):
    runs = [r for r in doc.get("runs", []) if isinstance(r, dict)]
    summary = doc.get("summary") or {}
    deliveries = list((summary.get("saturation") or {}).keys()) or ["unreliable", "reliable"]
    charts = []
    for d in deliveries:
        series = []
        for relay in COMPARE_RELAYS:
            by_offered = {}
            for r in runs:
                if (r.get("phase") == "saturation" and r.get("status") == "ok"
                        and r.get("relay") == relay and r.get("delivery") == d
                        and r.get("offered_copies_per_s") is not None):
                    by_offered.setdefault(r["offered_copies_per_s"], []).append(
                        r.get("delivered_per_s"))
            pts = [(x, med(ys)) for x, ys in sorted(by_offered.items()) if med(ys) is not None]
            if pts:
                series.append((relay, pts))
        if series:
            charts.append(line_chart(
                f"{name}-throughput-{d}", f"Throughput against offered load ({d})",
                "offered copies/s", "delivered copies/s", series,
                "Each point: the median over runs of one rate step of the saturation sweeps."))
    for d in deliveries:
        lat = (summary.get("latency") or {}).get(d) or {}
        series = [(relay, [lat.get(relay, {}).get(f"{p}_us") for p in PERCENTILES])
                  for relay in COMPARE_RELAYS if lat.get(relay, {}).get("runs_ok")]
        if series:
            charts.append(bar_chart(
                f"{name}-latency-{d}", f"Latency at fixed load ({d})", "latency (µs)",
                PERCENTILES, series,
                "Median over runs; the load is about half of libenet's saturation."))
    cats, socket_v, uring_v = [], [], []
    for d in deliveries:
        for part, key, label in (("saturation", "delivered_per_s", "saturation copies/s"),
                                 ("latency", "p50_us", "p50 latency"),
                                 ("latency", "p99_us", "p99 latency")):
            rows = (summary.get(part) or {}).get(d) or {}
            cats.append(f"{d}: {label}")
            socket_v.append((rows.get("tern-socket") or {}).get(f"{key}_vs_libenet"))
            uring_v.append((rows.get("tern-uring") or {}).get(f"{key}_vs_libenet"))
    if any(v is not None for v in socket_v + uring_v):
        charts.append(bar_chart(
            f"{name}-ratios", "Tern against libenet (ratio; 1 = the same)", "× libenet", cats,
            [("tern-socket", socket_v), ("tern-uring", uring_v)],
            "Above 1 is better for throughput, worse for latency."))
    columns = ["delivery", "relay", "saturation copies/s", "× libenet", "p50 µs", "p99 µs",
               "loss % (fixed load)"]
    rows = []
    for d in deliveries:
        for relay in COMPARE_RELAYS:
            s = ((summary.get("saturation") or {}).get(d) or {}).get(relay) or {}
            lat = ((summary.get("latency") or {}).get(d) or {}).get(relay) or {}
            rows.append([d, relay, s.get("delivered_per_s"),
                         1.0 if relay == "libenet" and s.get("delivered_per_s")
                         else s.get("delivered_per_s_vs_libenet"),
                         lat.get("p50_us"), lat.get("p99_us"), lat.get("loss_pct")])
    cfg = doc.get("config") or {}
    notes = (f"perf/compare, {doc.get('date_utc', '?')}, git {doc.get('git_rev', '?')}: "
             f"{cfg.get('clients', '?')} clients in rooms of {cfg.get('room_size', '?')}, "
             f"{cfg.get('size', '?')} B, {cfg.get('runs', '?')} run(s)"
             + (" (quick)" if cfg.get("quick") else "") + ".")
    return {"title": "Relay comparison: tern-relay against libenet", "notes": notes,
            "charts": charts, "table": {"columns": columns, "rows": rows}}


# ---- perf/dpdk_bench.py ----------------------------------------------------------------------

DPDK_TRANSPORTS = (("dpdk", "tern DPDK memif"), ("uring", "tern io_uring"), ("enet", "libenet"))


def from_dpdk_bench(doc, name):
    relay = [r for r in doc.get("relay", []) if isinstance(r, dict)]
    charts = []

    def per_rate(key, transport):
        pts = []
        for r in relay:
            v = med([x.get(key) for x in (r.get(transport) or []) if isinstance(x, dict)])
            if v is not None and r.get("offered") is not None:
                pts.append((r["offered"], v))
        return sorted(pts)

    series = [(label, per_rate("delivered_per_s", t)) for t, label in DPDK_TRANSPORTS]
    series = [s for s in series if s[1]]
    if series:
        charts.append(line_chart(f"{name}-throughput", "Relay throughput against offered load",
                                 "offered copies/s", "delivered copies/s", series,
                                 "Median over runs at each per-client rate."))
    series = [(label, per_rate("p99_us", t)) for t, label in DPDK_TRANSPORTS]
    series = [s for s in series if s[1]]
    if series:
        charts.append(line_chart(f"{name}-relay-p99", "Relay p99 latency against offered load",
                                 "offered copies/s", "p99 latency (µs)", series,
                                 "Median over runs at each per-client rate."))
    ping = doc.get("ping") or {}
    series = []
    for t, label in (("dpdk", "DPDK memif"), ("uring", "io_uring loopback")):
        rows = [x for x in ping.get(t) or [] if isinstance(x, dict)]
        if rows:
            series.append((label, [med([x.get("p50_us") for x in rows]),
                                   med([x.get("p99_us") for x in rows])]))
    if series:
        charts.append(bar_chart(f"{name}-ping", "Ping-pong round trip (tern-ping, busy poll)",
                                "round trip (µs)", ["p50", "p99"], series, "Median over runs."))
    ratio_d_e, ratio_d_u, cats = [], [], []
    for r in relay:
        d = med([x.get("delivered_per_s") for x in r.get("dpdk") or [] if isinstance(x, dict)])
        e = med([x.get("delivered_per_s") for x in r.get("enet") or [] if isinstance(x, dict)])
        u = med([x.get("delivered_per_s") for x in r.get("uring") or [] if isinstance(x, dict)])
        cats.append(f"{r.get('rate_hz')} Hz")
        ratio_d_e.append(d / e if d and e else None)
        ratio_d_u.append(d / u if d and u else None)
    if any(v is not None for v in ratio_d_e + ratio_d_u):
        charts.append(bar_chart(f"{name}-ratios", "DPDK against libenet and io_uring (ratio)",
                                "× delivered copies/s", cats,
                                [("DPDK / libenet", ratio_d_e), ("DPDK / io_uring", ratio_d_u)],
                                "Medians of delivered copies/s at each per-client rate.",
                                x_label="per-client rate"))
    best, sustained = doc.get("best") or {}, doc.get("sustained") or {}
    rows = [[label, best.get(t), sustained.get(t),
             (best.get(t) / best["enet"]) if best.get(t) and best.get("enet") else None]
            for t, label in DPDK_TRANSPORTS]
    return {"title": "DPDK against io_uring and libenet (perf/dpdk_bench.py)",
            "notes": f"{doc.get('runs', '?')} run(s); client acks: "
                     f"{doc.get('client_ack_delay', '?')}.",
            "charts": charts,
            "table": {"columns": ["transport", "best delivered copies/s",
                                  "sustained (lossless) copies/s", "best × libenet"],
                      "rows": rows}}


# ---- perf/load_ramp.py -----------------------------------------------------------------------

LOAD_RAMP_FANOUT = 7  # rooms of 8


def from_load_ramp(doc, name):
    steps = doc.get("steps") or []
    clients = doc.get("clients") or 0
    capacity = doc.get("capacity") or {}
    runs = doc.get("runs") or {}
    charts = []
    through, p99 = [], []
    for relay, relay_runs in runs.items():
        relay_runs = [rows for rows in relay_runs if isinstance(rows, list)]
        pts, lat = [], []
        for k, pct in enumerate(steps):
            rows = [rows[k] for rows in relay_runs if k < len(rows) and isinstance(rows[k], dict)]
            good = med([r.get("goodput") for r in rows])
            rate = med([r.get("rate") for r in rows])
            lat.append(med([r.get("p99_us") for r in rows]))
            if good is not None and rate is not None:
                pts.append((rate * clients * LOAD_RAMP_FANOUT, good))
        if pts:
            through.append((relay, pts))
        p99.append((relay, lat))
    if through:
        charts.append(line_chart(
            f"{name}-throughput", "Goodput against offered load, in ramp order",
            "offered copies/s", "goodput (copies/s)", through,
            "Points joined in the order of the steps: the load rises past capacity and falls "
            "again. Median over runs."))
    if any(v is not None for _, vs in p99 for v in vs):
        charts.append(bar_chart(f"{name}-p99", "p99 latency per step", "p99 latency (µs)",
                                [f"{p:g}%" for p in steps], p99,
                                "The worst second of each step; median over runs.",
                                x_label="offered load (% of the relay's capacity)"))
    summary = doc.get("summary") or {}
    rows = []
    for relay, s in summary.items():
        rows.append([relay, capacity.get(relay), s.get("share_200"), s.get("share_300"),
                     s.get("p99_before_us"), s.get("p99_after_us"), s.get("peak_rss_kib")])
    return {"title": "Load ramp past capacity (perf/load_ramp.py)",
            "notes": f"{clients} clients, rooms of 8, steps {steps} % of capacity, "
                     f"{doc.get('step_seconds', '?')} s each.",
            "charts": charts,
            "table": {"columns": ["relay", "capacity (Hz per client)", "goodput at 200 % (% of peak)",
                                  "goodput at 300 % (% of peak)", "p99 before (µs)",
                                  "p99 after the fall (µs)", "peak RSS (KiB)"],
                      "rows": rows}}


# ---- perf/loss_compare -----------------------------------------------------------------------

def loss_group(c):
    return (c.get("hz"), c.get("rtt_ms"), c.get("jitter_ms"), c.get("loss_model"))


def loss_group_name(g):
    hz, rtt, jitter, model = g
    return f"game{hz}, RTT {rtt} ms, jitter {jitter} ms, {model} loss"


def from_loss_compare(doc, name):
    stacks = [s for s in doc.get("stacks", []) if isinstance(s, str)]
    cases = [c for c in doc.get("cases", []) if isinstance(c, dict)]
    game = [c for c in cases if c.get("workload") == "game"]
    bulk = [c for c in cases if c.get("workload") == "bulk"]
    groups = []
    for c in game:
        if loss_group(c) not in groups:
            groups.append(loss_group(c))
    # The page leads with the group issue 30's goals are stated for, when the run has it.
    main = (60, 50, 0, "random") if (60, 50, 0, "random") in groups else (groups or [None])[0]

    def stat(c, stack, key):
        return ((c.get("summary") or {}).get(stack) or {}).get(key)

    def pct(c):
        return f"{c.get('loss', 0) * 100:g}%"

    charts = []
    for i, c in enumerate(game):
        if loss_group(c) != main or not c.get("loss"):
            continue
        # A log axis: the stacks' tails differ by orders of magnitude (KCP's normal mode
        # queues seconds where the others take tens of milliseconds); it cannot show 0.
        series = [(s, [(max(p[0], 0.001), p[1]) for p in stat(c, s, "cdf") or []])
                  for s in stacks]
        series = [x for x in series if x[1]]
        if series:
            chart = line_chart(
                f"{name}-cdf-{i}", f"Delivery latency CDF: {c.get('id', '')}",
                "latency (ms, log scale)", "fraction of messages delivered", series,
                "Every timed message of every run, pooled.")
            chart["x_scale"] = "logarithmic"
            charts.append(chart)
    for g, group in enumerate(groups):
        series = []
        for s in stacks:
            pts = [(c.get("loss", 0) * 100, stat(c, s, "p99_ms")) for c in game
                   if loss_group(c) == group and stat(c, s, "p99_ms") is not None]
            if pts:
                series.append((s, sorted(pts)))
        if series:
            chart = line_chart(
                f"{name}-p99-{g}", f"p99 delivery latency against loss ({loss_group_name(group)})",
                "loss each way (%)", "p99 latency (ms, log scale)", series,
                "Median of the runs' p99.")
            chart["y_scale"] = "logarithmic"  # tens of ms to seconds
            charts.append(chart)
    main_cases = [c for c in game if loss_group(c) == main]
    if main_cases:
        charts.append(bar_chart(
            f"{name}-overhead", f"Bytes on the wire per delivered byte ({loss_group_name(main)})",
            "wire bytes / payload byte", [pct(c) for c in main_cases],
            [(s, [stat(c, s, "wire_per_delivered") for c in main_cases]) for s in stacks],
            "Both directions, UDP payload plus 28 B of IPv4/UDP header per datagram; median "
            "of the runs.", x_label="loss each way"))
    if bulk:
        cats = [f"{pct(c)}, RTT {c.get('rtt_ms')} ms" for c in bulk]
        charts.append(bar_chart(
            f"{name}-bulk", f"Bulk goodput ({(bulk[0].get('bytes') or 0) >> 10} KiB reliable)",
            "goodput (Mbit/s)", cats,
            [(s, [stat(c, s, "goodput_mbit") for c in bulk]) for s in stacks],
            "Payload over the time from the first send to the last arrival; median of the "
            "runs.", x_label="loss each way, round trip"))
    columns = ["case", "stack", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "goodput Mbit/s",
               "wire / delivered B", "runs ok"]
    rows = []
    for c in cases:
        for s in stacks:
            rows.append([c.get("id", ""), s, stat(c, s, "p50_ms"), stat(c, s, "p99_ms"),
                         stat(c, s, "p999_ms"), stat(c, s, "max_ms"), stat(c, s, "goodput_mbit"),
                         stat(c, s, "wire_per_delivered"),
                         f"{stat(c, s, 'runs_ok')}/{stat(c, s, 'runs')}"])
    cfg = doc.get("config") or {}
    goals = []
    for g in doc.get("goals") or []:
        if isinstance(g, dict):
            v = g.get("value")
            verdict = {True: "met", False: "missed"}.get(g.get("met"), "no figure")
            goals.append(f"{g.get('goal')}: {'-' if v is None else f'{v:.3f}'} "
                         f"(target {g.get('target')}, {verdict})")
    notes = (f"perf/loss_compare, {doc.get('date_utc', '?')}, git {doc.get('git_rev', '?')}: "
             f"{cfg.get('mode', '?')} grid, medians of {cfg.get('runs', '?')} run(s), "
             f"{cfg.get('game_seconds', '?')} s of game stream after {cfg.get('warmup_s', '?')} s "
             "of warm-up." + (" Goals: " + "; ".join(goals) + "." if goals else ""))
    return {"title": "Latency under loss: Tern, libenet and KCP (perf/loss_compare)",
            "notes": notes, "charts": charts, "table": {"columns": columns, "rows": rows}}


# ---- the generic shape -----------------------------------------------------------------------

def from_generic(doc, name):
    rep = doc["report"]
    if not isinstance(rep, dict) or not isinstance(rep.get("charts", []), list):
        raise InputError("'report' must be an object with a 'charts' list")
    charts = []
    for i, c in enumerate(rep.get("charts", [])):
        where = f"report.charts[{i}]"
        if not isinstance(c, dict) or c.get("kind") not in ("line", "bar"):
            raise InputError(f"{where}: 'kind' must be 'line' or 'bar'")
        series = c.get("series")
        if not isinstance(series, list) or not series:
            raise InputError(f"{where}: 'series' must be a non-empty list")
        cid = f"{name}-{i}"
        if c["kind"] == "line":
            out = []
            for s in series:
                pts = s.get("points") if isinstance(s, dict) else None
                if not isinstance(pts, list) or not all(
                        isinstance(p, list) and len(p) == 2 for p in pts):
                    raise InputError(f"{where}: each series needs 'points': [[x, y], ...]")
                out.append((str(s.get("name", "")), [tuple(p) for p in pts]))
            charts.append(line_chart(cid, c.get("title", ""), c.get("x_label", ""),
                                     c.get("y_label", ""), out, c.get("note", "")))
        else:
            cats = c.get("categories")
            if not isinstance(cats, list):
                raise InputError(f"{where}: a bar chart needs 'categories'")
            out = []
            for s in series:
                vals = s.get("values") if isinstance(s, dict) else None
                if not isinstance(vals, list) or len(vals) != len(cats):
                    raise InputError(f"{where}: each series needs one value per category")
                out.append((str(s.get("name", "")), vals))
            charts.append(bar_chart(cid, c.get("title", ""), c.get("y_label", ""), cats, out,
                                    c.get("note", ""), c.get("x_label", "")))
    table = rep.get("table") or {"columns": [], "rows": []}
    return {"title": rep.get("title", name), "notes": rep.get("notes", ""), "charts": charts,
            "table": {"columns": list(table.get("columns", [])),
                      "rows": [list(r) for r in table.get("rows", [])]}}


def recognise(doc):
    if not isinstance(doc, dict):
        return None
    if "report" in doc:
        return from_generic
    if doc.get("benchmark") == "compare" and "summary" in doc:
        return from_compare
    if doc.get("benchmark") == "loss_compare" and isinstance(doc.get("cases"), list):
        return from_loss_compare
    if isinstance(doc.get("relay"), list) and "ping" in doc and "best" in doc:
        return from_dpdk_bench
    if isinstance(doc.get("steps"), list) and isinstance(doc.get("runs"), dict):
        return from_load_ramp
    return None


# ---- the page --------------------------------------------------------------------------------

PAGE_CSS = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
.chart { margin: 1.5em 0; } .chart canvas { width: 100%; height: 380px; }
.note, .source { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; } td.num { text-align: right; }
"""

# Builds every chart from the embedded model, then publishes what the charts hold, read back
# from the Chart.js objects (not from the model), for tests/report.
PAGE_JS = r"""
(function () {
  const model = JSON.parse(document.getElementById('tern-report-data').textContent);
  const palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#17becf'];
  const charts = [];
  const fmt = v => (typeof v === 'number') ? v.toLocaleString('en-US', {maximumFractionDigits: 3}) : v;
  for (const section of model.sections) {
    for (const c of section.charts) {
      const canvas = document.getElementById('canvas-' + c.id);
      const axes = {
        x: {title: {display: true, text: c.x_label}},
        y: {title: {display: true, text: c.y_label}, beginAtZero: true},
      };
      let config;
      if (c.y_scale) axes.y.type = c.y_scale;
      if (c.kind === 'line') {
        axes.x.type = c.x_scale || 'linear';
        config = {type: 'line', data: {datasets: c.series.map((s, i) => ({
          label: s.name, data: s.points.map(p => ({x: p[0], y: p[1]})),
          borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length],
          pointRadius: 4, showLine: true, tension: 0}))}};
      } else {
        config = {type: 'bar', data: {labels: c.categories, datasets: c.series.map((s, i) => ({
          label: s.name, data: s.values, backgroundColor: palette[i % palette.length]}))}};
      }
      // Default parsing, not parsing: false: Chart.js assumes pre-parsed line data sorted by
      // x, and a ramp's points are in step order.
      config.options = {animation: false, responsive: false,
        plugins: {title: {display: true, text: c.title, font: {size: 16}}, legend: {position: 'bottom'},
                  tooltip: {callbacks: {label: ctx => ctx.dataset.label + ': ' + fmt(ctx.parsed.y)}}},
        scales: axes};
      charts.push({id: c.id, kind: c.kind, chart: new Chart(canvas, config), canvas: canvas});
    }
  }
  const readback = charts.map(({id, kind, chart, canvas}) => {
    const r = canvas.getBoundingClientRect();
    return {
      id: id, kind: kind, type: chart.config.type,
      title: chart.options.plugins.title.text,
      x_title: chart.options.scales.x.title.text, y_title: chart.options.scales.y.title.text,
      x_type: chart.scales.x.type, y_type: chart.scales.y.type,
      labels: chart.data.labels || null,
      datasets: chart.data.datasets.map((d, i) => ({
        label: d.label,
        data: d.data.map(p => (p !== null && typeof p === 'object') ? [p.x, p.y] : p),
        // What the chart plots: its controller's parsed values, one per drawn element.
        // Points or bar ends the chart placed outside its plotting area (a scale that does
        // not cover the data).
        outside: chart.getDatasetMeta(i).data.filter(e => Number.isFinite(e.x) && Number.isFinite(e.y) &&
          (e.x < chart.chartArea.left - 1 || e.x > chart.chartArea.right + 1 ||
           e.y < chart.chartArea.top - 1 || e.y > chart.chartArea.bottom + 1)).length,
        parsed: chart.getDatasetMeta(i).data.map((_, j) => {
          const v = chart.getDatasetMeta(i).controller.getParsed(j);
          return kind === 'line' ? [v.x, v.y] : (Number.isFinite(v.y) ? v.y : null);
        }),
      })),
      rect: {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height},
    };
  });
  const out = document.getElementById('tern-chart-readback');
  out.textContent = JSON.stringify(readback);
  out.setAttribute('data-ready', '1');
})();
"""


def fmt_cell(v):
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def script_json(obj):
    # "</" would end the <script> element early.
    return json.dumps(obj).replace("</", "<\\/")


def render(sections, title, chartjs):
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p class='source'>Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
            f"by perf/report.py from {', '.join(html.escape(s['source']) for s in sections)}."
            f" Hover a point for its value.</p>"]
    for s in sections:
        body.append(f"<h2>{html.escape(s['title'])}</h2>")
        body.append(f"<p class='source'>{html.escape(s['source'])}: {html.escape(s['notes'])}</p>")
        t = s["table"]
        if t["columns"]:
            body.append("<table><tr>" + "".join(f"<th>{html.escape(str(c))}</th>"
                                                for c in t["columns"]) + "</tr>")
            for row in t["rows"]:
                body.append("<tr>" + "".join(
                    f"<td class='{'num' if isinstance(v, (int, float)) else ''}'>"
                    f"{html.escape(fmt_cell(v))}</td>" for v in row) + "</tr>")
            body.append("</table>")
        if not s["charts"]:
            body.append("<p class='note'>No chartable data in this input.</p>")
        for c in s["charts"]:
            body.append(f"<div class='chart'><canvas id='canvas-{html.escape(c['id'])}' "
                        f"width='1000' height='380'></canvas>"
                        + (f"<p class='note'>{html.escape(c['note'])}</p>" if c["note"] else "")
                        + "</div>")
    model = {"sections": [{"title": s["title"], "charts": s["charts"]} for s in sections]}
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{PAGE_CSS}</style>"
            f"<script>{chartjs}</script></head><body>\n" + "\n".join(body)
            + f"\n<pre id='tern-chart-readback' hidden></pre>"
            f"\n<script type='application/json' id='tern-report-data'>{script_json(model)}</script>"
            f"\n<script>{PAGE_JS}</script>\n</body></html>\n")


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="report.py", description="HTML report with charts from benchmark JSON.")
    ap.add_argument("inputs", nargs="+", metavar="IN.json")
    ap.add_argument("-o", "--out", required=True, metavar="report.html")
    ap.add_argument("--title", default="Tern benchmark report")
    ap.add_argument("--chartjs", default=CHARTJS_DEFAULT,
                    help=f"Chart.js UMD build to inline (default {CHARTJS_DEFAULT})")
    args = ap.parse_args(argv)
    try:
        with open(args.chartjs, encoding="utf-8") as f:
            chartjs = f.read()
    except OSError as e:
        print(f"report.py: cannot read Chart.js at {args.chartjs}: {e.strerror} "
              f"(apt-get install libjs-chart.js; scripts/setup.sh does)", file=sys.stderr)
        return 1
    if "</script" in chartjs.lower():
        print(f"report.py: {args.chartjs} contains '</script' and cannot be inlined",
              file=sys.stderr)
        return 1
    sections = []
    for i, path in enumerate(args.inputs):
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except OSError as e:
            print(f"report.py: {path}: {e.strerror}", file=sys.stderr)
            return 1
        except ValueError as e:
            print(f"report.py: {path}: not JSON ({e})", file=sys.stderr)
            return 1
        convert = recognise(doc)
        if convert is None:
            print(f"report.py: {path}: not a shape report.py knows (perf/compare, "
                  f"perf/dpdk_bench.py, perf/load_ramp.py, perf/loss_compare, or a generic {{\"report\": ...}}; "
                  f"perf/README.md)", file=sys.stderr)
            return 1
        try:
            section = convert(doc, f"s{i}")
        except (InputError, AttributeError, TypeError, KeyError) as e:
            print(f"report.py: {path}: {e}", file=sys.stderr)
            return 1
        section["source"] = os.path.basename(path)
        sections.append(section)
    page = render(sections, args.title, chartjs)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(page)
    n = sum(len(s["charts"]) for s in sections)
    print(f"wrote {args.out}: {len(sections)} section(s), {n} chart(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
