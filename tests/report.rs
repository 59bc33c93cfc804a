//! Report rendering from a fixed set of hand-made records (`tests/fixtures/records/`).
//!
//! The fixture records are built here from the record types, so they always deserialize;
//! `fixtures_are_current` fails when the committed files differ from what this code builds
//! (regenerate with `UPDATE_FIXTURES=1 cargo test --test report`). Snapshot tests pin the
//! Markdown, CSV, JSON and HTML rendered from them (update with `INSTA_UPDATE=always`).
//!
//! Two systems: `x86_1` (submissions `ml-kem` and `qube`, covering PASS, MISMATCH with a
//! reference diff, NOKAT, FAIL with skipped timing and profile, an unstable measurement with
//! an outlier trial, and a survey `bypass`) and `arm_1` (`ml-kem` only) whose
//! `reports/results.json` makes the site show both systems side by side.
//!
//! The `faults_*` tests (`report_faults/`) render records recorded from a real run of the
//! faults campaign and redacted (`tests/fixtures/records-faults/`), so the engine's own
//! sandbox row, environment warnings and skip reasons are in their snapshots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ngcc_pipe::measure::{env, stats};
use ngcc_pipe::model::{
    Campaign, CatalogSizes, FlagProfile, Instance, KatMode, KatRng, KatSettings, Op, PrimitiveFn,
    Primitives, ReportMeta, Source, StepKind, StepParams, StepSpec, Submission, System,
};
use ngcc_pipe::record::{
    self, ApiSizes, BuildData, CampaignRecord, CampaignStep, Environment, KatData, KatModeResult,
    KatStatus, LayoutObject, OwnSymbol, ProfileData, ProfileKatCheck, ProfileOutput, RspDiff,
    SizesData, SourceData, SourceHit, Status, StepData, StepRecord, SurveyData, SymbolProfile,
    TimeData, Verdict,
};
use ngcc_pipe::report::{self, CampaignView};

use kem_native::output::{Calibration, CoreCycles, Memory, Overhead, TimeOutput, Trial};

/// The `ct` records of `x86_1` (memcheck findings and variable-latency scans).
#[path = "report_ct/records.rs"]
mod ct_records;

/// Reports from the redacted records of a real faults-campaign run.
#[path = "report_faults/mod.rs"]
mod faults;

mod common;

const FIXTURES: &str = "tests/fixtures/records";

// ---------------------------------------------------------------- campaign model

fn steps() -> Vec<StepSpec> {
    let spec = |kind: StepKind, needs: &[StepKind], params: StepParams| StepSpec {
        kind,
        needs: needs.to_vec(),
        exclusive: matches!(kind, StepKind::Time | StepKind::Profile),
        timeout: Duration::from_secs(1800),
        params,
    };
    let build = StepParams {
        flags: Some("guide".into()),
        ..StepParams::default()
    };
    vec![
        spec(StepKind::Source, &[], StepParams::default()),
        spec(StepKind::Build, &[StepKind::Source], build),
        spec(StepKind::Kat, &[StepKind::Build], StepParams::default()),
        spec(StepKind::Sizes, &[StepKind::Kat], StepParams::default()),
        spec(StepKind::Survey, &[StepKind::Build], StepParams::default()),
        spec(StepKind::Time, &[StepKind::Kat], StepParams::default()),
        spec(StepKind::Profile, &[StepKind::Kat], StepParams::default()),
        spec(
            StepKind::Report,
            &[StepKind::Kat, StepKind::Time, StepKind::Sizes],
            StepParams::default(),
        ),
    ]
}

fn instance(id: &str, level: &str, imp: Option<&str>) -> Instance {
    let mut vars = BTreeMap::new();
    vars.insert("level".to_string(), level.to_string());
    if let Some(i) = imp {
        vars.insert("impl".to_string(), i.to_string());
    }
    Instance {
        id: id.into(),
        dir: format!("crypto_kem/{id}"),
        namespace: format!("NS_{}_", id.replace('-', "")),
        cflags: vec![],
        extra_sources: vec![],
        requires_cpu: vec![],
        exclude: vec![],
        libraries: vec![],
        kat_submitted: None,
        vars,
        origin: Default::default(),
        // as the bundled manifests give them (ML-KEM-512 and qube-128 are category 1, ...)
        nist_category: match level {
            "512" | "128" => Some(1),
            "768" | "192" => Some(3),
            _ => Some(5),
        },
    }
}

fn submission(id: &str, algorithm: &str, instances: Vec<Instance>) -> Submission {
    let dir = PathBuf::from("/fixture/submissions").join(id);
    let qube = id == "qube";
    Submission {
        id: id.into(),
        manifest_path: dir.join("manifest.kdl"),
        dir: dir.clone(),
        meta: ReportMeta {
            algorithm: algorithm.into(),
            category: Some("public-key algorithm".into()),
            function: Some("key encapsulation".into()),
            versions: if qube {
                vec!["reference".into()]
            } else {
                vec![]
            },
            notes: if qube {
                vec![
                    "The top-level Test_Vectors carry the optimized implementation's sizes; \
                      no qube-192 vector was submitted"
                        .into(),
                ]
            } else {
                vec![]
            },
            links: vec![("Submission".into(), format!("https://example.org/{id}"))],
        },
        source: if qube {
            Source::Path {
                path: dir.join("src"),
            }
        } else {
            Source::Crate {
                name: "pqcrypto-mlkem".into(),
                version: "0.1.1".into(),
                root: "pqclean".into(),
            }
        },
        primitives: Primitives {
            sources: vec!["common/fips202.c".into()],
            includes: vec!["common".into()],
            headers: vec!["common/fips202.h".into()],
            functions: vec![
                PrimitiveFn {
                    symbol: "shake256".into(),
                    family: "keccak".into(),
                },
                PrimitiveFn {
                    symbol: "sha3_256".into(),
                    family: "keccak".into(),
                },
            ],
            drng: Some("PQCLEAN_randombytes".into()),
        },
        kat: KatSettings {
            rng: KatRng::Nist,
            manifest: dir.join("kat.sha256"),
            all_count: 100,
            reference_dir: None,
            submitted: false,
        },
        sizes: BTreeMap::new(),
        instances,
        ct_benign: Vec::new(),
        api: Default::default(),
    }
}

fn campaign(system: &str, arch: &str, subs: Vec<Submission>) -> Campaign {
    let mut flags = BTreeMap::new();
    flags.insert(
        "guide".to_string(),
        FlagProfile {
            name: "guide".into(),
            flags: vec!["-O3".into(), "-march=native".into()],
        },
    );
    Campaign {
        pipeline_path: PathBuf::from(format!("/fixture/pipelines/{system}.kdl")),
        system: System {
            name: system.into(),
            arch: arch.into(),
            bench_cpu: 2,
            cc: "gcc".into(),
            isolation: ngcc_pipe::model::Isolation::Core,
            target: Default::default(),
            executor: Default::default(),
            sandbox: Default::default(),
            role: Default::default(),
        },
        flags,
        outputs: PathBuf::from(format!("/fixture/outputs/{system}")),
        steps: steps(),
        submissions: subs,
    }
}

fn x86_campaign() -> Campaign {
    let mut c = campaign(
        "x86_1",
        "x86-64",
        vec![
            submission(
                "ml-kem",
                "ML-KEM",
                vec![
                    instance("ML-KEM-512-clean", "512", Some("clean")),
                    instance("ML-KEM-768-clean", "768", Some("clean")),
                    instance("ML-KEM-1024-clean", "1024", Some("clean")),
                ],
            ),
            submission(
                "qube",
                "QUBE",
                vec![
                    instance("qube-128", "128", None),
                    instance("qube-192", "192", None),
                    instance("qube-256", "256", None),
                ],
            ),
        ],
    );
    // x86_1 also checks constant time (arm_1 does not).
    c.steps.push(StepSpec {
        kind: StepKind::Ct,
        needs: vec![StepKind::Kat],
        exclusive: false,
        timeout: Duration::from_secs(1800),
        params: StepParams::default(),
    });
    c
}

