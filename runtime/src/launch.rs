//! Launches. What a launch is — its shape ([`grid`]), the kernel descriptors `#[gpu_kernel]`
//! generates ([`kernel`]) and the parameter block ([`params`]) — is plain data at the bottom of
//! the runtime: the backends and the simulator use it. How a launch is assembled sits above
//! memory and streams: the argument sink ([`sink`]) shared with pipelined launches, the launch
//! builder that generated launchers drive ([`builder`]), and the guard of a launch in flight
//! ([`pending`]). This module re-exports only the plain data, so that naming it never pulls in
//! the upper half.

pub(crate) mod builder;
pub(crate) mod grid;
pub(crate) mod kernel;
pub(crate) mod params;
pub(crate) mod pending;
pub(crate) mod sink;

#[cfg(test)]
mod counting;

pub use grid::{Dim3, Grid};
pub use kernel::{
    CrateFiles, Entry, Kernel, KernelRegistration, KernelSass, Param, Part, Placement, Pointee,
    Sass, crate_sass, registered_kernels,
};
