//! Instance templates: literal text with `{var}` or `{var:filter}` (parsed with nom).
//!
//! Filters: `upper`, `lower`, `snake` (`-` -> `_`), `nodash` (remove `-`). `{{` and `}}`
//! are literal braces. Errors carry a byte range inside the template so the caller can
//! point a caret at the exact variable.

use std::collections::BTreeMap;
use std::ops::Range;

use kem_native::output::ApiSizes;
use nom::branch::alt;
use nom::bytes::complete::{is_not, tag, take_while1};
use nom::character::complete::char;
use nom::combinator::{map, opt};
use nom::sequence::{delimited, pair, preceded};
use nom::IResult;

use super::diag::{backticked, did_you_mean};
use crate::model::Instance;

/// A filter applied to a variable's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// `{x:upper}`: upper case.
    Upper,
    /// `{x:lower}`: lower case.
    Lower,
    /// `{x:snake}`: `-` becomes `_`.
    Snake,
    /// `{x:nodash}`: `-` removed.
    Nodash,
}

impl Filter {
    const NAMES: [&'static str; 4] = ["upper", "lower", "snake", "nodash"];

    fn from_name(s: &str) -> Option<Filter> {
        match s {
            "upper" => Some(Filter::Upper),
            "lower" => Some(Filter::Lower),
            "snake" => Some(Filter::Snake),
            "nodash" => Some(Filter::Nodash),
            _ => None,
        }
    }

    fn apply(self, v: &str) -> String {
        match self {
            Filter::Upper => v.to_uppercase(),
            Filter::Lower => v.to_lowercase(),
            Filter::Snake => v.replace('-', "_"),
            Filter::Nodash => v.replace('-', ""),
        }
    }
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text (braces already unescaped).
    Lit(String),
    /// A variable reference.
    Var {
        /// Variable name.
        name: String,
        /// Filter applied to the value, if any.
        filter: Option<Filter>,
        /// Byte range of `{...}` in the template text.
        span: Range<usize>,
    },
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// Literal and variable pieces in order.
    pub pieces: Vec<Piece>,
}

/// A template problem: message, optional help, byte range inside the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// Lower-case message naming the problem.
    pub message: String,
    /// A hint (e.g. "did you mean `upper`?").
    pub help: Option<String>,
    /// Byte range in the template text.
    pub span: Range<usize>,
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '-' || c == '_'
}

enum Raw<'a> {
    Lit(&'a str),
    Var(&'a str, Option<&'a str>, &'a str),
}

fn var(input: &str) -> IResult<&str, Raw<'_>> {
    let start = input;
    let (rest, (name, filter)) = delimited(
        char('{'),
        pair(
            take_while1(is_name_char),
            opt(preceded(char(':'), take_while1(is_name_char))),
        ),
        char('}'),
    )(input)?;
    let whole = &start[..start.len() - rest.len()];
    Ok((rest, Raw::Var(name, filter, whole)))
}

fn piece(input: &str) -> IResult<&str, Raw<'_>> {
    alt((
        map(tag("{{"), |_| Raw::Lit("{")),
        map(tag("}}"), |_| Raw::Lit("}")),
        var,
        map(is_not("{}"), Raw::Lit),
    ))(input)
}

/// Parses a template; the error explains the first syntax problem.
pub fn parse_template(text: &str) -> Result<Template, TemplateError> {
    let mut pieces: Vec<Piece> = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let at = text.len() - rest.len();
        match piece(rest) {
            Ok((next, raw)) => {
                match raw {
                    Raw::Lit(l) => match pieces.last_mut() {
                        Some(Piece::Lit(prev)) => prev.push_str(l),
                        _ => pieces.push(Piece::Lit(l.to_string())),
                    },
                    Raw::Var(name, filter, whole) => {
                        let span = at..at + whole.len();
                        let filter = match filter {
                            None => None,
                            Some(f) => match Filter::from_name(f) {
                                Some(f) => Some(f),
                                None => {
                                    let fstart = at + whole.len() - 1 - f.len();
                                    return Err(TemplateError {
                                        message: format!(
                                            "unknown template filter `{f}`, expected one of {}",
                                            backticked(Filter::NAMES)
                                        ),
                                        help: did_you_mean(f, Filter::NAMES),
                                        span: fstart..fstart + f.len(),
                                    });
                                }
                            },
                        };
                        pieces.push(Piece::Var {
                            name: name.to_string(),
                            filter,
                            span,
                        });
                    }
                }
                rest = next;
            }
            Err(_) => return Err(syntax_error(text, at)),
        }
    }
    Ok(Template { pieces })
}

fn syntax_error(text: &str, at: usize) -> TemplateError {
    let rest = &text[at..];
    if rest.starts_with('}') {
        return TemplateError {
            message: "unmatched `}` in template".into(),
            help: Some("write `}}` for a literal brace".into()),
            span: at..at + 1,
        };
    }
    match rest.find('}') {
        None => TemplateError {
            message: "unclosed `{` in template".into(),
            help: Some("close the variable with `}`, or write `{{` for a literal brace".into()),
            span: at..at + 1,
        },
        Some(end) => {
            let inner = &rest[1..end];
            let message = if inner.is_empty() {
                "empty template variable `{}`".to_string()
            } else {
                format!("invalid template variable `{{{inner}}}`")
            };
            TemplateError {
                message,
                help: Some(
                    "write `{name}` or `{name:filter}`; names use letters, digits, `-` and `_`"
                        .into(),
                ),
                span: at..at + end + 1,
            }
        }
    }
}