fn arm_campaign() -> Campaign {
    campaign(
        "arm_1",
        "aarch64",
        vec![submission(
            "ml-kem",
            "ML-KEM",
            vec![
                instance("ML-KEM-512-clean", "512", Some("clean")),
                instance("ML-KEM-768-clean", "768", Some("clean")),
                instance("ML-KEM-1024-clean", "1024", Some("clean")),
            ],
        )],
    )
}

// ---------------------------------------------------------------- records

fn environment(arm: bool) -> Environment {
    if arm {
        return Environment {
            cpu_model: None,
            bench_cpu: 2,
            logical_cpus: Some(4),
            max_mhz: None,
            governor: None,
            turbo: None,
            smt: Some("notsupported".into()),
            isolated_cpus: None,
            mem_total_mib: Some(7820),
            os: Some("Debian GNU/Linux 13 (trixie)".into()),
            kernel: Some("6.12.48+deb13-arm64".into()),
            cc_version: Some("gcc (Debian 14.2.0-19) 14.2.0".into()),
            build_tool: None,
            loadavg: Some(0.12),
            warnings: vec![],
            sandbox: None,
        };
    }
    let mut e = Environment {
        cpu_model: Some("12th Gen Intel(R) Core(TM) i7-12700".into()),
        bench_cpu: 2,
        logical_cpus: Some(20),
        max_mhz: Some(2100.0),
        governor: Some("powersave".into()),
        turbo: Some("on".into()),
        smt: Some("off".into()),
        isolated_cpus: Some(String::new()),
        mem_total_mib: Some(31788),
        os: Some("Debian GNU/Linux 13 (trixie)".into()),
        kernel: Some("6.12.107+deb13-amd64".into()),
        cc_version: Some("gcc (Debian 14.2.0-19) 14.2.0".into()),
        build_tool: None,
        loadavg: Some(0.41),
        warnings: vec![],
        sandbox: None,
    };
    // the warnings the engine writes for this environment (governor, turbo, isolation)
    e.warnings = env::warnings(
        &e,
        &env::Extra {
            turbo_source: Some(env::TurboSource::IntelPstate),
            smt_active: Some(false),
            bench_busy: None,
        },
    );
    e
}

struct Ctx {
    system: &'static str,
    arm: bool,
    out: Vec<(PathBuf, StepRecord)>,
}

#[allow(clippy::too_many_arguments)] // a record is many fields; the test reads best with them inline
fn base_record(
    arm: bool,
    kind: StepKind,
    sub: &str,
    inst: Option<&str>,
    op: Option<Op>,
    status: Status,
    reason: Option<&str>,
    data: Option<StepData>,
) -> StepRecord {
    let id = match (inst, op) {
        (Some(i), Some(op)) => format!("{sub}/{i}/{kind}:{op}"),
        (Some(i), None) => format!("{sub}/{i}/{kind}"),
        (None, _) => format!("{sub}/{kind}"),
    };
    let mut inputs = BTreeMap::new();
    inputs.insert("step".to_string(), id.clone());
    let key = format!("{:064x}", id.len() * 7919 + kind as usize);
    StepRecord {
        schema: record::RECORD_SCHEMA,
        id,
        kind,
        submission: sub.into(),
        instance: inst.map(str::to_string),
        op,
        status,
        reason: reason.map(str::to_string),
        cache_key: key,
        inputs,
        commands: vec![vec![
            "kem-runner".into(),
            kind.name().into(),
            inst.unwrap_or("-").into(),
        ]],
        started: "2026-09-25T10:05:00Z".into(),
        finished: "2026-09-25T10:05:07Z".into(),
        duration_s: 7.0,
        ran_because: None,
        env_fingerprint: if arm { "arm-env" } else { "x86-env" }.into(),
        logs: vec![],
        artefacts: vec![],
        sandbox: None,
        slurm: None,
        data,
    }
}

fn push(ctx: &mut Ctx, r: StepRecord) {
    let path = record::record_path(r.kind, &r.submission, r.instance.as_deref(), r.op);
    ctx.out.push((path, r));
}

/// Deterministic per-op cycles of one trial around `base`.
fn time_output(
    op: Op,
    api: &ApiSizes,
    base: f64,
    jitter: &[f64],
    ghz: f64,
    arm: bool,
) -> TimeOutput {
    let per_op_ns = base / ghz;
    // x86: four link orders of the object in every trial (`layouts=4`), each a little
    // faster or slower; arm: one.
    let orders: &[f64] = if arm {
        &[1.0]
    } else {
        &[0.98, 1.03, 0.99, 1.0]
    };
    let k = orders.len() as u64;
    let iters = ((1e9 / per_op_ns).ceil() as u64)
        .max(20)
        .next_multiple_of(k);
    let trials = jitter
        .iter()
        .map(|j| {
            let c = base * (1.0 + j);
            let shares: Vec<u64> = orders
                .iter()
                .map(|f| (c * f * (iters / k) as f64).round() as u64)
                .collect();
            Trial {
                iters,
                cycles: shares.iter().sum(),
                ns: (c / ghz * iters as f64).round() as u64,
                core_cycles: None,
                layout_cycles: if arm { Vec::new() } else { shares },
                gauge_cycles: Vec::new(),
            }
        })
        .collect();
    let samples = (0..11u64)
        .map(|k| {
            (base * (1.0 + 0.004 * (k as f64 - 5.0).abs())) as u64
                + if k == 7 { base as u64 } else { 0 }
        })
        .collect();
    TimeOutput {
        op: op.name().into(),
        sizes: api.clone(),
        pinned_cpu: Some(2),
        pin_error: None,
        counter: if arm { "cntvct_el0" } else { "rdtsc" }.into(),
        rng: "ctr-drbg".into(),
        failure: None,
        core_cycles: CoreCycles::Unavailable {
            reason: "perf_event_open: EACCES (perf_event_paranoid=3)".into(),
        },
        calibration: Calibration {
            target_trial_ns: 1_000_000_000,
            batch_iters: (iters / 10).max(1),
            batch_ns: 100_000_000,
            batches_ns: vec![100_000_000; 5],
            iters,
            min_iters: 20,
        },
        warmup_iters: iters / 10,
        layouts: if arm {
            Vec::new()
        } else {
            ["", ".reversed", ".shuffle-1", ".shuffle-2"]
                .iter()
                .map(|o| format!("/fixture/build/{op}{o}.so", op = op.name()))
                .collect()
        },
        trials,
        samples,
        overhead: Overhead {
            cycles_per_call: 21.0,
            ns_per_call: 10.0,
            single_call_cycles: 40.0,
        },
        memory: Memory {
            baseline_rss_kib: Some(1700 + (api.pk + api.sk) / 1024 * 4),
            peak_rss_kib: Some(1800 + (api.pk + api.sk + api.ct) / 1024 * 8 + op as u64 * 4),
            stack_bytes: Some(4000 + api.sk * 3 + op as u64 * 512),
            stack_painted_bytes: 8 << 20,
        },
    }
}

struct Inst<'a> {
    sub: &'a str,
    id: &'a str,
    api: ApiSizes,
    catalog: CatalogSizes,
    kat: KatStatus,
    kat_reason: Option<&'a str>,
    base: [f64; 3],
    unstable_op: Option<Op>,
    outlier_op: Option<Op>,
    hash: [f64; 3],
    verdict: Verdict,
    static_bytes: u64,
}

