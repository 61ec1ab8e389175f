#!/usr/bin/env python3
"""Usage: python3 anchor.py [TABLE_GIB] [DIM] [BUDGET_GIB] [IDS_FILE IDS_BATCH] [ZIPFS] [BAG]. The
anchor of the `features`
benchmark: skewed gathers from a host table of TABLE_GIB (default 64) with DIM floats per row
(default 128), batches of 65,536 Zipf-distributed ids (s = 0, 0.8, 1.0, 1.2; ranks scattered
by a random permutation), by PyTorch's usual path (CPU index_select, 16 threads, into pinned
memory, non-blocking copy; a batch at a time, and overlapped: the next batch's index_select
while the last one's copy runs), by a gather from the whole table on the GPU where it fits, and the
hit fraction a BUDGET_GIB (default 16) device tier of the hottest rows would get; with an
IDS_FILE (little-endian u32 ids, IDS_BATCH per batch: `features --graph --dump-ids`) also the
same two paths over those ids. ZIPFS: the exponents, comma-separated (an empty IDS_FILE
argument skips the ids). BAG (default 0: none): also pool the Zipf batches in bags of BAG ids,
a sum each, as PyTorch's usual path does (CPU embedding_bag, 16 threads, the sums copied to
the GPU) and from the whole table on the GPU where it fits. Prints JSON lines."""
import json, sys, time, statistics as st
import numpy as np, torch
torch.set_num_threads(16)
gib = float(sys.argv[1]) if len(sys.argv) > 1 else 64
dim = int(sys.argv[2]) if len(sys.argv) > 2 else 128
budget_gib = float(sys.argv[3]) if len(sys.argv) > 3 else 16
ids_file = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else None
ids_batch = int(sys.argv[5]) if len(sys.argv) > 5 else 65536
zipfs = [float(z) for z in sys.argv[6].split(",")] if len(sys.argv) > 6 and sys.argv[6] else [0.0, 0.8, 1.0, 1.2]
bag = int(sys.argv[7]) if len(sys.argv) > 7 else 0
batch = 65536
rows = int(gib * (1 << 30)) // (dim * 4)
budget_rows = int(budget_gib * (1 << 30)) // (dim * 4)
def out(**k): print(json.dumps(k), flush=True)
t = time.time(); tab = torch.empty(rows, dim); tab[:, 0] = torch.arange(rows, dtype=torch.float32); out(step="table", gib=gib, rows=rows, s=round(time.time() - t, 1))
perm = torch.randperm(rows)
outp = torch.empty(batch, dim).pin_memory(); dev = torch.empty(batch, dim, device="cuda")
rng = np.random.default_rng(1)
# The whole table on the GPU, where it fits beside what the run needs (2 GiB of headroom).
free, _ = torch.cuda.mem_get_info()
dtab = None
if rows * dim * 4 + (2 << 30) < free:
    dtab = tab.to("cuda")
else:
    out(note="the whole table does not fit on the GPU", table_gib=gib, free_gib=round(free / (1 << 30), 1))
def timed(run):
    for i in range(3): run(i)
    ts = []
    for i in range(16):
        t = time.perf_counter(); run(i); ts.append(time.perf_counter() - t)
    return st.median(ts) * 1e3
