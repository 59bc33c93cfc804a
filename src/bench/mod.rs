//! `ngcc-pipe bench plan`: how long parsing, matrix expansion and planning take on a large
//! generated campaign (the target: 1000 instances x 6 steps in well under a second).
//! A benchmark subcommand rather than a timed test, because shared machines are noisy.
//! `bench fidelity` is in [`fidelity`].

mod fidelity;
mod reference;

pub use fidelity::{fidelity, fidelity_table};
pub use reference::{build_reference, static_elf_kind, ReferenceSpec};

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::Error;
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
pub fn plan(instances: usize, repeats: usize) -> Result<String, Error> {
    let dir = std::env::temp_dir().join(format!("ngcc-bench-plan-{}", std::process::id()));
    let subs = 10usize;
    let per = instances.div_ceil(subs);
    let a = (per as f64).sqrt().ceil() as usize;
    let b = per.div_ceil(a);
    let pipeline = generate(&dir, subs, a, b).map_err(Error::io(dir.display()))?;
    let facts = keys::Facts {
        cc_version: "bench".into(),
        compilers: Default::default(),
        env_fingerprint: "bench".into(),
        libraries: Default::default(),
    };
    let mut rounds: Vec<Duration> = Vec::new();
    let mut shape = String::new();
    for _ in 0..repeats.max(1) {
        let t0 = Instant::now();
        let c = crate::dsl::load_campaign(&pipeline).map_err(Error::Campaign)?;
        let plan = Plan::build(&c);
        let inputs = keys::all_inputs(&c, &plan, &facts, &crate::run::steps::kind_inputs);
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