fn hexish(seed: &str) -> String {
    // a fixed, readable 64-hex-digit stand-in for a digest
    let mut h: u64 = 1469598103934665603;
    let mut out = String::new();
    for round in 0..4u64 {
        for b in seed.bytes() {
            h ^= b as u64 + round;
            h = h.wrapping_mul(1099511628211);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

fn add_instance(ctx: &mut Ctx, i: &Inst) {
    let (sub, id) = (i.sub, i.id);
    // build
    let build = BuildData {
        object: PathBuf::from(format!("build/{sub}/{id}.so")),
        object_sha256: hexish(&format!("{id}.so")),
        profile_object: Some(PathBuf::from(format!("build/{sub}/{id}.profile.so"))),
        valgrind_object: None,
        valgrind_flags: vec![],
        cc: "gcc".into(),
        cc_version: "gcc (Debian 14.2.0-19) 14.2.0".into(),
        flags_profile: "guide".into(),
        flags: vec!["-O3".into(), "-march=native".into()],
        codegen_flags: vec!["-fPIC".into(), "-fno-semantic-interposition".into()],
        link_flags: vec![
            "-O3".into(),
            "-march=native".into(),
            "-shared".into(),
            "-Wl,--version-script=build/fixture/ngcc_exports.map".into(),
        ],
        objects: Vec::new(),
        primitive_objects: Vec::new(),
        static_bytes: Some(i.static_bytes),
        api: i.api.clone(),
        api_h: PathBuf::from(format!("/fixture/src/{id}/api.h")),
        namespace: format!("NS_{id}_"),
        anchor_object: Some(PathBuf::from(format!("build/{sub}/ngcc_anchor.o"))),
        layouts: (if ctx.arm {
            &[][..]
        } else {
            &["reversed", "shuffle-1", "shuffle-2"][..]
        })
        .iter()
        .map(|name| LayoutObject {
            name: name.to_string(),
            object: PathBuf::from(format!("build/{sub}/{id}.{name}.so")),
            object_sha256: hexish(&format!("{id}.{name}.so")),
        })
        .collect(),
        libraries: Vec::new(),
        left_out: Vec::new(),
        api_evaluated: false,
    };
    let mut r = base_record(
        ctx.arm,
        StepKind::Build,
        sub,
        Some(id),
        None,
        Status::Ok,
        None,
        Some(StepData::Build(build)),
    );
    r.logs = vec![PathBuf::from(format!("build/{sub}/{id}.log"))];
    push(ctx, r);
    // kat
    let log = PathBuf::from(format!("kat/{sub}/{id}.log"));
    let rsp = PathBuf::from(format!("kat/{sub}/{id}.rsp"));
    let actual = hexish(&format!("{id}.rsp"));
    let mode = KatModeResult {
        mode: KatMode::Single,
        status: i.kat,
        counts: 1,
        expected_sha256: match i.kat {
            KatStatus::Nokat => None,
            KatStatus::Pass => Some(actual.clone()),
            _ => Some(hexish(&format!("{id}.expected"))),
        },
        actual_sha256: if i.kat == KatStatus::Fail {
            None
        } else {
            Some(actual)
        },
        rsp: if i.kat == KatStatus::Fail {
            None
        } else {
            Some(rsp)
        },
        reason: i.kat_reason.map(str::to_string),
        diff: if i.kat == KatStatus::Mismatch {
            Some(RspDiff {
                count: 0,
                field: "pk".into(),
                offset: 3287,
            })
        } else {
            None
        },
        submitted: None,
        fresh_dec: None,
    };
    let kat_ok = i.kat != KatStatus::Fail;
    let kat = KatData {
        modes: vec![mode],
        log_sha256: hexish(&format!("{id}.log")),
        profile_object_kat: Some(ProfileKatCheck {
            sha256: hexish(&format!("{id}.profile")),
            equal: true,
        }),
    };
    // the KAT step's reasons as the engine words them (run/steps/kat.rs)
    let mode_reason = i.kat_reason.unwrap_or_default();
    let (kst, kreason) = match i.kat {
        KatStatus::Pass => (Status::Ok, None),
        KatStatus::Nokat => (
            Status::Ok,
            Some("NOKAT (single): no expected hash".to_string()),
        ),
        KatStatus::Mismatch => (
            Status::Failed,
            Some(format!("MISMATCH (single): {mode_reason}")),
        ),
        KatStatus::Fail => (
            Status::Failed,
            Some(format!("FAIL (single): {mode_reason}")),
        ),
    };
    let mut r = base_record(
        ctx.arm,
        StepKind::Kat,
        sub,
        Some(id),
        None,
        kst,
        kreason.as_deref(),
        Some(StepData::Kat(kat)),
    );
    r.logs = vec![log];
    push(ctx, r);
    // sizes
    let mut audit = Vec::new();
    if i.catalog.pk != Some(i.api.pk) {
        audit.push(format!(
            "pk: catalog {} bytes, api.h {} bytes",
            i.catalog.pk.unwrap_or(0),
            i.api.pk
        ));
    }
    let sizes = SizesData {
        api: i.api.clone(),
        catalog: i.catalog,
        kat: Some(CatalogSizes {
            pk: Some(i.api.pk),
            sk: Some(i.api.sk),
            ct: Some(i.api.ct),
            ss: Some(i.api.ss),
        }),
        shown: CatalogSizes {
            pk: i.catalog.pk.or(Some(i.api.pk)),
            sk: Some(i.api.sk),
            ct: i.catalog.ct.or(Some(i.api.ct)),
            ss: Some(i.api.ss),
        },
        audit,
    };
    push(
        ctx,
        base_record(
            ctx.arm,
            StepKind::Sizes,
            sub,
            Some(id),
            None,
            Status::Ok,
            None,
            Some(StepData::Sizes(sizes)),
        ),
    );
    // survey
    let survey = match i.verdict {
        Verdict::Bypass => SurveyData {
            verdict: Verdict::Bypass,
            summary:
                "own inline Keccak (KeccakF1600_StatePermute) reachable; provided SHAKE unused"
                    .into(),
            source_hits: vec![
                SourceHit {
                    file: format!("{id}/keccak.c"),
                    line: 41,
                    family: "keccak".into(),
                    text: "static void KeccakF1600_StatePermute(uint64_t *state)".into(),
                    reachable: true,
                    note: None,
                },
                SourceHit {
                    file: format!("{id}/aes_unused.c"),
                    line: 12,
                    family: "aes".into(),
                    text: "void aes_ctr(const uint8_t *k)".into(),
                    reachable: false,
                    note: Some("file not compiled".into()),
                },
            ],
            own_symbols: vec![OwnSymbol {
                name: "KeccakF1600_StatePermute".into(),
                family: "keccak".into(),
                referenced: true,
            }],
            provided_used: vec![],
        },
        v => SurveyData {
            verdict: v,
            summary: "only the provided Keccak is reachable".into(),
            source_hits: vec![],
            own_symbols: vec![],
            provided_used: vec!["sha3_256".into(), "shake256".into()],
        },
    };
    push(
        ctx,
        base_record(
            ctx.arm,
            StepKind::Survey,
            sub,
            Some(id),
            None,
            Status::Ok,
            None,
            Some(StepData::Survey(survey)),
        ),
    );
    // time + profile
    let env = environment(ctx.arm);
    let ghz = if ctx.arm { 1.0 } else { 2.1 };
    for (k, op) in Op::ALL.into_iter().enumerate() {
        if !kat_ok {
            // the scheduler's reason for a step whose dependency failed
            let why = format!(
                "`{sub}/{id}/kat` failed: {}",
                kreason.as_deref().unwrap_or_default()
            );
            push(
                ctx,
                base_record(
                    ctx.arm,
                    StepKind::Time,
                    sub,
                    Some(id),
                    Some(op),
                    Status::Skipped,
                    Some(&why),
                    None,
                ),
            );
            push(
                ctx,
                base_record(
                    ctx.arm,
                    StepKind::Profile,
                    sub,
                    Some(id),
                    Some(op),
                    Status::Skipped,
                    Some(&why),
                    None,
                ),
            );
            continue;
        }
        let jitter: &[f64] = if i.unstable_op == Some(op) {
            &[0.0, 0.05, -0.03, 0.02, 0.09]
        } else if i.outlier_op == Some(op) {
            &[0.0, 0.0012, -0.0008, 0.0004, 0.012]
        } else {
            &[0.0, 0.0012, -0.0008, 0.0004, -0.0011]
        };
        let out = time_output(op, &i.api, i.base[k], jitter, ghz, ctx.arm);
        let summary = stats::summarize(&out);
        let td = TimeData {
            output: out,
            summary,
            static_bytes: Some(i.static_bytes),
            object_cache_key: hexish(&format!("{id}.build")),
            object_sha256: hexish(&format!("{id}.so")),
            environment: env.clone(),
            rounds: None,
        };
        let mut r = base_record(
            ctx.arm,
            StepKind::Time,
            sub,
            Some(id),
            Some(op),
            Status::Ok,
            None,
            Some(StepData::Time(Box::new(td))),
        );
        r.logs = vec![PathBuf::from(format!("records/{sub}/{id}__{op}.log"))];
        push(ctx, r);
        // profile: hash share and calls
        let iters = 20u64;
        let total = (i.base[k] * iters as f64) as u64;
        let drng_share = if op == Op::Dec {
            0.0
        } else {
            0.015 / (k as f64 + 1.0)
        };
        let mut symbols = Vec::new();
        if i.hash[k] > 0.0 {
            symbols.push(SymbolProfile {
                symbol: "shake256".into(),
                family: "keccak".into(),
                calls: iters * (7 + k as u64) + if k == 0 { 1 } else { 0 },
                cycles: total as f64 * i.hash[k] * 0.8,
            });
            symbols.push(SymbolProfile {
                symbol: "sha3_256".into(),
                family: "keccak".into(),
                calls: iters * if op == Op::Enc { 2 } else { 1 },
                cycles: total as f64 * i.hash[k] * 0.2,
            });
        }
        if op != Op::Dec {
            symbols.push(SymbolProfile {
                symbol: "PQCLEAN_randombytes".into(),
                family: "drng".into(),
                calls: iters * 2,
                cycles: total as f64 * drng_share,
            });
        }
        let calls_per_op: Vec<(String, f64)> = symbols
            .iter()
            .filter(|s| s.calls > 0)
            .map(|s| (s.symbol.clone(), s.calls as f64 / iters as f64))
            .collect();
        let pd = ProfileData {
            output: ProfileOutput {
                op: op.name().into(),
                iters,
                total_cycles: total,
                wrapper_overhead_cycles: 18.5,
                symbols,
                failure: None,
            },
            hash_share: i.hash[k],
            drng_share,
            family_shares: vec![
                ("keccak".to_string(), i.hash[k]),
                ("drng".to_string(), drng_share),
            ],
            calls_per_op,
            environment: env.clone(),
            repeats: Vec::new(),
            wrapped_over_timed: None,
        };
        push(
            ctx,
            base_record(
                ctx.arm,
                StepKind::Profile,
                sub,
                Some(id),
                Some(op),
                Status::Ok,
                None,
                Some(StepData::Profile(pd)),
            ),
        );
    }
}

fn api(pk: u64, sk: u64, ct: u64, ss: u64) -> ApiSizes {
    ApiSizes {
        algname: None,
        pk,
        sk,
        ct,
        ss,
    }
}

fn cat(pk: u64, ct: u64) -> CatalogSizes {
    CatalogSizes {
        pk: Some(pk),
        sk: None,
        ct: Some(ct),
        ss: None,
    }
}

fn mlkem(ctx: &mut Ctx, scale: f64, unstable: Option<Op>) {
    let sets = [
        (
            "ML-KEM-512-clean",
            api(800, 1632, 768, 32),
            [46_120.0, 61_870.0, 77_410.0],
            15_744,
        ),
        (
            "ML-KEM-768-clean",
            api(1184, 2400, 1088, 32),
            [78_650.0, 96_200.0, 117_930.0],
            17_312,
        ),
        (
            "ML-KEM-1024-clean",
            api(1568, 3168, 1568, 32),
            [121_400.0, 142_700.0, 169_800.0],
            19_040,
        ),
    ];
    for (n, (id, a, base, st)) in sets.into_iter().enumerate() {
        let catalog = cat(a.pk, a.ct);
        add_instance(
            ctx,
            &Inst {
                sub: "ml-kem",
                id,
                api: a,
                catalog,
                kat: KatStatus::Pass,
                kat_reason: None,
                base: base.map(|b| b * scale),
                unstable_op: if n == 1 { unstable } else { None },
                outlier_op: if n == 2 && unstable.is_some() {
                    Some(Op::Dec)
                } else {
                    None
                },
                hash: [0.55, 0.62, 0.49],
                verdict: Verdict::ProvidedOnly,
                static_bytes: st,
            },
        );
    }
}

fn x86_records() -> Ctx {
    let mut ctx = Ctx {
        system: "x86_1",
        arm: false,
        out: Vec::new(),
    };
    for sub in ["ml-kem", "qube"] {
        let data = SourceData {
            root: PathBuf::from(format!("/fixture/src/{sub}")),
            origin: if sub == "ml-kem" {
                "crate pqcrypto-mlkem 0.1.1 (checksum verified by cargo)".into()
            } else {
                "path submissions/qube/src".into()
            },
            checksum: None,
        };
        let r = base_record(
            false,
            StepKind::Source,
            sub,
            None,
            None,
            Status::Ok,
            None,
            Some(StepData::Source(data)),
        );
        push(&mut ctx, r);
    }
    mlkem(&mut ctx, 1.0, Some(Op::Enc));
    let qube = [
        (
            "qube-128",
            api(3294, 3326, 3287, 16),
            cat(3294, 3287),
            KatStatus::Mismatch,
            Some("sha256 of the generated .rsp differs from kat.sha256"),
            [616_900.0, 657_800.0, 1_181_000.0],
            0,
        ),
        (
            "qube-192",
            api(6364, 6412, 6362, 24),
            cat(6360, 6362),
            KatStatus::Nokat,
            None,
            [1_410_000.0, 1_480_000.0, 2_830_000.0],
            1,
        ),
        (
            "qube-256",
            api(10446, 10510, 10423, 32),
            cat(10446, 10423),
            KatStatus::Fail,
            Some("shared secrets differ in count 0"),
            [0.0; 3],
            2,
        ),
    ];
    for (id, a, c, kat, reason, base, n) in qube {
        add_instance(
            &mut ctx,
            &Inst {
                sub: "qube",
                id,
                api: a,
                catalog: c,
                kat,
                kat_reason: reason,
                base,
                unstable_op: None,
                outlier_op: None,
                hash: [0.0, 0.0, 0.0],
                verdict: Verdict::Bypass,
                static_bytes: 42_913 + n * 392,
            },
        );
    }
    ct_records::ct_records(&mut ctx);
    ctx
}

fn arm_records() -> Ctx {
    let mut ctx = Ctx {
        system: "arm_1",
        arm: true,
        out: Vec::new(),
    };
    mlkem(&mut ctx, 1.9, None);
    ctx
}

fn campaign_record(ctx: &Ctx, arch: &str) -> CampaignRecord {
    let mut steps: Vec<CampaignStep> = ctx
        .out
        .iter()
        .map(|(p, r)| CampaignStep {
            id: r.id.clone(),
            status: r.status,
            reason: r.reason.clone(),
            record: p.clone(),
            ran: true,
        })
        .collect();
    steps.sort_by(|a, b| a.id.cmp(&b.id));
    CampaignRecord {
        schema: record::RECORD_SCHEMA,
        system: ctx.system.into(),
        arch: arch.into(),
        pipeline: PathBuf::from(format!("pipelines/{}.kdl", ctx.system)),
        command: vec![
            "ngcc-pipe".into(),
            "run".into(),
            format!("pipelines/{}.kdl", ctx.system),
        ],
        started: "2026-09-25T10:02:21Z".into(),
        finished: Some("2026-09-25T11:51:21Z".into()),
        environment: environment(ctx.arm),
        env_fingerprint: if ctx.arm { "arm-env" } else { "x86-env" }.into(),
        steps,
        tool: Some("ngcc-pipe 0.1.0 (git 0123456789ab)".into()),
        role: Default::default(),
    }
}

fn json(v: &impl serde::Serialize) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).unwrap();
    b.push(b'\n');
    b
}

/// Every fixture file (relative to FIXTURES) and its bytes.
fn fixture_files() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    for (ctx, arch) in [(x86_records(), "x86-64"), (arm_records(), "aarch64")] {
        let root = PathBuf::from(ctx.system);
        files.push((
            root.join("campaign.json"),
            json(&campaign_record(&ctx, arch)),
        ));
        for (p, r) in &ctx.out {
            files.push((root.join(p), json(r)));
        }
    }
    files
}

