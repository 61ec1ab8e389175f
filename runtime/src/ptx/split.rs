//! A kernel's own PTX module, cut out of its crate's ([`berth_abi::ptx::split`]): where no
//! SASS runs on the GPU, the runtime loads each kernel's piece on its first launch, so that
//! the driver's JIT compiles what the program launches, not the whole crate. Where SASS runs,
//! the kernel's cubin was assembled from the same piece, and the build names the piece's
//! constant strings beside it: loading a cubin reads no PTX.

pub use berth_abi::ptx::split::{Split, SplitError, kernel_module};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The split of a kernel crate's PTX, read on its first use and kept for the program's life
/// (the PTX is embedded, so is the text the split points into).
pub(crate) fn cached(ptx: &'static str) -> Result<Arc<Split<'static>>, SplitError> {
    type Cache = HashMap<usize, Result<Arc<Split<'static>>, SplitError>>;
    static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .get_or_insert_with(Default::default)
        .entry(ptx.as_ptr() as usize)
        .or_insert_with(|| Split::parse(ptx).map(Arc::new))
        .clone()
}
