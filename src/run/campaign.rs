//! A run's campaign record, `campaign.json`: its header (command, environment, tool) made when
//! the run begins, its steps and time span read from the step records, and the file written
//! once, when the run ends ([`finish`]). While the run goes on, the report and index steps
//! see the same record from the records so far ([`current`], through [`Ctx::campaign_header`]),
//! so each report is rendered once per run: by its step, or at the end when its step did not
//! run this time (not selected, skipped) although other steps ran.

use std::collections::BTreeSet;
use std::path::PathBuf;

use petgraph::graph::NodeIndex;

use super::{Ctx, Summary};
use crate::error::Error;
use crate::model::StepKind;
use crate::record::{self, CampaignRecord, CampaignStep, Status, RECORD_SCHEMA};

/// A run that has begun: the record the last run left and this run's header.
pub struct Begun {
    path: PathBuf,
    previous: Option<CampaignRecord>,
}

/// What the end of a run did.
pub struct End {
    /// The run ran nothing and found every step as the last run left it: `campaign.json`
    /// keeps the last run's command, environment and times, with `ran` false everywhere.
    pub unchanged: bool,
}

/// Make the run's header (start now, no steps yet) and keep it in `ctx` for the report and
/// index steps; read the record the last run left, to tell at the end whether anything
/// changed.
pub fn begin(ctx: &Ctx) -> Begun {
    // What the jobs of a run that was killed left in their scratch folders (named by
    // nothing of the job, so not found again by name): this run holds the outputs' lock.
    let _ = crate::safe_fs::tree::remove_tree(&ctx.out.join("scratch"));
    let path = ctx.out.join("campaign.json");
    let previous = record::read_json(&path).ok().flatten();
    let header = CampaignRecord {
        schema: RECORD_SCHEMA,
        system: ctx.campaign.system.name.clone(),
        arch: ctx.campaign.system.arch.clone(),
        pipeline: ctx.campaign.pipeline_path.clone(),
        command: std::env::args().collect(),
        started: super::utc_now(),
        finished: None,
        environment: ctx.env.clone(),
        env_fingerprint: ctx.facts.env_fingerprint.clone(),
        steps: Vec::new(),
        tool: Some(crate::tool_version()),
        role: ctx.campaign.system.role,
    };
    let _ = ctx.campaign_header.set(header);
    Begun { path, previous }
}

/// The campaign record as the step records say now: `header` with every planned step that
/// has a record, in execution order (`ran` for those `ran` names), and the campaign's start
/// and end those of its evidence: the earliest start and the latest end among the records,
/// whichever invocation wrote them (a re-run that finds everything up to date does not move
/// them). Without a dated record the header's start stands, and the end is `now` when given.
pub fn current(
    ctx: &Ctx,
    header: &CampaignRecord,
    ran: &BTreeSet<NodeIndex>,
    now: Option<String>,
) -> CampaignRecord {
    let mut rec = header.clone();
    let mut span: Option<(String, String)> = None;
    for ix in ctx.plan.execution_order() {
        let node = ctx.node(ix);
        let Some(r) = ctx.read_record(node) else {
            continue;
        };
        if r.status != Status::Skipped && !r.started.is_empty() {
            span = Some(match span {
                None => (r.started.clone(), r.finished.clone()),
                Some((a, b)) => (a.min(r.started.clone()), b.max(r.finished.clone())),
            });
        }
        rec.steps.push(CampaignStep {
            id: node.id.clone(),
            status: r.status,
            reason: r.reason,
            record: ctx.rel(&ctx.record_path(node)),
            ran: ran.contains(&ix),
        });
    }
    match span {
        Some((a, b)) => {
            rec.started = a;
            rec.finished = Some(b);
        }
        None => rec.finished = now,
    }
    rec
}

/// The campaign record for a report or index step while the run goes on: the run's header
/// with the records so far; `None` outside a run (the step then reads `campaign.json`).
pub fn for_reports(ctx: &Ctx) -> Option<CampaignRecord> {
    let header = ctx.campaign_header.get()?;
    Some(current(ctx, header, &BTreeSet::new(), None))
}

/// End the run: write `campaign.json` once, from the records, and render the reports whose
/// step did not run this time when anything else did (so `--only` on the time steps still
/// leaves reports that show the new figures).
pub fn finish(ctx: &Ctx, begun: Begun, summary: &Summary) -> Result<End, Error> {
    let header = ctx
        .campaign_header
        .get()
        .expect("campaign::begin sets the header before the steps run");
    let ran: BTreeSet<NodeIndex> = summary
        .outcomes
        .iter()
        .filter(|(_, o)| o.ran)
        .map(|(&ix, _)| ix)
        .collect();
    let mut rec = current(ctx, header, &ran, Some(super::utc_now()));
    let unchanged = !summary.interrupted
        && ran.is_empty()
        && ctx.out.join("reports").is_dir()
        && begun.previous.as_ref().is_some_and(|p| {
            p.steps.len() == rec.steps.len()
                && p.steps
                    .iter()
                    .zip(&rec.steps)
                    .all(|(a, b)| (&a.id, a.status, &a.reason) == (&b.id, b.status, &b.reason))
        });
    if let (true, Some(mut p)) = (unchanged, begun.previous) {
        for st in &mut p.steps {
            st.ran = false;
        }
        rec = p;
        // the role is the pipeline's, not evidence: a changed `role` applies at once
        rec.role = ctx.campaign.system.role;
    }
    record::write_json(&begun.path, &rec).map_err(Error::io(begun.path.display()))?;
    if ctx.spec(StepKind::Report).is_some() && !summary.interrupted && !unchanged {
        if let Err(e) = render_the_rest(ctx, &ran) {
            eprintln!("warning: reports not rendered: {e}");
        }
    }
    Ok(End { unchanged })
}