fn write_fixtures_to(dir: &Path) {
    for (p, b) in fixture_files() {
        record::write_atomic(&dir.join(p), &b).unwrap();
    }
    // arm_1's results.json, rendered from its records, makes x86_1's site show both systems
    let arm = CampaignView::load(&arm_campaign(), &dir.join("arm_1")).unwrap();
    let files: Vec<_> = report::render_campaign(&arm)
        .into_iter()
        .filter(|(p, _)| p.ends_with("results.json"))
        .collect();
    report::write_all(&dir.join("arm_1"), &files).unwrap();
}

// ---------------------------------------------------------------- tests

#[test]
fn fixtures_are_current() {
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        let _ = std::fs::remove_dir_all(FIXTURES);
        write_fixtures_to(Path::new(FIXTURES));
    }
    let tmp = tempfile::tempdir().unwrap();
    write_fixtures_to(tmp.path());
    let mut expected: Vec<PathBuf> = Vec::new();
    for entry in walk(tmp.path()) {
        let rel = entry.strip_prefix(tmp.path()).unwrap().to_path_buf();
        let want = std::fs::read(&entry).unwrap();
        let have = std::fs::read(Path::new(FIXTURES).join(&rel)).unwrap_or_default();
        assert!(
            want == have,
            "fixture `{}` is stale: run `UPDATE_FIXTURES=1 cargo test --test report`",
            rel.display()
        );
        expected.push(rel);
    }
    let committed: Vec<PathBuf> = walk(Path::new(FIXTURES))
        .into_iter()
        .map(|p| p.strip_prefix(FIXTURES).unwrap().to_path_buf())
        .collect();
    expected.sort();
    assert_eq!(committed, expected, "extra or missing fixture files");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn x86_view() -> CampaignView {
    CampaignView::load(&x86_campaign(), &Path::new(FIXTURES).join("x86_1")).unwrap()
}

