//! Generated C for the profile build: one `__wrap_SYM` per declared primitive.
//!
//! The instance is linked with `-Wl,--wrap=SYM` ([`wrap_link_flags`]), so every call to
//! `SYM` from *another object file* lands in `__wrap_SYM`, which counts it and forwards to
//! `__real_SYM` (the original definition). Calls inside one translation unit are resolved
//! by the compiler/assembler and never see the wrapper: `fips202.c`'s `shake256` calling
//! its own `keccak_absorb` is not counted, which is what we want (we count the provided
//! API entry points), and it is also why the primitives must be compiled into objects of
//! their own, separate from the instance's code and from this file.
//!
//! Nesting: a global depth counter makes only the outermost wrapped call take timestamps.
//! A nested wrapped call (e.g. `cshake256` in sp800-185.c calling `shake256_inc_absorb` in
//! fips202.c) increments `calls` but not `outer_calls` or `cycles`, so per-family shares
//! never add up to more than the operation. The counter is a plain global: the runner
//! calls the KEM from one thread at a time.
//!
//! The generated file exports this ABI, read by `kem-runner` with `dlsym`:
//! ```c
//! struct ngcc_prof_entry { const char *symbol; const char *family; uint64_t calls; uint64_t outer_calls; uint64_t cycles; };
//! size_t ngcc_prof_entries(const struct ngcc_prof_entry **out);
//! void ngcc_prof_reset(void);
//! void ngcc_prof_calibrate(uint64_t n, double *outer_per_call, double *inner_per_call);
//! ```
//! `cycles` are counter ticks inside outermost wrapped calls (x86-64: `lfence; rdtsc;
//! lfence`; aarch64: `isb; mrs cntvct_el0`; elsewhere `clock_gettime(CLOCK_MONOTONIC)` in
//! ns). `ngcc_prof_calibrate` times `n` calls of an empty `noinline` function directly and
//! `n` calls through a wrapper built from the same macro as the real ones (its counters are
//! not in the table), best of 5 rounds: `outer_per_call` is the extra ticks a caller sees
//! per wrapped call, `inner_per_call` the ticks a wrapper records for an empty callee.
//!
//! How the runner uses the calibration: subtract `inner_per_call x outer_calls` from each
//! entry's `cycles`, and `outer_per_call x (sum of outer_calls)` from the operation's total
//! ticks, so shares compare what the un-wrapped object would spend.
//!
//! `--wrap` is a GNU ld / lld / gold option (Linux, ELF); Apple's ld has no equivalent.
//!
//! `__real_SYM` is declared weak: a declared primitive that no object defines (a header
//! function the build does not compile) then leaves the object loadable instead of
//! failing `dlopen` with "undefined symbol"; it can only be reached through a caller that
//! would have failed to load without the wrappers too.
//!
//! The file `#include`s each header by its display path, so compile it with `-I <source
//! root>` (plus the primitives' include folders). The DRNG is wrapped under family `drng`;
//! when no header declares it, its prototype is taken to be `int SYM(uint8_t *, size_t)`
//! (PQClean's `randombytes` and NIST's `randombytes` both return int; NIST's takes
//! `unsigned long long` for the length, which is passed in the same register on the
//! supported 64-bit ABIs).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::prototype::{parse_header, HeaderDecls, Param, Prototype};
use crate::model::PrimitiveFn;

/// Family name the DRNG is reported under.
pub const DRNG_FAMILY: &str = "drng";

/// `-Wl,--wrap=SYM` for every declared primitive and the DRNG, without duplicates.
pub fn wrap_link_flags(functions: &[PrimitiveFn], drng: Option<&str>) -> Vec<String> {
    wrapped_symbols(functions, drng)
        .into_iter()
        .map(|(sym, _)| format!("-Wl,--wrap={sym}"))
        .collect()
}

/// (symbol, family) in declaration order, DRNG last, first declaration wins.
fn wrapped_symbols(functions: &[PrimitiveFn], drng: Option<&str>) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let all = functions
        .iter()
        .map(|f| (f.symbol.as_str(), f.family.as_str()))
        .chain(drng.map(|d| (d, DRNG_FAMILY)));
    for (sym, fam) in all {
        if seen.insert(sym.to_string()) {
            out.push((sym.to_string(), fam.to_string()));
        }
    }
    out
}

