//! How the simulator's checks word what they find: the element by the name the kernel's
//! author knows (a slice argument or a shared array, and its index), both threads, what each
//! did and the source line where it did it.

use crate::launch::{Kernel, ParamKind, Placement};
use berth_device::host::{Access, At};
use std::ffi::c_void;

/// One slice argument of a launch, to name the elements of its memory.
struct Arg {
    name: &'static str,
    base: usize,
    len: usize,
    mapped: bool,
}

/// The slice arguments of a launch.
pub(crate) struct Args(Vec<Arg>);

impl Args {
    /// The slice arguments of `k` in the parameter values `ptrs` points to.
    ///
    /// # Safety
    /// `ptrs` holds one pointer per parameter of `k`, to a value of the parameter's size.
    pub(crate) unsafe fn new(k: &Kernel, ptrs: &[*mut c_void]) -> Args {
        let mut out = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            let ParamKind::SlicePtr { placement, .. } = p.kind else {
                continue;
            };
            let (Some(&ptr), Some(&len)) = (ptrs.get(i), ptrs.get(i + 1)) else {
                continue;
            };
            // SAFETY: a slice's pointer and length are 8-byte values (the contract).
            let (base, len) = unsafe {
                (
                    ptr.cast::<usize>().read_unaligned(),
                    len.cast::<usize>().read_unaligned(),
                )
            };
            out.push(Arg {
                name: p.name,
                base,
                len,
                mapped: matches!(placement, Placement::Mapped | Placement::Auto),
            });
        }
        Args(out)
    }

    /// "element 5 of `out` (global memory)" for the `bytes`-byte element at `addr`.
    pub(crate) fn describe(&self, addr: usize, bytes: usize) -> String {
        let bytes = bytes.max(1);
        match self
            .0
            .iter()
            .find(|a| addr >= a.base && addr < a.base + a.len * bytes)
        {
            Some(a) => format!(
                "element {} of `{}` ({})",
                (addr - a.base) / bytes,
                a.name,
                if a.mapped {
                    "mapped host memory"
                } else {
                    "global memory"
                }
            ),
            None => format!("the {bytes} bytes at {addr:#x} (global memory, in no slice argument)"),
        }
    }
}

fn at(l: At) -> String {
    format!("{}:{}:{}", l.file(), l.line(), l.column())
}

fn did(k: Access) -> &'static str {
    match k {
        Access::Read => "read it",
        Access::Write => "wrote it",
        Access::Atomic => "updated it atomically",
        Access::BlockAtomic => "updated it atomically with Scope::Block",
    }
}

fn thread(t: [u32; 3]) -> String {
    format!("({}, {}, {})", t[0], t[1], t[2])
}

/// One side of a race within a block: the thread, its access and where.
pub(crate) type InBlock = ([u32; 3], Access, At);

/// Two threads of a block, and what each did.
fn pair(a: InBlock, b: InBlock) -> String {
    if a.1 == b.1 {
        return format!(
            "threads {} and {} both {}, at {} and {}",
            thread(a.0),
            thread(b.0),
            did(a.1),
            at(a.2),
            at(b.2)
        );
    }
    format!(
        "thread {} {} at {} and thread {} {} at {}",
        thread(a.0),
        did(a.1),
        at(a.2),
        thread(b.0),
        did(b.1),
        at(b.2)
    )
}

/// Two threads of one block raced on shared memory.
pub(crate) fn shared_race(what: &str, a: InBlock, b: InBlock) -> String {
    format!(
        "a data race on shared memory between two barriers: {what}: {} (threads are numbered \
         within the block; a sync_threads() between the accesses, or atomics for both, orders \
         them)",
        pair(a, b)
    )
}

/// Two threads of one block raced on global or mapped memory.
pub(crate) fn global_race_in_block(what: &str, a: InBlock, b: InBlock) -> String {
    format!(
        "a data race on {what}, within one block: {}, with no sync_threads() between them \
         (threads are numbered within the block; without a barrier between them, only atomic \
         accesses may share an element)",
        pair(a, b)
    )
}

/// One side of a race between blocks: the block, the thread in it, its access and where.
pub(crate) type AcrossBlocks = ([u32; 3], [u32; 3], Access, At);

/// Two blocks raced on global or mapped memory.
pub(crate) fn global_race_across(what: &str, a: AcrossBlocks, b: AcrossBlocks) -> String {
    let side = |(block, t, kind, l): AcrossBlocks| {
        format!(
            "thread {} of block {} {} at {}",
            thread(t),
            thread(block),
            did(kind),
            at(l)
        )
    };
    let why = if a.2 == Access::BlockAtomic || b.2 == Access::BlockAtomic {
        "an atomic with Scope::Block is atomic only with respect to the threads of its own \
         block: another block's access to the element, atomic or not, races with it, and on \
         the GPU updates are lost; use Scope::Device for an element that blocks share"
    } else {
        "blocks run in no particular order: only atomics may share an element between them"
    };
    format!(
        "a data race on {what}, between blocks: {} and {} ({why})",
        side(a),
        side(b)
    )
}

/// A thread read shared memory no thread of its block had written.
pub(crate) fn unwritten(what: &str, kind: Access, l: At) -> String {
    let how = match kind {
        Access::Atomic | Access::BlockAtomic => "an atomic update of",
        _ => "a read of",
    };
    format!(
        "{how} shared memory that no thread of the block has written: {what}, at {} (shared \
         memory starts undefined on the GPU, with whatever an earlier block left there; the \
         simulator fills it with 0xff bytes)",
        at(l)
    )
}
