//! Source markers: which lines of an instance's sources look like an implementation of a
//! symmetric primitive ([`scan_sources`]), which family a symbol name suggests
//! ([`family_of_symbol`]), and the small C-source scans the survey needs (headers and
//! their includers, the function enclosing a line).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::csource::strip_comments;
use crate::record::SourceHit;

/// A source marker: family, what to look for and how.
struct Marker {
    family: &'static str,
    needle: &'static str,
    /// Compare lower-cased, with all whitespace removed from the line.
    squeeze: bool,
}

const fn m(family: &'static str, needle: &'static str, squeeze: bool) -> Marker {
    Marker {
        family,
        needle,
        squeeze,
    }
}

/// Markers that are names, not constants: on their own they may be glue code around the
/// provided library (ML-KEM avx2's `fips202x4.c` drives the provided `KeccakP1600times4`).
const NAME_MARKERS: &[&str] = &[
    "keccak",
    "crypto_hashblocks_sha",
    "sha256_compress",
    "sha512_compress",
    "rijndael",
    "sm3_compress",
    "quarterround",
];

/// Markers; `squeeze` ones are lower case without spaces.
const MARKERS: &[Marker] = &[
    m("keccak", "keccak", true),
    m("keccak", "0x0000000000008082", true),
    m("keccak", "0x800000000000808a", true),
    m("keccak", "0x8000000080008000", true),
    m("sha2", "0x428a2f98", true),
    m("sha2", "0x6a09e667", true),
    m("sha2", "crypto_hashblocks_sha", true),
    m("sha2", "sha256_compress", true),
    m("sha2", "sha512_compress", true),
    m("aes", "0x63,0x7c,0x77,0x7b", true),
    m("aes", "0xc66363a5", true),
    m("aes", "aesenc", true),
    m("aes", "aeskeygenassist", true),
    m("aes", "vaeseq_u8", true),
    m("aes", "rijndael", true),
    m("sm3", "0x7380166f", true),
    m("sm3", "0x79cc4519", true),
    m("sm3", "sm3_compress", true),
    m("sm4", "0xa3b1bac6", true),
    m("sm4", "0xd6,0x90,0xe9,0xfe", true),
    m("chacha", "expand 32-byte k", false),
    m("chacha", "quarterround", true),
    m("chacha", "0x61707865", true),
    m("openssl", "#include<openssl/", true),
    m("openssl", "EVP_", false),
    m("openssl", "SHA256_Init", false),
    m("openssl", "SHA512_Init", false),
    m("openssl", "AES_set_encrypt_key", false),
];

/// Name fragments (lower case) that say a function implements a family.
const NAME_FAMILIES: &[(&str, &str)] = &[
    ("keccak", "keccak"),
    ("shake", "keccak"),
    ("sha3", "keccak"),
    ("kmac", "keccak"),
    ("sha224", "sha2"),
    ("sha256", "sha2"),
    ("sha384", "sha2"),
    ("sha512", "sha2"),
    ("hashblocks", "sha2"),
    ("aes", "aes"),
    ("rijndael", "aes"),
    ("sm3", "sm3"),
    ("sm4", "sm4"),
    ("chacha", "chacha"),
    ("salsa20", "chacha"),
];

/// The family a symbol name suggests, if any.
pub fn family_of_symbol(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    NAME_FAMILIES
        .iter()
        .find(|(frag, _)| lower.contains(frag))
        .map(|(_, fam)| *fam)
}

pub(super) fn family_title(family: &str) -> &str {
    match family {
        "keccak" => "Keccak",
        "sha2" => "SHA-2",
        "aes" => "AES",
        "sm3" => "SM3",
        "sm4" => "SM4",
        "chacha" => "ChaCha",
        "openssl" => "OpenSSL",
        other => other,
    }
}

pub(super) fn rel_display(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .replace('\\', "/")
}

pub(super) fn abs(root: &Path, file: &Path) -> PathBuf {
    if file.is_absolute() {
        file.to_path_buf()
    } else {
        root.join(file)
    }
}

/// Scan `files` (absolute or relative to `root`) for symmetric-crypto markers.
///
/// `reachable` is set to "the file is compiled" (for a header: included by name from a
/// compiled file); [`survey`] refines it with the object files. Unreadable files are
/// skipped (the survey fails on missing *objects*, which is what decides reachability).
pub fn scan_sources(
    root: &Path,
    files: &[PathBuf],
    compiled: &BTreeSet<PathBuf>,
) -> Vec<SourceHit> {
    scan(root, files, compiled)
        .into_iter()
        .map(|(h, _)| h)
        .collect()
}

