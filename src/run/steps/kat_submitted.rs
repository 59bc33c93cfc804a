//! `kat submitted=`: the package's own KAT files are the expected answer.
//!
//! NIST's `PQCgenKAT_kem` writes `# <CRYPTO_ALGNAME>`, a blank line, then every count
//! followed by a blank line; kem-runner writes the same counts separated by blank lines
//! (PQClean's and liboqs's layouts), so [`nist_text`] turns one into the other. A mode of
//! N counts is compared with the submitted file's first N counts, byte for byte: the
//! submitted file's text up to the end of count N-1 ([`first_counts`]), which is the whole
//! file when N is its count. The file itself must hash to what `kat.sha256` pins for the
//! instance, so a package that changes is noticed instead of trusted again.

use std::collections::BTreeMap;
use std::path::Path;

use kem_native::output::ApiSizes;

use crate::model::Instance;
use crate::record::{KatModeResult, KatStatus, RspDiff, SubmittedKat};
use crate::run::keys::sha256_hex;

/// The text `PQCgenKAT_kem` writes for the counts of a kem-runner `.rsp` (counts separated
/// by a blank line, none after the last).
pub fn nist_text(algname: &str, runner_text: &str) -> String {
    format!("# {algname}\n\n{runner_text}\n")
}

/// The submitted file's path for `inst` (relative to the source root), its `{pk}`, `{sk}`,
/// `{ct}`, `{ss}` filled with api.h's sizes.
pub fn submitted_path(inst: &Instance, api: &ApiSizes) -> Option<Result<String, String>> {
    let text = inst.kat_submitted.as_ref()?;
    let sizes: BTreeMap<String, String> = [
        ("pk", api.pk),
        ("sk", api.sk),
        ("ct", api.ct),
        ("ss", api.ss),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Some(
        crate::dsl::parse_template(text)
            .and_then(|t| t.expand(&sizes))
            .map_err(|e| e.message),
    )
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
            seen += 1;
        }
        offset += line.len();
    }
    (&text[..end], seen)
}

/// The verdict on one mode.
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

/// Compares `generated` (NIST format, `counts` counts) with the submitted file of `inst`
/// under `root`; `pin` is the SHA-256 `kat.sha256` gives for the instance.
pub fn judge(
    root: &Path,
    inst: &Instance,
    api: &ApiSizes,
    generated: &str,
    counts: u32,
    pin: Option<&str>,
    manifest_name: &str,
) -> Verdict {
    let rel = match submitted_path(inst, api) {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            return Verdict::fail(KatStatus::Fail, format!("bad `kat submitted=`: {e}"))
        }
        None => {
            return Verdict::fail(
                KatStatus::Nokat,
                "no submitted KAT file named for this instance".to_string(),
            )
        }
    };
    let path = root.join(&rel);
    // The submitter's file: read only where it resolves inside the source tree.
    let bytes = match crate::safe_fs::read_within(root, &path, crate::safe_fs::OUTPUT_CAP) {
        Ok(b) => b,
        Err(e) => {
            return Verdict::fail(
                KatStatus::Fail,
                format!("cannot read the submitted KAT file `{rel}`: {e}"),
            )
        }
    };
    let sha = sha256_hex(&bytes);
    let text = String::from_utf8_lossy(&bytes);
    let (expected, in_file) = first_counts(&text, counts);
    let submitted = SubmittedKat {
        file: rel.clone(),
        sha256: sha.clone(),
        counts: in_file,
        compared: counts.min(in_file),
    };
    let with = |mut v: Verdict| {
        v.submitted = Some(submitted.clone());
        v
    };
    match pin {
        None => {
            return with(Verdict::fail(
                KatStatus::Nokat,
                format!("no SHA-256 pinning the submitted file `{rel}` in {manifest_name}"),
            ))
        }
        Some(p) if p != sha => {
            return with(Verdict::fail(
                KatStatus::Mismatch,
                format!(
                    "the submitted file `{rel}` has SHA-256 {sha} but {manifest_name} pins {p}: the package changed since it was pinned"
                ),
            ))
        }
        Some(_) => {}
    }
    let expected_sha256 = Some(sha256_hex(expected.as_bytes()));
    let part = if counts == in_file {
        String::new()
    } else {
        format!(" (its first {} of {in_file} counts)", counts.min(in_file))
    };
    if generated == expected {
        return with(Verdict {
            status: KatStatus::Pass,
            reason: None,
            diff: None,
            expected_sha256,
            submitted: None,
        });
    }
    let (reason, diff) = match crate::rsp::compare(generated, expected) {
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
    with(Verdict {
        status: KatStatus::Mismatch,
        reason: Some(reason),
        diff,
        expected_sha256,
        submitted: None,
    })
}

