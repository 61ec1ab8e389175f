//! Kernels on the CUDA driver: modules loaded on first use (the crate's PTX checked against
//! every launcher of the crate on its first load) — the kernel's SASS where the build made
//! some for this GPU (every kernel's, before the first launch of one that may wait on the
//! host), else the launched kernel's own PTX module, cut out of the crate's
//! ([`crate::ptx::Split`]), which the driver JIT-compiles — the function cache, launches and
//! graphs.

use crate::backend::driver::handle::Handle;
use crate::backend::driver::launch as driver_launch;
use crate::backend::driver::{Driver, ModuleKey};
use crate::backend::{ContextOps, FunctionId, GraphExec, GraphNode, KernelOps, StreamId};
use crate::error::{Error, Result};
use crate::launch::grid::Grid;
use crate::launch::kernel::{Entry, Kernel, KernelSass, crate_sass, registered_kernels};

// The function cache keys an entry by its descriptor's address with the entry's number in the
// low two bits.
const _: () = assert!(std::mem::align_of::<Kernel>() >= 4);
use cudarc::driver::{result, sys};
use std::ffi::{CString, c_void};
use std::time::Instant;

impl Driver {
    fn module(&self, kernel: &'static Kernel) -> Result<sys::CUmodule> {
        let mut modules = self.modules.lock().expect("poisoned");
        let krate = kernel.crate_name;
        for key in [(krate, None), (krate, Some(kernel.name))] {
            if let Some(m) = modules.get(&key) {
                return Ok(m.0);
            }
        }
        let started = Instant::now();
        // Check every entry of the PTX against its launcher before anything of the crate
        // runs: a stale PTX or a macro bug must be an error here, not memory corruption
        // later. One pass over the PTX for the whole crate (it holds every kernel of the
        // crate), on the crate's first load.
        if !modules.keys().any(|(c, _)| *c == krate) {
            let entries = crate::ptx::entries(kernel.ptx());
            for k in registered_kernels().filter(|k| k.crate_name == krate) {
                crate::ptx::check_against(k, &entries)?;
            }
            crate::ptx::check_against(kernel, &entries)?;
        }
        let checked = started.elapsed();
        let load = Load::from_env();
        let sass = crate_sass(krate);
        let own = sass.as_ref().and_then(|s| s.kernel(kernel.name));
        let (key, module, strings, image) =
            match choose_image(sass.is_some(), own, self.compute_capability().ok(), load) {
                Image::Sass(own) => match load_cubin(own.cubin) {
                    // The constant strings of the piece of the crate's PTX the cubin was
                    // assembled from, named by the build (for the messages of its faults).
                    Ok(m) => (
                        (krate, Some(kernel.name)),
                        m,
                        own.strings.lines().map(str::to_owned).collect(),
                        "sass",
                    ),
                    // A fault of earlier work surfacing here is that fault, not a bad image.
                    Err(e)
                        if crate::backend::driver::fault::is_sticky(e.0)
                            || self.faults.state.is_lost() =>
                    {
                        return Err(self.faults.error("cuModuleLoadData", e, None));
                    }
                    Err(e) => {
                        let (name, message) = crate::backend::driver::fault::describe(e);
                        tracing::debug!(
                            krate,
                            kernel = kernel.name,
                            arch = own.arch,
                            "the driver rejected the SASS ({name}: {message}); loading the PTX"
                        );
                        self.load_kernel_ptx(kernel)?
                    }
                },
                Image::Ptx(why) => {
                    tracing::debug!(krate, kernel = kernel.name, why, "loading PTX (JIT)");
                    self.load_kernel_ptx(kernel)?
                }
                Image::CratePtx(why) => {
                    tracing::debug!(krate, why, "loading the crate's PTX (JIT)");
                    let m = self.load_ptx(kernel, kernel.ptx())?;
                    ((krate, None), m, string_names(kernel.ptx()), "crate ptx")
                }
            };
        let loaded = started.elapsed();
        self.faults.record.install(module, &self.faults)?;
        self.faults
            .index_strings(module, strings.iter().map(String::as_str), kernel.ptx());
        tracing::debug!(
            krate,
            kernel = key.1,
            image,
            strings = strings.len(),
            check_ms = checked.as_secs_f64() * 1e3,
            load_ms = (loaded - checked).as_secs_f64() * 1e3,
            fault_setup_ms = (started.elapsed() - loaded).as_secs_f64() * 1e3,
            "module ready"
        );
        modules.insert(key, Handle(module));
        Ok(module)
    }

