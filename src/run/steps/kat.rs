//! `kat`: generate the NIST `.rsp` text with kem-runner for each configured mode, hash it
//! and compare with the submission's `kat.sha256`: PASS, MISMATCH, NOKAT or FAIL. With a
//! reference `.rsp` on disk, a mismatch names the first differing count, field and offset.
//! When the campaign profiles, the wrapped object's single KAT must equal the plain one's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::runner_job::{crashed_in, parse_runner};
use super::{Done, JobError, KindSpec, RunnerJob, Step, StepError};
use crate::graph::Node;
use crate::model::{Campaign, Instance, KatMode, Source, StepKind, StepSpec, Submission};
use crate::record::{
    BuildData, KatData, KatModeResult, KatOutput, KatStatus, ProfileKatCheck, Status, StepData,
};
use crate::run::exec::Exit;
use crate::run::keys::{file_hash, json, native, sha256_hex, tree_input, Facts};
use crate::run::Ctx;

/// A line of `kat.sha256` that is not `<sha256>  <name>`.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// No separator.
    #[error("line {0}: expected `<sha256>  <name>`")]
    Line(usize),
    /// Not 64 hex digits.
    #[error("line {line}: `{hash}` is not a SHA-256 hex digest")]
    Digest {
        /// 1-based line.
        line: usize,
        /// What stands there.
        hash: String,
    },
}

/// Why one KAT mode failed (the mode's reason; the step goes on with the next mode).
#[derive(Debug, thiserror::Error)]
pub enum KatError {
    /// The runner ended without a record.
    #[error(transparent)]
    Job(#[from] JobError),
    /// Success claimed, but the `.rsp` file is not there.
    #[error(
        "kem-runner reported success but its .rsp file cannot be read ({0}); record not trusted"
    )]
    Unreadable(crate::safe_fs::FileError),
    /// Not text.
    #[error("the .rsp file is not UTF-8 text")]
    NotUtf8,
    /// Not `.rsp` text.
    #[error("the .rsp file does not parse: {0}")]
    Parse(String),
    /// Fewer or more counts than asked for.
    #[error("the .rsp file holds {got} counts, {want} expected")]
    Counts {
        /// Counts in the file.
        got: usize,
        /// Counts asked for.
        want: u32,
    },
    /// A field of another size than api.h declares.
    #[error(
        "the .rsp file's count {count} has {field} of {} bytes, api.h declares {want}",
        got.map_or("no".to_string(), |g| g.to_string())
    )]
    FieldSize {
        /// The count.
        count: u32,
        /// `pk`, `sk`, `ct`, `ss`.
        field: &'static str,
        /// Its length, if present.
        got: Option<u64>,
        /// api.h's size.
        want: u64,
    },
    /// The record's hash is not the file's.
    #[error("kem-runner's record claims sha256 {claimed} but the .rsp file hashes to {actual}; record not trusted")]
    Forged {
        /// The record's.
        claimed: String,
        /// The file's.
        actual: String,
    },
    /// The file cannot be moved to the outputs.
    #[error("cannot keep the .rsp file: {0}")]
    Keep(std::io::Error),
    /// The KEM crashed (`at` names the call, from the runner's stderr).
    #[error("crashed{at}: {exit} ({limits})")]
    Crashed {
        /// ` in crypto_kem_enc in count 3`, or empty.
        at: String,
        /// The signal, in words.
        exit: String,
        /// The limits the process had.
        limits: String,
    },
    /// A runner error (exit 2 and its stderr line).
    #[error("kem-runner failed ({exit}): {tail}")]
    Runner {
        /// The exit, in words.
        exit: String,
        /// The last lines of stderr.
        tail: String,
    },
}

