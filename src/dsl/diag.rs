//! Diagnostics: every problem found in a campaign's files, with file, span, caret and help.
//!
//! Problems are collected, not thrown: the loaders push [`Diagnostic`]s and keep going, so
//! one `check` shows everything that is wrong. Rendering goes through miette's graphical
//! handler, which prints `[file:line:col]`, the source line and a caret under the span.
//!
//! Campaign files are untrusted text: messages, labels and help are cleaned
//! (`crate::text::clean`) when made, and the source lines miette shows come from a copy of
//! the file in which every control or bidi character is replaced by a visible one of the
//! same encoded length (`crate::text::same_length`), so no escape sequence or reordering
//! reaches the terminal and every span still points where it did.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode, SourceSpan,
};

/// One loaded file: its absolute path and its text, shared by all diagnostics that point into it.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Order in which the file was loaded; diagnostics sort by it.
    pub(crate) id: usize,
    pub(crate) path: PathBuf,
    /// The text as it is in the file.
    text: Arc<String>,
    /// The name and text miette shows (controls replaced, see the module).
    pub(crate) named: Arc<NamedSource<String>>,
}

impl SourceFile {
    pub(crate) fn new(id: usize, path: PathBuf, display: String, text: String) -> Self {
        let shown = crate::text::same_length(&text);
        SourceFile {
            id,
            path,
            named: Arc::new(NamedSource::new(crate::text::clean_line(&display), shown)),
            text: Arc::new(text),
        }
    }

    /// The file's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The absolute path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The name shown in reports (relative to the working directory when possible).
    pub fn display_name(&self) -> &str {
        self.named.name()
    }

    /// A span with surrounding whitespace removed and clamped to the text.
    pub(crate) fn trim(&self, span: SourceSpan) -> SourceSpan {
        let text = self.text();
        let mut start = span.offset().min(text.len());
        let mut end = (span.offset() + span.len()).min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let slice = &text[start..end];
        let lead = slice.len() - slice.trim_start().len();
        let trail = slice.len() - slice.trim_end().len();
        if lead + trail >= slice.len() {
            return SourceSpan::new(start.into(), 0);
        }
        SourceSpan::new((start + lead).into(), slice.len() - lead - trail)
    }
}

/// A 1-based line and column (in characters) of a byte offset in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = text[line_start..offset].chars().count() + 1;
    (line, col)
}

/// Where a diagnostic points: the file as displayed, and a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file as shown in reports.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// One problem: a lower-case message, labelled spans in one file, an optional help, and
/// optional related diagnostics (for a second location in another file).
#[derive(Debug, Clone)]
pub struct Diagnostic {
    message: String,
    source: Option<SourceFile>,
    labels: Vec<LabeledSpan>,
    help: Option<String>,
    related: Vec<Diagnostic>,
    /// A note (something worth knowing that does not stop a run), not an error.
    note: bool,
}

impl Diagnostic {
    /// A problem in `file` (no label yet).
    pub(crate) fn new(file: &SourceFile, message: impl Into<String>) -> Self {
        Diagnostic {
            message: crate::text::clean(&message.into()),
            source: Some(file.clone()),
            labels: Vec::new(),
            help: None,
            related: Vec::new(),
            note: false,
        }
    }

    /// A problem that has no place in a file (an unreadable pipeline, say).
    pub(crate) fn bare(message: impl Into<String>) -> Self {
        Diagnostic {
            message: crate::text::clean(&message.into()),
            source: None,
            labels: Vec::new(),
            help: None,
            related: Vec::new(),
            note: false,
        }
    }

    /// Adds a label; the first label added is the primary one (its position is reported).
    pub(crate) fn label(mut self, span: SourceSpan, text: impl Into<String>) -> Self {
        let span = match &self.source {
            Some(f) => f.trim(span),
            None => span,
        };
        let text = crate::text::clean_line(&text.into());
        let text = if text.is_empty() { None } else { Some(text) };
        let l = if self.labels.is_empty() {
            LabeledSpan::new_primary_with_span(text, span)
        } else {
            LabeledSpan::new_with_span(text, span)
        };
        self.labels.push(l);
        self
    }

