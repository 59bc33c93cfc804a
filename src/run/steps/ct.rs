//! `ct` (per instance and operation, parallel): the constant-time check. kem-runner's `ct`
//! job runs the operation `iters` times on the build's valgrind object under
//! `valgrind --tool=memcheck`, with the secrets marked undefined (see `kem_native::ct`);
//! memcheck's XML output becomes findings ([`crate::ct`]) labelled with the manifest's
//! `ct-benign` reasons. The raw XML is kept beside the step's log. Without valgrind the step
//! is `unsupported`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::valgrind_object::valgrind;
use super::{Done, KindSpec, Step, Stop};
use crate::ct::Finding;
use crate::graph::Node;
use crate::model::{Campaign, Op, StepKind, StepScope, StepSpec};
use crate::record::{Status, StepData, StepRecord};
use crate::run::exec::{self, Exit};
use crate::run::keys::Facts;

/// The `ct` kind: per instance and operation, on the valgrind object; its records under
/// `ct/` (`ct/<sub>/<instance>__<op>.json`).
pub struct Kind;

impl KindSpec for Kind {
    fn name(&self) -> &'static str {
        "ct"
    }

    fn scope(&self) -> StepScope {
        StepScope::Operation
    }

    fn data_needs(&self) -> &'static [StepKind] {
        &[StepKind::Build]
    }

    fn props(&self) -> &'static [&'static str] {
        &["ops", "iters", "memory"]
    }

    fn record_dir(&self) -> &'static str {
        "ct"
    }

    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        _spec: &StepSpec,
        _facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        m.insert("kem-native".into(), crate::run::keys::native());
        m.insert(
            "valgrind".into(),
            valgrind()
                .map_or("missing", |v| v.version.as_str())
                .to_string(),
        );
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

    fn evidence(&self, rec: &StepRecord, op: Option<Op>, path: PathBuf) -> Vec<(String, PathBuf)> {
        let op = op.map_or("", Op::name);
        let mut rows = vec![(format!("constant-time check {op}"), path)];
        if let Some(StepData::Ct(d)) = &rec.data {
            rows.push((format!("memcheck XML {op}"), d.raw_log.clone()));
        }
        rows
    }
}

/// What a `ct` record holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CtData {
    /// Operations run under memcheck with the secrets marked.
    pub runs: u32,
    /// What was secret and what declassified, in words (from kem-runner).
    pub marked: String,
    /// The valgrind object, relative to the output folder, and its flags.
    pub object: PathBuf,
    pub flags: Vec<String>,
    /// `valgrind --version`.
    pub valgrind: String,
    /// memcheck's XML output, relative to the output folder.
    pub raw_log: PathBuf,
    /// Secret-dependent branches and indexes inside the object, by location.
    pub findings: Vec<Finding>,
    /// `no secret-dependent branch or index found` / `N locations` (with the benign count).
    pub verdict: String,
    /// Other memcheck errors inside the run (invalid reads, ...), by kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_errors: BTreeMap<String, u64>,
    /// Secret-dependent reports with no frame in the object (the runner's own code).
    #[serde(default)]
    pub outside_object: u64,
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

fn run(step: &mut Step) -> Result<Done, Stop> {
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
    let (_, build) = step.build().map_err(Stop::failed)?;
    let object_rel = build
        .valgrind_object
        .clone()
        .ok_or_else(|| Stop::failed("the build made no valgrind object"))?;
    let object = ctx.out.join(&object_rel);
    let object_name = object
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let op = step.node.op.expect("ct is per operation");
    let runs = ctx.spec(step.node.kind).expect("declared").params.iters;
    let runs = u32::try_from(runs.max(1)).unwrap_or(u32::MAX);

    let logs = Path::new("logs").join(step.slug());
    let mut log = step
        .open_log(logs.join(format!("ct__{op}.log")))
        .map_err(|e| Stop::failed(e.to_string()))?;
    let scratch = step.scratch(&format!("ct__{op}"))?;
    let xml = scratch.join("memcheck.xml");
    let api_h = std::path::absolute(&build.api_h).unwrap_or_else(|_| build.api_h.clone());
    let mut args = memcheck_args(&xml);
    args.push(ctx.runner.display().to_string());
    args.extend([
        "ct".into(),
        "--lib".into(),
        object.display().to_string(),
        "--api".into(),
        api_h.display().to_string(),
        "--ns".into(),
        build.namespace.clone(),
        "--op".into(),
        op.name().into(),
        "--runs".into(),
        runs.to_string(),
    ]);
    let jail = step.runner_jail(&object, &build.api_h, &scratch);
    let out = step.exec_contained(&vg.path, &args, &jail, &mut log, &|_| {});
    // Keep the raw XML whatever happened, then drop the scratch folder.
    let raw_rel = logs.join(format!("ct__{op}.memcheck.xml"));
    let kept = std::fs::copy(&xml, ctx.out.join(&raw_rel)).is_ok();
    step.drop_scratch(&scratch);
    let out = out.map_err(|e| Stop::failed(format!("cannot run valgrind: {e}")))?;
    if kept {
        step.artefacts.push(raw_rel.clone());
    }
    let record: kem_native::ct::CtOutput = match &out.exit {
        Exit::Code(0) => super::parse_runner(&out).map_err(Stop::failed)?,
        Exit::TimedOut => return Err(Stop::timed_out(step.timeout_text())),
        Exit::Code(1) => {
            return Err(
                match super::parse_runner::<kem_native::ct::CtOutput>(&out) {
                    Ok(r) if r.failure.is_some() => {
                        Stop::failed(format!("{op}: {}", r.failure.unwrap_or_default()))
                    }
                    _ => Stop::failed(format!("{op}: exit code 1; {}", exec::tail(&out.stderr, 3))),
                },
            )
        }
        Exit::Signal(_) => {
            return Err(Stop::failed(format!(
                "{op} under memcheck: {} ({}); {}",
                out.exit.describe(),
                step.limits_note(),
                exec::tail(&out.stderr, 3)
            )))
        }
        other => {
            return Err(Stop::failed(format!(
                "{op} under memcheck: {}; {}",
                other.describe(),
                exec::tail(&out.stderr, 3)
            )))
        }
    };
    if !kept {
        return Err(Stop::failed("memcheck wrote no XML output"));
    }
    let text = std::fs::read_to_string(ctx.out.join(&raw_rel))
        .map_err(|e| Stop::failed(format!("{}: {e}", raw_rel.display())))?;
    let m = crate::ct::parse_memcheck_xml(&text, &object_name).map_err(Stop::failed)?;
    if !m.finished {
        return Err(Stop::failed(
            "memcheck's XML output has no final status (valgrind stopped early)",
        ));
    }
    let mut findings = m.findings;
    crate::ct::classify(
        &mut findings,
        &step.submission().ct_benign,
        &build.namespace,
    );
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
        })),
    })
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
}
