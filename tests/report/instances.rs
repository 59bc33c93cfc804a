//! One instance's step records, as a run would write them.

use super::*;

pub(crate) fn add_instance(ctx: &mut Ctx, i: &Inst) {
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
        cc_path: None,
        cc_target: None,
        valgrind_debug: None,
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
        executable_stack: None,
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
