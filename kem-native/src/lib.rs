//! kem-native: everything that touches a built KEM object.
//!
//! The engine never links KEM code into itself; it runs the `kem-runner` binary of this
//! crate, which `dlopen`s one built instance and runs one job (`kat`, `time`, `profile`),
//! printing one JSON record ([`output`], whose types are the evidence schema's: `ngcc-record`). Modules:
//! [`api`] (sizes from api.h), [`callgrind`] (the request that starts callgrind's instrumentation), [`ct`] (the constant-time check under memcheck), [`drbg`] (KAT random sources), [`error`] (typed errors, exit codes), [`kem`] (loading, guarded
//! buffers, the random-byte hook, big-stack threads), [`kat`] (NIST `.rsp` generation),
//! [`timer`] (cycle counters, perf), [`timing`] (the hot loop), [`memory`] (RSS, stack
//! painting), [`profile`] (wrapped-symbol tables), [`serve`] (the persistent runner of interleaved rounds), [`sys`] (safe wrappers over the OS calls the engine needs).

pub mod api;
pub mod callgrind;
pub mod checked;
pub mod ct;
pub mod drbg;
pub mod error;
pub mod kat;
pub mod kem;
pub mod memory;
/// The JSON records the runner prints: the evidence schema's types (`ngcc-record`), shared
/// with the engine that embeds them in its step records.
pub use ngcc_record::output;
pub mod profile;
pub mod serve;
pub mod sys;
pub mod timer;
pub mod timing;

/// Version of this crate; part of every cache key whose record the runner produced.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