/// Expected hashes from a sha256sum-format file: name -> lower-case hex. Lines starting
/// with `#` and blank lines are ignored; `*name` (binary marker) is accepted.
pub fn parse_sha256_manifest(text: &str) -> Result<BTreeMap<String, String>, ManifestError> {
    let mut map = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (hash, name) = line
            .split_once(char::is_whitespace)
            .ok_or(ManifestError::Line(n + 1))?;
        let name = name.trim_start().trim_start_matches('*').trim();
        if hash.len() != 64 || !hash.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(ManifestError::Digest {
                line: n + 1,
                hash: crate::text::excerpt(hash, 16),
            });
        }
        map.insert(name.to_string(), hash.to_ascii_lowercase());
    }
    Ok(map)
}

/// The name a mode's hash has in `kat.sha256`: `<instance>` or `<instance>.all`.
pub fn manifest_name(instance: &str, mode: KatMode) -> String {
    match mode {
        KatMode::Single => instance.to_string(),
        KatMode::All => format!("{instance}.all"),
    }
}

fn rsp_name(instance: &str, mode: KatMode, suffix: &str) -> String {
    match mode {
        KatMode::Single => format!("{instance}{suffix}.rsp"),
        KatMode::All => format!("{instance}{suffix}.all.rsp"),
    }
}

/// Check the `.rsp` file a runner job left and return its SHA-256, computed here: the
/// runner's record is not trusted (the KEM runs in the same process and could forge it).
/// The file must exist, parse, hold `counts` entries with pk/sk/ct/ss of the sizes api.h
/// declares, and hash to what the record claims.
fn verify_rsp(
    rsp: &Path,
    claimed: &KatOutput,
    counts: u32,
    build: &BuildData,
) -> Result<String, KatError> {
    let bytes =
        crate::safe_fs::read(rsp, crate::safe_fs::OUTPUT_CAP).map_err(KatError::Unreadable)?;
    let sha = sha256_hex(&bytes);
    let text = String::from_utf8(bytes).map_err(|_| KatError::NotUtf8)?;
    let entries = crate::rsp::parse_rsp(&text).map_err(KatError::Parse)?;
    if entries.len() != counts as usize {
        return Err(KatError::Counts {
            got: entries.len(),
            want: counts,
        });
    }
    let api = &build.api;
    for e in &entries {
        for (field, want) in [
            ("pk", api.pk),
            ("sk", api.sk),
            ("ct", api.ct),
            ("ss", api.ss),
        ] {
            let got = e.field(field).map(|v| v.len() as u64);
            if got != Some(want) {
                return Err(KatError::FieldSize {
                    count: e.count,
                    field,
                    got,
                    want,
                });
            }
        }
    }
    if sha != claimed.rsp_sha256 {
        return Err(KatError::Forged {
            claimed: claimed.rsp_sha256.clone(),
            actual: sha,
        });
    }
    Ok(sha)
}

/// The last two lines the KEM itself wrote on stderr (not the runner's `calling ...`
/// lines), each cut at 200 characters, for the reason of a failed KAT.
fn kem_said(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(kem_native::kat::CALLING))
        .map(|l| crate::text::excerpt(l, 200))
        .collect();
    (!lines.is_empty()).then(|| lines[lines.len().saturating_sub(2)..].join(" / "))
}

