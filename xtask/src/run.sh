#!/usr/bin/env bash
# berth's GPU run: every GPU test, the examples and the benchmarks, on the GPU machine.
# Staged by `cargo xtask gpu` into .gpu/ (no Rust needed here).
# Usage: .gpu/run.sh [all|tests|bench|calibrate|signals|auto|flags|compute|kernels|launches|firstlaunch|soak|nsys|multigpu|tpch|features|tensor]
#        .gpu/run.sh sanitize [memcheck|racecheck|synccheck|initcheck|all] [BINARY...]
#   firstlaunch: a fresh process's first launch with the driver's JIT cache off, the examples'
#   SASS, the kernel's own PTX module (BERTH_LOAD=ptx) and the crate's whole PTX
#   (BERTH_LOAD=crate-ptx), five rounds each -> firstlaunch.jsonl;
#   nsys: Nsight Systems over the stream example (--gib 0.5, `nsys profile -t cuda,nvtx`):
#   nsys-stats.txt (the NVTX ranges and the GPU trace, `nsys stats`), stream.sqlite (`nsys
#   export`, for `python3 bench/timeline.py`), and the NVTX overhead: bench_launch without a
#   profiler, and under nsys with the ranges off (BERTH_NVTX=off) and on -> nvtx.jsonl. Where
#   nsys cannot import its own capture (QdstrmImporter needs libdw, shipped in lib/), the
#   .qdstrm is kept and nsys.log says why;
#   soak: the full soak (tests/soak: 100,000 launches, 10,000 allocate/free cycles of each
#   memory kind, memory flat at the end) -> soak.jsonl, soak.log;
#   sanitize: compute-sanitizer's TOOL (default all four) over every test binary and example
#   (or only the BINARYs named: `gpu`, `queue`, `stream`, ...) -> sanitize.jsonl (one line per
#   tool and binary: exit status, errors, API errors) and sanitize.log (the sanitizer's own
#   lines, and the tail of failing runs); it stops starting binaries when its time budget
#   (BERTH_SANITIZE_BUDGET, 540 s) is spent, and lists those it did not run.
#   launches: 1,000 dependent launches queued (berth scope vs one CUDA stream) and replayed
#   as a graph (berth Graph vs CUDA graph), n = 2^16 and 2^22, five rounds -> launch.jsonl;
#   compute: the compute-bound kernels (SGEMM, n-body, Black-Scholes) against nvcc, and the
#     plain line-by-line ports (examples/compute/src/plain.rs) against the CUDA they port
#     (BERTH_COMPUTE_MATCH, a regular expression, keeps the kernels it matches: '^plain_');
#   kernels: compute plus the saxpy/block_sum kernel benchmark — the codegen check.
#   multigpu (the 2-GPU machine): the device-set tests (tests/multigpu) and the data_parallel
#   example, then the multi-GPU benchmarks -> multigpu.jsonl: the 4 GiB in + 4 GiB out pipeline
#   on GPU 0 and over every GPU, berth and the same pipeline in CUDA C++ (host memory from
#   the main thread or each GPU's NUMA node); a kernel reading a peer GPU's buffer, and a step
#   across devices (a write on GPU 1 read in place on GPU 0, ordered on the GPU), berth vs CUDA
#   C++ (bench/multigpu/reference.cu); all-reduce of 1 MiB, 64 MiB, 1 GiB, berth (NCCL through cudarc) vs
#   NCCL called from C++; topology in topology.txt; NCCL's INIT and TUNING lines of one short
#   all-reduce run of each side, counted, in nccl-init.log.
#   bench: every benchmark against its CUDA C++ reference (BERTH_BENCH_PARTS picks some of
#     reference, compute, placement, pipeline, signals);
#   signals: only the signal benchmarks (berth and CUDA C++, two rounds);
#   flags: the pipeline's progress-flag ablation, 4-byte copies (default) vs stream
#   memory operations vs the CHUNK_DONE kernel, two rounds each;
#   auto: calibration, then only the #[auto] benchmarks (two rounds) — short targeted runs.
#   features: first the link's calibration for the cost model's predictions (unless
#   BERTH_LINK_COSTS names one, or BERTH_FEATURES_CALIBRATE=0); the features example (a hot tier over a 64 GiB host table in managed memory
#   kept on the host, a 16 GiB budget,
#   batches of 65,536 Zipf ids, s = 0, 0.8, 1.0, 1.2, 3,000 batches to fill the tier, then
#   64 timed with a refresh every 16, every timed row checked; then 64 more queued back to
#   back in a scope; then 64 read by a kernel through the tier (`#[auto] &Rows`, `--view`), a
#   batch at a time and queued; then embedding bags of BERTH_FEATURES_BAG ids (default 32, `--bag`),
#   summed by one kernel through the tier (tuned, and as the plain loop of docs/hot-tier.md) and
#   by the tier's gather then a sum, each a batch at a time and queued; then 64 without a tier;
#   then the same laws with each batch staged whole, `--whole-batches`, BERTH_FEATURES_WHOLE=0
#   skips it) and
#   features_anchor.py (PyTorch's CPU gather into pinned
#   memory a batch at a time and overlapped with the copies, the whole table on the GPU, and
#   the same bags by CPU embedding_bag and on the GPU) -> features.jsonl, features.log (BERTH_FEATURES_ROWS,
#   BERTH_FEATURES_BUDGET, BERTH_FEATURES_ZIPF, BERTH_FEATURES_WARMUP change them,
#   BERTH_FEATURES_PARTS the most parts a batch is staged in, BERTH_FEATURES_THREADS the
#   threads that stage each part; a
#   BERTH_FEATURES_ANCHOR of 0 skips the anchor); then a drifting hot set (s = 1.0, 192 timed
#   batches, all the ranks or a tenth of them moved to other rows every 64, without room for
#   captures, then with room for 1 Mi and 4 Mi captures a log (`--capture-room`);
#   BERTH_FEATURES_DRIFT=0 skips it); before it
#   a table of an eighth of the rows, which the budget holds whole (s = 0 and 1.0;
#   BERTH_FEATURES_FITS=0 skips it); then
#   the same over 2-hop samples of an R-MAT
#   graph (`--graph`, its ids dumped for the anchor to gather the same; BERTH_FEATURES_GRAPH=0
#   skips it); then mapped_pages.cu (a plain CUDA gather from managed memory kept on the host,
#   with and without MADV_HUGEPAGE, back to back and a batch at a time; BERTH_FEATURES_CUDA=0
#   skips it). Before mapped_pages.cu, the laws again with rows of each width of
#   BERTH_FEATURES_WIDTHS (default "64 256", floats) over a table of the same bytes: the tier,
#   both paths without it and the anchor. BERTH_FEATURES_MAIN=0 leaves out the 128-float run
#   and its anchor (the other steps have their own switches).
#   tensor: the tensor-core tests (mma, async copies, attention, wgmma) of tests/gpu, then the
#   tensor_gemm example (berth's mma.sync GEMM against cuBLAS, f16 and bf16) and the
#   wgmma_gemm example (the bulk-copy + warpgroup-MMA GEMM against cuBLAS, c = a · bᵀ) at
#   BERTH_TENSOR_GEMM sizes (default "4096 8192"), the attention example (its mma.sync and
#   wgmma kernels, bf16, d = 64 and 128, causal and not) at BERTH_TENSOR_SEQ lengths (default
#   "1024 4096 16384", batch x heads 2 x 16 x max(1, 16384 / seq)), and tensor_anchor.py (cuBLAS through torch.matmul, PyTorch's
#   flash SDPA, same shapes; every step stopped after BERTH_TENSOR_TIMEOUT seconds, default 180) -> tensor.log (every line, the anchor's JSON lines too: what `cargo xtask record` reads), tensor.jsonl (the anchor's lines);
#   tpch: the tpch example (TPC-H Q1, Q6, Q12, Q14 raw, packed and warm, every answer checked)
#   and tpch_anchor.py (DuckDB, PyTorch, the link bound) at each scale factor of
#   BERTH_TPCH_SF (default "10 30") -> tpch.jsonl, tpch.log.
# Writes its result files to the folder $OUT (created if needed; without OUT, out/ beside this
# script): machine.txt and summary.txt in every mode, plus each mode's own (tests.log,
# bench.jsonl, ...; DEVELOPMENT.md lists them). The binaries are unpacked, the CUDA C++
# references built and scratch files kept beside this script. Exits non-zero if any test,
# example or result check fails.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
mode=${1:-all}
# The binaries travel packed with xz (cargo xtask gpu); python3's lzma unpacks them where the
# machine has no xz.
if [[ -f "$here/binaries.tar.xz" ]]; then
  if command -v xz >/dev/null; then
    tar -xJf "$here/binaries.tar.xz" -C "$here"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$here/binaries.tar.xz" "$here"
  fi || { echo "unpacking the binaries failed"; exit 1; }
