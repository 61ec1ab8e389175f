//! The CPU simulator: runs a kernel's body on the host over its grid, with GPU semantics and
//! checks the GPU cannot make.
//!
//! - Blocks are spread over worker threads (one per core); blocks run independently, as on
//!   the GPU.
//! - Within a block, a kernel whose body calls `sync_threads` runs each GPU thread as a
//!   stackful coroutine (corosensei) on the worker: a thread reaching the barrier yields, and
//!   the block resumes all of them once every thread is there, so the barrier is real and
//!   costs a context switch, not an OS thread per GPU thread. Warp operations use the same
//!   machinery: the lanes of a warp meet at each warp call (`warp.rs`). Other kernels run
//!   their threads one after another as plain calls.
//! - Static and dynamic shared memory are per-block arenas that start poisoned
//!   (`shared.rs`); slices are host memory (the simulator's "device" memory), so
//!   `#[pinned_async]` data is copied in and out and `#[mapped]` memory is shared with the
//!   host, as on the GPU.
//! - Checks: a panic (out-of-bounds index, `gpu_assert!`, any `panic!`) is reported with the
//!   kernel, block, thread, file, line and message; two threads touching one element of
//!   shared memory between two barriers, or of global or mapped memory in one launch
//!   (`check.rs`), at least one writing and not both atomically, is a race report naming
//!   the array or argument, the element, both threads and both source lines; a read of shared
//!   memory no thread of the block has written is reported; a barrier reached by only part of
//!   a block is reported instead of hanging, and so is a warp call whose mask names a lane
//!   that never meets it. Launch limits are checked when the launch is queued (`limits`).
//! - The parts of a launch queued as several (the chunks of a pipelined launch, [`Parts`])
//!   are checked as one launch: two parts touching one element of the memory they share race
//!   as two blocks of one launch do.

use crate::backend::sim::block::{Block, Dims, Scratch, Turns, global_race};
use crate::backend::sim::check::{self, Run};
use crate::backend::sim::panic::{Captured, in_kernel, install_panic_hook, panic_error};
use crate::backend::sim::report::{self, Args};
use crate::backend::sim::warp::{self, Wait};
use crate::error::{Error, Result};
use crate::launch::{Grid, Kernel};
use berth_device::host;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::collections::HashMap;
use std::ffi::c_void;
use std::ops::Range;
use std::panic::Location;
use std::rc::Rc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Coroutine stack per simulated thread: kernel bodies are small, debug builds less so.
const STACK_BYTES: usize = 256 << 10;

/// The launch's parameter pointers, shared read-only by the worker threads.
struct Params<'a>(&'a [*mut c_void]);
// SAFETY: the pointers address parameter values that live (unchanged) for the whole launch;
// the memory the values point to is what the kernel's threads access, as on the GPU.
unsafe impl Sync for Params<'_> {}

/// The launches that run at once as the parts of one launch — the chunks of a pipelined
/// launch, on several streams — checked as one. Each part passes its own piece of some slice
/// arguments (`own`) and the same memory in every other, which the parts reach as the blocks
/// of one launch do: a block of one part and a block of another are different blocks on the
/// GPU, running in no particular order, whatever their coordinates in their parts' grids.
/// Each part, once its own checks pass, hands over the runs of its accesses outside its own
/// pieces ([`check::shared_part`]); the part that ends last sweeps those of every part for
/// conflicts between parts ([`check::cross_part`]) and reports the race as its failure.
pub(crate) struct Parts {
    /// The parameter slot of each slice argument cut into parts (its pointer's; the length's
    /// is the next), and its element size.
    own: Vec<(usize, usize)>,
    state: Mutex<PartsState>,
}

struct PartsState {
    /// Parts that have not ended.
    left: usize,
    /// The runs the ended parts handed over.
    runs: Vec<Run>,
    /// Each ended part's shape, to name its blocks and threads.
    dims: Vec<Option<Dims>>,
}

impl Parts {
    /// A launch of `parts` parts (at most `u32::MAX`), each with its own piece of the slice
    /// arguments at `own` (parameter slot, element size).
    pub(crate) fn new(parts: usize, own: &[(usize, usize)]) -> Parts {
        Parts {
            own: own.to_vec(),
            state: Mutex::new(PartsState {
                left: parts,
                runs: Vec::new(),
                dims: vec![None; parts],
            }),
        }
    }

