//! Report rendering from a fixed set of hand-made records (`tests/fixtures/records/`).
//!
//! The fixture records are built here from the record types, so they always deserialize;
//! `fixtures_are_current` fails when the committed files differ from what this code builds
//! (regenerate with `UPDATE_FIXTURES=1 cargo test --test report`). Snapshot tests pin the
//! Markdown, CSV, JSON and HTML rendered from them (update with `INSTA_UPDATE=always`).
//!
//! Two systems: `x86_1` (submissions `ml-kem` and `qube`, covering PASS, MISMATCH with a
//! reference diff, NOKAT, FAIL with skipped timing and profile, an unstable measurement with
//! an outlier trial, and a survey `bypass`) and `arm_1` (`ml-kem` only) whose
//! `reports/results.json` makes the site show both systems side by side.
//!
//! The `faults_*` tests (`report_faults/`) render records recorded from a real run of the
//! faults campaign and redacted (`tests/fixtures/records-faults/`), so the engine's own
//! sandbox row, environment warnings and skip reasons are in their snapshots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ngcc_pipe::measure::{env, stats};
use ngcc_pipe::model::{
    Campaign, CatalogSizes, FlagProfile, Instance, KatMode, KatRng, KatSettings, Op, PrimitiveFn,
    Primitives, ReportMeta, Source, StepKind, StepParams, StepSpec, Submission, System,
};
use ngcc_pipe::record::{
    self, ApiSizes, BuildData, CampaignRecord, CampaignStep, Environment, KatData, KatModeResult,
    KatStatus, LayoutObject, OwnSymbol, ProfileData, ProfileKatCheck, ProfileOutput, RspDiff,
    SizesData, SourceData, SourceHit, Status, StepData, StepRecord, SurveyData, SymbolProfile,
    TimeData, Verdict,
};
use ngcc_pipe::report::{self, CampaignView};

use kem_native::output::{Calibration, CoreCycles, Memory, Overhead, TimeOutput, Trial};

/// The `ct` records of `x86_1` (memcheck findings and variable-latency scans).
#[path = "report_ct/records.rs"]
mod ct_records;

/// Reports from the redacted records of a real faults-campaign run.
#[path = "report_faults/mod.rs"]
mod faults;

mod common;

const FIXTURES: &str = "tests/fixtures/records";

// ---------------------------------------------------------------- tests

#[test]
fn fixtures_are_current() {
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        let _ = std::fs::remove_dir_all(FIXTURES);
        write_fixtures_to(Path::new(FIXTURES));
    }
    let tmp = tempfile::tempdir().unwrap();
    write_fixtures_to(tmp.path());
    let mut expected: Vec<PathBuf> = Vec::new();
    for entry in walk(tmp.path()) {
        let rel = entry.strip_prefix(tmp.path()).unwrap().to_path_buf();
        let want = std::fs::read(&entry).unwrap();
        let have = std::fs::read(Path::new(FIXTURES).join(&rel)).unwrap_or_default();
        assert!(
            want == have,
            "fixture `{}` is stale: run `UPDATE_FIXTURES=1 cargo test --test report`",
            rel.display()
        );
        expected.push(rel);
    }
    let committed: Vec<PathBuf> = walk(Path::new(FIXTURES))
        .into_iter()
        .map(|p| p.strip_prefix(FIXTURES).unwrap().to_path_buf())
        .collect();
    expected.sort();
    assert_eq!(committed, expected, "extra or missing fixture files");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn x86_view() -> CampaignView {
    CampaignView::load(&x86_campaign(), &Path::new(FIXTURES).join("x86_1")).unwrap()
}

fn file<'a>(files: &'a [(PathBuf, Vec<u8>)], name: &str) -> &'a str {
    let (_, b) = files
        .iter()
        .find(|(p, _)| p == Path::new(name))
        .unwrap_or_else(|| panic!("no file {name}"));
    std::str::from_utf8(b).unwrap()
}

