//! The loader: reads files through a [`SourceFs`], parses KDL, turns syntax errors into
//! diagnostics, and ties the pipeline and its manifests into one [`Campaign`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kdl::KdlDocument;
use miette::SourceSpan;

use super::diag::{Diagnostic, Diagnostics, SourceFile};
use super::fs::SourceFs;
use super::manifest::lower_manifest;
use super::pipeline::lower_pipeline;
use super::reader::Cx;
use crate::model::{Campaign, Primitives};

/// State shared while loading one campaign.
pub(crate) struct Loader<'a> {
    pub fs: &'a dyn SourceFs,
    next_id: usize,
    pub diags: Vec<Diagnostic>,
    /// Included primitives files, parsed once each (`None`: broken, already reported).
    pub primitives: BTreeMap<PathBuf, Option<Primitives>>,
}

impl<'a> Loader<'a> {
    pub fn new(fs: &'a dyn SourceFs) -> Self {
        Loader {
            fs,
            next_id: 0,
            diags: Vec::new(),
            primitives: BTreeMap::new(),
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

    /// Parses a KDL v2 document; syntax errors become diagnostics in `file`.
    pub fn parse(&mut self, file: &SourceFile) -> Option<KdlDocument> {
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

/// Loads a pipeline and every manifest it pulls in; all problems or a campaign.
pub(crate) fn load(fs: &dyn SourceFs, pipeline: &Path) -> Result<Campaign, Diagnostics> {
    let mut loader = Loader::new(fs);
    let path = fs.absolute(pipeline);
    let file = match loader.read(&path) {
        Ok(f) => f,
        Err(e) => {
            return Err(Diagnostics::new(vec![Diagnostic::bare(format!(
                "cannot read pipeline `{}`: {e}",
                fs.display(&path)
            ))]));
        }
    };
    let Some(doc) = loader.parse(&file) else {
        return Err(Diagnostics::new(loader.diags));
    };
    let mut diags = Vec::new();
    let draft = {
        let mut cx = Cx::new(&file, &mut diags);
        lower_pipeline(&mut cx, &doc, &path, fs)
    };
    loader.diags.append(&mut diags);

    let mut manifests = draft.manifests.clone();
    manifests.sort();
    let mut submissions = Vec::new();
    for (mpath, glob_span) in &manifests {
        let shown = fs.display(mpath);
        let Some((mfile, mdoc)) = loader.load_named(mpath, &file, *glob_span, "manifest", &shown)
        else {
            continue;
        };
        if let Some(s) = lower_manifest(&mut loader, &mfile, &mdoc) {
            submissions.push((s, mfile));
        }
    }

    // Submission ids are unique across the campaign.
    submissions.sort_by(|a, b| a.0 .0.id.cmp(&b.0 .0.id));
    for w in submissions.windows(2) {
        let ((first, first_span), first_file) = &w[0];
        let ((again, again_span), again_file) = &w[1];
        if first.id == again.id {
            let d = Diagnostic::new(
                again_file,
                format!("duplicate submission id `{}`", again.id),
            )
            .label(*again_span, "declared again here")
            .help("submission ids must be unique across the campaign")
            .related(
                Diagnostic::new(first_file, format!("`{}` first declared here", first.id))
                    .label(*first_span, "first declared here"),
            );
            loader.diags.push(d);
        }
    }

    if !loader.diags.is_empty() {
        return Err(Diagnostics::new(loader.diags));
    }
    match (draft.system, draft.outputs) {
        (Some(system), Some(outputs)) => Ok(Campaign {
            pipeline_path: path,
            system,
            flags: draft.flags,
            outputs,
            steps: draft.steps,
            submissions: submissions.into_iter().map(|((s, _), _)| s).collect(),
        }),
        // Unreachable in practice: a missing system/outputs always reports an error.
        _ => Err(Diagnostics::new(vec![Diagnostic::new(
            &file,
            "the pipeline is incomplete",
        )
        .label(SourceSpan::new(0.into(), 0), "here")])),
    }
}
