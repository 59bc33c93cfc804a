//! `ngcc-pipe bench plan`: how long parsing, matrix expansion and planning take on a large
//! generated campaign (the target: 1000 instances x 6 steps in well under a second).
//! A benchmark subcommand rather than a timed test, because shared machines are noisy.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
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

/// The C main of the static reference `bench fidelity` compares kem-runner with.
const MINIMAL_LOOP_C: &str = include_str!("../kem-native/c/minimal_loop.c");

/// What the static reference is built from: the instance's sources, the provided
/// primitives and the build record's flags, nothing of the campaign's object.
pub struct ReferenceSpec {
    /// C compiler.
    pub cc: String,
    /// The build record's flags (the profile's and the instance's `cflags`).
    pub flags: Vec<String>,
    /// `-I` options: the instance folder and the primitives' include folders.
    pub includes: Vec<String>,
    /// Instance sources, then primitive sources.
    pub sources: Vec<PathBuf>,
    /// Namespace of `crypto_kem_*`.
    pub namespace: String,
    /// The random-byte function the scheme calls (defined by the reference).
    pub drng: String,
    /// Buffer sizes.
    pub api: kem_native::output::ApiSizes,
}

/// Compile and link the static reference executable into `dir`; returns its path and the
/// command line.
pub fn build_reference(spec: &ReferenceSpec, dir: &Path) -> Result<(PathBuf, Vec<String>), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("minimal_loop.c");
    let exe = dir.join("minimal_loop");
    std::fs::write(&src, MINIMAL_LOOP_C).map_err(|e| format!("{}: {e}", src.display()))?;
    let ns = &spec.namespace;
    let mut args: Vec<String> = vec!["-static".into()];
    args.extend(spec.flags.iter().cloned());
    args.extend(spec.includes.iter().cloned());
    args.extend([
        format!("-DNGCC_KEYPAIR={ns}crypto_kem_keypair"),
        format!("-DNGCC_ENC={ns}crypto_kem_enc"),
        format!("-DNGCC_DEC={ns}crypto_kem_dec"),
        format!("-DNGCC_DRNG={}", spec.drng),
        format!("-DNGCC_PK={}", spec.api.pk),
        format!("-DNGCC_SK={}", spec.api.sk),
        format!("-DNGCC_CT={}", spec.api.ct),
        format!("-DNGCC_SS={}", spec.api.ss),
        "-o".into(),
        exe.display().to_string(),
        src.display().to_string(),
    ]);
    args.extend(spec.sources.iter().map(|p| p.display().to_string()));
    let out = std::process::Command::new(&spec.cc)
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", spec.cc))?;
    if !out.status.success() {
        return Err(format!(
            "building the static reference failed:\n{}",
            crate::run::exec::tail(&out.stderr, 12)
        ));
    }
    let mut command = vec![spec.cc.clone()];
    command.extend(args);
    Ok((exe, command))
}

/// Check that `path` is a statically linked ELF executable (no program interpreter, no
/// `DT_NEEDED`), and say what it is (`ELF64 ET_EXEC, statically linked`).
pub fn static_elf_kind(path: &Path) -> Result<String, String> {
    use object::elf;
    use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = ElfFile64::<object::Endianness>::parse(&*data)
        .map_err(|e| format!("{} is not a 64-bit ELF file: {e}", path.display()))?;
    let endian = file.endian();
    let e_type = match file.elf_header().e_type(endian) {
        elf::ET_EXEC => "ET_EXEC",
        elf::ET_DYN => "ET_DYN",
        other => {
            return Err(format!(
                "{}: ELF type {other} is not an executable",
                path.display()
            ))
        }
    };
    let mut needed = Vec::new();
    for ph in file.elf_program_headers() {
        if ph.p_type(endian) == elf::PT_INTERP {
            return Err(format!(
                "{} has a program interpreter: dynamically linked",
                path.display()
            ));
        }
        if let Ok(Some(dynamic)) = ph.dynamic(endian, &*data) {
            needed.extend(
                dynamic
                    .iter()
                    .filter(|d| d.tag(endian) == elf::DT_NEEDED)
                    .map(|d| d.d_val(endian)),
            );
        }
    }
    if !needed.is_empty() {
        return Err(format!(
            "{} needs {} shared libraries (DT_NEEDED)",
            path.display(),
            needed.len()
        ));
    }
    let pie = if e_type == "ET_DYN" {
        " (static PIE)"
    } else {
        ""
    };
    Ok(format!(
        "ELF64 {e_type}, statically linked{pie}, no DT_NEEDED"
    ))
}

