//! `ngcc-pipe bench plan`: how long parsing, matrix expansion and planning take on a large
//! generated campaign (the target: 1000 instances x 6 steps in well under a second).
//! A benchmark subcommand rather than a timed test, because shared machines are noisy.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::graph::Plan;
use crate::run::keys;

/// Write a campaign of `submissions` x `per_sub` instances (per_sub = a x b matrix) into `dir`.
pub fn generate(
    dir: &Path,
    submissions: usize,
    a: usize,
    b: usize,
) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir.join("pipelines"))?;
    let pipeline = dir.join("pipelines/big.kdl");
    std::fs::write(
        &pipeline,
        r#"system "big" {
    bench-cpu 0
    cc "cc"
}
flags "guide" "-O2"
submissions "../submissions/*/manifest.kdl"
outputs "../outputs/big"
step "source"
step "build" flags="guide"
step "kat" needs="build"
step "sizes" needs="kat"
step "survey" needs="build"
step "time" needs="kat" exclusive=#true ops="keygen" trials=3 trial="100ms"
step "profile" needs="kat" exclusive=#true ops="keygen"
step "report" needs="kat time sizes survey profile"
"#,
    )?;
    let values = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(" ");
    for s in 0..submissions {
        let sd = dir.join(format!("submissions/kem-{s:03}"));
        std::fs::create_dir_all(sd.join("src"))?;
        std::fs::write(sd.join("kat.sha256"), "")?;
        std::fs::write(
            sd.join("manifest.kdl"),
            format!(
                r#"submission "kem-{s:03}" {{
    algorithm "KEM {s}"
    source path="src"
    primitives {{
        sources "common/hash.c"
        include "common"
        header "common/hash.h"
        hash family="keccak" "shake256"
        drng "randombytes"
    }}
    kat rng="nist" manifest="kat.sha256"
    matrix a="{}" b="{}"
    instance "K{s}-{{a}}-{{b}}" dir="k/{{a}}/{{b}}" namespace="K{s}_{{a}}_{{b}}_"
}}
"#,
                values(a),
                values(b)
            ),
        )?;
    }
    Ok(pipeline)
}

/// Run the benchmark: `repeats` rounds of load + expand + graph + keys + order, reporting
/// the median and the fastest round.
pub fn plan(instances: usize, repeats: usize) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("ngcc-bench-plan-{}", std::process::id()));
    let subs = 10usize;
    let per = instances.div_ceil(subs);
    let a = (per as f64).sqrt().ceil() as usize;
    let b = per.div_ceil(a);
    let pipeline = generate(&dir, subs, a, b).map_err(|e| e.to_string())?;
    let facts = keys::Facts {
        cc_version: "bench".into(),
        env_fingerprint: "bench".into(),
    };
    let mut rounds: Vec<Duration> = Vec::new();
    let mut shape = String::new();
    for _ in 0..repeats.max(1) {
        let t0 = Instant::now();
        let c = crate::dsl::load_campaign(&pipeline).map_err(|d| d.to_string())?;
        let plan = Plan::build(&c);
        let inputs = keys::all_inputs(&c, &plan, &facts);
        let order = plan.execution_order();
        rounds.push(t0.elapsed());
        let n: usize = c.submissions.iter().map(|s| s.instances.len()).sum();
        shape = format!(
            "{n} instances, {} steps, {} edges, {} keys",
            order.len(),
            plan.graph.edge_count(),
            inputs.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    rounds.sort();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bench plan: parse + expand + graph + cache keys + order"
    );
    let _ = writeln!(out, "  campaign: {shape}");
    let _ = writeln!(
        out,
        "  {} rounds: median {:.1} ms, fastest {:.1} ms, slowest {:.1} ms",
        rounds.len(),
        rounds[rounds.len() / 2].as_secs_f64() * 1e3,
        rounds[0].as_secs_f64() * 1e3,
        rounds[rounds.len() - 1].as_secs_f64() * 1e3
    );
    Ok(out)
}

/// The minimal C timing loop `bench fidelity` compares kem-runner with.
const MINIMAL_LOOP_C: &str = include_str!("../kem-native/c/minimal_loop.c");

/// One operation's fidelity result: kem-runner / minimal loop, per round.
pub struct FidelityRow {
    pub op: crate::model::Op,
    pub iters: u64,
    pub runner: Vec<f64>,
    pub minimal: Vec<f64>,
}

impl FidelityRow {
    /// Median over rounds of the per-round ratio runner / minimal.
    pub fn median_ratio(&self) -> f64 {
        let ratios: Vec<f64> = self
            .runner
            .iter()
            .zip(&self.minimal)
            .map(|(r, m)| r / m)
            .collect();
        crate::measure::stats::median(&ratios).unwrap_or(f64::NAN)
    }
}

