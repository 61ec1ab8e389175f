//! The kernel ABI of berth: what `#[gpu_kernel]` (`berth_macros`), the device API
//! (`berth_device`), the runtime (`berth_runtime`) and the builder (`berth_build`) must agree
//! on, written once.
//!
//! - **Parameters** ([`Lowering`], [`Part`]): how each kind of kernel argument becomes PTX
//!   parameters. The macro declares the entry's parameters and the descriptor's layout from
//!   it, the runtime packs a launch's parameter block by it, the simulator's entry reads it.
//! - **Sections** ([`Section`], [`KernelAttrs`]): the section names that carry what rustc
//!   cannot say to the builder (shared memory, per-kernel attributes, pointer alignments),
//!   with their encoding: written by the macro and the device API, read by the builder.
//! - **Symbols and variables**: the names the device code, the runtime and the builder look
//!   each other up by ([`DYNAMIC_SHARED`], [`PANIC_RECORD`], [`LINEAR_SUFFIX`], [`PLANAR_SUFFIX`]), and the
//!   environment variables through which a kernel crate's build script hands its PTX and SASS
//!   to the macro ([`PTX_ENV`], [`CUBIN_ENV`], [`CUBIN_ARCH_ENV`]), or the errors of a GPU
//!   build that failed ([`GPU_BUILD_ERRORS_ENV`]).
//!
//! - **PTX and SASS** ([`ptx`], [`cubins`]): how a crate's PTX is read and cut into each
//!   kernel's own module, and how the kernels' cubins are packed into the one image the host
//!   build embeds: written by the builder, read by the runtime.
//!
//! The crate has no dependencies and is `no_std`: the device crate uses it in the nvptx64
//! build, where only `core` exists. The `alloc` feature (the builder's and the runtime's)
//! adds what needs an allocator: cutting a kernel's module out of its crate's
//! ([`ptx::split`](ptx/split/index.html)).
//!
//! ```
//! use berth_abi::{KernelAttrs, Lowering, Part, Section};
//! // `y: &mut [f32]` is two PTX parameters, a pointer and a length.
//! assert_eq!(Lowering::PtrLen.parts(), &[Part::Ptr, Part::Len]);
//! // `#[gpu_kernel(block = (256, 1, 1))]` travels to the builder in the entry's section.
//! let attrs = KernelAttrs { block: Some([256, 1, 1]), ..KernelAttrs::default() };
//! let name = Section::Attributes(attrs).to_string();
//! assert_eq!(name, "berth:reqntid=256,1,1");
//! assert_eq!(Section::parse(&name), Some(Ok(Section::Attributes(attrs))));
//! ```
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod cubins;
mod params;
pub mod ptx;
mod section;

pub use params::{Lowering, Part, Placement, WORD_BYTES, param_align};
pub use section::{KernelAttrs, Section, UnknownAttribute};

/// The section name of a block-shared static, as a string literal, for attributes
/// (`#[link_section = berth_abi::shared_section!()]`), which take no constants.
#[macro_export]
macro_rules! shared_section {
    () => {
        "berth:shared"
    };
}

/// The symbol of the block's dynamic shared memory, as a string literal, for attributes
/// (`#[link_name = berth_abi::dynamic_shared!()]`).
#[macro_export]
macro_rules! dynamic_shared {
    () => {
        "__berth_dynamic_shared"
    };
}

/// The symbol of a module's panic slot, as a string literal, for attributes
/// (`#[export_name = berth_abi::panic_record!()]`).
#[macro_export]
macro_rules! panic_record {
    () => {
        "__berth_panic_record"
    };
}

/// The section of a static that lives in block-shared memory: the device API's
/// `shared_array!` places its static there, and the builder moves every static of this section
/// to PTX's `.shared` state space (LLVM address space 3).
pub const SHARED_SECTION: &str = shared_section!();

/// The external array that is the block's dynamic shared memory (sized by the launch): the
/// device API declares it, the builder moves it to `.extern .shared`.
pub const DYNAMIC_SHARED: &str = dynamic_shared!();

/// The module global where the runtime stores the addresses of the panic record and its claim
/// word when it loads a module, and where a panicking kernel finds them. The builder keeps it
/// exported beside the kernel entries.
pub const PANIC_RECORD: &str = panic_record!();

/// Instructions of the `sm_90a` feature set, not in plain sm_90: PTX holding any of them
/// targets `sm_90a`, which runs on sm_90 GPUs only. The builder raises a crate's `.target` to
/// `sm_90a` for them; the runtime lowers it back to `sm_90` in each kernel's own module that
/// holds none, so that those kernels still compile for newer GPUs.
pub const SM90A_ONLY: [&str; 2] = ["wgmma.", "setmaxnreg."];

/// The suffix of a kernel's second entry, specialised for one-dimensional launches:
/// `saxpy__berth_1d` beside `saxpy`.
pub const LINEAR_SUFFIX: &str = "__berth_1d";

/// The suffix of a kernel's entry specialised for launches whose grid and block have extent 1
/// along z (every one- and two-dimensional launch): `stencil__berth_2d` beside `stencil`.
pub const PLANAR_SUFFIX: &str = "__berth_2d";

