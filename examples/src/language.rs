//! Kernels that show parts of the kernel language: a declared block shape, a generic kernel
//! built for listed types, and a multiply-add kept in two roundings (`fp_contract = false`)
//! beside the default contracted one.

use berth::prelude::*;

/// `out[i] = a[i] * b[i] + c[i]`: contracted to one FMA on the GPU (nvcc's default).
#[gpu_kernel]
pub fn mul_add_contracted(a: &[f32], b: &[f32], c: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = a[i] * b[i] + c[i];
    }
}

/// As [`mul_add_contracted`], kept as a multiply and an add, each rounded.
#[gpu_kernel(fp_contract = false)]
pub fn mul_add_exact(a: &[f32], b: &[f32], c: &[f32], out: &mut [f32]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = a[i] * b[i] + c[i];
    }
}

/// Transpose a row-major `rows × cols` matrix (both multiples of 16) through a 16×16 shared
/// tile: read rows, write columns. Launch with
/// `Grid::new((cols / 16, rows / 16), (16, 16))`.
#[gpu_kernel(block = (16, 16))]
pub fn transpose(rows: u32, cols: u32, m: &[f32], out: &mut [f32]) {
    // A grid with more than one layer along z would give two blocks one tile: the blocks of
    // layer 0 transpose, the others return whole (before the barrier).
    if block::idx_z() != 0 {
        return;
    }
    let tile = shared_array!(T: [[f32; 16]; 16]);
    let (tx, ty) = (thread::idx_x(), thread::idx_y());
    let (rows, cols) = (rows as usize, cols as usize);
    let (r, c) = (block::idx_y() * 16 + ty, block::idx_x() * 16 + tx);
    // SAFETY: each thread writes only its own (ty, tx) slot (the block is declared 16×16);
    // the transposed read below comes after the barrier.
    unsafe { tile.row(ty).write(tx, m[r * cols + c]) };
    // SAFETY: every thread of the block reaches the barrier: no branch or return before it.
    unsafe { sync_threads() };
    // Element (c', r') of the output: this block's tile, transposed.
    let (or, oc) = (block::idx_x() * 16 + ty, block::idx_y() * 16 + tx);
    if oc < rows {
        // SAFETY: (or, oc) is thread (c, r)'s transposed position — distinct threads of layer
        // 0 along z (the only one that gets here; the block is declared 16×16×1) have
        // distinct ones — and with `oc < rows` the index `or * rows + oc` is one-to-one: no
        // other thread touches this element. Slot (tx, ty) of the tile was written by thread
        // (ty, tx) before the barrier, and nobody writes the tile after it.
        unsafe { out.write(or * rows + oc, tile.row(tx).read(ty)) };
    }
}

/// `y[i] = a * x[i] + y[i]` in any float type listed in `instances`: one PTX entry per type
/// (`axpy_f32`, `axpy_f64`), launched as `axpy::<f32>(..)` or with the type inferred.
#[gpu_kernel(instances(T = f32, f64))]
pub fn axpy<T>(a: T, x: &[T], y: &mut [T])
where
    T: DeviceCopy + core::ops::Mul<Output = T> + core::ops::Add<Output = T>,
{
    let i = thread::index();
    if i < y.len() {
        y[i] = a * x[i] + y[i];
    }
}