/// One runner KAT job, in the sandbox, writing into a scratch folder; the `.rsp` is
/// checked and moved to `rsp`. Ok(output) when the runner produced its record (success or
/// a misbehaving KEM; on success `rsp_sha256` is the engine's own hash of the file),
/// Err(done) for crashes, timeouts and runner errors.
#[allow(clippy::too_many_arguments)]
fn run_kat(
    step: &mut Step,
    object: &Path,
    build: &BuildData,
    mode: KatMode,
    counts: u32,
    rsp: &Path,
    log: &mut crate::run::exec::Log,
) -> Result<Result<KatOutput, KatError>, StepError> {
    let _ = std::fs::remove_file(rsp);
    let job = RunnerJob::new(step, "kat", object, build)?;
    let written = job.scratch().join(rsp.file_name().unwrap_or_default());
    let job = job
        .opt("rng", step.submission().kat.rng.name())
        .opt("mode", mode.name())
        .opt("counts", counts)
        .opt("out", written.display());
    job.run(step, log, &|_| {}, |step, out, _| match &out.exit {
        Exit::Code(0) | Exit::Code(1) => Ok(parse_runner::<KatOutput>(&out)
            .map_err(KatError::from)
            .and_then(|mut o| {
                if let (Some(f), Some(said)) = (&mut o.failure, kem_said(&out.stderr)) {
                    let _ = write!(f, "; the KEM wrote: {said}");
                }
                if o.failure.is_none() {
                    o.rsp_sha256 = verify_rsp(&written, &o, counts, build)?;
                    std::fs::rename(&written, rsp)
                        .or_else(|_| std::fs::copy(&written, rsp).map(|_| ()))
                        .map_err(KatError::Keep)?;
                    o.rsp_path = rsp.display().to_string();
                }
                Ok(o)
            })),
        Exit::TimedOut => Err(StepError::TimedOut(step.timeout_text())),
        Exit::Signal(_) => Ok(Err(KatError::Crashed {
            at: crashed_in(&out.stderr),
            exit: out.exit.describe(),
            limits: step.limits_note(),
        })),
        other => Ok(Err(KatError::Runner {
            exit: other.describe(),
            tail: crate::run::exec::tail(&out.stderr, 3),
        })),
    })
}

/// The `kat` kind: per instance.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        spec: &StepSpec,
        _facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        let sub = &c.submissions[node.submission];
        m.insert("kat".into(), json(&sub.kat));
        let settings = super::instance_settings(c, spec, node);
        if let Some(n) = settings.and_then(|s| s.all_count) {
            m.insert("all-count".into(), n.to_string());
        }
        if let Some(modes) = settings.and_then(|s| s.kat_modes.as_ref()) {
            m.insert("modes".into(), json(modes));
        }
        m.insert("expected".into(), file_hash(&sub.kat.manifest));
        if let Some(dir) = &sub.kat.reference_dir {
            m.insert("reference".into(), tree_input(dir));
        }
        // The submitted files of a folder source (an archive's are pinned by its digest):
        // the folder the instance's file lies in.
        let inst = node.instance.map(|i| &sub.instances[i]);
        if let (Source::Path { path }, Some(t)) =
            (&sub.source, inst.and_then(|i| i.kat_submitted.as_deref()))
        {
            let fixed = &t[..t.find('{').unwrap_or(t.len())];
            let dir = path.join(fixed);
            let dir = if fixed.ends_with('/') {
                dir
            } else {
                dir.parent().map(Path::to_path_buf).unwrap_or(dir)
            };
            m.insert("submitted".into(), tree_input(&dir));
        }
        m.insert("kem-native".into(), native());
    }

    fn run(&self, step: &mut Step) -> Done {
        kat(step).unwrap_or_else(Done::from)
    }
}

/// Counts of the `all` mode for one instance: the kat step's `instances` entry's
/// `all-count` when one matches, else the manifest's.
pub fn all_count_of(ctx: &Ctx, sub: &Submission, inst: &Instance) -> u32 {
    ctx.spec(StepKind::Kat)
        .and_then(|s| s.settings_for(&sub.id, &inst.id))
        .and_then(|s| s.all_count)
        .unwrap_or(sub.kat.all_count)
}

/// What every mode of one KAT step is generated and judged with.
struct Modes<'a> {
    object: PathBuf,
    build: &'a BuildData,
    kat_dir: PathBuf,
    /// `kat.sha256`: name -> SHA-256.
    expected: BTreeMap<String, String>,
    /// The instance's submitted file (`kat submitted=`), if the submission names them.
    submitted: Option<Result<super::kat_submitted::Submitted, Box<super::kat_submitted::Verdict>>>,
    /// Counts of the `all` mode the manifest or the pipeline declares.
    declared: u32,
    /// The pipeline asks for fewer counts than the manifest declares (a reduced full KAT).
    reduced: bool,
}

