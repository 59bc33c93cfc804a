//! Environment capture and statistics.

pub mod env;
pub mod stats;
