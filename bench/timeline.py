#!/usr/bin/env python3
"""Draws the timeline of a pipelined run from an Nsight Systems SQLite export, as SVG.

    python3 bench/timeline.py stream.sqlite docs/stream-timeline.svg [--title TEXT]
    python3 bench/timeline.py --self-test

The input is `nsys export --type sqlite` of a report taken with `nsys profile -t cuda,nvtx`
(run.sh's `nsys` mode writes one as stream.sqlite). The drawing covers berth's first
`pipeline …` NVTX range and the GPU work queued inside it: one row per CUDA stream with each
copy and kernel (blue host→device, orange device→host, green kernels), each labelled with the
innermost NVTX range its API call was made in (`chunk 3/16 …`: the projection Nsight Systems
shows on the GPU rows), and one row per host thread with berth's NVTX ranges themselves.
Only the Python standard library is needed.
"""

import argparse
import sqlite3
import sys
from xml.sax.saxutils import escape

COPY_KINDS = {1: ("HtoD", "#3b82f6"), 2: ("DtoH", "#f59e0b")}
KERNEL_COLOR = "#76b900"
OTHER_COLOR = "#94a3b8"


def tables(db):
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def columns(db, table):
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def nvtx_ranges(db):
    """Push/pop and start/end ranges: (start, end, text, globalTid)."""
    cols = columns(db, "NVTX_EVENTS")
    text = "e.text"
    if "textId" in cols and "StringIds" in tables(db):
        text = "COALESCE(e.text, (SELECT value FROM StringIds WHERE id = e.textId))"
    rows = db.execute(
        f"SELECT e.start, e.end, {text}, e.globalTid FROM NVTX_EVENTS e "
        "WHERE e.end IS NOT NULL AND e.end >= e.start AND e.eventType IN (59, 60) "
        "ORDER BY e.start"
    )
    return [(s, e, t or "", tid) for s, e, t, tid in rows]


def api_calls(db):
    """CUDA API calls by correlation id: (start, globalTid)."""
    calls = {}
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in tables(db):
            for corr, start, tid in db.execute(
                f"SELECT correlationId, start, globalTid FROM {table}"
            ):
                calls[corr] = (start, tid)
    return calls


