#!/usr/bin/env python3
"""What users run today on the same TPC-H queries as the `tpch` example, on the same machine.

Usage: python3 anchor.py SF [THREADS]   (needs duckdb, tpchgen-cli and numpy; torch with CUDA
for the PyTorch lines). Prints one JSON object a line:
- duckdb: Q1, Q6, Q12 and Q14 on DuckDB's own in-memory tables (THREADS threads, default 16),
  the median of five runs after one, and each answer's exact values as the `tpch` example's
  `answer` field prints them (decimals at their SQL scale), so the two can be compared;
- torch_pinned / torch_pageable / torch_resident: Q1 and Q6 in PyTorch over the columns held
  as a GPU user holds them (scaled int64 decimals, int32 days, uint8 flags): copied from
  pinned or pageable host memory then computed, or computed on columns already on the GPU;
- link_bound: the bytes of those raw columns over 55 GB/s.
The tables are generated once into $TPCH_DIR/tpch<SF>/ (default: the temporary directory).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import duckdb
import numpy as np

sf = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 16
folder = os.path.join(os.environ.get("TPCH_DIR", tempfile.gettempdir()), f"tpch{sf:g}")


def out(**k):
    print(json.dumps(k), flush=True)


def median_ms(f, reps=5):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


t = time.time()
if not all(os.path.exists(f"{folder}/{n}.parquet") for n in ("lineitem", "orders", "part")):
    subprocess.run(["tpchgen-cli", "parquet", "-s", f"{sf:g}", "--tables=lineitem,orders,part",
                    f"--output-dir={folder}"], check=True)
out(step="generate", sf=sf, s=round(time.time() - t, 1))

con = duckdb.connect()
con.execute(f"SET threads={threads}")
t = time.time()
for n in ("lineitem", "orders", "part"):
    con.execute(f"CREATE TABLE {n} AS SELECT * FROM read_parquet('{folder}/{n}.parquet')")
rows = con.execute("SELECT count(*) FROM lineitem").fetchone()[0]
out(step="duckdb_load", rows=rows, s=round(time.time() - t, 1))

# The spec's queries with their validation parameters; Q1 without the averages and Q14's two
# sums instead of their ratio, so that every value is exact.
QUERIES = {
    "q1": """SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
       sum(l_extendedprice * (1 - l_discount)), sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)),
       sum(l_discount), count(*)
     FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY
     GROUP BY 1, 2 ORDER BY 1, 2""",
    "q6": """SELECT sum(l_extendedprice * l_discount) FROM lineitem
     WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
       AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
    "q12": """SELECT l_shipmode,
       sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END),
       sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END)
     FROM orders, lineitem
     WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP')
       AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
       AND l_receiptdate >= DATE '1994-01-01' AND l_receiptdate < DATE '1995-01-01'
     GROUP BY l_shipmode ORDER BY l_shipmode""",
    "q14": """SELECT sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END),
       sum(l_extendedprice * (1 - l_discount))
     FROM lineitem, part
     WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'""",
}
for name, q in QUERIES.items():
    answer = [" ".join(str(v) for v in row) for row in con.execute(q).fetchall()]
    ms = median_ms(lambda: con.execute(q).fetchall())
    out(impl="duckdb", query=name, sf=sf, threads=threads, ms=round(ms, 3), answer=answer)

try:
    import torch
    if not torch.cuda.is_available():
        raise ImportError("no CUDA device")
except ImportError as e:
    out(note=f"PyTorch lines skipped: {e}")
    sys.exit(0)

cols = con.execute("""SELECT (l_quantity * 100)::BIGINT q, (l_extendedprice * 100)::BIGINT p,
    (l_discount * 100)::BIGINT di, (l_tax * 100)::BIGINT tx, (l_shipdate - DATE '1970-01-01')::INTEGER sd,
    ascii(l_returnflag)::UTINYINT rf, ascii(l_linestatus)::UTINYINT ls FROM lineitem""").fetchnumpy()
cols = {k: np.ascontiguousarray(v) for k, v in cols.items()}


def day(s):
    return int((np.datetime64(s) - np.datetime64("1970-01-01")).astype(int))


def q6(c):
    m = (c["sd"] >= day("1994-01-01")) & (c["sd"] < day("1995-01-01")) & (c["di"] >= 5) & (c["di"] <= 7) & (c["q"] < 2400)
    return (c["p"] * c["di"] * m).sum()


def q1(c):
    m = c["sd"] <= day("1998-09-02")
    key = (c["rf"].to(torch.int64) * 256 + c["ls"].to(torch.int64)) * m
    p = c["p"]
    disc = p * (100 - c["di"])
    charge = disc * (100 + c["tx"])
    sums = []
    for v in (c["q"] * m, p * m, disc * m, charge * m, c["di"] * m, m.to(torch.int64)):
        sums.append(torch.zeros(65536, dtype=torch.int64, device=v.device).index_add_(0, key, v))
    return sums


dev = torch.device("cuda")
for name, f, need in (("q6", q6, ["sd", "di", "q", "p"]), ("q1", q1, ["sd", "rf", "ls", "q", "p", "di", "tx"])):
    host = {k: torch.from_numpy(cols[k]) for k in need}
    nbytes = sum(v.numel() * v.element_size() for v in host.values())
    pinned = {k: v.pin_memory() for k, v in host.items()}
    resident = {k: v.to(dev) for k, v in host.items()}

    def copy_then(h, non_blocking):
        g = {k: v.to(dev, non_blocking=non_blocking) for k, v in h.items()}
        r = f(g)
        torch.cuda.synchronize()
        return r

    def on_device():
        r = f(resident)
        torch.cuda.synchronize()
        return r

    out(impl="torch_pageable", query=name, sf=sf, ms=round(median_ms(lambda: copy_then(host, False)), 3), bytes=nbytes)
    out(impl="torch_pinned", query=name, sf=sf, ms=round(median_ms(lambda: copy_then(pinned, True)), 3), bytes=nbytes)
    out(impl="torch_resident", query=name, sf=sf, ms=round(median_ms(on_device), 3), bytes=nbytes)
    out(impl="link_bound", query=name, sf=sf, ms=round(nbytes / 55e9 * 1e3, 3), bytes=nbytes)
    del pinned, resident
