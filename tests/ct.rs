//! The constant-time check on the fixtures of `tests/fixtures/ct/` (the real binary, the
//! valgrind object, memcheck in the sandbox): the KEM that branches on a secret-key byte in
//! dec and the one that indexes a table with secret bytes in keygen are caught at the lines
//! marked `LEAK`, the constant-time one has no finding, and a second run gives the same
//! findings.
//!
//! Needs valgrind (group `valgrind`, see `tests/common/require.rs`).

mod common;

use std::path::Path;

use common::{rec, repo, require_valgrind, run, s, tempdir};
use ngcc_pipe::ct::Finding;
use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{Status, StepData};

/// The line of `kem.c` of fixture `name` that holds the `LEAK` marker.
fn leak_line(name: &str) -> u32 {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/ct").join(name).join("kem.c"))
        .expect("fixture source");
    let lines: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("/* LEAK:"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "{name}: one LEAK marker");
    lines[0] as u32
}

/// The findings of every fixture and operation, after a run into `out`.
fn findings(out: &Path) -> Vec<(String, Op, Vec<Finding>)> {
    let mut all = Vec::new();
    for name in ["ct-branch", "ct-clean", "ct-table"] {
        for op in Op::ALL {
            let r = rec(out, StepKind::Ct, name, Some(name), Some(op));
            assert_eq!(r.status, Status::Ok, "{name} {op}: {:?}", r.reason);
            let Some(StepData::Ct(d)) = r.data else {
                panic!("{name} {op}: no ct data");
            };
            assert_eq!(d.runs, 3);
            assert!(out.join(&d.raw_log).is_file(), "raw XML kept");
            all.push((name.to_string(), op, d.findings));
        }
    }
    all
}

#[test]
fn leaky_fixtures_are_caught_at_their_lines_and_findings_repeat() {
    if !require_valgrind() {
        return;
    }
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let args = |extra: &[&str]| {
        let mut a = vec![
            "run".to_string(),
            "tests/fixtures/ct/ct.kdl".into(),
            "--outputs".into(),
            s(&out),
        ];
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    let r = run(&args(&[]));
    assert_eq!(r.code, 0, "{}", r.show());
    let first = findings(&out);
    for (name, op, f) in &first {
        let expected = match (name.as_str(), op) {
            ("ct-branch", Op::Dec) => Some(("FIX_CTBRANCH_crypto_kem_dec", "UninitCondition")),
            ("ct-table", Op::Keygen) => Some(("FIX_CTTABLE_crypto_kem_keypair", "UninitValue")),
            _ => None,
        };
        match expected {
            None => assert!(f.is_empty(), "{name} {op}: unexpected findings {f:?}"),
            Some((function, kind)) => {
                assert_eq!(f.len(), 1, "{name} {op}: {f:?}");
                let f = &f[0];
                assert_eq!(f.function, function);
                assert!(f.file.ends_with(&format!("{name}/kem.c")), "{}", f.file);
                assert_eq!(f.line, leak_line(name), "{name} {op}");
                assert_eq!(f.kinds, [kind]);
                assert!(f.benign.is_none());
                // The source line was read; both leaks are in the source, not the compiler's.
                let text = std::fs::read_to_string(&f.file).expect("fixture source");
                let line = text.lines().nth(f.line as usize - 1).map(str::trim);
                assert_eq!(f.source.as_deref(), line);
                assert!(!f.compiler);
            }
        }
    }
    // The report's section and the index's column.
    let md = std::fs::read_to_string(out.join("reports/ct-branch.md")).expect("report");
    assert!(md.contains("## Constant-time check"), "{md}");
    // One line per operation: memcheck's verdict and the variable-latency scan's.
    for (op, verdict) in [
        (Op::Keygen, "no secret-dependent branch or index found"),
        (Op::Dec, "1 location"),
    ] {
        let r = rec(&out, StepKind::Ct, "ct-branch", Some("ct-branch"), Some(op));
        let Some(StepData::Ct(d)) = r.data else {
            panic!("no ct data");
        };
        let scan = d.latency.as_ref().expect("scanned");
        assert!(scan.scanned().is_some(), "{scan:?}");
        let row = format!(
            "| `ct-branch` | {op} | {verdict} | {} |",
            ngcc_pipe::ct::latency::outcome(scan)
        );
        assert!(md.contains(&row), "{row}\n{md}");
    }
    // Each location, with its source line, is in the appendix's detail.
    let appendix =
        std::fs::read_to_string(out.join("reports/ct-branch.appendix.md")).expect("appendix");
    let line = leak_line("ct-branch");
    assert!(
        appendix.contains(&format!(
            "| `ct-branch` | dec | `FIX_CTBRANCH_crypto_kem_dec` | kem.c:{line} | UninitCondition | 3 (1 stack) | branch in the source | not declared |"
        )),
        "{appendix}"
    );
    let table =
        std::fs::read_to_string(out.join("reports/ct-table.appendix.md")).expect("appendix");
    assert!(
        table.contains("| UninitValue | 96 (1 stack) | memory index | not declared |"),
        "{table}"
    );
    let clean =
        std::fs::read_to_string(out.join("reports/ct-clean.appendix.md")).expect("appendix");
    assert!(
        clean.contains("No location found in any checked operation."),
        "{clean}"
    );
    let index = std::fs::read_to_string(out.join("reports/index.md")).expect("index");
    assert!(
        index.contains("constant-time locations (not benign)"),
        "{index}"
    );
    assert!(index.contains("keygen 1 / enc 0 / dec 0"), "{index}");
    // Deterministic: forced again, the same findings (counts included); every ct step did
    // run again (its record says forced, campaign.json that it ran).
    let r = run(&args(&["--force", "*/ct:*"]));
    assert_eq!(r.code, 0, "{}", r.show());
    let camp = common::campaign_json(&out);
    for name in ["ct-branch", "ct-clean", "ct-table"] {
        for op in Op::ALL {
            let r = rec(&out, StepKind::Ct, name, Some(name), Some(op));
            assert_eq!(r.ran_because.as_deref(), Some("forced"), "{}", r.id);
            let step = camp.steps.iter().find(|s| s.id == r.id).expect("listed");
            assert!(step.ran, "{} did not run again", r.id);
        }
    }
    assert_eq!(findings(&out), first);
}

/// A CPU this process may run on (the pipeline's `bench-cpu`; the `ct` step does not use
/// it, but the DSL requires one).
fn allowed_cpu() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &set))
            .expect("at least one allowed CPU")
    }
}

