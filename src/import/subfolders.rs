//! Sources below an implementation folder's own files: a 4-way Keccak in `keccak4x/`, the
//! assembly of an optimised build in `asm/`. The build compiles the folder's own `.c`, `.S`
//! and `.s` files; these become the instance's `sources` when the build file names them
//! (`keccak4x/KeccakP-1600-times4-SIMD256.c`, `$(wildcard keccak4x/*.c)`, CMake's
//! `GLOB_RECURSE`) or when no build file describes the build at all — then every C and
//! assembly file under the folder is compiled, and import says so. Files that define what
//! the harness provides (`main`, `randombytes`, `randombytes_init`) stay out either way.

use super::read::{join, Package};
use crate::model::Api;

/// How deep below the folder sources are looked for.
const DEPTH: usize = 4;

/// The C and assembly files in the subfolders of `dir`, relative to `dir`, sorted.
fn below(pkg: &Package, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo: Vec<(String, usize)> =
        pkg.list(dir).folders.into_iter().map(|f| (f, 1)).collect();
    while let Some((rel, depth)) = todo.pop() {
        let l = pkg.list(&join(dir, &rel));
        for f in l.files {
            if matches!(f.rsplit('.').next(), Some("c" | "S" | "s")) && f.contains('.') {
                out.push(join(&rel, &f));
            }
        }
        if depth < DEPTH {
            todo.extend(l.folders.into_iter().map(|f| (join(&rel, &f), depth + 1)));
        }
    }
    out.sort();
    out
}

/// Whether the build file's `words` name `rel` (a path below the folder): the file itself,
/// a pattern in its folder, or a recursive glob.
fn named(words: &[String], rel: &str) -> bool {
    let folder = rel.rsplit_once('/').map_or("", |(d, _)| d);
    words.iter().any(|w| {
        w.ends_with(rel)
            || w == "GLOB_RECURSE"
            || (!folder.is_empty()
                && (w.contains(&format!("{folder}/*")) || w.ends_with(&format!("{folder}/%.c"))))
    })
}

/// The sources below `base` the build compiles besides those of the instance's own folder
/// `dir` (`base` itself, or a subfolder: `<param>/src` beside `<param>/lib`), relative to
/// the package root, and what import says about them. `build_file` is the build file read
/// (its `words`), if any.
pub fn sources(
    pkg: &Package,
    (base, dir): (&str, &str),
    build_file: Option<&str>,
    words: &[String],
) -> (Vec<String>, Vec<String>) {
    let mut take = Vec::new();
    let mut notes = Vec::new();
    let mut unnamed = Vec::new();
    let own = format!("{dir}/");
    for rel in below(pkg, base) {
        let path = join(base, &rel);
        if path.starts_with(&own) && !path[own.len()..].contains('/') {
            continue;
        }
        if rel.ends_with(".c") {
            let Some(text) = pkg.read_text(&path) else {
                continue;
            };
            let defines = crate::csource::defined_functions(&text, Api::Nist.harness_functions());
            if !defines.is_empty() {
                notes.push(format!(
                    "`{rel}` left out: it defines {}",
                    defines.join(", ")
                ));
                continue;
            }
        }
        if build_file.is_none() || named(words, &rel) {
            take.push(path);
        } else {
            unnamed.push(rel);
        }
    }
    match build_file {
        None => notes.push(format!(
            "no Makefile, CMakeLists.txt or build script describes its build: every C and assembly file under it is compiled ({} in subfolders), except those defining main, randombytes or randombytes_init",
            take.len()
        )),
        Some(b) if !unnamed.is_empty() => notes.push(format!(
            "not compiled, as `{b}` does not name them: {} (add them with `sources` if the build needs them)",
            unnamed.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ")
        )),
        Some(_) => {}
    }
    (take, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subfolder_sources_named_by_the_build_file_or_all_without_one() {
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("R/crypto_kem/k");
        std::fs::create_dir_all(k.join("keccak4x")).unwrap();
        std::fs::create_dir_all(k.join("test")).unwrap();
        std::fs::write(
            k.join("keccak4x/KeccakP-1600-times4-SIMD256.c"),
            "void f(void) {}\n",
        )
        .unwrap();
        std::fs::write(k.join("keccak4x/align.h"), "\n").unwrap();
        std::fs::write(k.join("test/speed.c"), "int main(void) { return 0; }\n").unwrap();
        std::fs::write(k.join("test/fast.S"), ".text\n").unwrap();
        let pkg = Package::new(d.path()).unwrap();
        let words: Vec<String> = "gcc -O3 -mavx2 -o x *.c keccak4x/KeccakP-1600-times4-SIMD256.c"
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let k = ("R/crypto_kem/k", "R/crypto_kem/k");
        let (take, notes) = sources(&pkg, k, Some("R/crypto_kem/k/build.sh"), &words);
        assert_eq!(
            take,
            ["R/crypto_kem/k/keccak4x/KeccakP-1600-times4-SIMD256.c"]
        );
        assert!(
            notes[0].contains("`test/speed.c` left out: it defines main"),
            "{notes:?}"
        );
        assert!(notes[1].contains("`test/fast.S`"), "{notes:?}");
        let (take, notes) = sources(&pkg, k, None, &[]);
        assert_eq!(
            take,
            [
                "R/crypto_kem/k/keccak4x/KeccakP-1600-times4-SIMD256.c",
                "R/crypto_kem/k/test/fast.S"
            ]
        );
        assert!(
            notes[1].contains("every C and assembly file under it is compiled (2 in subfolders)"),
            "{notes:?}"
        );
    }
}
