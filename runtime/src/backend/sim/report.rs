//! How the simulator's checks word what they find: the element by the name the kernel's
//! author knows (a slice argument or a shared array, and its index), both threads, what each
//! did and the source line where it did it.

use crate::launch::{Kernel, Placement};
use berth_device::host::{Access, At, MailboxRole};
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
            let Some(pointee) = p.pointee else {
                continue;
            };
            let Some(l) = k.len_of(i) else {
                continue;
            };
            let (Some(&ptr), Some(&len)) = (ptrs.get(i), ptrs.get(l)) else {
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
                mapped: matches!(pointee.placement, Placement::Mapped | Placement::Auto),
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

impl Args {
    /// "`inbox` (mapped host memory)" for the argument whose memory starts at `addr`.
    pub(crate) fn name(&self, addr: usize) -> String {
        match self.0.iter().find(|a| a.base == addr) {
            Some(a) => format!(
                "`{}` ({})",
                a.name,
                if a.mapped {
                    "mapped host memory"
                } else {
                    "global memory"
                }
            ),
            None => format!("the mailbox at {addr:#x}"),
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

/// One side of a race between blocks: the part of a launch queued as several (the chunk of a
/// pipelined launch), the block, the thread in it, its access and where.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Across {
    pub(crate) part: Option<u32>,
    pub(crate) block: [u32; 3],
    pub(crate) thread: [u32; 3],
    pub(crate) kind: Access,
    pub(crate) at: At,
}

/// Two blocks raced on global or mapped memory: of one launch, or of two parts of one (then
/// both sides name their part).
pub(crate) fn global_race_across(what: &str, a: Across, b: Across) -> String {
    let side = |s: Across| {
        let part = s.part.map_or(String::new(), |p| format!(" of chunk {p}"));
        format!(
            "thread {} of block {}{part} {} at {}",
            thread(s.thread),
            thread(s.block),
            did(s.kind),
            at(s.at)
        )
    };
    let block_scope = a.kind == Access::BlockAtomic || b.kind == Access::BlockAtomic;
    let why = match (a.part.is_some(), block_scope) {
        (false, true) => {
            "an atomic with Scope::Block is atomic only with respect to the threads of its own \
             block: another block's access to the element, atomic or not, races with it, and on \
             the GPU updates are lost; use Scope::Device for an element that blocks share"
        }
        (false, false) => {
            "blocks run in no particular order: only atomics may share an element between them"
        }
        (true, true) => {
            "the chunks of a pipelined launch may run at once, on several streams, so a block of one \
             chunk and a block of another are different blocks, whatever their coordinates; an \
             atomic with Scope::Block is atomic only with respect to the threads of its own \
             block: another block's access to the element, atomic or not, races with it, and on \
             the GPU updates are lost; use Scope::Device for an element that the chunks share"
        }
        (true, false) => {
            "the chunks of a pipelined launch may run at once, on several streams, in no particular \
             order: only atomics may share an element between them"
        }
    };
    let between = if a.part.is_some() {
        "between chunks of a pipelined launch"
    } else {
        "between blocks"
    };
    format!(
        "a data race on {what}, {between}: {} and {} ({why})",
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

/// A thread reached shared memory that an asynchronous copy had not yet made visible to it.
pub(crate) fn async_copy_misuse(
    what: &str,
    access: InBlock,
    copy: ([u32; 3], At),
    waited: bool,
) -> String {
    let how = match access.1 {
        Access::Read => "a read of",
        Access::Write => "a write to",
        Access::Atomic | Access::BlockAtomic => "an atomic update of",
    };
    let who = if access.0 == copy.0 {
        "the same thread".to_string()
    } else {
        format!("thread {}", thread(copy.0))
    };
    let (state, rule) = if waited {
        (
            "that another thread's asynchronous copy (cp.async) wrote, with no barrier after \
             the copying thread's wait",
            "another thread's asynchronous copy becomes visible only after that thread's wait \
             and a sync_threads() after it",
        )
    } else {
        (
            "while an asynchronous copy (cp.async) to it is in flight, before the wait for its \
             group",
            "an asynchronous copy's bytes may arrive at any moment until its thread waits for \
             its group with async_copy::wait or wait_all",
        )
    };
    format!(
        "{how} shared memory {state}: {what}: thread {} {} at {}, and {who} copied it at {} \
         ({rule})",
        thread(access.0),
        did(access.1),
        at(access.2),
        at(copy.1),
    )
}

/// A thread returned while an asynchronous copy it started was never waited for.
pub(crate) fn async_copy_never_waited(t: [u32; 3], l: At) -> String {
    format!(
        "thread {} returned with an asynchronous copy (cp.async) it started at {} still in \
         flight: a thread waits for its copies (async_copy::wait or wait_all) before it returns",
        thread(t),
        at(l)
    )
}

/// One thread's turn on a side of a mailbox: its block, the thread in it, and where.
pub(crate) type Turn = ([u32; 3], [u32; 3], At);

/// Two threads of a launch took one side of a mailbox.
pub(crate) fn mailbox_role_shared(what: &str, role: MailboxRole, a: Turn, b: Turn) -> String {
    let (did, does) = match role {
        MailboxRole::Sender => ("sent on", "sends on"),
        MailboxRole::Receiver => ("received from", "receives from"),
    };
    format!(
        "two threads of the launch take one side of a mailbox: thread {} of block {} {did} \
         {what} at {}, and thread {} of block {} {does} it at {} (the kernel's side of a \
         mailbox is one thread of the launch per role: one sends, one receives; pick one \
         thread of the launch with `if thread::index() != 0 {{ return; }}` — \
         `thread::global_x()` is 0 in one thread of every row and layer of a 2D or 3D grid)",
        thread(a.1),
        thread(a.0),
        at(a.2),
        thread(b.1),
        thread(b.0),
        at(b.2)
    )
}
