//! `ct` (per instance and operation, parallel): the constant-time check. kem-runner's `ct`
//! job runs the operation `iters` times on the build's valgrind object under
//! `valgrind --tool=memcheck`, with the secrets marked undefined (see `kem_native::ct`);
//! memcheck's XML output becomes findings ([`crate::ct`]), each with its source line (a
//! conditional at a line with no branch is labelled as introduced by the compiler) and
//! labelled with the manifest's `ct-benign` reasons. The raw XML is kept beside the step's
//! log. Then the same object is disassembled and every instruction with operand-dependent
//! latency reachable from the operation's API function is listed
//! ([`crate::ct::latency`]). Without valgrind the step is `unsupported`.

use std::collections::BTreeMap;
use std::path::Path;

use super::runner_job::record;
use super::valgrind_object::{valgrind, valgrind_key};
use super::{Done, KindSpec, RunnerJob, Step, StepError, Wrapper};
use crate::ct::latency::{self, Latency, LatencyError};
use crate::graph::Node;
use crate::model::{Campaign, Op, StepSpec};
pub use crate::record::ct::CtData;
use crate::record::{Status, StepData};
use crate::run::keys::Facts;

/// The `ct` kind: per instance and operation, on the valgrind object; its records under
/// `ct/` (`ct/<sub>/<instance>__<op>.json`).
pub struct Kind;

/// The step's own logic version, part of its key: records written by an older logic are
/// re-run (2: the variable-latency scan and the source-line labels).
pub const CT_LOGIC: &str = "2";

/// The API function an operation is scanned from: `<ns>crypto_kem_keypair/enc/dec`.
pub fn api_function(namespace: &str, op: Op) -> String {
    let f = match op {
        Op::Keygen => "keypair",
        Op::Enc => "enc",
        Op::Dec => "dec",
    };
    format!("{namespace}crypto_kem_{f}")
}

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        _spec: &StepSpec,
        _facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        m.insert("ct logic".into(), CT_LOGIC.into());
        m.insert("kem-native".into(), crate::run::keys::native());
        m.insert("valgrind".into(), valgrind_key());
        let sub = &c.submissions[node.submission];
        m.insert(
            "ct-benign".into(),
            crate::run::keys::sha256_hex(
                serde_json::to_string(&sub.ct_benign)
                    .expect("model serializes")
                    .as_bytes(),
            ),
        );
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step).unwrap_or_else(Done::from)
    }
}

/// memcheck's options: XML to `xml`, every error reported, inlined frames named.
pub fn memcheck_args(xml: &Path) -> Vec<String> {
    vec![
        "--tool=memcheck".into(),
        "--xml=yes".into(),
        format!("--xml-file={}", xml.display()),
        "--error-limit=no".into(),
        "--track-origins=no".into(),
        "--read-inline-info=yes".into(),
        "--leak-check=no".into(),
    ]
}

