//! Typed access to KDL nodes that reports every problem as a [`Diagnostic`] and goes on.
//!
//! Naming follows `just`: `expect_*` report a user error and return `None` when the input
//! is not what the DSL wants; callers keep lowering with what they got.

use std::collections::BTreeMap;
use std::ops::Range;

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use miette::SourceSpan;

use super::diag::{backticked, closest, Diagnostic, SourceFile};

/// The node's name.
pub(crate) fn name(n: &KdlNode) -> &str {
    n.name().value()
}

/// Span of the node's name (where "unknown node" and "missing ..." point).
pub(crate) fn name_span(n: &KdlNode) -> SourceSpan {
    let s = n.name().span();
    if s.is_empty() {
        n.span()
    } else {
        s
    }
}

/// A value described for messages: `string "5"`, `integer 5`, `#true`.
pub(crate) fn describe(v: &KdlValue) -> String {
    match v {
        KdlValue::String(s) => format!("string {s:?}"),
        KdlValue::Integer(i) => format!("integer {i}"),
        KdlValue::Float(_) => format!("float {v}"),
        KdlValue::Bool(_) => format!("boolean {v}"),
        KdlValue::Null => "#null".to_string(),
    }
}

/// The arguments (entries without a name) of a node.
pub(crate) fn args(n: &KdlNode) -> impl Iterator<Item = &KdlEntry> {
    n.entries().iter().filter(|e| e.name().is_none())
}

/// Lowering context for one file: where diagnostics go and which file they point into.
pub(crate) struct NodeReader<'a> {
    pub file: &'a SourceFile,
    pub diags: &'a mut Vec<Diagnostic>,
    /// Misspelt properties and what they probably meant, by node offset: a required
    /// property that was misspelt is not reported a second time as missing.
    guessed: Vec<(usize, String)>,
}

impl<'a> NodeReader<'a> {
    pub fn new(file: &'a SourceFile, diags: &'a mut Vec<Diagnostic>) -> Self {
        NodeReader {
            file,
            diags,
            guessed: Vec::new(),
        }
    }

    /// Records that an unknown property on `n` was probably meant to be `guess`.
    pub fn guessed_prop(&mut self, n: &KdlNode, guess: &str) {
        self.guessed.push((n.span().offset(), guess.to_string()));
    }

    /// A fresh diagnostic in this file.
    pub fn diag(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(self.file, message)
    }

    pub fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// Shorthand: one message, one label.
    pub fn error(&mut self, span: SourceSpan, label: &str, message: impl Into<String>) {
        let d = self.diag(message).label(span, label);
        self.push(d);
    }

    /// Span of an entry's value (without `key=` for properties).
    pub fn value_span(&self, e: &KdlEntry) -> SourceSpan {
        let span = self.file.trim(e.span());
        if e.name().is_none() {
            return span;
        }
        let repr_len = e.format().map(|f| f.value_repr.len()).unwrap_or(0);
        let end = span.offset() + span.len();
        if repr_len == 0 || repr_len > span.len() {
            return span;
        }
        SourceSpan::new((end - repr_len).into(), repr_len)
    }

    /// Span of a byte range inside a string value, when the source spells the string
    /// plainly (no escapes); otherwise the whole value.
    pub fn sub_span(&self, e: &KdlEntry, range: &Range<usize>) -> SourceSpan {
        let vs = self.value_span(e);
        let plain = match (e.value(), e.format()) {
            (KdlValue::String(s), Some(f)) => {
                let r = &f.value_repr;
                r.len() == s.len() + 2 && r.starts_with('"') && r.get(1..r.len() - 1) == Some(s)
            }
            _ => false,
        };
        if plain && range.end <= vs.len().saturating_sub(2) {
            SourceSpan::new((vs.offset() + 1 + range.start).into(), range.len().max(1))
        } else {
            vs
        }
    }

