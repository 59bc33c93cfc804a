//! The scan on small objects compiled and linked at test time with the machine's `cc` (and,
//! when installed, `aarch64-linux-gnu-gcc`), plus hand-made data for the pure functions.

use super::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A toy KEM: dec reaches a division in a loop through a helper; enc takes a callback's address (a
/// floating-point division), calls it through a pointer and calls memcpy through the PLT;
/// `unreached` divides too but nothing calls it.
const TOY: &str = r#"#include <string.h>
#include <stddef.h>

__attribute__((noinline)) static void helper(unsigned char *r, const unsigned char *a,
                                             unsigned d) {
    for (int i = 0; i < 16; i++) {
        r[i] = (unsigned char)((a[i] + 7u) / d); /* DIV */
    }
}

__attribute__((noinline)) static double cb(double a, double b) {
    double q = a / b; /* FDIV */
    return q * q + a;
}

double (*volatile hook)(double, double);

int toy_crypto_kem_dec(unsigned char *ss, const unsigned char *ct, unsigned d) {
    helper(ss, ct, d);
    return 0;
}

int toy_crypto_kem_enc(unsigned char *dst, const unsigned char *src, size_t n) {
    hook = cb;
    memcpy(dst, src, n);
    dst[0] = (unsigned char)hook((double)src[0], (double)n);
    return 0;
}

unsigned toy_unreached(unsigned x, unsigned d) {
    unsigned r = x % d; /* UNREACHED */
    return r * r + x;
}
"#;

/// The line of `TOY` holding `marker`.
fn line_of(marker: &str) -> u32 {
    TOY.lines()
        .position(|l| l.contains(marker))
        .expect("marker") as u32
        + 1
}