fn is_c_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a declared function cannot be wrapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WrapperError {
    /// The manifest names a macro, not the linker symbol.
    #[error(
        "`{sym}` is a macro for `{target}` in {path}; declare the linker symbol `{linker}` instead"
    )]
    Macro {
        /// The declared name.
        sym: String,
        /// What the macro expands to.
        target: String,
        /// The header.
        path: String,
        /// The symbol the macro resolves to.
        linker: String,
    },
    /// A `static` function.
    #[error("`{sym}` is declared `static` in {path} (line {line}): it is not a linker symbol and cannot be wrapped")]
    Static {
        /// The function.
        sym: String,
        /// The header.
        path: String,
        /// Its line.
        line: usize,
    },
    /// A variadic function.
    #[error("`{sym}` is variadic in {path} (line {line}): variadic functions cannot be wrapped")]
    Variadic {
        /// The function.
        sym: String,
        /// The header.
        path: String,
        /// Its line.
        line: usize,
    },
    /// A parameter whose type the prototype reader cannot tell.
    #[error("`{sym}` in {path} (line {line}): cannot read the type of parameter {param}")]
    ParamType {
        /// The function.
        sym: String,
        /// The header.
        path: String,
        /// Its line.
        line: usize,
        /// 1-based parameter.
        param: usize,
    },
    /// Not a C identifier.
    #[error("`{0}` is not a C identifier")]
    NotIdentifier(String),
    /// No prototype in the headers searched.
    #[error("no prototype for `{sym}` in {searched}")]
    NoPrototype {
        /// The function.
        sym: String,
        /// The headers searched, or `no header (none declared)`.
        searched: String,
    },
}

/// Find the prototype of linker symbol `sym` in the headers.
fn find_prototype(
    sym: &str,
    parsed: &[(String, HeaderDecls)],
) -> Result<Option<(String, Prototype)>, WrapperError> {
    for (path, h) in parsed {
        if let Some(target) = h.aliases.get(sym) {
            return Err(WrapperError::Macro {
                sym: sym.to_string(),
                target: target.to_string(),
                path: path.clone(),
                linker: h.resolve(sym).to_string(),
            });
        }
    }
    for (path, h) in parsed {
        // A declaration under a macro alias (`int randombytes(...)` with
        // `#define randombytes PQCLEAN_randombytes`) declares the aliased symbol.
        let found = parsed.iter().find_map(|(_, any)| {
            h.prototypes
                .iter()
                .find(|p| p.name == sym || any.resolve(&p.name) == sym)
        });
        if let Some(p) = found {
            if p.is_static {
                return Err(WrapperError::Static {
                    sym: sym.to_string(),
                    path: path.clone(),
                    line: p.line,
                });
            }
            if p.variadic {
                return Err(WrapperError::Variadic {
                    sym: sym.to_string(),
                    path: path.clone(),
                    line: p.line,
                });
            }
            if let Some((i, _)) = p
                .params
                .iter()
                .enumerate()
                .find(|(_, q)| q.fn_pointer.is_none() && q.ty.is_empty())
            {
                return Err(WrapperError::ParamType {
                    sym: sym.to_string(),
                    path: path.clone(),
                    line: p.line,
                    param: i + 1,
                });
            }
            return Ok(Some((path.clone(), p.clone())));
        }
    }
    Ok(None)
}

/// The default DRNG prototype: `int SYM(uint8_t *, size_t)`.
fn default_drng_prototype(sym: &str) -> Prototype {
    let p = |ty: &str| Param {
        ty: ty.to_string(),
        name: None,
        array: Vec::new(),
        fn_pointer: None,
    };
    Prototype {
        ret: "int".into(),
        name: sym.into(),
        params: vec![p("uint8_t *"), p("size_t")],
        variadic: false,
        is_static: false,
        line: 0,
    }
}