    /// Part `part` (of shape `dims`) ended with its own checks passed, leaving `runs`; when it
    /// is the last to end, every part's runs and shapes.
    fn ended(
        &self,
        part: usize,
        dims: Dims,
        mut runs: Vec<Run>,
    ) -> Option<(Vec<Run>, Vec<Option<Dims>>)> {
        let mut s = self.state.lock().expect("poisoned");
        let slot = s.dims.get_mut(part)?;
        if slot.replace(dims).is_some() {
            return None;
        }
        s.runs.append(&mut runs);
        s.left -= 1;
        (s.left == 0).then(|| (std::mem::take(&mut s.runs), std::mem::take(&mut s.dims)))
    }
}

/// Run `k` over `grid` with the parameter values `ptrs` point to, to completion; as part
/// `part.1` of the launch `part.0` when it is one part of several.
///
/// # Safety
/// `ptrs` holds one pointer per parameter of `k` (as for `cuLaunchKernel`), to values of the
/// parameters' types; every slice they describe is live host memory for the launch. For a
/// part, `ptrs` holds a slice at each slot of the parts' `own`.
pub(crate) unsafe fn run(
    k: &'static Kernel,
    grid: &Grid,
    ptrs: &mut [*mut c_void],
    part: Option<(&Parts, usize)>,
) -> Result<()> {
    install_panic_hook();
    let (g, t) = (grid.blocks, grid.threads);
    let blocks = g.x as usize * g.y as usize * g.z as usize;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let params = Params(ptrs);
    let checks = LaunchChecks {
        // SAFETY: `run`'s contract: one pointer per parameter, to live values.
        args: unsafe { Args::new(k, params.0) },
        runs: Mutex::new(Vec::new()),
        turns: Turns::default(),
    };
    let workers = host_threads().min(blocks).max(1);
    let dims = Dims {
        grid: [g.x, g.y, g.z],
        block: [t.x, t.y, t.z],
        shared_bytes: grid.shared_bytes as usize,
    };
    let work = || {
        let mut stacks: Vec<DefaultStack> = Vec::new();
        let mut scratch = Scratch::default();
        loop {
            let b = next.fetch_add(1, Ordering::Relaxed);
            if b >= blocks || stop.load(Ordering::Relaxed) {
                break;
            }
            let bidx = [
                (b % g.x as usize) as u32,
                ((b / g.x as usize) % g.y as usize) as u32,
                (b / (g.x as usize * g.y as usize)) as u32,
            ];
            let r = run_block(k, &dims, bidx, &params, &checks, &mut stacks, &mut scratch);
            if let Err(e) = r {
                stop.store(true, Ordering::Relaxed);
                failure.lock().expect("poisoned").get_or_insert(e);
            }
        }
    };
    if workers == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..workers {
                // Named: an unnamed thread would take the name of the stream thread that
                // spawns it, and be counted (and shown in a debugger) as a stream.
                std::thread::Builder::new()
                    .name("berth-sim-block".into())
                    .spawn_scoped(s, work)
                    .expect("spawning a simulator block thread");
            }
        });
    }
    if let Some(e) = failure.into_inner().expect("poisoned") {
        return Err(e);
    }
    let mut runs = checks.runs.into_inner().expect("poisoned");
    if let Some(race) = check::cross_block(&mut runs) {
        return Err(race_error(k, &checks.args, race, |_| dims, false));
    }
    let Some((parts, part)) = part else {
        return Ok(());
    };
    let own: Vec<Range<usize>> = parts
        .own
        .iter()
        .filter_map(|&(slot, elem)| {
            let len_slot = k.len_of(slot)?;
            // SAFETY: `run`'s contract: a part holds a slice at each of the parts' `own`
            // slots (its pointer's), its pointer and length 8-byte values.
            let (base, len) = unsafe {
                (
                    params.0[slot].cast::<usize>().read_unaligned(),
                    params.0[len_slot].cast::<usize>().read_unaligned(),
                )
            };
            Some(base..base.saturating_add(len.saturating_mul(elem)))
        })
        .collect();
    check::shared_part(&mut runs, part as u32, &own);
    let Some((mut all, shapes)) = parts.ended(part, dims, runs) else {
        return Ok(());
    };
    match check::cross_part(&mut all) {
        None => Ok(()),
        Some(race) => {
            let shape = |p: u32| shapes[p as usize].unwrap_or(dims);
            Err(race_error(k, &checks.args, race, shape, true))
        }
    }
}

