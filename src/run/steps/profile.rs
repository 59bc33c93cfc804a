//! `profile` (exclusive): run each operation on the wrapped object and attribute its
//! cycles to the declared hash/XOF/cipher functions and to the DRNG.

use std::path::Path;

use super::{parse_runner, Done, Step};
use crate::record::{ProfileData, ProfileOutput, Status, StepData};
use crate::run::exec::Exit;

/// Shares and calls per operation from a runner profile. The wrappers' own cost is
/// taken out of the total (calibrated per call by the runner).
pub fn shares(out: &ProfileOutput) -> (f64, f64, Vec<(String, f64)>) {
    let calls: u64 = out.symbols.iter().map(|s| s.calls).sum();
    let total = (out.total_cycles as f64 - out.wrapper_overhead_cycles * calls as f64).max(1.0);
    let sum = |drng: bool| -> f64 {
        out.symbols
            .iter()
            .filter(|s| (s.family == "drng") == drng)
            .map(|s| s.cycles)
            .sum()
    };
    let iters = out.iters.max(1) as f64;
    let mut per_op: Vec<(String, f64)> = out
        .symbols
        .iter()
        .filter(|s| s.calls > 0)
        .map(|s| (s.symbol.clone(), s.calls as f64 / iters))
        .collect();
    per_op.sort_by(|a, b| a.0.cmp(&b.0));
    (
        (sum(false) / total).clamp(0.0, 1.0),
        (sum(true) / total).clamp(0.0, 1.0),
        per_op,
    )
}

pub fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let op = step.node.op.expect("profile is per operation");
    let (_, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return Done::failed(e),
    };
    let Some(prof) = build.profile_object.clone() else {
        return Done::failed("the build made no profile object");
    };
    if let Some(crate::record::StepData::Kat(k)) = ctx
        .sibling_record(step.node, crate::model::StepKind::Kat)
        .and_then(|r| r.data)
    {
        if k.profile_object_kat.as_ref().is_some_and(|p| !p.equal) {
            return Done::failed(
                "the profile object's KAT differs from the plain object's; not profiling",
            );
        }
    }
    let p = &ctx.spec(step.node.kind).expect("declared").params;
    let log_rel = Path::new("logs")
        .join(step.slug())
        .join(format!("profile__{op}.log"));
    let mut log = match step.open_log(log_rel) {
        Ok(l) => l,
        Err(e) => return Done::failed(e.to_string()),
    };
    let mut cmd = step.runner();
    cmd.arg("profile")
        .arg("--lib")
        .arg(ctx.out.join(&prof))
        .arg("--api")
        .arg(&build.api_h)
        .args(["--ns", &build.namespace, "--op", op.name()])
        .args(["--cpu", &ctx.campaign.system.bench_cpu.to_string()])
        .args(["--iters", &p.iters.to_string()]);
    let out = match step.exec(&mut cmd, &mut log) {
        Ok(o) => o,
        Err(e) => return Done::failed(format!("cannot run kem-runner: {e}")),
    };
    if out.exit == Exit::TimedOut {
        return Done {
            status: Status::TimedOut,
            reason: Some(step.timeout_text()),
            data: None,
        };
    }
    if !out.exit.success() {
        return Done::failed(format!(
            "{op}: {}; {}",
            out.exit.describe(),
            crate::run::exec::tail(&out.stderr, 3)
        ));
    }
    let output: ProfileOutput = match parse_runner(&out) {
        Ok(o) => o,
        Err(e) => return Done::failed(e),
    };
    let (hash_share, drng_share, calls_per_op) = shares(&output);
    Done::ok(StepData::Profile(ProfileData {
        output,
        hash_share,
        drng_share,
        calls_per_op,
        environment: ctx.env.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SymbolProfile;

    #[test]
    fn shares_subtract_wrapper_cost() {
        let sym = |s: &str, f: &str, calls, cycles| SymbolProfile {
            symbol: s.into(),
            family: f.into(),
            calls,
            cycles,
        };
        let out = ProfileOutput {
            op: "keygen".into(),
            iters: 10,
            total_cycles: 10_000 + 40 * 5,
            wrapper_overhead_cycles: 5.0,
            symbols: vec![
                sym("shake256", "keccak", 30, 5_000.0),
                sym("PQCLEAN_randombytes", "drng", 10, 1_000.0),
                sym("sha3_256", "keccak", 0, 0.0),
            ],
        };
        let (h, d, calls) = shares(&out);
        assert!((h - 0.5).abs() < 1e-12, "{h}");
        assert!((d - 0.1).abs() < 1e-12, "{d}");
        assert_eq!(
            calls,
            vec![
                ("PQCLEAN_randombytes".into(), 1.0),
                ("shake256".into(), 3.0)
            ]
        );
    }
}
