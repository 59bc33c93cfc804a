//! C function prototypes from a header, parsed with nom.
//!
//! Only what the wrapper generator needs: for every function declaration at file scope,
//! its return type, name and parameters (type, optional name, array dimensions, function
//! pointers kept verbatim). The header is first reduced to declarations: comments are
//! removed (line numbers kept), preprocessor lines are dropped except object-like aliases
//! `#define randombytes PQCLEAN_randombytes` (collected, because the *linker* symbol is
//! what `--wrap` needs), `extern "C" {` guards are see-through, and `typedef struct {..}`
//! bodies and inline function definitions are skipped. Conditional compilation is not
//! evaluated: every branch's declarations are seen.

use std::collections::BTreeMap;

use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::character::complete::{char, multispace0};
use nom::combinator::{eof, map, opt, recognize, value};
use nom::multi::{many0, many1};
use nom::sequence::{delimited, pair, preceded, terminated, tuple};
use nom::IResult;

use crate::csource::strip_comments;

/// A declared function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prototype {
    /// Return type, normalised (`void`, `int`, `const uint8_t *`), storage class removed.
    pub ret: String,
    pub name: String,
    /// Empty for `f(void)` and `f()`.
    pub params: Vec<Param>,
    /// Ends in `...`.
    pub variadic: bool,
    /// Declared `static` (or `static inline`): not a linker symbol, cannot be wrapped.
    pub is_static: bool,
    /// 1-based line where the declaration starts.
    pub line: usize,
}

/// One parameter of a prototype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Type without the name and array dimensions (`const uint8_t *`, `size_t`).
    pub ty: String,
    pub name: Option<String>,
    /// Array dimensions as written (`uint8_t out[32]` -> `["32"]`).
    pub array: Vec<String>,
    /// A function-pointer parameter, verbatim (`void (*cb)(int)`); `ty` is then empty.
    pub fn_pointer: Option<String>,
}

impl Param {
    /// The parameter declared as `name`, with the first array dimension decayed to a
    /// pointer (which is what the callee receives, so the ABI is the same).
    pub fn declare(&self, name: &str) -> String {
        if let Some(raw) = &self.fn_pointer {
            return match &self.name {
                Some(old) => replace_ident(raw, old, name),
                None => raw.replacen("(*", &format!("(*{name}"), 1),
            };
        }
        let ty = &self.ty;
        let sep = if ty.ends_with('*') { "" } else { " " };
        match self.array.split_first() {
            None => format!("{ty}{sep}{name}"),
            Some((_, [])) => format!("{ty} *{name}"),
            Some((_, rest)) => {
                let dims: String = rest.iter().map(|d| format!("[{d}]")).collect();
                format!("{ty} (*{name}){dims}")
            }
        }
    }
}

impl Prototype {
    /// The prototype text with `name` as the function name and `a0, a1, ...` as parameter
    /// names (`void NAME(uint8_t *a0, size_t a1)`).
    pub fn declare(&self, name: &str) -> String {
        let params = if self.params.is_empty() && !self.variadic {
            "void".to_string()
        } else {
            let mut v: Vec<String> = self
                .params
                .iter()
                .enumerate()
                .map(|(i, p)| p.declare(&format!("a{i}")))
                .collect();
            if self.variadic {
                v.push("...".into());
            }
            v.join(", ")
        };
        let sep = if self.ret.ends_with('*') { "" } else { " " };
        format!("{}{sep}{name}({params})", self.ret)
    }
}

/// Everything the generator needs from one header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderDecls {
    pub prototypes: Vec<Prototype>,
    /// Object-like macros whose value is a single identifier: `randombytes` ->
    /// `PQCLEAN_randombytes`.
    pub aliases: BTreeMap<String, String>,
}

impl HeaderDecls {
    /// Follow `name` through the alias macros to the identifier the compiler sees.
    pub fn resolve<'a>(&'a self, mut name: &'a str) -> &'a str {
        for _ in 0..16 {
            match self.aliases.get(name) {
                Some(next) if next != name => name = next,
                _ => break,
            }
        }
        name
    }
}

