//! The one error type of the runtime.

use std::fmt;

/// Result with the runtime's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong between the host and the GPU.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CUDA driver library could not be loaded (no NVIDIA driver on this machine).
    #[error(
        "no CUDA driver: libcuda could not be loaded ({0}); this machine has no NVIDIA driver installed"
    )]
    NoDriver(String),
    /// The driver is present but reports no device with the asked ordinal.
    #[error("no CUDA device {ordinal}: the driver reports {count} device(s)")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices the driver sees.
        count: usize,
    },
    /// A driver call failed.
    #[error("CUDA driver call {call} failed: {name} ({message})")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The CUresult name (`CUDA_ERROR_…`).
        name: String,
        /// The driver's description.
        message: String,
    },
    /// A device allocation did not fit.
    #[error(
        "out of device memory: could not allocate {bytes} bytes ({free} of {total} bytes free)"
    )]
    OutOfMemory {
        /// Bytes asked for.
        bytes: usize,
        /// Free device memory at the time.
        free: usize,
        /// Total device memory.
        total: usize,
    },
    /// A kernel panicked (bounds check, `panic!`, …) and trapped. The context is now unusable,
    /// on a GPU (whose faults are sticky) and on the CPU simulator alike.
    #[error(
        "kernel `{kernel}` panicked at {report}{}",
        if *context_lost {
            "; the context is now unusable (a kernel fault is sticky): call `Gpu::recover()` to get a fresh one"
        } else {
            ""
        }
    )]
    KernelPanic {
        /// The kernel that panicked.
        kernel: String,
        /// Where and why.
        report: PanicReport,
        /// Whether the context is lost (always, once the panic is reported: a GPU's fault is
        /// sticky, and the simulator follows it).
        context_lost: bool,
    },
    /// A kernel faulted without leaving a panic record (illegal address, trap from asm, …).
    /// The context is now unusable.
    #[error(
        "kernel {kernels} failed on the GPU: {name} ({message}){}; the GPU context is now \
         unusable (CUDA errors are sticky): call `Gpu::recover()` to get a fresh one",
        trap_hint(name)
    )]
    KernelFault {
        /// The kernel(s) in flight when the fault was seen.
        kernels: String,
        /// The CUresult name.
        name: String,
        /// The driver's description.
        message: String,
    },
    /// The driver refuses every new context in this process after a kernel fault, even after
    /// a reset: only a new process can use the GPU again (see `berth::restart_process`).
    #[error(
        "the CUDA driver keeps this process unable to use the GPU after a kernel fault ({name}), \
         even after a context reset: restart the process (berth::restart_process() re-executes \
         it with the same arguments)"
    )]
    ProcessPoisoned {
        /// The error the driver keeps returning.
        name: String,
    },
    /// A lost context cannot be reset yet: the reset (by [`crate::Gpu::recover`], or by a new
    /// `Gpu` on the device) destroys every allocation of the device's primary context, and
    /// some of it is still in use outside the context. Drop those handles and try again, or
    /// restart the process.
    #[error("{}", reset_refused(*ordinal, [*host_buffers, *peer_views, *communicators, *cudarc_handles, *peer_reads]))]
    ResetRefused {
        /// The device's CUDA ordinal.
        ordinal: usize,
        /// Live page-locked host memory of the device's context: pinned and mapped buffers
        /// (signals and mailboxes too) and registered `Vec`s.
        host_buffers: usize,
        /// Live peer views reading the device's memory in place from other devices.
        peer_views: usize,
        /// Live device sets whose NCCL communicators have a rank on the device.
        communicators: usize,
        /// Live handles of cudarc's context object for the device's context (anything of
        /// cudarc's made from [`crate::Gpu::cudarc_context`] holds one).
        cudarc_handles: usize,
        /// Launches of other devices that read the device's memory in place through peer
        /// views since dropped (their guards detached or leaked) and were still running after
        /// the reset waited two seconds for them.
        peer_reads: usize,
    },
    /// An earlier fault poisoned this context; nothing more can run on it. The text is the
    /// fault's own report (which kernel, where, why).
    #[error(
        "the context was lost to an earlier fault ({0}); call `Gpu::recover()` to get a fresh one"
    )]
    ContextLost(String),
    /// The launch configuration is not valid for this kernel or device.
    #[error("invalid launch of `{kernel}`: {reason}")]
    InvalidLaunch {
        /// The kernel.
        kernel: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A host and device buffer, or two buffers, disagree in length.
    #[error("length mismatch: {what}: expected {expected} elements, got {got}")]
    LengthMismatch {
        /// Which lengths.
        what: String,
        /// Expected length.
        expected: usize,
        /// Actual length.
        got: usize,
    },
    /// The kernel's PTX could not be loaded, or does not match its launcher.
    #[error("kernel `{kernel}`: {reason}")]
    Module {
        /// The kernel.
        kernel: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// A problem the CPU simulator found in a kernel: a data race on shared, global or mapped
    /// memory, a read of shared memory nobody wrote, a barrier reached by only part of a
    /// block, a barrier it cannot honour. Like a kernel fault, it stops the simulated context:
    /// later work is refused until [`crate::Gpu::recover`].
    #[error("simulated kernel `{kernel}`, block {block:?}, thread {thread:?}: {problem}")]
    Simulator {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// A thread involved.
        thread: [u32; 3],
        /// What went wrong.
        problem: String,
    },
    /// A wait for the other side of a signal or mailbox ran out of time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The timeout.
        after: std::time::Duration,
    },
    /// A mailbox was asked for with a capacity its ring cannot work with.
    #[error(
        "a mailbox of {capacity} slots: its capacity must be a power of two from 2 to 2^30 (e.g. {})",
        (*capacity).clamp(2, 1 << 30).next_power_of_two()
    )]
    MailboxCapacity {
        /// The capacity asked for.
        capacity: usize,
    },
    /// An API used in a way it does not allow (the message says how to use it).
    #[error("{0}")]
    Usage(String),
    /// The operation exists only on a CUDA GPU, not on the CPU simulator (`what` names it).
    #[error("{what} needs a CUDA GPU: the CPU simulator has no CUDA context")]
    NeedsGpu {
        /// The operation refused.
        what: &'static str,
    },
    /// A chunk of a pipelined launch failed. Chunks before `chunk` completed; of the chunks
    /// after it, those in `completed_after` also wrote their outputs back (they ran on other
    /// streams); the others wrote nothing.
    #[error(
        "pipelined `{kernel}` failed in chunk {chunk} (elements {elements:?}); later chunks whose outputs were written back anyway: {completed_after:?}: {source}"
    )]
    PipelineChunk {
        /// The kernel.
        kernel: &'static str,
        /// The first chunk that did not complete.
        chunk: usize,
        /// Its element range.
        elements: std::ops::Range<usize>,
        /// Later chunks that completed.
        completed_after: Vec<usize>,
        /// The error itself.
        source: Box<Error>,
    },
    /// An operation of a device set failed on one of its devices (`device` is the device's
    /// index in the set, `ordinal` its CUDA ordinal, `name` its name).
    #[error("device {device} of the set (ordinal {ordinal}, {name}): {source}")]
    OnDevice {
        /// Index of the device in the set.
        device: usize,
        /// The device's ordinal.
        ordinal: usize,
        /// The device's name.
        name: String,
        /// The error itself.
        source: Box<Error>,
    },
    /// Data asked to stay in device memory takes more than the budget given for it
    /// ([`DeviceCache::require`](crate::DeviceCache::require)).
    #[error(
        "{what} need {needed} bytes of device memory, over the budget of {budget} bytes: raise the budget to at least {needed} bytes, or let them be read from host memory"
    )]
    DeviceBudget {
        /// What was asked to stay resident.
        what: String,
        /// Bytes it needs.
        needed: usize,
        /// The budget.
        budget: usize,
    },
    /// A row id given to a [`HotTier`](crate::HotTier) gather names no row of its table
    /// (nothing was queued or counted).
    #[error("batch {batch}, position {position}: id {id} is not a row of the table ({rows} rows)")]
    IdOutOfRange {
        /// The batch: the tier's gathers counted from 0.
        batch: u64,
        /// The first position in the batch whose id is out of range.
        position: usize,
        /// The id there.
        id: u32,
        /// Rows of the table.
        rows: usize,
    },
    /// A buffer from one GPU context was passed to a launch on another.
    #[error("a buffer passed to `{kernel}` belongs to a different GPU context")]
    WrongContext {
        /// The kernel.
        kernel: &'static str,
    },
}