    /// Properties of `n` restricted to `allowed`; unknown and repeated ones are reported.
    /// `on` names the owner in messages (``"step `build`"``, ``"`kat`"``).
    pub fn props<'n>(
        &mut self,
        n: &'n KdlNode,
        on: &str,
        allowed: &[&str],
    ) -> BTreeMap<&'n str, &'n KdlEntry> {
        let mut out: BTreeMap<&str, &KdlEntry> = BTreeMap::new();
        for e in n.entries() {
            let Some(key) = e.name() else { continue };
            let k = key.value();
            if !allowed.contains(&k) {
                let msg = if allowed.is_empty() {
                    format!("unknown property `{k}` on {on}, which takes no properties")
                } else {
                    format!("unknown property `{k}` on {on}")
                };
                let guess = closest(k, allowed.iter().copied());
                if let Some(g) = guess {
                    self.guessed_prop(n, g);
                }
                let help = guess.map(|g| format!("did you mean `{g}`?")).or_else(|| {
                    (!allowed.is_empty())
                        .then(|| format!("expected one of {}", backticked(allowed.iter().copied())))
                });
                let d = self
                    .diag(msg)
                    .label(key.span(), "unknown property")
                    .maybe_help(help);
                self.push(d);
                continue;
            }
            if let Some(prev) = out.get(k) {
                let d = self
                    .diag(format!("property `{k}` is given twice on {on}"))
                    .label(key.span(), "given again here")
                    .label(prev.span(), "first given here");
                self.push(d);
                continue;
            }
            out.insert(k, e);
        }
        out
    }

    /// Reports every argument of `n` (for nodes that take only properties).
    pub fn no_args(&mut self, n: &KdlNode, what: &str) {
        for e in args(n) {
            let s = self.value_span(e);
            self.error(
                s,
                "unexpected argument",
                format!("`{what}` takes no arguments, found {}", describe(e.value())),
            );
        }
    }

    /// Reports a children block on a node that takes none.
    pub fn no_children(&mut self, n: &KdlNode, what: &str) {
        if let Some(c) = n.children() {
            self.error(
                c.span(),
                "unexpected block",
                format!("`{what}` takes no children block"),
            );
        }
    }

    /// The children of `n`, or an error when there is no block.
    pub fn expect_children<'n>(&mut self, n: &'n KdlNode, what: &str) -> Option<&'n KdlDocument> {
        match n.children() {
            Some(c) => Some(c),
            None => {
                self.error(
                    name_span(n),
                    "expected a `{ ... }` block",
                    format!("`{what}` needs a children block"),
                );
                None
            }
        }
    }

    /// A string value, or a "wrong type" error naming `what`.
    pub fn expect_string(&mut self, e: &KdlEntry, what: &str) -> Option<String> {
        match e.value() {
            KdlValue::String(s) => Some(s.clone()),
            v => {
                let s = self.value_span(e);
                self.error(
                    s,
                    "expected a string",
                    format!("`{what}` must be a string, found {}", describe(v)),
                );
                None
            }
        }
    }

    /// An integer value at least `min`.
    pub fn expect_int(&mut self, e: &KdlEntry, what: &str, min: i128) -> Option<i128> {
        let s = self.value_span(e);
        match e.value() {
            KdlValue::Integer(i) if *i >= min => Some(*i),
            KdlValue::Integer(i) => {
                self.error(
                    s,
                    "too small",
                    format!("`{what}` must be at least {min}, found {i}"),
                );
                None
            }
            v => {
                self.error(
                    s,
                    "expected an integer",
                    format!("`{what}` must be an integer, found {}", describe(v)),
                );
                None
            }
        }
    }

    /// An integer that fits `T` and is at least `min`.
    pub fn expect_int_as<T: TryFrom<i128>>(
        &mut self,
        e: &KdlEntry,
        what: &str,
        min: i128,
    ) -> Option<T> {
        let i = self.expect_int(e, what, min)?;
        match T::try_from(i) {
            Ok(v) => Some(v),
            Err(_) => {
                let s = self.value_span(e);
                self.error(s, "too large", format!("`{what}` is too large, found {i}"));
                None
            }
        }
    }

    /// A boolean value (`#true` / `#false`).
    pub fn expect_bool(&mut self, e: &KdlEntry, what: &str) -> Option<bool> {
        match e.value() {
            KdlValue::Bool(b) => Some(*b),
            v => {
                let s = self.value_span(e);
                self.error(
                    s,
                    "expected #true or #false",
                    format!("`{what}` must be a boolean, found {}", describe(v)),
                );
                None
            }
        }
    }

    /// Exactly one string argument (and nothing else checked).
    pub fn one_string_arg<'n>(
        &mut self,
        n: &'n KdlNode,
        what: &str,
    ) -> Option<(String, &'n KdlEntry)> {
        let mut it = args(n);
        let Some(first) = it.next() else {
            self.error(
                name_span(n),
                "argument missing",
                format!("`{what}` needs a string argument"),
            );
            return None;
        };
        for extra in it {
            let s = self.value_span(extra);
            self.error(
                s,
                "unexpected argument",
                format!(
                    "`{what}` takes one argument, found another: {}",
                    describe(extra.value())
                ),
            );
        }
        self.expect_string(first, what).map(|s| (s, first))
    }

    /// All arguments as strings; at least `min` of them.
    pub fn string_args<'n>(
        &mut self,
        n: &'n KdlNode,
        what: &str,
        min: usize,
    ) -> Vec<(String, &'n KdlEntry)> {
        let mut out = Vec::new();
        let mut count = 0;
        for e in args(n) {
            count += 1;
            if let Some(s) = self.expect_string(e, what) {
                out.push((s, e));
            }
        }
        if count < min {
            self.error(
                name_span(n),
                "arguments missing",
                format!(
                    "`{what}` needs at least {min} string argument{}",
                    if min == 1 { "" } else { "s" }
                ),
            );
        }
        out
    }

    /// "unknown node `x` in `parent`" with a did-you-mean among `allowed`; returns the
    /// suggested name, so a caller can skip "missing `algorithm`" after `algoritm`.
    pub fn unknown_node<'c>(
        &mut self,
        n: &KdlNode,
        parent: &str,
        allowed: &[&'c str],
    ) -> Option<&'c str> {
        let nm = name(n);
        let guess = closest(nm, allowed.iter().copied());
        let help = match guess {
            Some(g) => format!("did you mean `{g}`?"),
            None => format!("expected one of {}", backticked(allowed.iter().copied())),
        };
        let d = self
            .diag(format!("unknown node `{nm}` in {parent}"))
            .label(name_span(n), "unknown node")
            .help(help);
        self.push(d);
        guess
    }

    /// A node that may appear once, seen again.
    pub fn duplicate_node(&mut self, first: &KdlNode, again: &KdlNode, parent: &str) {
        let d = self
            .diag(format!("duplicate node `{}` in {parent}", name(again)))
            .label(name_span(again), "given again here")
            .label(name_span(first), "first given here");
        self.push(d);
    }

    /// A required node that is absent; points at `at` (the parent's name).
    pub fn missing_node(&mut self, at: SourceSpan, node: &str, parent: &str) {
        self.error(
            at,
            &format!("`{node}` missing"),
            format!("missing required node `{node}` in {parent}"),
        );
    }

    /// A required property that is absent; points at the node's name.
    pub fn missing_prop(&mut self, n: &KdlNode, prop: &str, on: &str) {
        let at = n.span().offset();
        if self.guessed.iter().any(|(o, g)| *o == at && g == prop) {
            return;
        }
        self.error(
            name_span(n),
            &format!("`{prop}` missing"),
            format!("missing required property `{prop}` on {on}"),
        );
    }
}
