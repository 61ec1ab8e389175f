//! TPC-H queries 1, 6, 12 and 14 as berth kernels, over `lineitem` columns that live in host
//! memory (the `tpch` program; [`data`] makes the tables or [`parquet`] reads them,
//! [`reference`](mod@reference) computes the answers on the host, [`query`] runs the kernels).
//!
//! The kernels, their parameters and constants are the `berth-examples-tpch` crate, re-exported
//! here.

pub use berth_examples_tpch::*;

pub mod data;
pub mod parquet;
pub mod query;
pub mod reference;