/// Compile `TOY` with `cc` and `flags` into `dir`; link a shared object unless `flags`
/// has `-c`.
fn build(cc: &str, dir: &Path, flags: &[&str]) -> Option<PathBuf> {
    let src = dir.join("toy.c");
    std::fs::write(&src, TOY).unwrap();
    let out = dir.join(format!("toy-{cc}{}.so", flags.join("")));
    let mut args: Vec<&str> = vec!["-fPIC"];
    if !flags.contains(&"-c") {
        args.push("-shared");
    }
    args.extend(flags);
    let status = Command::new(cc)
        .args(&args)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .output()
        .ok()?;
    assert!(
        status.status.success(),
        "{cc}: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    Some(out)
}

fn scan_file(path: &Path, root: &str) -> Result<LatencyScan, LatencyError> {
    scan(&std::fs::read(path).unwrap(), root)
}

/// What every build of `TOY` must give, whatever the instruction set.
fn check_toy(so: &Path, int_div: &[&str]) {
    let dec = scan_file(so, "toy_crypto_kem_dec").unwrap();
    assert!(dec.line_info);
    assert_eq!(dec.instructions.len(), 1, "{dec:#?}");
    let v = &dec.instructions[0];
    assert_eq!(v.class, LatencyClass::IntegerDivision);
    assert!(int_div.contains(&v.mnemonic.as_str()), "{}", v.mnemonic);
    assert_eq!(base_name(&v.function), "helper");
    assert_eq!(
        v.path.first().map(String::as_str),
        Some("toy_crypto_kem_dec")
    );
    assert_eq!(v.path.len(), 2, "{:?}", v.path);
    assert_eq!(v.location(), format!("toy.c:{}", line_of("/* DIV */")));
    assert!(v.file.as_deref().is_some_and(|f| f.ends_with("toy.c")));
    assert!(v
        .context
        .iter()
        .any(|c| c.starts_with("=> ") && c.contains(&v.mnemonic)));
    assert_eq!(v.context.iter().filter(|c| c.starts_with("=>")).count(), 1);
    assert!(dec.functions >= 2);

    let enc = scan_file(so, "toy_crypto_kem_enc").unwrap();
    assert_eq!(enc.instructions.len(), 1, "{enc:#?}");
    let f = &enc.instructions[0];
    assert_eq!(f.class, LatencyClass::FloatDivision);
    assert_eq!(base_name(&f.function), "cb");
    assert_eq!(f.location(), format!("toy.c:{}", line_of("/* FDIV */")));
    assert!(enc.address_taken.iter().any(|n| base_name(n) == "cb"));
    assert!(
        enc.outside.iter().any(|n| n == "memcpy"),
        "{:?}",
        enc.outside
    );
    let calls: u32 = enc.indirect.iter().map(|i| i.calls + i.jumps).sum();
    assert!(calls >= 1, "{:?}", enc.indirect);

    // Reachable from nothing scanned: never listed.
    let unreached = scan_file(so, "toy_unreached").unwrap();
    assert_eq!(unreached.instructions.len(), 1);
    assert_eq!(
        unreached.instructions[0].location(),
        format!("toy.c:{}", line_of("/* UNREACHED */"))
    );
}

#[test]
fn toy_object_of_this_machine() {
    let d = tempfile::tempdir().unwrap();
    let so = build("cc", d.path(), &["-O2", "-g"]).expect("a C compiler (`cc`) is needed");
    check_toy(&so, &["div", "idiv", "udiv", "sdiv"]);
    // Without debug info: the same instructions, located by address only.
    let bare = build("cc", d.path(), &["-O2"]).unwrap();
    let s = scan_file(&bare, "toy_crypto_kem_dec").unwrap();
    assert!(!s.line_info);
    assert_eq!(s.instructions.len(), 1);
    assert!(s.instructions[0].location().starts_with("0x"));
    // Refused: a relocatable object, a missing root, a file that is no object.
    let o = build("cc", d.path(), &["-O2", "-g", "-c"]).unwrap();
    assert!(matches!(
        scan_file(&o, "toy_crypto_kem_dec"),
        Err(LatencyError::Relocatable)
    ));
    assert!(matches!(
        scan_file(&so, "nothing_here"),
        Err(LatencyError::NoRoot(r)) if r == "nothing_here"
    ));
    assert!(matches!(
        scan(b"not an object", "x"),
        Err(LatencyError::NotObject(_))
    ));
}

#[test]
fn toy_object_for_aarch64_when_the_cross_compiler_is_installed() {
    let d = tempfile::tempdir().unwrap();
    // The instruction level is covered by decode's hand-encoded words everywhere; this adds
    // a whole linked object (PLT, DWARF) where a cross compiler exists.
    match build("aarch64-linux-gnu-gcc", d.path(), &["-O2", "-g"]) {
        Some(so) => {
            check_toy(&so, &["udiv"]);
            let s = scan_file(&so, "toy_crypto_kem_dec").unwrap();
            assert_eq!(s.isa, "aarch64");
        }
        None => {
            let udiv = decode::decode(Isa::Aarch64, &0x1ac1_0800u32.to_le_bytes(), 0);
            assert_eq!(udiv[0].latency, Some(LatencyClass::IntegerDivision));
            eprintln!("aarch64-linux-gnu-gcc not installed: linked aarch64 object not checked");
        }
    }
}

fn var(function: &str, inlined: &[&str], mnemonic: &str) -> VarLatency {
    VarLatency {
        class: LatencyClass::IntegerDivision,
        mnemonic: mnemonic.into(),
        text: format!("{mnemonic} esi"),
        function: function.into(),
        address: 0x1000,
        file: Some("/src/poly.c".into()),
        line: Some(139),
        inlined: inlined.iter().map(|s| s.to_string()).collect(),
        unit: Some("/src/poly.c".into()),
        provided: false,
        path: vec![],
        context: vec![],
        secret: None,
        benign: None,
    }
}

fn finding(function: &str) -> Finding {
    Finding {
        kinds: vec!["UninitCondition".into()],
        function: function.into(),
        file: "/src/poly.c".into(),
        line: 30,
        count: 1,
        contexts: 1,
        stack: vec![],
        benign: None,
        source: None,
        compiler: false,
    }
}

#[test]
fn annotate_says_secret_benign_or_not_traced() {
    let mut s = LatencyScan {
        isa: "x86-64".into(),
        root: "NS_crypto_kem_dec".into(),
        functions: 9,
        instructions: vec![
            var("NS_poly_tomsg", &[], "div"),
            var("NS_indcpa_dec.cold", &[], "div"),
            var(
                "NS_indcpa_dec",
                &[
                    "NS_poly_compress (poly.c:28)",
                    "NS_indcpa_dec (indcpa.c:300)",
                ],
                "idiv",
            ),
            var("NS_gen_matrix", &[], "div"),
            VarLatency {
                unit: Some("/src/common/fips202.c".into()),
                ..var("shake256", &[], "div")
            },
        ],
        outside: vec![],
        indirect: vec![],
        address_taken: vec![],
        line_info: true,
    };
    let benign = [CtBenign {
        function: "gen_matrix".into(),
        reason: "public seed".into(),
    }];
    let provided = [PathBuf::from("/src/common/fips202.c")];
    let known = Known {
        findings: &[finding("NS_indcpa_dec")],
        benign: &benign,
        namespace: "NS_",
        provided: &provided,
    };
    annotate(&mut s, &known);
    let flags: Vec<bool> = s.instructions.iter().map(|v| v.provided).collect();
    assert_eq!(flags, [false, false, false, false, true]);
    let said: Vec<String> = s.instructions[..4]
        .iter()
        .map(VarLatency::operands)
        .collect();
    assert_eq!(
        said,
        [
            "reachable, operands not traced",
            "memcheck saw secret data in `NS_indcpa_dec` (UninitCondition at poly.c:30)",
            "memcheck saw secret data in `NS_indcpa_dec` (UninitCondition at poly.c:30)",
            "declared benign: public seed",
        ]
    );
    assert_eq!(
        verdict(&s),
        "4 (3 `div`, 1 `idiv`) in 3 functions: 2 in a function where memcheck saw secret data; \
         1 declared benign; 1 reachable, operands not traced; 1 in the provided primitives \
         (`shake256`)"
    );
    let only_provided = LatencyScan {
        instructions: s.instructions[4..].to_vec(),
        ..s.clone()
    };
    assert_eq!(
        verdict(&only_provided),
        "none in the instance's code; 1 in the provided primitives (`shake256`)"
    );
    s.instructions.truncate(1);
    assert_eq!(
        verdict(&s),
        "1 (1 `div`) in 1 function: reachable, operands not traced"
    );
    s.instructions.clear();
    assert_eq!(verdict(&s), "no variable-latency instruction reachable");
    assert_eq!(base_name("f.part.0"), "f");
}
