//! The survey of fixtures and PQClean instances, and the fidelity reference.

use super::*;

fn survey_fixture(name: &str, compiled: &[&str], dir: &Path) -> ngcc_pipe::record::SurveyData {
    let mlkem = pqclean("pqcrypto-mlkem-0.1.1");
    let common = mlkem.join("common");
    let root = fixtures();
    let fixture = root.join(name);
    let instance_objects: Vec<(PathBuf, PathBuf)> = compiled
        .iter()
        .map(|c| {
            let src = fixture.join(c);
            let obj = compile(&src, dir, &[&fixture, &common]);
            (src, obj)
        })
        .collect();
    let fips_obj = compile(&common.join("fips202.c"), dir, &[&common]);
    let input = SurveyInput {
        root: root.clone(),
        instance_sources: all_files(&fixture),
        compiled: compiled.iter().map(|c| fixture.join(c)).collect(),
        primitive_sources: vec![common.join("fips202.c")],
        instance_objects,
        primitive_objects: vec![fips_obj],
        primitives: ["shake256", "sha3_256", "shake128_absorb"]
            .iter()
            .map(|s| PrimitiveFn {
                symbol: s.to_string(),
                family: "keccak".into(),
            })
            .collect(),
        api_symbols: Vec::new(),
        namespace: String::new(),
    };
    survey(&input).unwrap()
}

#[test]
fn survey_own_keccak_is_a_bypass_with_the_symbol_named() {
    if !trees() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = survey_fixture("bypass", &["kem.c", "keccak.c"], tmp.path());
    assert_eq!(d.verdict, Verdict::Bypass, "{}", d.summary);
    assert!(
        d.summary.contains("KeccakF1600_StatePermute"),
        "{}",
        d.summary
    );
    let own: BTreeMap<&str, bool> = d
        .own_symbols
        .iter()
        .map(|s| (s.name.as_str(), s.referenced))
        .collect();
    assert_eq!(own.get("KeccakF1600_StatePermute"), Some(&true), "{own:?}");
    assert_eq!(own.get("fixture_shake256"), Some(&true), "{own:?}");
    assert!(d.provided_used.is_empty(), "{:?}", d.provided_used);
    let hit = d
        .source_hits
        .iter()
        .find(|h| h.file == "bypass/keccak.c" && h.text.contains("0x0000000000008082"))
        .expect("round-constant hit");
    assert!(hit.reachable && hit.family == "keccak");
    eprintln!("bypass fixture: {}", d.summary);
}

#[test]
fn survey_dead_keccak_file_is_provided_only_with_unreachable_hits() {
    if !trees() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = survey_fixture("dead", &["kem.c", "sha256_unused.c"], tmp.path());
    assert_eq!(d.verdict, Verdict::ProvidedOnly, "{}", d.summary);
    assert_eq!(d.provided_used, ["shake256"]);
    let dead: Vec<_> = d
        .source_hits
        .iter()
        .filter(|h| h.file == "dead/keccak_unused.c")
        .collect();
    assert!(!dead.is_empty());
    assert!(dead.iter().all(|h| !h.reachable));
    assert_eq!(
        dead[0].note.as_deref(),
        Some("file not compiled into the object")
    );
    // Compiled, but nothing calls it.
    let sha = d
        .source_hits
        .iter()
        .find(|h| h.file == "dead/sha256_unused.c")
        .expect("sha2 constant hit");
    assert_eq!(sha.family, "sha2");
    assert!(!sha.reachable);
    assert!(
        sha.note
            .as_deref()
            .unwrap()
            .contains("fixture_sha256_first_round_constant"),
        "{:?}",
        sha.note
    );
    assert!(d.summary.contains("not reachable"), "{}", d.summary);
    eprintln!("dead fixture: {}", d.summary);
}