impl Error {
    /// Whether this error left the context unusable (recover with [`crate::Gpu::recover`]).
    pub fn is_context_lost(&self) -> bool {
        matches!(
            self,
            Error::KernelPanic {
                context_lost: true,
                ..
            }
        ) || matches!(
            self,
            Error::KernelFault { .. }
                | Error::Simulator { .. }
                | Error::ContextLost(_)
                | Error::ProcessPoisoned { .. }
                | Error::ResetRefused { .. }
        ) || matches!(self, Error::PipelineChunk { source, .. } | Error::OnDevice { source, .. } if source.is_context_lost())
    }

    /// A failure inside a kernel (a panic, or a problem the simulator found).
    pub fn is_kernel_failure(&self) -> bool {
        matches!(
            self,
            Error::KernelPanic { .. } | Error::KernelFault { .. } | Error::Simulator { .. }
        )
    }
}

/// The message of [`Error::ResetRefused`]: what still holds the reset up (the kinds counted
/// above zero, in the variant's field order), and what to do about it.
fn reset_refused(ordinal: usize, counts: [usize; 5]) -> String {
    const KINDS: [&str; 5] = [
        "pinned, mapped or registered host buffer(s) of it (signals, mailboxes and pipeline \
         shards included)",
        "peer view(s) of its device memory",
        "device set(s) with NCCL communicators on it",
        "cudarc context handle(s) (held by cudarc's slices and streams, and by berth streams \
         lent to cudarc)",
        "launch(es) of other devices still reading its memory in place, through peer views \
         since dropped, after the reset waited two seconds for them",
    ];
    if counts.iter().all(|n| *n == 0) {
        return format!(
            "device {ordinal}'s context was lost to a fault and cannot be reset yet; recover \
             again (or restart the process)"
        );
    }
    let held: Vec<String> = counts
        .iter()
        .zip(KINDS)
        .filter(|(n, _)| **n > 0)
        .map(|(n, kind)| format!("{n} {kind}"))
        .collect();
    let mut todo = Vec::new();
    if counts[0] > 0 {
        todo.push("copy out what the host buffers hold");
    }
    if counts[..4].iter().any(|n| *n > 0) {
        todo.push("drop those handles");
    }
    if counts[4] > 0 {
        todo.push("let the launches end");
    }
    format!(
        "device {ordinal}'s context was lost to a fault and cannot be reset yet: the reset frees \
         all of its memory, which is still in use by {}; {}, then recover again (or restart \
         the process)",
        list(&held),
        list(&todo.iter().map(|t| t.to_string()).collect::<Vec<_>>()),
    )
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn trap_hint(name: &str) -> &'static str {
    if name == "CUDA_ERROR_LAUNCH_FAILED" {
        " — a trap: most likely a panic inside the kernel (a failed assert!, unwrap, \
         division by zero, a core slice method); on the GPU only berth's own indexing \
         records where, other panics abort at once"
    } else {
        ""
    }
}