fn kat(step: &mut Step) -> Result<Done, StepError> {
    let ctx = step.ctx;
    let sub = step.submission();
    let inst = step.instance();
    let (_, build) = step.build()?;
    let spec = ctx.spec(StepKind::Kat);
    let modes = spec
        .and_then(|s| s.settings_for(&sub.id, &inst.id))
        .and_then(|s| s.kat_modes.clone())
        .or_else(|| spec.map(|s| s.params.kat_modes.clone()))
        .unwrap_or_default();
    // The submission's file, read only where it resolves inside its own folder.
    let manifest_dir = sub.kat.manifest.parent().unwrap_or(Path::new("."));
    let expected = match crate::safe_fs::read_within(manifest_dir, &sub.kat.manifest, 1 << 20)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
    {
        Ok(t) => parse_sha256_manifest(&t).map_err(|e| StepError::Parse {
            what: sub.kat.manifest.display().to_string(),
            source: e.into(),
        })?,
        Err(e) if e.is_missing() => BTreeMap::new(),
        Err(e) => return Err(e.into()),
    };
    let kat_dir = ctx.out.join("kat").join(&sub.id);
    std::fs::create_dir_all(&kat_dir).map_err(StepError::File)?;
    let log_rel = PathBuf::from("kat")
        .join(&sub.id)
        .join(format!("{}.log", inst.id));
    let mut log = step.open_log(log_rel.clone()).map_err(StepError::File)?;
    let declared = all_count_of(ctx, sub, inst);
    // With `kat submitted=`, the package's own files (under the source root) are the answer.
    let submitted = if sub.kat.submitted {
        Some(super::kat_submitted::load(
            &step.source()?.root,
            inst,
            &build.api,
        ))
    } else {
        None
    };
    let plan = Modes {
        object: ctx.out.join(&build.object),
        build: &build,
        kat_dir,
        expected,
        submitted,
        declared,
        reduced: declared < sub.kat.all_count,
    };
    let mut results = Vec::new();
    let mut single_sha = None;
    for mode in modes {
        let (r, runner_sha) = run_mode(step, &plan, mode, &mut log)?;
        if mode == KatMode::Single {
            single_sha = runner_sha;
        }
        results.push(r);
    }
    let profile_object_kat = profile_check(step, &plan, single_sha.as_deref(), &mut log)?;
    drop(log);
    let log_sha256 = sha256_hex(&std::fs::read(ctx.out.join(&log_rel)).unwrap_or_default());
    let (status, reason) = step_verdict(&results, profile_object_kat.as_ref());
    Ok(Done {
        status,
        reason,
        data: Some(StepData::Kat(KatData {
            modes: results,
            log_sha256,
            profile_object_kat,
        })),
    })
}

