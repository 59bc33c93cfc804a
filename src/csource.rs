//! What a C source file says about itself, read from its text without a compiler: the
//! functions it defines at file level (`main`, `randombytes`), the headers it includes
//! (`<openssl/evp.h>`), and macros that rename a function (`#define randombytes
//! my_randombytes`). The build leaves out NIST packages' own `rng.c` and
//! `PQCgenKAT_kem.c` with it, `check --deep` and `ngcc-pipe import` name what they find.
//!
//! Comments and the contents of string and character literals are blanked first (their
//! newlines kept), and preprocessor lines are skipped when looking for definitions. A
//! definition is `name (...)` at brace depth 0 followed by `{`; a declaration ends in `;`.

/// Blank comments and literal contents, keeping line structure.
pub fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                i += 1;
            }
            i += 2;
            out.extend_from_slice(b"  ");
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'"' || c == b'\'' {
            out.push(c);
            i += 1;
            while i < b.len() && b[i] != c && b[i] != b'\n' {
                if b[i] == b'\\' {
                    out.push(b' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
            }
            if i < b.len() && b[i] == c {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The text without its preprocessor lines (continuations included), as blanks.
fn without_directives(stripped: &str) -> String {
    let mut out = String::with_capacity(stripped.len());
    let mut in_directive = false;
    for line in stripped.split_inclusive('\n') {
        let directive = in_directive || line.trim_start().starts_with('#');
        in_directive = directive && line.trim_end_matches(['\n', '\r']).ends_with('\\');
        if directive {
            out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
        } else {
            out.push_str(line);
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Which of `names` the file defines as functions at file level, in the order of `names`.
pub fn defined_functions<'a>(text: &str, names: &[&'a str]) -> Vec<&'a str> {
    let code = without_directives(&strip(text));
    let b = code.as_bytes();
    let mut found: Vec<&'a str> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => depth -= 1,
            c if depth == 0 && is_ident(c) && (i == 0 || !is_ident(b[i - 1])) => {
                let start = i;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                let word = &code[start..i];
                if let Some(name) = names.iter().find(|n| **n == word) {
                    if is_definition(b, i) && !found.contains(name) {
                        found.push(name);
                    }
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    names
        .iter()
        .copied()
        .filter(|n| found.contains(n))
        .collect()
}

/// After a name at `i`: `(` ... matching `)`, then `{` (blanks between).
fn is_definition(b: &[u8], mut i: usize) -> bool {
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_ws(&mut i);
    if b.get(i) != Some(&b'(') {
        return false;
    }
    let mut depth = 0;
    while i < b.len() {
        match b[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    i += 1;
                    break;
                }
            }
            b';' | b'{' | b'}' => return false,
            _ => {}
        }
        i += 1;
    }
    skip_ws(&mut i);
    b.get(i) == Some(&b'{')
}

/// The headers a file includes: (name, angle brackets?).
pub fn includes(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    // Comments blanked, literals kept (`#include "x.h"` is a literal).
    for line in text.lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("include") else {
            continue;
        };
        let rest = rest.trim_start();
        let (open, close, angle) = match rest.chars().next() {
            Some('<') => ('<', '>', true),
            Some('"') => ('"', '"', false),
            _ => continue,
        };
        if let Some(end) = rest[open.len_utf8()..].find(close) {
            out.push((rest[1..1 + end].to_string(), angle));
        }
    }
    out
}

/// The system library a header belongs to, for the libraries a package may need
/// (`<openssl/evp.h>` -> `crypto`, `<gmp.h>` -> `gmp`, `<NTL/ZZ.h>` -> `ntl`).
pub fn library_for_header(header: &str) -> Option<&'static str> {
    if header.starts_with("openssl/") {
        Some("crypto")
    } else if header == "gmp.h" || header == "gmpxx.h" {
        Some("gmp")
    } else if header.starts_with("NTL/") {
        Some("ntl")
    } else if header == "sodium.h" || header.starts_with("sodium/") {
        Some("sodium")
    } else {
        None
    }
}

/// `#define <name> <replacement>` with a plain identifier replacement: the symbol a
/// function name really becomes (`#define randombytes PQCLEAN_randombytes`).
pub fn renamed(text: &str, name: &str) -> Option<String> {
    for line in strip(text).lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix('#') else {
            continue;
        };
        let Some(rest) = rest.trim_start().strip_prefix("define") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        if words.next() == Some(name) {
            if let Some(to) = words.next() {
                if to.bytes().all(is_ident) && to != name {
                    return Some(to.to_string());
                }
            }
        }
    }
    None
}

/// Replace comments with spaces, keeping newlines so line numbers stay right; literals are
/// kept as written (a header's prototypes, a source line shown in a survey hit).
pub fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    for (pos, c) in text.char_indices() {
        if pos < i {
            continue;
        }
        match c {
            '/' if b.get(pos + 1) == Some(&b'/') => {
                let end = text[pos..].find('\n').map_or(text.len(), |n| pos + n);
                out.push(' ');
                i = end;
            }
            '/' if b.get(pos + 1) == Some(&b'*') => {
                let end = text[pos + 2..]
                    .find("*/")
                    .map_or(text.len(), |n| pos + 2 + n + 2);
                out.push(' ');
                out.extend(text[pos..end].chars().filter(|&c| c == '\n'));
                i = end;
            }
            '"' | '\'' => {
                // Copy a literal verbatim so `//` inside it is not a comment.
                let mut end = pos + 1;
                let mut esc = false;
                for (j, d) in text[pos + 1..].char_indices() {
                    end = pos + 1 + j + d.len_utf8();
                    if esc {
                        esc = false;
                    } else if d == '\\' {
                        esc = true;
                    } else if d == c || d == '\n' {
                        break;
                    }
                }
                out.push_str(&text[pos..end]);
                i = end;
            }
            _ => {
                out.push(c);
                i = pos + c.len_utf8();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RNG_C: &str = r#"
#include <string.h>
#include <openssl/evp.h>
#include "rng.h"
/* int randombytes(unsigned char *x) { } in a comment */
static void AES256_ECB(unsigned char *key, unsigned char *ctr, unsigned char *buffer);
void
randombytes_init(unsigned char *entropy_input,
                 unsigned char *personalization_string,
                 int security_strength)
{
    char *s = "randombytes(x) {";
}
int randombytes(unsigned char *x, unsigned long long xlen) { return 0; }
"#;

    #[test]
    fn finds_file_level_definitions_only() {
        let names = ["main", "randombytes", "randombytes_init"];
        assert_eq!(
            defined_functions(RNG_C, &names),
            ["randombytes", "randombytes_init"]
        );
        let kem = "int crypto_kem_enc(unsigned char *ct) {\n  randombytes(ct, 32);\n  return 0;\n}\nint randombytes(unsigned char *, unsigned long long);\n";
        assert!(defined_functions(kem, &names).is_empty());
        let gen = "#define main not_main\nint\nmain (void)\n{\n return 0;\n}\n";
        assert_eq!(defined_functions(gen, &names), ["main"]);
    }

    #[test]
    fn lists_includes_and_their_libraries() {
        let inc = includes(RNG_C);
        assert_eq!(
            inc,
            [
                ("string.h".to_string(), true),
                ("openssl/evp.h".to_string(), true),
                ("rng.h".to_string(), false)
            ]
        );
        assert_eq!(library_for_header("openssl/evp.h"), Some("crypto"));
        assert_eq!(library_for_header("gmp.h"), Some("gmp"));
        assert_eq!(library_for_header("stdint.h"), None);
    }

    #[test]
    fn finds_renames() {
        let h = "#define randombytes PQCLEAN_randombytes\nint randombytes(uint8_t *, size_t);\n";
        assert_eq!(
            renamed(h, "randombytes").as_deref(),
            Some("PQCLEAN_randombytes")
        );
        assert_eq!(
            renamed("#define randombytes_init(x) f(x)\n", "randombytes"),
            None
        );
    }
}