#[test]
fn submission_markdown_mlkem() {
    let view = x86_view();
    let files = report::render_submission(&view, "ml-kem");
    let md = file(&files, "reports/ml-kem.md");
    for section in [
        "# ML-KEM — performance on x86-64 (system x86_1)",
        "## 1. Basic information",
        "## 2. Assessment environment",
        "## 3. Functional testing (KAT)",
        "## 4. Performance",
        "## 5. Resource consumption",
        "## 6. Transmission and storage overhead",
        "## Symmetric primitives",
        "## 7. Raw evidence index",
    ] {
        assert!(md.contains(section), "missing `{section}`");
    }
    // One headline figure per operation, said once in words; the distributions, flags and
    // outliers are in the appendix, which the body links to.
    assert_eq!(md.matches("Headline figure").count(), 1);
    assert!(md.contains("(ml-kem.appendix.md)"));
    assert!(!md.contains("unstable"));
    assert!(!md.contains("outlier trial"));
    let appendix = file(&files, "reports/ml-kem.appendix.md");
    assert!(appendix.contains("(ml-kem.md)"));
    assert!(appendix.contains("| unstable |"));
    assert!(appendix.contains("| outlier trial #4 |"));
    // The record's trial index is 0-based, and so is the appendix's "#4".
    let rec: StepRecord = serde_json::from_slice(
        &std::fs::read(
            Path::new(FIXTURES).join("x86_1/records/ml-kem/ML-KEM-1024-clean__dec.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let Some(StepData::Time(td)) = &rec.data else {
        panic!("not a time record")
    };
    assert_eq!(td.summary.trial_outliers, [4]);
    // The evidence index moved whole: every record of the body's old index is in the appendix.
    assert!(appendix.contains("## Raw evidence index"));
    assert!(appendix.contains("records/ml-kem/ML-KEM-768-clean__enc.json"));
    assert!(appendix.contains("profile/ml-kem/ML-KEM-1024-clean__keygen.json"));
    assert!(appendix.contains("Single-call samples"));
    insta::assert_snapshot!("ml_kem_md", md);
    insta::assert_snapshot!("ml_kem_appendix_md", appendix);
}

#[test]
fn submission_markdown_qube_failures() {
    let view = x86_view();
    let files = report::render_submission(&view, "qube");
    let md = file(&files, "reports/qube.md");
    assert!(md.contains("MISMATCH [1]"));
    assert!(md.contains("NOKAT [2]"));
    assert!(md.contains("FAIL [3]"));
    assert!(md.contains("Survey verdict: bypass"));
    assert!(md.contains(
        "skipped: `qube/qube-256/kat` failed: FAIL (single): shared secrets differ in count 0"
    ));
    // Only instances with a successful time record are objects timed (qube-256 is not).
    let appendix = file(&files, "reports/qube.appendix.md");
    assert!(appendix.contains("- `qube-128`, `qube-192`: compiled with"));
    assert!(!appendix.contains("`qube-256`: compiled"));
    insta::assert_snapshot!("qube_md", md);
}

#[test]
fn campaign_index_csv_json() {
    let view = x86_view();
    let files = report::render_campaign(&view);
    insta::assert_snapshot!("index_md", file(&files, "reports/index.md"));
    let csv = file(&files, "reports/results.csv");
    // 6 instances x 3 ops + header
    assert_eq!(csv.lines().count(), 19);
    insta::assert_snapshot!("results_csv", csv);
    let js = file(&files, "reports/results.json");
    let parsed: report::Results = serde_json::from_str(js).unwrap();
    assert_eq!(parsed.schema, report::RESULTS_SCHEMA);
    assert_eq!(parsed.system, "x86_1");
    let n: usize = parsed.submissions.iter().map(|s| s.instances.len()).sum();
    assert_eq!(n, 6);
    insta::assert_snapshot!("results_json", js);
}

#[test]
fn html_site_is_self_contained() {
    let view = x86_view();
    let mut files = report::render_campaign(&view);
    files.extend(report::render_submission(&view, "qube"));
    let index = file(&files, "site/index.html");
    let page = file(&files, "site/qube.html");
    for html in [index, page] {
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("<link"));
    }
    // both systems side by side, with the switch; the page opens on its own system
    assert!(index.contains(
        "system: <a href=\"#system-x86_1\">x86_1</a> · <a href=\"#system-arm_1\">arm_1</a>"
    ));
    assert!(index.contains("<section id=\"system-arm_1\">"));
    // two charts per system, each drawn wide and narrow
    assert_eq!(index.matches("<svg").count(), 8);
    assert!(index.contains("NIST category 1") && index.contains("NIST category 5"));
    insta::assert_snapshot!("site_index_html", index);
    insta::assert_snapshot!("site_qube_html", page);
}

#[test]
fn rendering_is_deterministic_and_written_atomically() {
    let a = report::render_all(&x86_view());
    let b = report::render_all(&x86_view());
    assert_eq!(a.len(), b.len());
    for ((pa, ba), (pb, bb)) in a.iter().zip(&b) {
        assert_eq!(pa, pb);
        assert!(
            ba == bb,
            "`{}` differs between two renderings",
            pa.display()
        );
    }
    let names: Vec<_> = a.iter().map(|(p, _)| p.display().to_string()).collect();
    assert_eq!(
        names,
        [
            "reports/ml-kem.md",
            "reports/ml-kem.appendix.md",
            "site/ml-kem.html",
            "reports/qube.md",
            "reports/qube.appendix.md",
            "site/qube.html",
            "reports/index.md",
            "reports/results.csv",
            "reports/results.json",
            "site/index.html",
        ]
    );
    // REPORT_RENDER_TO=DIR keeps a rendered copy to look at (e.g. in a browser)
    if let Some(dir) = std::env::var_os("REPORT_RENDER_TO") {
        copy_tree(Path::new(FIXTURES), Path::new(&dir));
        report::write_all(&Path::new(&dir).join("x86_1"), &a).unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    report::write_all(tmp.path(), &a).unwrap();
    assert_eq!(
        std::fs::read(tmp.path().join("reports/qube.md")).unwrap(),
        a[3].1
    );
    let bad = vec![(PathBuf::from("../escape.md"), vec![])];
    assert!(report::write_all(tmp.path(), &bad).is_err());
}

#[test]
fn missing_records_say_did_not_run() {
    // A folder of its own inside the temp dir: sibling folders are read as other systems.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x86_1");
    std::fs::create_dir_all(&out).unwrap();
    let mut c = x86_campaign();
    c.pipeline_path = tmp.path().join("pipelines/x86_1.kdl");
    let view = CampaignView::load(&c, &out).unwrap();
    let files = report::render_submission(&view, "ml-kem");
    let md = file(&files, "reports/ml-kem.md");
    assert!(md.contains("The `kat` step did not run for this submission: no records"));
    assert!(md.contains("The `time` step did not run for this submission: no records"));
    assert!(md.contains("No records were found for this submission."));
    let appendix = file(&files, "reports/ml-kem.appendix.md");
    assert!(appendix.contains("No records were found for this submission."));
    insta::assert_snapshot!("empty_md", md);
}

#[test]
fn corrupt_record_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("records/ml-kem/ML-KEM-512-clean__kat.json");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, b"{ not json").unwrap();
    let err = CampaignView::load(&x86_campaign(), tmp.path()).unwrap_err();
    assert!(
        err.to_string().contains("ML-KEM-512-clean__kat.json"),
        "{err}"
    );
}