/// `bench fidelity`: time one built instance's operations with kem-runner and with a
/// minimal C `rdtsc` loop over the same object, alternating `rounds` times, both pinned to
/// the bench core and both drawing randomness from getrandom(2) on every call.
pub fn fidelity(
    ctx: &crate::run::Ctx,
    instance: &str,
    rounds: usize,
    trial: Duration,
) -> Result<Vec<FidelityRow>, String> {
    use crate::model::Op;
    use crate::record::{StepData, TimeOutput};
    use std::process::Command;

    let ix = ctx
        .plan
        .by_id
        .get(&format!("{instance}/build"))
        .copied()
        .ok_or_else(|| format!("no build step `{instance}/build` in this campaign"))?;
    let node = ctx.node(ix);
    let rec = ctx.read_record(node).ok_or_else(|| {
        format!("`{instance}` is not built yet: run `ngcc-pipe run <pipeline> --only '{instance}/build'` first")
    })?;
    let Some(StepData::Build(build)) = rec.data else {
        return Err(format!(
            "`{instance}/build` has no object ({})",
            rec.status.name()
        ));
    };
    let dir = ctx.out.join("bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let src = dir.join("minimal_loop.c");
    let exe = dir.join("minimal_loop");
    std::fs::write(&src, MINIMAL_LOOP_C).map_err(|e| e.to_string())?;
    let cc = Command::new(&ctx.campaign.system.cc)
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-ldl")
        .output()
        .map_err(|e| e.to_string())?;
    if !cc.status.success() {
        return Err(format!(
            "compiling minimal_loop.c: {}",
            String::from_utf8_lossy(&cc.stderr)
        ));
    }
    // Children inherit this thread's affinity: pin to the bench core.
    kem_native::sys::set_thread_affinity(&[ctx.campaign.system.bench_cpu])
        .map_err(|e| e.to_string())?;
    let object = ctx.out.join(&build.object);
    let api = &build.api;
    let mut rows = Vec::new();
    for op in Op::ALL {
        let mut row = FidelityRow {
            op,
            iters: 0,
            runner: Vec::new(),
            minimal: Vec::new(),
        };
        for round in 0..rounds {
            let runner = || -> Result<(f64, u64), String> {
                let out = Command::new(&ctx.runner)
                    .arg("time")
                    .arg("--lib")
                    .arg(&object)
                    .arg("--api")
                    .arg(&build.api_h)
                    .args(["--ns", &build.namespace, "--op", op.name()])
                    .args(["--cpu", &ctx.campaign.system.bench_cpu.to_string()])
                    .args(["--trials", "1", "--samples", "0", "--rng", "os"])
                    .args([
                        "--trial-ns",
                        &trial.as_nanos().to_string(),
                        "--min-iters",
                        "20",
                    ])
                    .output()
                    .map_err(|e| e.to_string())?;
                let t: TimeOutput = serde_json::from_slice(&out.stdout).map_err(|e| {
                    format!("kem-runner: {e}: {}", String::from_utf8_lossy(&out.stderr))
                })?;
                let tr = t.trials.first().ok_or("kem-runner ran no trial")?;
                Ok((tr.cycles as f64 / tr.iters as f64, tr.iters))
            };
            let minimal = |iters: u64| -> Result<f64, String> {
                let out = Command::new(&exe)
                    .arg(&object)
                    .arg(&build.namespace)
                    .arg(op.name())
                    .arg(iters.to_string())
                    .args([api.pk, api.sk, api.ct, api.ss].map(|n| n.to_string()))
                    .output()
                    .map_err(|e| e.to_string())?;
                let text = String::from_utf8_lossy(&out.stdout);
                text.trim()
                    .strip_prefix("cycles_per_op=")
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| {
                        format!(
                            "minimal_loop: {}{}",
                            text,
                            String::from_utf8_lossy(&out.stderr)
                        )
                    })
            };
            // Alternate which goes first, so drift over the run cancels out.
            if round % 2 == 0 {
                let (r, iters) = runner()?;
                row.iters = iters;
                row.runner.push(r);
                row.minimal.push(minimal(iters)?);
            } else {
                let m = minimal(row.iters.max(20))?;
                let (r, _) = runner()?;
                row.minimal.push(m);
                row.runner.push(r);
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The fidelity table.
pub fn fidelity_table(instance: &str, rows: &[FidelityRow]) -> String {
    let mut out = format!(
        "bench fidelity: {instance}, kem-runner vs a minimal rdtsc loop over the same object\n\
         op       iters   runner cycles/op (per round)            minimal cycles/op (per round)           median ratio\n"
    );
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for r in rows {
        let ratio = r.median_ratio();
        let verdict = if (0.98..=1.02).contains(&ratio) {
            "within 0.98-1.02"
        } else {
            "OUTSIDE 0.98-1.02"
        };
        let _ = writeln!(
            out,
            "{:<8} {:>6}   {:<38}  {:<38}  {ratio:.4} ({verdict})",
            r.op.name(),
            r.iters,
            fmt(&r.runner),
            fmt(&r.minimal)
        );
    }
    out
}
