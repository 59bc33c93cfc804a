//! Build script: the git commit the binary is built from (`NGCC_PIPE_COMMIT`, with
//! `-dirty` when tracked files differ from it; "unknown" outside a git checkout), recorded
//! in `campaign.json` and shown in the reports' evidence section.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=NGCC_PIPE_COMMIT={commit}");
}
