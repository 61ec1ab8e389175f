//! Methods that exist only to be refused with the fix: a call to one names what to write
//! instead. Each is bounded by a trait that no type implements (its supertrait is private), so
//! no call compiles and no body runs.

use crate::shared::Shared;
use crate::slice::SliceMut;

/// Never implemented: a `SliceMut` has no atomics. Named only by the errors it gives.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "atomics on a `&mut [T]` argument need `#[atomic]` on that argument",
    label = "this argument is not declared `#[atomic]`",
    note = "declare it `#[atomic] name: &mut [T]` in the kernel's signature: the body then sees an `AtomicSlice` whose atomics reach any element, and no thread writes it plainly"
)]
pub trait AtomicArgument: sealed::Never {}

/// Never implemented: `Shared` has no `load` or `store`. Named only by the errors it gives.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`Shared` has no `load` or `store`: a plain shared-memory access is `unsafe {{ s.read(i) }}` or `unsafe {{ s.write(i, v) }}`",
    label = "replaced by `read` / `write`",
    note = "their `// SAFETY:` comment says why no other thread of the block writes element `i` at the same time (a `sync_threads` between a write and the reads of other threads)"
)]
pub trait SharedLoadStore: sealed::Never {}

mod sealed {
    /// No type implements it, so a bound on it never holds.
    pub trait Never {
        fn never(&self) -> !;
    }
}

// One method per atomic of `AtomicSlice`, each with its operands, so that the call's only
// error is the missing attribute.
impl<T> SliceMut<'_, T> {
    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_add<V>(&self, i: usize, v: V) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_max<V>(&self, i: usize, v: V) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_min<V>(&self, i: usize, v: V) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_exchange<V>(&self, i: usize, v: V) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_cas<C, V>(&self, i: usize, current: C, new: V) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_add_scoped<V, S>(&self, i: usize, v: V, scope: S) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_max_scoped<V, S>(&self, i: usize, v: V, scope: S) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_min_scoped<V, S>(&self, i: usize, v: V, scope: S) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_exchange_scoped<V, S>(&self, i: usize, v: V, scope: S) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn atomic_cas_scoped<C, V, S>(&self, i: usize, current: C, new: V, scope: S) -> T
    where
        Self: AtomicArgument,
    {
        sealed::Never::never(self)
    }
}

impl<T: Copy + Send> Shared<T> {
    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn load(&self, i: usize) -> T
    where
        Self: SharedLoadStore,
    {
        sealed::Never::never(self)
    }

    #[doc(hidden)]
    #[allow(unused_variables)]
    pub fn store(&self, i: usize, v: T)
    where
        Self: SharedLoadStore,
    {
        sealed::Never::never(self)
    }
}
