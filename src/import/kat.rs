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
    /// The secret key's size: the one in its name (`PQCkemKAT_<sk>.rsp`), else its first
    /// record's `sk` (a file named otherwise, `KATs/<param>/<param>_kat.rsp`).
    pub sk: u64,
    /// Its `# <name>` line, if any.
    pub algname: Option<String>,
    /// SHA-256 of the file.
    pub sha256: String,
}

/// Every KAT file in the package, sorted by path: each `PQCkemKAT_<n>.rsp`, and each other
/// `.rsp` whose first record has an `sk` (hashed in pieces; one that cannot be read is
/// named by the package's `skipped`).
pub fn kat_files(pkg: &Package) -> Vec<KatFile> {
    let mut out = Vec::new();
    for rel in pkg.walk() {
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        let Some(stem) = name.strip_suffix(".rsp") else {
            continue;
        };
        let named = stem
            .strip_prefix("PQCkemKAT_")
            .and_then(|n| n.parse::<u64>().ok());
        let mut sizes = FirstRecord::default();
        let Some((first, sha256)) = pkg.digest(&rel, &mut |piece| sizes.feed(piece)) else {
            continue;
        };
        let Some(sk) = named.or(sizes.sk()) else {
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

/// Whether the file lies in a folder named `param` (`KAT/crypto_kem/<param>/...`) or is
/// named after it (`<param>_kat.rsp`).
fn in_folder(f: &KatFile, param: &str) -> bool {
    let path = Path::new(&f.rel);
    path.parent()
        .is_some_and(|d| d.components().any(|c| c.as_os_str() == param))
        || path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(param))
}

/// The sizes of a `.rsp` file's first record, read as the file streams by: the number of
/// hex digits of its `pk`, `sk`, `ct` and `ss` lines, halved.
#[derive(Default)]
struct FirstRecord {
    /// The line's start, up to its ` = ` (bounded).
    key: Vec<u8>,
    /// The field being counted and its hex digits so far.
    counting: Option<(usize, u64)>,
    sizes: [Option<u64>; 4],
    /// The second record began (or the line was not a record's).
    done: bool,
}

impl FirstRecord {
    const FIELDS: [&'static str; 4] = ["pk", "sk", "ct", "ss"];

    fn feed(&mut self, piece: &[u8]) {
        for &b in piece {
            if self.done {
                return;
            }
            if b == b'\n' {
                if let Some((i, n)) = self.counting.take() {
                    self.sizes[i] = Some(n / 2);
                }
                self.key.clear();
                continue;
            }
            if let Some((_, n)) = self.counting.as_mut() {
                *n += u64::from(b.is_ascii_hexdigit());
                continue;
            }
            if self.key.len() < 16 {
                self.key.push(b);
            }
            if b == b'=' {
                let key = String::from_utf8_lossy(&self.key[..self.key.len() - 1]);
                let key = key.trim();
                if key == "count" && self.sizes.iter().any(Option::is_some) {
                    self.done = true;
                } else if let Some(i) = Self::FIELDS.iter().position(|f| *f == key) {
                    self.counting = self.sizes[i].is_none().then_some((i, 0));
                }
            }
        }
    }

    /// The first record's secret-key size, if it had one.
    fn sk(&self) -> Option<u64> {
        self.sizes[1].filter(|&n| n > 0)
    }
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
    if !param.is_empty() && !parts[last].starts_with("PQCkemKAT_") {
        // A file named after its parameter set (`kyber768_kat.rsp`).
        parts[last] = parts[last].replace(param, "{param}");
    }
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

    #[test]
    fn a_file_named_otherwise_is_sized_by_its_first_record_in_any_pieces() {
        let text = "# kyber768\n\ncount = 0\nseed = 0011\npk = 00112233\nsk = 0011223344556677\n\
                    ct = aabb\nss = ccddeeff\n\ncount = 1\nsk = 00\n";
        for piece in [1, 3, 7, text.len()] {
            let mut r = FirstRecord::default();
            for chunk in text.as_bytes().chunks(piece) {
                r.feed(chunk);
            }
            assert_eq!(
                r.sizes,
                [Some(4), Some(8), Some(2), Some(4)],
                "pieces of {piece}"
            );
            assert_eq!(r.sk(), Some(8));
        }
        let mut none = FirstRecord::default();
        none.feed(b"# notes\nnothing = here\n");
        assert_eq!(none.sk(), None);
        // Named after the parameter set: its name becomes `{param}`; in its folder.
        assert_eq!(
            template_of("KATs/kyber768/kyber768_kat.rsp", "kyber768", 2400),
            "KATs/{param}/{param}_kat.rsp"
        );
        let named = f("KATs/ref/kyber768_kat.rsp", 2400, "x", "a");
        assert!(in_folder(&named, "kyber768") && !in_folder(&named, "kyber512"));
    }
}