/// Function prototypes declared in a header (see the module doc for what is skipped).
pub fn parse_prototypes(header_text: &str) -> Vec<Prototype> {
    parse_header(header_text).prototypes
}

/// Prototypes and identifier aliases of a header.
pub fn parse_header(header_text: &str) -> HeaderDecls {
    let code = strip_comments(header_text);
    let (code, aliases) = strip_preprocessor(&code);
    let prototypes = split_declarations(&code)
        .into_iter()
        .filter_map(|(line, text)| {
            let (_, mut p) = prototype(&text).ok()?;
            p.line = line;
            Some(p)
        })
        .collect();
    HeaderDecls {
        prototypes,
        aliases,
    }
}

fn ident(i: &str) -> IResult<&str, &str> {
    recognize(pair(
        take_while1(|c: char| c.is_ascii_alphabetic() || c == '_'),
        take_while(|c: char| c.is_ascii_alphanumeric() || c == '_'),
    ))(i)
}

/// `#define NAME IDENT` (object-like, single identifier value).
fn alias_define(i: &str) -> IResult<&str, (&str, &str)> {
    let hspace = |i| take_while(|c: char| c == ' ' || c == '\t')(i);
    map(
        tuple((
            hspace,
            char('#'),
            hspace,
            tag("define"),
            take_while1(|c: char| c == ' ' || c == '\t'),
            ident,
            take_while1(|c: char| c == ' ' || c == '\t'),
            ident,
            hspace,
            eof,
        )),
        |(_, _, _, _, _, name, _, value, _, _)| (name, value),
    )(i)
}

/// Blank out preprocessor lines (with their `\` continuations); collect identifier aliases.
fn strip_preprocessor(code: &str) -> (String, BTreeMap<String, String>) {
    let mut out = String::with_capacity(code.len());
    let mut aliases = BTreeMap::new();
    let mut continuing = false;
    for line in code.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        if continuing || body.trim_start().starts_with('#') {
            continuing = body.ends_with('\\');
            if let Ok((_, (name, value))) = alias_define(body) {
                aliases.insert(name.to_string(), value.to_string());
            }
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    (out, aliases)
}

/// The brace characters, named so that `split_declarations`'s match reads as code, not as
/// unbalanced braces to a line-based reader.
const OPEN: char = '{';
const CLOSE: char = '}';

/// Split file-scope code into declarations (text before each `;` at brace depth 0), with
/// the line each starts on. Brace bodies (struct definitions, inline functions) are
/// replaced by `{}`; an inline function definition ends at its closing brace.
fn split_declarations(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start_line = 1;
    let mut line = 1;
    // One entry per open brace: whether it opens a see-through `extern "C"` block.
    let mut stack: Vec<bool> = Vec::new();
    for c in code.chars() {
        if c == '\n' {
            line += 1;
        }
        let depth = stack.iter().filter(|t| !**t).count();
        match c {
            OPEN => {
                let transparent = depth == 0 && cur.trim() == "extern \"C\"";
                if transparent {
                    cur.clear();
                } else if depth == 0 {
                    cur.push_str("{}");
                }
                stack.push(transparent);
            }
            CLOSE => {
                let transparent = stack.pop().unwrap_or(true);
                let is_definition = cur
                    .trim_end()
                    .strip_suffix("{}")
                    .is_some_and(|h| h.trim_end().ends_with(')'));
                if !transparent && depth == 1 && is_definition {
                    // Function definition: it ends here, no `;` follows.
                    out.push((start_line, std::mem::take(&mut cur)));
                }
            }
            ';' if depth == 0 => out.push((start_line, std::mem::take(&mut cur))),
            _ if depth == 0 => {
                if cur.trim().is_empty() && !c.is_whitespace() {
                    cur.clear();
                    start_line = line;
                }
                cur.push(c);
            }
            _ => {}
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok<'a> {
    Id(&'a str),
    Star,
    Array(&'a str),
    Group(&'a str),
}

fn ws<'a, O>(
    inner: impl FnMut(&'a str) -> IResult<&'a str, O>,
) -> impl FnMut(&'a str) -> IResult<&'a str, O> {
    preceded(multispace0, inner)
}

/// Balanced `( ... )`, returned with its parentheses.
fn parens(i: &str) -> IResult<&str, &str> {
    let mut depth = 0usize;
    for (pos, c) in i.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return Ok((&i[pos + 1..], &i[..pos + 1]));
                }
            }
            _ if depth == 0 => break,
            _ => {}
        }
    }
    Err(nom::Err::Error(nom::error::Error::new(
        i,
        nom::error::ErrorKind::Char,
    )))
}

/// `__attribute__((...))`, `__declspec(...)`, `__asm__("...")`: skipped.
fn attribute(i: &str) -> IResult<&str, ()> {
    value(
        (),
        pair(
            alt((
                tag("__attribute__"),
                tag("__declspec"),
                tag("__asm__"),
                tag("asm"),
            )),
            ws(parens),
        ),
    )(i)
}

fn token(i: &str) -> IResult<&str, Tok<'_>> {
    alt((
        map(char('*'), |_| Tok::Star),
        map(
            delimited(char('['), take_while(|c| c != ']'), char(']')),
            |d: &str| Tok::Array(d.trim()),
        ),
        map(parens, Tok::Group),
        map(ident, Tok::Id),
    ))(i)
}

fn tokens(i: &str) -> IResult<&str, Vec<Tok<'_>>> {
    map(
        many1(ws(alt((map(attribute, |_| None), map(token, Some))))),
        |v| v.into_iter().flatten().collect(),
    )(i)
}

const STORAGE: &[&str] = &[
    "extern",
    "static",
    "inline",
    "__inline",
    "__inline__",
    "_Noreturn",
];
const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "restrict",
    "__restrict",
    "__restrict__",
    "register",
];
const BUILTIN: &[&str] = &[
    "void", "char", "short", "int", "long", "float", "double", "signed", "unsigned", "_Bool",
];

