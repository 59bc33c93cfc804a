//! `count` (per operation, parallel): instructions per operation, counted by valgrind's
//! callgrind on the build's valgrind object (see `valgrind_object.rs`).
//!
//! One contained process: `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect=<ns>crypto_kem_<op> --dump-after=<ns>crypto_kem_<op> … kem-runner count
//! --iters N`. The runner seeds the submission's KAT generator with a fixed seed, prepares the
//! inputs and calls the operation N times; callgrind counts only inside the operation and
//! writes one profile per call, which [`crate::count`] parses into instructions per call and
//! inclusive shares. Counts are deterministic: same object, same seed, same counts.
//!
//! Without valgrind, or when valgrind cannot execute an instruction of the object, the step
//! is `unsupported` with the reason (no failure).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::valgrind_object::valgrind;
use super::{exec, parse_runner, Done, KindSpec, Step, Stop};
use crate::count::{self, valgrind_log, Declared};
use crate::graph::Node;
use crate::model::{Campaign, KatRng, Op, StepKind, StepScope, StepSpec};
use crate::profile::DRNG_FAMILY;
use crate::record::{CountData, CountOutput, Status, StepData, StepRecord};
use crate::run::keys::{native, Facts};

/// The `count` kind: per instance and operation, parallel; its records under `count/`.
pub struct Kind;

impl KindSpec for Kind {
    fn name(&self) -> &'static str {
        "count"
    }

    fn scope(&self) -> StepScope {
        StepScope::Operation
    }

    fn data_needs(&self) -> &'static [StepKind] {
        &[StepKind::Build]
    }

    fn props(&self) -> &'static [&'static str] {
        &["ops", "iters", "memory"]
    }

    fn record_dir(&self) -> &'static str {
        "count"
    }

    /// Counts depend on the object (the build's key), the runner, valgrind and the
    /// submission's KAT generator; not on the machine's load or timing environment.
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        _spec: &StepSpec,
        _facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        m.insert("kem-native".into(), native());
        m.insert(
            "valgrind".into(),
            valgrind()
                .map_or("not installed", |v| v.version.as_str())
                .to_string(),
        );
        let sub = &c.submissions[node.submission];
        m.insert("kat rng".into(), rng_name(sub.kat.rng).into());
        m.insert(
            "primitives".into(),
            format!("{:?}", sub.primitives.functions),
        );
        m.insert("drng".into(), super::build::drng_symbol(sub));
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }

    fn evidence(&self, rec: &StepRecord, op: Option<Op>, path: PathBuf) -> Vec<(String, PathBuf)> {
        vec![(
            format!(
                "instruction count {} ({})",
                op.map_or("", Op::name),
                rec.status.name()
            ),
            path,
        )]
    }
}

fn rng_name(rng: KatRng) -> &'static str {
    match rng {
        KatRng::Nist => "nist",
        KatRng::Hqc => "hqc",
    }
}

/// callgrind's options for counting `function`, writing to `out_file` (`.1`, `.2`, … per call).
pub fn tool_options(function: &str, out_file: &Path) -> Vec<String> {
    vec![
        "--tool=callgrind".into(),
        "--vgdb=no".into(),
        "--collect-atstart=no".into(),
        format!("--toggle-collect={function}"),
        format!("--dump-after={function}"),
        format!("--callgrind-out-file={}", out_file.display()),
    ]
}

fn run(step: &mut Step) -> Done {
    match count(step) {
        Ok(d) => d,
        Err(stop) => stop.into(),
    }
}

fn unsupported(reason: String) -> Done {
    Done {
        status: Status::Unsupported,
        reason: Some(reason),
        data: None,
    }
}