fn file<'a>(files: &'a [(PathBuf, Vec<u8>)], name: &str) -> &'a str {
    let (_, b) = files
        .iter()
        .find(|(p, _)| p == Path::new(name))
        .unwrap_or_else(|| panic!("no file {name}"));
    std::str::from_utf8(b).unwrap()
}

#[test]
fn submission_markdown_mlkem() {
    let view = x86_view();
    let files = report::render_submission(&view, "ml-kem");
    let md = file(&files, "reports/ml-kem.md");
    for section in [
        "# ml-kem ML-KEM — performance on x86-64 (system x86_1)",
        "## 1. Basic information",
        "## 2. Assessment environment",
        "## 3. Functional testing (KAT)",
        "## 4. Performance",
        "## 5. Resource consumption",
        "## 6. Transmission and storage overhead",
        "## Symmetric primitives",
        "## 7. Raw evidence index",
    ] {
        assert!(md.contains(section), "missing `{section}`");
    }
    // One headline figure per operation, said once in words; the distributions, flags and
    // outliers are in the appendix, which the body links to.
    assert_eq!(md.matches("Headline figure").count(), 1);
    assert!(md.contains("(ml-kem.appendix.md)"));
    assert!(!md.contains("unstable"));
    assert!(!md.contains("outlier trial"));
    let appendix = file(&files, "reports/ml-kem.appendix.md");
    assert!(appendix.contains("(ml-kem.md)"));
    assert!(appendix.contains("| unstable |"));
    assert!(appendix.contains("| outlier trial #4 |"));
    // The record's trial index is 0-based, and so is the appendix's "#4".
    let rec: StepRecord = serde_json::from_slice(
        &std::fs::read(
            Path::new(FIXTURES).join("x86_1/records/ml-kem/ML-KEM-1024-clean__dec.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let Some(StepData::Time(td)) = &rec.data else {
        panic!("not a time record")
    };
    assert_eq!(td.summary.trial_outliers, [4]);
    // The evidence index moved whole: every record of the body's old index is in the appendix.
    assert!(appendix.contains("## Raw evidence index"));
    assert!(appendix.contains("records/ml-kem/ML-KEM-768-clean__enc.json"));
    assert!(appendix.contains("profile/ml-kem/ML-KEM-1024-clean__keygen.json"));
    assert!(appendix.contains("Single-call samples"));
    insta::assert_snapshot!("ml_kem_md", md);
    insta::assert_snapshot!("ml_kem_appendix_md", appendix);
}

#[test]
fn submission_markdown_qube_failures() {
    let view = x86_view();
    let files = report::render_submission(&view, "qube");
    let md = file(&files, "reports/qube.md");
    assert!(md.contains("MISMATCH [1]"));
    assert!(md.contains("NOKAT [2]"));
    assert!(md.contains("FAIL [3]"));
    assert!(md.contains("Survey verdict: bypass"));
    assert!(md.contains(
        "skipped: `qube/qube-256/kat` failed: FAIL (single): shared secrets differ in count 0"
    ));
    // Only instances with a successful time record are objects timed (qube-256 is not).
    let appendix = file(&files, "reports/qube.appendix.md");
    assert!(appendix.contains("- `qube-128`, `qube-192`: compiled with"));
    assert!(!appendix.contains("`qube-256`: compiled"));
    insta::assert_snapshot!("qube_md", md);
}

#[test]
fn campaign_index_csv_json() {
    let view = x86_view();
    let files = report::render_campaign(&view);
    insta::assert_snapshot!("index_md", file(&files, "reports/index.md"));
    let csv = file(&files, "reports/results.csv");
    // 6 instances x 3 ops + header
    assert_eq!(csv.lines().count(), 19);
    insta::assert_snapshot!("results_csv", csv);
    let js = file(&files, "reports/results.json");
    let parsed: report::Results = serde_json::from_str(js).unwrap();
    assert_eq!(parsed.schema, report::RESULTS_SCHEMA);
    assert_eq!(parsed.system, "x86_1");
    let n: usize = parsed.submissions.iter().map(|s| s.instances.len()).sum();
    assert_eq!(n, 6);
    insta::assert_snapshot!("results_json", js);
}

#[test]
fn html_site_is_self_contained() {
    let view = x86_view();
    let mut files = report::render_campaign(&view);
    files.extend(report::render_submission(&view, "qube"));
    let index = file(&files, "site/index.html");
    let page = file(&files, "site/qube.html");
    for html in [index, page] {
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("<link"));
    }
    // both systems side by side, with the switch; the page opens on its own system
    assert!(index.contains(
        "system: <a href=\"#system-x86_1\">x86_1</a> · <a href=\"#system-arm_1\">arm_1</a>"
    ));
    assert!(index.contains("<section id=\"system-arm_1\">"));
    // two charts per system, each drawn wide and narrow
    assert_eq!(index.matches("<svg").count(), 8);
    assert!(index.contains("NIST category 1") && index.contains("NIST category 5"));
    insta::assert_snapshot!("site_index_html", index);
    insta::assert_snapshot!("site_qube_html", page);
}

#[test]
fn rendering_is_deterministic_and_written_atomically() {
    let a = report::render_all(&x86_view());
    let b = report::render_all(&x86_view());
    assert_eq!(a.len(), b.len());
    for ((pa, ba), (pb, bb)) in a.iter().zip(&b) {
        assert_eq!(pa, pb);
        assert!(
            ba == bb,
            "`{}` differs between two renderings",
            pa.display()
        );
    }
    let names: Vec<_> = a.iter().map(|(p, _)| p.display().to_string()).collect();
    assert_eq!(
        names,
        [
            "reports/ml-kem.md",
            "reports/ml-kem.appendix.md",
            "site/ml-kem.html",
            "reports/qube.md",
            "reports/qube.appendix.md",
            "site/qube.html",
            "reports/index.md",
            "reports/results.csv",
            "reports/results.json",
            "site/index.html",
        ]
    );
    // REPORT_RENDER_TO=DIR keeps a rendered copy to look at (e.g. in a browser)
    if let Some(dir) = std::env::var_os("REPORT_RENDER_TO") {
        copy_tree(Path::new(FIXTURES), Path::new(&dir));
        report::write_all(&Path::new(&dir).join("x86_1"), &a).unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    report::write_all(tmp.path(), &a).unwrap();
    assert_eq!(
        std::fs::read(tmp.path().join("reports/qube.md")).unwrap(),
        a[3].1
    );
    let bad = vec![(PathBuf::from("../escape.md"), vec![])];
    assert!(report::write_all(tmp.path(), &bad).is_err());
}

#[test]
fn missing_records_say_did_not_run() {
    // A folder of its own inside the temp dir: sibling folders are read as other systems.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x86_1");
    std::fs::create_dir_all(&out).unwrap();
    let mut c = x86_campaign();
    c.pipeline_path = tmp.path().join("pipelines/x86_1.kdl");
    let view = CampaignView::load(&c, &out).unwrap();
    let files = report::render_submission(&view, "ml-kem");
    let md = file(&files, "reports/ml-kem.md");
    assert!(md.contains("The `kat` step did not run for this submission: no records"));
    assert!(md.contains("The `time` step did not run for this submission: no records"));
    assert!(md.contains("No records were found for this submission."));
    let appendix = file(&files, "reports/ml-kem.appendix.md");
    assert!(appendix.contains("No records were found for this submission."));
    insta::assert_snapshot!("empty_md", md);
}

#[test]
fn corrupt_record_is_an_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("records/ml-kem/ML-KEM-512-clean__kat.json");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, b"{ not json").unwrap();
    let err = CampaignView::load(&x86_campaign(), tmp.path()).unwrap_err();
    assert!(
        err.to_string().contains("ML-KEM-512-clean__kat.json"),
        "{err}"
    );
}