/// One operation's fidelity result: kem-runner / static reference, per round.
pub struct FidelityRow {
    pub op: crate::model::Op,
    pub iters: u64,
    pub runner: Vec<f64>,
    pub minimal: Vec<f64>,
}

impl FidelityRow {
    /// Median over rounds of the per-round ratio runner / reference.
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

/// What `bench fidelity` measured: the reference it built and one row per operation.
pub struct Fidelity {
    /// Path of the static reference executable.
    pub reference: PathBuf,
    /// Its ELF kind ([`static_elf_kind`]).
    pub reference_kind: String,
    /// The campaign's object kem-runner timed.
    pub object: PathBuf,
    pub rows: Vec<FidelityRow>,
}

/// `bench fidelity`: time one built instance's operations with kem-runner on the
/// campaign's object and with the static reference executable ([`build_reference`]: the
/// same sources and flags, compiled again and linked statically with a minimal rdtsc
/// loop), alternating `rounds` times, both pinned to the bench core and both drawing
/// randomness from getrandom(2) on every call (kem-runner with `--rng os`).
pub fn fidelity(
    ctx: &crate::run::Ctx,
    instance: &str,
    rounds: usize,
    trial: Duration,
) -> Result<Fidelity, String> {
    use crate::model::{Op, StepKind};
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
    let Some(StepData::Source(source)) = ctx
        .sibling_record(node, StepKind::Source)
        .and_then(|r| r.data)
    else {
        return Err(format!("`{instance}` has no source record"));
    };
    let sub = ctx.submission(node);
    let inst = ctx.instance(node).ok_or("build is per instance")?;
    let root = &source.root;
    let mut sources = crate::run::steps::build::instance_sources(
        root,
        &inst.dir,
        &inst.exclude,
        &inst.extra_sources,
    )?;
    sources.extend(sub.primitives.sources.iter().map(|s| root.join(s)));
    let mut includes = vec![format!("-I{}", root.join(&inst.dir).display())];
    includes.extend(
        sub.primitives
            .includes
            .iter()
            .map(|i| format!("-I{}", root.join(i).display())),
    );
    let spec = ReferenceSpec {
        cc: ctx.campaign.system.cc.clone(),
        flags: build.flags.clone(),
        includes,
        sources,
        namespace: build.namespace.clone(),
        drng: crate::run::steps::build::drng_symbol(sub),
        api: build.api.clone(),
    };
    let dir = ctx.out.join("bench").join(instance.replace('/', "__"));
    let (exe, _) = build_reference(&spec, &dir)?;
    let reference_kind = static_elf_kind(&exe)?;
    // Children inherit this thread's affinity: pin to the bench core.
    kem_native::sys::set_thread_affinity(&[ctx.campaign.system.bench_cpu])
        .map_err(|e| e.to_string())?;
    let object = ctx.out.join(&build.object);
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
                    .arg(op.name())
                    .arg(iters.to_string())
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
    Ok(Fidelity {
        reference: exe,
        reference_kind,
        object,
        rows,
    })
}

/// The fidelity table.
pub fn fidelity_table(instance: &str, fid: &Fidelity) -> String {
    let mut out = format!(
        "bench fidelity: {instance}, kem-runner on the campaign's object vs an independent static reference\n\
         object:    {}\n\
         reference: {} ({}; the same sources and flags, compiled again)\n\
         randomness: getrandom(2) on every call on both sides\n\
         op       iters   runner cycles/op (per round)            reference cycles/op (per round)         median ratio\n",
        fid.object.display(),
        fid.reference.display(),
        fid.reference_kind
    );
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for r in &fid.rows {
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