/// One mode generated, checked and judged; with the SHA-256 of the runner's own `.rsp`
/// text when it generated every count (the profile object's KAT must match it).
fn run_mode(
    step: &mut Step,
    plan: &Modes<'_>,
    mode: KatMode,
    log: &mut crate::run::exec::Log,
) -> Result<(KatModeResult, Option<String>), StepError> {
    let ctx = step.ctx;
    let (sub, inst) = (step.submission(), step.instance());
    let pin = plan.expected.get(inst.manifest_id()).map(String::as_str);
    let counts = match (mode, &plan.submitted) {
        (KatMode::Single, _) => 1,
        // Every count of a pinned submitted file is compared (up to a bound).
        (KatMode::All, Some(Ok(f))) if f.pinned(pin) => f.all_counts(plan.declared, plan.reduced),
        (KatMode::All, _) => plan.declared,
    };
    let rsp = plan.kat_dir.join(rsp_name(&inst.id, mode, ""));
    // The manifest's `all` hash is for its `all-count` counts; a KAT the pipeline
    // reduced has none to compare with.
    let reduced_hash = mode == KatMode::All && counts != sub.kat.all_count;
    let want = plan
        .expected
        .get(&manifest_name(inst.manifest_id(), mode))
        .filter(|_| !reduced_hash)
        .cloned();
    let res = run_kat(step, &plan.object, plan.build, mode, counts, &rsp, log)?;
    if rsp.is_file() {
        step.artefacts.push(ctx.rel(&rsp));
    }
    let mut r = KatModeResult {
        mode,
        status: KatStatus::Fail,
        counts,
        expected_sha256: want.clone(),
        actual_sha256: None,
        rsp: Some(ctx.rel(&rsp)),
        reason: None,
        diff: None,
        submitted: None,
        fresh_dec: None,
    };
    let mut runner_sha = None;
    match res {
        Err(reason) => r.reason = Some(reason.to_string()),
        Ok(out) => {
            r.actual_sha256 = Some(out.rsp_sha256.clone());
            if let Some(f) = out.failure {
                r.reason = Some(f);
            } else {
                runner_sha = Some(out.rsp_sha256.clone());
                if let Some(file) = &plan.submitted {
                    let manifest_shown = sub.kat.manifest.file_name().unwrap_or_default();
                    let against = super::kat_submitted::Against {
                        api: &plan.build.api,
                        file,
                        pin,
                        manifest_name: &manifest_shown.to_string_lossy(),
                        reduced: plan.reduced,
                    };
                    if let Some(said) = super::kat_submitted::apply(&mut r, &rsp, &against) {
                        let _ = writeln!(log, "# {said}");
                    }
                } else {
                    judge_hash(&mut r, &out, want, reduced_hash, sub, inst, &rsp);
                }
                if r.status != KatStatus::Fail {
                    super::kat_dec::check(step, &plan.object, plan.build, &mut r, &rsp, log)?;
                }
            }
        }
    }
    let _ = writeln!(
        log,
        "# {} KAT ({} counts): {:?}{}",
        mode.name(),
        counts,
        r.status,
        r.reason
            .as_deref()
            .map(|s| format!(" — {s}"))
            .unwrap_or_default()
    );
    Ok((r, runner_sha))
}

/// The profile variant must compute exactly what the plain object computes: its single
/// KAT against the plain one's (`single_sha`), when the build made one.
fn profile_check(
    step: &mut Step,
    plan: &Modes<'_>,
    single_sha: Option<&str>,
    log: &mut crate::run::exec::Log,
) -> Result<Option<ProfileKatCheck>, StepError> {
    let (Some(prof), Some(sha)) = (&plan.build.profile_object, single_sha) else {
        return Ok(None);
    };
    let ctx = step.ctx;
    let rsp = plan
        .kat_dir
        .join(rsp_name(&step.instance().id, KatMode::Single, ".prof"));
    let res = run_kat(
        step,
        &ctx.out.join(prof),
        plan.build,
        KatMode::Single,
        1,
        &rsp,
        log,
    )?;
    if rsp.is_file() {
        step.artefacts.push(ctx.rel(&rsp));
    }
    let got = match res {
        Ok(out) if out.failure.is_none() => out.rsp_sha256,
        Ok(out) => format!("failed: {}", out.failure.unwrap_or_default()),
        Err(e) => format!("failed: {e}"),
    };
    let _ = writeln!(log, "# profile object KAT: {got} (plain {sha})");
    Ok(Some(ProfileKatCheck {
        equal: got == sha,
        sha256: got,
    }))
}

