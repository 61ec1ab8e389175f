//! NVTX ranges for profilers: berth's launches, copies, pipeline chunks and scopes named in an
//! Nsight Systems timeline, in the domain `berth`.
//!
//! NVTX is a protocol, not a library: a profiler that collects NVTX (nsys, Nsight Compute)
//! names its injection library in `NVTX_INJECTION64_PATH`; the application loads it, calls its
//! `InitializeInjectionNvtx2` with a function that hands out the application's tables of
//! function pointers, and the tool fills in the ones it implements. This module is the subset
//! of NVIDIA's header-only NVTX3 implementation (`nvtxDetail/nvtxInit.h`, `nvtxImpl.h`) that
//! berth uses: domains and push/pop ranges with a color, an ASCII message and a 64-bit
//! payload. It is written here rather than taken from a crate because the `nvtx` crates either
//! need libclang at build time (bindgen) or format and allocate every message whether a tool
//! is attached or not.
//!
//! Without a tool (or with `BERTH_NVTX=off`) nothing is loaded and a range costs one atomic
//! load and a branch: its name is only formatted when a tool is attached. Ranges are pushed
//! and popped on the calling thread (the guard is not `Send`), so nested ranges nest in the
//! timeline, and nsys projects each one onto the GPU work queued inside it.

use std::ffi::{CString, c_char, c_int, c_void};
use std::fmt;
use std::marker::PhantomData;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Environment variable that turns the ranges off (`off`) even when a profiler is attached.
pub const NVTX_ENV: &str = "BERTH_NVTX";
/// The variable through which a profiler names its injection library (NVTX3's).
const INJECTION_ENV: &str = "NVTX_INJECTION64_PATH";

// The function tables of NVTX3's modules (`NvtxCallbackModule`): entry 0 and the last are
// null, entries 1..SIZE-1 point at the slots the tool writes its functions into.
const CORE_SIZE: usize = 16;
const CUDA_SIZE: usize = 9;
const OPENCL_SIZE: usize = 15;
const CUDART_SIZE: usize = 7;
const CORE2_SIZE: usize = 16;
const SYNC_SIZE: usize = 7;
// Callback ids (`NVTX_CBID_CORE_*`, `NVTX_CBID_CORE2_*`) of the functions used here.
const CORE_RANGE_PUSH_EX: usize = 8;
const CORE_RANGE_POP: usize = 11;
const CORE2_DOMAIN_RANGE_PUSH_EX: usize = 4;
const CORE2_DOMAIN_RANGE_POP: usize = 5;
const CORE2_DOMAIN_CREATE_A: usize = 12;

/// One module's slots: `[0]` and `[SIZE]` unused, `[1..SIZE]` a function address or 0.
type Slots<const N: usize> = [AtomicUsize; N];

static CORE: Slots<{ CORE_SIZE + 1 }> = [const { AtomicUsize::new(0) }; CORE_SIZE + 1];
static CUDA: Slots<{ CUDA_SIZE + 1 }> = [const { AtomicUsize::new(0) }; CUDA_SIZE + 1];
static OPENCL: Slots<{ OPENCL_SIZE + 1 }> = [const { AtomicUsize::new(0) }; OPENCL_SIZE + 1];
static CUDART: Slots<{ CUDART_SIZE + 1 }> = [const { AtomicUsize::new(0) }; CUDART_SIZE + 1];
static CORE2: Slots<{ CORE2_SIZE + 1 }> = [const { AtomicUsize::new(0) }; CORE2_SIZE + 1];
static SYNC: Slots<{ SYNC_SIZE + 1 }> = [const { AtomicUsize::new(0) }; SYNC_SIZE + 1];

/// A module's table as the tool reads it: pointers to the slots, null first and last.
#[repr(transparent)]
struct Table<const N: usize>([*const AtomicUsize; N]);

// SAFETY: the table is immutable; the pointers it holds point at atomics in statics.
unsafe impl<const N: usize> Sync for Table<N> {}

const fn table<const N: usize>(slots: &'static Slots<N>) -> Table<N> {
    let mut t = [std::ptr::null(); N];
    let mut i = 1;
    while i + 1 < N {
        t[i] = &slots[i];
        i += 1;
    }
    Table(t)
}

