//! `kat submitted=`: the package's own KAT files are the expected answer.
//!
//! NIST's `PQCgenKAT_kem` writes `# <CRYPTO_ALGNAME>`, a blank line, then every count
//! followed by a blank line; kem-runner writes the same counts separated by blank lines
//! (PQClean's and liboqs's layouts), so [`nist_text`] turns one into the other. The file
//! itself must hash to what `kat.sha256` pins for the instance, so a package that changes is
//! noticed instead of trusted again.
//!
//! `single` compares the header and count 0 with the file's first count. `all` compares
//! every count of the file, byte for byte: the generator is asked for as many counts as the
//! file holds ([`Submitted::all_counts`]: at least the manifest's `all-count`, at most
//! [`MAX_CHECKED`] unless the manifest declares more), so a file with more or fewer counts
//! than the generator wrote is a MISMATCH naming the first extra or missing count, and a
//! file beyond the bound is a MISMATCH saying which counts were not checked. An `all` mode
//! the pipeline reduced (`all-count` in the step's `instances` block) compares its counts
//! and is NOKAT when the file holds more: it never passes on counts it did not check.

use std::path::Path;

use kem_native::output::ApiSizes;

use crate::model::{Instance, KatMode};
use crate::record::{KatModeResult, KatStatus, RspDiff, SubmittedKat};
use crate::run::keys::sha256_hex;

/// Counts of a submitted file the `all` mode checks at most (unless the manifest's
/// `all-count` is larger): ten times the 100 that NIST's `PQCgenKAT_kem` writes, so any
/// package's file is checked whole, while a file of a million counts cannot make the step
/// generate a million (it is a MISMATCH naming the counts not checked).
pub const MAX_CHECKED: u32 = 1000;

/// The text `PQCgenKAT_kem` writes for the counts of a kem-runner `.rsp` (counts separated
/// by a blank line, none after the last).
pub fn nist_text(algname: &str, runner_text: &str) -> String {
    format!("# {algname}\n\n{runner_text}\n")
}

/// The first `n` counts of an `.rsp` text (with its header) and the number of counts it
/// holds: the text up to the line of count `n`, or all of it.
pub fn first_counts(text: &str, n: u32) -> (&str, u32) {
    let mut seen = 0u32;
    let mut end = text.len();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        if t.starts_with("count") && t[5..].trim_start().starts_with('=') {
            if seen == n && end == text.len() {
                end = offset;
            }
            seen = seen.saturating_add(1);
        }
        offset += line.len();
    }
    (&text[..end], seen)
}

/// The verdict on one mode.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub status: KatStatus,
    pub reason: Option<String>,
    pub diff: Option<RspDiff>,
    /// SHA-256 of the part of the submitted file compared.
    pub expected_sha256: Option<String>,
    pub submitted: Option<SubmittedKat>,
}

impl Verdict {
    fn fail(status: KatStatus, reason: String) -> Verdict {
        Verdict {
            status,
            reason: Some(reason),
            diff: None,
            expected_sha256: None,
            submitted: None,
        }
    }
}

/// One instance's submitted file, read once for all its modes.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// Relative to the source root.
    pub rel: String,
    pub text: String,
    pub sha256: String,
    /// Counts it holds.
    pub counts: u32,
}

/// The submitted file of `inst` under `root`, or the verdict every mode gets without it
/// (no file named: NOKAT; a bad template or an unreadable file: FAIL).
pub fn load(root: &Path, inst: &Instance, api: &ApiSizes) -> Result<Submitted, Box<Verdict>> {
    let rel = match crate::dsl::submitted_kat_path(inst, api) {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            return Err(Box::new(Verdict::fail(
                KatStatus::Fail,
                format!("bad `kat submitted=`: {e}"),
            )))
        }
        None => {
            return Err(Box::new(Verdict::fail(
                KatStatus::Nokat,
                "no submitted KAT file named for this instance".to_string(),
            )))
        }
    };
    // The submitter's file: read only where it resolves inside the source tree.
    let bytes = crate::safe_fs::read_within(root, &root.join(&rel), crate::safe_fs::OUTPUT_CAP)
        .map_err(|e| {
            Box::new(Verdict::fail(
                KatStatus::Fail,
                format!("cannot read the submitted KAT file `{rel}`: {e}"),
            ))
        })?;
    let sha256 = sha256_hex(&bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let counts = first_counts(&text, 0).1;
    Ok(Submitted {
        rel,
        text,
        sha256,
        counts,
    })
}

