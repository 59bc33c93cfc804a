//! `count` (per operation, parallel): instructions per operation, counted by valgrind's
//! callgrind on the build's valgrind object (see `valgrind_object.rs`).
//!
//! One contained process: `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no
//! --toggle-collect=<ns>crypto_kem_<op> --dump-after=<ns>crypto_kem_<op> … kem-runner count
//! --iters N`. The runner seeds the submission's KAT generator with a fixed seed, prepares the
//! inputs, turns callgrind's instrumentation on (so that no call of the preparation is
//! counted) and calls the operation N times; callgrind counts only inside the operation and
//! writes one profile per call, which [`crate::count`] parses into instructions per call and
//! inclusive shares. Counts are deterministic: same object, same seed, same counts.
//!
//! Without valgrind, or when valgrind cannot execute an instruction of the object, the step
//! is `unsupported` with the reason (no failure).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::runner_job::record;
use super::valgrind_object::{valgrind, valgrind_key};
use super::{exec, Done, KindSpec, RunnerJob, Step, StepError, Wrapper};
use crate::count::{self, valgrind_log, Declared};
use crate::graph::Node;
use crate::model::{Campaign, Op, StepSpec};
use crate::profile::DRNG_FAMILY;
use crate::record::{CountData, CountOutput, Status, StepData};
use crate::run::keys::{native, Facts};

/// The `count` kind: per instance and operation, parallel; its records under `count/`.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        _spec: &StepSpec,
        _facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        m.insert("kem-native".into(), native());
        m.insert("valgrind".into(), valgrind_key());
        let sub = &c.submissions[node.submission];
        // How callgrind counts (a record counted otherwise is counted again).
        m.insert(
            "callgrind".into(),
            tool_options("<ns>crypto_kem_<op>", Path::new(""))
                .into_iter()
                .filter(|o| !o.starts_with("--callgrind-out-file="))
                .collect::<Vec<_>>()
                .join(" "),
        );
        m.insert("kat rng".into(), sub.kat.rng.name().into());
        m.insert(
            "primitives".into(),
            format!("{:?}", sub.primitives.functions),
        );
        m.insert("drng".into(), super::build::drng_symbol(sub));
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }
}

/// callgrind's options for counting `function`, writing to `out_file` (`.1`, `.2`, … per call).
pub fn tool_options(function: &str, out_file: &Path) -> Vec<String> {
    vec![
        "--tool=callgrind".into(),
        "--vgdb=no".into(),
        // The runner turns instrumentation on after preparing the inputs: callgrind counts
        // calls on an arc even while collection is off, and those of the preparation
        // (keygen before enc) would land in the first profile (kem-native's `callgrind`).
        "--instr-atstart=no".into(),
        "--collect-atstart=no".into(),
        format!("--toggle-collect={function}"),
        format!("--dump-after={function}"),
        format!("--callgrind-out-file={}", out_file.display()),
    ]
}

fn run(step: &mut Step) -> Done {
    count(step).unwrap_or_else(Done::from)
}

fn unsupported(reason: String) -> Done {
    Done {
        status: Status::Unsupported,
        reason: Some(reason),
        data: None,
    }
}