static CORE_TABLE: Table<{ CORE_SIZE + 1 }> = table(&CORE);
static CUDA_TABLE: Table<{ CUDA_SIZE + 1 }> = table(&CUDA);
static OPENCL_TABLE: Table<{ OPENCL_SIZE + 1 }> = table(&OPENCL);
static CUDART_TABLE: Table<{ CUDART_SIZE + 1 }> = table(&CUDART);
static CORE2_TABLE: Table<{ CORE2_SIZE + 1 }> = table(&CORE2);
static SYNC_TABLE: Table<{ SYNC_SIZE + 1 }> = table(&SYNC);

/// `NvtxExportTableCallbacks`.
#[repr(C)]
struct Callbacks {
    struct_size: usize,
    get_module_function_table:
        unsafe extern "C" fn(c_int, *mut *const *const AtomicUsize, *mut u32) -> c_int,
}

/// `NvtxExportTableVersionInfo`.
#[repr(C)]
struct VersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: extern "C" fn(u32),
}

static CALLBACKS: Callbacks = Callbacks {
    struct_size: size_of::<Callbacks>(),
    get_module_function_table,
};
static VERSION_INFO: VersionInfo = VersionInfo {
    struct_size: size_of::<VersionInfo>(),
    version: 3,
    reserved0: 0,
    set_injection_nvtx_version,
};

/// `nvtxGetExportTable`: what the tool's init asks for.
extern "C" fn get_export_table(id: u32) -> *const c_void {
    match id {
        1 => (&raw const CALLBACKS).cast(),
        3 => (&raw const VERSION_INFO).cast(),
        _ => std::ptr::null(),
    }
}

extern "C" fn set_injection_nvtx_version(_version: u32) {}

/// `nvtxEtiGetModuleFunctionTable`.
///
/// # Safety
/// `out_table` and `out_size` are null or valid for a write (the tool's contract).
unsafe extern "C" fn get_module_function_table(
    module: c_int,
    out_table: *mut *const *const AtomicUsize,
    out_size: *mut u32,
) -> c_int {
    let (table, len): (*const *const AtomicUsize, usize) = match module {
        1 => (CORE_TABLE.0.as_ptr(), CORE_TABLE.0.len()),
        2 => (CUDA_TABLE.0.as_ptr(), CUDA_TABLE.0.len()),
        3 => (OPENCL_TABLE.0.as_ptr(), OPENCL_TABLE.0.len()),
        4 => (CUDART_TABLE.0.as_ptr(), CUDART_TABLE.0.len()),
        5 => (CORE2_TABLE.0.as_ptr(), CORE2_TABLE.0.len()),
        6 => (SYNC_TABLE.0.as_ptr(), SYNC_TABLE.0.len()),
        _ => return 0,
    };
    if !out_size.is_null() {
        // SAFETY: non-null, and valid for a write by the caller's contract.
        unsafe { *out_size = (len - 1) as u32 };
    }
    if !out_table.is_null() {
        // SAFETY: as above.
        unsafe { *out_table = table };
    }
    1
}

/// `nvtxEventAttributes_t` (version 3, 48 bytes).
#[repr(C)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    message: *const c_char,
}

type DomainCreateA = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type DomainRangePushEx = unsafe extern "C" fn(*mut c_void, *const EventAttributes) -> c_int;
type DomainRangePop = unsafe extern "C" fn(*mut c_void) -> c_int;
type RangePushEx = unsafe extern "C" fn(*const EventAttributes) -> c_int;
type RangePop = unsafe extern "C" fn() -> c_int;

/// The attached tool's functions.
enum Tool {
    /// Ranges in the domain `berth`.
    Domain {
        domain: *mut c_void,
        push: DomainRangePushEx,
        pop: DomainRangePop,
    },
    /// A tool without domains: ranges in the default domain.
    Global { push: RangePushEx, pop: RangePop },
}

// SAFETY: the domain handle is an opaque token the tool hands out for use from any thread
// (NVTX's API is thread-safe); the function pointers are plain code addresses.
unsafe impl Send for Tool {}
// SAFETY: as above; `Tool` is never mutated after it is built.
unsafe impl Sync for Tool {}

