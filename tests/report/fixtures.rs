//! The two systems' records (x86 and arm) and the fixture files written from them.

use super::*;

pub(crate) fn api(pk: u64, sk: u64, ct: u64, ss: u64) -> ApiSizes {
    ApiSizes {
        algname: None,
        pk,
        sk,
        ct,
        ss,
    }
}

pub(crate) fn cat(pk: u64, ct: u64) -> CatalogSizes {
    CatalogSizes {
        pk: Some(pk),
        sk: None,
        ct: Some(ct),
        ss: None,
    }
}

pub(crate) fn mlkem(ctx: &mut Ctx, scale: f64, unstable: Option<Op>) {
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

pub(crate) fn x86_records() -> Ctx {
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

pub(crate) fn arm_records() -> Ctx {
    let mut ctx = Ctx {
        system: "arm_1",
        arm: true,
        out: Vec::new(),
    };
    mlkem(&mut ctx, 1.9, None);
    ctx
}

pub(crate) fn campaign_record(ctx: &Ctx, arch: &str) -> CampaignRecord {
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

pub(crate) fn json(v: &impl serde::Serialize) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).unwrap();
    b.push(b'\n');
    b
}

/// Every fixture file (relative to FIXTURES) and its bytes.
pub(crate) fn fixture_files() -> Vec<(PathBuf, Vec<u8>)> {
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

pub(crate) fn write_fixtures_to(dir: &Path) {
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
