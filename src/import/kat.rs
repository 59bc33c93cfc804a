//! The package's KAT files (`PQCkemKAT_<sk>.rsp`, anywhere under the package, usually
//! `KAT/crypto_kem/<param>/`), matched to parameter sets by `CRYPTO_ALGNAME` (the file's
//! `# <name>` line) and the secret-key size in the file name, not by folder name.

use std::path::Path;

use super::read::Package;

/// One submitted KAT file.
#[derive(Debug, Clone)]
pub struct KatFile {
    /// Relative to the package root.
    pub rel: String,
    /// The size in its name.
    pub sk: u64,
    /// Its `# <name>` line, if any.
    pub algname: Option<String>,
    /// SHA-256 of the file.
    pub sha256: String,
}

/// Every `PQCkemKAT_<n>.rsp` in the package, sorted by path (hashed in pieces; one that
/// cannot be read is named by the package's `skipped`).
pub fn kat_files(pkg: &Package) -> Vec<KatFile> {
    let mut out = Vec::new();
    for rel in pkg.walk() {
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        let Some(sk) = name
            .strip_prefix("PQCkemKAT_")
            .and_then(|r| r.strip_suffix(".rsp"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let Some((first, sha256)) = pkg.digest(&rel) else {
            continue;
        };
        let algname = first.trim().strip_prefix('#').map(|n| n.trim().to_string());
        out.push(KatFile {
            rel,
            sk,
            algname,
            sha256,
        });
    }
    out
}

/// The file for a parameter set named `param` with `CRYPTO_ALGNAME` `algname` and secret
/// keys of `sk` bytes, or why none was chosen. Without a `CRYPTO_ALGNAME` the file is
/// chosen by size and folder alone ([`by_size`]) and the decision is returned with it;
/// with sizes unknown (a TODO), by `CRYPTO_ALGNAME` alone.
pub fn choose<'a>(
    files: &'a [KatFile],
    param: &str,
    algname: Option<&str>,
    sk: Option<u64>,
) -> Result<(&'a KatFile, Option<String>), String> {
    let (alg, sk) = match (algname, sk) {
        (None, Some(sk)) => return by_size(files, param, sk).map(|(f, note)| (f, Some(note))),
        (None, None) => {
            return Err(
                "api.h's sizes are unknown and it defines no CRYPTO_ALGNAME: name the file with `kat-submitted` in a `when` block".into(),
            )
        }
        (Some(alg), sk) => (alg, sk),
    };
    let sized = |f: &&KatFile| sk.is_none_or(|n| f.sk == n);
    let found: Vec<&KatFile> = files
        .iter()
        .filter(sized)
        .filter(|f| f.algname.as_deref() == Some(alg))
        .collect();
    let size = sk.map_or_else(|| "any size".to_string(), |n| format!("size {n}"));
    match found.as_slice() {
        [] => {
            let same_sk: Vec<&str> = files.iter().filter(sized).map(|f| f.rel.as_str()).collect();
            Err(match (same_sk.is_empty(), sk) {
                (true, Some(n)) => format!("no PQCkemKAT_{n}.rsp in the package"),
                (true, None) => "no PQCkemKAT_<n>.rsp in the package".to_string(),
                (false, _) => format!(
                    "no KAT file starts with `# {alg}` (files of {size}: {})",
                    same_sk.join(", ")
                ),
            })
        }
        [one] => Ok((one, None)),
        many => one_answer(many, param).map(|f| (f, None)).ok_or_else(|| {
            format!(
                "several different KAT files match `# {alg}` and {size}: {}",
                listed(many)
            )
        }),
    }
}

/// Whether the file lies in a folder named `param` (`KAT/crypto_kem/<param>/...`).
fn in_folder(f: &KatFile, param: &str) -> bool {
    Path::new(&f.rel)
        .parent()
        .is_some_and(|d| d.components().any(|c| c.as_os_str() == param))
}

/// Copies of one file are one answer (the one in the parameter set's folder, if any).
fn one_answer<'a>(many: &[&'a KatFile], param: &str) -> Option<&'a KatFile> {
    let first = many.first()?;
    if !many.iter().all(|f| f.sha256 == first.sha256) {
        return None;
    }
    Some(
        many.iter()
            .find(|f| in_folder(f, param))
            .copied()
            .unwrap_or(first),
    )
}