/// A path as a KDL string (quotes and backslashes escaped).
fn kdl_str(p: &Path) -> String {
    format!(
        "\"{}\"",
        p.display()
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
    )
}

/// The lines of `file` that contain `text`.
fn lines_with(file: &Path, text: &str) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(text))
        .map(|(i, _)| i as u32 + 1)
        .collect()
}

/// The variable-latency scan of one record: (function without namespace, base file name,
/// line, mnemonic, what the report says of the operands), own code then provided code.
type Place = (String, String, u32, String, String);

fn scanned(out: &Path, sub: &str, inst: &str, op: Op, ns: &str) -> (Vec<Place>, Vec<Place>) {
    let r = rec(out, StepKind::Ct, sub, Some(inst), Some(op));
    assert_eq!(r.status, Status::Ok, "{inst} {op}: {:?}", r.reason);
    let Some(StepData::Ct(d)) = r.data else {
        panic!("{inst} {op}: no ct data");
    };
    let Some(ngcc_pipe::ct::latency::Latency::Scanned(s)) = d.latency else {
        panic!("{inst} {op}: not scanned: {:?}", d.latency);
    };
    assert!(s.line_info, "{inst}: the valgrind object has DWARF lines");
    assert_eq!(
        s.root,
        format!(
            "{ns}crypto_kem_{}",
            if op == Op::Keygen {
                "keypair"
            } else {
                op.name()
            }
        )
    );
    let place = |v: &ngcc_pipe::ct::latency::VarLatency| {
        let file = v.file.clone().unwrap_or_default();
        (
            ngcc_pipe::ct::latency::base_name(&v.function)
                .trim_start_matches(ns)
                .to_string(),
            file.rsplit('/').next().unwrap_or("").to_string(),
            v.line.unwrap_or(0),
            v.mnemonic.clone(),
            v.operands(),
        )
    };
    (
        s.instructions
            .iter()
            .filter(|v| !v.provided)
            .map(place)
            .collect(),
        s.instructions
            .iter()
            .filter(|v| v.provided)
            .map(place)
            .collect(),
    )
}

