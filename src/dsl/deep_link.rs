//! `check --deep`'s prediction of the build's link, as the checker sees it. Compiling an
//! instance's sources needs the build jail, which lives above the DSL, so the checker asks a
//! [`Linker`] (the engine's, or none) and turns its answer into diagnostics at the
//! instance's manifest line: every symbol that the instance's objects use and that neither
//! they, the harness, the declared `link` libraries nor the C runtime define, each with the
//! files that need it; a source that does not compile; or why nothing was compiled. Beside
//! the link, the CPU features the compiled code needs that the manifest does not give.

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

/// A source whose code needs CPU features that the manifest does not give the instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuGap {
    /// The source, relative to the source root.
    pub file: String,
    /// What it needs.
    pub need: CpuNeed,
    /// The instance's code reads the CPU's features at run time (`cpuid`), so it may use
    /// these only where they exist: said as a note.
    pub dispatches: bool,
}

/// What a [`CpuGap`]'s source needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuNeed {
    /// It compiles only with the flag profile's `-march` (intrinsics of an extension the
    /// instance's `cflags` do not enable): the compiler's message without it.
    Flags(String),
    /// Its instructions need these CPU features (cpuinfo names) that `requires-cpu` does not
    /// list, each with the first instruction that needs it.
    Features(Vec<(String, String)>),
}

/// What compiling one instance predicts: its link, and the CPU features its code needs
/// beyond what its manifest gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    /// The link's outcome.
    pub link: LinkOutcome,
    /// The sources that need CPU features the manifest does not give.
    pub cpu: Vec<CpuGap>,
}

impl Prediction {
    /// The link's outcome alone: nothing was compiled to read CPU features from.
    pub fn link_only(link: LinkOutcome) -> Prediction {
        Prediction {
            link,
            cpu: Vec::new(),
        }
    }
}

/// Compiles an instance's sources as the build does and resolves their symbols.
pub trait Linker {
    /// The prediction for `inst` of `sub`, whose source lies at `root` and which compiles
    /// `files` (absolute).
    fn link(
        &self,
        campaign: &Campaign,
        sub: &Submission,
        inst: &Instance,
        root: &Path,
        files: &[PathBuf],
    ) -> Prediction;
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
    ) -> Prediction {
        Prediction::link_only(LinkOutcome::Resolved)
    }
}

/// The diagnostics for one instance's prediction, at its `instance` line.
pub(super) fn link_problems(
    file: &SourceFile,
    inst: &Instance,
    prediction: Prediction,
) -> Vec<Diagnostic> {
    let mut out = outcome_problems(file, inst, prediction.link);
    out.extend(
        prediction
            .cpu
            .into_iter()
            .map(|gap| cpu_problem(file, inst, gap)),
    );
    out
}

/// A source that needs CPU features the manifest does not give: the flags to compile it
/// anywhere, or the `requires-cpu` that plans the instance away where the CPU lacks them.
fn cpu_problem(file: &SourceFile, inst: &Instance, gap: CpuGap) -> Diagnostic {
    let o = &inst.origin;
    let at = SourceSpan::new(o.instance.offset.into(), o.instance.len);
    match gap.need {
        CpuNeed::Flags(why) => Diagnostic::new(
            file,
            format!(
                "instance `{}`: `{}` compiles only with the flag profile's `-march`: it needs CPU features that the instance's `cflags` do not enable (without `-march`: {why})",
                inst.id, gap.file
            ),
        )
        .label(at, "this instance")
        .help("enable them in `cflags` (`-mavx2`, `-mbmi2`, ...) and list them in `requires-cpu`, so that the instance builds with any flag profile and is planned away on a CPU without them"),
        CpuNeed::Features(features) => {
            let named: Vec<String> = features
                .iter()
                .map(|(f, insn)| format!("{f} (`{insn}`)"))
                .collect();
            let names: Vec<String> = features.iter().map(|(f, _)| format!("\"{f}\"")).collect();
            if gap.dispatches {
                return Diagnostic::new(
                    file,
                    format!(
                        "instance `{}`: `{}` uses CPU features that `requires-cpu` does not list: {}; the instance's code reads the CPU's features at run time, so it may use them only where they exist",
                        inst.id,
                        gap.file,
                        named.join(", ")
                    ),
                )
                .label(at, "this instance")
                .help(format!(
                    "if it needs them on every path, add them to its `requires-cpu`: requires-cpu {}",
                    names.join(" ")
                ))
                .note();
            }
            Diagnostic::new(
                file,
                format!(
                    "instance `{}`: `{}` uses CPU features that `requires-cpu` does not list: {}; on a CPU without them it would stop at an illegal instruction instead of being planned away",
                    inst.id,
                    gap.file,
                    named.join(", ")
                ),
            )
            .label(at, "this instance")
            .help(format!(
                "add them to the instance's `requires-cpu` (in a `when` block for these instances): requires-cpu {}",
                names.join(" ")
            ))
        }
    }
}

/// The diagnostics for one instance's link outcome, at its `instance` line.
fn outcome_problems(file: &SourceFile, inst: &Instance, outcome: LinkOutcome) -> Vec<Diagnostic> {
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