fi
fail=0
summary=()

# The launch-queue benchmarks: CUDA C++ and berth, interleaved, five rounds (the short chain is
# host-bound, and a shared host moves both sides by ±10% between rounds) -> launch.jsonl.
run_launches() {
  : > "$out/launch.jsonl"
  if nvcc -O3 -arch=sm_90 -o "$here/launch" "$here/launch.cu" 2>&1; then
    for round in 1 2 3 4 5; do
      "$here/launch" 65536 4194304 | sed "s/}\$/,\"round\":$round}/" >> "$out/launch.jsonl" || fail=1
      "$here/bin/bench_launch" 65536 4194304 | sed "s/}\$/,\"round\":$round}/" >> "$out/launch.jsonl" || fail=1
    done
    cat "$out/launch.jsonl"
  else
    summary+=("FAIL  nvcc build of launch.cu"); fail=1
  fi
}

# Nsight Systems: the stream example's timeline and the NVTX ranges' cost -> nsys-stats.txt,
# stream.sqlite, nvtx.jsonl, nsys.log.
run_nsys() {
  local nsys=${NSYS:-$(command -v nsys || ls /opt/nvidia/nsight-*/*/host/target-linux-x64/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)}
  local log="$out/nsys.log" rep="$here/nsys/stream" importer
  : > "$log"; : > "$out/nvtx.jsonl"
  if [[ -z $nsys || ! -x $nsys ]]; then
    summary+=("FAIL  nsys not found (set NSYS)"); fail=1; return
  fi
  echo "nsys: $nsys ($("$nsys" --version 2>&1 | head -1))" | tee -a "$log"
  mkdir -p "$here/nsys"; rm -f "$here/nsys/"*
  # NVTX's cost: no profiler, then under nsys with the ranges off and on (same tracing).
  for round in 1 2; do
    "$here/bin/bench_launch" 65536 --reps 5 | sed "s/}\$/,\"profiler\":\"none\",\"round\":$round}/" >> "$out/nvtx.jsonl" || fail=1
    for nvtx in off on; do
      BERTH_NVTX=$([[ $nvtx == off ]] && echo off || echo auto) "$nsys" profile -t cuda,nvtx --force-overwrite true \
        -o "$here/nsys/launch-$nvtx" "$here/bin/bench_launch" 65536 --reps 5 2>>"$log" \
        | grep '^{' | sed "s/}\$/,\"profiler\":\"nsys\",\"ranges\":\"$nvtx\",\"round\":$round}/" >> "$out/nvtx.jsonl" || fail=1
    done
  done
  cat "$out/nvtx.jsonl"
  # The stream example's timeline.
  "$nsys" profile -t cuda,nvtx --force-overwrite true -o "$rep" "$here/bin/stream" --gib 0.5 2>&1 | tee -a "$log"
  if [[ ! -f $rep.nsys-rep && -f $rep.qdstrm ]]; then
    # nsys could not import its capture: run its importer with the libraries shipped in lib/.
    importer=$(ls "$(dirname "$(readlink -f "$nsys")")"/../*/QdstrmImporter 2>/dev/null | head -1)
    echo "no .nsys-rep; importing with ${importer:-no QdstrmImporter found} (LD_LIBRARY_PATH=$here/lib)" | tee -a "$log"
    if [[ -n $importer ]]; then
      local libs="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "libraries the importer still lacks:" | tee -a "$log"
      LD_LIBRARY_PATH=$libs ldd "$importer" | grep "not found" | tee -a "$log"
      LD_LIBRARY_PATH=$libs "$importer" -i "$rep.qdstrm" 2>&1 | tail -20 | tee -a "$log"
      if [[ ! -f $rep.nsys-rep ]]; then
        LD_LIBRARY_PATH=$libs "$importer" --input-file "$rep.qdstrm" 2>&1 | tail -20 | tee -a "$log"
      fi
      [[ -f $rep.nsys-rep ]] || LD_LIBRARY_PATH=$libs "$importer" --help 2>&1 | head -30 >> "$log"
    fi
  fi
  if [[ -f $rep.nsys-rep ]]; then
    "$nsys" stats -r nvtx_sum,cuda_gpu_trace --force-export true "$rep.nsys-rep" > "$out/nsys-stats.txt" 2>>"$log"
    "$nsys" export --type sqlite --force-overwrite true -o "$here/nsys/stream.sqlite" "$rep.nsys-rep" >>"$log" 2>&1
    head -c 4000 "$out/nsys-stats.txt"
    # $OUT keeps to small files: an export of 16 MB or more stays in nsys/ beside this script.
    if [[ -f $here/nsys/stream.sqlite && $(stat -c %s "$here/nsys/stream.sqlite") -lt 16000000 ]]; then
      cp "$here/nsys/stream.sqlite" "$out/stream.sqlite"
    else
      echo "stream.sqlite missing or over 16 MB: left in $here/nsys" | tee -a "$log"
    fi
    if grep -q "chunk [0-9]*/[0-9]* affine_one" "$out/nsys-stats.txt"; then
      summary+=("PASS  nsys: berth's NVTX ranges in the stream example's report (nsys-stats.txt)")
    else
      summary+=("FAIL  nsys: no berth NVTX range in nsys-stats.txt"); fail=1
    fi
  else
    [[ -f $rep.qdstrm && $(stat -c %s "$rep.qdstrm") -lt 16000000 ]] && cp "$rep.qdstrm" "$out/"
    summary+=("FAIL  nsys: no .nsys-rep (the .qdstrm is kept; nsys.log says why)"); fail=1
  fi
}

# The multi-GPU tests, example and benchmarks -> multigpu.jsonl (see the usage above).
run_multigpu() {
  # NVLink multicast (NVLS) stays off unless NCCL_NVLS_ENABLE says otherwise: setting it up
  # can take a host's GPUs out of service on some systems, and berth's all-reduce and NCCL's
  # called from C++ run with the same settings either way. NCCL reads this when the
  # communicators are made.
  export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
  # cudarc loads NCCL by its unversioned name: where only the versioned library of the Python
  # package is installed, link that name to it.
  local nccl_dir=""
  if ! ldconfig -p | grep -q 'libnccl\.so '; then
    nccl_dir=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0] + "/lib")' 2>/dev/null)
    if [[ -n $nccl_dir && -f $nccl_dir/libnccl.so.2 ]]; then
      mkdir -p "$here/nccl"; ln -sf "$nccl_dir/libnccl.so.2" "$here/nccl/libnccl.so"
      export LD_LIBRARY_PATH="$here/nccl:$nccl_dir:${LD_LIBRARY_PATH:-}"
      nccl_dir="$here/nccl"
    else
      nccl_dir=""
    fi
  fi
  echo "NCCL: $(ldconfig -p | grep libnccl | head -2 | tr -s ' ' | tr '\n' ';') ${nccl_dir:+linked in $nccl_dir}" > "$out/topology.txt"
  nvidia-smi topo -m >> "$out/topology.txt" 2>&1; cat "$out/topology.txt"
  : > "$out/multigpu.log"
  echo "=== test binary: multigpu" | tee -a "$out/multigpu.log"
  if "$here/tests/multigpu" --test-threads=1 --nocapture 2>&1 | tee -a "$out/multigpu.log"; then
    summary+=("PASS  tests/multigpu")
  else
    summary+=("FAIL  tests/multigpu"); fail=1
  fi
  echo "=== example: data_parallel" | tee -a "$out/multigpu.log"
  if "$here/bin/data_parallel" --n 200000003 2>&1 | tee -a "$out/multigpu.log"; then
    summary+=("PASS  example data_parallel")
  else
    summary+=("FAIL  example data_parallel"); fail=1
  fi
  : > "$out/multigpu.jsonl"
  if nvcc -O3 -arch=sm_90 -o "$here/multigpu" "$here/multigpu.cu" ${nccl_dir:+-L"$nccl_dir"} -lnccl 2>&1 \
    || nvcc -O3 -arch=sm_90 -o "$here/multigpu" "$here/multigpu.cu" -L/usr/lib/x86_64-linux-gnu -l:libnccl.so.2 2>&1; then
    for round in 1 2; do
      "$here/multigpu" all 5 | sed "s/}\$/,\"round\":$round}/" >> "$out/multigpu.jsonl" || fail=1
      "$here/bin/bench_multigpu" peer 5 | sed "s/}\$/,\"round\":$round}/" >> "$out/multigpu.jsonl" || fail=1
      "$here/bin/bench_multigpu" allreduce 5 | sed "s/}\$/,\"round\":$round}/" >> "$out/multigpu.jsonl" || fail=1
    done
  else
    summary+=("FAIL  nvcc build of multigpu.cu"); fail=1
  fi
  # Its one-GPU and all-GPU runs interleave within the binary.
  "$here/bin/bench_multigpu" pipeline 5 >> "$out/multigpu.jsonl" || fail=1
  cat "$out/multigpu.jsonl"
  # NCCL's own account of each side's communicators and collectives (channels, transports,
  # algorithms), from one short all-reduce run of each: where berth's all-reduce and NCCL's
  # called from C++ differ, this says whether NCCL set them up alike -> nccl-init.log.
  if [[ -x $here/multigpu ]]; then
    { nccl_info berth "$here/bin/bench_multigpu" allreduce 1
      nccl_info cuda "$here/multigpu" allreduce 1; } > "$out/nccl-init.log"
  fi
}