#[test]
fn compare_same_system_is_all_noise() {
    let dir = Path::new(FIXTURES).join("x86_1");
    let c = report::compare(&dir, &dir).unwrap();
    // ml-kem: 3 instances x 3 ops; qube: 2 timed instances x 3 ops (qube-256 was skipped)
    assert_eq!(c.rows.len(), 15);
    assert!(c.rows.iter().all(|r| {
        let raw = r.estimates.raw.as_ref().unwrap();
        (raw.ratio.median - 1.0).abs() < 1e-12 && !r.change().unwrap().significant()
    }));
}

#[test]
fn compare_two_systems() {
    // records-only (x86_1) against results.json (arm_1): arm is 1.9x the cycles
    let a = Path::new(FIXTURES).join("x86_1");
    let b = Path::new(FIXTURES).join("arm_1");
    let c = report::compare(&a, &b).unwrap();
    assert_eq!(c.system_a, "x86_1");
    assert_eq!(c.system_b, "arm_1");
    assert_eq!(c.rows.len(), 9);
    assert!(c.rows.iter().all(|r| {
        let raw = r.estimates.raw.as_ref().unwrap();
        (raw.ratio.median - 1.9).abs() < 0.05
    }));
    insta::assert_snapshot!("compare_md", report::compare_markdown(&c));
    insta::assert_snapshot!("compare_csv", report::compare_csv(&c));
    assert_eq!(c.only_a.len(), 6);
}