impl Submitted {
    /// Whether `kat.sha256` pins this very file.
    pub fn pinned(&self, pin: Option<&str>) -> bool {
        pin == Some(self.sha256.as_str())
    }

    /// Counts the `all` mode asks the generator for: the file's own count, but at least
    /// `declared` (the manifest's `all-count`: a file with fewer is missing counts) and at
    /// most [`MAX_CHECKED`] or `declared` if larger; a KAT the pipeline `reduced` keeps
    /// its count.
    pub fn all_counts(&self, declared: u32, reduced: bool) -> u32 {
        if reduced {
            declared
        } else {
            self.counts.clamp(declared, declared.max(MAX_CHECKED))
        }
    }
}

/// What a mode is judged against: the instance's submitted file and its pin.
pub struct Against<'a> {
    pub api: &'a ApiSizes,
    pub file: &'a Result<Submitted, Box<Verdict>>,
    /// The SHA-256 `kat.sha256` gives for the instance.
    pub pin: Option<&'a str>,
    /// `kat.sha256`'s file name, for reasons.
    pub manifest_name: &'a str,
    /// The pipeline reduced the `all` mode's counts (`all-count` in the step's block).
    pub reduced: bool,
}

/// Compares `generated` (NIST format, `counts` counts of `mode`) with the submitted file.
pub fn judge(a: &Against<'_>, generated: &str, counts: u32, mode: KatMode) -> Verdict {
    let file = match a.file {
        Ok(f) => f,
        Err(v) => return (**v).clone(),
    };
    let (rel, in_file) = (&file.rel, file.counts);
    let common = counts.min(in_file);
    let with = |mut v: Verdict| {
        v.submitted = Some(SubmittedKat {
            file: rel.clone(),
            sha256: file.sha256.clone(),
            counts: in_file,
            compared: common,
        });
        v
    };
    let manifest_name = a.manifest_name;
    match a.pin {
        None => {
            return with(Verdict::fail(
                KatStatus::Nokat,
                format!("no SHA-256 pinning the submitted file `{rel}` in {manifest_name}"),
            ))
        }
        Some(p) if p != file.sha256 => {
            return with(Verdict::fail(
                KatStatus::Mismatch,
                format!(
                    "the submitted file `{rel}` has SHA-256 {} but {manifest_name} pins {p}: the package changed since it was pinned",
                    file.sha256
                ),
            ))
        }
        Some(_) => {}
    }
    let expected_sha256 = Some(sha256_hex(first_counts(&file.text, counts).0.as_bytes()));
    let verdict = |status, reason: Option<String>, diff| {
        with(Verdict {
            status,
            reason,
            diff,
            expected_sha256: expected_sha256.clone(),
            submitted: None,
        })
    };
    // The counts both hold, byte for byte.
    let (theirs, mine) = (
        first_counts(&file.text, common).0,
        first_counts(generated, common).0,
    );
    if theirs != mine {
        let part = if common == in_file {
            String::new()
        } else {
            format!(" (its first {common} of {in_file} counts)")
        };
        let (reason, diff) = match crate::rsp::compare(mine, theirs) {
            Ok(Some(d)) => (
                format!(
                    "differs from the submitted file `{rel}`{part}: {}",
                    d.message
                ),
                Some(d.diff),
            ),
            Ok(None) => (
                format!("differs from the submitted file `{rel}`{part}"),
                None,
            ),
            Err(e) => (
                format!("cannot compare with the submitted file `{rel}`: {e}"),
                None,
            ),
        };
        return verdict(KatStatus::Mismatch, Some(reason), diff);
    }
    let at = |field: &str| {
        Some(RspDiff {
            count: common,
            field: field.to_string(),
            offset: 0,
        })
    };
    match counts.cmp(&in_file) {
        std::cmp::Ordering::Equal => verdict(KatStatus::Pass, None, None),
        // `single` claims count 0 only.
        std::cmp::Ordering::Less if mode == KatMode::Single => verdict(KatStatus::Pass, None, None),
        std::cmp::Ordering::Less if a.reduced => verdict(
            KatStatus::Nokat,
            Some(format!(
                "reduced by the pipeline to {counts} counts, which agree with the submitted file `{rel}`; its other {} counts (from count {counts}) were not checked",
                in_file - counts
            )),
            None,
        ),
        std::cmp::Ordering::Less => verdict(
            KatStatus::Mismatch,
            Some(format!(
                "the submitted file `{rel}` has {in_file} counts; at most {MAX_CHECKED} are checked (the first {counts} agree): count {counts} and the {} after it NOT CHECKED",
                in_file - counts - 1
            )),
            at("count (extra in the submitted file, not checked)"),
        ),
        std::cmp::Ordering::Greater => verdict(
            KatStatus::Mismatch,
            Some(format!(
                "the submitted file `{rel}` has {in_file} counts, fewer than the {counts} of `all-count`: count {in_file} is missing from it"
            )),
            at("count (missing in the submitted file)"),
        ),
    }
}

