//! The CPU features an instance's code needs, read from its compiled x86-64 objects with
//! `iced-x86` (each instruction's CPUID features), for `check --deep`. The objects read
//! are compiled for x86-64's baseline (`-march=x86-64` after the flag profile's own
//! `-march`), so what they need beyond it comes from the instance itself: its assembly
//! files, its intrinsics and inline assembly, the `-m` flags of its `cflags` — never from
//! the flag profile's `-march=native`, which would make every instruction the build host
//! has look needed. What they need must then be in `requires-cpu`, directly or through a
//! feature that implies it (a CPU with AVX2 has AVX, one with SSE4.2 has POPCNT).
//!
//! Code that reads the CPU's features at run time ([`Needs::dispatches`]) may use an
//! extension only where it exists, so what it needs is said as a note, not an error.
//!
//! Left alone: the baseline (8086 to SSE2, x86-64, CMOV, CX8, FXSR), hint instructions that
//! older CPUs run as no-ops (`endbr64`, CET), `tzcnt` (older CPUs run its encoding as `bsf`,
//! which compilers rely on for non-zero operands), and features outside [`cpuinfo_name`]'s
//! table (system instructions a KEM does not use).

use std::collections::BTreeMap;

use iced_x86::{
    CpuidFeature as F, Decoder, DecoderOptions, Formatter, Instruction, IntelFormatter, Mnemonic,
};
use object::{Object, ObjectSection, SectionKind};

/// The `/proc/cpuinfo` name of a feature code can need beyond x86-64's baseline; `None`
/// for the baseline and the features the check leaves alone.
fn cpuinfo_name(f: F) -> Option<&'static str> {
    Some(match f {
        F::SSE3 => "pni",
        F::SSSE3 => "ssse3",
        F::SSE4_1 => "sse4_1",
        F::SSE4_2 => "sse4_2",
        F::SSE4A => "sse4a",
        F::POPCNT => "popcnt",
        F::LZCNT => "abm",
        F::CMPXCHG16B => "cx16",
        F::MOVBE => "movbe",
        F::AES => "aes",
        F::PCLMULQDQ => "pclmulqdq",
        F::SHA => "sha_ni",
        F::AVX => "avx",
        F::AVX2 => "avx2",
        F::FMA => "fma",
        F::FMA4 => "fma4",
        F::F16C => "f16c",
        F::XOP => "xop",
        F::TBM => "tbm",
        F::BMI1 => "bmi1",
        F::BMI2 => "bmi2",
        F::ADX => "adx",
        F::RDRAND => "rdrand",
        F::RDSEED => "rdseed",
        F::RDTSCP => "rdtscp",
        F::PREFETCHW => "3dnowprefetch",
        F::GFNI => "gfni",
        F::VAES => "vaes",
        F::VPCLMULQDQ => "vpclmulqdq",
        F::AVX_VNNI => "avx_vnni",
        F::AVX512F => "avx512f",
        F::AVX512BW => "avx512bw",
        F::AVX512CD => "avx512cd",
        F::AVX512DQ => "avx512dq",
        F::AVX512VL => "avx512vl",
        F::AVX512_IFMA => "avx512ifma",
        F::AVX512_VBMI => "avx512vbmi",
        F::AVX512_VBMI2 => "avx512_vbmi2",
        F::AVX512_VNNI => "avx512_vnni",
        F::AVX512_BITALG => "avx512_bitalg",
        F::AVX512_VPOPCNTDQ => "avx512_vpopcntdq",
        F::AVX512_BF16 => "avx512_bf16",
        F::AVX512_FP16 => "avx512_fp16",
        _ => return None,
    })
}