fn copy_tree(from: &Path, to: &Path) {
    for f in walk(from) {
        let rel = f.strip_prefix(from).unwrap();
        std::fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&f, to.join(rel)).unwrap();
    }
}

#[test]
fn compare_marks_only_the_slowed_instance() {
    // B is A with ML-KEM-512-clean dec 2.5x slower (as if built at -O0): only that row's
    // interval leaves the band; the unstable ML-KEM-768 enc and every other row do not.
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    copy_tree(&Path::new(FIXTURES).join("x86_1"), &a);
    copy_tree(&Path::new(FIXTURES).join("x86_1"), &b);
    let rec = b.join("records/ml-kem/ML-KEM-512-clean__dec.json");
    let mut r: StepRecord = record::read_json(&rec).unwrap().unwrap();
    if let Some(StepData::Time(td)) = r.data.as_mut() {
        for t in &mut td.output.trials {
            t.cycles = t.cycles * 5 / 2;
        }
    } else {
        panic!("fixture is not a timing record");
    }
    record::write_json(&rec, &r).unwrap();
    let c = report::compare(&a, &b).unwrap();
    let significant: Vec<String> = c
        .rows
        .iter()
        .filter(|r| r.change().unwrap().significant())
        .map(|r| format!("{} {}", r.instance, r.op))
        .collect();
    assert_eq!(significant, ["ML-KEM-512-clean dec"]);
    // `verdict` is the 20th column.
    assert!(report::compare_csv(&c)
        .lines()
        .any(|l| l.contains("ML-KEM-512-clean,dec") && l.split(',').nth(19) == Some("slower")));
}

