#!/usr/bin/env python3
"""Tensor-core yardsticks for the `tensor` mode of run.sh, in the run that measures berth:
cuBLAS (through torch.matmul) fp16/bf16 GEMM at the sizes given, and PyTorch's
scaled_dot_product_attention with the flash backend, forward, bf16, d = 64/128, causal and
not, at the sequence lengths given with the batch x heads berth's attention runs. TFLOP/s from
the median of timed runs (CUDA events) after warm-up. JSON lines on stdout.

    python3 anchor.py "4096 8192" "1024 4096 16384"
"""
import json
import statistics as st
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel


def out(**k):
    print(json.dumps(k), flush=True)


def bench(f, reps=20):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return st.median(ts)


def heads_for(seq):
    """Batch x heads of both sides' attention runs: 2 x 16 x max(1, 16384 / seq)."""
    return max(1, 16384 // seq) * 2 * 16


def main():
    gemm_sizes = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "4096 8192").split()]
    seqs = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1024 4096 16384").split()]
    for name, dt in [("f16", torch.float16), ("bf16", torch.bfloat16)]:
        for n in gemm_sizes:
            x = torch.randn(n, n, device="cuda", dtype=dt)
            y = torch.randn(n, n, device="cuda", dtype=dt)
            ms = bench(lambda: x @ y)
            out(impl="cublas_torch_matmul", dtype=name, n=n, ms=round(ms, 4),
                tflops=round(2 * n**3 / ms / 1e9, 1))
    for d in [64, 128]:
        for seq in seqs:
            bh = heads_for(seq)
            q, k, v = (torch.randn(1, bh, seq, d, device="cuda", dtype=torch.bfloat16)
                       for _ in range(3))
            for causal in [False, True]:
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    ms = bench(lambda: torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=causal))
                fl = 4 * bh * seq * seq * d / (2 if causal else 1)
                out(impl="torch_sdpa_flash", dtype="bf16", d=d, seq=seq, heads=bh, causal=causal,
                    ms=round(ms, 4), tflops=round(fl / ms / 1e9, 1))


if __name__ == "__main__":
    main()