/// Where and why a kernel panicked, as its panicking thread recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanicReport {
    /// Source file of the panic.
    pub file: String,
    /// Line.
    pub line: u32,
    /// Column.
    pub column: u32,
    /// The panic message.
    pub message: String,
    /// `blockIdx` of the panicking thread.
    pub block: [u32; 3],
    /// `threadIdx` of the panicking thread.
    pub thread: [u32; 3],
}

impl fmt::Display for PanicReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {} (block {:?}, thread {:?})",
            self.file, self.line, self.column, self.message, self.block, self.thread
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused reset names what holds it up, joined as a sentence, and what to do for each:
    /// nothing about kinds counted zero.
    #[test]
    fn a_refused_reset_names_only_what_holds_it_up() {
        let refused = |counts: [usize; 5]| {
            Error::ResetRefused {
                ordinal: 1,
                host_buffers: counts[0],
                peer_views: counts[1],
                communicators: counts[2],
                cudarc_handles: counts[3],
                peer_reads: counts[4],
            }
            .to_string()
        };
        assert_eq!(
            refused([0, 0, 0, 0, 1]),
            "device 1's context was lost to a fault and cannot be reset yet: the reset frees all \
             of its memory, which is still in use by 1 launch(es) of other devices still reading \
             its memory in place, through peer views since dropped, after the reset waited two \
             seconds for them; let the launches end, then recover again (or restart the process)"
        );
        let both = refused([3, 0, 0, 2, 0]);
        assert!(
            both.contains(
                "in use by 3 pinned, mapped or registered host buffer(s) of it (signals, \
                 mailboxes and pipeline shards included) and 2 cudarc context handle(s)"
            ),
            "{both}"
        );
        assert!(
            both.contains("; copy out what the host buffers hold and drop those handles, then"),
            "{both}"
        );
        let three = refused([0, 1, 1, 1, 0]);
        assert!(
            three.contains("1 peer view(s) of its device memory, 1 device set(s)"),
            "{three}"
        );
        assert!(
            refused([0; 5])
                .ends_with("cannot be reset yet; recover again (or restart the process)")
        );
    }
}
