//! The handles the layers above a backend hold for its streams and functions: opaque ids, not
//! the backend's own objects. An id is a number into a table its context owns — the CUDA
//! driver's streams and functions, the simulator's worker threads — so it is `Send`, `Sync`
//! and `Copy` by construction, and only the backend that made it turns it back into what it
//! names.
//!
//! An id carries its context's [`Serial`]: ids of two contexts alive at the same time never
//! compare equal (a use list compares the streams of several devices' work), and a backend
//! refuses an id of another context instead of handing the driver a handle of the wrong one.

use std::sync::{Mutex, PoisonError};

/// Tells a live backend context from every other live one: taken when the context is made and
/// given back when it is dropped, after which a new context may get it again. Every id of the
/// context carries it.
pub(in crate::backend) struct Serial(u32);

/// Serials given back, and the lowest never handed out.
static SERIALS: Mutex<(Vec<u32>, u32)> = Mutex::new((Vec::new(), 1));

impl Serial {
    /// A serial no live context has.
    pub(in crate::backend) fn take() -> Serial {
        let mut serials = SERIALS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = serials.0.pop() {
            return Serial(n);
        }
        let n = serials.1;
        // One serial per live context: 2^32 live contexts would take more memory than a host
        // has (each holds a thread, a stream or a driver context).
        serials.1 = n.checked_add(1).expect("fewer than 2^32 live contexts");
        Serial(n)
    }
}

impl Drop for Serial {
    fn drop(&mut self) {
        SERIALS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .push(self.0);
    }
}

/// Indices of a context's table are below this: an id's bits are never `u64::MAX`.
const INDICES: usize = u32::MAX as usize;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) struct $name(u64);

        impl $name {
            /// The id of entry `index` of the table of the context with `serial`; `None` past
            /// the table's greatest index.
            pub(in crate::backend) fn new(serial: &Serial, index: usize) -> Option<$name> {
                let index = u32::try_from(index).ok().filter(|&i| (i as usize) < INDICES)?;
                Some($name(u64::from(serial.0) << 32 | u64::from(index)))
            }

            /// Its index in the table of the context with `serial`; `None` if it is an id of
            /// another context.
            pub(in crate::backend) fn index_in(self, serial: &Serial) -> Option<usize> {
                ((self.0 >> 32) as u32 == serial.0).then_some(self.0 as u32 as usize)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($what, " {}.{}"), self.0 >> 32, self.0 as u32)
            }
        }
    };
}

id!(
    /// A stream of a context ([`StreamOps`](crate::backend::StreamOps)): its default stream
    /// or one it made.
    StreamId,
    "stream"
);

impl StreamId {
    /// A number that names it among the streams of every live context, never `u64::MAX`: for
    /// summaries kept in one atomic.
    pub(crate) fn bits(self) -> u64 {
        self.0
    }
}

id!(
    /// A kernel entry as a context loaded it ([`KernelOps::function`](crate::backend::KernelOps::function)).
    FunctionId,
    "function"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_live_contexts_differ_and_name_only_their_own_context() {
        let (a, b) = (Serial::take(), Serial::take());
        assert_ne!(a.0, b.0);
        let s = StreamId::new(&a, 7).unwrap();
        assert_eq!(s.index_in(&a), Some(7));
        assert_eq!(s.index_in(&b), None, "an id of another context");
        assert_ne!(s, StreamId::new(&b, 7).unwrap());
        assert_ne!(s.bits(), u64::MAX);
        assert!(StreamId::new(&a, INDICES).is_none());
        assert!(StreamId::new(&a, INDICES - 1).unwrap().bits() != u64::MAX);
        assert_eq!(
            format!("{:?}", FunctionId::new(&a, 1).unwrap()),
            format!("function {}.1", a.0)
        );
    }
}