fn join_type(toks: &[Tok<'_>]) -> String {
    let mut s = String::new();
    for t in toks {
        match t {
            Tok::Id(id) => {
                if !s.is_empty() && !s.ends_with('*') {
                    s.push(' ');
                }
                s.push_str(id);
            }
            Tok::Star => {
                if !s.is_empty() && !s.ends_with('*') {
                    s.push(' ');
                }
                s.push('*');
            }
            Tok::Array(d) => s.push_str(&format!("[{d}]")),
            Tok::Group(g) => s.push_str(g),
        }
    }
    s
}

/// Whether `toks` (a parameter or the part before a function name) names a type at all.
fn has_type_name(toks: &[Tok<'_>]) -> bool {
    toks.iter()
        .any(|t| matches!(t, Tok::Id(id) if !QUALIFIERS.contains(id) && !STORAGE.contains(id)))
}

fn param(text: &str) -> Option<Param> {
    let text = text.trim();
    let (rest, toks) = terminated(tokens, multispace0)(text).ok()?;
    if !rest.is_empty() {
        return None;
    }
    if toks.iter().any(|t| matches!(t, Tok::Group(_))) {
        // Function pointer: keep verbatim, name is the identifier after `(*`.
        let name = toks.iter().find_map(|t| match t {
            Tok::Group(g) => {
                let inner = g.strip_prefix('(')?.trim_start().strip_prefix('*')?;
                ident(inner.trim_start()).ok().map(|(_, n)| n.to_string())
            }
            _ => None,
        });
        return Some(Param {
            ty: String::new(),
            name,
            array: Vec::new(),
            fn_pointer: Some(text.to_string()),
        });
    }
    let split = toks
        .iter()
        .position(|t| matches!(t, Tok::Array(_)))
        .unwrap_or(toks.len());
    let (head, dims) = toks.split_at(split);
    let array: Vec<String> = dims
        .iter()
        .filter_map(|t| match t {
            Tok::Array(d) => Some(d.to_string()),
            _ => None,
        })
        .collect();
    let named = match head.split_last() {
        Some((Tok::Id(last), before)) => {
            !BUILTIN.contains(last)
                && !QUALIFIERS.contains(last)
                && has_type_name(before)
                && !matches!(before.last(), Some(Tok::Id("struct" | "union" | "enum")))
        }
        _ => false,
    };
    let (ty_toks, name) = if named {
        let Some(Tok::Id(n)) = head.last() else {
            return None;
        };
        (&head[..head.len() - 1], Some(n.to_string()))
    } else {
        (head, None)
    };
    Some(Param {
        ty: join_type(ty_toks),
        name,
        array,
        fn_pointer: None,
    })
}

/// Split a parameter list on commas outside nested parentheses and brackets.
fn split_params(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

/// One declaration: `specifiers* name ( params ) attributes*` (and an optional `{}` body).
fn prototype(text: &str) -> IResult<&str, Prototype> {
    let (rest, toks) = tokens(text)?;
    let (rest, _) = tuple((
        many0(ws(attribute)),
        multispace0,
        opt(tag("{}")),
        multispace0,
        eof,
    ))(rest)?;
    let fail = || nom::Err::Error(nom::error::Error::new(text, nom::error::ErrorKind::Verify));
    // Shape: Id/Star tokens ... Id(name) Group(params).
    let (Some(Tok::Group(group)), Some(Tok::Id(name))) = (
        toks.last(),
        toks.len().checked_sub(2).and_then(|i| toks.get(i)),
    ) else {
        return Err(fail());
    };
    let head = &toks[..toks.len() - 2];
    if head
        .iter()
        .any(|t| matches!(t, Tok::Group(_) | Tok::Array(_)))
        || !has_type_name(head)
        || head.iter().any(|t| matches!(t, Tok::Id("typedef")))
    {
        return Err(fail());
    }
    let is_static = head.iter().any(|t| matches!(t, Tok::Id("static")));
    let ret_toks: Vec<Tok<'_>> = head
        .iter()
        .filter(|t| !matches!(t, Tok::Id(id) if STORAGE.contains(id)))
        .cloned()
        .collect();
    let inner = &group[1..group.len() - 1];
    let mut params = Vec::new();
    let mut variadic = false;
    let parts = split_params(inner);
    let empty = parts.len() == 1 && matches!(parts[0].trim(), "" | "void");
    if !empty {
        for part in parts {
            if part.trim() == "..." {
                variadic = true;
                continue;
            }
            params.push(param(part).ok_or_else(fail)?);
        }
    }
    Ok((
        rest,
        Prototype {
            ret: join_type(&ret_toks),
            name: name.to_string(),
            params,
            variadic,
            is_static,
            line: 0,
        },
    ))
}

/// Replace the identifier `old` with `new` (whole words only).
fn replace_ident(text: &str, old: &str, new: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find(old) {
        let before_ok = rest[..pos]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
        let after = &rest[pos + old.len()..];
        let after_ok = after
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
        out.push_str(&rest[..pos]);
        out.push_str(if before_ok && after_ok { new } else { old });
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Prototype {
        let v = parse_prototypes(text);
        assert_eq!(v.len(), 1, "{v:?}");
        v.into_iter().next().unwrap()
    }

    #[test]
    fn const_pointers_size_t_and_names() {
        let p = one("void shake256(uint8_t *output, size_t outlen,\n              const uint8_t *input, size_t inlen);");
        assert_eq!(p.ret, "void");
        assert_eq!(p.name, "shake256");
        let tys: Vec<_> = p.params.iter().map(|p| p.ty.as_str()).collect();
        assert_eq!(tys, ["uint8_t *", "size_t", "const uint8_t *", "size_t"]);
        let names: Vec<_> = p
            .params
            .iter()
            .map(|p| p.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["output", "outlen", "input", "inlen"]);
        assert_eq!(
            p.declare("__wrap_shake256"),
            "void __wrap_shake256(uint8_t *a0, size_t a1, const uint8_t *a2, size_t a3)"
        );
    }

    #[test]
    fn void_unnamed_arrays_and_struct_pointers() {
        let v = parse_prototypes(
            "int f(void);\nint g();\nint h(uint8_t *, size_t);\n\
             void k(uint8_t output[32], const uint8_t seed[KYBER_SYMBYTES], int m[2][3]);\n\
             void s(shake128incctx *state, struct foo *p, struct bar);\n\
             unsigned long long u(unsigned int, const char *const *argv);",
        );
        assert_eq!(v.len(), 6);
        assert!(v[0].params.is_empty() && v[1].params.is_empty());
        assert_eq!(v[0].declare("x"), "int x(void)");
        assert_eq!(v[2].params[0].name, None);
        assert_eq!(v[2].declare("w"), "int w(uint8_t *a0, size_t a1)");
        assert_eq!(v[3].params[0].array, ["32"]);
        assert_eq!(
            v[3].declare("w"),
            "void w(uint8_t *a0, const uint8_t *a1, int (*a2)[3])"
        );
        assert_eq!(v[4].params[0].ty, "shake128incctx *");
        assert_eq!(v[4].params[1].ty, "struct foo *");
        assert_eq!(v[4].params[2].ty, "struct bar");
        assert_eq!(v[4].params[2].name, None);
        assert_eq!(v[5].ret, "unsigned long long");
        assert_eq!(v[5].params[0].ty, "unsigned int");
        assert_eq!(v[5].params[0].name, None);
        assert_eq!(v[5].params[1].ty, "const char *const *");
        assert_eq!(v[5].params[1].name.as_deref(), Some("argv"));
    }

    #[test]
    fn comments_preprocessor_typedefs_and_aliases() {
        let text = r#"#ifndef X_H
#define X_H
#include <stdint.h>
#define RATE 168 /* not an alias: a number */
#define randombytes     PQCLEAN_randombytes
#define LONG_MACRO(a, b) \
    do { f(a); } while (0);
typedef struct {
    uint64_t *ctx; // a field; not a prototype
} shake128ctx;
/* void commented_out(int x); */
// void also_commented(int y);
#ifdef __cplusplus
extern "C" {
#endif
int randombytes(uint8_t *output, size_t n);
static inline int helper(int x) { return x + 1; }
const char *name_of(void) __attribute__((pure));
#ifdef __cplusplus
}
#endif
#endif
"#;
        let h = parse_header(text);
        let names: Vec<_> = h.prototypes.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["randombytes", "helper", "name_of"]);
        assert_eq!(h.prototypes[0].line, 16);
        assert!(h.prototypes[1].is_static);
        assert_eq!(h.prototypes[2].ret, "const char *");
        assert_eq!(h.resolve("randombytes"), "PQCLEAN_randombytes");
        assert!(!h.aliases.contains_key("RATE"));
        assert!(!h.aliases.contains_key("LONG_MACRO"));
    }

    #[test]
    fn function_pointer_and_variadic_params() {
        let v = parse_prototypes("void reg(void (*cb)(int, char *), int n, ...);");
        assert_eq!(v[0].params[0].name.as_deref(), Some("cb"));
        assert!(v[0].variadic);
        assert_eq!(
            v[0].declare("w"),
            "void w(void (*a0)(int, char *), int a1, ...)"
        );
    }

    #[test]
    fn non_prototypes_are_ignored() {
        let v = parse_prototypes(
            "extern int counter;\ntypedef int (*fp)(int);\nint x = f(3);\nstruct s { int a; };\n",
        );
        assert!(v.is_empty(), "{v:?}");
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn header_parser_never_panics(text in "[a-z_ *(),;{}#\\[\\]/\"\n0-9.]{0,200}") {
                let h = parse_header(&text);
                for p in &h.prototypes {
                    let _ = p.declare("w");
                }
            }
        }
    }
}
