//! Loading a campaign: reads the pipeline and every manifest it names through a
//! [`Loader`], lowers them and ties them into one [`Campaign`].

use std::path::Path;

use miette::SourceSpan;

use super::cells::expand_cells;
use super::diag::{Diagnostic, Diagnostics};
use super::fs::SourceFs;
use super::loader::Loader;
use super::manifest::lower_manifest;
use super::pipeline::lower_pipeline;
use super::reader::NodeReader;
use crate::model::{Campaign, StepKind};

/// Loads a pipeline and every manifest it pulls in; all problems or a campaign.
pub(crate) fn load(fs: &dyn SourceFs, pipeline: &Path) -> Result<Campaign, Diagnostics> {
    load_with_notes(fs, pipeline).0
}

/// Like [`load`], also returning the notes (e.g. instances without an expected KAT hash).
pub(crate) fn load_with_notes(
    fs: &dyn SourceFs,
    pipeline: &Path,
) -> (Result<Campaign, Diagnostics>, Diagnostics) {
    let mut loader = Loader::new(fs);
    let result = load_into(&mut loader, pipeline);
    let notes = Diagnostics::new(std::mem::take(&mut loader.notes));
    (result, notes)
}

fn load_into(loader: &mut Loader<'_>, pipeline: &Path) -> Result<Campaign, Diagnostics> {
    let fs = loader.fs;
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
        return Err(Diagnostics::new(std::mem::take(&mut loader.diags)));
    };
    let mut diags = Vec::new();
    let draft = {
        let mut cx = NodeReader::new(&file, &mut diags);
        lower_pipeline(&mut cx, &doc, &path, fs)
    };
    loader.diags.append(&mut diags);
    loader.submissions_root = draft.submissions_root.clone();
    loader.outputs = draft.outputs.clone();
    loader.kat_modes = draft
        .steps
        .iter()
        .find(|s| s.kind == StepKind::Kat)
        .map(|s| s.params.kat_modes.clone())
        .unwrap_or_default();

    let mut manifests = draft.manifests.clone();
    manifests.sort();
    let mut submissions = Vec::new();
    for (mpath, glob_span) in &manifests {
        let shown = fs.display(mpath);
        let Some((mfile, mdoc)) = loader.load_named(mpath, &file, *glob_span, "manifest", &shown)
        else {
            continue;
        };
        if let Some(s) = lower_manifest(loader, &mfile, &mdoc) {
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
        return Err(Diagnostics::new(std::mem::take(&mut loader.diags)));
    }
    match (draft.system, draft.outputs) {
        (Some(system), Some(outputs)) => {
            let mut submissions: Vec<_> = submissions.into_iter().map(|((s, _), _)| s).collect();
            expand_cells(&system, &draft.steps, &mut submissions);
            Ok(Campaign {
                pipeline_path: path,
                system,
                flags: draft.flags,
                outputs,
                steps: draft.steps,
                submissions,
            })
        }
        // Unreachable in practice: a missing system/outputs always reports an error.
        _ => Err(Diagnostics::new(vec![Diagnostic::new(
            &file,
            "the pipeline is incomplete",
        )
        .label(SourceSpan::new(0.into(), 0), "here")])),
    }
}
