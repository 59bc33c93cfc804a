//! api.h's sizes and name read without a compiler, for a machine where the compiler cannot
//! run contained: a small C preprocessor over the package's own headers, read through
//! [`Package`]. It follows `#include "…"` (inside the package only; `<…>` system headers
//! are not read), object-like `#define` and `#undef`, and `#if`/`#ifdef`/`#ifndef`/
//! `#elif`/`#else`/`#endif` with integer conditions, and evaluates a size's integer
//! arithmetic (`+ - * / % << >>`, comparisons, `&& || !`, `?:`, parentheses).
//!
//! It never guesses: a name it does not know (defined by a system header or the compiler,
//! `__has_include`, a function-like macro, a cast), a condition it cannot decide or an
//! `#error` in force stops it, and the caller says which size is missing and why.

use std::collections::HashMap;

use super::read::{join, Package};

/// Deepest `#include` nesting followed.
const MAX_DEPTH: usize = 16;
/// Most files read for one api.h.
const MAX_FILES: usize = 200;
/// Deepest macro expansion.
const MAX_EXPANSION: usize = 64;

/// The object-like macros in force after api.h (`None`: function-like).
#[derive(Debug, Default)]
pub struct Defines {
    map: HashMap<String, Option<String>>,
    files: usize,
}

/// A token of a macro body or a condition.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i128),
    Ident(String),
    Str(String),
    Op(&'static str),
}

/// The defines in force after `dir/api.h`, its quoted includes searched in the including
/// file's folder, then in `includes` (relative to `dir`, as a build file's `-I` options).
pub fn read(pkg: &Package, dir: &str, includes: &[String]) -> Result<Defines, String> {
    let mut search: Vec<String> = vec![dir.to_string()];
    for i in includes {
        search.push(
            crate::safe_fs::normalize(std::path::Path::new(&join(dir, i)))
                .display()
                .to_string(),
        );
    }
    let mut d = Defines::default();
    d.file(pkg, &join(dir, "api.h"), &search, 0)?;
    Ok(d)
}

impl Defines {
    /// The integer value of macro `name`.
    pub fn number(&self, name: &str) -> Result<u64, String> {
        let toks = self.expand_name(name)?;
        let v = Eval::new(&toks, self).all()?;
        u64::try_from(v).map_err(|_| format!("`{name}` is negative ({v})"))
    }

    /// The string value of macro `name` (adjacent literals joined); `None` when it is not
    /// defined.
    pub fn string(&self, name: &str) -> Result<Option<String>, String> {
        if !self.map.contains_key(name) {
            return Ok(None);
        }
        let mut out = String::new();
        for t in self.expand_name(name)? {
            match t {
                Tok::Str(s) => out.push_str(&s),
                other => return Err(format!("`{name}` is not a string literal (at {other:?})")),
            }
        }
        Ok(Some(out))
    }

    fn expand_name(&self, name: &str) -> Result<Vec<Tok>, String> {
        match self.map.get(name) {
            None => Err(format!("`{name}` is not defined")),
            Some(_) => self.expand(&[Tok::Ident(name.to_string())], 0),
        }
    }