/// The suffixes of a kernel's specialised entries, beside its general one (named as the
/// kernel).
pub const ENTRY_SUFFIXES: [&str; 2] = [LINEAR_SUFFIX, PLANAR_SUFFIX];

/// The environment variable through which a kernel crate's build script gives the host build
/// (and so `#[gpu_kernel]`) the path of the crate's PTX.
pub const PTX_ENV: &str = "BERTH_PTX";

/// The environment variable through which a kernel crate's build script tells the host build
/// that the crate's GPU build failed, giving the path of a text file: rustc's errors in that
/// build, under a line naming the crate. `#[gpu_kernel]` then embeds no PTX, and the host
/// build reports the file as one error if it reaches code generation without errors of its own
/// (an error only the GPU build has).
pub const GPU_BUILD_ERRORS_ENV: &str = "BERTH_GPU_BUILD_ERRORS";

/// The environment variable giving the host build the path of the crate's SASS, where the
/// build made some: each kernel's cubin, packed as [`cubins`] says.
pub const CUBIN_ENV: &str = "BERTH_CUBIN";

/// The environment variable giving the host build the architecture the crate was built for
/// (`sm_90`; a kernel's own cubin may be for its `a` variant, [`SM90A_ONLY`]).
pub const CUBIN_ARCH_ENV: &str = "BERTH_CUBIN_ARCH";

/// The number of axes a declared block shape extends along: 1 + the last axis whose extent
/// is above 1 (1 for a single thread). The launcher refuses a grid of such a kernel that
/// extends along an axis past it, and the kernel's entries assume so.
///
/// ```
/// use berth_abi::block_rank;
/// assert_eq!([block_rank([256, 1, 1]), block_rank([16, 16, 1]), block_rank([8, 8, 4])], [1, 2, 3]);
/// assert_eq!([block_rank([1, 1, 1]), block_rank([16, 1, 2]), block_rank([1, 32, 1])], [1, 3, 2]);
/// ```
pub const fn block_rank(block: [u32; 3]) -> u32 {
    if block[2] > 1 {
        3
    } else if block[1] > 1 {
        2
    } else {
        1
    }
}

/// The name of kernel `name`'s one-dimensional entry (`name` + [`LINEAR_SUFFIX`]).
///
/// ```
/// assert_eq!(berth_abi::linear_entry("saxpy").to_string(), "saxpy__berth_1d");
/// ```
pub fn linear_entry(name: &str) -> impl core::fmt::Display + '_ {
    struct Linear<'a>(&'a str);
    impl core::fmt::Display for Linear<'_> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            write!(f, "{}{LINEAR_SUFFIX}", self.0)
        }
    }
    Linear(name)
}

/// The name of kernel `name`'s entry for launches without extent along z (`name` +
/// [`PLANAR_SUFFIX`]).
///
/// ```
/// assert_eq!(berth_abi::planar_entry("stencil").to_string(), "stencil__berth_2d");
/// ```
pub fn planar_entry(name: &str) -> impl core::fmt::Display + '_ {
    struct Planar<'a>(&'a str);
    impl core::fmt::Display for Planar<'_> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            write!(f, "{}{PLANAR_SUFFIX}", self.0)
        }
    }
    Planar(name)
}

/// The kernel an entry belongs to: `entry` without an [`ENTRY_SUFFIXES`] suffix where
/// `is_entry` says the rest names an entry too (a kernel may itself be named `x__berth_1d`),
/// else `entry` itself.
///
/// ```
/// let entries = ["k", "k__berth_1d", "k__berth_2d", "j__berth_2d"];
/// let is_entry = |n: &str| entries.contains(&n);
/// assert_eq!(berth_abi::kernel_of_entry("k__berth_2d", is_entry), "k");
/// assert_eq!(berth_abi::kernel_of_entry("k__berth_1d", is_entry), "k");
/// assert_eq!(berth_abi::kernel_of_entry("k", is_entry), "k");
/// // No entry `j`: `j__berth_2d` is a kernel's own name.
/// assert_eq!(berth_abi::kernel_of_entry("j__berth_2d", is_entry), "j__berth_2d");
/// ```
pub fn kernel_of_entry(entry: &str, is_entry: impl Fn(&str) -> bool) -> &str {
    ENTRY_SUFFIXES
        .iter()
        .find_map(|s| entry.strip_suffix(s).filter(|base| is_entry(base)))
        .unwrap_or(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn the_literal_macros_are_the_constants() {
        assert_eq!(SHARED_SECTION, "berth:shared");
        assert_eq!(
            Section::parse(SHARED_SECTION),
            Some(Ok(Section::SharedArray)),
            "the shared section is one of the sections the builder reads"
        );
        assert_eq!(Section::SharedArray.to_string(), SHARED_SECTION);
        for symbol in [DYNAMIC_SHARED, PANIC_RECORD] {
            assert!(symbol.starts_with("__berth_"), "{symbol}");
            assert!(
                symbol
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            );
        }
    }
}
