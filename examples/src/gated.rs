//! Kernels that wait for the host before they touch their memory. They keep a launch in flight
//! for exactly as long as a test needs, to check what the host may do with memory meanwhile
//! (tests of leaked guards), and fill or skip outputs on purpose (tests of what output staging
//! holds).

use berth::prelude::*;

/// How long a gated kernel waits for its gate before it fails (10 s).
pub const GATE_PATIENCE_NS: u64 = 10_000_000_000;

/// Wait until the host sets `gate[0]` to a non-zero value; fail after [`GATE_PATIENCE_NS`].
fn pass(gate: &Signals) {
    if gate.wait(0, |v| v != 0, GATE_PATIENCE_NS).is_none() {
        fail("the host never opened the gate");
    }
}

/// Once the gate opens, `out[i] = value` (device memory).
#[gpu_kernel]
pub fn gated_fill(value: u32, #[mapped] gate: &Signals, out: &mut [u32]) {
    let i = thread::index();
    if i < out.len() {
        pass(gate);
        out[i] = value;
    }
}

/// Once the gate opens, `out[i] = value` (pinned host memory, copied back after the kernel).
#[gpu_kernel]
pub fn gated_fill_pinned(
    value: u32,
    #[mapped] gate: &Signals,
    #[pinned_async(out)] out: &mut [u32],
) {
    let i = thread::index();
    if i < out.len() {
        pass(gate);
        out[i] = value;
    }
}

/// Once the gate opens, `out[i] = value` (mapped host memory, written in place).
#[gpu_kernel]
pub fn gated_fill_mapped(value: u32, #[mapped] gate: &Signals, #[mapped] out: &mut [u32]) {
    let i = thread::index();
    if i < out.len() {
        pass(gate);
        out[i] = value;
    }
}

/// Once the gate opens, `out[i] = x[i]` (`x` mapped host memory, read in place).
#[gpu_kernel]
pub fn gated_copy_mapped(#[mapped] gate: &Signals, #[mapped] x: &[u32], out: &mut [u32]) {
    let i = thread::index();
    if i < out.len() && i < x.len() {
        pass(gate);
        out[i] = x[i];
    }
}

/// Once the gate opens, `y[i] = x[i] + add` (pinned in and out; pipelined by
/// `gated_add_pipelined`).
#[gpu_kernel(elementwise)]
pub fn gated_add(
    add: u32,
    #[mapped] gate: &Signals,
    #[pinned_async] x: &[u32],
    #[pinned_async(out)] y: &mut [u32],
) {
    let i = thread::index();
    if i < y.len() {
        pass(gate);
        y[i] = x[i] + add;
    }
}

/// `out[i] = value` for every element: leaves `value` in the staging memory it used.
#[gpu_kernel]
pub fn fill_bytes(value: u8, #[pinned_async(out)] out: &mut [u8]) {
    let i = thread::index();
    if i < out.len() {
        out[i] = value;
    }
}

/// Writes `out[i] = true` only where `i % every == 0` (`every == 0`: nowhere): every other
/// element of the output is whatever the staging memory held.
#[gpu_kernel]
pub fn set_some(every: u32, #[pinned_async(out)] out: &mut [bool]) {
    let i = thread::index();
    if i < out.len() && every != 0 && i.get().is_multiple_of(every as usize) {
        out[i] = true;
    }
}

/// `out[i] = true` where `mask[i] != 0`; elsewhere nothing is written. Elementwise, so
/// `mark_pipelined` leaves unwritten elements in every chunk's staging.
#[gpu_kernel(elementwise)]
pub fn mark(#[pinned_async] mask: &[u8], #[pinned_async(out)] out: &mut [bool]) {
    let i = thread::index();
    if i < out.len() && i < mask.len() && mask[i] != 0 {
        out[i] = true;
    }
}