/// The features a CPU with `name` has as well (every such CPU made: AVX came with SSE4.2,
/// SSE4.2 with POPCNT; AVX-512's subsets need its foundation, which needs AVX2 and FMA).
fn implied(name: &str) -> &'static [&'static str] {
    match name {
        "sse4_1" => &["pni", "ssse3"],
        "sse4_2" => &["pni", "ssse3", "sse4_1", "popcnt"],
        "avx" => &["pni", "ssse3", "sse4_1", "sse4_2", "popcnt"],
        "avx2" | "fma" | "f16c" => &["avx", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt"],
        "vaes" => &["aes", "avx", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt"],
        "vpclmulqdq" => &[
            "pclmulqdq",
            "avx",
            "pni",
            "ssse3",
            "sse4_1",
            "sse4_2",
            "popcnt",
        ],
        n if n.starts_with("avx512") => &[
            "avx512f", "avx2", "fma", "f16c", "avx", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt",
        ],
        _ => &[],
    }
}

/// What one object's code needs.
#[derive(Debug, Default)]
pub struct Needs {
    /// Per feature beyond the baseline (cpuinfo name), the first instruction that needs it
    /// (Intel syntax).
    pub features: BTreeMap<&'static str, String>,
    /// The code reads the CPU's features at run time (a `cpuid` instruction, or gcc's
    /// `__builtin_cpu_supports` and ifunc data): it may use an extension only where the CPU
    /// has it.
    pub dispatches: bool,
}

/// Symbols through which compiled code asks which CPU it runs on (libgcc's CPU model data).
const DISPATCH_SYMBOLS: [&str; 3] = ["__cpu_model", "__cpu_features2", "__cpu_indicator_init"];

/// What `data`, a compiled object, needs of the CPU. Another architecture than x86-64
/// needs nothing this check knows of.
pub fn needed(data: &[u8]) -> Result<Needs, String> {
    use object::ObjectSymbol;
    let file = object::File::parse(data).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    if file.architecture() != object::Architecture::X86_64 {
        return Ok(Needs::default());
    }
    let mut dispatches = file
        .symbols()
        .any(|s| s.is_undefined() && s.name().is_ok_and(|n| DISPATCH_SYMBOLS.contains(&n)));
    let mut formatter = IntelFormatter::new();
    let mut insn = Instruction::default();
    for section in file.sections().filter(|s| s.kind() == SectionKind::Text) {
        let code = section.data().map_err(|e| e.to_string())?;
        let mut decoder = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            if insn.is_invalid() || insn.mnemonic() == Mnemonic::Tzcnt {
                continue;
            }
            dispatches |= insn.mnemonic() == Mnemonic::Cpuid;
            for name in insn
                .cpuid_features()
                .iter()
                .filter_map(|f| cpuinfo_name(*f))
            {
                out.entry(name).or_insert_with(|| {
                    let mut text = String::new();
                    formatter.format(&insn, &mut text);
                    text
                });
            }
        }
    }
    Ok(Needs {
        features: out,
        dispatches,
    })
}

/// Of `needed`, the features that `requires` (the instance's `requires-cpu`) does not give,
/// directly or through one that implies them, each with its instruction.
pub fn missing(
    needed: BTreeMap<&'static str, String>,
    requires: &[String],
) -> Vec<(String, String)> {
    let given = |f: &str| requires.iter().any(|r| r == f || implied(r).contains(&f));
    needed
        .into_iter()
        .filter(|(f, _)| !given(f))
        .map(|(f, insn)| (f.to_string(), insn))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name the table and the implications give is one `requires-cpu` accepts.
    #[test]
    fn names_are_the_kernels() {
        let implied_names = F::values()
            .filter_map(cpuinfo_name)
            .flat_map(|n| implied(n).iter().copied());
        for n in F::values().filter_map(cpuinfo_name).chain(implied_names) {
            assert_eq!(
                crate::dsl::cpuinfo_name_of_gcc_flag(&format!("-m{n}")),
                Some(n),
                "{n} is not a cpuinfo name"
            );
        }
    }

    /// A real object, assembled by the system's compiler: AVX2, AVX (a VEX move) and POPCNT
    /// are needed, `tzcnt` and `endbr64` are not; `requires-cpu "avx2" "popcnt"` gives all.
    #[test]
    fn an_assembled_object_needs_what_its_instructions_need() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("f.S");
        std::fs::write(
            &src,
            ".text\n.globl f\nf:\n endbr64\n vmovdqu (%rdi), %ymm0\n vpaddd %ymm2, %ymm1, %ymm0\n popcnt %rbx, %rax\n tzcnt %ecx, %eax\n ret\n",
        )
        .unwrap();
        let obj = d.path().join("f.o");
        let ok = std::process::Command::new("cc")
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status()
            .unwrap();
        assert!(ok.success());
        let needs = needed(&std::fs::read(&obj).unwrap()).unwrap();
        assert!(!needs.dispatches);
        let needed = needs.features;
        assert_eq!(
            needed.keys().copied().collect::<Vec<_>>(),
            ["avx", "avx2", "popcnt"]
        );
        assert!(needed["avx2"].starts_with("vpaddd"), "{needed:?}");
        assert!(missing(needed.clone(), &["avx2".into(), "popcnt".into()]).is_empty());
        let left = missing(needed.clone(), &["avx".into()]);
        let names: Vec<&str> = left.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["avx2"], "a CPU with AVX has POPCNT");
        let left = missing(needed, &["ssse3".into()]);
        let names: Vec<&str> = left.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["avx", "avx2", "popcnt"]);
    }
}