    /// Loads the function of `kernel`'s `entry` (its module first, where not yet loaded) and
    /// adds it to the function table under `key`.
    fn load_function(
        &self,
        kernel: &'static Kernel,
        entry: Entry,
        key: usize,
    ) -> Result<FunctionId> {
        let _section = self.section()?;
        let module = self.module(kernel)?;
        let name = kernel.entry_name(entry);
        let cname = CString::new(name).expect("kernel names have no NUL");
        // SAFETY: `module` is a loaded module of this (current) context.
        let f = unsafe { result::module::get_function(module, cname) }.map_err(|e| {
            self.faults
                .sticky_or("cuModuleGetFunction", e, |e| Error::Module {
                    kernel: kernel.name,
                    reason: format!(
                        "entry `{name}` not found in the PTX of crate `{}` ({}); rebuild the crate",
                        kernel.crate_name,
                        crate::backend::driver::fault::describe(e).0
                    ),
                })
        })?;
        let mut functions = self.functions.lock().expect("poisoned");
        // Looked up again under the lock: another thread may have loaded it meanwhile.
        if let Some(&i) = functions.get(&key) {
            return self.function_id(i);
        }
        let i = self.function_table.push(Handle(f));
        let id = self.function_id(i)?;
        functions.insert(key, i);
        self.function_cache.insert(key, i);
        Ok(id)
    }

    /// Loads every kernel whose SASS runs on this GPU, with its functions, once: before the
    /// first launch of a kernel that may wait on the host ([`Kernel::may_wait_on_host`]).
    /// Loading a module, or a function of one, may wait until the kernels running in the
    /// context have finished: a kernel loaded on its own first launch while a kernel that
    /// waits on the host runs (a gate the host opens after queueing more) would stall the host
    /// until that wait gave up. Kernels that cannot wait on the host finish on their own, so
    /// until one that can is launched, each kernel loads only its own cubin, on its first
    /// launch (that load may wait for the running kernels, never for the host). Kernels that
    /// run from PTX are still compiled on their first launch (docs/kernel-language.md, "SASS
    /// next to the PTX", says what that means for kernels that wait on the host). A kernel
    /// that fails here is left to its own first launch, which reports it; the others still
    /// load.
    fn load_every_sass(&self) {
        // Held until all are loaded: another thread's first launch of a kernel that may wait
        // on the host waits here rather than launch before they are.
        let mut loaded = self.every_sass_loaded.lock().expect("poisoned");
        if std::mem::replace(&mut *loaded, true) || Load::from_env() != Load::Auto {
            return;
        }
        let Ok(cc) = self.compute_capability() else {
            return;
        };
        let sass = |k: &Kernel| crate_sass(k.crate_name)?.kernel(k.name);
        for (k, entry) in ahead_of_launch(registered_kernels(), sass, cc) {
            let key = function_key(k, entry);
            if self.function_cache.get(key).is_some() {
                continue;
            }
            if let Err(e) = self.load_function(k, entry, key) {
                tracing::debug!(
                    krate = k.crate_name,
                    kernel = k.name,
                    "not loaded ahead of its launch: {e}"
                );
            }
        }
    }