/// The name for the `# <name>` line: api.h's `CRYPTO_ALGNAME`, else (an api.h without
/// one) the submitted file's own first line, which `ngcc-pipe import` chose the file by.
/// Returns the name and, when it came from the file, a line saying so.
pub fn header_name(
    api: &ApiSizes,
    file: &Result<Submitted, Box<Verdict>>,
) -> Result<(String, Option<String>), String> {
    if let Some(a) = &api.algname {
        return Ok((a.clone(), None));
    }
    let missing = "api.h defines no CRYPTO_ALGNAME";
    let file = match file {
        Ok(f) => f,
        Err(v) if v.status == KatStatus::Nokat => {
            return Err(format!(
                "{missing} and no submitted KAT file gives the name: the `# <name>` line that starts NIST's KAT files cannot be written"
            ))
        }
        Err(v) => {
            return Err(format!(
                "{missing}, and the submitted KAT file that would give the name fails: {}",
                v.reason.as_deref().unwrap_or_default()
            ))
        }
    };
    let rel = &file.rel;
    let first = file.text.split('\n').next().unwrap_or_default();
    let name = first
        .strip_prefix("# ")
        .map(|n| n.trim_end_matches('\r').to_string())
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| {
            format!("{missing}, and the submitted KAT file `{rel}` does not start with a `# <name>` line: NIST's header cannot be written")
        })?;
    let said = format!(
        "{missing}: the header's name `{name}` is the first line of the submitted file `{rel}`"
    );
    Ok((name, Some(said)))
}