fn count(step: &mut Step) -> Result<Done, StepError> {
    let ctx = step.ctx;
    let (_, build) = step.build()?;
    let Some(object) = build.valgrind_object.clone() else {
        return Err(StepError::NoVariant("valgrind"));
    };
    let Some(vg) = valgrind() else {
        return Ok(unsupported(
            "valgrind is not installed (Debian package `valgrind`); instructions not counted"
                .into(),
        ));
    };
    let op = step.node.op.expect("count is per operation");
    let iters = ctx.spec(step.node.kind).expect("declared").params.iters;
    let rng = step.submission().kat.rng.name();
    let function = format!("{}{}", build.namespace, op_c_name(op));
    let object = ctx.out.join(&object);
    let name = format!("count__{op}");
    let mut log = step.job_log(&name)?;
    let job = RunnerJob::new(step, "count", &object, &build)?;
    let tool_options = tool_options(&function, &job.scratch().join("callgrind.out"));
    let job = job
        .opt("op", op.name())
        .opt("rng", rng)
        .opt("iters", iters)
        .under(Wrapper {
            name: "valgrind",
            tool: "valgrind",
            program: vg.path.clone(),
            options: tool_options.clone(),
        });
    let finished = job.run(step, &mut log, &|_| {}, |step, out, scratch| {
        finish(step, &out, scratch, op)
    })?;
    let (output, profiles, kept) = match finished {
        Finished::Counted(o, p, k) => (o, p, k),
        Finished::Unsupported(reason) => return Ok(unsupported(reason)),
    };

    let sub = step.submission();
    let declared: Vec<Declared> = sub
        .primitives
        .functions
        .iter()
        .map(|f| Declared {
            symbol: f.symbol.clone(),
            family: f.family.clone(),
        })
        .chain([Declared {
            symbol: super::build::drng_symbol(sub),
            family: DRNG_FAMILY.into(),
        }])
        .collect();
    let s = count::summarize(&profiles, &declared, DRNG_FAMILY)?;
    let n = s.per_call.len() as f64;
    let reason = (!s.ambiguous.is_empty()).then(|| {
        format!(
            "shares are upper bounds: {} called both inside and outside a primitive",
            s.ambiguous.join(", ")
        )
    });
    step.artefacts.extend(kept.iter().cloned());
    Ok(Done {
        status: Status::Ok,
        reason,
        data: Some(StepData::Count(Box::new(CountData {
            output,
            valgrind: vg.version.clone(),
            tool_options: tool_options
                .into_iter()
                .filter(|o| !o.starts_with("--callgrind-out-file="))
                .collect(),
            object: ctx.rel(&object),
            excluded: super::valgrind_object::excluded_in(&build.valgrind_flags),
            flags: build.valgrind_flags.clone(),
            instructions_mean: s.per_call.iter().sum::<u64>() as f64 / n,
            instructions_min: s.per_call.iter().copied().min().unwrap_or(0),
            instructions_max: s.per_call.iter().copied().max().unwrap_or(0),
            per_call: s.per_call,
            hash_share: s.hash_share,
            drng_share: s.drng_share,
            family_shares: s.family_shares,
            calls_per_op: s.calls_per_op,
            nesting_ambiguous: s.ambiguous,
            profiles: kept,
        }))),
    })
}

fn op_c_name(op: Op) -> &'static str {
    match op {
        Op::Keygen => "crypto_kem_keypair",
        Op::Enc => "crypto_kem_enc",
        Op::Dec => "crypto_kem_dec",
    }
}

enum Finished {
    /// The runner's record, the parsed profiles, and where they were kept.
    Counted(CountOutput, Vec<count::Profile>, Vec<PathBuf>),
    Unsupported(String),
}

/// Read the run's outcome: the runner's record and one callgrind profile per call, kept
/// under `count/<sub>/<instance>__<op>/`.
fn finish(
    step: &mut Step,
    out: &exec::Output,
    scratch: &Path,
    op: Op,
) -> Result<Finished, StepError> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(u) = valgrind_log::unhandled(&stderr) {
        return Ok(Finished::Unsupported(format!(
            "{}; instructions not counted",
            u.describe()
        )));
    }
    let output: CountOutput = record(step, out, op, Some("valgrind"))?;
    let keep = step
        .ctx
        .out
        .join("count")
        .join(&step.submission().id)
        .join(format!("{}__{op}", step.instance().id));
    crate::safe_fs::tree::remove_tree(&keep).map_err(StepError::io(&keep))?;
    std::fs::create_dir_all(&keep).map_err(StepError::io(&keep))?;
    let mut profiles = Vec::new();
    let mut kept = Vec::new();
    for i in 1..=output.iters {
        let name = format!("callgrind.out.{i}");
        let from = scratch.join(&name);
        // A file the KEM could have replaced: no link followed, no FIFO or device read.
        let to = keep.join(&name);
        let bytes =
            crate::safe_fs::keep(&from, &to, crate::safe_fs::OUTPUT_CAP).map_err(|source| {
                StepError::MissingProfile {
                    call: i,
                    of: output.iters,
                    source,
                }
            })?;
        let p = count::parse(&String::from_utf8_lossy(&bytes)).map_err(|e| StepError::Parse {
            what: name.clone(),
            source: e.into(),
        })?;
        profiles.push(p);
        kept.push(step.ctx.rel(&to));
    }
    if std::fs::symlink_metadata(scratch.join(format!("callgrind.out.{}", output.iters + 1)))
        .is_ok()
    {
        return Err(StepError::ExtraProfiles(output.iters));
    }
    Ok(Finished::Counted(output, profiles, kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_inside_the_operation() {
        let o = tool_options("NS_crypto_kem_enc", Path::new("/s/callgrind.out"));
        assert!(o.contains(&"--collect-atstart=no".to_string()));
        assert!(o.contains(&"--instr-atstart=no".to_string()));
        assert!(o.contains(&"--toggle-collect=NS_crypto_kem_enc".to_string()));
        assert!(o.contains(&"--dump-after=NS_crypto_kem_enc".to_string()));
        assert!(o.contains(&"--callgrind-out-file=/s/callgrind.out".to_string()));
    }
}