#[test]
fn compare_same_system_is_all_noise() {
    let dir = Path::new(FIXTURES).join("x86_1");
    let c = report::compare(&dir, &dir).unwrap();
    // ml-kem: 3 instances x 3 ops; qube: 2 timed instances x 3 ops (qube-256 was skipped)
    assert_eq!(c.rows.len(), 15);
    assert!(c.rows.iter().all(|r| {
        let raw = r.estimates.raw.as_ref().unwrap();
        (raw.ratio.median - 1.0).abs() < 1e-12 && !r.change().unwrap().significant()
    }));
}

#[test]
fn compare_two_systems() {
    // records-only (x86_1) against results.json (arm_1): arm is 1.9x the cycles
    let a = Path::new(FIXTURES).join("x86_1");
    let b = Path::new(FIXTURES).join("arm_1");
    let c = report::compare(&a, &b).unwrap();
    assert_eq!(c.system_a, "x86_1");
    assert_eq!(c.system_b, "arm_1");
    assert_eq!(c.rows.len(), 9);
    assert!(c.rows.iter().all(|r| {
        let raw = r.estimates.raw.as_ref().unwrap();
        (raw.ratio.median - 1.9).abs() < 0.05
    }));
    insta::assert_snapshot!("compare_md", report::compare_markdown(&c));
    insta::assert_snapshot!("compare_csv", report::compare_csv(&c));
    assert_eq!(c.only_a.len(), 6);
}

fn copy_tree(from: &Path, to: &Path) {
    for f in walk(from) {
        let rel = f.strip_prefix(from).unwrap();
        std::fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&f, to.join(rel)).unwrap();
    }
}

#[test]
fn compare_marks_only_the_slowed_instance() {
    // B is A with ML-KEM-512-clean dec 2.5x slower (as if built at -O0): only that row's
    // interval leaves the band; the unstable ML-KEM-768 enc and every other row do not.
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    copy_tree(&Path::new(FIXTURES).join("x86_1"), &a);
    copy_tree(&Path::new(FIXTURES).join("x86_1"), &b);
    let rec = b.join("records/ml-kem/ML-KEM-512-clean__dec.json");
    let mut r: StepRecord = record::read_json(&rec).unwrap().unwrap();
    if let Some(StepData::Time(td)) = r.data.as_mut() {
        for t in &mut td.output.trials {
            t.cycles = t.cycles * 5 / 2;
        }
    } else {
        panic!("fixture is not a timing record");
    }
    record::write_json(&rec, &r).unwrap();
    let c = report::compare(&a, &b).unwrap();
    let significant: Vec<String> = c
        .rows
        .iter()
        .filter(|r| r.change().unwrap().significant())
        .map(|r| format!("{} {}", r.instance, r.op))
        .collect();
    assert_eq!(significant, ["ML-KEM-512-clean dec"]);
    // `verdict` is the 20th column.
    assert!(report::compare_csv(&c)
        .lines()
        .any(|l| l.contains("ML-KEM-512-clean,dec") && l.split(',').nth(19) == Some("slower")));
}

/// `results.json` carries what `compare` and `history` read from the records: per-round
/// cycles, the yardstick's in the same rounds and which rounds were interfered.
#[test]
fn results_json_gives_compare_the_same_rounds_as_the_records() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x86_1");
    copy_tree(&Path::new(FIXTURES).join("x86_1"), &out);
    let rec = out.join("records/ml-kem/ML-KEM-512-clean__keygen.json");
    let mut r: StepRecord = record::read_json(&rec).unwrap().unwrap();
    let Some(StepData::Time(td)) = r.data.as_mut() else {
        panic!("fixture is not a timing record");
    };
    // 12 rounds, the 3rd and 9th interfered, a yardstick beside them.
    td.output.trials = (0..12u64)
        .map(|i| Trial {
            iters: 100,
            cycles: 100 * (50_000 + 10 * i + if i == 2 || i == 8 { 20_000 } else { 0 }),
            ns: 20_000_000,
            core_cycles: None,
            layout_cycles: Vec::new(),
            gauge_cycles: Vec::new(),
        })
        .collect();
    let est = serde_json::json!({"median": 1.0, "ci_low": 1.0, "ci_high": 1.0});
    td.rounds = Some(
        serde_json::from_value(serde_json::json!({
            "session": "s", "seed": 1, "members": 10, "positions": vec![0; 12],
            "interference": (0..12).map(|i| if i == 2 || i == 8 { vec!["steal 1 ticks"] } else { vec![] }).collect::<Vec<_>>(),
            "clean_only": true, "estimate": est, "precision": 0.01, "reached": true,
            "stopped": "budget", "budget_s": 1.0,
            "yardstick": {"name": "ngcc-yardstick-1", "object_sha256": "ab", "values": (0..12).map(|i| 1000.0 + i as f64).collect::<Vec<_>>(), "estimate": est, "relative": est},
        }))
        .unwrap(),
    );
    record::write_json(&rec, &r).unwrap();
    let from_records = report::compare::load(&out).unwrap();
    let view = CampaignView::load(&x86_campaign(), &out).unwrap();
    report::write_all(&out, &report::render_campaign(&view)).unwrap();
    assert!(out.join("reports/results.json").is_file());
    let from_results = report::compare::load(&out).unwrap();
    // The same rounds (serde_json reads floats back to within an ulp).
    let close = |x: &[f64], y: &[f64]| {
        x.len() == y.len()
            && x.iter()
                .zip(y)
                .all(|(a, b)| (a - b).abs() <= 1e-12 * a.abs())
    };
    assert_eq!(
        from_records.series.keys().collect::<Vec<_>>(),
        from_results.series.keys().collect::<Vec<_>>()
    );
    for (k, r) in &from_records.series {
        let j = &from_results.series[k];
        assert_eq!(r.basis, j.basis, "{k:?}");
        assert!(close(&r.values, &j.values), "{k:?}");
        assert_eq!(r.yardstick.is_some(), j.yardstick.is_some(), "{k:?}");
    }
    let key = (
        "ml-kem".to_string(),
        "ML-KEM-512-clean".to_string(),
        Op::Keygen,
    );
    let s = &from_results.series[&key];
    assert_eq!(
        s.basis,
        report::compare::Basis::Rounds {
            rounds: 12,
            left_out: 2,
            marked: true
        }
    );
    assert!(s.values.iter().all(|&v| v < 60_000.0), "{s:?}");
    let (id, ys) = s.yardstick.as_ref().unwrap();
    assert_eq!((id.as_str(), ys.len()), ("ngcc-yardstick-1 sha256:ab", 10));
}

