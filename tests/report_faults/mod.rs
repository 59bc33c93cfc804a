//! Reports rendered from the records of a real run of the faults campaign
//! (`tests/fixtures/kems/faults.kdl`, our own toy KEMs), recorded and redacted by
//! [`redact::redact_outputs`] into `tests/fixtures/records-faults/fixtures/` (the system is
//! called `fixtures`): the sandbox row, the environment warnings and the skip and failure
//! reasons in these snapshots are the engine's own, not written by hand. Part of
//! `tests/report.rs`.
//!
//! Re-record after a change to what the engine writes (this runs the campaign, about a
//! minute, and rewrites the folder), then review the snapshots it changes:
//!
//! ```text
//! UPDATE_FIXTURES=1 cargo test --release --test report faults_records_
//! cargo test --release --test report faults_   # then review and move the .snap.new files
//! ```

mod redact;

use std::path::{Path, PathBuf};

use ngcc_pipe::model::{Campaign, KatMode, StepKind};
use ngcc_pipe::record::{CampaignRecord, Status, StepRecord};
use ngcc_pipe::report::{self, CampaignView};

use crate::common;

/// The redacted records (the folder is named after the campaign's system).
const DIR: &str = "tests/fixtures/records-faults/fixtures";
const PIPELINE: &str = "tests/fixtures/kems/faults.kdl";
const RERECORD: &str = "UPDATE_FIXTURES=1 cargo test --release --test report faults_records_";

/// The one edit to `faults.kdl` for the recording: the working fixtures' `kat.sha256` holds
/// only the one-count hash, so their `all` KAT is NOKAT beside a PASS, which the reports
/// must list as "not checked", never as a failure.
const EDITS: [(&str, &str); 1] = [("modes=\"single\"", "modes=\"single all\"")];

/// Run the faults campaign into a temporary folder and replace [`DIR`] with its redacted
/// records.
fn record() {
    let tmp = common::tempdir();
    let out = tmp.path().join("out");
    let pipeline = common::pipeline_copy(PIPELINE, &tmp.path().join("faults.kdl"), &EDITS);
    let r = common::run(&["run", &common::s(&pipeline), "--outputs", &common::s(&out)]);
    // exit 1: the faulty fixtures fail their KAT (tests/engine.rs checks each reason)
    assert_eq!(r.code, 1, "{}", r.show());
    let bin = Path::new(env!("CARGO_BIN_EXE_ngcc-pipe"))
        .parent()
        .expect("the binary is in a folder");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut places: Vec<(&Path, &str)> = vec![
        (&out, "<outputs>"),
        (tmp.path(), "<tmp>"),
        (common::repo(), "<repo>"),
        (bin, "<bin>"),
    ];
    if let Some(h) = home.as_deref().filter(|h| h.components().count() > 1) {
        places.push((h, "<home>"));
    }
    let files = redact::redact_outputs(&out, &places);
    let _ = std::fs::remove_dir_all(DIR);
    for (rel, bytes) in files {
        ngcc_pipe::record::write_atomic(&Path::new(DIR).join(rel), &bytes).unwrap();
    }
}

/// The campaign model of the recorded run: `faults.kdl` as committed (paths relative to the
/// repository) with the recording's KAT modes.
fn campaign() -> Campaign {
    let mut c = ngcc_pipe::dsl::load_campaign(Path::new(PIPELINE))
        .unwrap_or_else(|e| panic!("{PIPELINE}: {e:?}"));
    let kat = c
        .steps
        .iter_mut()
        .find(|s| s.kind == StepKind::Kat)
        .expect("faults.kdl has a kat step");
    assert_eq!(
        kat.params.kat_modes,
        [KatMode::Single],
        "EDITS no longer apply"
    );
    kat.params.kat_modes = vec![KatMode::Single, KatMode::All];
    c
}

fn view() -> CampaignView {
    CampaignView::load(&campaign(), Path::new(DIR)).unwrap()
}

fn campaign_record() -> CampaignRecord {
    serde_json::from_slice(&std::fs::read(Path::new(DIR).join("campaign.json")).unwrap()).unwrap()
}

/// The committed records deserialize with today's record types and lose nothing on the way
/// (a field renamed or dropped since the recording shows as a difference): re-record when
/// this fails. With `UPDATE_FIXTURES` set, records them first.
#[test]
fn faults_records_deserialize_with_todays_types() {
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        record();
    }
    let files = crate::walk(Path::new(DIR));
    assert!(
        files.len() > 50,
        "{DIR}: {} files; record with UPDATE_FIXTURES=1",
        files.len()
    );
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
        let typed = if f.ends_with("campaign.json") {
            serde_json::from_str::<CampaignRecord>(&text).map(serde_json::to_value)
        } else {
            serde_json::from_str::<StepRecord>(&text).map(serde_json::to_value)
        };
        let typed = typed
            .unwrap_or_else(|e| panic!("{}: {e}: re-record ({RERECORD})", f.display()))
            .unwrap();
        assert!(
            typed == raw,
            "`{}` does not round-trip through today's record types: re-record ({RERECORD})",
            f.display()
        );
        // the redaction left no temporary folder of the recording behind
        assert!(!text.contains("ngcc-engine-test-"), "{}", f.display());
    }
}

