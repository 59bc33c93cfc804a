//! Environment capture and statistics.

pub mod env;
pub mod interference;
pub mod rounds;
pub mod stats;
