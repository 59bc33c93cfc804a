//! The campaign model of the report fixtures, and the builders of their step records.

use super::*;

// ---------------------------------------------------------------- campaign model

pub(crate) fn steps() -> Vec<StepSpec> {
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

pub(crate) fn instance(id: &str, level: &str, imp: Option<&str>) -> Instance {
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

pub(crate) fn submission(id: &str, algorithm: &str, instances: Vec<Instance>) -> Submission {
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

pub(crate) fn campaign(system: &str, arch: &str, subs: Vec<Submission>) -> Campaign {
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
            compilers: vec![],
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

pub(crate) fn x86_campaign() -> Campaign {
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

pub(crate) fn arm_campaign() -> Campaign {
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

pub(crate) fn environment(arm: bool) -> Environment {
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

pub(crate) struct Ctx {
    pub(crate) system: &'static str,
    pub(crate) arm: bool,
    pub(crate) out: Vec<(PathBuf, StepRecord)>,
}

#[allow(clippy::too_many_arguments)] // a record is many fields; the test reads best with them inline
pub(crate) fn base_record(
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

pub(crate) fn push(ctx: &mut Ctx, r: StepRecord) {
    let path = record::record_path(r.kind, &r.submission, r.instance.as_deref(), r.op);
    ctx.out.push((path, r));
}

/// Deterministic per-op cycles of one trial around `base`.
pub(crate) fn time_output(
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

pub(crate) struct Inst<'a> {
    pub(crate) sub: &'a str,
    pub(crate) id: &'a str,
    pub(crate) api: ApiSizes,
    pub(crate) catalog: CatalogSizes,
    pub(crate) kat: KatStatus,
    pub(crate) kat_reason: Option<&'a str>,
    pub(crate) base: [f64; 3],
    pub(crate) unstable_op: Option<Op>,
    pub(crate) outlier_op: Option<Op>,
    pub(crate) hash: [f64; 3],
    pub(crate) verdict: Verdict,
    pub(crate) static_bytes: u64,
}

pub(crate) fn hexish(seed: &str) -> String {
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