#[test]
fn survey_ml_kem_768_clean_is_provided_only() {
    if !trees() {
        return;
    }
    let root = pqclean("pqcrypto-mlkem-0.1.1");
    let common = root.join("common");
    let inst_dir = root.join("crypto_kem/ml-kem-768/clean");
    let tmp = tempfile::tempdir().unwrap();
    let sources = all_files(&inst_dir);
    let compiled: BTreeSet<PathBuf> = c_files(&inst_dir).into_iter().collect();
    let instance_objects: Vec<(PathBuf, PathBuf)> = compiled
        .iter()
        .map(|c| (c.clone(), compile(c, tmp.path(), &[&common, &inst_dir])))
        .collect();
    let prim_srcs = ["fips202.c", "sha2.c", "aes.c", "sp800-185.c"];
    let primitive_objects: Vec<PathBuf> = prim_srcs
        .iter()
        .map(|c| compile(&common.join(c), tmp.path(), &[&common]))
        .collect();
    let input = SurveyInput {
        root: root.clone(),
        instance_sources: sources,
        compiled,
        primitive_sources: prim_srcs.iter().map(|c| common.join(c)).collect(),
        instance_objects,
        primitive_objects,
        primitives: Vec::new(),
        api_symbols: Vec::new(),
        namespace: String::new(),
    };
    let d = survey(&input).unwrap();
    assert_eq!(d.verdict, Verdict::ProvidedOnly, "{}", d.summary);
    assert!(d.provided_used.iter().any(|s| s == "shake128_absorb"));
    // ML-KEM's kyber_shake128_absorb wraps the provided function: not own code.
    assert!(
        d.own_symbols.iter().all(|s| !s.referenced),
        "{:?}",
        d.own_symbols
    );
    eprintln!("ML-KEM-768 clean: {}", d.summary);
}

#[test]
fn survey_ml_kem_768_avx2_is_provided_only_with_glue_noted() {
    if !trees() {
        return;
    }
    let root = pqclean("pqcrypto-mlkem-0.1.1");
    let common = root.join("common");
    let keccak4x = common.join("keccak4x");
    let inst_dir = root.join("crypto_kem/ml-kem-768/avx2");
    let tmp = tempfile::tempdir().unwrap();
    let avx2 = ["-mavx2", "-mbmi2", "-mpopcnt"];
    let mut compiled: BTreeSet<PathBuf> = c_files(&inst_dir).into_iter().collect();
    let asm: Vec<PathBuf> = std::fs::read_dir(&inst_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "S"))
        .collect();
    compiled.extend(asm);
    let instance_objects: Vec<(PathBuf, PathBuf)> = compiled
        .iter()
        .map(|c| {
            let o = compile_with(c, tmp.path(), &[&common, &inst_dir], &avx2);
            (c.clone(), o)
        })
        .collect();
    // The 4-way Keccak of PQClean's common/ is part of the provided library.
    let prim_srcs = [
        common.join("fips202.c"),
        keccak4x.join("KeccakP-1600-times4-SIMD256.c"),
    ];
    let primitive_objects: Vec<PathBuf> = prim_srcs
        .iter()
        .map(|c| compile_with(c, tmp.path(), &[&common, &keccak4x], &avx2))
        .collect();
    let input = SurveyInput {
        root: root.clone(),
        instance_sources: all_files(&inst_dir),
        compiled,
        primitive_sources: prim_srcs.to_vec(),
        instance_objects,
        primitive_objects,
        primitives: Vec::new(),
        api_symbols: Vec::new(),
        namespace: String::new(),
    };
    let d = survey(&input).unwrap();
    eprintln!("ML-KEM-768 avx2: {}", d.summary);
    assert_eq!(d.verdict, Verdict::ProvidedOnly, "{}", d.summary);
    assert!(
        d.provided_used
            .iter()
            .any(|s| s == "KeccakP1600times4_PermuteAll_24rounds"),
        "{:?}",
        d.provided_used
    );
    assert!(d.summary.contains("fips202x4.c"), "{}", d.summary);
    // One verdict, not two that disagree: the glue is named as calling the provided
    // primitives, never as "own" code beside "no own ... code reachable".
    assert!(
        d.summary
            .contains("provided primitives (glue code, not an implementation)"),
        "{}",
        d.summary
    );
    assert!(!d.summary.contains("own glue"), "{}", d.summary);
    assert!(
        !d.summary.contains("no own symmetric code"),
        "{}",
        d.summary
    );
}