    /// The PTX module of `kernel` alone (its entries and what they reach), so that the JIT
    /// compiles what the program launches, not the whole crate; the crate's whole module
    /// where its PTX cannot be cut.
    #[allow(clippy::type_complexity)]
    fn load_kernel_ptx(
        &self,
        kernel: &'static Kernel,
    ) -> Result<(ModuleKey, sys::CUmodule, Vec<String>, &'static str)> {
        let krate = kernel.crate_name;
        match kernel_piece(kernel) {
            Ok(piece) => {
                let m = self.load_ptx(kernel, &piece)?;
                Ok((
                    (krate, Some(kernel.name)),
                    m,
                    string_names(&piece),
                    "kernel ptx",
                ))
            }
            Err(e) => {
                tracing::debug!(
                    krate,
                    "the crate's PTX not cut into kernels ({e}): loading all of it"
                );
                let m = self.load_ptx(kernel, kernel.ptx())?;
                Ok(((krate, None), m, string_names(kernel.ptx()), "crate ptx"))
            }
        }
    }

    fn load_ptx(&self, kernel: &'static Kernel, ptx: &str) -> Result<sys::CUmodule> {
        let src = CString::new(ptx).map_err(|_| Error::Module {
            kernel: kernel.name,
            reason: "the embedded PTX contains a NUL byte".into(),
        })?;
        // SAFETY: `src` is a NUL-terminated PTX image; the context is current (bind).
        unsafe { result::module::load_data(src.as_ptr().cast()) }.map_err(|e| {
            // A fault of earlier work surfacing here is reported as that fault.
            self.faults.sticky_or("cuModuleLoadData", e, |e| {
                let (name, message) = crate::backend::driver::fault::describe(e);
                Error::Module {
                    kernel: kernel.name,
                    reason: format!(
                        "the driver rejected the PTX of crate `{}`: {name} ({message}); was it built for a newer GPU than this one (BERTH_ARCH)?",
                        kernel.crate_name
                    ),
                }
            })
        })
    }
}

/// The names of the constant byte arrays `ptx` declares.
fn string_names(ptx: &str) -> Vec<String> {
    berth_abi::ptx::byte_globals(ptx)
        .map(|g| g.name.to_owned())
        .collect()
}

/// The PTX module of `kernel` alone: its entries and what they reach, cut out of the crate's.
fn kernel_piece(kernel: &'static Kernel) -> std::result::Result<String, crate::ptx::SplitError> {
    let entries: Vec<&str> = kernel.entries().map(|(_, name)| name).collect();
    crate::ptx::split::cached(kernel.ptx()).and_then(|s| s.module(&entries))
}

/// `BERTH_LOAD=ptx`: load each kernel's own PTX module even where the crate's SASS would run
/// (to measure the JIT, or to rule the cubin out); `BERTH_LOAD=crate-ptx`: the crate's whole
/// PTX module (the JIT of every kernel of the crate at once).
pub(crate) const LOAD_ENV: &str = "BERTH_LOAD";

/// What `BERTH_LOAD` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    /// The SASS where it runs, else each kernel's PTX.
    Auto,
    /// Each kernel's own PTX module.
    KernelPtx,
    /// The crate's whole PTX module.
    CratePtx,
}

impl Load {
    fn from_env() -> Load {
        match std::env::var(LOAD_ENV).as_deref() {
            Ok("ptx") => Load::KernelPtx,
            Ok("crate-ptx") => Load::CratePtx,
            _ => Load::Auto,
        }
    }
}

