//! The CUDA driver's handles as values the driver backend keeps: [`Handle`], one wrapper for
//! every kind of driver object, and the one place that says why they may cross threads.
//!
//! Nothing above the backend sees them: it holds ids ([`StreamId`](crate::backend::StreamId),
//! [`FunctionId`](crate::backend::FunctionId)) into this backend's tables, or values of the
//! interface ([`Point`](crate::backend::Point), [`EventHandle`](crate::backend::EventHandle),
//! [`GraphExec`](crate::backend::GraphExec)) whose insides only the backends read.

use cudarc::driver::sys;

/// A handle the CUDA driver gave out: an opaque pointer to one of the driver's objects (a
/// context, stream, event, module, function, graph or graph node), which Rust never
/// dereferences. Only the driver backend makes driver calls with it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Handle<T: Kind>(pub(crate) T);

/// The kinds of driver object a [`Handle`] holds.
pub(crate) trait Kind: Copy + Eq + std::fmt::Debug + sealed::Sealed {}

/// Kinds whose objects the driver lets several threads use at once.
pub(crate) trait Shared: Kind {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! kinds {
    ($($t:ty: $($shared:ident)?;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Kind for $t {}
        $(impl $shared for $t {})?
    )*};
}

kinds! {
    sys::CUcontext: Shared;
    sys::CUstream: Shared;
    sys::CUevent: Shared;
    sys::CUmodule: Shared;
    sys::CUfunction: Shared;
    sys::CUgraph: ;
    sys::CUgraphExec: ;
    sys::CUgraphNode: ;
}

// SAFETY: a handle is the address of an object of the driver's, which Rust never
// dereferences: moving it to another thread reads and writes nothing. The only use of it is a
// driver call made by this backend, and the driver API may be called from any thread: a call on
// an object needs the object alive, which its owner ensures (streams, events, modules and
// functions live as long as their context; a graph as long as the `GraphExec` that owns it), and
// the object's context current on the calling thread, which every call of this backend makes so
// first (`Driver::enter`, `ContextOps::bind`), whichever thread it runs on.
unsafe impl<T: Kind> Send for Handle<T> {}
// SAFETY: as for `Send`; besides, several threads may use one object at once for the `Shared`
// kinds: the driver serialises calls on a context, stream, event, module or function itself.
// Graphs are not `Shared` (the driver does not synchronise calls on one graph or graph exec), so
// what holds their handles is `Send` only, and whoever shares it serialises its uses (`Graph`
// keeps its exec behind a mutex).
unsafe impl<T: Shared> Sync for Handle<T> {}
