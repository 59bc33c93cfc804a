//! The yardstick: a fixed workload timed in every round of a timing session beside the
//! KEMs, so that the host's speed at the time is measured, not guessed.
//!
//! Why: on a shared or virtual machine the host itself drifts — two campaigns run back to
//! back on this project's 2-vCPU VM saw every one of 51 operations 1–19% slower in the
//! second (median 4.5%), the minimum per-round values too, while the ratio of each
//! operation to another one timed in the same rounds stayed within 3% for 45 of 50. A
//! comparison of two runs compares two moments of the host unless it divides by something
//! timed at those same moments. The yardstick is that something: it is not a submission
//! (it is the same in every campaign), its source is built into ngcc-pipe
//! (`src/run/yardstick/yardstick.c`: Keccak-f[1600] permutations and a small polynomial
//! multiplication, what KEMs spend their time on), and it is compiled with fixed flags
//! into `<outputs>/yardstick/` when a session starts. Its object's SHA-256 is recorded, so
//! only records timed against the same yardstick object are divided by it
//! ([`crate::report::compare`]).
//!
//! It runs as one more `kem-runner serve` process in the sandbox (only keygen is timed),
//! takes a random position in every round like the members, and does not count towards the
//! session's budget or precision. Every member's record keeps the yardstick's per-round
//! cycles beside its own ([`super::session::Yardstick`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::keys::sha256_hex;

/// The workload's C source and its API header, as compiled.
const SOURCE: &str = include_str!("yardstick/yardstick.c");
const API_H: &str = include_str!("yardstick/api.h");

/// Its symbol prefix and name (the api.h `CRYPTO_ALGNAME`; changed with the workload).
pub const NAMESPACE: &str = "NGCC_YARDSTICK_";
pub const NAME: &str = "ngcc-yardstick-1";

/// Fixed flags, independent of the campaign's flag profiles: the yardstick must be the
/// same code in every campaign that uses the same compiler.
const FLAGS: [&str; 3] = ["-O2", "-fPIC", "-shared"];

/// A compiled yardstick.
#[derive(Debug, Clone)]
pub struct Built {
    pub object: PathBuf,
    pub api_h: PathBuf,
    pub object_sha256: String,
    /// The compiler command, as run (for the log).
    pub command: Vec<String>,
}

/// Write the source into `dir` and compile it with `cc`; the compiler's output goes into
/// the error on failure.
pub fn build(cc: &str, dir: &Path) -> Result<Built, String> {
    let fail = |what: &dyn std::fmt::Display| format!("yardstick: {what}");
    std::fs::create_dir_all(dir).map_err(|e| fail(&format!("`{}`: {e}", dir.display())))?;
    let source = dir.join("yardstick.c");
    let api_h = dir.join("api.h");
    let object = dir.join("yardstick.so");
    for (path, text) in [(&source, SOURCE), (&api_h, API_H)] {
        std::fs::write(path, text).map_err(|e| fail(&format!("`{}`: {e}", path.display())))?;
    }
    let mut command: Vec<String> = vec![cc.to_string()];
    command.extend(FLAGS.iter().map(|f| f.to_string()));
    command.extend([
        "-o".to_string(),
        object.display().to_string(),
        source.display().to_string(),
    ]);
    let out = Command::new(&command[0])
        .args(&command[1..])
        .output()
        .map_err(|e| fail(&format!("cannot run `{cc}`: {e}")))?;
    if !out.status.success() {
        return Err(fail(&format!(
            "`{}` failed ({}): {}",
            command.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let bytes =
        std::fs::read(&object).map_err(|e| fail(&format!("`{}`: {e}", object.display())))?;
    Ok(Built {
        object: std::path::absolute(&object).unwrap_or(object),
        api_h: std::path::absolute(&api_h).unwrap_or(api_h),
        object_sha256: sha256_hex(&bytes),
        command,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_the_workload_and_its_prefix() {
        assert!(API_H.contains(&format!("CRYPTO_ALGNAME \"{NAME}\"")));
        assert!(API_H.contains(&format!("{NAMESPACE}crypto_kem_keypair")));
        assert!(SOURCE.contains(&format!("{NAMESPACE}crypto_kem_keypair")));
    }

    #[test]
    fn builds_with_the_system_compiler() {
        let dir = std::env::temp_dir().join(format!("ngcc-yardstick-ok-{}", std::process::id()));
        let b = build("cc", &dir).unwrap();
        assert!(b.object.is_file());
        assert_eq!(b.object_sha256.len(), 64);
        assert_eq!(b.command[1..4], FLAGS);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_compiler_is_an_error_not_a_panic() {
        let dir = std::env::temp_dir().join(format!("ngcc-yardstick-{}", std::process::id()));
        let e = build("/nonexistent/cc", &dir).unwrap_err();
        assert!(e.contains("cannot run `/nonexistent/cc`"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