    /// Replace every object-like macro by its body, recursively.
    fn expand(&self, toks: &[Tok], depth: usize) -> Result<Vec<Tok>, String> {
        if depth > MAX_EXPANSION {
            return Err("macros nest too deep (or refer to themselves)".into());
        }
        let mut out = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                Tok::Ident(id) if id == "defined" => {
                    // `defined X` / `defined(X)`: kept for the evaluator, not expanded.
                    let (name, used) = match (toks.get(i + 1), toks.get(i + 2), toks.get(i + 3)) {
                        (Some(Tok::Op("(")), Some(Tok::Ident(n)), Some(Tok::Op(")"))) => (n, 4),
                        (Some(Tok::Ident(n)), _, _) => (n, 2),
                        _ => return Err("malformed `defined`".into()),
                    };
                    out.push(Tok::Num(self.is_defined(name)?.into()));
                    i += used;
                    continue;
                }
                Tok::Ident(id) => match self.map.get(id) {
                    Some(Some(body)) => out.extend(self.expand(&tokens(body)?, depth + 1)?),
                    Some(None) => return Err(format!("`{id}` is a function-like macro")),
                    None => return Err(format!("`{id}` is not defined in the package's headers")),
                },
                t => out.push(t.clone()),
            }
            i += 1;
        }
        Ok(out)
    }

    /// Whether `name` is defined; a name the compiler or a system header may define
    /// (`__x86_64__`, `_WIN32`) cannot be answered without them.
    fn is_defined(&self, name: &str) -> Result<bool, String> {
        if self.map.contains_key(name) {
            return Ok(true);
        }
        let reserved = name.starts_with("__")
            || (name.starts_with('_') && name[1..].starts_with(|c: char| c.is_ascii_uppercase()));
        if reserved {
            return Err(format!("`defined({name})` depends on the compiler"));
        }
        Ok(false)
    }

    /// Read one header: its directives in order.
    fn file(
        &mut self,
        pkg: &Package,
        rel: &str,
        search: &[String],
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("{rel}: includes nest deeper than {MAX_DEPTH}"));
        }
        self.files += 1;
        if self.files > MAX_FILES {
            return Err(format!("more than {MAX_FILES} headers"));
        }
        let text = pkg
            .read_text(rel)
            .ok_or_else(|| format!("{rel} cannot be read"))?;
        let here = std::path::Path::new(rel)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        // (active, some branch taken, the enclosing block active)
        let mut stack: Vec<(bool, bool, bool)> = Vec::new();
        for (n, line) in logical_lines(&text) {
            let at = || format!("{rel}:{n}");
            let Some(d) = line.trim_start().strip_prefix('#') else {
                continue;
            };
            let d = d.trim_start();
            let word: String = d
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let rest = d[word.len()..].trim();
            let active = stack.last().is_none_or(|s| s.0);
            let cond = |me: &Defines| -> Result<bool, String> {
                let toks = me.expand(&tokens(rest)?, 0)?;
                Ok(Eval::new(&toks, me).all()? != 0)
            };
            match word.as_str() {
                "if" | "ifdef" | "ifndef" => {
                    let v = if !active {
                        false
                    } else if word == "if" {
                        cond(self).map_err(|e| format!("{}: `#if`: {e}", at()))?
                    } else {
                        let name = rest.split_whitespace().next().unwrap_or("");
                        let def = self
                            .is_defined(name)
                            .map_err(|e| format!("{}: {e}", at()))?;
                        def == (word == "ifdef")
                    };
                    stack.push((v, v, active));
                }
                "elif" => {
                    let Some(&(_, taken, outer)) = stack.last() else {
                        return Err(format!("{}: `#elif` without `#if`", at()));
                    };
                    let v = outer
                        && !taken
                        && cond(self).map_err(|e| format!("{}: `#elif`: {e}", at()))?;
                    *stack.last_mut().expect("checked") = (v, taken || v, outer);
                }
                "else" => {
                    let Some(top) = stack.last_mut() else {
                        return Err(format!("{}: `#else` without `#if`", at()));
                    };
                    *top = (top.2 && !top.1, true, top.2);
                }
                "endif" => {
                    stack
                        .pop()
                        .ok_or_else(|| format!("{}: `#endif` without `#if`", at()))?;
                }
                _ if !active => {}
                "define" => {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if name.is_empty() {
                        return Err(format!("{}: malformed `#define`", at()));
                    }
                    let after = &rest[name.len()..];
                    let body = if after.starts_with('(') {
                        None
                    } else {
                        Some(after.trim().to_string())
                    };
                    self.map.insert(name, body);
                }
                "undef" => {
                    self.map
                        .remove(rest.split_whitespace().next().unwrap_or(""));
                }
                "include" => {
                    if let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next()) {
                        let found = std::iter::once(here.as_str())
                            .chain(search.iter().map(String::as_str))
                            .map(|dir| {
                                crate::safe_fs::normalize(std::path::Path::new(&join(dir, name)))
                                    .display()
                                    .to_string()
                            })
                            .find(|p| !p.starts_with("..") && !p.starts_with('/') && pkg.exists(p))
                            .ok_or_else(|| {
                                format!("{}: an `#include \"…\"` that is not in the package", at())
                            })?;
                        self.file(pkg, &found, search, depth + 1)?;
                    } else if !rest.starts_with('<') {
                        return Err(format!("{}: a computed `#include`", at()));
                    }
                }
                "error" => return Err(format!("{}: `#error` in force", at())),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Lines with `\`-continuations joined and comments removed, numbered from 1 (the number
/// of each logical line's first physical line).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 1;
    let mut in_comment = false;
    for (i, raw) in text.lines().enumerate() {
        if cur.is_empty() && !in_comment {
            start = i + 1;
        }
        let mut line = String::new();
        let mut chars = raw.chars().peekable();
        let mut in_str = false;
        while let Some(c) = chars.next() {
            if in_comment {
                if c == '*' && chars.peek() == Some(&'/') {
                    chars.next();
                    in_comment = false;
                    line.push(' ');
                }
                continue;
            }
            if in_str {
                line.push(c);
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        line.push(n);
                    }
                } else if c == '"' {
                    in_str = false;
                }
                continue;
            }
            match (c, chars.peek()) {
                ('"', _) => {
                    in_str = true;
                    line.push(c);
                }
                ('/', Some('*')) => {
                    chars.next();
                    in_comment = true;
                }
                ('/', Some('/')) => break,
                _ => line.push(c),
            }
        }
        if let Some(l) = line.strip_suffix('\\') {
            cur.push_str(l);
            cur.push(' ');
            continue;
        }
        cur.push_str(&line);
        out.push((start, std::mem::take(&mut cur)));
    }
    if !cur.is_empty() {
        out.push((start, cur));
    }
    out
}

/// The tokens of a macro body or condition.
fn tokens(s: &str) -> Result<Vec<Tok>, String> {
    const OPS: [&str; 24] = [
        "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "%", "<", ">", "!",
        "~", "&", "|", "^", "(", ")", "?", ":",
    ];
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i] as char).is_ascii_alphanumeric() {
                i += 1;
            }
            out.push(Tok::Num(number(&s[start..i])?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else if c == '"' {
            let mut v = String::new();
            let mut chars = s[i + 1..].char_indices();
            let mut end = None;
            while let Some((k, ch)) = chars.next() {
                match ch {
                    '"' => {
                        end = Some(i + 1 + k + 1);
                        break;
                    }
                    '\\' => match chars.next() {
                        Some((_, '"')) => v.push('"'),
                        Some((_, '\\')) => v.push('\\'),
                        Some((_, 'n')) => v.push('\n'),
                        Some((_, 't')) => v.push('\t'),
                        Some((_, o)) => return Err(format!("escape `\\{o}` in a string")),
                        None => break,
                    },
                    ch => v.push(ch),
                }
            }
            i = end.ok_or("unterminated string")?;
            out.push(Tok::Str(v));
        } else {
            let op = OPS
                .iter()
                .find(|o| s[i..].starts_with(**o))
                .ok_or_else(|| format!("`{}`", &s[i..].chars().next().unwrap_or(' ')))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Ok(out)
}

/// A C integer literal (decimal, hex, octal; `u`/`l` suffixes).
fn number(s: &str) -> Result<i128, String> {
    let digits = s.trim_end_matches(['u', 'U', 'l', 'L']);
    let parsed = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i128::from_str_radix(h, 16)
    } else if digits.len() > 1 && digits.starts_with('0') {
        i128::from_str_radix(&digits[1..], 8)
    } else {
        digits.parse()
    };
    parsed.map_err(|_| format!("`{s}` is not an integer"))
}

/// Precedence climbing over expanded tokens.
struct Eval<'a> {
    toks: &'a [Tok],
    at: usize,
    defs: &'a Defines,
}

const BINARY: [(&str, u8); 18] = [
    ("||", 1),
    ("&&", 2),
    ("|", 3),
    ("^", 4),
    ("&", 5),
    ("==", 6),
    ("!=", 6),
    ("<", 7),
    ("<=", 7),
    (">", 7),
    (">=", 7),
    ("<<", 8),
    (">>", 8),
    ("+", 9),
    ("-", 9),
    ("*", 10),
    ("/", 10),
    ("%", 10),
];

impl<'a> Eval<'a> {
    fn new(toks: &'a [Tok], defs: &'a Defines) -> Eval<'a> {
        Eval { toks, at: 0, defs }
    }

    /// The whole expression.
    fn all(&mut self) -> Result<i128, String> {
        let _ = self.defs;
        let v = self.ternary()?;
        match self.toks.get(self.at) {
            None => Ok(v),
            Some(t) => Err(format!("unexpected {t:?}")),
        }
    }

    fn ternary(&mut self) -> Result<i128, String> {
        let c = self.binary(1)?;
        if self.toks.get(self.at) != Some(&Tok::Op("?")) {
            return Ok(c);
        }
        self.at += 1;
        let a = self.ternary()?;
        if self.toks.get(self.at) != Some(&Tok::Op(":")) {
            return Err("`?` without `:`".into());
        }
        self.at += 1;
        let b = self.ternary()?;
        Ok(if c != 0 { a } else { b })
    }

    fn binary(&mut self, min: u8) -> Result<i128, String> {
        let mut lhs = self.unary()?;
        while let Some(Tok::Op(op)) = self.toks.get(self.at) {
            let Some(&(_, prec)) = BINARY.iter().find(|(o, _)| o == op) else {
                break;
            };
            if prec < min {
                break;
            }
            self.at += 1;
            let rhs = self.binary(prec + 1)?;
            lhs = apply(op, lhs, rhs)?;
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<i128, String> {
        let t = self
            .toks
            .get(self.at)
            .cloned()
            .ok_or("expression ends early")?;
        self.at += 1;
        match t {
            Tok::Num(n) => Ok(n),
            Tok::Op("(") => {
                let v = self.ternary()?;
                if self.toks.get(self.at) != Some(&Tok::Op(")")) {
                    return Err("missing `)`".into());
                }
                self.at += 1;
                Ok(v)
            }
            Tok::Op("-") => self.unary().map(|v| -v),
            Tok::Op("+") => self.unary(),
            Tok::Op("!") => self.unary().map(|v| i128::from(v == 0)),
            Tok::Op("~") => self.unary().map(|v| !v),
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

fn apply(op: &str, a: i128, b: i128) -> Result<i128, String> {
    let overflow = || format!("`{a} {op} {b}` overflows");
    Ok(match op {
        "||" => i128::from(a != 0 || b != 0),
        "&&" => i128::from(a != 0 && b != 0),
        "|" => a | b,
        "^" => a ^ b,
        "&" => a & b,
        "==" => i128::from(a == b),
        "!=" => i128::from(a != b),
        "<" => i128::from(a < b),
        "<=" => i128::from(a <= b),
        ">" => i128::from(a > b),
        ">=" => i128::from(a >= b),
        "<<" => u32::try_from(b)
            .ok()
            .filter(|s| *s < 64)
            .and_then(|s| a.checked_shl(s))
            .ok_or_else(overflow)?,
        ">>" => u32::try_from(b)
            .ok()
            .filter(|s| *s < 128)
            .map(|s| a >> s)
            .ok_or_else(overflow)?,
        "+" => a.checked_add(b).ok_or_else(overflow)?,
        "-" => a.checked_sub(b).ok_or_else(overflow)?,
        "*" => a.checked_mul(b).ok_or_else(overflow)?,
        "/" | "%" if b == 0 => return Err("division by zero".into()),
        "/" => a / b,
        _ => a % b,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(files: &[(&str, &str)]) -> (tempfile::TempDir, Package) {
        let d = tempfile::tempdir().unwrap();
        for (f, text) in files {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let p = Package::new(d.path()).unwrap();
        (d, p)
    }

    /// ML-KEM's reference params.h, as its sizes depend on it (conditionals, arithmetic).
    const PARAMS: &str = "#ifndef PARAMS_H\n#define PARAMS_H\n#ifndef KYBER_K\n#define KYBER_K 3 /* 2, 3 or 4 */\n#endif\n\
        #define KYBER_N 256\n#define KYBER_SYMBYTES 32\n#define KYBER_SSBYTES  32\n#define KYBER_POLYBYTES\t\t384\n\
        #define KYBER_POLYVECBYTES\t(KYBER_K * KYBER_POLYBYTES)\n\
        #if KYBER_K == 2\n#define KYBER_POLYCOMPRESSEDBYTES    128\n#define KYBER_POLYVECCOMPRESSEDBYTES (KYBER_K * 320)\n\
        #elif KYBER_K == 3\n#define KYBER_POLYCOMPRESSEDBYTES    128\n#define KYBER_POLYVECCOMPRESSEDBYTES (KYBER_K * 320)\n\
        #elif KYBER_K == 4\n#define KYBER_POLYCOMPRESSEDBYTES    160\n#define KYBER_POLYVECCOMPRESSEDBYTES (KYBER_K * 352)\n#endif\n\
        #define KYBER_INDCPA_PUBLICKEYBYTES (KYBER_POLYVECBYTES + KYBER_SYMBYTES)\n\
        #define KYBER_INDCPA_SECRETKEYBYTES (KYBER_POLYVECBYTES)\n\
        #define KYBER_INDCPA_BYTES          (KYBER_POLYVECCOMPRESSEDBYTES + KYBER_POLYCOMPRESSEDBYTES)\n\
        #define KYBER_PUBLICKEYBYTES  (KYBER_INDCPA_PUBLICKEYBYTES)\n\
        #define KYBER_SECRETKEYBYTES  (KYBER_INDCPA_SECRETKEYBYTES + KYBER_INDCPA_PUBLICKEYBYTES + 2*KYBER_SYMBYTES)\n\
        #define KYBER_CIPHERTEXTBYTES (KYBER_INDCPA_BYTES)\n#endif\n";

    const API: &str = "#ifndef API_H\n#define API_H\n#include <stdint.h>\n#include \"params.h\"\n\
        #define CRYPTO_SECRETKEYBYTES  KYBER_SECRETKEYBYTES\n#define CRYPTO_PUBLICKEYBYTES  KYBER_PUBLICKEYBYTES\n\
        #define CRYPTO_CIPHERTEXTBYTES KYBER_CIPHERTEXTBYTES\n#define CRYPTO_BYTES           KYBER_SSBYTES\n\
        #define CRYPTO_ALGNAME \"ML-KEM-\" \"768\"\nint crypto_kem_keypair(uint8_t *pk, uint8_t *sk);\n#endif\n";

    #[test]
    fn ml_kem_sizes_follow_the_conditionals() {
        let (_d, p) = pkg(&[("k/api.h", API), ("k/params.h", PARAMS)]);
        let d = read(&p, "k", &[]).unwrap();
        assert_eq!(d.number("CRYPTO_SECRETKEYBYTES").unwrap(), 2400);
        assert_eq!(d.number("CRYPTO_PUBLICKEYBYTES").unwrap(), 1184);
        assert_eq!(d.number("CRYPTO_CIPHERTEXTBYTES").unwrap(), 1088);
        assert_eq!(d.number("CRYPTO_BYTES").unwrap(), 32);
        assert_eq!(
            d.string("CRYPTO_ALGNAME").unwrap().as_deref(),
            Some("ML-KEM-768")
        );
        // From an include folder, as a Makefile's `-I../common` gives it.
        let (_d, p) = pkg(&[
            ("k/api.h", API),
            ("common/params.h", &PARAMS.replace("3 /*", "4 /*")),
        ]);
        let d = read(&p, "k", &["../common".into()]).unwrap();
        assert_eq!(d.number("CRYPTO_SECRETKEYBYTES").unwrap(), 3168);
        assert_eq!(d.number("CRYPTO_CIPHERTEXTBYTES").unwrap(), 1568);
    }

    #[test]
    fn what_needs_a_compiler_stops_it() {
        let api = |body: &str| format!("#include \"params.h\"\n{body}\n#define CRYPTO_BYTES N\n");
        let cases = [
            (
                "#if __has_include(\"/root/secret\")\n#define N 1\n#else\n#define N 2\n#endif",
                "__has_include",
            ),
            (
                "#ifdef __AVX2__\n#define N 1\n#endif",
                "depends on the compiler",
            ),
            ("#define N ((size_t)32)", "size_t"),
            ("#define F(x) x\n#define N F(3)", "function-like"),
            ("#define N UINT8_MAX", "UINT8_MAX"),
            ("#error no", "#error"),
        ];
        for (body, why) in cases {
            let (_d, p) = pkg(&[("k/api.h", &api(body)), ("k/params.h", "")]);
            let e = read(&p, "k", &[])
                .and_then(|d| d.number("CRYPTO_BYTES"))
                .unwrap_err();
            assert!(e.contains(why), "{body}: {e}");
        }
        // An include that leaves the package is not read.
        let (_d, p) = pkg(&[("k/api.h", "#include \"../../../etc/passwd\"\n")]);
        assert!(read(&p, "k", &[])
            .unwrap_err()
            .contains("not in the package"));
        let (_d, p) = pkg(&[("k/api.h", "#include \"/etc/passwd\"\n")]);
        assert!(read(&p, "k", &[])
            .unwrap_err()
            .contains("not in the package"));
        // A header including itself ends at the nesting bound.
        let (_d, p) = pkg(&[("k/api.h", "#include \"api.h\"\n")]);
        assert!(read(&p, "k", &[]).unwrap_err().contains("nest deeper"));
    }

    #[test]
    fn expressions() {
        let d = Defines::default();
        let eval = |s: &str| Eval::new(&d.expand(&tokens(s).unwrap(), 0).unwrap(), &d).all();
        assert_eq!(eval("1 + 2 * 3").unwrap(), 7);
        assert_eq!(eval("(1 + 2) * 3 - 0x10 / 4").unwrap(), 5);
        assert_eq!(eval("1 << 4 | 1").unwrap(), 17);
        assert_eq!(eval("2 == 2 && !0 ? 10 : 20").unwrap(), 10);
        assert_eq!(eval("800u + 32UL").unwrap(), 832);
        assert!(eval("1 / 0").is_err());
        assert!(eval("1 +").is_err());
    }
}
