//! The NIST security category each parameter set claims, for the manifest's `nist-category`
//! lines: from the package where it says (a `#define` such as `NIST_LEVEL 3` or a comment
//! "NIST security category 3" in the parameter set's `api.h` or `params.h`; a README line
//! that names the parameter set and a category), else from a table of well-known parameter
//! set names (Kyber768 and ML-KEM-768 claim category 3). Where neither says, nothing is
//! guessed: the manifest keeps a TODO.

use super::read::{join, Package};
use super::scan::Implementation;

/// Well-known parameter sets (names lower-cased, without `-`, `_` and `.`) and the category
/// their submissions claim. Longer names first where one contains another.
const WELL_KNOWN: &[(&str, u8)] = &[
    ("kyber512", 1),
    ("kyber768", 3),
    ("kyber1024", 5),
    ("mlkem512", 1),
    ("mlkem768", 3),
    ("mlkem1024", 5),
    ("frodokem640", 1),
    ("frodokem976", 3),
    ("frodokem1344", 5),
    ("frodo640", 1),
    ("frodo976", 3),
    ("frodo1344", 5),
    ("hqcrmrs128", 1),
    ("hqcrmrs192", 3),
    ("hqcrmrs256", 5),
    ("hqc128", 1),
    ("hqc192", 3),
    ("hqc256", 5),
    ("bikel1", 1),
    ("bikel3", 3),
    ("bikel5", 5),
    ("mceliece348864", 1),
    ("mceliece460896", 3),
    ("mceliece6688128", 5),
    ("mceliece6960119", 5),
    ("mceliece8192128", 5),
    ("ntruhps2048509", 1),
    ("ntruhps2048677", 3),
    ("ntruhrss701", 3),
    ("ntruhps4096821", 5),
    ("lightsaber", 1),
    ("firesaber", 5),
    ("saber", 3),
];

