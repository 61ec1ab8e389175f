//! Small relaxation kernels for chains of dependent launches: each step reads one buffer and
//! writes the other, so step k+1 depends on step k. The launch-queue tests and the launch
//! benchmark queue a thousand of them.

use berth::prelude::*;

/// One Jacobi step of the 1D Laplace equation with fixed ends:
/// `b[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1])`, `b[0] = a[0]`, `b[n-1] = a[n-1]`.
/// The products by powers of two are exact, so a fused multiply-add (the GPU build's default,
/// as nvcc's) gives the same bits as the host's two roundings.
#[gpu_kernel]
pub fn jacobi(a: &[f32], b: &mut [f32]) {
    let i = thread::index();
    let n = b.len();
    // One check up front (a panic if `a` is shorter than `b`) proves every read below in bounds.
    let a = a.prefix(n);
    if i < n {
        b[i] = if i > 0 && i + 1 < n {
            0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1])
        } else {
            a[i]
        };
    }
}

/// A weighted Jacobi step: `b[i] = a[i] + w * (0.5 * (a[i - 1] + a[i + 1]) - a[i])` inside,
/// ends copied. The weight is the scalar a replayed graph changes. Not contracted into fused
/// multiply-adds, so the GPU's bits are the host's ([`relax_weighted_host`]).
#[gpu_kernel(fp_contract = false)]
pub fn relax_weighted(w: f32, a: &[f32], b: &mut [f32]) {
    let i = thread::index();
    let n = b.len();
    let a = a.prefix(n);
    if i < n {
        b[i] = if i > 0 && i + 1 < n {
            a[i] + w * (0.5 * (a[i - 1] + a[i + 1]) - a[i])
        } else {
            a[i]
        };
    }
}

/// [`relax_weighted`] that panics (index out of bounds) when `w` is negative: a fault in the middle of
/// a queue.
#[gpu_kernel(fp_contract = false)]
pub fn relax_weighted_or_fail(w: f32, a: &[f32], b: &mut [f32]) {
    let i = thread::index();
    let n = b.len();
    if i < n {
        let j = if w < 0.0 { n + i } else { i.get() };
        b[i] = if i == 0 || i + 1 == n {
            a[j]
        } else {
            a[j] + w * (0.5 * (a[i - 1] + a[i + 1]) - a[j])
        };
    }
}

/// The host's [`jacobi`] step.
#[cfg(not(target_arch = "nvptx64"))]
pub fn jacobi_host(a: &[f32], b: &mut [f32]) {
    let n = b.len();
    for i in 0..n {
        b[i] = if i == 0 || i + 1 == n {
            a[i]
        } else {
            0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1])
        };
    }
}

/// The host's [`relax_weighted`] step.
#[cfg(not(target_arch = "nvptx64"))]
pub fn relax_weighted_host(w: f32, a: &[f32], b: &mut [f32]) {
    let n = b.len();
    for i in 0..n {
        b[i] = if i == 0 || i + 1 == n {
            a[i]
        } else {
            a[i] + w * (0.5 * (a[i - 1] + a[i + 1]) - a[i])
        };
    }
}

/// `steps` steps of `step` from `a` (alternating between two buffers, as the GPU chain does);
/// the final values.
#[cfg(not(target_arch = "nvptx64"))]
pub fn chain_host(
    a: &[f32],
    steps: usize,
    mut step: impl FnMut(usize, &[f32], &mut [f32]),
) -> Vec<f32> {
    let mut x = a.to_vec();
    let mut y = vec![0.0; a.len()];
    for k in 0..steps {
        step(k, &x, &mut y);
        std::mem::swap(&mut x, &mut y);
    }
    x
}

/// [`jacobi`] that first waits until the host sets `gate[0]` (failing after 10 s): a launch
/// at the head of a queue that cannot finish before the host has queued everything after it.
#[gpu_kernel]
pub fn gated_jacobi(#[mapped] gate: &Signals, a: &[f32], b: &mut [f32]) {
    let i = thread::index();
    let n = b.len();
    if i < n {
        if gate.wait(0, |v| v != 0, 10_000_000_000).is_none() {
            fail("the host never opened the gate");
        }
        b[i] = if i == 0 || i + 1 == n {
            a[i]
        } else {
            0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1])
        };
    }
}
