//! `profile` (exclusive): run each operation on the wrapped object and attribute its
//! cycles to the declared hash/XOF/cipher functions and to the DRNG.
//!
//! The measurement is repeated [`REPEATS`] times (one runner process each); the record's
//! figures are those of the repeat with the median hash share, every repeat is kept, and
//! a wrapped total per operation (wrapper cost taken out) that differs from the timed
//! cycles of the same operation by more than [`MAX_DISAGREEMENT`] is flagged.

use std::collections::BTreeMap;
use std::time::Duration;

use petgraph::graph::NodeIndex;

use super::{runner_job, Done, KindSpec, Step, StepError};
use crate::graph::Node;
use crate::model::{Campaign, StepKind, StepSpec};
use crate::record::{ProfileData, ProfileOutput, ProfileRepeat, Status, StepData};
use crate::run::keys::Facts;
use crate::run::Ctx;

/// The `profile` kind: per instance and operation, exclusive; its records under `profile/`.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        spec: &StepSpec,
        facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        super::time::measurement_inputs(c, facts, m);
        if let Some(n) = super::instance_settings(c, spec, node).and_then(|s| s.iters) {
            m.insert("iters".into(), n.to_string());
        }
    }

    fn estimate(&self, ctx: &Ctx, ix: NodeIndex) -> Option<Duration> {
        let node = ctx.node(ix);
        let iters = iters_of(ctx, node)?;
        super::time::measured_ns(ctx, node)
            .map(|ns| Duration::from_secs_f64(ns * 1e-9 * iters as f64 * 2.0 + 0.05))
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }
}

/// Calls per profile run of `node`'s instance (its `instances` setting, else the step's).
fn iters_of(ctx: &Ctx, node: &Node) -> Option<u64> {
    let spec = ctx.spec(node.kind)?;
    let sub = ctx.submission(node);
    Some(
        ctx.instance(node)
            .map_or(spec.params.iters, |i| spec.iters_for(&sub.id, &i.id)),
    )
}

/// Profile runs per operation.
pub const REPEATS: usize = 5;

/// Largest relative difference between the wrapped total and the timed cycles not flagged.
pub const MAX_DISAGREEMENT: f64 = 0.10;

fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let (_, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return e.into(),
    };
    let Some(prof) = build.profile_object.clone() else {
        return StepError::NoVariant("profile").into();
    };
    if let Some(crate::record::StepData::Kat(k)) = ctx
        .sibling_record(step.node, crate::model::StepKind::Kat)
        .and_then(|r| r.data)
    {
        if k.profile_object_kat.as_ref().is_some_and(|p| !p.equal) {
            return StepError::ProfileKatDiffers.into();
        }
    }
    let iters = iters_of(ctx, step.node).expect("declared");
    let extra = ["--iters".to_string(), iters.to_string()];
    let mut runs: Vec<ProfileOutput> = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        match runner_job(step, "profile", &ctx.out.join(&prof), &build, &extra) {
            Ok((o, _)) => runs.push(o),
            Err(e) => return e.into(),
        }
    }
    let summaries: Vec<_> = runs.iter().map(crate::profile::summarize).collect();
    let repeats: Vec<ProfileRepeat> = runs
        .iter()
        .zip(&summaries)
        .map(|(o, s)| ProfileRepeat {
            hash_share: s.hash_share,
            drng_share: s.drng_share,
            cycles_per_op: crate::profile::unwrapped_cycles_per_op(o),
        })
        .collect();
    let hash: Vec<f64> = repeats.iter().map(|r| r.hash_share).collect();
    let mid = crate::profile::median_index(&hash).expect("REPEATS > 0");
    let wrapped: Vec<f64> = repeats.iter().filter_map(|r| r.cycles_per_op).collect();
    let timed = timed_cycles(step);
    let wrapped_over_timed = match (crate::measure::stats::median(&wrapped), timed) {
        (Some(w), Some(t)) if t > 0.0 => Some(w / t),
        _ => None,
    };
    let reason = wrapped_over_timed
        .filter(|r| (r - 1.0).abs() > MAX_DISAGREEMENT)
        .map(|r| {
            format!(
                "wrapped total per operation differs from the timed cycles by {:+.1}% (> {:.0}%): \
                 shares may not describe the timed code",
                (r - 1.0) * 100.0,
                MAX_DISAGREEMENT * 100.0
            )
        });
    let summary = summaries.into_iter().nth(mid).expect("one summary per run");
    let output = runs.swap_remove(mid);
    Done {
        status: Status::Ok,
        reason,
        data: Some(StepData::Profile(ProfileData {
            output,
            hash_share: summary.hash_share,
            drng_share: summary.drng_share,
            family_shares: summary.family_shares,
            calls_per_op: summary.calls_per_op,
            environment: ctx.env_of(step.ix),
            repeats,
            wrapped_over_timed,
        })),
    }
}

/// Timed cycles per operation of the same instance and operation: the session median, else
/// the mean; `None` without an ok time record.
fn timed_cycles(step: &Step) -> Option<f64> {
    let sub = &step.submission().id;
    let path = step.ctx.out.join(crate::record::record_path(
        StepKind::Time,
        sub,
        Some(&step.instance().id),
        step.node.op,
    ));
    let rec: crate::record::StepRecord = crate::record::read_json(&path).ok().flatten()?;
    match rec.data {
        Some(StepData::Time(t)) if rec.status == Status::Ok => {
            Some(t.summary.median_cycles.unwrap_or(t.summary.mean_cycles))
        }
        _ => None,
    }
}