    /// Adds a help line.
    pub(crate) fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(crate::text::clean(&help.into()));
        self
    }

    /// Adds a help line when there is one.
    pub(crate) fn maybe_help(self, help: Option<String>) -> Self {
        match help {
            Some(h) => self.help(h),
            None => self,
        }
    }

    /// Adds a related diagnostic (shown after this one).
    pub(crate) fn related(mut self, other: Diagnostic) -> Self {
        self.related.push(other);
        self
    }

    /// Marks this as a note: shown by `check`, but the campaign still loads.
    pub(crate) fn note(mut self) -> Self {
        self.note = true;
        self
    }

    /// True for a note, false for an error.
    pub fn is_note(&self) -> bool {
        self.note
    }

    /// The message, e.g. "unknown node `algoritm` in `submission`".
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The help line, if any (e.g. "did you mean `algorithm`?").
    pub fn help_text(&self) -> Option<&str> {
        self.help.as_deref()
    }

    /// The file this diagnostic points into, if any.
    pub fn file(&self) -> Option<&Path> {
        self.source.as_ref().map(|s| s.path())
    }

    /// File (as displayed), line and column of the primary label.
    pub fn location(&self) -> Option<Location> {
        let src = self.source.as_ref()?;
        let offset = self.labels.first().map(|l| l.offset()).unwrap_or(0);
        let (line, col) = line_col(src.text(), offset);
        Some(Location {
            file: src.display_name().to_string(),
            line,
            col,
        })
    }

    fn sort_key(&self) -> (usize, usize) {
        match &self.source {
            Some(s) => (s.id, self.labels.first().map(|l| l.offset()).unwrap_or(0)),
            None => (0, 0),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Diagnostic {}

impl miette::Diagnostic for Diagnostic {
    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.source
            .as_ref()
            .map(|s| s.named.as_ref() as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            None
        } else {
            Some(Box::new(self.labels.iter().cloned()))
        }
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(if self.note {
            miette::Severity::Advice
        } else {
            miette::Severity::Error
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(
                self.related.iter().map(|d| d as &dyn miette::Diagnostic),
            ))
        }
    }
}

/// All problems found while loading a campaign, in file order then position.
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

/// Width reports are wrapped at; fixed so output (and snapshots) do not depend on the terminal.
const RENDER_WIDTH: usize = 100;

impl Diagnostics {
    /// Adds more diagnostics (kept in file order).
    pub fn extend(&mut self, more: Diagnostics) {
        self.items.extend(more.items);
        self.items.sort_by_key(|d| d.sort_key());
    }

    pub(crate) fn new(mut items: Vec<Diagnostic>) -> Self {
        items.sort_by_key(|d| d.sort_key());
        Diagnostics { items }
    }

    /// Number of problems.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when there is no problem.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The problems, in file order then position.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.items.iter()
    }

    /// Every problem as a miette graphical report (`[file:line:col]`, source line, caret,
    /// help), followed by a count line. `color` selects colours and unicode box drawing;
    /// without it the output is plain unicode text at a fixed width.
    pub fn render(&self, color: bool) -> String {
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let mut handler = GraphicalReportHandler::new_themed(theme)
            .with_links(false)
            .with_width(RENDER_WIDTH);
        if !color {
            handler = handler.without_syntax_highlighting();
        }
        let mut out = String::new();
        for d in &self.items {
            let mut one = String::new();
            if handler.render_report(&mut one, d).is_err() {
                one = format!("error: {}\n", d.message);
            }
            out.push_str(&one);
            out.push('\n');
        }
        let notes = self.items.iter().filter(|d| d.note).count();
        let n = self.items.len() - notes;
        let plural = |k: usize| if k == 1 { "" } else { "s" };
        if n > 0 || notes == 0 {
            out.push_str(&format!("{n} problem{} found\n", plural(n)));
        }
        if notes > 0 {
            out.push_str(&format!("{notes} note{}\n", plural(notes)));
        }
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl std::error::Error for Diagnostics {}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

/// The closest candidate to `name` by edit distance, if close enough to be a likely typo.
pub(crate) fn closest<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let limit = (name.chars().count() / 3).max(2);
    let lower = name.to_lowercase();
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (levenshtein(&lower, &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= limit && *d < c.chars().count().max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// "did you mean `x`?" for the closest candidate, if any is close enough.
pub(crate) fn did_you_mean<'a, I>(name: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    closest(name, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// Levenshtein distance over chars.
pub(crate) fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// `a`, `b`, `c` — names in backticks, comma-separated.
pub(crate) fn backticked<'a, I: IntoIterator<Item = &'a str>>(names: I) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levenshtein_basics() {
        assert_eq!(levenshtein("algoritm", "algorithm"), 1);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("tme", "time"), 1);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions_only_for_close_names() {
        let c = ["algorithm", "category", "source"];
        assert_eq!(
            did_you_mean("algoritm", c).as_deref(),
            Some("did you mean `algorithm`?")
        );
        assert_eq!(did_you_mean("zzzzzzzz", c), None);
    }

    #[test]
    fn line_col_counts_chars() {
        let t = "ab\nµsx";
        assert_eq!(line_col(t, 0), (1, 1));
        assert_eq!(line_col(t, 3), (2, 1));
        assert_eq!(line_col(t, 5), (2, 2));
        assert_eq!(line_col(t, 100), (2, 4));
    }

    #[test]
    fn snippets_and_messages_show_raw_escapes_as_text() {
        let text = "a \"\u{1b}]0;t\u{7}\u{9b}2K\u{202e}x\" \u{1b}[2Jbad\n".to_string();
        let f = SourceFile::new(
            0,
            PathBuf::from("/m.kdl"),
            "m\u{1b}[2J.kdl".into(),
            text.clone(),
        );
        assert_eq!(f.text(), text, "the original text is kept for lowering");
        let at = text.find("bad").unwrap();
        let d = Diagnostic::new(&f, "unknown `\u{1b}[2Jbad`")
            .label(SourceSpan::new(at.into(), 3), "here \u{202e}")
            .help("\u{9b}2K");
        assert_eq!(d.location().unwrap().col, text[..at].chars().count() + 1);
        for color in [false, true] {
            let out = Diagnostics::new(vec![d.clone()]).render(color);
            // Without miette's own colour sequences, nothing is raw.
            let plain: String = {
                let mut o = String::new();
                let mut rest = out.as_str();
                while let Some(i) = rest.find("\u{1b}[") {
                    o.push_str(&rest[..i]);
                    let after = &rest[i + 2..];
                    let j = after
                        .find(|c: char| !(c.is_ascii_digit() || c == ';'))
                        .unwrap_or(after.len());
                    assert!(
                        after[j..].starts_with('m'),
                        "a non-colour escape in {out:?}"
                    );
                    rest = &after[j + 1..];
                }
                o.push_str(rest);
                o
            };
            assert!(
                !plain.chars().any(crate::text::needs_escape),
                "color {color}: {plain:?}"
            );
            assert!(plain.contains("bad"), "{plain}");
        }
    }
}