/// Render the reports of submissions whose report step did not run, and the campaign's files
/// when its index step did not.
fn render_the_rest(ctx: &Ctx, ran: &BTreeSet<NodeIndex>) -> std::io::Result<()> {
    let mut rendered = BTreeSet::new();
    let mut index = true;
    for ix in ctx.plan.execution_order() {
        let node = ctx.node(ix);
        match node.kind {
            StepKind::Report if ran.contains(&ix) => {
                rendered.insert(node.submission);
            }
            StepKind::Index if ran.contains(&ix) => index = false,
            _ => {}
        }
    }
    let view = crate::report::CampaignView::load(&ctx.campaign, &ctx.out)?;
    let mut files = Vec::new();
    for (i, s) in ctx.campaign.submissions.iter().enumerate() {
        if !rendered.contains(&i) {
            files.extend(crate::report::render_submission(&view, &s.id));
        }
    }
    if index {
        files.extend(crate::report::render_campaign(&view));
    }
    crate::report::write_all(&ctx.out, &files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::campaign;
    use crate::run::scheduler::Outcome;
    use crate::run::test_ctx::{ctx, write};

    /// Every node's record written, the n-th started at second n and finished a second later;
    /// the first one as a skip (its times do not count).
    fn write_dated(ctx: &Ctx) -> Vec<NodeIndex> {
        let order = ctx.plan.execution_order();
        for (n, &ix) in order.iter().enumerate() {
            let status = if n == 0 { Status::Skipped } else { Status::Ok };
            let mut rec = write(ctx, &ctx.node(ix).id, status, None);
            rec.started = format!("2026-12-03T06:00:{:02}Z", 10 + n);
            rec.finished = format!("2026-12-03T06:00:{:02}Z", 11 + n);
            record::write_json(&ctx.record_path(ctx.node(ix)), &rec).unwrap();
        }
        order
    }

    fn summary(ran: &[NodeIndex]) -> Summary {
        Summary {
            outcomes: ran
                .iter()
                .map(|&ix| {
                    let o = Outcome {
                        status: Status::Ok,
                        reason: None,
                        ran: true,
                        soft: false,
                        log: None,
                    };
                    (ix, o)
                })
                .collect(),
            interrupted: false,
            stopped_early: false,
        }
    }

    #[test]
    fn the_record_is_the_records_span_and_steps_written_once_at_the_end() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = ctx(campaign(2), tmp.path());
        let path = tmp.path().join("campaign.json");
        assert!(for_reports(&ctx).is_none(), "no header outside a run");
        let begun = begin(&ctx);
        assert!(!path.exists(), "begin writes nothing");
        let order = write_dated(&ctx);
        let n = order.len();
        // While the run goes on: every record, `ran` nowhere, the span of the dated ones.
        let now = for_reports(&ctx).expect("a run's header");
        assert_eq!(now.steps.len(), n);
        assert!(now.steps.iter().all(|s| !s.ran));
        assert_eq!(now.started, "2026-12-03T06:00:11Z");
        assert_eq!(
            now.finished.as_deref(),
            Some(format!("2026-12-03T06:00:{:02}Z", 10 + n).as_str())
        );
        let end = finish(&ctx, begun, &summary(&order[1..2])).unwrap();
        assert!(!end.unchanged);
        let rec: CampaignRecord = record::read_json(&path).unwrap().unwrap();
        let ran: Vec<bool> = rec.steps.iter().map(|s| s.ran).collect();
        assert_eq!(ran.iter().filter(|&&r| r).count(), 1);
        assert!(ran[1]);
        assert_eq!((rec.started, rec.finished), (now.started, now.finished));
    }

    #[test]
    fn a_run_that_ran_nothing_keeps_the_last_runs_record() {
        let tmp = tempfile::tempdir().unwrap();
        let first = ctx(campaign(2), tmp.path());
        let begun = begin(&first);
        let order = write_dated(&first);
        finish(&first, begun, &summary(&order)).unwrap();
        std::fs::create_dir_all(tmp.path().join("reports")).unwrap();
        let before: CampaignRecord = record::read_json(&tmp.path().join("campaign.json"))
            .unwrap()
            .unwrap();
        let again = ctx(campaign(2), tmp.path());
        let begun = begin(&again);
        let end = finish(&again, begun, &summary(&[])).unwrap();
        assert!(end.unchanged);
        let after: CampaignRecord = record::read_json(&tmp.path().join("campaign.json"))
            .unwrap()
            .unwrap();
        assert_eq!(after.command, before.command);
        assert_eq!(after.started, before.started);
        assert!(after.steps.iter().all(|s| !s.ran));
        assert_eq!(after.steps.len(), before.steps.len());
    }
}
