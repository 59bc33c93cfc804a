//! Integration tests of the analyses on real code: prototypes of the PQClean headers of
//! both crate trees, a wrapped ML-KEM-768 build driven through `dlopen`, nested wrapper
//! counting, and the survey on fixtures and on ML-KEM-768 clean.
//!
//! They need `gcc` and the PQClean trees of `pqcrypto-mlkem` 0.1.1 and `pqcrypto-frodo`
//! 0.4.11, which they fetch with cargo (as the `source` step does) when not cached (group
//! `crates`, see `tests/common/require.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use ngcc_pipe::model::PrimitiveFn;
use ngcc_pipe::profile::{
    generate_wrappers, parse_prototypes, provided_symbols_used, wrap_link_flags,
};
use ngcc_pipe::record::Verdict;
use ngcc_pipe::survey::{family_of_symbol, survey, SurveyInput};

mod common;
use common::{require_crates, FRODO_CRATE, MLKEM_CRATE};

/// Whether both PQClean trees can be had (see [`require_crates`]); a test that reads them
/// returns at once when not.
fn trees() -> bool {
    require_crates(&[MLKEM_CRATE, FRODO_CRATE])
}

/// The PQClean tree of a crate (`pqcrypto-mlkem-0.1.1`), fetched with cargo if needed (once
/// per process: parallel tests share it).
fn pqclean(krate: &str) -> PathBuf {
    let (name, version) = krate.rsplit_once('-').expect("crate-version");
    common::registry_crate(name, version)
        .unwrap_or_else(|e| panic!("{e}"))
        .join("pqclean")
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/analysis")
}

/// Run gcc; panic with its output on failure.
fn gcc(args: &[&str]) {
    let out = Command::new("gcc").args(args).output().expect("run gcc");
    assert!(
        out.status.success(),
        "gcc {}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    // Our own C (generated wrappers, fixtures) must be warning-free.
    assert!(
        out.stderr.is_empty(),
        "gcc warnings for {}:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Compile `src` to `out_dir/<stem>.o` with `-fPIC -O2 -Wall -Wextra` and the includes.
fn compile(src: &Path, out_dir: &Path, includes: &[&Path]) -> PathBuf {
    compile_with(src, out_dir, includes, &[])
}

fn compile_with(src: &Path, out_dir: &Path, includes: &[&Path], extra: &[&str]) -> PathBuf {
    let stem = src.file_stem().unwrap().to_string_lossy();
    let parent = src.parent().unwrap().file_name().unwrap().to_string_lossy();
    let obj = out_dir.join(format!("{parent}_{stem}.o"));
    let mut args: Vec<String> = ["-c", "-fPIC", "-O2", "-Wall", "-Wextra"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    for i in includes {
        args.push(format!("-I{}", i.display()));
    }
    args.push(src.display().to_string());
    args.push("-o".into());
    args.push(obj.display().to_string());
    gcc(&args.iter().map(String::as_str).collect::<Vec<_>>());
    obj
}

fn c_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    v.sort();
    v
}

fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "c" || e == "h"))
        .collect();
    v.sort();
    v
}

/// Count lines that start a function declaration (`void name(` / `int name(`) — an
/// independent, regex-free count to compare the nom parser with.
fn naive_declaration_count(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let l = l.trim_start();
            (l.starts_with("void ") || l.starts_with("int "))
                && l.contains('(')
                && !l.trim_end().ends_with('{')
        })
        .count()
}

#[test]
fn prototypes_of_real_pqclean_headers_in_both_trees() {
    if !trees() {
        return;
    }
    for krate in ["pqcrypto-mlkem-0.1.1", "pqcrypto-frodo-0.4.11"] {
        let common = pqclean(krate).join("common");
        for h in [
            "fips202.h",
            "sha2.h",
            "aes.h",
            "sp800-185.h",
            "randombytes.h",
        ] {
            let text = std::fs::read_to_string(common.join(h)).unwrap();
            let protos = parse_prototypes(&text);
            assert_eq!(
                protos.len(),
                naive_declaration_count(&text),
                "{krate} {h}: {:?}",
                protos.iter().map(|p| &p.name).collect::<Vec<_>>()
            );
            for p in &protos {
                assert!(!p.is_static && !p.variadic, "{krate} {h} {}", p.name);
                for q in &p.params {
                    assert!(q.name.is_some() || h == "randombytes.h", "{h} {}", p.name);
                }
            }
        }
        let fips = std::fs::read_to_string(common.join("fips202.h")).unwrap();
        let protos = parse_prototypes(&fips);
        let absorb = protos.iter().find(|p| p.name == "shake128_absorb").unwrap();
        assert_eq!(
            absorb.declare("f"),
            "void f(shake128ctx *a0, const uint8_t *a1, size_t a2)"
        );
        let shake256 = protos.iter().find(|p| p.name == "shake256").unwrap();
        assert_eq!(
            shake256.declare("f"),
            "void f(uint8_t *a0, size_t a1, const uint8_t *a2, size_t a3)"
        );
        let aes = std::fs::read_to_string(common.join("aes.h")).unwrap();
        let protos = parse_prototypes(&aes);
        let ecb = protos.iter().find(|p| p.name == "aes128_ecb").unwrap();
        assert_eq!(
            ecb.declare("f"),
            "void f(unsigned char *a0, const unsigned char *a1, size_t a2, const aes128ctx *a3)"
        );
        // fips202.h declares real names; randombytes.h declares a macro alias.
        let rb = std::fs::read_to_string(common.join("randombytes.h")).unwrap();
        let decls = ngcc_pipe::profile::parse_header(&rb);
        assert_eq!(decls.resolve("randombytes"), "PQCLEAN_randombytes");
        assert!(ngcc_pipe::profile::parse_header(&fips).aliases.is_empty());
    }
}

#[path = "analysis/profile.rs"]
mod profile;
#[path = "analysis/survey.rs"]
mod survey;
