//! The steady-state launch path above the backend allocates nothing: a counting allocator for
//! the runtime's unit tests, and the test that compares a scope's launches with the backend's
//! own share of them.

use crate::gpu::Gpu;
use crate::launch::builder::Launch;
use crate::launch::grid::Grid;
use crate::launch::kernel::{Entry, Kernel, Param, Part, Placement};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting the allocations of threads that asked for it.
struct Counting;

thread_local! {
    /// Allocations (and reallocations) made by this thread while counting.
    static COUNT: Cell<u64> = const { Cell::new(0) };
    static ON: Cell<bool> = const { Cell::new(false) };
}

fn note() {
    // `try_with`: the thread-locals may be gone while a thread exits.
    let _ = ON.try_with(|on| {
        if on.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; counting touches only
// const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations this thread makes in `f`.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = COUNT.with(Cell::get);
    ON.with(|on| on.set(true));
    f();
    ON.with(|on| on.set(false));
    COUNT.with(Cell::get) - before
}

/// `b[i] = a[i]`, for the simulator only (the PTX declares the entry, its body does nothing).
static COPY: Kernel = Kernel {
    name: "berth_test_copy",
    crate_name: "berth_runtime_counting",
    crate_files: Some(&crate::launch::CrateFiles {
        ptx: "\
.version 6.0
.target sm_70
.address_size 64

.visible .entry berth_test_copy(
\t.param .u64 berth_test_copy_param_0,
\t.param .u64 berth_test_copy_param_1,
\t.param .u64 berth_test_copy_param_2,
\t.param .u64 berth_test_copy_param_3
)
{
\tret;
}
",
        sass: None,
    }),
    params: &[
        Param::slice_ptr::<f32>("a", false, Placement::Device),
        Param::word("a", Part::Len),
        Param::slice_ptr::<f32>("b", true, Placement::Device),
        Param::word("b", Part::Len),
    ],
    location: concat!(file!(), ":", line!()),
    sim: copy_sim,
    uses_barrier: false,
    linear: None,
    planar: None,
    same_len: &[],
    block: None,
};

/// One simulated thread of [`COPY`].
///
/// # Safety
/// `p` holds the four parameter values' addresses; the slices are live device memory of the
/// simulator (host memory) of the given lengths, `b` written by nobody else.
unsafe fn copy_sim(p: &[*mut std::ffi::c_void]) {
    let i = berth_device::thread::global_x() as usize;
    // SAFETY: the caller's contract: four parameters of these types.
    let (a, la, b, lb) = unsafe {
        (
            *p[0].cast::<u64>() as *const f32,
            *p[1].cast::<u64>() as usize,
            *p[2].cast::<u64>() as *mut f32,
            *p[3].cast::<u64>() as usize,
        )
    };
    if i < la.min(lb) {
        // SAFETY: `i` is inside both slices; thread `i` alone writes `b[i]`.
        unsafe { *b.add(i) = *a.add(i) };
    }
}

const LAUNCHES: u64 = 1000;

#[test]
fn a_scopes_launches_allocate_nothing_beyond_the_backends_share() {
    let gpu = Gpu::simulator();
    let n = 64;
    let mut a = gpu.upload(&vec![1.0f32; n]).unwrap();
    let mut b = gpu.upload(&vec![0.0f32; n]).unwrap();
    let grid = Grid::new(1, n as u32);
    let launch = |q: &crate::scope::Scope<'_>, x: &_, y: &mut _| {
        let mut l = Launch::new(q, &COPY, grid).unwrap();
        l.device::<f32>(x);
        l.device_mut::<f32>(y);
        l.submit().unwrap().detach();
    };
    let mut berth = 0;
    gpu.scope(|s| {
        // Warm-up: the function is looked up, the scope's completion made, the use lists and
        // the simulator's queue grown.
        for _ in 0..10 {
            launch(s, &a, &mut b);
            launch(s, &b, &mut a);
        }
        berth = allocations(|| {
            for _ in 0..LAUNCHES / 2 {
                launch(s, &a, &mut b);
                launch(s, &b, &mut a);
            }
        });
        Ok(())
    })
    .unwrap();
    // The backend's own share: the same launches given to it directly (the simulator boxes
    // each one as a job for its stream's worker thread).
    let inner = &gpu.inner;
    let ops = inner.ops();
    let func = ops.function(&COPY, Entry::General).unwrap();
    let (mut pa, mut la, mut pb, mut lb) = (a.ptr, n as u64, b.ptr, n as u64);
    let backend = allocations(|| {
        for _ in 0..LAUNCHES {
            let mut ptrs = [
                (&raw mut pa).cast(),
                (&raw mut la).cast(),
                (&raw mut pb).cast(),
                (&raw mut lb).cast(),
            ];
            // SAFETY: one pointer per parameter of COPY, to values of their sizes; the buffers
            // outlive the synchronise below, and no other work uses them meanwhile.
            unsafe { ops.launch(&COPY, func, &grid, inner.default_stream, &mut ptrs) }.unwrap();
        }
    });
    inner.sync(inner.default_stream, None).unwrap();
    assert_eq!(a.to_vec().unwrap(), vec![1.0; n]);
    eprintln!("allocations: berth {berth}, backend {backend}");
    // A few for the simulator's queue growing as its worker falls behind (amortised).
    assert!(
        berth <= backend + 16,
        "{LAUNCHES} launches in a scope made {berth} allocations; the backend alone {backend}"
    );
}