/// `results.json` carries what `compare` and `history` read from the records: per-round
/// cycles, the yardstick's in the same rounds and which rounds were interfered.
#[test]
fn results_json_gives_compare_the_same_rounds_as_the_records() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x86_1");
    copy_tree(&Path::new(FIXTURES).join("x86_1"), &out);
    let rec = out.join("records/ml-kem/ML-KEM-512-clean__keygen.json");
    let mut r: StepRecord = record::read_json(&rec).unwrap().unwrap();
    let Some(StepData::Time(td)) = r.data.as_mut() else {
        panic!("fixture is not a timing record");
    };
    // 12 rounds, the 3rd and 9th interfered, a yardstick beside them.
    td.output.trials = (0..12u64)
        .map(|i| Trial {
            iters: 100,
            cycles: 100 * (50_000 + 10 * i + if i == 2 || i == 8 { 20_000 } else { 0 }),
            ns: 20_000_000,
            core_cycles: None,
            layout_cycles: Vec::new(),
            gauge_cycles: Vec::new(),
        })
        .collect();
    let est = serde_json::json!({"median": 1.0, "ci_low": 1.0, "ci_high": 1.0});
    td.rounds = Some(
        serde_json::from_value(serde_json::json!({
            "session": "s", "seed": 1, "members": 10, "positions": vec![0; 12],
            "interference": (0..12).map(|i| if i == 2 || i == 8 { vec!["steal 1 ticks"] } else { vec![] }).collect::<Vec<_>>(),
            "clean_only": true, "estimate": est, "precision": 0.01, "reached": true,
            "stopped": "budget", "budget_s": 1.0,
            "yardstick": {"name": "ngcc-yardstick-1", "object_sha256": "ab", "values": (0..12).map(|i| 1000.0 + i as f64).collect::<Vec<_>>(), "estimate": est, "relative": est},
        }))
        .unwrap(),
    );
    record::write_json(&rec, &r).unwrap();
    let from_records = report::compare::load(&out).unwrap();
    let view = CampaignView::load(&x86_campaign(), &out).unwrap();
    report::write_all(&out, &report::render_campaign(&view)).unwrap();
    assert!(out.join("reports/results.json").is_file());
    let from_results = report::compare::load(&out).unwrap();
    // The same rounds (serde_json reads floats back to within an ulp).
    let close = |x: &[f64], y: &[f64]| {
        x.len() == y.len()
            && x.iter()
                .zip(y)
                .all(|(a, b)| (a - b).abs() <= 1e-12 * a.abs())
    };
    assert_eq!(
        from_records.series.keys().collect::<Vec<_>>(),
        from_results.series.keys().collect::<Vec<_>>()
    );
    for (k, r) in &from_records.series {
        let j = &from_results.series[k];
        assert_eq!(r.basis, j.basis, "{k:?}");
        assert!(close(&r.values, &j.values), "{k:?}");
        assert_eq!(r.yardstick.is_some(), j.yardstick.is_some(), "{k:?}");
    }
    let key = (
        "ml-kem".to_string(),
        "ML-KEM-512-clean".to_string(),
        Op::Keygen,
    );
    let s = &from_results.series[&key];
    assert_eq!(
        s.basis,
        report::compare::Basis::Rounds {
            rounds: 12,
            left_out: 2,
            marked: true
        }
    );
    assert!(s.values.iter().all(|&v| v < 60_000.0), "{s:?}");
    let (id, ys) = s.yardstick.as_ref().unwrap();
    assert_eq!((id.as_str(), ys.len()), ("ngcc-yardstick-1 sha256:ab", 10));
}

/// Runs `scripts/site-check.sh` (headless Chromium, Debian's `chromium`) on the fixture
/// site: every page at 1400 and 390 px, no console message, no request leaving the page,
/// no page wider than the viewport, no SVG label outside its viewBox, overlapping another
/// or drawn below 9 px. Run with `cargo test --test report -- --ignored chromium` (set
/// `REPORT_SCREENSHOTS=DIR` to keep the screenshots).
#[test]
#[ignore = "needs the `chromium` binary"]
fn chromium_renders_the_site() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(Path::new(FIXTURES), tmp.path());
    let out = tmp.path().join("x86_1");
    report::write_all(&out, &report::render_all(&x86_view())).unwrap();
    let shots = std::env::var_os("REPORT_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("shots"));
    let run = std::process::Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/site-check.sh"),
    )
    .arg(&out)
    .env("SHOTS", &shots)
    .output()
    .expect("run scripts/site-check.sh");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "site check failed:\n{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // every page at both widths, each with its screenshot
    for page in ["index", "ml-kem", "qube"] {
        for width in [1400, 390] {
            assert!(
                stdout.contains(&format!("{page}.html @ {width} px")),
                "{page} at {width} px not checked:\n{stdout}"
            );
            let png = shots.join(format!("{page}-{width}.png"));
            assert!(std::fs::metadata(&png).is_ok_and(|m| m.len() > 10_000));
        }
    }
}

#[path = "report/model.rs"]
mod model;
use model::*;
#[path = "report/instances.rs"]
mod instances;
use instances::*;
#[path = "report/fixtures.rs"]
mod fixtures;
use fixtures::*;
#[path = "report/charts.rs"]
mod charts;