/// Runs `scripts/site-check.sh` (headless Chromium, Debian's `chromium`) on the fixture
/// site: every page at 1400 and 390 px, no console message, no request leaving the page,
/// no page wider than the viewport, no SVG label outside its viewBox, overlapping another
/// or drawn below 9 px. Run with `cargo test --test report -- --ignored chromium` (set
/// `REPORT_SCREENSHOTS=DIR` to keep the screenshots).
#[test]
#[ignore = "needs the `chromium` binary"]
fn chromium_renders_the_site() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(Path::new(FIXTURES), tmp.path());
    let out = tmp.path().join("x86_1");
    report::write_all(&out, &report::render_all(&x86_view())).unwrap();
    let shots = std::env::var_os("REPORT_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("shots"));
    let run = std::process::Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/site-check.sh"),
    )
    .arg(&out)
    .env("SHOTS", &shots)
    .output()
    .expect("run scripts/site-check.sh");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "site check failed:\n{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // every page at both widths, each with its screenshot
    for page in ["index", "ml-kem", "qube"] {
        for width in [1400, 390] {
            assert!(
                stdout.contains(&format!("{page}.html @ {width} px")),
                "{page} at {width} px not checked:\n{stdout}"
            );
            let png = shots.join(format!("{page}-{width}.png"));
            assert!(std::fs::metadata(&png).is_ok_and(|m| m.len() > 10_000));
        }
    }
}

// ---------------------------------------------------------------- chart geometry

/// The value of attribute `name` in one tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let i = tag.find(&key)? + key.len();
    Some(&tag[i..i + tag[i..].find('"')?])
}

/// Axis-aligned box of every `<text>` of one `<svg>`: width from the character count and
/// font size (0.6 em a glyph), height one em, anchored and rotated as the attributes say.
fn text_boxes(svg: &str) -> Vec<(String, [f64; 4])> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find("<text ") {
        let tag_end = i + rest[i..].find('>').unwrap();
        let tag = &rest[i..tag_end];
        let close = tag_end + rest[tag_end..].find("</text>").unwrap();
        let text = rest[tag_end + 1..close]
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'");
        rest = &rest[close..];
        let num = |n: &str| attr(tag, n).unwrap_or_else(|| panic!("no {n} in {tag}"));
        let (x, y): (f64, f64) = (num("x").parse().unwrap(), num("y").parse().unwrap());
        let fs: f64 = num("font-size").parse().unwrap();
        let w = text.chars().count() as f64 * fs * 0.6;
        let x0 = match attr(tag, "text-anchor") {
            Some("middle") => x - w / 2.0,
            Some("end") => x - w,
            _ => x,
        };
        let corners = [
            (x0, y - 0.8 * fs),
            (x0 + w, y - 0.8 * fs),
            (x0, y + 0.2 * fs),
            (x0 + w, y + 0.2 * fs),
        ];
        let corners: Vec<(f64, f64)> = match attr(tag, "transform") {
            Some(t) => {
                let v: Vec<f64> = t
                    .trim_start_matches("rotate(")
                    .trim_end_matches(')')
                    .split_whitespace()
                    .map(|n| n.parse().unwrap())
                    .collect();
                let (a, cx, cy) = (v[0].to_radians(), v[1], v[2]);
                corners
                    .iter()
                    .map(|(px, py)| {
                        let (dx, dy) = (px - cx, py - cy);
                        (
                            cx + dx * a.cos() - dy * a.sin(),
                            cy + dx * a.sin() + dy * a.cos(),
                        )
                    })
                    .collect()
            }
            None => corners.to_vec(),
        };
        let xs = corners.iter().map(|c| c.0);
        let ys = corners.iter().map(|c| c.1);
        out.push((
            text,
            [
                xs.clone().fold(f64::INFINITY, f64::min),
                ys.clone().fold(f64::INFINITY, f64::min),
                xs.fold(f64::NEG_INFINITY, f64::max),
                ys.fold(f64::NEG_INFINITY, f64::max),
            ],
        ));
    }
    out
}

#[test]
fn chart_labels_stay_inside_and_do_not_overlap() {
    let view = x86_view();
    let files = report::render_campaign(&view);
    let index = file(&files, "site/index.html");
    let mut charts = 0;
    for part in index.split("<svg ").skip(1) {
        let svg = &part[..part.find("</svg>").unwrap()];
        let vb: Vec<f64> = attr(&format!(" {svg}"), "viewBox")
            .unwrap()
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        let boxes = text_boxes(svg);
        assert!(!boxes.is_empty());
        for (t, b) in &boxes {
            assert!(
                b[0] >= vb[0] && b[1] >= vb[1] && b[2] <= vb[0] + vb[2] && b[3] <= vb[1] + vb[3],
                "`{t}` {b:?} outside the viewBox {vb:?}"
            );
        }
        for (i, (t, a)) in boxes.iter().enumerate() {
            for (u, b) in &boxes[i + 1..] {
                assert!(
                    !report::svg::overlaps(a, b),
                    "`{t}` {a:?} overlaps `{u}` {b:?}"
                );
            }
        }
        charts += 1;
    }
    // this system's two charts and the other system's cycles chart
    assert!(charts >= 2, "{charts} charts");
    assert!(index.contains("NIST category 1") && index.contains("error bars"));
}

// ---------------------------------------------------------------- issue #27 items 3-6

/// Rewrite one record of a copied fixture folder.
fn patch(out: &Path, rel: &str, f: impl FnOnce(&mut StepRecord)) {
    let path = out.join(rel);
    let mut r: StepRecord = record::read_json(&path).unwrap().unwrap();
    f(&mut r);
    record::write_json(&path, &r).unwrap();
}

/// Issue #27 item 3: the status block names what was unsupported (and why), what timed
/// out, which KAT was not checked (apart from the failures), every timing that missed its
/// precision target with the precision reached, and the profile's cross-check warning.
#[test]
fn index_status_block_names_everything_that_is_not_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x86_1");
    copy_tree(&Path::new(FIXTURES).join("x86_1"), &out);
    let lacks = "needs avx2: this CPU lacks it";
    let mut unsupported = 0;
    for dir in ["records/ml-kem", "profile/ml-kem"] {
        for f in walk(&out.join(dir)) {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("ML-KEM-1024-clean__") {
                patch(&out, &format!("{dir}/{name}"), |r| {
                    r.status = Status::Unsupported;
                    r.reason = Some(lacks.into());
                    r.data = None;
                });
                unsupported += 1;
            }
        }
    }
    patch(&out, "records/ml-kem/ML-KEM-768-clean__survey.json", |r| {
        r.status = Status::TimedOut;
        r.reason = Some("killed after 30m".into());
    });
    let warning = "wrapped total per operation differs from the timed cycles by +48.3% (> 10%): \
                   shares may not describe the timed code";
    patch(&out, "profile/ml-kem/ML-KEM-512-clean__keygen.json", |r| {
        r.reason = Some(warning.into());
        if let Some(StepData::Profile(p)) = r.data.as_mut() {
            p.wrapped_over_timed = Some(1.483);
        }
    });
    // dec of ML-KEM-512-clean in rounds that stopped at ±1.9% against a 1% target
    patch(&out, "records/ml-kem/ML-KEM-512-clean__dec.json", |r| {
        let Some(StepData::Time(td)) = r.data.as_mut() else {
            panic!("fixture is not a timing record");
        };
        let est = serde_json::json!({"median": 77_410.0, "ci_low": 76_000.0, "ci_high": 78_942.0});
        td.rounds = Some(
            serde_json::from_value(serde_json::json!({
                "session": "s", "seed": 1, "members": 10, "positions": vec![0; 5],
                "interference": vec![Vec::<String>::new(); 5],
                "clean_only": true, "estimate": est, "precision": 0.01, "reached": false,
                "stopped": "budget", "budget_s": 1.0,
            }))
            .unwrap(),
        );
        td.summary.median_cycles = Some(77_410.0);
        td.summary.ci_low_cycles = Some(76_000.0);
        td.summary.ci_high_cycles = Some(78_942.0);
    });
    let view = CampaignView::load(&x86_campaign(), &out).unwrap();
    let files = report::render_campaign(&view);
    let md = file(&files, "reports/index.md");
    let status = &md[md.find("## Status").unwrap()..md.find("## Per instance").unwrap()];
    assert!(!status.contains("Nothing failed"), "{status}");
    assert!(
        status.contains(&format!(
            "### Unsupported ({unsupported} steps)\n\n- `ml-kem/ML-KEM-1024-clean`: {lacks} ({unsupported} steps)"
        )),
        "{status}"
    );
    assert!(status
        .contains("### Timed out (1)\n\n- `ml-kem/ML-KEM-768-clean/survey`: killed after 30m"));
    assert!(
        status.contains("`ML-KEM-512-clean` dec: ±1.9% (target ±1.0%)"),
        "{status}"
    );
    // the block of trials that missed the 2% CV rule is there too
    assert!(status.contains("`ML-KEM-768-clean` enc: CV "), "{status}");
    // (Markdown escapes the `>` of the reason)
    assert!(
        status.contains(&format!(
            "`ml-kem/ML-KEM-512-clean/profile:keygen`: {}",
            warning.replace('>', "&gt;")
        )),
        "{status}"
    );
    // NOKAT is "not checked", never a failure
    let failed = &status[status.find("### Failed").unwrap()..status.find("### Timed out").unwrap()];
    assert!(!failed.contains("qube-192"), "{failed}");
    assert!(status
        .contains("### KAT not checked: no expected hash (1)\n\n- `qube/qube-192/kat` (single)"));
    // the cell gives the precision reached
    assert!(md.contains("| 77.4 k ±1.9% |"), "{md}");
    assert!(!md.contains("(unstable)"));
    // and the site shows the same block
    let site = file(&files, "site/index.html");
    assert!(site.contains("wrapped total per operation differs from the timed cycles by +48.3%"));
}