/// Rewrites the kept `.rsp` (kem-runner's layout) in NIST's format and judges `r` against
/// the submitted file: status, reason, difference, the hashes and the file compared.
/// Returns where the header's name came from when it is not api.h (for the step's log).
pub fn apply(r: &mut KatModeResult, rsp: &Path, a: &Against<'_>) -> Option<String> {
    let (alg, said) = match header_name(a.api, a.file) {
        Ok(n) => n,
        Err(e) => {
            r.status = KatStatus::Fail;
            r.reason = Some(e);
            return None;
        }
    };
    let text = match crate::safe_fs::read_text(rsp, crate::safe_fs::OUTPUT_CAP) {
        Ok(t) => t,
        Err(e) => {
            r.status = KatStatus::Fail;
            r.reason = Some(format!("cannot read {}: {e}", rsp.display()));
            return said;
        }
    };
    let nist = nist_text(&alg, &text);
    if let Err(e) = std::fs::write(rsp, &nist) {
        r.status = KatStatus::Fail;
        r.reason = Some(format!("cannot write {}: {e}", rsp.display()));
        return said;
    }
    r.actual_sha256 = Some(sha256_hex(nist.as_bytes()));
    let v = judge(a, &nist, r.counts, r.mode);
    r.status = v.status;
    r.reason = v.reason;
    r.diff = v.diff;
    r.expected_sha256 = v.expected_sha256;
    r.submitted = v.submitted;
    said
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn runner(counts: u32) -> String {
        (0..counts)
            .map(|c| format!("count = {c}\nseed = 0{c}\npk = AA\nsk = BB\nct = CC\nss = 0{c}\n"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn nist_layout_is_header_counts_and_blank_lines() {
        let n = nist_text("Toy", &runner(2));
        assert!(n.starts_with("# Toy\n\ncount = 0\n"));
        assert!(n.ends_with("ss = 01\n\n"));
        assert!(n.contains("ss = 00\n\ncount = 1\n"));
        let (first, all) = first_counts(&n, 1);
        assert_eq!(all, 2);
        assert_eq!(first, nist_text("Toy", &runner(1)));
        assert_eq!(first_counts(&n, 2).0, n);
        assert_eq!(first_counts(&n, 5), (n.as_str(), 2));
    }

    fn inst() -> Instance {
        Instance {
            id: "T".into(),
            dir: "d".into(),
            namespace: String::new(),
            cflags: vec![],
            extra_sources: vec![],
            requires_cpu: vec![],
            exclude: vec![],
            libraries: vec![],
            kat_submitted: Some("KAT/PQCkemKAT_{sk}.rsp".into()),
            vars: BTreeMap::new(),
            origin: Default::default(),
            nist_category: None,
        }
    }

    fn api() -> ApiSizes {
        ApiSizes {
            algname: Some("Toy".into()),
            pk: 1,
            sk: 9,
            ct: 1,
            ss: 1,
        }
    }

    /// A source root holding `text` as the instance's submitted file, and the file loaded.
    fn submitted(text: &str) -> (tempfile::TempDir, Result<Submitted, Box<Verdict>>) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("KAT")).unwrap();
        std::fs::write(d.path().join("KAT/PQCkemKAT_9.rsp"), text).unwrap();
        let file = load(d.path(), &inst(), &api());
        (d, file)
    }

    fn against<'a>(api: &'a ApiSizes, file: &'a Result<Submitted, Box<Verdict>>) -> Against<'a> {
        Against {
            api,
            file,
            pin: file.as_ref().ok().map(|f| f.sha256.as_str()),
            manifest_name: "kat.sha256",
            reduced: false,
        }
    }

    #[test]
    fn pins_and_compares_the_submitted_file() {
        let good = nist_text("Toy", &runner(3));
        let bad = good.replacen("ss = 02", "ss = 03", 1);
        let (_d, file) = submitted(&bad);
        let api = api();
        let a = against(&api, &file);
        let v = judge(&a, &good, 3, KatMode::All);
        assert_eq!(v.status, KatStatus::Mismatch);
        let diff = v.diff.unwrap();
        assert_eq!((diff.count, diff.field.as_str(), diff.offset), (2, "ss", 0));
        // The first count alone agrees: `single` claims no more.
        let one = nist_text("Toy", &runner(1));
        let v = judge(&a, &one, 1, KatMode::Single);
        assert_eq!(v.status, KatStatus::Pass, "{:?}", v.reason);
        assert_eq!(v.submitted.unwrap().compared, 1);
        // A pin of another file: the package changed.
        let zeros = "0".repeat(64);
        let other = Against {
            pin: Some(&zeros),
            ..against(&api, &file)
        };
        let v = judge(&other, &one, 1, KatMode::Single);
        assert_eq!(v.status, KatStatus::Mismatch);
        assert!(v.reason.unwrap().contains("the package changed"));
        let unpinned = Against {
            pin: None,
            ..against(&api, &file)
        };
        assert_eq!(
            judge(&unpinned, &one, 1, KatMode::Single).status,
            KatStatus::Nokat
        );
    }

    /// A file of 1,000,000 counts, the first 100 right, gave `all PASS` with 100 compared.
    #[test]
    fn all_compares_every_count_of_the_file() {
        let api = api();
        // 5 counts, the last 2 wrong, with a manifest all-count of 3: the generator is asked
        // for 5 and count 3 is named.
        let mut text = nist_text("Toy", &runner(3));
        text.push_str("count = 3\nseed = 03\npk = AA\nsk = BB\nct = CC\nss = FF\n\n");
        text.push_str("count = 4\nseed = 04\npk = AA\nsk = BB\nct = CC\nss = FF\n\n");
        let (_d, file) = submitted(&text);
        let f = file.as_ref().unwrap();
        assert_eq!(f.counts, 5);
        let counts = f.all_counts(3, false);
        assert_eq!(counts, 5);
        let a = against(&api, &file);
        let v = judge(&a, &nist_text("Toy", &runner(counts)), counts, KatMode::All);
        assert_eq!(v.status, KatStatus::Mismatch);
        let d = v.diff.unwrap();
        assert_eq!((d.count, d.field.as_str()), (3, "ss"));
        assert_eq!(v.submitted.unwrap().compared, 5);
        // Fewer counts than the manifest declares: the first missing count is named.
        let (_d, short) = submitted(&nist_text("Toy", &runner(2)));
        assert_eq!(short.as_ref().unwrap().all_counts(3, false), 3);
        let v = judge(
            &against(&api, &short),
            &nist_text("Toy", &runner(3)),
            3,
            KatMode::All,
        );
        assert_eq!(v.status, KatStatus::Mismatch);
        let d = v.diff.unwrap();
        assert_eq!(d.count, 2);
        assert!(v.reason.unwrap().contains("count 2 is missing"), "{:?}", d);
        // More counts than declared, all right: every one compared, PASS.
        let (_d, long) = submitted(&nist_text("Toy", &runner(7)));
        let n = long.as_ref().unwrap().all_counts(3, false);
        assert_eq!(n, 7);
        let v = judge(
            &against(&api, &long),
            &nist_text("Toy", &runner(n)),
            n,
            KatMode::All,
        );
        assert_eq!(v.status, KatStatus::Pass, "{:?}", v.reason);
        // A pipeline-reduced KAT checks its counts only, so it does not pass.
        let reduced = Against {
            reduced: true,
            ..against(&api, &long)
        };
        assert_eq!(long.as_ref().unwrap().all_counts(3, true), 3);
        let v = judge(&reduced, &nist_text("Toy", &runner(3)), 3, KatMode::All);
        assert_eq!(v.status, KatStatus::Nokat);
        assert!(v.reason.unwrap().contains("other 4 counts"));
    }

    #[test]
    fn beyond_the_bound_is_a_mismatch_naming_what_was_not_checked() {
        let api = api();
        let all = MAX_CHECKED + 2;
        let (_d, file) = submitted(&nist_text("Toy", &runner(all)));
        let f = file.as_ref().unwrap();
        let counts = f.all_counts(100, false);
        assert_eq!(counts, MAX_CHECKED);
        // A manifest declaring more is checked up to its own count.
        assert_eq!(f.all_counts(all + 5, false), all + 5);
        let v = judge(
            &against(&api, &file),
            &nist_text("Toy", &runner(counts)),
            counts,
            KatMode::All,
        );
        assert_eq!(v.status, KatStatus::Mismatch);
        let reason = v.reason.unwrap();
        assert!(
            reason.contains(&format!(
                "has {all} counts; at most {MAX_CHECKED} are checked"
            )) && reason.contains("NOT CHECKED"),
            "{reason}"
        );
        assert_eq!(v.diff.unwrap().count, MAX_CHECKED);
        assert_eq!(v.submitted.unwrap().compared, MAX_CHECKED);
    }

    #[test]
    fn the_header_name_comes_from_the_submitted_file_without_algname() {
        let file = nist_text("Toy-9", &runner(2));
        let (_d, loaded) = submitted(&file);
        let mut api = api();
        assert_eq!(
            header_name(&api, &loaded).unwrap(),
            ("Toy".to_string(), None)
        );
        api.algname = None;
        let (name, said) = header_name(&api, &loaded).unwrap();
        assert_eq!(name, "Toy-9");
        assert!(said.unwrap().contains("KAT/PQCkemKAT_9.rsp"));
        // So the generated file is the submitted one, byte for byte.
        assert_eq!(nist_text(&name, &runner(2)), file);
        let (_d, headless) = submitted(&runner(2));
        let e = header_name(&api, &headless).unwrap_err();
        assert!(e.contains("does not start with a `# <name>` line"), "{e}");
        let mut none = inst();
        none.kat_submitted = None;
        let d = tempfile::tempdir().unwrap();
        assert!(header_name(&api, &load(d.path(), &none, &api)).is_err());
    }
}