/// `name` lower-cased, without `-`, `_`, `.` and spaces, except that one between two
/// digits becomes `|` (`Kyber768-90s` -> `kyber768|90s`).
fn squash(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        if "-_. ".contains(*c) {
            let digits = i > 0
                && chars[i - 1].is_ascii_digit()
                && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
            if digits {
                out.push('|');
            }
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// The category of a well-known parameter set name (`kyber768`, `ML-KEM-768`,
/// `FrodoKEM-640-AES`).
pub fn well_known(name: &str) -> Option<u8> {
    let s = squash(name);
    WELL_KNOWN
        .iter()
        .find(|(k, _)| s.starts_with(k) && !s[k.len()..].starts_with(|c: char| c.is_ascii_digit()))
        .map(|(_, c)| *c)
}

/// A category 1..=5 written right after one of `words` in `line` (lower case): `nist
/// security category 3`, `nist_level 3`, `level: 5`.
fn after_word(line: &str, words: &[&str]) -> Option<u8> {
    for w in words {
        let mut from = 0;
        while let Some(i) = line[from..].find(w) {
            let rest = &line[from + i + w.len()..];
            let rest = rest.trim_start_matches(|c: char| " \t:=(\"'".contains(c));
            let mut digits = rest.chars().take_while(|c| c.is_ascii_digit());
            if let (Some(d), None) = (digits.next(), digits.next()) {
                if let Some(n) = d.to_digit(10).filter(|n| (1..=5).contains(n)) {
                    return Some(n as u8);
                }
            }
            from += i + w.len();
        }
    }
    None
}

/// What the headers of the parameter set's folder `dir` say: `#define NIST_LEVEL 3`,
/// `#define CRYPTO_NIST_LEVEL 3`, `/* NIST security category 3 */`.
fn from_headers(pkg: &Package, dir: &str) -> Option<(u8, String)> {
    for h in ["api.h", "params.h"] {
        let Some(text) = pkg.read_text(&join(dir, h)) else {
            continue;
        };
        for line in text.lines() {
            let l = line.to_lowercase();
            let words = [
                "nist_security_level",
                "nist_level",
                "security_category",
                "nist security category",
                "nist security level",
                "nist category",
                "security category",
            ];
            if let Some(c) = after_word(&l, &words) {
                return Some((c, format!("`{h}` of `{dir}` says so")));
            }
        }
    }
    None
}

/// What a README at the package's top says about parameter set `name`: a line naming it
/// and a category.
fn from_readme(pkg: &Package, name: &str) -> Option<(u8, String)> {
    let want = squash(name);
    for f in pkg.list("").files {
        if !f.to_lowercase().starts_with("readme") {
            continue;
        }
        let Some(text) = pkg.read_text(&f) else {
            continue;
        };
        for line in text.lines() {
            let l = line.to_lowercase();
            if !squash(&l).contains(&want) {
                continue;
            }
            if let Some(c) = after_word(&l, &["category", "nist level", "security level"]) {
                return Some((c, format!("`{f}` says so")));
            }
        }
    }
    None
}

/// The category of parameter set `name` (whose folder is `dir`) and where it comes from,
/// when the package or the table says.
pub fn category(pkg: &Package, name: &str, dir: &str) -> Option<(u8, String)> {
    from_headers(pkg, dir)
        .or_else(|| from_readme(pkg, name))
        .or_else(|| well_known(name).map(|c| (c, "a well-known parameter set name".to_string())))
}

/// Each of `params` with its category and where it comes from (from its folder in the
/// first implementation that has it); what was found and what was not goes to `decisions`.
pub fn of_params(
    pkg: &Package,
    impls: &[Implementation],
    params: &[String],
    decisions: &mut Vec<String>,
) -> Vec<(String, Option<(u8, String)>)> {
    let out: Vec<(String, Option<(u8, String)>)> = params
        .iter()
        .map(|p| {
            let dir = impls
                .iter()
                .flat_map(|i| &i.params)
                .find(|q| &q.name == p)
                .map(|q| q.dir.clone())
                .unwrap_or_default();
            (p.clone(), category(pkg, p, &dir))
        })
        .collect();
    let said: Vec<String> = out
        .iter()
        .filter_map(|(p, c)| c.as_ref().map(|(n, why)| format!("`{p}` {n} ({why})")))
        .collect();
    if !said.is_empty() {
        decisions.push(format!("nist-category: {}", said.join(", ")));
    }
    let todo: Vec<String> = out
        .iter()
        .filter(|(_, c)| c.is_none())
        .map(|(p, _)| format!("`{p}`"))
        .collect();
    if !todo.is_empty() {
        decisions.push(format!(
            "nist-category: the package does not say which security category {} claims, and the name is not a well-known one: the manifest lists it as a TODO",
            todo.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_from_names_headers_and_readmes() {
        assert_eq!(well_known("kyber768"), Some(3));
        assert_eq!(well_known("Kyber768-90s"), Some(3));
        assert_eq!(well_known("ML-KEM-512"), Some(1));
        assert_eq!(well_known("ml-kem-1024"), Some(5));
        assert_eq!(well_known("frodo640aes"), Some(1));
        assert_eq!(well_known("FrodoKEM-1344-SHAKE"), Some(5));
        assert_eq!(well_known("hqc-192"), Some(3));
        assert_eq!(well_known("mceliece348864f"), Some(1));
        assert_eq!(well_known("lightsaber"), Some(1));
        assert_eq!(well_known("saber"), Some(3));
        assert_eq!(well_known("kyber7680"), None);
        assert_eq!(well_known("example128"), None);
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("R/crypto_kem/x1")).unwrap();
        std::fs::write(
            d.path().join("R/crypto_kem/x1/api.h"),
            "#define CRYPTO_ALGNAME \"X1\"\n#define NIST_LEVEL 2\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("README.md"),
            "Parameter sets:\n- X-2: NIST security category 4\n- X-3 (level 1 of 2)\n",
        )
        .unwrap();
        let pkg = Package::new(d.path()).unwrap();
        assert_eq!(category(&pkg, "x1", "R/crypto_kem/x1").unwrap().0, 2);
        assert_eq!(category(&pkg, "x2", "R/crypto_kem/x2").unwrap().0, 4);
        assert_eq!(category(&pkg, "x3", "R/crypto_kem/x3"), None);
        assert_eq!(after_word("nist security category 12", &["category"]), None);
    }
}