impl Template {
    /// The variables used, with their byte ranges.
    pub fn vars(&self) -> impl Iterator<Item = (&str, Range<usize>)> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Var { name, span, .. } => Some((name.as_str(), span.clone())),
            Piece::Lit(_) => None,
        })
    }

    /// Expands the template; an undefined variable is an error naming it and the defined ones.
    pub fn expand(&self, vars: &BTreeMap<String, String>) -> Result<String, TemplateError> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Lit(l) => out.push_str(l),
                Piece::Var { name, filter, span } => match vars.get(name) {
                    Some(v) => match filter {
                        Some(f) => out.push_str(&f.apply(v)),
                        None => out.push_str(v),
                    },
                    None => return Err(undefined_var(name, vars.keys().map(|k| k.as_str()), span)),
                },
            }
        }
        Ok(out)
    }
}

impl Template {
    /// Expands the variables in `vars` and keeps the others as `{name}` /
    /// `{name:filter}` text, with literal braces (also those of values) escaped: the result
    /// parses again as a template holding only the kept variables.
    pub fn expand_keeping(&self, vars: &BTreeMap<String, String>) -> String {
        let esc = |t: &str| t.replace('{', "{{").replace('}', "}}");
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Lit(l) => out.push_str(&esc(l)),
                Piece::Var { name, filter, .. } => match vars.get(name) {
                    Some(v) => out.push_str(&esc(&filter.map_or(v.clone(), |f| f.apply(v)))),
                    None => {
                        let f = filter.map(|f| format!(":{}", f.name())).unwrap_or_default();
                        out.push_str(&format!("{{{name}{f}}}"));
                    }
                },
            }
        }
        out
    }
}

impl Filter {
    fn name(self) -> &'static str {
        match self {
            Filter::Upper => "upper",
            Filter::Lower => "lower",
            Filter::Snake => "snake",
            Filter::Nodash => "nodash",
        }
    }
}

/// The "undefined template variable" error, listing the variables that are defined.
pub(crate) fn undefined_var<'a, I>(name: &str, defined: I, span: &Range<usize>) -> TemplateError
where
    I: IntoIterator<Item = &'a str> + Clone,
{
    let list = backticked(defined.clone());
    let message = if list.is_empty() {
        format!("undefined template variable `{name}`, no matrix variables are defined")
    } else {
        format!("undefined template variable `{name}`, expected one of {list}")
    };
    TemplateError {
        message,
        help: did_you_mean(name, defined),
        span: span.clone(),
    }
}

/// Parses and expands `t` with `vars` in one go; the error is the message.
pub fn expand_template(t: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let tpl = parse_template(t).map_err(|e| e.message)?;
    tpl.expand(vars).map_err(|e| e.message)
}

/// The path of `inst`'s submitted KAT file (`kat submitted=`, relative to the source root),
/// its `{pk}`, `{sk}`, `{ct}`, `{ss}` filled with api.h's sizes; `None` without one. The
/// one reading of the template, for `check --deep` and the run alike.
pub fn submitted_kat_path(inst: &Instance, api: &ApiSizes) -> Option<Result<String, String>> {
    let text = inst.kat_submitted.as_ref()?;
    let sizes: BTreeMap<String, String> = [
        ("pk", api.pk),
        ("sk", api.sk),
        ("ct", api.ct),
        ("ss", api.ss),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Some(expand_template(text, &sizes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expands_vars_and_filters() {
        let v = vars(&[("level", "512"), ("impl", "clean"), ("p", "a-b-c")]);
        assert_eq!(
            expand_template("PQCLEAN_MLKEM{level}_{impl:upper}_", &v).unwrap(),
            "PQCLEAN_MLKEM512_CLEAN_"
        );
        assert_eq!(expand_template("{p:snake}", &v).unwrap(), "a_b_c");
        assert_eq!(expand_template("{p:nodash}", &v).unwrap(), "abc");
        assert_eq!(expand_template("{impl:lower}", &v).unwrap(), "clean");
        assert_eq!(expand_template("{{{level}}}", &v).unwrap(), "{512}");
        assert_eq!(expand_template("plain", &v).unwrap(), "plain");
        assert_eq!(expand_template("", &v).unwrap(), "");
    }

    #[test]
    fn undefined_variable_names_the_defined_ones() {
        let v = vars(&[("level", "512"), ("impl", "clean")]);
        let e = parse_template("x-{lvl}").unwrap().expand(&v).unwrap_err();
        assert_eq!(
            e.message,
            "undefined template variable `lvl`, expected one of `impl`, `level`"
        );
        assert_eq!(e.span, 2..7);
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse_template("ab{level").unwrap_err();
        assert_eq!(
            (e.message.as_str(), e.span),
            ("unclosed `{` in template", 2..3)
        );
        let e = parse_template("ab}c").unwrap_err();
        assert_eq!(e.span, 2..3);
        assert!(e.message.contains("unmatched"));
        let e = parse_template("a{}").unwrap_err();
        assert!(e.message.contains("empty"), "{}", e.message);
        let e = parse_template("a{x y}").unwrap_err();
        assert!(e.message.contains("invalid template variable"));
        let e = parse_template("{impl:uper}").unwrap_err();
        assert_eq!(e.span, 6..10);
        assert_eq!(e.help.as_deref(), Some("did you mean `upper`?"));
    }
}