/// Survey a clean PQClean instance against the whole provided library of its tree.
fn survey_clean(krate: &str, instance: &str, dir: &Path) -> ngcc_pipe::record::SurveyData {
    let root = pqclean(krate);
    let common = root.join("common");
    let inst_dir = root.join(instance);
    let compiled: BTreeSet<PathBuf> = c_files(&inst_dir).into_iter().collect();
    let instance_objects: Vec<(PathBuf, PathBuf)> = compiled
        .iter()
        .map(|c| (c.clone(), compile(c, dir, &[&common, &inst_dir])))
        .collect();
    let prim_srcs: Vec<PathBuf> = ["fips202.c", "sha2.c", "aes.c", "sp800-185.c"]
        .iter()
        .map(|c| common.join(c))
        .collect();
    let primitive_objects: Vec<PathBuf> = prim_srcs
        .iter()
        .map(|c| compile(c, dir, &[&common]))
        .collect();
    let input = SurveyInput {
        root: root.clone(),
        instance_sources: all_files(&inst_dir),
        compiled,
        primitive_sources: prim_srcs,
        instance_objects,
        primitive_objects,
        primitives: Vec::new(),
        api_symbols: Vec::new(),
        namespace: String::new(),
    };
    survey(&input).unwrap()
}

#[test]
fn survey_other_clean_pqclean_kems_are_provided_only() {
    if !trees() {
        return;
    }
    for (krate, instance) in [
        ("pqcrypto-mlkem-0.1.1", "crypto_kem/hqc-128/clean"),
        ("pqcrypto-frodo-0.4.11", "crypto_kem/frodokem640aes/clean"),
        ("pqcrypto-frodo-0.4.11", "crypto_kem/frodokem640shake/clean"),
        ("pqcrypto-frodo-0.4.11", "crypto_kem/sntrup761/clean"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let d = survey_clean(krate, instance, tmp.path());
        eprintln!("{instance}: {} — {}", d.verdict.name(), d.summary);
        assert_eq!(
            d.verdict,
            Verdict::ProvidedOnly,
            "{instance}: {}",
            d.summary
        );
        assert!(!d.provided_used.is_empty(), "{instance}");
    }
}

/// Issue #9: `bench fidelity`'s reference is a separate static executable built from the
/// instance's sources (no program interpreter, no DT_NEEDED, so no campaign `.so`), and
/// it runs.
#[test]
fn fidelity_reference_is_a_separate_static_executable() {
    if !trees() {
        return;
    }
    use ngcc_pipe::bench::{build_reference, static_elf_kind, ReferenceSpec};
    use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
    let root = pqclean("pqcrypto-mlkem-0.1.1");
    let inst = root.join("crypto_kem/ml-kem-768/clean");
    let tmp = tempfile::tempdir().unwrap();
    let mut sources = c_files(&inst);
    sources.push(root.join("common/fips202.c"));
    // The build record's flags and code-generation flags, as `bench fidelity` passes them.
    let flags: Vec<String> = std::iter::once("-O2")
        .chain(ngcc_pipe::run::steps::link::CODEGEN_FLAGS.iter().copied())
        .map(String::from)
        .collect();
    let spec = ReferenceSpec {
        cc: "gcc".into(),
        flags: flags.clone(),
        includes: vec![
            format!("-I{}", inst.display()),
            format!("-I{}", root.join("common").display()),
        ],
        sources,
        namespace: "PQCLEAN_MLKEM768_CLEAN_".into(),
        drng: "PQCLEAN_randombytes".into(),
        api: kem_native::api::parse_api_h(
            &std::fs::read_to_string(inst.join("api.h")).unwrap(),
            "PQCLEAN_MLKEM768_CLEAN_",
        )
        .unwrap(),
    };
    let sandbox = ngcc_pipe::run::sandbox::Sandbox::detect();
    let (exe, command) = build_reference(&spec, tmp.path(), &sandbox).unwrap();
    assert!(command.iter().any(|a| a == "-static"), "{command:?}");
    assert!(!command.iter().any(|a| a.ends_with(".so")), "{command:?}");
    let kind = static_elf_kind(&exe).unwrap();
    assert!(kind.contains("statically linked"), "{kind}");

    // Read the ELF here too: an executable with no interpreter and no dynamic section.
    let data = std::fs::read(&exe).unwrap();
    let elf = ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let endian = elf.endian();
    assert!(matches!(
        elf.elf_header().e_type(endian),
        object::elf::ET_EXEC | object::elf::ET_DYN
    ));
    for ph in elf.elf_program_headers() {
        assert_ne!(ph.p_type(endian), object::elf::PT_INTERP);
        assert!(ph.dynamic(endian, &*data).unwrap().is_none_or(|d| d
            .iter()
            .all(|e| object::read::elf::Dyn::tag(e, endian) != object::elf::DT_NEEDED)));
    }
    // A dynamically linked executable (this test) is refused.
    let own = std::env::current_exe().unwrap();
    assert!(static_elf_kind(&own).is_err());

    // The anchor: the same sources linked as the campaign links its shared objects (the
    // anchor first, then the sources in the same order) sit at the same addresses modulo
    // 4096 as in the reference.
    let anchor = tmp.path().join("anchor.c");
    std::fs::write(&anchor, ngcc_pipe::run::steps::link::ANCHOR_C).unwrap();
    let so = tmp.path().join("kem.so");
    let status = Command::new("gcc")
        .args(&flags)
        .args(&spec.includes)
        .arg("-shared")
        .arg("-o")
        .arg(&so)
        .arg(&anchor)
        .args(&spec.sources)
        .status()
        .unwrap();
    assert!(status.success());
    let kem_functions = |path: &std::path::Path| -> BTreeMap<String, u64> {
        use object::{Object, ObjectSymbol, SymbolKind};
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        file.symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
            .filter_map(|s| Some((s.name().ok()?.to_string(), s.address())))
            // Cold parts go to `.text.unlikely`, before `.text` and the anchor.
            .filter(|(n, _)| {
                (n.starts_with("PQCLEAN_MLKEM768_CLEAN_") || n == "KeccakF1600_StatePermute")
                    && !n.contains(".cold")
            })
            .collect()
    };
    let (in_exe, in_so) = (kem_functions(&exe), kem_functions(&so));
    assert!(in_exe.len() >= 20, "{in_exe:?}");
    assert!(
        in_exe.contains_key("KeccakF1600_StatePermute"),
        "{in_exe:?}"
    );
    for (name, addr) in &in_exe {
        let other = in_so
            .get(name)
            .unwrap_or_else(|| panic!("{name} not in the .so"));
        assert_eq!(addr % 4096, other % 4096, "{name}: {addr:#x} vs {other:#x}");
    }

    // It serves batches: `ready`, then one `cycles C` per batch size sent, until stdin ends.
    for op in ["keygen", "enc", "dec"] {
        let mut child = Command::new(&exe)
            .arg(op)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"3\n5\n").unwrap();
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{op}: {:?}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.first(), Some(&"ready minimal_loop"), "{op}: {text}");
        assert_eq!(lines.len(), 3, "{op}: {text}");
        for l in &lines[1..] {
            let cycles: u64 = l
                .strip_prefix("cycles ")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{op}: {text}"));
            assert!(cycles > 0, "{op}: {text}");
        }
    }
}
