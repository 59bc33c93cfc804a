//! The machine-readable results, derived from a [`CampaignView`]: [`Results::from_view`]
//! and the per-instance figures the reports share with it. The types and their JSON form
//! (`reports/results.json`) are in [`super::schema`].

use crate::measure::stats;
use crate::model::{Op, StepKind};
use crate::record::{Status, StepRecord};

use super::integrity::Untrusted;
pub use super::schema::{
    KatModeStatus, ResultCt, ResultInstance, ResultOp, ResultSubmission, Results, RESULTS_SCHEMA,
    RESULTS_SCHEMA_DOC,
};
use super::view::{self, CampaignView, InstanceView};

/// Families that are ciphers (AES): the reports show them in a column of their own rather
/// than under hash/XOF.
pub(crate) const CIPHER_FAMILIES: [&str; 1] = ["aes"];

/// The share of the cipher families in a profile, when the profile lists one of them.
fn cipher_share(p: &crate::record::ProfileData) -> Option<f64> {
    let shares: Vec<f64> = p
        .family_shares
        .iter()
        .filter(|(f, _)| CIPHER_FAMILIES.contains(&f.as_str()))
        .map(|(_, s)| *s)
        .collect();
    (!shares.is_empty()).then(|| shares.iter().sum())
}

/// KAT status of an instance as one word (see [`RESULTS_SCHEMA_DOC`]).
pub fn kat_word(inst: &InstanceView) -> Option<String> {
    let r = inst.record(StepKind::Kat)?;
    match view::kat_data(r).and_then(|d| d.modes.iter().map(|m| m.status).max()) {
        Some(worst) => Some(worst.name().to_string()),
        None => Some(r.status.name().to_string()),
    }
}

/// The verdict cell of one record: the step's verdict, or `not checked: why`.
pub fn ct_verdict(r: Option<&StepRecord>) -> String {
    match r {
        Some(r) => match (&r.data, r.status) {
            (Some(crate::record::StepData::Ct(d)), Status::Ok) => d.verdict.clone(),
            _ => format!("not checked: {}", super::format::status_text(r)),
        },
        None => "not checked: no record".to_string(),
    }
}

/// The variable-latency cell of one record: the scan's verdict, `not scanned (...)` for a
/// record from before the scan, or `not checked` when the step did not run.
pub fn ct_latency(r: Option<&StepRecord>) -> String {
    match r.filter(|r| r.status == Status::Ok).map(|r| &r.data) {
        Some(Some(crate::record::StepData::Ct(d))) => match &d.latency {
            Some(l) => crate::ct::latency::outcome(l),
            None => "not scanned (a record from before the scan)".to_string(),
        },
        _ => "not checked".to_string(),
    }
}

/// The constant-time verdict of one operation's record; `not trusted: why` in place of a
/// verdict when the operation's figures contradict each other.
fn result_ct(op: Op, r: Option<&StepRecord>, untrusted: Option<&Untrusted>) -> ResultCt {
    let data = r
        .filter(|r| r.status == Status::Ok)
        .and_then(|r| match &r.data {
            Some(crate::record::StepData::Ct(d)) => Some(d),
            _ => None,
        });
    let counts = data.and_then(|d| d.variable_latency());
    ResultCt {
        op,
        verdict: match untrusted {
            Some(u) if data.is_some() => u.mark(),
            _ => ct_verdict(r),
        },
        untrusted: untrusted.map(Untrusted::reason),
        locations: data.map(|d| crate::ct::unexplained(&d.findings)),
        benign: data.map(|d| d.findings.len() - crate::ct::unexplained(&d.findings)),
        latency_verdict: data.map(|_| ct_latency(r)),
        variable_latency: counts.map(|(own, _)| own),
        variable_latency_provided: counts.map(|(_, provided)| provided),
    }
}

/// pk/sk/ct/ss shown for an instance: the sizes record's `shown`, else api.h from the build.
pub fn shown_sizes(inst: &InstanceView) -> [Option<u64>; 4] {
    if let Some(s) = inst.record(StepKind::Sizes).and_then(view::sizes_data) {
        let sh = s.shown;
        return [sh.pk, sh.sk, sh.ct, sh.ss];
    }
    if let Some(b) = inst.record(StepKind::Build).and_then(view::build_data) {
        return [
            Some(b.api.pk),
            Some(b.api.sk),
            Some(b.api.ct),
            Some(b.api.ss),
        ];
    }
    [None; 4]
}