/// The report of a race between two blocks, of one launch or (`parts`) of two parts of one;
/// `dims` gives a part's shape.
fn race_error(
    k: &'static Kernel,
    args: &Args,
    race: check::CrossRace,
    dims: impl Fn(u32) -> Dims,
    parts: bool,
) -> Error {
    let side = |s: check::Side| {
        let d = dims(s.part);
        let block = d.block_coords(s.block);
        report::Across {
            part: parts.then_some(s.part),
            block,
            thread: d.coords(block, s.thread as usize).thread,
            kind: s.kind,
            at: s.at,
        }
    };
    let (a, b) = (side(race.a), side(race.b));
    Error::Simulator {
        kernel: k.name,
        block: b.block,
        thread: b.thread,
        problem: report::global_race_across(&args.describe(race.addr, race.bytes), a, b),
    }
}

/// What the blocks of one launch report to the launch's checks.
struct LaunchChecks {
    /// The slice arguments, to name the elements of a report.
    args: Args,
    /// Every block's global-memory accesses, as runs ([`check::runs`]).
    runs: Mutex<Vec<Run>>,
    /// The first thread to take each side of each mailbox.
    turns: Turns,
}

/// Whether `k` needs coroutines: its body names `sync_threads` (the macro's hint), or its PTX
/// entry reaches a barrier through any function it calls (helpers included). Cached.
fn uses_barrier(k: &'static Kernel) -> bool {
    static CACHE: Mutex<Option<HashMap<usize, bool>>> = Mutex::new(None);
    let key = k as *const Kernel as usize;
    let mut cache = CACHE.lock().expect("poisoned");
    *cache
        .get_or_insert_with(HashMap::new)
        .entry(key)
        .or_insert_with(|| {
            k.uses_barrier || crate::ptx::Module::cached(k.ptx()).uses_barrier(k.name)
        })
}

/// Run one block to completion, then check it: its last barrier interval, and its
/// global-memory accesses handed to the launch as runs.
#[allow(clippy::too_many_arguments)]
fn run_block(
    k: &'static Kernel,
    dims: &Dims,
    block: [u32; 3],
    params: &Params<'_>,
    checks: &LaunchChecks,
    stacks: &mut Vec<DefaultStack>,
    scratch: &mut Scratch,
) -> Result<()> {
    let coroutines = uses_barrier(k);
    let services = Rc::new(Block::new(
        dims,
        block,
        checks.turns.clone(),
        coroutines,
        scratch,
    ));
    let ran = if coroutines {
        run_coroutines(k, dims, block, params, checks, &services, stacks)
    } else {
        run_plain(k, dims, block, params, &services)
    };
    // A thread stopped at a mailbox turn another thread of the launch had taken: the report
    // names both.
    let ran = match services.turn_conflict.take() {
        Some(c) => Err(Error::Simulator {
            kernel: k.name,
            block: c.second.0,
            thread: c.second.1,
            problem: report::mailbox_role_shared(
                &checks.args.name(c.ring),
                c.role,
                c.first,
                c.second,
            ),
        }),
        None => ran,
    };
    let checked = ran.and_then(|()| {
        // A block that met no barrier is one interval: its global accesses are checked while
        // they become runs, in one pass.
        let one_interval = services.interval_start.get() == 0;
        let args = &checks.args;
        if let Some((t, problem)) = services.end_interval(dims, block, args, !one_interval) {
            return Err(simulator_error(k, dims, block, t, problem));
        }
        if let Some((t, problem)) = services.copy_never_waited(dims, block) {
            return Err(simulator_error(k, dims, block, t, problem));
        }
        let [x, y, z] = block.map(u64::from);
        let [gx, gy, _] = dims.grid.map(u64::from);
        scratch.runs.clear();
        let race = check::runs(
            &mut services.global_log.borrow_mut(),
            x + gx * (y + gy * z),
            one_interval,
            &mut scratch.runs,
        );
        if let Some(r) = race {
            let (t, problem) = global_race(dims, block, args, r);
            return Err(simulator_error(k, dims, block, t, problem));
        }
        if !scratch.runs.is_empty() {
            checks
                .runs
                .lock()
                .expect("poisoned")
                .append(&mut scratch.runs);
        }
        Ok(())
    });
    services.recycle(scratch);
    checked
}

