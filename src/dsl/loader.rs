//! The loader: reads source files through a [`SourceFs`], registers each as a diagnostic
//! source, parses KDL and turns syntax errors into diagnostics; it also holds what is
//! cached and collected while one campaign loads (parsed primitives files, diagnostics,
//! notes). Both `load` (the pipeline) and `manifest` use it; it uses neither.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kdl::KdlDocument;
use miette::SourceSpan;

use super::diag::{Diagnostic, SourceFile};
use super::fs::SourceFs;
use crate::model::{KatMode, Primitives};

/// State shared while loading one campaign.
pub(crate) struct Loader<'a> {
    pub fs: &'a dyn SourceFs,
    next_id: usize,
    pub diags: Vec<Diagnostic>,
    /// Included primitives files, parsed once each (`None`: broken, already reported).
    pub primitives: BTreeMap<PathBuf, Option<Primitives>>,
    /// The pipeline's `submissions-root`: files manifests name may be anywhere under it
    /// (without it, only under the manifest's own folder).
    pub submissions_root: Option<PathBuf>,
    /// The pipeline's `outputs` folder: no folder of a source may hold it or lie in it.
    pub outputs: Option<PathBuf>,
    /// KAT modes the pipeline runs (a manifest's instances without a line for one of them
    /// get a note).
    pub kat_modes: Vec<KatMode>,
    /// Notes: worth knowing, but the campaign loads.
    pub notes: Vec<Diagnostic>,
}

impl<'a> Loader<'a> {
    pub fn new(fs: &'a dyn SourceFs) -> Self {
        Loader {
            fs,
            next_id: 0,
            diags: Vec::new(),
            primitives: BTreeMap::new(),
            submissions_root: None,
            outputs: None,
            kat_modes: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Reads a file and registers it as a diagnostic source.
    pub fn read(&mut self, path: &Path) -> std::io::Result<SourceFile> {
        let text = self.fs.read_to_string(path)?;
        let id = self.next_id;
        self.next_id += 1;
        Ok(SourceFile::new(
            id,
            path.to_path_buf(),
            self.fs.display(path),
            text,
        ))
    }

    /// Parses a KDL v2 document; syntax errors become diagnostics in `file`. Nesting
    /// deeper than [`MAX_DEPTH`] is refused before the (recursive) parser sees it.
    pub fn parse(&mut self, file: &SourceFile) -> Option<KdlDocument> {
        if let Some(at) = too_deep(file.text(), MAX_DEPTH) {
            self.diags.push(
                Diagnostic::new(file, format!("blocks nested more than {MAX_DEPTH} deep"))
                    .label(SourceSpan::new(at.into(), 1), "too deep")
                    .help("campaign files need only a few levels of `{ ... }`"),
            );
            return None;
        }
        match KdlDocument::parse_v2(file.text()) {
            Ok(doc) => Some(doc),
            Err(err) => {
                if err.diagnostics.is_empty() {
                    self.diags.push(
                        Diagnostic::new(file, "kdl syntax error")
                            .label(SourceSpan::new(0.into(), 0), "here"),
                    );
                }
                for kd in &err.diagnostics {
                    let msg = kd
                        .message
                        .clone()
                        .unwrap_or_else(|| "invalid document".to_string());
                    let label = kd.label.clone().unwrap_or_else(|| "here".to_string());
                    let at = file.trim(kd.span);
                    let word = file
                        .text()
                        .get(at.offset()..at.offset() + at.len())
                        .unwrap_or("");
                    // KDL v1 habits: bare keywords are `#true`, `#false`, `#null` in v2.
                    let help = if matches!(word, "true" | "false" | "null") {
                        Some(format!("KDL v2 writes this keyword as `#{word}`"))
                    } else {
                        kd.help.as_deref().map(lower_sentence)
                    };
                    let d = Diagnostic::new(
                        file,
                        format!("kdl syntax error: {}", lower_sentence(&msg)),
                    )
                    .label(kd.span, lower_sentence(&label))
                    .maybe_help(help);
                    self.diags.push(d);
                }
                None
            }
        }
    }

    /// Reads and parses a file that something in `from` names; a read failure is reported
    /// at `at` in `from` as "`what` `shown` does not exist (resolved to ...)".
    pub fn load_named(
        &mut self,
        path: &Path,
        from: &SourceFile,
        at: SourceSpan,
        what: &str,
        shown: &str,
    ) -> Option<(SourceFile, KdlDocument)> {
        match self.read(path) {
            Ok(file) => {
                let doc = self.parse(&file)?;
                Some((file, doc))
            }
            Err(e) => {
                self.diags
                    .push(missing_file(self.fs, from, at, what, shown, path, &e));
                None
            }
        }
    }
}

/// Deepest `{ ... }` (or `/* ... */`) nesting accepted; campaign files use three levels.
const MAX_DEPTH: usize = 64;

/// Offset of the first `{` or `/*` that opens a level deeper than `max`, skipping strings
/// (plain, multi-line and raw) and comments the way KDL v2 reads them. A linear scan: the
/// parser recurses per level, and deep input must not overflow its stack.
fn too_deep(text: &str, max: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                // A plain string (a `"""` block reads as three plain strings here, which
                // ends at the same place).
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'#' if b.get(i + 1).is_some_and(|&c| c == b'"' || c == b'#') => {
                // A raw string `#"..."#`, `##"..."##`: ends at a quote and as many `#`.
                let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + hashes) != Some(&b'"') {
                    i += hashes;
                    continue;
                }
                i += hashes + 1;
                while i < b.len() {
                    if b[i] == b'"'
                        && b[i + 1..].iter().take_while(|&&c| c == b'#').count() >= hashes
                    {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                // Block comments nest.
                let mut level = 0usize;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        level += 1;
                        if depth + level > max {
                            return Some(i);
                        }
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        level -= 1;
                        i += 2;
                        if level == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'{' => {
                depth += 1;
                if depth > max {
                    return Some(i);
                }
                i += 1;
            }
            b'}' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// "`what` `shown` does not exist (resolved to ...)", or the I/O error when it exists.
pub(crate) fn missing_file(
    fs: &dyn SourceFs,
    from: &SourceFile,
    at: SourceSpan,
    what: &str,
    shown: &str,
    path: &Path,
    e: &std::io::Error,
) -> Diagnostic {
    let resolved = fs.display(path);
    let msg = if e.kind() == std::io::ErrorKind::NotFound {
        format!("{what} `{shown}` does not exist (resolved to {resolved})")
    } else {
        format!("cannot read {what} `{shown}` ({resolved}): {e}")
    };
    Diagnostic::new(from, msg)
        .label(at, "named here")
        .help("paths are relative to the file that names them")
}

/// First letter lower-cased and a trailing period dropped, to match our message style.
fn lower_sentence(s: &str) -> String {
    let s = s.trim().trim_end_matches('.');
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_depth_skips_strings_and_comments() {
        assert_eq!(too_deep("a { b { c } }", 2), None);
        assert_eq!(too_deep("a { b { c { } } }", 2), Some(10));
        assert_eq!(too_deep("a \"{{{{\" { b #\"{{{\"# }", 1), None);
        assert_eq!(too_deep("a { // {{{{\n}", 1), None);
        assert_eq!(too_deep("/* /* /* */ */ */", 2), Some(6));
        assert_eq!(too_deep("a \"\\\"{{\" {}", 1), None);
        let deep = "a {".repeat(100_000);
        assert_eq!(too_deep(&deep, MAX_DEPTH), Some(3 * MAX_DEPTH + 2));
    }
}