/// KyberSlash on real code: the older PQClean Kyber768 (crates.io pqcrypto-frodo 0.4.11,
/// before the fix) built at `-Os` has a division by KYBER_Q on secret data in
/// `poly_compress` and `poly_tomsg` (and in `polyvec_compress`, KyberSlash 2); at the guide
/// flags none; today's ML-KEM-768 (pqcrypto-mlkem 0.1.1) has none in its own code at
/// either. The manifests and the pipeline are written into a temporary folder; the code is
/// the crates' own, fetched by the `source` step.
#[test]
fn kyberslash_divisions_in_old_kyber_at_os_and_none_in_ml_kem() {
    if !require_valgrind() {
        return;
    }
    let tmp = tempdir();
    let dir = tmp.path().join("kyber slash");
    let subs = repo().join("submissions");
    let manifest = |id: &str,
                    krate: &str,
                    version: &str,
                    prims: &str,
                    inst: &str,
                    path: &str,
                    ns: &str,
                    extra: &str| {
        format!(
            "submission \"{id}\" {{\n    algorithm \"{id}\"\n    source crate=\"{krate}\" version=\"{version}\" root=\"pqclean\"\n    \
             primitives include={}\n    instance \"{inst}\" dir=\"{path}\" namespace=\"{ns}\"\n{extra}}}\n",
            kdl_str(&subs.join(prims))
        )
    };
    let benign =
        "    ct-benign \"rej_uniform\" reason=\"rejection sampling on the public seed rho\"\n    \
                  ct-benign \"gen_matrix\" reason=\"expands the public seed rho\"\n";
    for (folder, text) in [
        (
            "kyber",
            manifest(
                "kyber-2021",
                "pqcrypto-frodo",
                "0.4.11",
                "pqclean-2021-primitives.kdl",
                "Kyber768-clean",
                "crypto_kem/kyber768/clean",
                "PQCLEAN_KYBER768_CLEAN_",
                benign,
            ),
        ),
        (
            "mlkem",
            manifest(
                "ml-kem",
                "pqcrypto-mlkem",
                "0.1.1",
                "pqclean-primitives.kdl",
                "ML-KEM-768-clean",
                "crypto_kem/ml-kem-768/clean",
                "PQCLEAN_MLKEM768_CLEAN_",
                benign,
            ),
        ),
    ] {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::write(dir.join(folder).join("manifest.kdl"), text).unwrap();
        std::fs::write(dir.join(folder).join("kat.sha256"), "").unwrap();
    }
    let out = dir.join("out");
    let pipeline = dir.join("kyberslash.kdl");
    std::fs::write(
        &pipeline,
        format!(
            "system \"kyberslash\" {{\n    bench-cpu {}\n    cc \"gcc\"\n}}\n\
             flags \"os\" \"-Os\"\n\
             flags \"guide\" \"-O3 -march=native -fomit-frame-pointer\"\n\
             submissions \"*/manifest.kdl\"\n\
             submissions-root {}\n\
             outputs {}\n\
             step \"source\"\n\
             step \"build\" needs=\"source\" flags=\"os guide\"\n\
             step \"ct\" needs=\"build\" ops=\"enc dec\" iters=1 timeout=\"10m\"\n\
             step \"report\" needs=\"ct\"\n",
            allowed_cpu(),
            kdl_str(&subs),
            kdl_str(&out),
        ),
    )
    .unwrap();
    let r = run(&["run".to_string(), s(&pipeline)]);
    assert_eq!(r.code, 0, "{}", r.show());

    // The expected lines, read from the crate's sources: the divisions by KYBER_Q of a
    // value (not of a constant, which the compiler folds) and gen_matrix's `buflen % 3`.
    let Some(StepData::Source(src)) = rec(&out, StepKind::Source, "kyber-2021", None, None).data
    else {
        panic!("no source data");
    };
    let clean = src.root.join("crypto_kem/kyber768/clean");
    let poly = lines_with(&clean.join("poly.c"), "/ KYBER_Q)");
    let polyvec = lines_with(&clean.join("polyvec.c"), "/ KYBER_Q)");
    let gen_matrix = lines_with(&clean.join("indcpa.c"), "buflen % 3");
    assert_eq!((poly.len(), polyvec.len(), gen_matrix.len()), (2, 1, 1));
    let untraced = "reachable, operands not traced".to_string();
    let place = |f: &str, file: &str, line: u32, said: &str| {
        (f.to_string(), file.to_string(), line, said.to_string())
    };
    let ns = "PQCLEAN_KYBER768_CLEAN_";
    for op in [Op::Enc, Op::Dec] {
        let (own, provided) = scanned(&out, "kyber-2021", "Kyber768-clean@os", op, ns);
        let got: Vec<(String, String, u32, String)> = own
            .iter()
            .map(|(f, file, line, m, said)| {
                assert!(["div", "idiv"].contains(&m.as_str()), "{m}");
                (f.clone(), file.clone(), *line, said.clone())
            })
            .collect();
        let mut expected = vec![
            place(
                "gen_matrix",
                "indcpa.c",
                gen_matrix[0],
                "declared benign: expands the public seed rho",
            ),
            place("poly_compress", "poly.c", poly[0], &untraced),
        ];
        if op == Op::Dec {
            expected.push(place("poly_tomsg", "poly.c", poly[1], &untraced));
        }
        expected.push(place(
            "polyvec_compress",
            "polyvec.c",
            polyvec[0],
            &untraced,
        ));
        let mut sorted = got.clone();
        sorted.sort();
        expected.sort();
        assert_eq!(sorted, expected, "Kyber768 -Os {op}");
        // The report: one line per instance and operation with the count, and the
        // instructions with their source lines in the detail.
        let md = std::fs::read_to_string(out.join("reports/kyber-2021.md")).expect("report");
        let n = expected.len();
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("| `Kyber768-clean@os` | {op} |")))
            .unwrap_or_else(|| panic!("no verdict line for {op}:\n{md}"));
        assert!(
            line.contains(&format!("| {n} ("))
                && line.contains(&format!(
                    "in {n} functions: 1 declared benign; {} reachable, operands not traced",
                    n - 1
                )),
            "{line}"
        );
        // Instructions are listed once per instance with the operations that reach
        // them, in the appendix's detail.
        let appendix =
            std::fs::read_to_string(out.join("reports/kyber-2021.appendix.md")).expect("appendix");
        assert!(
            appendix.contains(&format!(
                "| `Kyber768-clean@os` | enc, dec | `{ns}poly_compress` | poly.c:{} |",
                poly[0]
            )),
            "{appendix}"
        );
        assert!(
            appendix.contains(&format!(
                "| `Kyber768-clean@os` | dec | `{ns}poly_tomsg` | poly.c:{} |",
                poly[1]
            )),
            "{appendix}"
        );
        // What else divides is the provided primitives' code (SHAKE's length arithmetic).
        assert!(provided.iter().all(|p| p.1 == "fips202.c"), "{provided:?}");
        let (own, _) = scanned(&out, "kyber-2021", "Kyber768-clean@guide", op, ns);
        assert!(own.is_empty(), "Kyber768 guide flags {op}: {own:?}");
        for profile in ["os", "guide"] {
            let inst = format!("ML-KEM-768-clean@{profile}");
            let (own, provided) = scanned(&out, "ml-kem", &inst, op, "PQCLEAN_MLKEM768_CLEAN_");
            assert!(own.is_empty(), "{inst} {op}: {own:?}");
            assert!(provided.iter().all(|p| p.1 == "fips202.c"), "{provided:?}");
            let md = std::fs::read_to_string(out.join("reports/ml-kem.md")).expect("report");
            let line = md
                .lines()
                .find(|l| l.starts_with(&format!("| `{inst}` | {op} |")))
                .unwrap_or_else(|| panic!("no verdict line for {inst} {op}:\n{md}"));
            let cell = line
                .trim_end_matches(" |")
                .rsplit(" | ")
                .next()
                .unwrap_or("");
            assert!(
                cell == "no variable-latency instruction reachable"
                    || cell.starts_with("none in the instance's code;"),
                "{line}"
            );
        }
    }
}
