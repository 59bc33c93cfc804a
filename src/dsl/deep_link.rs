//! `check --deep`'s prediction of the build's link, as the checker sees it. Compiling an
//! instance's sources needs the build jail, which lives above the DSL, so the checker asks a
//! [`Linker`] (the engine's, or none) and turns its answer into diagnostics at the
//! instance's manifest line: every symbol that the instance's objects use and that neither
//! they, the harness, the declared `link` libraries nor the C runtime define, each with the
//! files that need it; a source that does not compile; or why nothing was compiled.

use std::path::{Path, PathBuf};

use miette::SourceSpan;

use super::diag::{Diagnostic, SourceFile};
use crate::model::{Campaign, Instance, Submission};

/// A symbol the link would leave undefined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The symbol (`KeccakP1600times4_PermuteAll_24rounds`).
    pub symbol: String,
    /// The source files whose objects use it, relative to the source root.
    pub needed_by: Vec<String>,
    /// What would define it, when something was found (a file of the package the
    /// instance does not compile, a library it does not link).
    pub hint: Option<String>,
}

/// What compiling and resolving one instance gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkOutcome {
    /// Every symbol is defined.
    Resolved,
    /// Symbols left undefined: the build's link fails.
    Unresolved(Vec<Unresolved>),
    /// A source does not compile (the compiler's message, cleaned by the diagnostic).
    CompileFailed(String),
    /// Not checked, and why (no contained compiler here, say).
    Skipped(String),
}

/// Compiles an instance's sources as the build does and resolves their symbols.
pub trait Linker {
    /// The outcome for `inst` of `sub`, whose source lies at `root` and which compiles
    /// `files` (absolute).
    fn link(
        &self,
        campaign: &Campaign,
        sub: &Submission,
        inst: &Instance,
        root: &Path,
        files: &[PathBuf],
    ) -> LinkOutcome;
}

/// No link check (`check --deep` without an engine, and the checker's own tests).
pub struct NoLinker;

impl Linker for NoLinker {
    fn link(
        &self,
        _: &Campaign,
        _: &Submission,
        _: &Instance,
        _: &Path,
        _: &[PathBuf],
    ) -> LinkOutcome {
        LinkOutcome::Resolved
    }
}

/// The diagnostics for one instance's outcome, at its `instance` line.
pub(super) fn link_problems(
    file: &SourceFile,
    inst: &Instance,
    outcome: LinkOutcome,
) -> Vec<Diagnostic> {
    let o = &inst.origin;
    let at = SourceSpan::new(o.instance.offset.into(), o.instance.len);
    match outcome {
        LinkOutcome::Resolved => Vec::new(),
        LinkOutcome::Skipped(why) => vec![Diagnostic::new(
            file,
            format!("instance `{}`: the link was not predicted: {why}", inst.id),
        )
        .label(at, "this instance")
        .note()],
        LinkOutcome::CompileFailed(why) => vec![Diagnostic::new(
            file,
            format!("instance `{}`: the build would fail: {why}", inst.id),
        )
        .label(at, "this instance")
        .help("the sources were compiled with the build step's flags and the instance's `cflags`, in the build's jail")],
        LinkOutcome::Unresolved(list) => {
            // One diagnostic per remedy: the symbols a missing file defines together.
            let mut by_hint: Vec<(Option<String>, Vec<Unresolved>)> = Vec::new();
            for u in list {
                match by_hint.iter_mut().find(|(h, _)| *h == u.hint) {
                    Some((_, v)) => v.push(u),
                    None => by_hint.push((u.hint.clone(), vec![u])),
                }
            }
            by_hint
                .into_iter()
                .map(|(hint, us)| {
                    let named: Vec<String> = us
                        .iter()
                        .map(|u| {
                            let by: Vec<String> =
                                u.needed_by.iter().map(|f| format!("`{f}`")).collect();
                            format!("`{}` (needed by {})", u.symbol, by.join(", "))
                        })
                        .collect();
                    let what = if us.len() == 1 { "symbol" } else { "symbols" };
                    Diagnostic::new(
                        file,
                        format!(
                            "instance `{}`: undefined {what} {}: neither the instance's objects, the harness, its `link` libraries nor the C library define {}, so the build's link would fail",
                            inst.id,
                            named.join(", "),
                            if us.len() == 1 { "it" } else { "them" }
                        ),
                    )
                    .label(at, "this instance")
                    .help(hint.unwrap_or_else(|| {
                        "add the source that defines it with `sources \"PATH\"` (in a `when` block for these instances), or the library with `link \"NAME\"`".to_string()
                    }))
                })
                .collect()
        }
    }
}
