//! ngcc-pipe: declarative performance-measurement campaigns for post-quantum KEMs.
//!
//! The crate mirrors the data flow:
//! `dsl` (KDL files -> validated `model`, with spans for every error) -> `graph`
//! (petgraph of per-instance steps) -> `run` (scheduler, steps, records) -> `report`
//! (renders from `record`s only). `measure` holds the environment capture and the pure
//! statistics; `profile`, `survey`, `sizes`, `rsp` and `ct` are the analyses behind the steps of
//! the same names. KEM code is never loaded into this process: `kem-native`'s `kem-runner`
//! does that in a child process per job.

// No unsafe code in the library; its unit tests share the integration tests' skip helper,
// which registers an exit handler (`libc::atexit`).
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]

pub mod archive;
pub mod bench;
pub mod cli;
pub mod count;
pub mod csource;
pub mod ct;
pub mod dsl;
pub mod error;
pub mod graph;
pub mod import;
pub mod libs;
pub mod measure;
pub mod model;
pub mod profile;
pub mod record;
pub mod report;
pub mod rsp;
pub mod run;
pub mod safe_fs;
pub mod sizes;
pub mod sources;
pub mod survey;
pub mod text;

/// `require`: what a unit test needs outside Rust (see the file).
#[cfg(test)]
#[allow(unsafe_code)]
#[path = "../tests/common/require.rs"]
mod require;

/// "ngcc-pipe 0.1.0 (git 3650e3d2f1a0)": the tool's version and the commit it was built
/// from (see `build.rs`), recorded in `campaign.json`.
pub fn tool_version() -> String {
    format!(
        "ngcc-pipe {} (git {})",
        env!("CARGO_PKG_VERSION"),
        env!("NGCC_PIPE_COMMIT")
    )
}