fn simulator_error(
    k: &'static Kernel,
    dims: &Dims,
    block: [u32; 3],
    t: usize,
    problem: String,
) -> Error {
    Error::Simulator {
        kernel: k.name,
        block,
        thread: dims.coords(block, t).thread,
        problem,
    }
}

/// Among threads waiting at a barrier (`wait`), the first whose `sync_threads()` call is not
/// the first waiting thread's, and the report.
fn split_barrier(
    sites: &[Option<&'static Location<'static>>],
    wait: &[Wait],
) -> Option<(usize, String)> {
    let mut waiting = (0..wait.len()).filter(|&t| wait[t] == Wait::Barrier);
    let first = waiting.next()?;
    let other = waiting.find(|&t| sites[t] != sites[first])?;
    let site = |t: usize| {
        sites[t].map_or("an unknown place".to_string(), |l| {
            format!("{}:{}:{}", l.file(), l.line(), l.column())
        })
    };
    Some((
        other,
        format!(
            "threads of one block wait at different barriers: thread {first} of the block in sync_threads() at {}, thread {other} at {} (on the GPU every thread of a block must reach the same sync_threads() call; meeting at different ones is undefined behaviour)",
            site(first),
            site(other)
        ),
    ))
}

/// Run a block's threads one after another, as plain calls.
fn run_plain(
    k: &'static Kernel,
    dims: &Dims,
    block: [u32; 3],
    params: &Params<'_>,
    services: &Rc<Block>,
) -> Result<()> {
    let fail = |t: usize, problem: String| simulator_error(k, dims, block, t, problem);
    for t in 0..dims.threads() {
        services.current.set(t);
        // SAFETY: thread `t` of `block` runs alone on this OS thread (its coordinates are its
        // own); `Block` keeps the services' contract and outlives the call.
        let _in = unsafe { host::enter(dims.coords(block, t), services.clone()) };
        // SAFETY: `run`'s contract: the pointers match the kernel's parameters.
        let r = in_kernel(|| unsafe { (k.sim)(params.0) });
        if let Err(report) = r {
            if let Some((what, at)) = services.stray_barrier.get() {
                return Err(fail(
                    t,
                    format!(
                        "{what}() at {}:{} was reached, but neither the kernel body nor its PTX shows a barrier or warp operation (was the PTX built from other sources?); rebuild the kernel crate",
                        at.file(),
                        at.line()
                    ),
                ));
            }
            return Err(panic_error(k, block, dims.coords(block, t).thread, report));
        }
    }
    Ok(())
}