static TOOL: OnceLock<Option<Tool>> = OnceLock::new();

/// The attached tool, loaded on first use; `None` (and nothing loaded) without one. After the
/// first call, one atomic load.
#[inline]
fn tool() -> Option<&'static Tool> {
    match TOOL.get() {
        Some(t) => t.as_ref(),
        None => first_use(),
    }
}

#[cold]
fn first_use() -> Option<&'static Tool> {
    TOOL.get_or_init(|| {
        let off = std::env::var_os(NVTX_ENV).is_some_and(|v| v == "off");
        let path = std::env::var_os(INJECTION_ENV).filter(|p| !off && !p.is_empty())?;
        let tool = load(&path);
        match &tool {
            Ok(_) => tracing::debug!(tool = ?path, "NVTX ranges on"),
            Err(why) => tracing::warn!(tool = ?path, "NVTX ranges off: {why}"),
        }
        tool.ok()
    })
    .as_ref()
}

/// Loads the injection library at `path` and lets it fill the tables (NVTX3's load sequence
/// for a dynamic injection library).
fn load(path: &std::ffi::OsStr) -> Result<Tool, String> {
    // SAFETY: loading runs the library's initialisers: the library is the profiler's NVTX
    // injection, named by the profiler for exactly this (NVTX3 loads it the same way).
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    type Init = unsafe extern "C" fn(extern "C" fn(u32) -> *const c_void) -> c_int;
    // SAFETY: `InitializeInjectionNvtx2` has this signature in NVTX3 (nvtxTypes.h,
    // `NvtxInitializeInjectionNvtxFunc_t`).
    let init =
        unsafe { lib.get::<Init>(b"InitializeInjectionNvtx2\0") }.map_err(|e| e.to_string())?;
    // SAFETY: the tool's init reads the export tables through `get_export_table` and writes
    // function addresses into the slots its tables point at, all of which live for the
    // program.
    if unsafe { init(get_export_table) } == 0 {
        return Err("its InitializeInjectionNvtx2 returned 0".into());
    }
    // The tool's functions are now in the slots: it stays loaded for the process's life.
    std::mem::forget(lib);
    let slot = |s: &AtomicUsize| s.load(Ordering::Acquire);
    let (create, push, pop) = (
        slot(&CORE2[CORE2_DOMAIN_CREATE_A]),
        slot(&CORE2[CORE2_DOMAIN_RANGE_PUSH_EX]),
        slot(&CORE2[CORE2_DOMAIN_RANGE_POP]),
    );
    if create != 0 && push != 0 && pop != 0 {
        // SAFETY: the tool wrote these slots with its implementations of the NVTX functions
        // of these ids, whose signatures are the types named (nvtxTypes.h).
        let (create, push, pop) = unsafe {
            (
                std::mem::transmute::<usize, DomainCreateA>(create),
                std::mem::transmute::<usize, DomainRangePushEx>(push),
                std::mem::transmute::<usize, DomainRangePop>(pop),
            )
        };
        // SAFETY: a NUL-terminated name, copied by the tool.
        let domain = unsafe { create(c"berth".as_ptr()) };
        return Ok(Tool::Domain { domain, push, pop });
    }
    let (push, pop) = (slot(&CORE[CORE_RANGE_PUSH_EX]), slot(&CORE[CORE_RANGE_POP]));
    if push != 0 && pop != 0 {
        // SAFETY: as above, for the core module's ids.
        let (push, pop) = unsafe {
            (
                std::mem::transmute::<usize, RangePushEx>(push),
                std::mem::transmute::<usize, RangePop>(pop),
            )
        };
        return Ok(Tool::Global { push, pop });
    }
    Err("it implements no NVTX ranges".into())
}

/// Whether a profiler collecting NVTX is attached (the ranges are recorded).
#[inline]
pub fn enabled() -> bool {
    tool().is_some()
}

/// What a range is about: its color in the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Launch,
    CopyIn,
    CopyOut,
    Pipeline,
    Chunk,
    Scope,
    Graph,
    User,
}

