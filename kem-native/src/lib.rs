//! kem-native: everything that touches a built KEM object (in progress).

pub mod output;
pub mod sys;

/// Version of this crate; part of every cache key whose record the runner produced.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
