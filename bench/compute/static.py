#!/usr/bin/env python3
"""berth's compute kernels against nvcc's without a GPU: registers, local frame and machine
instructions of each kernel of examples/compute/src/compute.rs and examples/compute/src/plain.rs beside the
CUDA C++ it is measured against (bench/compute/reference.cu), both compiled by the same ptxas.

    python3 bench/compute/static.py [BERTH_PTX] [--arch sm_90] [--json]

BERTH_PTX defaults to the compute examples crate's PTX of the last build
(target/berth-nvptx/berth/berth_examples_compute/berth_examples_compute.ptx: `cargo build -p
berth-examples-compute` makes it). Needs nvcc, ptxas and nvdisasm of one CUDA release on PATH or in the
`nvidia-cuda-nvcc`, `nvidia-nvvm`, `nvidia-cuda-cccl` and `nvidia-cuda-nvdisasm` wheels
(`pip install nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-cccl==13.0.85
nvidia-cuda-nvdisasm`).

The hot loop is the loop holding the most floating-point instructions: its length is what
each trip executes (checks hoisted out of it leave a second, checked copy elsewhere that the
static count includes). The instruction count is static: every path of the kernel, its failure paths included, not
the instructions a launch executes. It shows where a kernel's code differs from nvcc's
(unrolled or not, checks, 64-bit arithmetic); only a GPU run says what that costs.
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# berth kernel -> the reference.cu kernel it is measured against.
PAIRS = [
    ("plain_sgemm_tiled", "sgemm_tiled"),
    ("plain_sgemm_reg4", "sgemm_reg4"),
    ("plain_sgemm_reg8", "sgemm_reg8"),
    ("plain_nbody", "nbody"),
    ("plain_stencil5", "stencil5"),
    ("plain_transpose", "transpose"),
    ("sgemm_tiled", "sgemm_tiled"),
    ("sgemm_reg4", "sgemm_reg4"),
    ("sgemm_reg8", "sgemm_reg8"),
    ("nbody", "nbody"),
    ("nbody_fast", "nbody_fast"),
]


def tool(name):
    """A CUDA tool from PATH, else from the pip wheels of the running Python."""
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia  # noqa: F401  (namespace package of the wheels)
    except ImportError:
        nvidia = None
    if nvidia is not None:
        for base in list(nvidia.__path__):
            for sub in ("cu13/bin", "cuda_nvcc/bin", "cu13/nvvm/bin"):
                p = os.path.join(base, sub, name)
                if os.path.isfile(p):
                    return p
    sys.exit(f"{name} not found: put a CUDA toolkit on PATH or install the wheels (see --help)")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return r


def usage(ptxas_log):
    """{mangled or plain name: (registers, stack, spill stores)} from `ptxas -v`."""
    out, cur = {}, None
    for line in ptxas_log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = m.group(1)
            out[cur] = [0, 0, 0]
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m and cur:
            out[cur][1], out[cur][2] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            out[cur][0] = int(m.group(1))
    return out


def sass_counts(nvdisasm, cubin):
    """{function name: (machine instructions, hot loop)} of a cubin, where the hot loop is
    (instructions, floating-point instructions) of the loop holding the most floating-point
    instructions (its body from the target of a backward branch to the branch), or None."""
    text = run([nvdisasm, "-c", cubin]).stdout
    funcs, cur = collections.defaultdict(list), None
    labels = collections.defaultdict(dict)
    for line in text.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            cur = m.group(1)
            continue
        if not cur:
            continue
        m = re.match(r"\s*(\.L\w+):", line)
        if m:
            labels[cur][m.group(1)] = len(funcs[cur])
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*(.*?);", line)
        if m:
            funcs[cur].append(m.group(1))
    out = {}
    for name, code in funcs.items():
        best = None
        for i, ins in enumerate(code):
            m = re.search(r"\bBRA\b.*?(\.L\w+)", ins)
            start = labels[name].get(m.group(1)) if m else None
            if start is None or start > i:
                continue
            body = code[start:i + 1]
            fp = sum(bool(re.search(r"\b(FFMA|FADD|FMUL|MUFU|DFMA|HFMA2)\b", x)) for x in body)
            if fp and (best is None or fp > best[1]):
                best = (len(body), fp)
        out[name] = (len(code), best)
    return out


def demangled(name):
    """`_Z10sgemm_reg8jPKfS0_Pf` -> `sgemm_reg8` (the reference's kernels are plain C names)."""
    m = re.match(r"_Z(\d+)", name)
    return name[len(m.group(0)):][: int(m.group(1))] if m else name


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--help" in sys.argv or "-h" in sys.argv:
        print(__doc__)
        return
    arch = "sm_90"
    if "--arch" in sys.argv:
        arch = sys.argv[sys.argv.index("--arch") + 1]
        args = [a for a in args if a != arch]
    ptx = args[0] if args else os.path.join(
        ROOT, "target/berth-nvptx/berth/berth_examples_compute/berth_examples_compute.ptx")
    if not os.path.isfile(ptx):
        sys.exit(f"{ptx} not found: build the compute examples first (cargo build -p berth-examples-compute)")
    nvcc, ptxas, nvdisasm = tool("nvcc"), tool("ptxas"), tool("nvdisasm")
    with tempfile.TemporaryDirectory(prefix="berth-static-") as tmp:
        env_path = os.path.dirname(nvcc) + os.pathsep + os.environ.get("PATH", "")
        os.environ["PATH"] = env_path  # nvcc finds cicc and ptxas beside itself
        ref_cubin = os.path.join(tmp, "reference.cubin")
        ref = run([nvcc, "-O3", f"-arch={arch}", "-cubin", "-Xptxas", "-v",
                   "-I", os.path.join(ROOT, "bench/include"),
                   os.path.join(ROOT, "bench/compute/reference.cu"), "-o", ref_cubin])
        berth_cubin = os.path.join(tmp, "berth.cubin")
        # The PTX's own target: sm_90a once the crate's inline PTX uses the warpgroup
        # instructions (the same machine code as sm_90 for everything else).
        target = re.search(r"^\.target (\w+)", open(ptx).read(), re.M)
        ptx_arch = target.group(1) if target and target.group(1) == arch + "a" else arch
        ours = run([ptxas, f"-arch={ptx_arch}", "-O3", "-v", ptx, "-o", berth_cubin])
        ref_use = {demangled(k): v for k, v in usage(ref.stderr).items()}
        our_use = usage(ours.stderr)
        ref_sass = {demangled(k): v for k, v in sass_counts(nvdisasm, ref_cubin).items()}
        our_sass = sass_counts(nvdisasm, berth_cubin)
    rows = []
    for kernel, cuda in PAIRS:
        # The entry the compute benchmark's launches run: the one-dimensional entry where the
        # kernel has one, else the one without z, else the general one.
        berth = next((e for e in (kernel + "__berth_1d", kernel + "__berth_2d", kernel)
                      if e in our_use), kernel)
        if berth not in our_use or cuda not in ref_use:
            continue
        (br, bs, bsp), (nr, ns, nsp) = our_use[berth], ref_use[cuda]
        rows.append({
            "kernel": berth, "reference": cuda,
            "registers": br, "nvcc_registers": nr,
            "stack": bs, "spill_stores": bsp, "nvcc_stack": ns,
            "sass": our_sass.get(berth, (0, None))[0],
            "nvcc_sass": ref_sass.get(cuda, (0, None))[0],
            "hot_loop": our_sass.get(berth, (0, None))[1],
            "nvcc_hot_loop": ref_sass.get(cuda, (0, None))[1],
        })
    if "--json" in sys.argv:
        for r in rows:
            print(json.dumps(r))
        return
    def loop(hot):
        return "—" if hot is None else f"{hot[0]} / {hot[1]}"

    print("| kernel | nvcc kernel | registers (nvcc) | stack / spills (nvcc stack) "
          "| SASS instructions (nvcc) | hot loop: instructions / FP (nvcc) |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['kernel']} | {r['reference']} | {r['registers']} ({r['nvcc_registers']}) "
              f"| {r['stack']} / {r['spill_stores']} ({r['nvcc_stack']}) "
              f"| {r['sass']} ({r['nvcc_sass']}) "
              f"| {loop(r['hot_loop'])} ({loop(r['nvcc_hot_loop'])}) |")


if __name__ == "__main__":
    main()
