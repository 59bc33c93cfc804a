//! `survey`: which symmetric code the built object really contains — source hits,
//! symbols defined outside the provided library, and whether anything reaches them.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::{Done, KindSpec, Step, StepError};
use crate::record::StepData;
use crate::survey::SurveyInput;

/// The `survey` kind: per instance.
pub struct Kind;

impl KindSpec for Kind {
    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }
}

fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let (_, build) = match step.build() {
        Ok(b) => b,
        Err(e) => return e.into(),
    };
    let source = match step.source() {
        Ok(s) => s,
        Err(e) => return e.into(),
    };
    let sub = step.submission();
    let inst = step.instance();
    let root = source.root;
    // Extra sources from the provided tree (e.g. PQClean's common/keccak4x) are provided
    // code, not the submission's own.
    let provided_dir = |p: &PathBuf| {
        sub.primitives
            .includes
            .iter()
            .any(|inc| p.starts_with(root.join(inc)))
    };
    let mut instance_objects = Vec::new();
    let mut primitive_objects: Vec<PathBuf> = build
        .primitive_objects
        .iter()
        .map(|o| ctx.out.join(o))
        .collect();
    let mut primitive_sources: Vec<PathBuf> = sub
        .primitives
        .sources
        .iter()
        .map(|s| root.join(s))
        .collect();
    for (src, obj) in &build.objects {
        if provided_dir(src) {
            primitive_objects.push(ctx.out.join(obj));
            primitive_sources.push(src.clone());
        } else {
            instance_objects.push((src.clone(), ctx.out.join(obj)));
        }
    }
    let compiled: BTreeSet<PathBuf> = instance_objects.iter().map(|(s, _)| s.clone()).collect();
    // Every file of the instance folder, compiled or not (dead files are evidence too),
    // but those the harness replaces (`api "nist"`: the package's rng.c, PQCgenKAT_kem.c).
    let inst_dir = root.join(&inst.dir);
    let replaced: Vec<&PathBuf> = build.left_out.iter().map(|(f, _)| f).collect();
    let mut instance_sources: Vec<PathBuf> = std::fs::read_dir(&inst_dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && is_code(p) && !replaced.contains(&p))
                .collect()
        })
        .unwrap_or_default();
    instance_sources.extend(
        compiled
            .iter()
            .filter(|p| !p.starts_with(&inst_dir))
            .cloned(),
    );
    instance_sources.sort();
    let input = SurveyInput {
        root: root.clone(),
        instance_sources,
        compiled,
        primitive_sources,
        instance_objects,
        primitive_objects,
        primitives: sub.primitives.functions.clone(),
        api_symbols: ["crypto_kem_keypair", "crypto_kem_enc", "crypto_kem_dec"]
            .iter()
            .map(|f| format!("{}{f}", inst.namespace))
            .collect(),
        namespace: inst.namespace.clone(),
    };
    match crate::survey::survey(&input) {
        Ok(data) => Done::ok(StepData::Survey(data)),
        Err(e) => StepError::from(e).into(),
    }
}

/// Files worth scanning for symmetric-crypto code (not licences, Makefiles, data).
fn is_code(p: &std::path::Path) -> bool {
    matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("c" | "h" | "S" | "s" | "inc" | "cc" | "cpp" | "hpp" | "asm")
    )
}