# nccl_info NAME COMMAND...: NCCL's INFO lines of one run of COMMAND, with addresses, channel
# numbers and CPU cores folded so that two runs' lines compare, counted.
nccl_info() {
  local name=$1; shift
  rm -f "$here"/nccl-debug.*
  echo "=== $name: ${*##*/}"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NCCL_DEBUG_FILE="$here/nccl-debug.%p" "$@" \
    > /dev/null 2>&1
  cat "$here"/nccl-debug.* 2>/dev/null \
    | sed -E 's/^.*NCCL INFO //; s/0x[0-9a-f]+/0x_/g; s/^Channel [0-9]+\//Channel _\//; s/core [0-9]+/core _/g' \
    | sort | uniq -c | sort -rn | head -150
}

# A fresh process's first launch, SASS and PTX interleaved, JIT cache off -> firstlaunch.jsonl.
run_firstlaunch() {
  : > "$out/firstlaunch.jsonl"
  local ref=""
  if nvcc -O3 -arch=sm_90 -o "$here/first_launch_ref" "$here/first_launch.cu" 2>&1; then
    ref="$here/first_launch_ref"
  else
    echo "first_launch.cu: nvcc failed"; fail=1
  fi
  for round in 1 2 3 4 5; do
    [[ -n $ref ]] && { CUDA_CACHE_DISABLE=1 "$ref" | sed "s/}\$/,\"round\":$round}/" >> "$out/firstlaunch.jsonl" || fail=1; }
    CUDA_CACHE_DISABLE=1 "$here/bin/first_launch" | sed "s/}\$/,\"round\":$round}/" >> "$out/firstlaunch.jsonl" || fail=1
    CUDA_CACHE_DISABLE=1 BERTH_LOAD=ptx "$here/bin/first_launch" | sed "s/}\$/,\"round\":$round}/" >> "$out/firstlaunch.jsonl" || fail=1
    CUDA_CACHE_DISABLE=1 BERTH_LOAD=crate-ptx "$here/bin/first_launch" | sed "s/}\$/,\"round\":$round}/" >> "$out/firstlaunch.jsonl" || fail=1
  done
  # One more run of each of SASS and the kernel's PTX with the module load's phases logged.
  CUDA_CACHE_DISABLE=1 RUST_LOG=berth_runtime=debug "$here/bin/first_launch" > /dev/null 2> "$out/firstlaunch.log" || fail=1
  CUDA_CACHE_DISABLE=1 BERTH_LOAD=ptx RUST_LOG=berth_runtime=debug "$here/bin/first_launch" > /dev/null 2>> "$out/firstlaunch.log" || fail=1
  cat "$out/firstlaunch.jsonl"
  grep -a "module ready" "$out/firstlaunch.log" || true
}