const PRELUDE: &str = r#"#if !defined(__x86_64__) && !defined(__aarch64__) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 199309L
#endif
#include <stddef.h>
#include <stdint.h>
#if !defined(__x86_64__) && !defined(__aarch64__)
#include <time.h>
#endif
"#;

const RUNTIME: &str = r#"
struct ngcc_prof_entry {
    const char *symbol;
    const char *family;
    uint64_t calls;
    uint64_t outer_calls;
    uint64_t cycles;
};

size_t ngcc_prof_entries(const struct ngcc_prof_entry **out);
void ngcc_prof_reset(void);
void ngcc_prof_calibrate(uint64_t n, double *outer_per_call, double *inner_per_call);

/* Depth of wrapped calls in progress: only the outermost one is timed. */
static unsigned ngcc_prof_depth;

static inline uint64_t ngcc_prof_ticks(void) {
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi) : : "memory");
    return ((uint64_t)hi << 32) | lo;
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
    return v;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* The body of every wrapper: count, time if outermost, forward. */
#define NGCC_PROF_WRAP(ENTRY, CALL)                                  \
    do {                                                             \
        struct ngcc_prof_entry *ngcc_e = (ENTRY);                    \
        ngcc_e->calls++;                                             \
        if (ngcc_prof_depth++ == 0) {                                \
            uint64_t ngcc_t0;                                        \
            ngcc_e->outer_calls++;                                   \
            ngcc_t0 = ngcc_prof_ticks();                             \
            CALL;                                                    \
            ngcc_e->cycles += ngcc_prof_ticks() - ngcc_t0;           \
        } else {                                                     \
            CALL;                                                    \
        }                                                            \
        ngcc_prof_depth--;                                           \
    } while (0)
"#;

const TAIL: &str = r#"
size_t ngcc_prof_entries(const struct ngcc_prof_entry **out) {
    *out = ngcc_prof_table;
    return NGCC_PROF_COUNT;
}

void ngcc_prof_reset(void) {
    size_t i;
    for (i = 0; i < NGCC_PROF_COUNT; i++) {
        ngcc_prof_table[i].calls = 0;
        ngcc_prof_table[i].outer_calls = 0;
        ngcc_prof_table[i].cycles = 0;
    }
    ngcc_prof_depth = 0;
}

/* Calibration: an empty callee, called bare and through an identical wrapper. */
static struct ngcc_prof_entry ngcc_prof_cal_entry = {"(calibration)", "(calibration)", 0, 0, 0};

__attribute__((noinline)) static void ngcc_prof_cal_empty(void) {
    __asm__ volatile("" : : : "memory");
}

__attribute__((noinline)) static void ngcc_prof_cal_wrapper(void) {
    NGCC_PROF_WRAP(&ngcc_prof_cal_entry, ngcc_prof_cal_empty());
}

void ngcc_prof_calibrate(uint64_t n, double *outer_per_call, double *inner_per_call) {
    void (*volatile bare)(void) = ngcc_prof_cal_empty;
    void (*volatile wrapped)(void) = ngcc_prof_cal_wrapper;
    uint64_t best_bare = UINT64_MAX, best_wrapped = UINT64_MAX, best_inner = UINT64_MAX;
    unsigned saved_depth = ngcc_prof_depth;
    int round;
    if (n == 0) {
        n = 1;
    }
    ngcc_prof_depth = 0;
    for (round = 0; round < 5; round++) {
        uint64_t i, t0, t1;
        t0 = ngcc_prof_ticks();
        for (i = 0; i < n; i++) {
            bare();
        }
        t1 = ngcc_prof_ticks();
        if (t1 - t0 < best_bare) {
            best_bare = t1 - t0;
        }
        ngcc_prof_cal_entry.cycles = 0;
        t0 = ngcc_prof_ticks();
        for (i = 0; i < n; i++) {
            wrapped();
        }
        t1 = ngcc_prof_ticks();
        if (t1 - t0 < best_wrapped) {
            best_wrapped = t1 - t0;
        }
        if (ngcc_prof_cal_entry.cycles < best_inner) {
            best_inner = ngcc_prof_cal_entry.cycles;
        }
    }
    ngcc_prof_depth = saved_depth;
    *outer_per_call = best_wrapped > best_bare ? (double)(best_wrapped - best_bare) / (double)n : 0.0;
    *inner_per_call = (double)best_inner / (double)n;
}
"#;