/// Which image of a kernel crate to load.
#[derive(Debug)]
enum Image {
    /// The kernel's SASS, which runs on this GPU.
    Sass(KernelSass),
    /// The kernel's own PTX module (JIT-compiled by the driver), and why not SASS.
    Ptx(&'static str),
    /// The crate's whole PTX module (`BERTH_LOAD=crate-ptx`).
    CratePtx(&'static str),
}

/// The kernel's SASS (`own`, from its crate's where the crate has some) where it runs on a
/// GPU of compute capability `cc`, else the kernel's PTX.
fn choose_image(
    crate_has: bool,
    own: Option<KernelSass>,
    cc: Option<(i32, i32)>,
    load: Load,
) -> Image {
    match (own, cc) {
        _ if load == Load::CratePtx => Image::CratePtx("BERTH_LOAD=crate-ptx"),
        _ if load == Load::KernelPtx => Image::Ptx("BERTH_LOAD=ptx"),
        (None, _) if crate_has => Image::Ptx("no SASS for this kernel in its crate's"),
        (None, _) => Image::Ptx("built without SASS"),
        (Some(_), None) => Image::Ptx("compute capability unknown"),
        (Some(s), Some(cc)) if s.runs_on(cc) => Image::Sass(s),
        (Some(_), Some(_)) => Image::Ptx("SASS for another architecture"),
    }
}

/// The entries loaded before the first launch of a kernel that may wait on the host: every
/// entry (the general one, and the linear and planar ones where the kernel has them) of every
/// kernel of `kernels`, of any crate, whose own cubin (`sass`) runs on a GPU of compute
/// capability `cc`.
fn ahead_of_launch<'k>(
    kernels: impl Iterator<Item = &'k Kernel>,
    sass: impl Fn(&Kernel) -> Option<KernelSass>,
    cc: (i32, i32),
) -> Vec<(&'k Kernel, Entry)> {
    kernels
        .filter(|k| sass(k).is_some_and(|own| own.runs_on(cc)))
        .flat_map(|k| k.entries().map(move |(e, _)| (k, e)))
        .collect()
}

/// The function cache's key of `kernel`'s `entry`: descriptors are statics aligned to at
/// least 8 bytes, and the low two bits name the entry.
fn function_key(kernel: &'static Kernel, entry: Entry) -> usize {
    std::ptr::from_ref(kernel) as usize | entry.number()
}

fn load_cubin(cubin: &[u8]) -> std::result::Result<sys::CUmodule, cudarc::driver::DriverError> {
    // The driver reads the ELF image in place: give it 8-byte aligned storage (an embedded
    // `include_bytes!` is only byte-aligned).
    let mut aligned = vec![0u64; cubin.len().div_ceil(8)];
    // SAFETY: `aligned` has at least `cubin.len()` bytes; the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            cubin.as_ptr(),
            aligned.as_mut_ptr().cast::<u8>(),
            cubin.len(),
        );
    }
    // SAFETY: `aligned` holds a complete cubin and outlives the call (the driver copies it);
    // the context is current (bind).
    unsafe { result::module::load_data(aligned.as_ptr().cast()) }
}

/// Threads per block that every compiled function runs with: a thread has at most 255
/// registers, and 256 such threads fill exactly the 64 Ki registers a block may have (sm_50
/// and later), so only larger blocks can be too many for a function's registers.
const ALWAYS_FITS: u64 = 256;

impl KernelOps for Driver {
    fn check_function(&self, kernel: &'static Kernel, func: FunctionId, grid: &Grid) -> Result<()> {
        let t = grid.threads;
        let per_block = u64::from(t.x) * u64::from(t.y) * u64::from(t.z);
        if per_block <= ALWAYS_FITS {
            return Ok(());
        }
        let func = self.func(func)?;
        let attribute = |a| {
            // SAFETY: `func` is a function of this context (from `function`), which is current.
            unsafe { result::function::get_function_attribute(func, a) }.map_err(|e| {
                self.faults
                    .error("cuFuncGetAttribute", e, Some(kernel.name))
            })
        };
        use sys::CUfunction_attribute::*;
        let max = attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
        if per_block <= max.max(0) as u64 {
            return Ok(());
        }
        let regs = attribute(CU_FUNC_ATTRIBUTE_NUM_REGS)?;
        Err(Error::InvalidLaunch {
            kernel: kernel.name,
            reason: format!(
                "{per_block} threads per block ({}, {}, {}): as compiled, with {regs} registers \
                 per thread, the kernel runs at most {max} threads per block (use smaller \
                 blocks, or declare the block shape with `#[gpu_kernel(block = (..))]` so \
                 that ptxas fits the registers to it)",
                t.x, t.y, t.z
            ),
        })
    }

    fn function(&self, kernel: &'static Kernel, entry: Entry) -> Result<FunctionId> {
        let key = function_key(kernel, entry);
        if let Some(i) = self.function_cache.get(key) {
            return self.function_id(i);
        }
        if let Some(&i) = self.functions.lock().expect("poisoned").get(&key) {
            return self.function_id(i);
        }
        if kernel.may_wait_on_host() {
            self.load_every_sass();
        }
        self.load_function(kernel, entry, key)
    }