def gpu_ops(db):
    """Kernels and copies: (start, end, streamId, kind, label, color, correlationId)."""
    ops = []
    names = {}
    if "StringIds" in tables(db):
        names = dict(db.execute("SELECT id, value FROM StringIds"))
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables(db):
        for s, e, stream, name, corr in db.execute(
            "SELECT start, end, streamId, shortName, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ):
            ops.append((s, e, stream, "kernel", names.get(name, str(name)), KERNEL_COLOR, corr))
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables(db):
        for s, e, stream, kind, nbytes, corr in db.execute(
            "SELECT start, end, streamId, copyKind, bytes, correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            label, color = COPY_KINDS.get(kind, ("copy", OTHER_COLOR))
            ops.append((s, e, stream, "copy", f"{label} {size(nbytes)}", color, corr))
    return sorted(ops)


def size(nbytes):
    """A byte count in the largest binary unit it reaches."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} B"


def innermost(ranges, tid, t):
    """The innermost (latest-starting) range of thread `tid` open at time `t`."""
    best = None
    for s, e, text, rtid in ranges:
        if rtid == tid and s <= t <= e and (best is None or s >= best[0]):
            best = (s, e, text)
    return best


def depths(ranges):
    """Nesting depth of each range within its thread."""
    out, stacks = [], {}
    for s, e, text, tid in ranges:
        stack = stacks.setdefault(tid, [])
        while stack and stack[-1] < s:
            stack.pop()
        out.append(len(stack))
        stack.append(e)
    return out


def render(db, title, name="pipeline", occurrence=1):
    ranges = nvtx_ranges(db)
    matching = [r for r in ranges if r[2].startswith("pipeline") and name in r[2]]
    index = occurrence - 1 if occurrence > 0 else len(matching) + occurrence
    if not 0 <= index < len(matching):
        raise SystemExit(f"no berth `pipeline …` NVTX range containing {name!r} (occurrence {occurrence}) in this report")
    pipeline = matching[index]
    calls = api_calls(db)
    ops = []
    for op in gpu_ops(db):
        call = calls.get(op[6])
        if call is None or not (pipeline[0] <= call[0] <= pipeline[1]):
            continue
        if call[1] != pipeline[3]:
            continue
        inner = innermost(ranges, call[1], call[0])
        ops.append(op + ((inner[2] if inner else ""),))
    if not ops:
        raise SystemExit("no GPU work was queued inside the pipeline range")
    t0 = pipeline[0]
    t1 = max(max(op[1] for op in ops), pipeline[1])
    host = [(r, d) for r, d in zip(ranges, depths(ranges)) if r[0] <= t1 and r[1] >= t0]
    streams = sorted({op[2] for op in ops})
    threads = sorted({r[3] for r, _ in host})
    levels = {tid: 1 + max(d for r, d in host if r[3] == tid) for tid in threads}

    width, left, right, top = 1100, 150, 20, 46
    row_h, gap = 26, 10
    plot_w = width - left - right
    x = lambda t: left + (t - t0) * plot_w / max(t1 - t0, 1)
    rows = len(streams) * (row_h + gap) + sum(levels[t] * (row_h - 8) + gap for t in threads)
    height = top + rows + 60
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="20" font-size="14">{escape(title)}</text>',
        f'<text x="{left}" y="36" fill="#555">{escape(pipeline[2])}: '
        f'{(t1 - t0) / 1e6:.1f} ms from the first chunk queued to the last copy back</text>',
    ]

    def bar(x0, x1, y, h, color, label, tip):
        w = max(x1 - x0, 0.5)
        svg.append(
            f'<rect x="{x0:.2f}" y="{y}" width="{w:.2f}" height="{h}" fill="{color}" '
            f'stroke="white" stroke-width="0.3"><title>{escape(tip)}</title></rect>'
        )
        if w > 6.5 * len(label) and label:
            svg.append(
                f'<text x="{x0 + 3:.2f}" y="{y + h - 5}" fill="white">{escape(label)}</text>'
            )

    y = top
    for stream in streams:
        svg.append(f'<text x="{left - 8}" y="{y + row_h - 9}" text-anchor="end">GPU stream {stream}</text>')
        for op in ops:
            s, e, st, kind, label, color, corr, inner = op
            if st != stream:
                continue
            short = inner.split(" ")[1] if inner.startswith("chunk ") else ""
            tip = f"{label} ({kind}, {(e - s) / 1e3:.0f} µs) in NVTX range \"{inner}\""
            bar(x(s), x(e), y, row_h, color, short, tip)
        y += row_h + gap
    for tid in threads:
        h = row_h - 8
        svg.append(
            f'<text x="{left - 8}" y="{y + h - 5}" text-anchor="end">host thread {tid & 0xFFFFFF} (NVTX)</text>'
        )
        for (s, e, text, rtid), d in host:
            if rtid != tid:
                continue
            s, e = max(s, t0), min(e, t1)
            bar(x(s), x(e), y + d * h, h - 1, "#a855f7" if text.startswith("chunk") else "#64748b",
                text, f"{text} ({(e - s) / 1e3:.1f} µs)")
        y += levels[tid] * h + gap
    # Time axis.
    svg.append(f'<line x1="{left}" y1="{y}" x2="{left + plot_w}" y2="{y}" stroke="black"/>')
    span_ms = (t1 - t0) / 1e6
    step = next(s for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1e9) if span_ms / s <= 10)
    k = 0
    while k * step <= span_ms + 1e-9:
        tx = x(t0 + k * step * 1e6)
        svg.append(f'<line x1="{tx:.2f}" y1="{y}" x2="{tx:.2f}" y2="{y + 4}" stroke="black"/>')
        svg.append(f'<text x="{tx:.2f}" y="{y + 16}" text-anchor="middle">{k * step:g} ms</text>')
        k += 1
    legend = [("host→device copy", COPY_KINDS[1][1]), ("kernel", KERNEL_COLOR),
              ("device→host copy", COPY_KINDS[2][1]), ("NVTX range", "#64748b")]
    lx = left
    for name, color in legend:
        svg.append(f'<rect x="{lx}" y="{y + 28}" width="12" height="12" fill="{color}"/>')
        svg.append(f'<text x="{lx + 16}" y="{y + 38}">{escape(name)}</text>')
        lx += 30 + 7 * len(name)
    svg.append("</svg>")
    return "\n".join(svg) + "\n", ops


def self_test():
    """A tiny report in the export's shape: two chunks on two streams."""
    db = sqlite3.connect(":memory:")
    db.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT,
                                  globalTid INT, domainId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, correlationId INT,
                                                  globalTid INT, nameId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, streamId INT, shortName INT,
                                                 correlationId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT, end INT, streamId INT, copyKind INT,
                                                 bytes INT, correlationId INT);
        INSERT INTO StringIds VALUES (1, 'affine_one'), (2, 'chunk 2/2 affine_one');
        INSERT INTO NVTX_EVENTS VALUES
          (1000, 9000, 59, 'pipeline affine_one: 2 chunks on 2 streams', NULL, 7, 1),
          (1100, 1900, 59, 'chunk 1/2 affine_one', NULL, 7, 1),
          (2000, 2900, 59, NULL, 2, 7, 1),
          (900000, 960000, 59, 'launch other', NULL, 7, 1);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES
          (1200, 1250, 1, 7, 0), (1300, 1350, 2, 7, 0), (1400, 1450, 3, 7, 0),
          (2100, 2150, 4, 7, 0), (2200, 2250, 5, 7, 0), (2300, 2350, 6, 7, 0),
          (900100, 900200, 7, 7, 0);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES
          (1300, 400000, 13, 1, 33554432, 1), (420000, 800000, 13, 2, 33554432, 3),
          (2400, 410000, 14, 1, 33554432, 4), (430000, 820000, 14, 2, 33554432, 6),
          (900300, 900400, 13, 1, 4, 7);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
          (400000, 420000, 13, 1, 2), (410000, 430000, 14, 1, 5), (900500, 900600, 13, 1, 7);
        """
    )
    svg, ops = render(db, "self-test")
    # The work queued inside the pipeline range only, each labelled with its chunk.
    assert len(ops) == 6, ops
    assert [op[7] for op in ops if op[2] == 13] == ["chunk 1/2 affine_one"] * 3, ops
    assert [op[7] for op in ops if op[2] == 14] == ["chunk 2/2 affine_one"] * 3, ops
    assert "GPU stream 13" in svg and "GPU stream 14" in svg, svg
    assert "HtoD 32 MiB" in svg and "chunk 2/2 affine_one" in svg, svg
    assert "launch other" not in svg, svg
    assert size(4) == "4 B" and size(1536) == "1.5 KiB" and size(3 << 30) == "3 GiB"
    assert "0.8 ms from the first chunk" in svg, svg
    print("timeline.py self-test: 1 passed, 0 failed")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sqlite", nargs="?")
    p.add_argument("svg", nargs="?")
    p.add_argument("--title", default="berth's stream example in Nsight Systems, H200")
    p.add_argument("--range", default="pipeline",
                   help="draw the pipeline range whose name contains this (default: any)")
    p.add_argument("--occurrence", type=int, default=1,
                   help="which of the matching ranges: 1 the first, -1 the last")
    p.add_argument("--self-test", action="store_true")
    a = p.parse_args()
    if a.self_test:
        self_test()
        return
    if not a.sqlite or not a.svg:
        p.error("give the sqlite export and the SVG to write")
    svg, ops = render(sqlite3.connect(a.sqlite), a.title, a.range, a.occurrence)
    with open(a.svg, "w") as f:
        f.write(svg)
    print(f"{a.svg}: {len(ops)} copies and kernels on {len({o[2] for o in ops})} streams")


if __name__ == "__main__":
    sys.exit(main())