# The signal benchmarks: CUDA C++ and berth, interleaved, two rounds -> signals.jsonl.
run_signals() {
  : > "$out/signals.jsonl"
  if nvcc -O3 -arch=sm_90 -std=c++20 -o "$here/signals" "$here/signals.cu" 2>&1; then
    for round in 1 2; do
      "$here/signals" | sed "s/}\$/,\"round\":$round}/" >> "$out/signals.jsonl" || fail=1
      "$here/bin/bench_signals" | sed "s/}\$/,\"round\":$round}/" >> "$out/signals.jsonl" || fail=1
    done
    cat "$out/signals.jsonl"
  else
    summary+=("FAIL  nvcc build of signals.cu"); fail=1
  fi
}

# compute-sanitizer over every test binary and example: run_sanitize [TOOL] [BINARY...].
# Children of a test binary (the tests that make a kernel trap on purpose run in a child
# process) are not sanitized: their faults are the point of those tests.
run_sanitize() {
  local tool=${1:-all} tools filters budget=${BERTH_SANITIZE_BUDGET:-540} per=${BERTH_SANITIZE_TIMEOUT:-300}
  case $tool in
    all) tools=(memcheck racecheck synccheck initcheck) ;;
    memcheck|racecheck|synccheck|initcheck) tools=("$tool") ;;
    *) echo "unknown compute-sanitizer tool: $tool"; summary+=("FAIL  sanitize: unknown tool $tool"); fail=1; return ;;
  esac
  filters=("${@:2}")
  : > "$out/sanitize.jsonl"; : > "$out/sanitize.log"
  mkdir -p "$here/sanitize-logs"
  # label|program|arguments; examples at the CI's small sizes.
  local targets=() t
  for t in "$here"/tests/*; do targets+=("tests/$(basename "$t")|$t|--test-threads=1"); done
  for t in "quickstart|" "reduction|" "stream|--gib 0.25 --device-budget 64M" "worker|" "progress|" \
           "embedding|--batches 4" "embedding|--auto --batches 4"; do
    local ex=${t%%|*} a=${t#*|}
    targets+=("example $ex${a:+ $a}|$here/bin/$ex|$a")
  done
  local skips=() s
  # Tests that fault on purpose in-process, or time a gate or a kernel that the sanitizer's
  # serialisation stretches past its limit, are not sanitized (their point is elsewhere).
  local default_skip="queueing_in_a_scope_never_waits_on_the_host flags_written_by_stream_memory_operations_track_progress_and_locate_a_failure events_time_a_kernel_without_raw_handles"
  for s in ${BERTH_SANITIZE_SKIP-$default_skip}; do skips+=(--skip "$s"); done
  # racecheck loses track of launches queued from several host threads at once ("Internal
  # Sanitizer Error: Detected a failure to track a kernel launch", counted as an error, no
  # hazard): that test runs under the other three tools only.
  local racecheck_skip="launches_from_several_threads_on_one_context_and_one_stream_are_independent"
  local start=$SECONDS commit
  commit=$(cat "$here/commit.txt" 2>/dev/null || echo unknown)
  for tool in "${tools[@]}"; do
    for t in "${targets[@]}"; do
      local label=${t%%|*} rest=${t#*|} prog args name
      prog=${rest%%|*}; read -ra args <<< "${rest#*|}"
      name=$(basename "$prog")
      if (( ${#filters[@]} )) && [[ ! " ${filters[*]} " == *" $name "* ]]; then continue; fi
      [[ $label == tests/* ]] && args+=("${skips[@]}")
      if [[ $label == tests/* && $tool == racecheck && -z ${BERTH_SANITIZE_SKIP+set} ]]; then
        for s in $racecheck_skip; do args+=(--skip "$s"); done
      fi
      local left=$(( budget - (SECONDS - start) )) log result status errors api children secs t0
      if (( left < 30 )); then
        echo "{\"sanitize\":\"$tool\",\"binary\":\"$label\",\"result\":\"not run\",\"commit\":\"$commit\"}" >> "$out/sanitize.jsonl"
        summary+=("SKIP  $tool $label (time budget spent)")
        continue
      fi
      log="$here/sanitize-logs/$tool-${label//[ \/]/_}.log"
      echo "=== $tool: $label (limit $(( left < per ? left : per )) s)"
      t0=$SECONDS
      BERTH_SANITIZER=$tool BERTH_SOAK_LAUNCHES=500 BERTH_SOAK_CYCLES=50 \
        timeout -k 10 $(( left < per ? left : per )) compute-sanitizer --tool "$tool" \
        --target-processes application-only --print-limit 1000 "$prog" "${args[@]}" > "$log" 2>&1
      status=$?
      secs=$(( SECONDS - t0 ))
      # memcheck, synccheck and initcheck end with `ERROR SUMMARY: N errors`; racecheck with
      # `RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)`.
      errors=$(( $(grep -o 'ERROR SUMMARY: [0-9]*' "$log" | awk '{s += $3} END {print s + 0}') \
        + $(grep -o 'RACECHECK SUMMARY: .*(\([0-9]*\) error' "$log" | grep -o '([0-9]*' | tr -d '(' | awk '{s += $1} END {print s + 0}') ))
      api=$(grep -c '========= Program hit' "$log")
      children=$(grep -c '^--- child `' "$log")
      if (( status == 124 || status == 137 )); then result=timeout
      elif grep -q 'Target application terminated before first instrumented API call' "$log" \
           && grep -q '^test result: ok' "$log" && ! grep -q '^test result: FAILED' "$log"; then
        # The binary's tests passed without one CUDA call (PTX checks, the simulator).
        result=no-cuda
      elif ! grep -q 'ERROR SUMMARY\|RACECHECK SUMMARY' "$log"; then result=fail
      elif (( status == 0 && errors == api )); then result=pass
      else result=fail; fi
      echo "{\"sanitize\":\"$tool\",\"binary\":\"$label\",\"result\":\"$result\",\"status\":$status,\"errors\":$errors,\"api_errors\":$api,\"unsanitized_children\":$children,\"seconds\":$secs,\"commit\":\"$commit\"}" | tee -a "$out/sanitize.jsonl"
      {
        echo "=== $tool $label: $result (exit $status, $errors errors of which $api API errors, $children unsanitized children, ${secs} s)"
        # The first reports in full, then every kind of line with its count.
        grep '^=========' "$log" | head -60
        grep '^=========' "$log" | grep -v '^=========  ' | sort | uniq -c | sort -rn | head -40
        grep -E '^test result|^test .*FAILED|panicked at' "$log" | head -40
        if [[ $result != pass && $result != no-cuda ]]; then echo "--- last 80 lines"; tail -80 "$log"; fi
      } >> "$out/sanitize.log"
      if [[ $result == pass ]]; then summary+=("PASS  $tool $label ($errors errors, $api API)")
      elif [[ $result == no-cuda ]]; then summary+=("PASS  $tool $label (no CUDA call: nothing to check)")
      else summary+=("FAIL  $tool $label: $result ($errors errors, $api API, exit $status)"); fail=1; fi
    done
  done
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(cat "$here/commit.txt" 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  echo "host: $(uname -srm), $(nproc) cores"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
} > "$out/machine.txt"
cat "$out/machine.txt"

if [[ $mode == all || $mode == tests ]]; then
  : > "$out/tests.log"
  for t in "$here"/tests/*; do
    name=$(basename "$t")
    echo "=== test binary: $name" | tee -a "$out/tests.log"
    # The soak at small counts here; `soak` runs the full one.
    if BERTH_SOAK_LAUNCHES=${BERTH_SOAK_LAUNCHES:-2000} BERTH_SOAK_CYCLES=${BERTH_SOAK_CYCLES:-200} \
      "$t" --test-threads=1 --nocapture 2>&1 | tee -a "$out/tests.log"; then
      summary+=("PASS  tests/$name")
    else
      summary+=("FAIL  tests/$name"); fail=1
    fi
  done
  for ex in quickstart reduction "stream --gib 16 --device-budget 1G" worker progress embedding "embedding --auto --batches 20" "cublas_gemm --n 2048" "tensor_gemm --m 4096 --n 4096 --k 4096" "tpch --sf 1 --repeat 3"; do
    echo "=== example: $ex" | tee -a "$out/tests.log"
    if "$here/bin/"$ex 2>&1 | tee -a "$out/tests.log"; then
      summary+=("PASS  example $ex")
    else
      summary+=("FAIL  example $ex"); fail=1
    fi
  done
fi

if [[ $mode == all || $mode == bench || $mode == calibrate || $mode == auto ]]; then
  if "$here/bin/calibrate" "$out/link-costs.json"; then
    summary+=("PASS  calibration (link-costs.json)")
  else
    summary+=("FAIL  calibration"); fail=1
  fi
fi

# ptxas -v output -> one JSON line per entry: {"ptxas":IMPL,"kernel":..,"registers":..}.
ptxas_json() {
  awk -v impl="$1" '
    /Compiling entry function/ { n = $0; sub(/.*function .\x27?/, "", n); sub(/\x27.*/, "", n);
      if (n ~ /^_Z[0-9]+/) { len = n; sub(/^_Z/, "", len); len = len + 0; sub(/^_Z[0-9]+/, "", n); n = substr(n, 1, len) }
      name = n; stack = 0; st = 0; ld = 0 }
    /bytes stack frame/ { stack = $1; st = $5; ld = $9 }
    /Used [0-9]+ registers/ { r = $0; sub(/.*Used /, "", r); sub(/ registers.*/, "", r);
      sm = 0; if ($0 ~ /bytes smem/) { sm = $0; sub(/ bytes smem.*/, "", sm); sub(/.* /, "", sm) }
      printf "{\"ptxas\":\"%s\",\"kernel\":\"%s\",\"registers\":%d,\"stack\":%d,\"spill_stores\":%d,\"spill_loads\":%d,\"smem\":%d}\n", impl, name, r, stack, st, ld, sm }'
}