impl Kind {
    fn color(self) -> u32 {
        match self {
            Kind::Launch => 0xFF76_B900,
            Kind::CopyIn => 0xFF3B_82F6,
            Kind::CopyOut => 0xFFF5_9E0B,
            Kind::Pipeline => 0xFF14_B8A6,
            Kind::Chunk => 0xFFA8_55F7,
            Kind::Scope => 0xFF94_A3B8,
            Kind::Graph => 0xFFEC_4899,
            Kind::User => 0xFF64_748B,
        }
    }
}

/// An open NVTX range, closed when dropped, on the thread that opened it.
#[must_use = "the range closes when this guard is dropped"]
pub struct Range {
    tool: Option<&'static Tool>,
    _not_send: PhantomData<*const ()>,
}

impl fmt::Debug for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Range")
            .field("recorded", &self.tool.is_some())
            .finish()
    }
}

impl Drop for Range {
    #[inline]
    fn drop(&mut self) {
        match self.tool {
            None => {}
            // SAFETY: pops the range this guard pushed, on the same thread (not `Send`).
            Some(Tool::Domain { domain, pop, .. }) => unsafe {
                pop(*domain);
            },
            // SAFETY: as above.
            Some(Tool::Global { pop, .. }) => unsafe {
                pop();
            },
        }
    }
}

/// Opens a range named `name` in the domain `berth`, for the user's own code: it nests with
/// berth's ranges in the timeline. Free when no profiler is attached.
///
/// ```
/// let _range = berth_runtime::nvtx::range("prepare inputs");
/// // … work shown under "prepare inputs" in Nsight Systems
/// ```
#[inline]
pub fn range(name: &str) -> Range {
    open(Kind::User, format_args!("{name}"), None)
}

/// Opens a range of `kind` named by `name` (formatted only when a tool is attached), with
/// `payload` shown beside it.
#[inline]
pub(crate) fn open(kind: Kind, name: fmt::Arguments<'_>, payload: Option<u64>) -> Range {
    match tool() {
        None => Range {
            tool: None,
            _not_send: PhantomData,
        },
        Some(tool) => push(tool, kind, name, payload),
    }
}

/// Pushes a range to the attached tool.
#[inline(never)]
fn push(tool: &'static Tool, kind: Kind, name: fmt::Arguments<'_>, payload: Option<u64>) -> Range {
    let text = CString::new(name.to_string().replace('\0', " ")).unwrap_or_default();
    let attrs = EventAttributes {
        version: 3,
        size: size_of::<EventAttributes>() as u16,
        category: 0,
        color_type: 1,
        color: kind.color(),
        payload_type: i32::from(payload.is_some()),
        reserved0: 0,
        payload: payload.unwrap_or(0),
        message_type: 1,
        message: text.as_ptr(),
    };
    match tool {
        // SAFETY: `attrs` and the message it points at outlive the call (the tool copies
        // them); `domain` is the tool's handle.
        Tool::Domain { domain, push, .. } => unsafe {
            push(*domain, &attrs);
        },
        // SAFETY: as above.
        Tool::Global { push, .. } => unsafe {
            push(&attrs);
        },
    }
    Range {
        tool: Some(tool),
        _not_send: PhantomData,
    }
}

/// A launch's range, over its copies in, the kernel and its copies out.
#[inline]
pub(crate) fn launch(kernel: &str) -> Range {
    open(Kind::Launch, format_args!("launch {kernel}"), None)
}

/// An asynchronous copy's range: direction and size, and the launch it is for (`what` that
/// is not itself a copy's label); the payload is the byte count.
#[inline]
pub(crate) fn copy(to_device: bool, bytes: usize, what: &str) -> Range {
    let kind = if to_device {
        Kind::CopyIn
    } else {
        Kind::CopyOut
    };
    open(
        kind,
        format_args!("{}", CopyName(to_device, bytes, what)),
        Some(bytes as u64),
    )
}

/// A pipelined launch's range, over the queueing of all its chunks.
#[inline]
pub(crate) fn pipeline(kernel: &str, chunks: usize, streams: usize) -> Range {
    open(
        Kind::Pipeline,
        format_args!("pipeline {kernel}: {chunks} chunks on {streams} streams"),
        None,
    )
}