fn run(step: &mut Step) -> Result<Done, StepError> {
    let ctx = step.ctx;
    let vg = valgrind();
    let Some(vg) = vg else {
        return Ok(Done {
            status: Status::Unsupported,
            reason: Some(
                "valgrind is not installed (Debian package `valgrind`): no constant-time check"
                    .into(),
            ),
            data: None,
        });
    };
    let (_, build) = step.build()?;
    let object_rel = build
        .valgrind_object
        .clone()
        .ok_or(StepError::NoVariant("valgrind"))?;
    let object = ctx.out.join(&object_rel);
    let object_name = object
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let op = step.node.op.expect("ct is per operation");
    let runs = ctx.spec(step.node.kind).expect("declared").params.iters;
    let runs = u32::try_from(runs.max(1)).unwrap_or(u32::MAX);

    let name = format!("ct__{op}");
    let mut log = step.job_log(&name)?;
    let job = RunnerJob::new(step, "ct", &object, &build)?;
    let xml = job.scratch().join("memcheck.xml");
    let job = job.opt("op", op.name()).opt("runs", runs).under(Wrapper {
        name: "memcheck",
        tool: "valgrind",
        program: vg.path.clone(),
        options: memcheck_args(&xml),
    });
    let raw_rel = Path::new("logs")
        .join(step.slug())
        .join(format!("ct__{op}.memcheck.xml"));
    let raw = ctx.out.join(&raw_rel);
    let (out, kept) = job.run(step, &mut log, &|_| {}, |_, out, _| {
        // Keep the raw XML whatever happened (read as a file the KEM could have replaced:
        // no link followed, no FIFO or device read); the scratch folder goes next.
        Ok((
            out,
            crate::safe_fs::keep(&xml, &raw, crate::safe_fs::OUTPUT_CAP),
        ))
    })?;
    if kept.is_ok() {
        step.artefacts.push(raw_rel.clone());
    }
    let record: kem_native::ct::CtOutput = record(step, &out, op, Some("memcheck"))?;
    let bytes = match kept {
        Ok(b) => b,
        Err(e) if e.is_missing() => return Err(StepError::NoXml),
        Err(e) => return Err(e.into()),
    };
    let text = String::from_utf8_lossy(&bytes);
    let m = crate::ct::parse_memcheck_xml(&text, &object_name)?;
    if !m.finished {
        return Err(StepError::Unfinished);
    }
    let mut findings = m.findings;
    // Source lines, to tell the compiler's branches from the source's: memcheck names the
    // file by its absolute path when the object's debug info has the folder.
    crate::ct::label_sources(&mut findings, |file| {
        let p = Path::new(file);
        p.is_absolute()
            .then(|| std::fs::read_to_string(p).ok())
            .flatten()
    });
    crate::ct::classify(
        &mut findings,
        &step.submission().ct_benign,
        &build.namespace,
    );
    let latency = scan(step, &object, &object_rel, op, &findings, &build.namespace)?;
    let unexplained = crate::ct::unexplained(&findings);
    let reason = (unexplained > 0).then(|| {
        format!(
            "{unexplained} secret-dependent location{} not declared benign",
            if unexplained == 1 { "" } else { "s" }
        )
    });
    Ok(Done {
        status: Status::Ok,
        reason,
        data: Some(StepData::Ct(CtData {
            runs: record.runs,
            marked: record.marked,
            object: object_rel,
            flags: build.valgrind_flags.clone(),
            valgrind: vg.version.clone(),
            raw_log: raw_rel,
            verdict: crate::ct::verdict(&findings),
            findings,
            other_errors: m.other,
            outside_object: m.outside_object,
            latency: Some(latency),
        })),
    })
}

/// The variable-latency scan of the checked object from the operation's API function,
/// annotated with memcheck's findings and the manifest's `ct-benign` reasons.
fn scan(
    step: &Step,
    object: &Path,
    object_rel: &Path,
    op: Op,
    findings: &[crate::ct::Finding],
    namespace: &str,
) -> Result<Latency, StepError> {
    let bytes = std::fs::read(object).map_err(StepError::io(object_rel))?;
    let error = |source| StepError::Latency {
        object: object_rel.display().to_string(),
        source,
    };
    match latency::scan(&bytes, &api_function(namespace, op)) {
        Ok(mut s) => {
            let root = std::path::absolute(step.source()?.root).map_err(StepError::File)?;
            let sub = step.submission();
            let provided: Vec<_> = sub
                .primitives
                .sources
                .iter()
                .map(|p| root.join(p))
                .collect();
            let known = latency::Known {
                findings,
                benign: &sub.ct_benign,
                namespace,
                provided: &provided,
            };
            latency::annotate(&mut s, &known);
            Ok(Latency::Scanned(s))
        }
        Err(LatencyError::Arch(arch)) => Ok(Latency::NotScanned {
            reason: error(LatencyError::Arch(arch)).to_string(),
        }),
        Err(e) => Err(error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcheck_writes_xml_and_reports_every_error() {
        let a = memcheck_args(Path::new("/s/m.xml"));
        assert!(a.contains(&"--xml-file=/s/m.xml".to_string()));
        assert!(a.contains(&"--error-limit=no".to_string()));
        assert_eq!(a[0], "--tool=memcheck");
    }

    #[test]
    fn api_functions_of_the_operations() {
        let f: Vec<String> = Op::ALL.iter().map(|&o| api_function("NS_", o)).collect();
        assert_eq!(
            f,
            [
                "NS_crypto_kem_keypair",
                "NS_crypto_kem_enc",
                "NS_crypto_kem_dec"
            ]
        );
    }
}