# cuobjdump -sass output -> one JSON line per function: {"sass":IMPL,"kernel":..,
# "instructions":..,"ffma":..,"branches":..} (static counts: what each side compiled to).
sass_json() {
  awk -v impl="$1" '
    function flush() { if (name != "") printf "{\"sass\":\"%s\",\"kernel\":\"%s\",\"instructions\":%d,\"ffma\":%d,\"branches\":%d}\n", impl, name, n, f, b }
    /Function : / { flush(); name = $NF; if (name ~ /^_Z[0-9]+/) { len = name; sub(/^_Z/, "", len); len = len + 0; sub(/^_Z[0-9]+/, "", name); name = substr(name, 1, len) } n = 0; f = 0; b = 0 }
    /\/\*[0-9a-f]+\*\/ / { n++; if ($0 ~ / FFMA /) f++; if ($0 ~ / BRA /) b++ }
    END { flush() }'
}

# Compute-bound kernels, berth and CUDA C++ interleaved, two rounds -> compute.jsonl, with
# both sides' ptxas resource reports (the same ptxas) first.
run_compute() {
  : > "$out/compute.jsonl"
  if nvcc -O3 -arch=sm_90 -Xptxas -v -o "$here/compute" "$here/compute.cu" > "$here/nvcc-ptxas.txt" 2>&1; then
    ptxas_json nvcc < "$here/nvcc-ptxas.txt" >> "$out/compute.jsonl"
    # The examples' own target: sm_90a once their inline PTX uses the warpgroup instructions.
    ptx_arch=$(sed -n 's/^\.target \([a-z0-9_]*\).*/\1/p' "$here/berth_examples_compute.ptx" | head -n 1)
    ptxas -arch="${ptx_arch:-sm_90}" -v "$here/berth_examples_compute.ptx" -o "$here/berth_examples_compute.cubin" 2>&1 | ptxas_json berth >> "$out/compute.jsonl"
    cuobjdump -sass "$here/compute" | sass_json nvcc >> "$out/compute.jsonl"
    cuobjdump -sass "$here/berth_examples_compute.cubin" | sass_json berth >> "$out/compute.jsonl"
    for spec in "sgemm_tiled 2048" "sgemm_tiled 4096" "sgemm_reg4 2048" "sgemm_reg4 4096" \
                "sgemm_reg8 2048" "sgemm_reg8 4096" "sgemm_reg8_unchecked 4096" "nbody 65536" "nbody_fast 65536" \
                "black_scholes 67108864" "black_scholes_unchecked 67108864" "block_sum_warp 268435456" "haxpy2 134217728" \
                "hdot 134217728" \
                "plain_sgemm_tiled 2048" "plain_sgemm_tiled 4096" "plain_sgemm_reg4 2048" "plain_sgemm_reg4 4096" \
                "plain_sgemm_reg8 2048" "plain_sgemm_reg8 4096" "plain_nbody 65536" "plain_stencil5 8192" \
                "plain_transpose 8192"; do
      # BERTH_COMPUTE_MATCH (an extended regular expression) keeps only the kernels whose
      # names match it, e.g. '^plain_' for the plain ports alone.
      [[ $spec =~ ${BERTH_COMPUTE_MATCH:-.} ]] || continue
      for round in 1 2; do
        "$here/compute" $spec 10 | sed "s/}\$/,\"round\":$round}/" >> "$out/compute.jsonl" || fail=1
        "$here/bin/bench_compute" $spec 10 | sed "s/}\$/,\"round\":$round}/" >> "$out/compute.jsonl" || fail=1
      done
    done
    cat "$out/compute.jsonl"
  else
    cat "$here/nvcc-ptxas.txt"
    summary+=("FAIL  nvcc build of compute.cu"); fail=1
  fi
}