/// Generate the wrapper C file for `functions` and the DRNG.
///
/// `headers` are (display path, text) pairs searched in order; the display path is also
/// what the generated file `#include`s. Errors name the symbol and the headers searched.
pub fn generate_wrappers(
    headers: &[(String, String)],
    functions: &[PrimitiveFn],
    drng: Option<&str>,
) -> Result<String, WrapperError> {
    let parsed: Vec<(String, HeaderDecls)> = headers
        .iter()
        .map(|(path, text)| (path.clone(), parse_header(text)))
        .collect();
    let searched = || {
        if headers.is_empty() {
            "no header (none declared)".to_string()
        } else {
            headers
                .iter()
                .map(|(p, _)| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let symbols = wrapped_symbols(functions, drng);
    let mut wrappers = Vec::new();
    for (sym, family) in &symbols {
        if !is_c_identifier(sym) {
            return Err(WrapperError::NotIdentifier(sym.clone()));
        }
        let proto = match find_prototype(sym, &parsed)? {
            Some((_, p)) => p,
            None if family == DRNG_FAMILY => default_drng_prototype(sym),
            None => {
                return Err(WrapperError::NoPrototype {
                    sym: sym.clone(),
                    searched: searched(),
                })
            }
        };
        wrappers.push((sym.clone(), family.clone(), proto));
    }

    let mut c = String::new();
    c.push_str(
        "/* Generated by ngcc-pipe: link-time wrappers for the profile build. Do not edit.\n",
    );
    c.push_str(" * Link with:");
    for f in wrap_link_flags(functions, drng) {
        let _ = write!(c, " {f}");
    }
    c.push_str(
        "\n * Only calls that cross object files are wrapped (see ngcc-pipe src/profile). */\n",
    );
    c.push_str(PRELUDE);
    for (path, _) in headers {
        let _ = writeln!(c, "#include \"{}\"", path.replace('\\', "/"));
    }
    c.push_str(RUNTIME);
    let _ = writeln!(c, "\n#define NGCC_PROF_COUNT {}u", wrappers.len());
    let _ = writeln!(
        c,
        "static struct ngcc_prof_entry ngcc_prof_table[{}] = {{",
        wrappers.len().max(1)
    );
    for (sym, family, _) in &wrappers {
        let _ = writeln!(c, "    {{\"{sym}\", \"{}\", 0, 0, 0}},", c_escape(family));
    }
    if wrappers.is_empty() {
        c.push_str("    {\"\", \"\", 0, 0, 0},\n");
    }
    c.push_str("};\n");
    for (i, (sym, _, proto)) in wrappers.iter().enumerate() {
        let real = proto.declare(&format!("__real_{sym}"));
        let wrap = proto.declare(&format!("__wrap_{sym}"));
        let args: Vec<String> = (0..proto.params.len()).map(|k| format!("a{k}")).collect();
        let call = format!("__real_{sym}({})", args.join(", "));
        let _ = write!(
            c,
            "\nextern {real} __attribute__((weak));\n{wrap};\n{wrap} {{\n"
        );
        if proto.ret == "void" {
            let _ = writeln!(c, "    NGCC_PROF_WRAP(&ngcc_prof_table[{i}], {call});");
        } else {
            let ret_var = Param {
                ty: proto.ret.clone(),
                name: None,
                array: Vec::new(),
                fn_pointer: None,
            }
            .declare("ngcc_r");
            let _ = writeln!(c, "    {ret_var};");
            let _ = writeln!(
                c,
                "    NGCC_PROF_WRAP(&ngcc_prof_table[{i}], ngcc_r = {call});"
            );
            c.push_str("    return ngcc_r;\n");
        }
        c.push_str("}\n");
    }
    c.push_str(TAIL);
    Ok(c)
}

fn c_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_ascii_graphic() || c == ' ' => vec![c],
            _ => vec!['?'],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(symbol: &str, family: &str) -> PrimitiveFn {
        PrimitiveFn {
            symbol: symbol.into(),
            family: family.into(),
        }
    }

    const FIPS: &str = "#include <stdint.h>\ntypedef struct { uint64_t *ctx; } shake128ctx;\n\
        void shake128_absorb(shake128ctx *state, const uint8_t *input, size_t inlen);\n\
        void shake256(uint8_t *output, size_t outlen,\n const uint8_t *input, size_t inlen);\n";
    const RNG: &str =
        "#define randombytes PQCLEAN_randombytes\nint randombytes(uint8_t *output, size_t n);\n";

    #[test]
    fn flags_are_deduplicated_with_drng_last() {
        let fl = wrap_link_flags(
            &[
                f("shake256", "keccak"),
                f("sha3_256", "keccak"),
                f("shake256", "x"),
            ],
            Some("PQCLEAN_randombytes"),
        );
        assert_eq!(
            fl,
            [
                "-Wl,--wrap=shake256",
                "-Wl,--wrap=sha3_256",
                "-Wl,--wrap=PQCLEAN_randombytes"
            ]
        );
    }

    #[test]
    fn wrappers_have_the_exact_prototypes() {
        let headers = vec![
            ("common/fips202.h".to_string(), FIPS.to_string()),
            ("common/randombytes.h".to_string(), RNG.to_string()),
        ];
        let c = generate_wrappers(
            &headers,
            &[f("shake256", "keccak"), f("shake128_absorb", "keccak")],
            Some("PQCLEAN_randombytes"),
        )
        .unwrap();
        assert!(c.contains("#include \"common/fips202.h\""));
        assert!(c.contains(
            "extern void __real_shake256(uint8_t *a0, size_t a1, const uint8_t *a2, size_t a3) __attribute__((weak));"
        ));
        assert!(c.contains(
            "void __wrap_shake128_absorb(shake128ctx *a0, const uint8_t *a1, size_t a2) {"
        ));
        // The DRNG's declaration was under the `randombytes` alias.
        assert!(c.contains("int __wrap_PQCLEAN_randombytes(uint8_t *a0, size_t a1) {"));
        assert!(c.contains("ngcc_r = __real_PQCLEAN_randombytes(a0, a1)"));
        assert!(c.contains("{\"PQCLEAN_randombytes\", \"drng\", 0, 0, 0},"));
        assert!(c.contains("#define NGCC_PROF_COUNT 3u"));
    }

    #[test]
    fn drng_without_header_gets_the_default_prototype() {
        let c = generate_wrappers(&[], &[], Some("randombytes")).unwrap();
        assert!(c.contains("int __wrap_randombytes(uint8_t *a0, size_t a1) {"));
    }

    #[test]
    fn missing_prototype_names_symbol_and_headers() {
        let headers = vec![
            ("common/fips202.h".to_string(), FIPS.to_string()),
            ("common/sha2.h".to_string(), String::new()),
        ];
        let err = generate_wrappers(&headers, &[f("shake999", "keccak")], None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "no prototype for `shake999` in common/fips202.h, common/sha2.h"
        );
    }

    #[test]
    fn macro_name_instead_of_linker_symbol_is_explained() {
        let headers = vec![("common/randombytes.h".to_string(), RNG.to_string())];
        let err = generate_wrappers(&headers, &[], Some("randombytes"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("declare the linker symbol `PQCLEAN_randombytes`"),
            "{err}"
        );
    }

    #[test]
    fn static_and_variadic_functions_are_refused() {
        let h = vec![(
            "h.h".to_string(),
            "static inline void s(int x) { (void)x; }\nvoid v(int n, ...);\n".to_string(),
        )];
        assert!(generate_wrappers(&h, &[f("s", "x")], None)
            .unwrap_err()
            .to_string()
            .contains("static"));
        assert!(generate_wrappers(&h, &[f("v", "x")], None)
            .unwrap_err()
            .to_string()
            .contains("variadic"));
        assert!(generate_wrappers(&h, &[f("bad-name", "x")], None)
            .unwrap_err()
            .to_string()
            .contains("not a C identifier"));
    }
}