/// Static ELF bytes: the build record's figure, else a timing record's.
pub fn static_bytes(inst: &InstanceView) -> Option<u64> {
    inst.record(StepKind::Build)
        .and_then(view::build_data)
        .and_then(|b| b.static_bytes)
        .or_else(|| {
            inst.ops(StepKind::Time)
                .filter_map(|(_, r)| r.and_then(view::time_data))
                .find_map(|t| t.static_bytes)
        })
}

/// Calls per operation with the DRNG symbol shown as `drng` (as the seeds do).
pub fn calls_named(p: &crate::record::ProfileData) -> Vec<(String, f64)> {
    p.calls_per_op
        .iter()
        .map(|(sym, n)| {
            let is_drng = p
                .output
                .symbols
                .iter()
                .any(|s| &s.symbol == sym && s.family == "drng");
            (
                if is_drng {
                    "drng".to_string()
                } else {
                    sym.clone()
                },
                *n,
            )
        })
        .collect()
}

fn result_op(inst: &InstanceView, op: Op) -> ResultOp {
    let rec = inst
        .ops(StepKind::Time)
        .find(|(o, _)| *o == op)
        .and_then(|(_, r)| r);
    let t = inst.time_ok(op);
    let s = t.map(|t| &t.summary);
    let p = inst.profile_ok(op);
    let n = inst.count_ok(op);
    let y = t
        .and_then(|t| t.rounds.as_ref())
        .and_then(|r| r.yardstick.as_ref());
    ResultOp {
        op,
        status: rec.map(|r| r.status),
        reason: rec.and_then(|r| r.reason.clone()),
        mean_cycles: s.map(|s| s.mean_cycles),
        mean_ns: s.map(|s| s.mean_ns),
        ops_per_s: s.map(|s| s.ops_per_s),
        median_trial_ns: s.map(|s| s.median_trial_ns),
        median_trial_cycles: s.map(|s| s.median_trial_cycles),
        trials: s.map(|s| s.trials),
        iters: s.map(|s| s.iters),
        cv: s.map(|s| s.cv),
        // In rounds: the CI wider than the precision (also for records from before that
        // rule); a block of trials: its CV flag.
        unstable: t.map(|t| match &t.rounds {
            Some(r) => !r.reached,
            None => t.summary.unstable,
        }),
        min_cycles: s.map(|s| s.min_cycles),
        q1_cycles: s.map(|s| s.q1_cycles),
        q3_cycles: s.map(|s| s.q3_cycles),
        max_cycles: s.map(|s| s.max_cycles),
        trial_cycles: t
            .map(|t| stats::per_op_cycles(&t.output))
            .unwrap_or_default(),
        baseline_rss_kib: t.and_then(|t| t.output.memory.baseline_rss_kib),
        peak_rss_kib: t.and_then(|t| t.output.memory.peak_rss_kib),
        stack_bytes: t.and_then(|t| t.output.memory.stack_bytes),
        hash_share: p.map(|p| p.hash_share),
        cipher_share: p.and_then(cipher_share),
        drng_share: p.map(|p| p.drng_share),
        calls_per_op: p.map(calls_named).unwrap_or_default(),
        counter_ghz: s.and_then(|s| s.counter_ghz),
        median_cycles: s.and_then(|s| s.median_cycles),
        ci_low_cycles: s.and_then(|s| s.ci_low_cycles),
        ci_high_cycles: s.and_then(|s| s.ci_high_cycles),
        rounds: s.and_then(|s| s.rounds),
        interfered_rounds: s.and_then(|s| s.interfered_rounds),
        instructions: n.map(|n| n.instructions_mean),
        cycles_per_instruction: inst.cycles_per_instruction(op).map(|(x, _)| x),
        hash_share_instr: n.map(|n| n.hash_share),
        drng_share_instr: n.map(|n| n.drng_share),
        yardstick_cycles: y.map(|y| y.estimate.median),
        per_yardstick: y.map(|y| y.relative.median),
        yardstick_id: y.map(crate::record::rounds::Yardstick::id),
        yardstick_trial_cycles: y.map(|y| y.values.clone()).unwrap_or_default(),
        interfered_trials: t.and_then(|t| t.rounds.as_ref()).map(|r| {
            (0..r.interference.len() as u32)
                .filter(|&i| !r.interference[i as usize].is_empty())
                .collect()
        }),
        used_trials: t
            .and_then(|t| t.rounds.as_ref())
            .filter(|r| !r.used.is_empty())
            .map(|r| r.used.clone()),
        trial_processes: (t.and_then(|t| t.rounds.as_ref()))
            .map(|r| r.processes.clone())
            .unwrap_or_default(),
        uncontended_share: t
            .and_then(|t| t.rounds.as_ref())
            .and_then(|r| r.host.as_ref())
            .filter(|h| h.two_states)
            .map(|h| {
                h.batches.chars().filter(|&c| c == 'u').count() as f64
                    / h.batches.len().max(1) as f64
            }),
        timing_flags: t
            .and_then(|t| t.rounds.as_ref())
            .map(|r| r.flags.clone())
            .unwrap_or_default(),
        untrusted: inst.untrusted(op).as_ref().map(Untrusted::reason),
    }
}