# The saxpy / block_sum kernel benchmark against reference.cu -> bench.jsonl.
run_reference() {
  : > "$out/bench.jsonl"
  if nvcc -O3 -arch=sm_90 -o "$here/reference" "$here/reference.cu" 2>&1; then
    for n in 16777216 268435456; do
      # Interleave the two implementations so drift on a shared machine hits both alike.
      for round in 1 2; do
        "$here/reference" "$n" 20 | sed "s/}\$/,\"round\":$round}/" >> "$out/bench.jsonl" || fail=1
        "$here/bin/bench" "$n" 20 | sed "s/}\$/,\"round\":$round}/" >> "$out/bench.jsonl" || fail=1
      done
    done
    cat "$out/bench.jsonl"
  else
    summary+=("FAIL  nvcc build of reference.cu"); fail=1
  fi
}

# The parts of `bench` to run (BERTH_BENCH_PARTS, default all of them), so that a long bench can
# be split over shorter runs, e.g. "reference compute placement" then "pipeline signals" into
# two output folders whose files are then put together in one for `cargo xtask record`.
bench_parts=" ${BERTH_BENCH_PARTS:-reference compute placement pipeline signals} "
part() { [[ $bench_parts == *" $1 "* ]]; }
if [[ $mode == all || $mode == bench ]]; then
  part reference && run_reference
  part compute && run_compute
  if part placement; then
  : > "$out/placement.jsonl"
  if nvcc -O3 -arch=sm_90 -o "$here/placement" "$here/placement.cu" 2>&1; then
    for round in 1 2; do
      "$here/placement" all 10 | sed "s/}\$/,\"round\":$round}/" >> "$out/placement.jsonl" || fail=1
      BERTH_LINK_COSTS="$out/link-costs.json" "$here/bin/bench_placement" all 10 | sed "s/}\$/,\"round\":$round}/" >> "$out/placement.jsonl" || fail=1
    done
    cat "$out/placement.jsonl"
  else
    summary+=("FAIL  nvcc build of placement.cu"); fail=1
  fi
  fi
  if part pipeline; then
  : > "$out/pipeline.jsonl"
  if nvcc -O3 -arch=sm_90 -o "$here/pipeline" "$here/pipeline.cu" 2>&1; then
    "$here/pipeline" all 3 >> "$out/pipeline.jsonl" || fail=1
    "$here/bin/bench_pipeline" all 3 >> "$out/pipeline.jsonl" || fail=1
    # The progress flags written by a stream memory operation or a kernel instead.
    BERTH_PIPELINE_FLAGS=memop "$here/bin/bench_pipeline" ablation 3 >> "$out/pipeline.jsonl" || fail=1
    BERTH_PIPELINE_FLAGS=kernel "$here/bin/bench_pipeline" ablation 3 >> "$out/pipeline.jsonl" || fail=1
    cat "$out/pipeline.jsonl"
  else
    summary+=("FAIL  nvcc build of pipeline.cu"); fail=1
  fi
  fi
  part signals && run_signals
  if cat "$out"/{bench,compute,placement,pipeline,signals}.jsonl 2>/dev/null | grep -q '"bad":[1-9]'; then
    summary+=("FAIL  benchmark result check"); fail=1
  else
    summary+=("PASS  benchmark result checks")
  fi
fi

if [[ $mode == signals ]]; then
  run_signals
fi

if [[ $mode == auto ]]; then
  : > "$out/placement.jsonl"
  for round in 1 2; do
    BERTH_LINK_COSTS="$out/link-costs.json" "$here/bin/bench_placement" auto 10 | sed "s/}\$/,\"round\":$round}/" >> "$out/placement.jsonl" || fail=1
  done
  cat "$out/placement.jsonl"
fi

if [[ $mode == flags ]]; then
  : > "$out/pipeline.jsonl"
  for round in 1 2; do
    "$here/bin/bench_pipeline" ablation 3 >> "$out/pipeline.jsonl" || fail=1
    BERTH_PIPELINE_FLAGS=memop "$here/bin/bench_pipeline" ablation 3 >> "$out/pipeline.jsonl" || fail=1
    BERTH_PIPELINE_FLAGS=kernel "$here/bin/bench_pipeline" ablation 3 >> "$out/pipeline.jsonl" || fail=1
  done
  cat "$out/pipeline.jsonl"
fi

if [[ $mode == compute ]]; then
  run_compute
fi

if [[ $mode == kernels ]]; then
  run_reference
  run_compute
fi

if [[ $mode == launches ]]; then
  run_launches
fi

if [[ $mode == firstlaunch ]]; then
  run_firstlaunch
fi

if [[ $mode == nsys ]]; then
  run_nsys
fi

if [[ $mode == multigpu ]]; then
  run_multigpu
fi