def measure(batches, **fields):
    n = len(batches[0])
    o = outp if n == batch else torch.empty(n, dim).pin_memory()
    d = dev if n == batch else torch.empty(n, dim, device="cuda")
    def run(i):
        torch.index_select(tab, 0, batches[i % 8], out=o); d.copy_(o, non_blocking=True); torch.cuda.synchronize()
    ms = timed(run)
    ok = bool(torch.equal(d[:, 0].cpu(), batches[15 % 8].to(torch.float32)))
    out(impl="torch_cpu_gather_pinned_copy", table_gib=gib, dim=dim, batch=n, ms=round(ms, 3), mrows_s=round(n / ms / 1e3, 1), ok=ok, **fields)
    # Overlapped, as a loader with pinned buffers runs: the next batch's index_select into a
    # second pinned buffer while the last one's copy runs; 32 batches back to back, one wait.
    os_, ds, evs = [o, torch.empty(n, dim).pin_memory()], [d, torch.empty(n, dim, device="cuda")], [torch.cuda.Event(), torch.cuda.Event()]
    def run_overlapped(reps):
        for i in range(reps):
            k = i % 2
            evs[k].synchronize()
            torch.index_select(tab, 0, batches[i % 8], out=os_[k]); ds[k].copy_(os_[k], non_blocking=True); evs[k].record()
        torch.cuda.synchronize()
    run_overlapped(4)
    t = time.perf_counter(); run_overlapped(32); ms = (time.perf_counter() - t) * 1e3 / 32
    ok = bool(torch.equal(ds[1][:, 0].cpu(), batches[31 % 8].to(torch.float32)))
    out(impl="torch_cpu_gather_pinned_copy_overlapped", table_gib=gib, dim=dim, batch=n, ms=round(ms, 3), mrows_s=round(n / ms / 1e3, 1), ok=ok, **fields)
    if dtab is not None:
        dids = [b.to("cuda") for b in batches]
        def run_dev(i):
            torch.index_select(dtab, 0, dids[i % 8], out=d); torch.cuda.synchronize()
        ms = timed(run_dev)
        ok = bool(torch.equal(d[:, 0].cpu(), batches[15 % 8].to(torch.float32)))
        out(impl="torch_whole_table_on_gpu", table_gib=gib, dim=dim, batch=n, ms=round(ms, 4), mrows_s=round(n / ms / 1e3, 1), ok=ok, **fields)
def measure_bags(batches, **fields):
    # An embedding bag with sum pooling over the same ids, `bag` ids a bag: the sums made on
    # the CPU (16 threads) and copied to the GPU, and from the whole table on the GPU. Column 0
    # of a row is its index (as a float), so a bag's column 0 is the sum of those of its rows.
    n = len(batches[0]); bags = [b.view(-1, bag) for b in batches]
    want = [tab[b.reshape(-1), 0].to(torch.float64).view(-1, bag).sum(1) for b in bags]
    d = torch.empty(n // bag, dim, device="cuda")
    def run(i):
        d.copy_(torch.nn.functional.embedding_bag(bags[i % 8], tab, mode="sum")); torch.cuda.synchronize()
    ms = timed(run)
    ok = bool(torch.allclose(d[:, 0].cpu().to(torch.float64), want[15 % 8], rtol=1e-5))
    out(impl="torch_cpu_embedding_bag_copy", table_gib=gib, dim=dim, batch=n, bag=bag, ms=round(ms, 3), mrows_s=round(n / ms / 1e3, 1), ok=ok, **fields)
    if dtab is not None:
        dbags = [b.to("cuda") for b in bags]
        def run_dev(i):
            d.copy_(torch.nn.functional.embedding_bag(dbags[i % 8], dtab, mode="sum")); torch.cuda.synchronize()
        ms = timed(run_dev)
        ok = bool(torch.allclose(d[:, 0].cpu().to(torch.float64), want[15 % 8], rtol=1e-5))
        out(impl="torch_embedding_bag_whole_table_on_gpu", table_gib=gib, dim=dim, batch=n, bag=bag, ms=round(ms, 4), mrows_s=round(n / ms / 1e3, 1), ok=ok, **fields)
if ids_file:
    # The graph-sampled batches the `features` example dumped (--dump-ids): the same ids.
    ids = np.fromfile(ids_file, dtype="<u4").astype(np.int64)
    b = ids_batch
    batches = [torch.from_numpy(ids[k * b:(k + 1) * b]) for k in range(min(8, len(ids) // b))]
    batches = (batches * 8)[:8]
    measure(batches, zipf=None, ids="rmat_2hop")
for s in zipfs:
    if s == 0:
        batches = [torch.from_numpy(rng.integers(0, rows, batch)) for _ in range(8)]; hit = min(budget_rows / rows, 1.0)
    else:
        k = np.arange(1, rows + 1, dtype=np.float64); cdf = np.cumsum(k ** -s); cdf /= cdf[-1]; del k
        batches = [perm[torch.from_numpy(np.searchsorted(cdf, rng.random(batch)))] for _ in range(8)]
        hit = float(cdf[min(budget_rows, rows) - 1]); del cdf
    measure(batches, zipf=s, ids="zipf", hit_fraction_tier=round(hit, 4), budget_gib=budget_gib)
    if bag > 0:
        measure_bags(batches, zipf=s, ids="zipf")
