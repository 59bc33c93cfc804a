//! `ngcc-pipe bench plan`: how long parsing, matrix expansion and planning take on a large
//! generated campaign (the target: 1000 instances x 6 steps in well under a second).
//! A benchmark subcommand rather than a timed test, because shared machines are noisy.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::graph::Plan;
use crate::run::keys;
use crate::run::sandbox::{Jail, Sandbox, DEFAULT_MEMORY};

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
        env_fingerprint: "bench".into(),
    };
    let mut rounds: Vec<Duration> = Vec::new();
    let mut shape = String::new();
    for _ in 0..repeats.max(1) {
        let t0 = Instant::now();
        let c = crate::dsl::load_campaign(&pipeline).map_err(Error::Campaign)?;
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
pub fn build_reference(
    spec: &ReferenceSpec,
    dir: &Path,
    sandbox: &Sandbox,
) -> Result<(PathBuf, Vec<String>), Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir.display()))?;
    let src = dir.join("minimal_loop.c");
    let exe = dir.join("minimal_loop");
    std::fs::write(&src, MINIMAL_LOOP_C).map_err(Error::io(src.display()))?;
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
    // The compiler reads submission-controlled sources and flags: it runs contained, like
    // the build step's, reading the sources and include folders and writing only `dir`.
    let mut read: Vec<PathBuf> = spec.sources.clone();
    read.extend(
        spec.includes
            .iter()
            .filter_map(|i| i.strip_prefix("-I"))
            .map(PathBuf::from),
    );
    let jail = Jail {
        read,
        write: vec![dir.to_path_buf()],
        cwd: dir.to_path_buf(),
        memory: DEFAULT_MEMORY,
    };
    let out = sandbox
        .command(Path::new(&spec.cc), &args, &jail)
        .output()
        .map_err(|e| Error::ToolMissing(format!("cannot run `{}`: {e}", spec.cc)))?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "building the static reference failed:\n{}",
            crate::run::exec::tail(&out.stderr, 12)
        )));
    }
    let mut command = vec![spec.cc.clone()];
    command.extend(args);
    Ok((exe, command))
}

/// Check that `path` is a statically linked ELF executable (no program interpreter, no
/// `DT_NEEDED`), and say what it is (`ELF64 ET_EXEC, statically linked`).
pub fn static_elf_kind(path: &Path) -> Result<String, Error> {
    use object::elf;
    use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
    let data = std::fs::read(path).map_err(Error::io(path.display()))?;
    let file = ElfFile64::<object::Endianness>::parse(&*data)
        .map_err(|e| Error::Tool(format!("{} is not a 64-bit ELF file: {e}", path.display())))?;
    let endian = file.endian();
    let e_type = match file.elf_header().e_type(endian) {
        elf::ET_EXEC => "ET_EXEC",
        elf::ET_DYN => "ET_DYN",
        other => {
            return Err(Error::Tool(format!(
                "{}: ELF type {other} is not an executable",
                path.display()
            )))
        }
    };
    let mut needed = Vec::new();
    for ph in file.elf_program_headers() {
        if ph.p_type(endian) == elf::PT_INTERP {
            return Err(Error::Tool(format!(
                "{} has a program interpreter: dynamically linked",
                path.display()
            )));
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
        return Err(Error::Tool(format!(
            "{} needs {} shared libraries (DT_NEEDED)",
            path.display(),
            needed.len()
        )));
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
) -> Result<Fidelity, Error> {
    use crate::model::{Op, StepKind};
    use crate::record::{StepData, TimeOutput};

    let ix = ctx
        .plan
        .by_id
        .get(&format!("{instance}/build"))
        .copied()
        .ok_or_else(|| {
            Error::Input(format!("no build step `{instance}/build` in this campaign"))
        })?;
    let node = ctx.node(ix);
    let rec = ctx.read_record(node).ok_or_else(|| {
        Error::Input(format!("`{instance}` is not built yet: run `ngcc-pipe run <pipeline> --only '{instance}/build'` first"))
    })?;
    let Some(StepData::Build(build)) = rec.data else {
        return Err(Error::Input(format!(
            "`{instance}/build` has no object ({})",
            rec.status.name()
        )));
    };
    let Some(StepData::Source(source)) = ctx
        .sibling_record(node, StepKind::Source)
        .and_then(|r| r.data)
    else {
        return Err(Error::Input(format!("`{instance}` has no source record")));
    };
    let sub = ctx.submission(node);
    let inst = ctx
        .instance(node)
        .ok_or_else(|| Error::Input("build is per instance".into()))?;
    let root = &source.root;
    let mut sources = crate::run::steps::build::instance_sources(
        root,
        &inst.dir,
        &inst.exclude,
        &inst.extra_sources,
    )
    .map_err(|e| Error::Input(e.to_string()))?;
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
    let (exe, _) = build_reference(&spec, &dir, &ctx.sandbox)?;
    let reference_kind = static_elf_kind(&exe)?;
    // Children inherit this thread's affinity: pin to the bench core.
    kem_native::sys::set_thread_affinity(&[ctx.campaign.system.bench_cpu]).map_err(Error::io(
        format_args!("pinning to core {}", ctx.campaign.system.bench_cpu),
    ))?;
    let object = ctx.out.join(&build.object);
    // Both sides run the submission's code: contained like the campaign's timing steps.
    let jail = Jail {
        read: vec![
            ctx.runner.clone(),
            object.clone(),
            build.api_h.clone(),
            exe.clone(),
        ],
        write: vec![dir.clone()],
        cwd: dir.clone(),
        memory: DEFAULT_MEMORY,
    };
    let mut rows = Vec::new();
    for op in Op::ALL {
        let mut row = FidelityRow {
            op,
            iters: 0,
            runner: Vec::new(),
            minimal: Vec::new(),
        };
        for round in 0..rounds {
            let runner = || -> Result<(f64, u64), Error> {
                let args: Vec<String> = [
                    "time",
                    "--lib",
                    &object.display().to_string(),
                    "--api",
                    &build.api_h.display().to_string(),
                    "--ns",
                    &build.namespace,
                    "--op",
                    op.name(),
                    "--cpu",
                    &ctx.campaign.system.bench_cpu.to_string(),
                    "--trials",
                    "1",
                    "--samples",
                    "0",
                    "--rng",
                    "os",
                    "--trial-ns",
                    &trial.as_nanos().to_string(),
                    "--min-iters",
                    "20",
                ]
                .map(String::from)
                .to_vec();
                let out = ctx
                    .sandbox
                    .command(&ctx.runner, &args, &jail)
                    .output()
                    .map_err(Error::io(ctx.runner.display()))?;
                let t: TimeOutput = serde_json::from_slice(&out.stdout).map_err(|e| {
                    Error::Tool(format!(
                        "kem-runner: {e}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ))
                })?;
                let tr = t
                    .trials
                    .first()
                    .ok_or_else(|| Error::Tool("kem-runner ran no trial".into()))?;
                Ok((tr.cycles as f64 / tr.iters as f64, tr.iters))
            };
            let minimal = |iters: u64| -> Result<f64, Error> {
                let out = ctx
                    .sandbox
                    .command(&exe, &[op.name().to_string(), iters.to_string()], &jail)
                    .output()
                    .map_err(Error::io(exe.display()))?;
                let text = String::from_utf8_lossy(&out.stdout);
                text.trim()
                    .strip_prefix("cycles_per_op=")
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| {
                        Error::Tool(format!(
                            "minimal_loop: {}{}",
                            text,
                            String::from_utf8_lossy(&out.stderr)
                        ))
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