if [[ $mode == signals || $mode == auto || $mode == flags || $mode == compute || $mode == kernels || $mode == launches || $mode == firstlaunch || $mode == nsys || $mode == multigpu ]]; then
  if grep -q '"bad":[1-9]' "$out"/*.jsonl; then
    summary+=("FAIL  benchmark result check"); fail=1
  else
    summary+=("PASS  benchmark result checks")
  fi
fi

if [[ $mode == tpch ]]; then
  : > "$out/tpch.jsonl"; : > "$out/tpch.log"
  for sf in ${BERTH_TPCH_SF:-10 30}; do
    echo "=== tpch --sf $sf" | tee -a "$out/tpch.log"
    if "$here/bin/tpch" --sf "$sf" --json --repeat 5 2>>"$out/tpch.log" | tee -a "$out/tpch.jsonl"; then
      summary+=("PASS  tpch --sf $sf (every answer equal to the host's)")
    else
      summary+=("FAIL  tpch --sf $sf"); fail=1
    fi
    if python3 -c 'import duckdb, numpy' 2>/dev/null && command -v tpchgen-cli >/dev/null; then
      if TPCH_DIR=${TPCH_DIR:-$here/tpch-data} python3 "$here/tpch_anchor.py" "$sf" 16 2>>"$out/tpch.log" | tee -a "$out/tpch.jsonl"; then
        summary+=("PASS  tpch anchor --sf $sf")
      else
        summary+=("FAIL  tpch anchor --sf $sf"); fail=1
      fi
    else
      echo '{"note":"tpch anchor skipped: needs duckdb, numpy and tpchgen-cli"}' | tee -a "$out/tpch.jsonl"
      summary+=("SKIP  tpch anchor --sf $sf (needs duckdb, numpy and tpchgen-cli)")
    fi
  done
fi

if [[ $mode == features ]]; then
  : > "$out/features.jsonl"; : > "$out/features.log"
  rows=${BERTH_FEATURES_ROWS:-134217728}
  budget=${BERTH_FEATURES_BUDGET:-16G}
  zipf=${BERTH_FEATURES_ZIPF:-0,0.8,1.0,1.2}
  warmup=${BERTH_FEATURES_WARMUP:-3000}
  bag=${BERTH_FEATURES_BAG:-32}
  # The most parts a batch is staged in (the tier's default where unset).
  parts=()
  [[ -n ${BERTH_FEATURES_PARTS:-} ]] && parts=(--staging-parts "$BERTH_FEATURES_PARTS")
  # The threads that stage each part (the tier's default where unset).
  threads=()
  [[ -n ${BERTH_FEATURES_THREADS:-} ]] && threads=(--staging-threads "$BERTH_FEATURES_THREADS")
  parts+=("${threads[@]}")
  # Free physically contiguous memory by order (order 9: 2 MiB) before the 64 GiB table is
  # allocated: unified memory kept on the host is mapped for the GPU in 2 MiB pages only where
  # its 2 MiB chunks could be allocated whole.
  # The link's constants for the cost model's predictions (`placement::decide_gather`), unless
  # a calibration is given (BERTH_LINK_COSTS) or BERTH_FEATURES_CALIBRATE=0.
  if [[ -z ${BERTH_LINK_COSTS:-} && ${BERTH_FEATURES_CALIBRATE:-1} == 1 ]]; then
    if "$here/bin/calibrate" "$out/link-costs.json" 2>>"$out/features.log" | tee -a "$out/features.log"; then
      export BERTH_LINK_COSTS="$out/link-costs.json"
      summary+=("PASS  calibration (link-costs.json)")
    else
      summary+=("FAIL  calibration"); fail=1
    fi
  fi
  { echo "=== /proc/buddyinfo before the features example"; cat /proc/buddyinfo 2>/dev/null; grep -E 'MemFree|MemAvailable|^Cached' /proc/meminfo 2>/dev/null; } >> "$out/features.log"
  if [[ ${BERTH_FEATURES_MAIN:-1} == 1 ]]; then
    echo "=== features --zipf $zipf --warmup $warmup" | tee -a "$out/features.log"
    if "$here/bin/features" --rows "$rows" --width 128 --device-budget "$budget" --batch 65536 --warmup "$warmup" --batches 64 --refresh-every 16 --baseline --queued --view --bag "$bag" "${parts[@]}" --zipf "$zipf" --json 2>>"$out/features.log" | tee -a "$out/features.log" | grep '^{' >> "$out/features.jsonl"; then
      summary+=("PASS  features --zipf $zipf (every row checked equal to the host's)")
    else
      summary+=("FAIL  features --zipf $zipf"); fail=1
    fi
  fi
  # The same laws with each batch staged whole, against the default's two halves.
  if [[ ${BERTH_FEATURES_WHOLE:-1} == 1 ]]; then
    echo "=== features --zipf $zipf --whole-batches --warmup $warmup" | tee -a "$out/features.log"
    if "$here/bin/features" --rows "$rows" --width 128 --device-budget "$budget" --batch 65536 --warmup "$warmup" --batches 64 --refresh-every 16 --whole-batches "${threads[@]}" --zipf "$zipf" --json 2>>"$out/features.log" | tee -a "$out/features.log" | grep '^{' >> "$out/features.jsonl"; then
      summary+=("PASS  features --zipf $zipf --whole-batches (every row checked equal to the host's)")
    else
      summary+=("FAIL  features --zipf $zipf --whole-batches"); fail=1
    fi
  fi
  # A budget that holds the whole table (an eighth of the rows, the same budget): the tier
  # keeps it all from the start.
  if [[ ${BERTH_FEATURES_FITS:-1} == 1 ]]; then
    echo "=== features --rows $((rows / 8)) --zipf 0,1.0 (the budget holds the table)" | tee -a "$out/features.log"
    if "$here/bin/features" --rows "$((rows / 8))" --width 128 --device-budget "$budget" --batch 65536 --warmup 16 --batches 64 --refresh-every 16 "${parts[@]}" --zipf 0,1.0 --json 2>>"$out/features.log" | tee -a "$out/features.log" | grep '^{' >> "$out/features.jsonl"; then
      summary+=("PASS  features --rows $((rows / 8)) (the whole table resident; every row checked equal to the host's)")
    else
      summary+=("FAIL  features --rows $((rows / 8))"); fail=1
    fi
  fi
  # A drifting hot set: Zipf s = 1.0, all the ranks or a tenth of them moved every 64 of 192
  # timed batches.
  if [[ ${BERTH_FEATURES_DRIFT:-1} == 1 ]]; then
    for drift in "1 0" "0.1 0" "1 1048576" "0.1 1048576" "1 4194304" "0.1 4194304"; do
      read -r share room <<< "$drift"
      echo "=== features --zipf 1.0 --drift-every 64 --drift-share $share --capture-room $room --warmup $warmup" | tee -a "$out/features.log"
      if "$here/bin/features" --rows "$rows" --width 128 --device-budget "$budget" --batch 65536 --warmup "$warmup" --batches 192 --refresh-every 16 --drift-every 64 --drift-share "$share" --capture-room "$room" "${parts[@]}" --zipf 1.0 --json 2>>"$out/features.log" | tee -a "$out/features.log" | grep '^{' >> "$out/features.jsonl"; then
        summary+=("PASS  features --drift-every 64 --drift-share $share --capture-room $room (every row checked equal to the host's)")
      else
        summary+=("FAIL  features --drift-every 64 --drift-share $share --capture-room $room"); fail=1
      fi
    done
  fi
  graph_ids=""
  if [[ ${BERTH_FEATURES_GRAPH:-1} == 1 ]]; then
    rm -f "$here/graph_ids.bin"
    echo "=== features --graph --warmup $warmup" | tee -a "$out/features.log"
    if "$here/bin/features" --rows "$rows" --width 128 --device-budget "$budget" --batch 65536 --warmup "$warmup" --batches 64 --refresh-every 16 --baseline --queued "${parts[@]}" --graph --dump-ids "$here/graph_ids.bin" --json 2>>"$out/features.log" | tee -a "$out/features.log" | grep '^{' >> "$out/features.jsonl"; then
      summary+=("PASS  features --graph (every row checked equal to the host's)")
      graph_ids="$here/graph_ids.bin"
    else
      summary+=("FAIL  features --graph"); fail=1
    fi
  fi
  # The table's and the budget's GiB, for the anchors (every width's table has the same bytes).
  table_gib=$(python3 -c "print($rows * 512 / 2**30)")
  budget_gib=$(python3 -c "s='$budget'; m={'K':2**-20,'M':2**-10,'G':1}; print(float(s[:-1]) * m[s[-1]] if s[-1] in m else float(s) / 2**30)")
  if [[ ${BERTH_FEATURES_ANCHOR:-1} == 0 || ${BERTH_FEATURES_MAIN:-1} == 0 ]]; then
    summary+=("SKIP  features anchor (BERTH_FEATURES_ANCHOR=0 or BERTH_FEATURES_MAIN=0)")
  elif python3 -c 'import torch, numpy' 2>/dev/null; then
    # 65,536 ids rounded down to whole seeds of 166 ids (1 + 15 + 150): the graph's batches.
    if python3 "$here/features_anchor.py" "$table_gib" 128 "$budget_gib" "$graph_ids" 65404 "$zipf" "$bag" 2>>"$out/features.log" | tee -a "$out/features.jsonl"; then
      summary+=("PASS  features anchor")
    else
      summary+=("FAIL  features anchor"); fail=1
    fi
  else
    echo '{"note":"features anchor skipped: needs torch and numpy"}' | tee -a "$out/features.jsonl"
    summary+=("SKIP  features anchor (needs torch and numpy)")
  fi
  # Other row widths over a table of the same bytes: the tier, both ways without it and the
  # anchor's PyTorch paths, law by law.
  for width in ${BERTH_FEATURES_WIDTHS:-64 256}; do
    wrows=$((rows * 128 / width))
    echo "=== features --width $width --rows $wrows --zipf $zipf --warmup $warmup" | tee -a "$out/features.log"
    if "$here/bin/features" --rows "$wrows" --width "$width" --device-budget "$budget" --batch 65536 --warmup "$warmup" --batches 64 --refresh-every 16 --baseline --queued --view --bag "$bag" "${parts[@]}" --zipf "$zipf" --json 2>>"$out/features.log" | tee -a "$out/features.log" | grep '^{' >> "$out/features.jsonl"; then
      summary+=("PASS  features --width $width (every row checked equal to the host's)")
    else
      summary+=("FAIL  features --width $width"); fail=1
    fi
    if [[ ${BERTH_FEATURES_ANCHOR:-1} == 1 ]] && python3 -c 'import torch, numpy' 2>/dev/null; then
      if python3 "$here/features_anchor.py" "$table_gib" "$width" "$budget_gib" "" 65536 "$zipf" "$bag" 2>>"$out/features.log" | tee -a "$out/features.jsonl"; then
        summary+=("PASS  features anchor --width $width")
      else
        summary+=("FAIL  features anchor --width $width"); fail=1
      fi
    fi
  done
  # The link's own rate for the same gathers: a plain CUDA kernel over managed memory kept on
  # the host (what a ManagedBuffer is), back to back and one batch at a time.
  if [[ ${BERTH_FEATURES_CUDA:-1} == 0 ]]; then
    summary+=("SKIP  mapped_pages.cu (BERTH_FEATURES_CUDA=0)")
  elif nvcc -O3 -arch=sm_90 -Xcompiler -fopenmp -o "$here/mapped_pages" "$here/mapped_pages.cu" -lcuda >> "$out/features.log" 2>&1; then
    gib=$(python3 -c "print(round($rows * 512 / 2**30))")
    { echo "=== /proc/buddyinfo before mapped_pages"; cat /proc/buddyinfo 2>/dev/null; } >> "$out/features.log"
    if ONLY_MANAGED=1 "$here/mapped_pages" "$gib" 2>>"$out/features.log" | tee -a "$out/features.log" | grep '^{' >> "$out/features.jsonl"; then
      summary+=("PASS  mapped_pages.cu (managed, $gib GiB)")
    else
      summary+=("FAIL  mapped_pages.cu"); fail=1
    fi
  else
    summary+=("FAIL  nvcc build of mapped_pages.cu"); fail=1
  fi
fi

if [[ $mode == tensor ]]; then
  : > "$out/tensor.log"; : > "$out/tensor.jsonl"
  # A kernel that hangs (a warpgroup instruction some lanes never reach) must not take the whole
  # run with it: every step has a time limit (BERTH_TENSOR_TIMEOUT seconds, default 180).
  limit=${BERTH_TENSOR_TIMEOUT:-180}
  timeout -k 10 "$limit" "$here/tests/gpu" mma async_copy attention wgmma --test-threads=1 >> "$out/tensor.log" 2>&1
  status=$?
  if (( status == 0 )); then
    summary+=("PASS  tests/gpu mma async_copy attention wgmma")
  elif (( status == 124 || status == 137 )); then
    summary+=("FAIL  tests/gpu mma async_copy attention wgmma (no end within ${limit} s)"); fail=1
  else
    summary+=("FAIL  tests/gpu mma async_copy attention wgmma"); fail=1
  fi
  for n in ${BERTH_TENSOR_GEMM:-4096 8192}; do
    if timeout -k 10 "$limit" "$here/bin/tensor_gemm" --m "$n" --n "$n" --k "$n" --reps 20 2>&1 | tee -a "$out/tensor.log"; then
      summary+=("PASS  tensor_gemm $n (checked against cuBLAS and the host)")
    else
      summary+=("FAIL  tensor_gemm $n"); fail=1
    fi
  done
  for n in ${BERTH_TENSOR_GEMM:-4096 8192}; do
    if timeout -k 10 "$limit" "$here/bin/wgmma_gemm" --m "$n" --n "$n" --k "$n" --reps 20 2>&1 | tee -a "$out/tensor.log"; then
      summary+=("PASS  wgmma_gemm $n (checked against cuBLAS and the host)")
    else
      summary+=("FAIL  wgmma_gemm $n"); fail=1
    fi
  done
  for kernel in mma wgmma; do
    for d in 64 128; do
      for seq in ${BERTH_TENSOR_SEQ:-1024 4096 16384}; do
        heads=$(( (seq < 16384 ? 16384 / seq : 1) * 32 ))
        for causal in "" --causal; do
          if timeout -k 10 "$limit" "$here/bin/attention" --kernel "$kernel" --seq "$seq" --d "$d" --heads "$heads" $causal --reps 20 2>&1 | tee -a "$out/tensor.log"; then
            summary+=("PASS  attention $kernel d=$d seq=$seq $causal")
          else
            summary+=("FAIL  attention $kernel d=$d seq=$seq $causal"); fail=1
          fi
        done
      done
    done
  done
  if python3 -c 'import torch' 2>/dev/null; then
    if python3 "$here/tensor_anchor.py" "${BERTH_TENSOR_GEMM:-4096 8192}" "${BERTH_TENSOR_SEQ:-1024 4096 16384}" 2>>"$out/tensor.log" | tee -a "$out/tensor.jsonl" >> "$out/tensor.log"; then
      summary+=("PASS  tensor anchor")
    else
      summary+=("FAIL  tensor anchor"); fail=1
    fi
  else
    summary+=("SKIP  tensor anchor (needs torch)")
  fi
fi

if [[ $mode == soak ]]; then
  if "$here/tests/soak" --test-threads=1 --nocapture 2>&1 | tee "$out/soak.log"; then
    summary+=("PASS  soak")
  else
    summary+=("FAIL  soak"); fail=1
  fi
  # libtest prints a test's first line after its "test name ... ": keep the JSON only.
  grep -o '{"soak":.*}' "$out/soak.log" > "$out/soak.jsonl"
  summary+=("$(grep -c . "$out/soak.jsonl") soak lines in soak.jsonl")
fi

if [[ $mode == sanitize ]]; then
  run_sanitize "${@:2}"
fi

printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $fail
