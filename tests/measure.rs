//! `compare --measure` on a tiny real campaign: ML-KEM-512 clean keygen built with the
//! quick pipeline's `-O3` (A) and with `-O0` (B), timed again now in one session with an
//! A/A pair. `-O0` is about 3 times slower there, far beyond any noise, so B must come out
//! `slower`, with a threshold that is how far A against itself reaches from 1. A B whose
//! object cannot be loaded is reported as not measured and the command exits 1.
//!
//! Needs the crate `pqcrypto-mlkem` (group `crates`, see `tests/common/require.rs`).

use std::path::{Path, PathBuf};

use ngcc_pipe::model::StepKind;
use ngcc_pipe::record::{self, StepData};

mod common;
use common::*;

const ONLY: &str = "ml-kem/ML-KEM-512-clean/time:keygen";

/// Run the quick pipeline's `ONLY` step with the `guide` flags `flags` into `dir/name`.
fn timed(dir: &Path, name: &str, flags: &str) -> PathBuf {
    let guide = "flags \"guide\" \"-O3 -march=native -fomit-frame-pointer\"";
    let wanted = format!("flags \"guide\" \"{flags}\"");
    let p = pipeline_copy(
        "pipelines/quick.kdl",
        &dir.join(format!("{name}.kdl")),
        &[(guide, &wanted)],
    );
    let out = dir.join(name);
    let r = run(&["run", &s(&p), "--only", ONLY, "--outputs", &s(&out), "-q"]);
    assert_eq!(r.code, 0, "{name}: {}", r.show());
    out
}

/// The markdown table's cells of the row of ML-KEM-512 clean keygen.
fn row(markdown: &str) -> Vec<String> {
    let line = markdown
        .lines()
        .find(|l| l.contains("`ML-KEM-512-clean` | keygen"))
        .unwrap_or_else(|| panic!("no keygen row:\n{markdown}"));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// `1.234 (1.100–1.400)` -> (1.234, 1.100, 1.400).
fn estimate(cell: &str) -> (f64, f64, f64) {
    let nums: Vec<f64> = cell
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(nums.len(), 3, "{cell}");
    (nums[0], nums[1], nums[2])
}

#[test]
fn an_o0_build_is_measured_slower_beyond_the_a_a_threshold() {
    if !require_crates(&[MLKEM_CRATE]) {
        return;
    }
    let tmp = tempdir();
    let a = timed(tmp.path(), "a", "-O3 -march=native -fomit-frame-pointer");
    let b = timed(tmp.path(), "b", "-O0");
    let csv = tmp.path().join("paired.csv");
    let r = run(&["compare", "--measure", &s(&a), &s(&b), "--csv", &s(&csv)]);
    assert_eq!(r.code, 0, "{}", r.show());
    // | submission | instance | op | median A | median B | B/A (CI) | A/A (CI) | threshold | rounds | verdict |
    let cells = row(&r.stdout);
    assert_eq!(cells.len(), 10, "{cells:?}");
    let (ratio, low, _) = estimate(&cells[5]);
    let (aa, aa_low, aa_high) = estimate(&cells[6]);
    assert_eq!(cells[9], "slower", "{}", r.stdout);
    // About 3 to 4 here; 1.5 leaves room for a loaded machine and other compilers.
    assert!(low > 1.5, "B/A {ratio} (CI low {low})\n{}", r.stdout);
    // The threshold is how far the A/A interval reaches from 1 (at least 1%), and B/A's
    // whole interval lies beyond it. (How close A/A itself comes to 1 depends on the
    // machine: 1.66 was seen with a load of 10 on 2 vCPUs, every round interfered; so it
    // is not asserted here. On a quiet machine it is within a few percent.)
    assert!(aa_low <= aa && aa <= aa_high, "{}", r.stdout);
    let threshold: f64 = cells[7]
        .trim_start_matches('±')
        .trim_end_matches('%')
        .parse::<f64>()
        .unwrap()
        / 100.0;
    let reach = (aa_low - 1.0).abs().max((aa_high - 1.0).abs()).max(0.01);
    assert!(
        (threshold - reach).abs() < 0.006,
        "threshold {threshold} for A/A ({aa_low}-{aa_high})\n{}",
        r.stdout
    );
    assert!(low > 1.0 + threshold, "{}", r.stdout);
    let text = std::fs::read_to_string(&csv).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("ml-kem,ML-KEM-512-clean,keygen,"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.ends_with(",slower"), "{line}");

    // B's object replaced by something that is not one: not measured, exit 1.
    let broken = tmp.path().join("broken");
    copy_tree(&b, &broken);
    let build = rec(
        &broken,
        StepKind::Build,
        "ml-kem",
        Some("ML-KEM-512-clean"),
        None,
    );
    let Some(StepData::Build(data)) = &build.data else {
        panic!("no build data");
    };
    std::fs::write(broken.join(&data.object), b"not an object").unwrap();
    let r = run(&["compare", "--measure", &s(&a), &s(&broken)]);
    assert_eq!(r.code, 1, "{}", r.show());
    assert!(r.stdout.contains("Could not be measured:"), "{}", r.show());
    assert!(
        r.stdout.contains("- ml-kem/ML-KEM-512-clean keygen: B: "),
        "{}",
        r.show()
    );
    // The records of B's time step are those of the run, untouched.
    let t = record::record_path(
        StepKind::Time,
        "ml-kem",
        Some("ML-KEM-512-clean"),
        Some(ngcc_pipe::model::Op::Keygen),
    );
    assert_eq!(
        std::fs::read(b.join(&t)).unwrap(),
        std::fs::read(broken.join(&t)).unwrap()
    );
}

/// A copy of the folder `from` at `to`.
fn copy_tree(from: &Path, to: &Path) {
    for f in tree(from) {
        let dst = to.join(&f);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(from.join(&f), &dst).unwrap();
    }
}