/// Run a block's threads as coroutines: a barrier or a warp call is a yield.
fn run_coroutines(
    k: &'static Kernel,
    dims: &Dims,
    block: [u32; 3],
    params: &Params<'_>,
    checks: &LaunchChecks,
    services: &Rc<Block>,
    stacks: &mut Vec<DefaultStack>,
) -> Result<()> {
    let n = dims.threads();
    let fail = |t: usize, problem: String| simulator_error(k, dims, block, t, problem);
    while stacks.len() < n {
        stacks.push(DefaultStack::new(STACK_BYTES).map_err(|e| {
            Error::Usage(format!(
                "the simulator could not allocate a coroutine stack: {e}"
            ))
        })?);
    }
    type Co = Coroutine<(), (), std::result::Result<(), Captured>, DefaultStack>;
    let mut threads: Vec<Option<Co>> = Vec::with_capacity(n);
    // Borrowed, not an `Rc` clone: a coroutine that never ran (its block stopped at an earlier
    // thread's panic) is reset with its closure still on its stack, never dropped.
    let svc: &Block = services;
    for t in 0..n {
        let stack = stacks.pop().expect("allocated above");
        // SAFETY: the coroutine borrows `params` and `services` (alive for the whole launch)
        // and is driven to completion or reset before this function returns.
        let co = unsafe {
            Coroutine::with_stack_unchecked(stack, move |y: &Yielder<(), ()>, ()| {
                svc.yielders.borrow_mut()[t] = y as *const _;
                // SAFETY: `run`'s contract.
                in_kernel(|| (k.sim)(params.0))
            })
        };
        threads.push(Some(co));
    }
    let mut wait = vec![Wait::No; n];
    let mut result = Ok(());
    'rounds: loop {
        let progress = services.proxy.borrow().progress();
        let (mut spun, mut stepped) = (None, false);
        for t in 0..n {
            let Some(co) = threads[t].as_mut() else {
                continue;
            };
            if wait[t] != Wait::No {
                continue;
            }
            services.current.set(t);
            let step = {
                // SAFETY: only thread `t`'s coroutine runs during this turn (its coordinates
                // are its own); `services` outlives every coroutine of the block.
                let _in = unsafe { host::enter(dims.coords(block, t), services.clone()) };
                co.resume(())
            };
            match step {
                CoroutineResult::Yield(()) => {
                    if std::mem::take(&mut services.spinning.borrow_mut()[t]) {
                        // Waiting on an mbarrier: run again next round.
                        spun.get_or_insert(t);
                        continue;
                    }
                    stepped = true;
                    let at_warp = services.warp_calls.borrow()[t].is_some();
                    wait[t] = if at_warp { Wait::Warp } else { Wait::Barrier };
                }
                CoroutineResult::Return(r) => {
                    stepped = true;
                    stacks.push(threads[t].take().expect("present").into_stack());
                    wait[t] = Wait::Done;
                    if let Err(report) = r {
                        result = Err(panic_error(k, block, dims.coords(block, t).thread, report));
                        break 'rounds;
                    }
                }
            }
        }
        // A thread that returned in this round was active for the others in it (`active_mask`
        // does not depend on the order the round ran its threads in).
        for (r, w) in services.returned.borrow_mut().iter_mut().zip(&wait) {
            *r = *w == Wait::Done;
        }
        // No thread can run: let the warps that can meet exchange values and go on.
        let released = warp::release(
            &mut wait,
            &mut services.warp_calls.borrow_mut(),
            &mut services.warp_results.borrow_mut(),
        );
        match released {
            Ok(true) => continue,
            Ok(false) => {}
            // Lanes still waiting on an mbarrier may yet join a warp call the others wait in.
            Err(_) if spun.is_some() => {}
            Err((t, problem)) => {
                result = Err(fail(t, problem));
                break;
            }
        }
        if let Some(t) = spun {
            if stepped || services.proxy.borrow().progress() != progress {
                continue;
            }
            let others = wait.iter().filter(|&&w| w == Wait::Barrier).count();
            result = Err(fail(
                t,
                format!(
                    "threads wait on an mbarrier phase that no thread can complete any more ({others} other threads wait in sync_threads(), the rest have returned or wait on mbarriers too; on the GPU this hangs)"
                ),
            ));
            break;
        }
        let done = wait.iter().filter(|&&w| w == Wait::Done).count();
        let at_barrier = n - done;
        if done == n {
            break;
        }
        if done > 0 {
            let at = services
                .barrier_at
                .get()
                .map_or(String::new(), |l| format!(" at {}:{}", l.file(), l.line()));
            let t = wait.iter().position(|&w| w == Wait::Barrier).unwrap_or(0);
            result = Err(fail(
                t,
                format!(
                    "a barrier reached by only part of the block: {at_barrier} threads wait in sync_threads(){at}, {done} have returned (on the GPU this hangs or is undefined)"
                ),
            ));
            break;
        }
        // Every thread is at a barrier; on the GPU it must be one barrier: `bar.sync` is
        // aligned, and threads of a block waiting at different ones is undefined behaviour.
        if let Some((t, problem)) = split_barrier(&services.barrier_sites.borrow(), &wait) {
            result = Err(fail(t, problem));
            break;
        }
        // Every thread is at the barrier: a new interval begins.
        if let Some((t, problem)) = services.end_interval(dims, block, &checks.args, true) {
            result = Err(fail(t, problem));
            break;
        }
        wait.iter_mut().for_each(|w| *w = Wait::No);
    }
    for co in threads.iter_mut().filter_map(Option::as_mut) {
        // SAFETY: an unfinished coroutine is suspended in `sync_threads` or a warp call inside the kernel
        // body; kernel frames hold plain data (views, DeviceCopy values), nothing to drop.
        unsafe { co.force_reset() };
    }
    for co in threads.into_iter().flatten() {
        stacks.push(co.into_stack());
    }
    result
}

/// The host's threads, found once: where a cgroup limits the process, finding them reads
/// files, which took a third of a small launch's time.
pub(crate) fn host_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