/// [`scan_sources`] with, per hit, whether its marker is a name (weak evidence).
pub(super) fn scan(
    root: &Path,
    files: &[PathBuf],
    compiled: &BTreeSet<PathBuf>,
) -> Vec<(SourceHit, bool)> {
    let compiled_abs: BTreeSet<PathBuf> = compiled.iter().map(|c| abs(root, c)).collect();
    let mut hits = Vec::new();
    for file in files {
        let path = abs(root, file);
        // A submission's file: read only where it resolves inside its source tree (a link
        // to /etc/shadow is not read).
        let Ok(bytes) = crate::safe_fs::read_within(root, &path, 64 << 20) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let code = strip_comments(&text);
        let is_compiled = compiled_abs.contains(&path) || header_included(&path, &compiled_abs);
        let mut seen = BTreeSet::new();
        for (i, line) in code.lines().enumerate() {
            let squeezed: String = line
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>()
                .to_ascii_lowercase();
            for mk in MARKERS {
                let found = if mk.squeeze {
                    squeezed.contains(mk.needle)
                } else {
                    line.contains(mk.needle)
                };
                if !found || !seen.insert((mk.family, mk.needle)) {
                    continue;
                }
                let shown: String = line.trim().chars().take(120).collect();
                let hit = SourceHit {
                    file: rel_display(root, &path),
                    line: (i + 1) as u32,
                    family: mk.family.to_string(),
                    text: shown,
                    reachable: is_compiled,
                    note: (!is_compiled).then(|| "file not compiled into the object".to_string()),
                };
                hits.push((hit, NAME_MARKERS.contains(&mk.needle)));
            }
        }
    }
    hits
}

pub(super) fn is_header(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("h" | "hpp" | "inc")
    )
}

/// Compiled files that `#include` the header `path` by its file name.
pub(super) fn includers(path: &Path, compiled: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
    if !is_header(path) {
        return Vec::new();
    }
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    compiled
        .iter()
        .filter(|c| {
            std::fs::read_to_string(c).is_ok_and(|t| {
                t.lines().any(|l| {
                    let l = l.trim_start();
                    l.starts_with('#') && l.contains("include") && l.contains(name)
                })
            })
        })
        .cloned()
        .collect()
}

fn header_included(path: &Path, compiled: &BTreeSet<PathBuf>) -> bool {
    !includers(path, compiled).is_empty()
}

/// The name of the function whose body contains `line` (1-based), by scanning back to the
/// nearest line at column 0 that looks like a function header (`... name(`).
pub(super) fn enclosing_function(path: &Path, line: usize) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let code = strip_comments(&text);
    let lines: Vec<&str> = code.lines().collect();
    for l in lines.get(..line.min(lines.len()))?.iter().rev() {
        let starts_code = l
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !starts_code {
            continue;
        }
        let Some(paren) = l.find('(') else {
            // A column-0 declaration without `(` (a table, a typedef) ends the search.
            return None;
        };
        let before = l[..paren].trim_end();
        let name: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return (!name.is_empty() && before.len() > name.len()).then_some(name);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn symbol_families() {
        assert_eq!(family_of_symbol("KeccakF1600_StatePermute"), Some("keccak"));
        assert_eq!(family_of_symbol("sha3_512"), Some("keccak"));
        assert_eq!(family_of_symbol("aes256_ctr_keyexp"), Some("aes"));
        assert_eq!(family_of_symbol("sha512_inc_init"), Some("sha2"));
        assert_eq!(family_of_symbol("PQCLEAN_randombytes"), None);
        assert_eq!(family_of_symbol("poly_ntt"), None);
    }

    #[test]
    fn scan_finds_markers_outside_comments_once_per_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("k.c"),
            "/* Keccak in a comment is not a hit */\n\
             static const uint64_t RC[2] = {0x0000000000000001ULL, 0x0000000000008082ULL};\n\
             static void KeccakF1600(uint64_t *s) { (void)s; }\n\
             static void keccak_again(void) {}\n\
             #include <openssl/evp.h>\n\
             static const uint8_t sbox[4] = { 0x63, 0x7c, 0x77, 0x7b };\n",
        )
        .unwrap();
        let compiled = BTreeSet::new();
        let hits = scan_sources(dir.path(), &[PathBuf::from("k.c")], &compiled);
        let got: Vec<(u32, &str)> = hits.iter().map(|h| (h.line, h.family.as_str())).collect();
        assert_eq!(
            got,
            [(2, "keccak"), (3, "keccak"), (5, "openssl"), (6, "aes")]
        );
        assert!(hits.iter().all(|h| !h.reachable && h.note.is_some()));
        assert_eq!(hits[0].file, "k.c");
    }

    #[test]
    fn enclosing_function_scan() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.c");
        std::fs::write(
            &p,
            "#include <stdint.h>\nstatic const int T[2] = {1,\n 2};\nvoid KeccakF1600(uint64_t *s)\n{\n    s[0] ^= 1;\n}\n",
        )
        .unwrap();
        assert_eq!(enclosing_function(&p, 6).as_deref(), Some("KeccakF1600"));
        assert_eq!(enclosing_function(&p, 3), None);
    }
}