fn listed(files: &[&KatFile]) -> String {
    files
        .iter()
        .map(|f| f.rel.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// For an api.h without `CRYPTO_ALGNAME`: the one `PQCkemKAT_<sk>.rsp` in the parameter
/// set's own KAT folder, else the one of that size in the whole package; the algorithm's
/// name is then its `# <name>` line. Returns the file and the decision, said.
fn by_size<'a>(
    files: &'a [KatFile],
    param: &str,
    sk: u64,
) -> Result<(&'a KatFile, String), String> {
    let sized: Vec<&KatFile> = files.iter().filter(|f| f.sk == sk).collect();
    let own: Vec<&KatFile> = sized
        .iter()
        .copied()
        .filter(|f| in_folder(f, param))
        .collect();
    let (file, how) = if let Some(f) = one_answer(&own, param) {
        (
            f,
            format!("the only one of that size in a folder named `{param}`"),
        )
    } else if let Some(f) = one_answer(&sized, param) {
        (f, "the only one of that size in the package".to_string())
    } else if sized.is_empty() {
        return Err(format!(
            "api.h defines no CRYPTO_ALGNAME, and there is no PQCkemKAT_{sk}.rsp in the package"
        ));
    } else {
        return Err(format!(
            "api.h defines no CRYPTO_ALGNAME, and several different files have size {sk} ({}), none alone in a folder named `{param}`: name the file with `kat-submitted` in a `when` block",
            listed(&sized)
        ));
    };
    let Some(name) = file.algname.as_deref().filter(|n| !n.is_empty()) else {
        return Err(format!(
            "api.h defines no CRYPTO_ALGNAME, and `{}` does not start with a `# <name>` line either, so NIST's header cannot be written",
            file.rel
        ));
    };
    Ok((
        file,
        format!(
            "api.h defines no CRYPTO_ALGNAME: its submitted KAT file is `{}`, {how}; the KAT step takes the algorithm's name `{name}` from that file's first line",
            file.rel
        ),
    ))
}

/// The `kat submitted=` template that gives `rel` for `param` (the parameter set's folder
/// name and the size replaced by `{param}` and `{sk}`), braces escaped. The file's own size
/// is `sk`: it is what api.h's size must be for the template to give this file.
pub fn template_of(rel: &str, param: &str, sk: u64) -> String {
    let esc = rel.replace('{', "{{").replace('}', "}}");
    let mut parts: Vec<String> = esc.split('/').map(str::to_string).collect();
    for p in parts.iter_mut() {
        if p == param {
            *p = "{param}".into();
        }
    }
    let last = parts.len() - 1;
    parts[last] = parts[last].replace(&format!("PQCkemKAT_{sk}.rsp"), "PQCkemKAT_{sk}.rsp");
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(rel: &str, sk: u64, alg: &str, sha: &str) -> KatFile {
        KatFile {
            rel: rel.into(),
            sk,
            algname: Some(alg.into()),
            sha256: sha.into(),
        }
    }

    #[test]
    fn matches_by_name_and_size_not_folder() {
        let files = vec![
            f("KAT/kyber512/PQCkemKAT_1632.rsp", 1632, "ML-KEM-512", "a"),
            f("KAT/kyber768/PQCkemKAT_2400.rsp", 2400, "ML-KEM-768", "b"),
            f("KAT/other/PQCkemKAT_1632.rsp", 1632, "Other-512", "c"),
        ];
        let (got, note) = choose(&files, "ml-kem-512", Some("ML-KEM-512"), Some(1632)).unwrap();
        assert_eq!(got.rel, "KAT/kyber512/PQCkemKAT_1632.rsp");
        assert!(note.is_none());
        // Sizes unknown: by name alone.
        let (got, _) = choose(&files, "ml-kem-768", Some("ML-KEM-768"), None).unwrap();
        assert_eq!(got.sk, 2400);
        assert!(choose(&files, "x", None, None).is_err());
        assert!(choose(&files, "x", Some("ML-KEM-1024"), Some(3168))
            .unwrap_err()
            .contains("no PQCkemKAT_3168"));
        assert_eq!(
            template_of(
                "KAT/crypto_kem/ml-kem-512/PQCkemKAT_1632.rsp",
                "ml-kem-512",
                1632
            ),
            "KAT/crypto_kem/{param}/PQCkemKAT_{sk}.rsp"
        );
    }

    #[test]
    fn without_algname_matches_by_folder_then_by_size() {
        let files = vec![
            f(
                "KAT/crypto_kem/kyber512/PQCkemKAT_1632.rsp",
                1632,
                "Kyber512",
                "a",
            ),
            f(
                "KAT/crypto_kem/other/PQCkemKAT_1632.rsp",
                1632,
                "Other",
                "b",
            ),
            f(
                "KAT/crypto_kem/kyber768/PQCkemKAT_2400.rsp",
                2400,
                "Kyber768",
                "c",
            ),
        ];
        // Two files of that size: the one in the parameter set's own folder.
        let (got, note) = choose(&files, "kyber512", None, Some(1632)).unwrap();
        assert_eq!(got.rel, "KAT/crypto_kem/kyber512/PQCkemKAT_1632.rsp");
        let note = note.unwrap();
        assert!(
            note.contains("folder named `kyber512`") && note.contains("`Kyber512`"),
            "{note}"
        );
        // The only file of that size, whatever its folder.
        let (got, note) = choose(&files, "ml-kem-768", None, Some(2400)).unwrap();
        assert_eq!(got.algname.as_deref(), Some("Kyber768"));
        assert!(note
            .unwrap()
            .contains("only one of that size in the package"));
        // Two of that size, neither in the folder: no guess.
        let e = choose(&files, "kyber1024", None, Some(1632)).unwrap_err();
        assert!(
            e.contains("several different files") && e.contains("other/"),
            "{e}"
        );
        assert!(choose(&files, "x", None, Some(3168))
            .unwrap_err()
            .contains("no PQCkemKAT_3168"));
        // A file without a `# <name>` line gives no name for the header.
        let mut bare = files[2].clone();
        bare.algname = None;
        let e = choose(std::slice::from_ref(&bare), "x", None, Some(2400)).unwrap_err();
        assert!(e.contains("does not start with a `# <name>` line"), "{e}");
    }
}