/// The recorded run is the engine's: every step of `campaign.json` has its record, the
/// campaign's sandbox and warnings come through, and each fault is a failed KAT.
#[test]
fn faults_index_lists_the_engines_failures_and_nokat_apart() {
    let view = view();
    let files = report::render_campaign(&view);
    let md = crate::file(&files, "reports/index.md");
    let status = &md[md.find("## Status").unwrap()..md.find("## Per instance").unwrap()];
    let failed_end = status.find("### Timed out").unwrap_or(status.len());
    let failed = &status[status.find("### Failed").unwrap()..failed_end];
    let camp = campaign_record();
    for st in &camp.steps {
        if st.id.ends_with("/kat") && st.status == Status::Failed {
            assert!(
                failed.contains(&format!("`{} (", st.id)),
                "{} not in\n{failed}",
                st.id
            );
        }
    }
    // hang-dec timed out; the working fixtures' `all` KAT is NOKAT: never under "Failed"
    assert!(status.contains("### Timed out"), "{status}");
    for working in ["good", "own-keccak", "dead-keccak", "size-mismatch"] {
        assert!(
            !failed.contains(working),
            "{working} under failures:\n{failed}"
        );
        assert!(
            status.contains(&format!(
                "- `{working}/{working}/kat` (all): no expected hash"
            )),
            "{working} not under KAT not checked:\n{status}"
        );
    }
    insta::assert_snapshot!("faults_index_md", md);
}

/// Instances listed as timed and as not timed in a submission's report and appendix.
fn timed_and_not(md: &str, appendix: &str, inst: &str) -> (bool, bool) {
    // "- `a`, `b`: compiled with ..." lines after the appendix's "Objects timed" line
    let name = format!("`{inst}`");
    let timed = appendix
        .find("Objects timed, with the flags")
        .is_some_and(|at| {
            appendix[at..]
                .lines()
                .skip(2)
                .take_while(|l| l.starts_with("- "))
                .any(|l| {
                    l.split(": compiled with")
                        .next()
                        .is_some_and(|who| who.contains(&name))
                })
        });
    let not = md
        .find("Not timed:")
        .is_some_and(|at| md[at..].contains(&format!("- `{inst}` ")));
    (timed, not)
}

/// Every submission's report: an instance is "timed" exactly when it has an OK time record
/// and "not timed" otherwise, with the engine's skip reason; the sandbox row and the
/// environment warnings are the recorded ones.
#[test]
fn faults_submission_reports_say_what_the_engine_did() {
    let view = view();
    let camp = campaign_record();
    let env = &camp.environment;
    let sandbox = env
        .sandbox
        .as_ref()
        .expect("the recorded run names its sandbox (bwrap on the recording machine)");
    for sub in &view.submissions {
        let files = report::render_submission(&view, &sub.id);
        let md = crate::file(&files, &format!("reports/{}.md", sub.id));
        let appendix = crate::file(&files, &format!("reports/{}.appendix.md", sub.id));
        for w in &env.warnings {
            // (Markdown escapes `>` and `*`; the warnings quote neither)
            assert!(
                md.contains(&w.what),
                "{}: warning `{}` missing",
                sub.id,
                w.what
            );
        }
        assert!(
            appendix.contains(&format!(
                "| sandbox for submission code | {}: {}",
                sandbox.tool,
                sandbox.protections.join("; ")
            )),
            "{}: no sandbox row",
            sub.id
        );
        for inst in &sub.instances {
            let ok = inst
                .ops(StepKind::Time)
                .all(|(op, _)| inst.time_ok(op).is_some());
            let (timed, not) = timed_and_not(md, appendix, &inst.id);
            assert_eq!((timed, not), (ok, !ok), "{}/{}", sub.id, inst.id);
            if !ok {
                // the scheduler's reason for a step whose dependency failed or timed out
                let why = format!("skipped: `{}/{}/kat` failed: ", sub.id, inst.id);
                assert!(md.contains(&why), "{}: no skip reason `{why}`", sub.id);
            }
        }
        if ["good", "wrong-ss"].contains(&sub.id.as_str()) {
            insta::assert_snapshot!(format!("faults_{}_md", sub.id.replace('-', "_")), md);
            insta::assert_snapshot!(
                format!("faults_{}_appendix_md", sub.id.replace('-', "_")),
                appendix
            );
        }
    }
}