/// A pipeline chunk's range (its copies in, kernel, copies out); the payload is its index.
#[inline]
pub(crate) fn chunk(kernel: &str, c: usize, chunks: usize) -> Range {
    open(
        Kind::Chunk,
        format_args!("chunk {}/{chunks} {kernel}", c + 1),
        Some(c as u64),
    )
}

/// A scope's range, from its start to the end of its final wait.
#[inline]
pub(crate) fn scope() -> Range {
    open(Kind::Scope, format_args!("scope"), None)
}

/// A graph replay's range.
#[inline]
pub(crate) fn graph(nodes: usize) -> Range {
    open(
        Kind::Graph,
        format_args!("graph run: {nodes} kernels"),
        None,
    )
}

/// A copy's range name: `copy HtoD 16 MiB for saxpy`.
struct CopyName<'a>(bool, usize, &'a str);

impl fmt::Display for CopyName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CopyName(to_device, bytes, what) = *self;
        let dir = if to_device { "HtoD" } else { "DtoH" };
        write!(f, "copy {dir} {}", Bytes(bytes))?;
        if !what.is_empty() && !what.starts_with("copy") {
            write!(f, " for {what}")?;
        }
        Ok(())
    }
}

/// A byte count in the largest binary unit it reaches, with one decimal where not whole.
struct Bytes(usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
        let b = self.0;
        if b < 1024 {
            return write!(f, "{b} B");
        }
        let mut unit = 0;
        let mut scale = 1024usize;
        while unit + 1 < UNITS.len() && b >= scale * 1024 {
            unit += 1;
            scale *= 1024;
        }
        if b.is_multiple_of(scale) {
            write!(f, "{} {}", b / scale, UNITS[unit])
        } else {
            write!(f, "{:.1} {}", b as f64 / scale as f64, UNITS[unit])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_what_and_how_much() {
        assert_eq!(
            CopyName(true, 16 << 20, "saxpy").to_string(),
            "copy HtoD 16 MiB for saxpy"
        );
        assert_eq!(
            CopyName(false, 1536, "copy device→host").to_string(),
            "copy DtoH 1.5 KiB"
        );
        assert_eq!(CopyName(false, 4, "").to_string(), "copy DtoH 4 B");
        assert_eq!(Bytes(3 << 30).to_string(), "3 GiB");
        assert_eq!(Bytes((1 << 20) + (1 << 19)).to_string(), "1.5 MiB");
        assert_eq!(Bytes(5 << 40).to_string(), "5 TiB");
        assert_eq!(Bytes(1023).to_string(), "1023 B");
    }

    #[test]
    fn tables_are_laid_out_as_nvtx3s() {
        assert_eq!(size_of::<EventAttributes>(), 48);
        assert_eq!(size_of::<Callbacks>(), 16);
        assert_eq!(size_of::<VersionInfo>(), 24);
        let (mut table, mut size) = (std::ptr::null(), 0u32);
        // SAFETY: valid out-pointers.
        assert_eq!(
            unsafe { get_module_function_table(5, &mut table, &mut size) },
            1
        );
        assert_eq!(size as usize, CORE2_SIZE);
        // SAFETY: the CORE2 table has CORE2_SIZE + 1 entries.
        let entries = unsafe { std::slice::from_raw_parts(table, CORE2_SIZE + 1) };
        assert!(entries[0].is_null() && entries[CORE2_SIZE].is_null());
        assert_eq!(
            entries[CORE2_DOMAIN_RANGE_POP],
            &raw const CORE2[CORE2_DOMAIN_RANGE_POP]
        );
        // SAFETY: as above; module 7 does not exist.
        assert_eq!(
            unsafe { get_module_function_table(7, &mut table, &mut size) },
            0
        );
        assert!(get_export_table(2).is_null());
        assert_eq!(get_export_table(1), (&raw const CALLBACKS).cast());
    }

    #[test]
    fn without_a_tool_nothing_is_loaded_or_formatted() {
        assert!(load(std::ffi::OsStr::new("/nonexistent/libinjection.so")).is_err());
        if std::env::var_os(INJECTION_ENV).is_none() {
            assert!(!enabled());
            struct Panics;
            impl fmt::Display for Panics {
                fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
                    panic!("a range's name was formatted with no tool attached")
                }
            }
            let r = open(Kind::User, format_args!("{}", Panics), Some(1));
            assert!(r.tool.is_none());
        }
    }

    /// An NVTX injection library in C that logs what the application asks of it.
    const FAKE_TOOL: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
typedef void (*fp)(void);
typedef struct { size_t size; int (*get_table)(int, fp***, unsigned*); } Callbacks;
typedef struct { size_t size; uint32_t version, reserved; void (*set_version)(uint32_t); } Version;
typedef struct {
  uint16_t version, size; uint32_t category; int32_t color_type; uint32_t color;
  int32_t payload_type, reserved; uint64_t payload; int32_t message_type; const char *message;
} Attr;
static FILE *out;
static void unused(void) {}
static void *create(const char *name) { fprintf(out, "domain %s\n", name); return (void *)0x5eed; }
static int push(void *d, const Attr *a) {
  fprintf(out, "push %p v%u size %u color %08x payload %d:%llu %s\n", d, a->version, a->size,
          a->color, a->payload_type, (unsigned long long)a->payload, a->message);
  return 0;
}
static int pop(void *d) { fprintf(out, "pop %p\n", d); return 0; }
int InitializeInjectionNvtx2(const void *(*get)(uint32_t)) {
  out = fopen(getenv("FAKE_NVTX_LOG"), "w");
  if (!out) return 0;
  setvbuf(out, NULL, _IONBF, 0);
  const Callbacks *cb = get(1);
  const Version *v = get(3);
  if (!cb || cb->size != sizeof(Callbacks) || !v || v->size != sizeof(Version)) return 0;
  v->set_version(3);
  fprintf(out, "version %u\n", v->version);
  for (int m = 1; m <= 6; m++) {
    fp **table; unsigned n;
    if (!cb->get_table(m, &table, &n) || table[0] || table[n]) return 0;
    for (unsigned i = 1; i < n; i++) *table[i] = unused;
    fprintf(out, "module %d: %u\n", m, n);
  }
  fp **core2; unsigned n;
  cb->get_table(5, &core2, &n);
  *core2[12] = (fp)create; *core2[4] = (fp)push; *core2[5] = (fp)pop;
  return 1;
}
"#;

    const CHILD_ENV: &str = "BERTH_NVTX_TEST_CHILD";

    #[test]
    fn an_attached_tool_gets_nested_ranges_in_the_berth_domain() {
        if std::env::var_os(CHILD_ENV).is_some() {
            // In the child, with the fake tool attached.
            assert!(enabled());
            let outer = range("outer");
            {
                let _c = copy(true, 2 << 20, "saxpy");
            }
            drop(outer);
            return;
        }
        let dir = std::env::temp_dir().join(format!("berth-nvtx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, lib, log) = (dir.join("tool.c"), dir.join("libtool.so"), dir.join("log"));
        std::fs::write(&src, FAKE_TOOL).unwrap();
        let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
        let built = std::process::Command::new(&cc)
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .status();
        if !built.as_ref().is_ok_and(|s| s.success()) {
            assert!(
                std::env::var_os("CI").is_none(),
                "no C compiler ({cc:?}: {built:?}) for the fake NVTX tool"
            );
            eprintln!("skipped: no C compiler for the fake NVTX tool");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "nvtx::tests::an_attached_tool_gets_nested_ranges_in_the_berth_domain",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .env(INJECTION_ENV, &lib)
            .env("FAKE_NVTX_LOG", &log)
            .env_remove(NVTX_ENV)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let log = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let want = "version 3\nmodule 1: 16\nmodule 2: 9\nmodule 3: 15\nmodule 4: 7\n\
                    module 5: 16\nmodule 6: 7\ndomain berth\n\
                    push 0x5eed v3 size 48 color ff64748b payload 0:0 outer\n\
                    push 0x5eed v3 size 48 color ff3b82f6 payload 1:2097152 copy HtoD 2 MiB for saxpy\n\
                    pop 0x5eed\npop 0x5eed\n";
        assert_eq!(log, want);
    }
}