/// The name for the `# <name>` line: api.h's `CRYPTO_ALGNAME`, else (an api.h without
/// one) the submitted file's own first line, which `ngcc-pipe import` chose the file by.
/// Returns the name and, when it came from the file, a line saying so.
pub fn header_name(
    root: &Path,
    inst: &Instance,
    api: &ApiSizes,
) -> Result<(String, Option<String>), String> {
    if let Some(a) = &api.algname {
        return Ok((a.clone(), None));
    }
    let missing = "api.h defines no CRYPTO_ALGNAME";
    let rel = match submitted_path(inst, api) {
        Some(Ok(r)) => r,
        _ => {
            return Err(format!(
                "{missing} and no submitted KAT file gives the name: the `# <name>` line that starts NIST's KAT files cannot be written"
            ))
        }
    };
    let bytes = crate::safe_fs::read_within(root, &root.join(&rel), crate::safe_fs::OUTPUT_CAP)
        .map_err(|e| format!("{missing}, and the submitted KAT file `{rel}` that would give the name cannot be read: {e}"))?;
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let name = String::from_utf8_lossy(first)
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
#[allow(clippy::too_many_arguments)]
pub fn apply(
    r: &mut KatModeResult,
    rsp: &Path,
    root: &Path,
    inst: &Instance,
    api: &ApiSizes,
    counts: u32,
    pin: Option<&str>,
    manifest_name: &str,
) -> Option<String> {
    let (alg, said) = match header_name(root, inst, api) {
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
    let v = judge(root, inst, api, &nist, counts, pin, manifest_name);
    r.status = v.status;
    r.reason = v.reason;
    r.diff = v.diff;
    r.expected_sha256 = v.expected_sha256;
    r.submitted = v.submitted;
    said
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn pins_and_compares_the_submitted_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("KAT")).unwrap();
        let good = nist_text("Toy", &runner(3));
        let bad = good.replacen("ss = 02", "ss = 03", 1);
        std::fs::write(d.path().join("KAT/PQCkemKAT_9.rsp"), &bad).unwrap();
        let api = ApiSizes {
            algname: Some("Toy".into()),
            pk: 1,
            sk: 9,
            ct: 1,
            ss: 1,
        };
        let sha = sha256_hex(bad.as_bytes());
        let v = judge(d.path(), &inst(), &api, &good, 3, Some(&sha), "kat.sha256");
        assert_eq!(v.status, KatStatus::Mismatch);
        let diff = v.diff.unwrap();
        assert_eq!((diff.count, diff.field.as_str(), diff.offset), (2, "ss", 0));
        // The first count alone agrees.
        let one = nist_text("Toy", &runner(1));
        let v = judge(d.path(), &inst(), &api, &one, 1, Some(&sha), "kat.sha256");
        assert_eq!(v.status, KatStatus::Pass, "{:?}", v.reason);
        assert_eq!(v.submitted.unwrap().compared, 1);
        // A pin of another file: the package changed.
        let v = judge(
            d.path(),
            &inst(),
            &api,
            &one,
            1,
            Some(&"0".repeat(64)),
            "kat.sha256",
        );
        assert_eq!(v.status, KatStatus::Mismatch);
        assert!(v.reason.unwrap().contains("the package changed"));
        let v = judge(d.path(), &inst(), &api, &one, 1, None, "kat.sha256");
        assert_eq!(v.status, KatStatus::Nokat);
    }

    #[test]
    fn the_header_name_comes_from_the_submitted_file_without_algname() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("KAT")).unwrap();
        let file = nist_text("Toy-9", &runner(2));
        std::fs::write(d.path().join("KAT/PQCkemKAT_9.rsp"), &file).unwrap();
        let mut api = ApiSizes {
            algname: Some("Toy".into()),
            pk: 1,
            sk: 9,
            ct: 1,
            ss: 1,
        };
        assert_eq!(
            header_name(d.path(), &inst(), &api).unwrap(),
            ("Toy".to_string(), None)
        );
        api.algname = None;
        let (name, said) = header_name(d.path(), &inst(), &api).unwrap();
        assert_eq!(name, "Toy-9");
        assert!(said.unwrap().contains("KAT/PQCkemKAT_9.rsp"));
        // So the generated file is the submitted one, byte for byte.
        assert_eq!(nist_text(&name, &runner(2)), file);
        std::fs::write(d.path().join("KAT/PQCkemKAT_9.rsp"), runner(2)).unwrap();
        let e = header_name(d.path(), &inst(), &api).unwrap_err();
        assert!(e.contains("does not start with a `# <name>` line"), "{e}");
        let mut none = inst();
        none.kat_submitted = None;
        assert!(header_name(d.path(), &none, &api).is_err());
    }
}
