//! kem-native: everything that touches a built KEM object (in progress).

pub mod output;
pub mod sys;
