//! What the collectives reduce: the element types NCCL has ([`CollectiveType`]) and the
//! reductions ([`ReduceOp`]), with how the simulator's set combines two values.

use berth_device::DeviceCopy;

/// The reduction of an all-reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! collective_trait {
    ($($bound:tt)*) => {
        /// An element type collectives reduce: the integer and floating-point types NCCL has.
        pub trait CollectiveType: DeviceCopy + sealed::Sealed $($bound)* {
            /// `a op b`, as the reduction computes it on the simulator.
            #[doc(hidden)]
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self;
        }
    };
}

#[cfg(feature = "nccl")]
collective_trait!(+ cudarc::nccl::NcclType);
#[cfg(not(feature = "nccl"))]
collective_trait!();

macro_rules! int_collective {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl CollectiveType for $t {
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                }
            }
        }
    )*};
}

macro_rules! float_collective {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl CollectiveType for $t {
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                }
            }
        }
    )*};
}

int_collective!(i8, u8, i32, u32, i64, u64);
float_collective!(f32, f64);