/// Operations listed for an instance: the time step's, then any profile-only ones.
pub fn instance_ops(inst: &InstanceView) -> Vec<Op> {
    let mut ops: Vec<Op> = inst.ops(StepKind::Time).map(|(o, _)| o).collect();
    for (o, _) in inst.ops(StepKind::Profile).chain(inst.ops(StepKind::Count)) {
        if !ops.contains(&o) {
            ops.push(o);
        }
    }
    ops
}

impl Results {
    /// Derive the results of a view.
    pub fn from_view(view: &CampaignView) -> Results {
        let submissions = view
            .submissions
            .iter()
            .map(|sub| ResultSubmission {
                id: sub.id.clone(),
                algorithm: sub.meta.algorithm.clone(),
                instances: sub
                    .instances
                    .iter()
                    .map(|inst| {
                        let [pk, sk, ct, ss] = shown_sizes(inst);
                        ResultInstance {
                            id: inst.id.clone(),
                            implementation: inst.is_cell().then(|| inst.manifest_id().to_string()),
                            compiler: inst.compiler().map(str::to_string),
                            level: inst.level,
                            nist_category: inst.nist_category,
                            kat: kat_word(inst),
                            kat_modes: inst
                                .record(StepKind::Kat)
                                .and_then(view::kat_data)
                                .map(|d| {
                                    d.modes
                                        .iter()
                                        .map(|m| KatModeStatus {
                                            mode: m.mode.name().to_string(),
                                            status: m.status,
                                        })
                                        .collect()
                                })
                                .unwrap_or_default(),
                            build_flags: inst
                                .record(StepKind::Build)
                                .and_then(view::build_data)
                                .map(|b| b.flags_profile.clone())
                                .or_else(|| inst.flags_profile(&view.build_flags)),
                            static_bytes: static_bytes(inst),
                            layouts: inst
                                .record(StepKind::Build)
                                .and_then(view::build_data)
                                .map(|b| 1 + b.layouts.len() as u32),
                            pk,
                            sk,
                            ct,
                            ss,
                            survey: inst
                                .record(StepKind::Survey)
                                .and_then(view::survey_data)
                                .map(|s| s.verdict.name().to_string()),
                            ops: instance_ops(inst)
                                .into_iter()
                                .map(|op| result_op(inst, op))
                                .collect(),
                            constant_time: inst
                                .ops(StepKind::Ct)
                                .map(|(op, r)| result_ct(op, r, inst.untrusted(op).as_ref()))
                                .collect(),
                        }
                    })
                    .collect(),
            })
            .collect();
        Results {
            schema: RESULTS_SCHEMA.to_string(),
            system: view.system.clone(),
            arch: view.arch.clone(),
            started: view.campaign.as_ref().map(|c| c.started.clone()),
            finished: view.campaign.as_ref().and_then(|c| c.finished.clone()),
            environment: view.environment().cloned(),
            submissions,
        }
    }
}