/// Issue #27 item 3: "nothing failed" only when nothing is left to say (arm_1: every step
/// succeeded, every KAT passed, every timing within its target).
#[test]
fn index_says_nothing_failed_only_when_all_is_clean() {
    let arm = CampaignView::load(&arm_campaign(), &Path::new(FIXTURES).join("arm_1")).unwrap();
    let md = report::render_campaign(&arm);
    assert!(file(&md, "reports/index.md").contains("## Status\n\nNothing failed: every step"));
    let x86 = report::render_campaign(&x86_view());
    assert!(!file(&x86, "reports/index.md").contains("Nothing failed"));
}

/// Issue #27 item 4: per NIST category one row per scheme, with enc + dec, pk + ct bytes and
/// the ratio of enc + dec to the category's ML-KEM.
#[test]
fn index_compares_schemes_per_category_against_ml_kem() {
    let view = x86_view();
    let results = report::Results::from_view(&view);
    let files = report::render_campaign(&view);
    let md = file(&files, "reports/index.md");
    let inst = |id: &str| {
        results
            .submissions
            .iter()
            .flat_map(|s| &s.instances)
            .find(|i| i.id == id)
            .unwrap()
    };
    let ed = |id: &str| {
        let i = inst(id);
        i.op(Op::Enc).unwrap().cycles().unwrap() + i.op(Op::Dec).unwrap().cycles().unwrap()
    };
    let cat1 =
        &md[md.find("### NIST category 1").unwrap()..md.find("### NIST category 3").unwrap()];
    assert!(cat1.contains(
        "| scheme | best implementation | keygen cycles | enc cycles | dec cycles | enc + dec cycles | pk + ct bytes | vs ML-KEM |"
    ));
    let q = inst("qube-128");
    assert!(
        cat1.contains(&format!(
            "| [qube](qube.md) | `qube-128` | 616.9 k | 657.8 k | 1.18 M | {} | {} | ×{:.2} |",
            ngcc_pipe::report::format::cycles(ed("qube-128")),
            q.pk.unwrap() + q.ct.unwrap(),
            ed("qube-128") / ed("ML-KEM-512-clean")
        )),
        "{cat1}"
    );
    assert!(cat1.contains("| [ml-kem](ml-kem.md) | `ML-KEM-512-clean` |"));
    assert!(cat1.contains("| 1568 | ×1.00 |"), "{cat1}");
    // a scheme with nothing timed in a category says so, without a ratio
    let cat5 = &md[md.find("### NIST category 5").unwrap()..];
    assert!(
        cat5.contains("| [qube](qube.md) | none timed (`qube-256`) | – | – | – | – | 20869 |  |"),
        "{cat5}"
    );
}

/// Issue #27 item 5: a smoke campaign beside x86_1 appears nowhere in x86_1's reports or
/// site; a measured one (arm_1) does; the site opens on x86_1; a smoke campaign's own
/// reports show no other system.
#[test]
fn a_smoke_campaign_beside_is_no_system() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(Path::new(FIXTURES), tmp.path());
    // `quick`: arm_1's outputs as a smoke run wrote them
    let quick = tmp.path().join("quick");
    copy_tree(&tmp.path().join("arm_1"), &quick);
    let mut c: CampaignRecord = record::read_json(&quick.join("campaign.json"))
        .unwrap()
        .unwrap();
    c.system = "quick".into();
    c.role = ngcc_pipe::model::Role::Smoke;
    record::write_json(&quick.join("campaign.json"), &c).unwrap();
    let rj = quick.join("reports/results.json");
    let mut r: report::Results = record::read_json(&rj).unwrap().unwrap();
    r.system = "quick".into();
    record::write_json(&rj, &r).unwrap();

    let out = tmp.path().join("x86_1");
    let view = CampaignView::load(&x86_campaign(), &out).unwrap();
    assert_eq!(view.system_names(), ["arm_1", "x86_1"]);
    let mut files = report::render_campaign(&view);
    files.extend(report::render_submission(&view, "ml-kem"));
    report::write_all(&out, &files).unwrap();
    for f in walk(&out.join("reports"))
        .into_iter()
        .chain(walk(&out.join("site")))
    {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("quick"),
            "{} names the smoke campaign",
            f.display()
        );
    }
    let site = file(&files, "site/index.html");
    assert!(site.contains("arm_1"));
    let first = site.find("<section id=\"system-").unwrap();
    assert!(site[first..].starts_with("<section id=\"system-x86_1\">"));

    // the smoke campaign itself stands alone
    let mut smoke = arm_campaign();
    smoke.system.name = "quick".into();
    smoke.system.role = ngcc_pipe::model::Role::Smoke;
    let alone = CampaignView::load(&smoke, &quick).unwrap();
    assert!(alone.other_systems.is_empty());
}

/// Issue #27 item 6: the charts print their figures: every bar's value is written beside
/// it (wide and narrow), the axis says where the bars start, and the scatter names what it
/// plots and each point's category.
#[test]
fn charts_write_their_values() {
    use ngcc_pipe::report::svg::{cycles_chart, size_scatter, Layout, Spread};
    let results = report::Results::from_view(&x86_view());
    let spread = Spread::for_results(&results);
    for layout in [Layout::Wide, Layout::Narrow] {
        let svg = cycles_chart(&results, spread, layout).unwrap();
        // the axis starts at a labelled decade, and the title says the bars start there
        assert!(svg.contains("log scale from 10k"), "{svg}");
        for inst in results.submissions.iter().flat_map(|s| &s.instances) {
            for o in &inst.ops {
                if let Some(c) = o.cycles() {
                    let v = ngcc_pipe::report::format::cycles(c);
                    assert!(svg.contains(&format!(">{v}</text>")), "{} {v}", inst.id);
                }
            }
        }
        let sc = size_scatter(&results, spread, layout).unwrap();
        assert!(sc.contains("ML-KEM-512-clean (cat. 1)"));
        if layout == Layout::Wide {
            assert!(svg.contains("(bars start there)"));
            assert!(sc.contains(
                "pk + ct bytes against decapsulation mean cycles; labels give the NIST category"
            ));
        }
    }
}