    unsafe fn launch(
        &self,
        kernel: &'static Kernel,
        func: FunctionId,
        grid: &Grid,
        stream: StreamId,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let (func, stream) = (self.func(func)?, self.stream(stream)?);
        let _section = self.section()?;
        // SAFETY: the caller's contract.
        unsafe { driver_launch::launch(&self.faults, kernel, func, grid, stream, params) }
    }

    fn graph_build(&self, nodes: &[GraphNode]) -> Result<GraphExec> {
        let _section = self.section()?;
        driver_launch::build(&self.faults, nodes, |n| self.func(n.func))
    }

    fn graph_update(&self, exec: &GraphExec, new: &[GraphNode], old: &[GraphNode]) -> Result<()> {
        let _section = self.section()?;
        driver_launch::update(&self.faults, exec, new, old, |n| self.func(n.func))
    }

    unsafe fn graph_launch(
        &self,
        exec: &GraphExec,
        _nodes: &[GraphNode],
        stream: StreamId,
    ) -> Result<()> {
        let stream = self.stream(stream)?;
        let _section = self.section()?;
        // SAFETY: the caller's contract.
        unsafe { driver_launch::launch_graph(&self.faults, exec, stream) }
    }

    fn graph_drop(&self, exec: GraphExec) {
        // A lost context's graphs go with its reset.
        let Ok(_section) = self.section() else {
            return;
        };
        driver_launch::destroy(exec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::kernel::{Param, Placement};

    const SM_90: KernelSass = KernelSass {
        arch: "sm_90",
        strings: "",
        cubin: b"",
    };

    #[test]
    fn sass_where_it_runs_else_ptx() {
        let sass = |image: &Image| match image {
            Image::Sass(s) => Some(s.arch),
            _ => None,
        };
        assert_eq!(
            sass(&choose_image(true, Some(SM_90), Some((9, 0)), Load::Auto)),
            Some("sm_90")
        );
        assert!(matches!(
            choose_image(true, Some(SM_90), Some((8, 0)), Load::Auto),
            Image::Ptx(_)
        ));
        assert!(matches!(
            choose_image(true, Some(SM_90), Some((10, 0)), Load::Auto),
            Image::Ptx(_)
        ));
        assert!(matches!(
            choose_image(true, Some(SM_90), Some((9, 0)), Load::KernelPtx),
            Image::Ptx("BERTH_LOAD=ptx")
        ));
        assert!(matches!(
            choose_image(true, Some(SM_90), Some((9, 0)), Load::CratePtx),
            Image::CratePtx(_)
        ));
        assert!(matches!(
            choose_image(false, None, Some((9, 0)), Load::CratePtx),
            Image::CratePtx(_)
        ));
        assert!(matches!(
            choose_image(true, Some(SM_90), None, Load::Auto),
            Image::Ptx(_)
        ));
        assert!(matches!(
            choose_image(false, None, Some((9, 0)), Load::Auto),
            Image::Ptx("built without SASS")
        ));
        assert!(matches!(
            choose_image(true, None, Some((9, 0)), Load::Auto),
            Image::Ptx("no SASS for this kernel in its crate's")
        ));
    }

    /// A kernel `name` of crate `krate`, with a linear entry where `linear`.
    fn kernel(name: &'static str, krate: &'static str, linear: bool) -> Kernel {
        unsafe fn nothing(_: &[*mut c_void]) {}
        Kernel {
            name,
            crate_name: krate,
            crate_files: None,
            params: &[],
            location: "here",
            sim: nothing,
            uses_barrier: false,
            block: None,
            linear: linear.then_some("linear"),
            planar: None,
            same_len: &[],
        }
    }

    /// Before a kernel that may wait on the host first runs, every entry of every kernel, of
    /// any crate, that has SASS for the GPU is loaded; nothing without it.
    #[test]
    fn every_entry_with_sass_that_runs_is_loaded_ahead() {
        let kernels = [
            kernel("a", "one", true),
            kernel("b", "one", false),
            kernel("c", "one", false),
            kernel("d", "one", true),
            kernel("e", "two", false),
        ];
        let sm_90 = KernelSass {
            arch: "sm_90",
            strings: "",
            cubin: b"",
        };
        let sm_100 = KernelSass {
            arch: "sm_100",
            strings: "",
            cubin: b"",
        };
        // `c` has no cubin, `d` one for another GPU.
        let sass = |k: &Kernel| match k.name {
            "a" | "b" | "e" => Some(sm_90),
            "d" => Some(sm_100),
            _ => None,
        };
        let loaded: Vec<_> = ahead_of_launch(kernels.iter(), sass, (9, 0))
            .into_iter()
            .map(|(k, e)| (k.name, e))
            .collect();
        assert_eq!(
            loaded,
            [
                ("a", Entry::General),
                ("a", Entry::Linear),
                ("b", Entry::General),
                ("e", Entry::General)
            ]
        );
        assert!(ahead_of_launch(kernels.iter(), sass, (8, 0)).is_empty());
        let on_sm_100: Vec<_> = ahead_of_launch(kernels.iter(), sass, (10, 0))
            .into_iter()
            .map(|(k, e)| (k.name, e))
            .collect();
        assert_eq!(on_sm_100, [("d", Entry::General), ("d", Entry::Linear)]);
    }

    /// Only kernels that read host memory in place can wait on the host while they run.
    #[test]
    fn a_kernel_may_wait_on_the_host_only_through_host_memory_it_reads_in_place() {
        let with = |params: &'static [Param]| Kernel {
            params,
            ..kernel("k", "one", false)
        };
        static DEVICE: [Param; 3] = [
            Param::scalar::<f32>("a"),
            Param::slice_ptr::<f32>("x", false, Placement::Device),
            Param::slice_ptr::<f32>("y", true, Placement::PinnedAsync),
        ];
        static MAPPED: [Param; 2] = [
            Param::slice_ptr::<f32>("x", false, Placement::Device),
            Param::slice_ptr::<u32>("gate", false, Placement::Mapped),
        ];
        static AUTO: [Param; 1] = [Param::slice_ptr::<u32>("t", false, Placement::Auto)];
        assert!(!with(&[]).may_wait_on_host());
        assert!(!with(&DEVICE).may_wait_on_host());
        assert!(with(&MAPPED).may_wait_on_host());
        assert!(with(&AUTO).may_wait_on_host());
    }

    #[test]
    fn sass_runs_on_its_major_version() {
        let sm = |arch| KernelSass {
            arch,
            strings: "",
            cubin: b"",
        };
        assert!(sm("sm_80").runs_on((8, 6)));
        assert!(!sm("sm_86").runs_on((8, 0)));
        assert!(sm("sm_90a").runs_on((9, 0)));
        assert!(!sm("sm_90a").runs_on((9, 1)));
        assert!(!sm("sm_100").runs_on((9, 0)));
        assert!(sm("sm_100").runs_on((10, 0)));
        assert!(!sm("compute_90").runs_on((9, 0)));
    }

    #[test]
    fn a_crates_sass_finds_each_kernels_cubin() {
        let mut image = Vec::new();
        berth_abi::cubins::pack(
            [
                berth_abi::cubins::Cubin {
                    name: "a",
                    arch: "sm_90",
                    strings: "",
                    image: b"\x7fELF-a",
                },
                berth_abi::cubins::Cubin {
                    name: "b",
                    arch: "sm_90a",
                    strings: "anon_$_1\nanon_$_2",
                    image: b"\x7fELF-b",
                },
            ],
            |bytes| image.extend_from_slice(bytes),
        );
        let sass = crate::launch::Sass {
            arch: "sm_90",
            cubins: image.leak(),
        };
        let b = sass.kernel("b").unwrap();
        assert_eq!((b.arch, b.cubin), ("sm_90a", &b"\x7fELF-b"[..]));
        assert_eq!(
            b.strings.lines().collect::<Vec<_>>(),
            ["anon_$_1", "anon_$_2"]
        );
        assert!(sass.kernel("c").is_none());
        assert_eq!(
            sass.kernels().map(|(n, _)| n).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }
}