fn count(step: &mut Step) -> Result<Done, Stop> {
    let ctx = step.ctx;
    let (_, build) = step.build().map_err(Stop::failed)?;
    let Some(object) = build.valgrind_object.clone() else {
        return Err(Stop::failed("the build made no valgrind object"));
    };
    let Some(vg) = valgrind() else {
        return Ok(unsupported(
            "valgrind is not installed (Debian package `valgrind`); instructions not counted"
                .into(),
        ));
    };
    let op = step.node.op.expect("count is per operation");
    let iters = ctx.spec(step.node.kind).expect("declared").params.iters;
    let rng = rng_name(step.submission().kat.rng);
    let function = format!("{}{}", build.namespace, op_c_name(op));
    let object = ctx.out.join(&object);
    let scratch = step.scratch(&format!("count__{op}"))?;
    let mut args = tool_options(&function, &scratch.join("callgrind.out"));
    let tool_options = args.clone();
    args.push(ctx.runner.display().to_string());
    args.extend([
        "count".into(),
        "--lib".into(),
        object.display().to_string(),
        "--api".into(),
        std::path::absolute(&build.api_h)
            .unwrap_or_else(|_| build.api_h.clone())
            .display()
            .to_string(),
        "--ns".into(),
        build.namespace.clone(),
        "--op".into(),
        op.name().to_string(),
        "--rng".into(),
        rng.into(),
        "--iters".into(),
        iters.to_string(),
    ]);
    let log_rel = Path::new("logs")
        .join(step.slug())
        .join(format!("count__{op}.log"));
    let mut log = step
        .open_log(log_rel)
        .map_err(|e| Stop::failed(e.to_string()))?;
    let jail = step.runner_jail(&object, &build.api_h, &scratch);
    let out = step.exec_contained(&vg.path, &args, &jail, &mut log, &|_| {});
    let result = out
        .map_err(|e| Stop::failed(format!("cannot run valgrind: {e}")))
        .and_then(|out| finish(step, &out, &scratch, op));
    step.drop_scratch(&scratch);
    let (output, profiles, kept) = match result? {
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
    let s = count::summarize(&profiles, &declared, DRNG_FAMILY).map_err(Stop::failed)?;
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
fn finish(step: &mut Step, out: &exec::Output, scratch: &Path, op: Op) -> Result<Finished, Stop> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(u) = valgrind_log::unhandled(&stderr) {
        return Ok(Finished::Unsupported(format!(
            "{}; instructions not counted",
            u.describe()
        )));
    }
    let output: CountOutput = match &out.exit {
        exec::Exit::Code(0) => parse_runner(out).map_err(Stop::failed)?,
        exec::Exit::TimedOut => return Err(Stop::timed_out(step.timeout_text())),
        exec::Exit::Code(1) => {
            let rec: Result<CountOutput, _> = parse_runner(out);
            return Err(Stop::failed(match rec {
                Ok(CountOutput {
                    failure: Some(f), ..
                }) => format!("{op}: {f}"),
                _ => format!("{op}: exit code 1; {}", exec::tail(&out.stderr, 3)),
            }));
        }
        other => {
            return Err(Stop::failed(format!(
                "{op} under valgrind: {} ({}); {}",
                other.describe(),
                step.limits_note(),
                exec::tail(&out.stderr, 3)
            )))
        }
    };
    let keep = step
        .ctx
        .out
        .join("count")
        .join(&step.submission().id)
        .join(format!("{}__{op}", step.instance().id));
    let _ = std::fs::remove_dir_all(&keep);
    std::fs::create_dir_all(&keep).map_err(|e| Stop::failed(format!("{}: {e}", keep.display())))?;
    let mut profiles = Vec::new();
    let mut kept = Vec::new();
    for i in 1..=output.iters {
        let name = format!("callgrind.out.{i}");
        let from = scratch.join(&name);
        let text = std::fs::read_to_string(&from).map_err(|e| {
            Stop::failed(format!(
                "callgrind wrote no profile for call {i} of {} ({e})",
                output.iters
            ))
        })?;
        let p = count::parse(&text).map_err(|e| Stop::failed(format!("{name}: {e}")))?;
        let to = keep.join(&name);
        std::fs::write(&to, &text).map_err(|e| Stop::failed(format!("{}: {e}", to.display())))?;
        profiles.push(p);
        kept.push(step.ctx.rel(&to));
    }
    if scratch
        .join(format!("callgrind.out.{}", output.iters + 1))
        .exists()
    {
        return Err(Stop::failed(format!(
            "callgrind dumped more than {} profiles: the operation was called outside the counted calls",
            output.iters
        )));
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
        assert!(o.contains(&"--toggle-collect=NS_crypto_kem_enc".to_string()));
        assert!(o.contains(&"--dump-after=NS_crypto_kem_enc".to_string()));
        assert!(o.contains(&"--callgrind-out-file=/s/callgrind.out".to_string()));
    }
}
