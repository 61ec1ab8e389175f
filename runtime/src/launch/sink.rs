//! The argument sink of a launch: the parameter block, filled in the kernel's order and checked
//! against its layout; the memory each argument takes and how (shared or exclusive), to note
//! the launch's completion on; and the first mistake, kept for submit. The plain launch builder
//! ([`crate::launch::builder`]) and the pipelined one ([`crate::pipeline::builder`]) both pass
//! their arguments through it, so every launch checks the same things.

use crate::args::ArgRef;
use crate::backend::StreamId;
use crate::context::Inner;
use crate::error::{Error, Result};
use crate::launch::kernel::{Kernel, Part};
use crate::launch::params::ParamBlock;
use crate::queue::Mode;
use crate::track::{Access, Completion, Uses};
use berth_device::DeviceCopy;
use smallvec::SmallVec;
use std::sync::Arc;

/// The arguments of one launch being assembled.
pub(crate) struct ArgSink<'l> {
    pub(crate) gpu: &'l Arc<Inner>,
    pub(crate) kernel: &'static Kernel,
    pub(crate) params: ParamBlock,
    /// Queued with a waiting guard, queued in a scope, or recorded into a graph.
    pub(crate) mode: Mode<'l>,
    /// The one stream the work goes to, if it is one: earlier work there needs no wait.
    stream: Option<StreamId>,
    next: usize,
    error: Option<Error>,
    /// The memory of every argument and how it is borrowed, to note the launch's use on
    /// (inline for up to eight arguments: no allocation).
    uses: SmallVec<[(&'l Uses, Access); 8]>,
}

impl<'l> ArgSink<'l> {
    pub(crate) fn new(
        gpu: &'l Arc<Inner>,
        kernel: &'static Kernel,
        mode: Mode<'l>,
        stream: Option<StreamId>,
    ) -> Self {
        ArgSink {
            gpu,
            kernel,
            params: ParamBlock::new(kernel.params),
            mode,
            stream,
            next: 0,
            error: None,
            uses: SmallVec::new(),
        }
    }

    /// The next parameter's value, `part` of the argument being passed (berth's kernel ABI):
    /// the kernel's layout must have that part there.
    fn put(&mut self, part: Part, bytes: &[u8]) {
        let Some(p) = self.kernel.params.get(self.next) else {
            self.fail(format!(
                "more arguments than the kernel's {} parameters",
                self.kernel.params.len()
            ));
            return;
        };
        if p.part != part {
            self.fail(format!(
                "parameter {} (`{}`) is a {:?} part in the kernel but a {part:?} part in the launch",
                self.next, p.name, p.part
            ));
            return;
        }
        if p.size != bytes.len() {
            self.fail(format!(
                "parameter `{}` is {} bytes in the kernel but {} in the launch",
                p.name,
                p.size,
                bytes.len()
            ));
            return;
        }
        self.params.set(self.next, bytes);
        self.next += 1;
    }

    /// A scalar, by value.
    pub(crate) fn scalar<T: DeviceCopy>(&mut self, v: &T) {
        // A generic derived struct's padding check, per instance (compile time).
        #[allow(clippy::let_unit_value)]
        let () = T::__BERTH_NO_PADDING;
        // SAFETY: `T: DeviceCopy` is plain data without padding (the trait's contract; the
        // derive checks it at compile time), so every byte is initialised.
        let bytes = unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        self.put(Part::Value, bytes);
    }

    /// The index of the next parameter.
    pub(crate) fn slot(&self) -> usize {
        self.next
    }

    /// The name of the next parameter, for messages.
    pub(crate) fn arg_name(&self) -> &'static str {
        self.kernel.params.get(self.next).map_or("?", |p| p.name)
    }

    /// The launcher and the kernel's layout disagree (a stale PTX or a macro bug).
    fn fail(&mut self, reason: String) {
        if self.error.is_none() {
            self.error = Some(Error::Module {
                kernel: self.kernel.name,
                reason: format!("launcher and kernel disagree: {reason}; rebuild the kernel crate"),
            });
        }
    }

    /// The caller's arguments cannot make this launch.
    pub(crate) fn invalid(&mut self, reason: String) {
        if self.error.is_none() {
            self.error = Some(Error::InvalidLaunch {
                kernel: self.kernel.name,
                reason,
            });
        }
    }

    /// Keep `e` unless an earlier mistake is kept.
    pub(crate) fn error(&mut self, e: Error) {
        self.error.get_or_insert(e);
    }

    /// Note that the launch uses `a`'s memory with `access`, after any conflicting work whose
    /// guard was leaked (see [`crate::track`]).
    ///
    /// One allocation passed twice with one of them `&mut` would give the kernel body a
    /// `&[T]` and a writable view of the same memory at once: refused (ordinary borrows cannot
    /// do it; copies of a graph's [`Held`](crate::Held) handles could). A launch recorded into
    /// a graph takes only memory that graph holds for its whole life, and held memory is
    /// taken only by launches recorded into its graph.
    pub(crate) fn track(&mut self, a: &ArgRef<'l>, access: Access) {
        let aliased = self.uses.iter().any(|(u, acc)| {
            std::ptr::eq(*u, a.uses) && (access == Access::Exclusive || *acc == Access::Exclusive)
        });
        if aliased {
            let reason = format!(
                "argument `{}` is memory the launch already takes, and one of them is `&mut` (or the kernel's side of a mailbox)",
                self.arg_name()
            );
            self.invalid(reason);
        }
        if a.read_only && access == Access::Exclusive {
            let reason = format!(
                "argument `{}` is read-only memory (a peer view, or host memory shared with `Gpu::share`), which kernels only read: write a buffer of the launching device instead",
                self.arg_name()
            );
            self.invalid(reason);
        }
        match self.mode {
            Mode::Record(rec) => {
                if a.held != rec.graph {
                    let reason = format!(
                        "argument `{}` is not held by the graph being recorded: pass the handle from `graph.hold(&mut buffer)` (device memory only; host memory and staged arguments cannot be recorded)",
                        self.arg_name()
                    );
                    self.invalid(reason);
                }
            }
            _ if a.held != 0 => {
                // Handles are `Copy`: launched directly from several threads, two launches
                // could both pass the check below before either notes its use. The graph's
                // replays are the only GPU work on held memory, serialised by the graph.
                let reason = format!(
                    "argument `{}` is a graph's held buffer: it is used only by launches recorded into that graph",
                    self.arg_name()
                );
                self.invalid(reason);
            }
            _ => a
                .uses
                .before_gpu(access, self.stream.map(|s| (self.gpu, s))),
        }
        self.uses.push((a.uses, access));
    }

    /// Push a (pointer, length) pair after checking the memory belongs to this context.
    pub(crate) fn slice(&mut self, a: &ArgRef<'_>, device_addr: u64) -> bool {
        if !Arc::ptr_eq(a.gpu, self.gpu) {
            // Portable host memory is every device's: any context of the process run by the
            // same backend may use it (the simulator's host memory is nothing a GPU reaches).
            let portable = a.host != 0 && a.flags.is_some_and(|f| f.portable());
            if !portable {
                self.error(Error::WrongContext {
                    kernel: self.kernel.name,
                });
                return false;
            }
            let what = format!(
                "kernel `{}`, argument `{}`",
                self.kernel.name,
                self.arg_name()
            );
            if let Err(e) = a.gpu.same_backend(self.gpu, &what) {
                self.error(e);
                return false;
            }
        }
        self.put(Part::Ptr, &device_addr.to_ne_bytes());
        self.put(Part::Len, &(a.len as u64).to_ne_bytes());
        true
    }

    /// The range of an `#[auto]` slice the launch makes available, after its pointer and
    /// length ([`ArgSink::slice`]).
    pub(crate) fn window(&mut self, window: std::ops::Range<usize>) {
        self.put(Part::Start, &(window.start as u64).to_ne_bytes());
        self.put(Part::End, &(window.end as u64).to_ne_bytes());
    }

    /// The parts of a `&Rows<T>` table after its pointer and length ([`ArgSink::slice`]): the
    /// hot tier's slot table, rows and capacity (`slots` 0 for none), and the row width.
    pub(crate) fn tier(&mut self, slots: u64, tier: u64, capacity: usize, width: usize) {
        self.put(Part::Slots, &slots.to_ne_bytes());
        self.put(Part::Tier, &tier.to_ne_bytes());
        self.put(Part::Capacity, &(capacity as u64).to_ne_bytes());
        self.put(Part::Width, &(width as u64).to_ne_bytes());
    }

    /// Every parameter was passed and every argument accepted.
    pub(crate) fn complete(&mut self) -> Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.next != self.kernel.params.len() {
            self.fail(format!(
                "{} of {} parameters passed",
                self.next,
                self.kernel.params.len()
            ));
            return Err(self.error.take().expect("just set"));
        }
        self.check_same_len()
    }

    /// Every `same_len` group's lengths are equal: the kernel's entries build each member's
    /// view with the first member's length, so a shorter member would be read or written
    /// past its end.
    fn check_same_len(&mut self) -> Result<()> {
        let params = self.kernel.params;
        for group in self.kernel.same_len {
            let is_len = |i: &usize| params.get(*i).is_some_and(|p| p.part == Part::Len);
            let Some((&first, rest)) = group.split_first().filter(|_| group.iter().all(is_len))
            else {
                self.fail(format!(
                    "`same_len` group {group:?} is not a list of slice lengths"
                ));
                return Err(self.error.take().expect("just set"));
            };
            let n = self.params.word(first);
            if let Some(&other) = rest.iter().find(|&&i| self.params.word(i) != n) {
                return Err(Error::LengthMismatch {
                    what: format!(
                        "kernel `{}` declares `same_len({})`, and `{}` differs from `{}`",
                        self.kernel.name,
                        group
                            .iter()
                            .map(|&i| params[i].name)
                            .collect::<Vec<_>>()
                            .join(", "),
                        params[other].name,
                        params[first].name,
                    ),
                    expected: n as usize,
                    got: self.params.word(other) as usize,
                });
            }
        }
        Ok(())
    }

    /// The launch was queued and ends at `completion`: note its use of every argument's memory.
    pub(crate) fn used_until(&self, completion: &Arc<Completion>) {
        for (uses, access) in &self.uses {
            uses.add(completion, *access);
        }
    }
}