/// The step's status and reason from its modes: the first FAIL, else the first MISMATCH,
/// else a profile object that differs; NOKAT modes are named in an `ok` step's reason.
fn step_verdict(
    results: &[KatModeResult],
    profile: Option<&ProfileKatCheck>,
) -> (Status, Option<String>) {
    let first = |status: KatStatus| results.iter().find(|r| r.status == status);
    if let Some(r) = first(KatStatus::Fail).or_else(|| first(KatStatus::Mismatch)) {
        return (
            Status::Failed,
            Some(format!(
                "{} ({}): {}",
                r.status.name(),
                r.mode.name(),
                r.reason.clone().unwrap_or_default()
            )),
        );
    }
    if profile.is_some_and(|p| !p.equal) {
        return (
            Status::Failed,
            Some("the profile (wrapped) object's KAT differs from the plain object's".to_string()),
        );
    }
    let nokat: Vec<&str> = results
        .iter()
        .filter(|r| r.status == KatStatus::Nokat)
        .map(|r| r.mode.name())
        .collect();
    (
        Status::Ok,
        (!nokat.is_empty()).then(|| format!("NOKAT ({}): no expected hash", nokat.join(", "))),
    )
}

/// A mode's verdict against the hash in `kat.sha256` (`want`); with a reference `.rsp`
/// beside it, a mismatch names the first difference.
fn judge_hash(
    r: &mut KatModeResult,
    out: &KatOutput,
    want: Option<String>,
    reduced: bool,
    sub: &Submission,
    inst: &Instance,
    rsp: &Path,
) {
    let counts = r.counts;
    let mode = r.mode;
    match want {
        None if reduced => {
            r.status = KatStatus::Nokat;
            r.reason = Some(format!(
                "reduced by the pipeline to {counts} counts (the manifest's \
                                 all-count is {}): no expected hash for {counts} counts",
                sub.kat.all_count
            ));
        }
        None => {
            r.status = KatStatus::Nokat;
            r.reason = Some(format!(
                "no expected hash for `{}` in {}",
                manifest_name(inst.manifest_id(), mode),
                sub.kat
                    .manifest
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
            ));
        }
        Some(w) if w == out.rsp_sha256 => r.status = KatStatus::Pass,
        Some(w) => {
            r.status = KatStatus::Mismatch;
            let mut reason = format!("sha256 {} != expected {}", out.rsp_sha256, w);
            if let Some(dir) = &sub.kat.reference_dir {
                let reference = dir.join(rsp_name(inst.manifest_id(), mode, ""));
                if let (Ok(gen), Ok(refr)) = (
                    crate::safe_fs::read_text(rsp, crate::safe_fs::OUTPUT_CAP),
                    crate::safe_fs::read_within(dir, &reference, crate::safe_fs::OUTPUT_CAP)
                        .map(|b| String::from_utf8_lossy(&b).into_owned()),
                ) {
                    match crate::rsp::first_difference(&gen, &refr) {
                        Ok(Some(d)) => {
                            let _ = write!(
                                reason,
                                "; first difference from {}: count {}, field {}, byte offset {}",
                                reference.display(),
                                d.count,
                                d.field,
                                d.offset
                            );
                            r.diff = Some(d);
                        }
                        Ok(None) => {
                            let _ = write!(
                                reason,
                                "; identical to {} (the expected hash is wrong?)",
                                reference.display()
                            );
                        }
                        Err(e) => {
                            let _ = write!(
                                reason,
                                "; cannot compare with {}: {e}",
                                reference.display()
                            );
                        }
                    }
                }
            }
            r.reason = Some(reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sha256sum_files() {
        let h = "a".repeat(64);
        let text = format!(
            "# comment\n{h}  ML-KEM-512-clean\n\n{}  *ML-KEM-512-clean.all\n",
            "B".repeat(64)
        );
        let m = parse_sha256_manifest(&text).unwrap();
        assert_eq!(m["ML-KEM-512-clean"], h);
        assert_eq!(m["ML-KEM-512-clean.all"], "b".repeat(64));
        assert!(parse_sha256_manifest("xyz  a\n")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
        assert!(parse_sha256_manifest("nohash\n")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
    }

    #[test]
    fn names_modes() {
        assert_eq!(manifest_name("X", KatMode::All), "X.all");
        assert_eq!(rsp_name("X", KatMode::All, ".prof"), "X.prof.all.rsp");
        assert_eq!(rsp_name("X", KatMode::Single, ""), "X.rsp");
    }
}
