//! Lowering of a pipeline file (`pipelines/<system>.kdl`): system, flag profiles,
//! submission globs, outputs and defaults; the `step` nodes are lowered in [`super::step`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kdl::{KdlDocument, KdlEntry, KdlNode};
use miette::SourceSpan;

use super::cflags::flag_problem;
use super::cpu_flags;
use super::fs::SourceFs;
use super::reader::{args, name, name_span, NodeReader};
use super::step::{check_cycles, lower_step, resolve_needs, StepDraft};
use super::values::{duration_value, words};
use crate::model::{
    host_arch, Executor, FlagProfile, Isolation, Role, SandboxPolicy, SlurmOptions, StepSpec,
    System, Target,
};
use crate::safe_fs::normalize;

/// Top-level nodes of a pipeline.
const TOP_NODES: [&str; 7] = [
    "system",
    "flags",
    "submissions",
    "submissions-root",
    "outputs",
    "defaults",
    "step",
];
/// Children of `system`.
const SYSTEM_NODES: [&str; 10] = [
    "sandbox",
    "role",
    "arch",
    "bench-cpu",
    "cc",
    "compilers",
    "isolation",
    "emulator",
    "cpu-features",
    "executor",
];
/// Children of `executor "slurm"`.
const SLURM_NODES: [&str; 4] = ["partition", "account", "qos", "constraint"];
/// Default step timeout when neither the step nor `defaults` sets one.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A pipeline as far as it could be lowered; fields are `None` when missing or broken
/// (an error has then been reported).
pub(crate) struct PipelineDraft {
    pub system: Option<System>,
    pub flags: BTreeMap<String, FlagProfile>,
    pub outputs: Option<PathBuf>,
    pub steps: Vec<StepSpec>,
    /// Manifests matched by the `submissions` globs, with the glob's span, deduplicated.
    pub manifests: Vec<(PathBuf, SourceSpan)>,
    /// `submissions-root "../submissions"`, absolute: manifests may name files anywhere
    /// under it (kat manifest, size catalog, primitives include); by default only files
    /// under their own folder.
    pub submissions_root: Option<PathBuf>,
}

/// Lowers a parsed pipeline document.
pub(crate) fn lower_pipeline(
    cx: &mut NodeReader<'_>,
    doc: &KdlDocument,
    path: &Path,
    fs: &dyn SourceFs,
) -> PipelineDraft {
    let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let mut draft = PipelineDraft {
        system: None,
        flags: BTreeMap::new(),
        outputs: None,
        steps: Vec::new(),
        manifests: Vec::new(),
        submissions_root: None,
    };
    let mut seen: BTreeMap<&str, &KdlNode> = BTreeMap::new();
    let mut flag_nodes: BTreeMap<String, &KdlNode> = BTreeMap::new();
    let mut default_timeout = DEFAULT_TIMEOUT;
    let mut step_nodes = Vec::new();
    let mut saw_submissions = false;

    let mut typos: Vec<&str> = Vec::new();
    for n in doc.nodes() {
        let nm = name(n);
        if !TOP_NODES.contains(&nm) {
            typos.extend(cx.unknown_node(n, "the pipeline", &TOP_NODES));
            continue;
        }
        if matches!(nm, "system" | "outputs" | "defaults" | "submissions-root") {
            if let Some(first) = seen.get(nm) {
                cx.duplicate_node(first, n, "the pipeline");
                continue;
            }
            seen.insert(nm, n);
        }
        match nm {
            "system" => draft.system = lower_system(cx, n, fs),
            "flags" => {
                if let Some(p) = lower_flags(cx, n) {
                    if let Some(first) = flag_nodes.get(&p.name) {
                        let d = cx
                            .diag(format!("duplicate flags profile `{}`", p.name))
                            .label(name_span(n), "declared again here")
                            .label(name_span(first), "first declared here");
                        cx.push(d);
                    } else {
                        flag_nodes.insert(p.name.clone(), n);
                        draft.flags.insert(p.name.clone(), p);
                    }
                }
            }
            "submissions" => {
                saw_submissions = true;
                cx.props(n, "`submissions`", &[]);
                cx.no_children(n, "submissions");
                for (pattern, e) in cx.string_args(n, "submissions", 1) {
                    glob_manifests(cx, fs, &dir, &pattern, e, &mut draft.manifests);
                }
            }
            "outputs" => {
                cx.props(n, "`outputs`", &[]);
                cx.no_children(n, "outputs");
                if let Some((o, _)) = cx.one_string_arg(n, "outputs") {
                    draft.outputs = Some(normalize(&dir.join(o)));
                }
            }
            "submissions-root" => {
                cx.props(n, "`submissions-root`", &[]);
                cx.no_children(n, "submissions-root");
                if let Some((r, e)) = cx.one_string_arg(n, "submissions-root") {
                    let abs = normalize(&dir.join(r));
                    if fs.is_dir(&abs) {
                        draft.submissions_root = Some(abs);
                    } else {
                        let s = cx.value_span(e);
                        let d = cx
                            .diag(format!(
                                "`submissions-root` is not a folder (resolved to {})",
                                fs.display(&abs)
                            ))
                            .label(s, "no such folder")
                            .help("the path is relative to the pipeline's folder");
                        cx.push(d);
                    }
                }
            }
            "defaults" => {
                cx.no_args(n, "defaults");
                cx.no_children(n, "defaults");
                let props = cx.props(n, "`defaults`", &["timeout"]);
                if let Some(e) = props.get("timeout") {
                    if let Some(t) = duration_value(cx, e, "timeout") {
                        default_timeout = t;
                    }
                }
            }
            _ => step_nodes.push(n),
        }
    }

    let top = SourceSpan::new(0.into(), 0);
    if !seen.contains_key("system") && !typos.contains(&"system") {
        cx.missing_node(top, "system", "the pipeline");
    }
    if !seen.contains_key("outputs") && !typos.contains(&"outputs") {
        cx.missing_node(top, "outputs", "the pipeline");
    }
    if !saw_submissions && !typos.contains(&"submissions") {
        cx.missing_node(top, "submissions", "the pipeline");
    }

    // Steps: kinds and parameters first, then `needs` (which may name later steps).
    let mut steps: Vec<StepDraft> = Vec::new();
    for n in step_nodes {
        if let Some(s) = lower_step(cx, n, default_timeout, &draft.flags) {
            if let Some(first) = steps.iter().find(|d| d.kind == s.kind) {
                let d = cx
                    .diag(format!("duplicate step `{}`", s.kind))
                    .label(s.kind_span, "declared again here")
                    .label(first.kind_span, "first declared here")
                    .help("each step kind may be declared once");
                cx.push(d);
                continue;
            }
            steps.push(s);
        }
    }
    resolve_needs(cx, &mut steps);
    check_cycles(cx, &steps);
    let cells: Vec<_> = steps.iter().map(|s| (&s.spec, s.cells)).collect();
    super::best_cell::check_best_cell(cx, &cells);
    draft.steps = steps.into_iter().map(|s| s.spec).collect();
    draft
}

fn lower_system(cx: &mut NodeReader<'_>, n: &KdlNode, fs: &dyn SourceFs) -> Option<System> {
    cx.props(n, "`system`", &[]);
    let sys_name = cx.one_string_arg(n, "system").map(|(s, _)| s);
    let children = cx.expect_children(n, "system")?;
    let mut arch = None;
    let mut bench_cpu = None;
    let mut cc = None;
    let mut compilers = Vec::new();
    let mut isolation = Isolation::Core;
    let mut target = Target::default();
    let mut executor = Executor::Local;
    let mut sandbox = SandboxPolicy::Preferred;
    let mut role = Role::Measure;
    let mut seen: BTreeMap<&str, &KdlNode> = BTreeMap::new();
    let mut bench_typo = false;
    for c in children.nodes() {
        let nm = name(c);
        if !SYSTEM_NODES.contains(&nm) {
            bench_typo |= cx.unknown_node(c, "`system`", &SYSTEM_NODES) == Some("bench-cpu");
            continue;
        }
        if let Some(first) = seen.get(nm) {
            cx.duplicate_node(first, c, "`system`");
            continue;
        }
        seen.insert(nm, c);
        cx.props(c, &format!("`{nm}`"), &[]);
        if nm == "executor" {
            executor = lower_executor(cx, c).unwrap_or_default();
            continue;
        }
        cx.no_children(c, nm);
        match nm {
            "bench-cpu" => {
                let mut it = args(c);
                match it.next() {
                    Some(e) => bench_cpu = cx.expect_int_as::<usize>(e, "bench-cpu", 0),
                    None => cx.error(
                        name_span(c),
                        "argument missing",
                        "`bench-cpu` needs an integer argument",
                    ),
                }
                for extra in it {
                    let s = cx.value_span(extra);
                    cx.error(s, "unexpected argument", "`bench-cpu` takes one argument");
                }
            }
            "arch" => arch = cx.one_string_arg(c, "arch").map(|(s, _)| s),
            "sandbox" => {
                if let Some(v) = choice(
                    cx,
                    c,
                    "sandbox",
                    "not a sandbox policy",
                    "sandbox policy",
                    &[
                        ("required", SandboxPolicy::Required),
                        ("preferred", SandboxPolicy::Preferred),
                    ],
                ) {
                    sandbox = v;
                }
            }
            "role" => {
                if let Some(v) = choice(
                    cx,
                    c,
                    "role",
                    "not a campaign role",
                    "role",
                    &[("measure", Role::Measure), ("smoke", Role::Smoke)],
                ) {
                    role = v;
                }
            }
            "isolation" => {
                if let Some(v) = choice(
                    cx,
                    c,
                    "isolation",
                    "not an isolation level",
                    "isolation",
                    &[("core", Isolation::Core), ("machine", Isolation::Machine)],
                ) {
                    isolation = v;
                }
            }
            "emulator" => {
                target.emulator = cx
                    .string_args(c, "emulator", 1)
                    .into_iter()
                    .map(|(s, _)| s)
                    .collect();
            }
            "cpu-features" => {
                let mut features = Vec::new();
                for (f, e) in cx.string_args(c, "cpu-features", 1) {
                    if !cpu_flags::known(&f) {
                        let s = cx.value_span(e);
                        let d = cx
                            .diag(format!("`{f}` is not a CPU feature name that /proc/cpuinfo uses"))
                            .label(s, "unknown CPU feature")
                            .help(match cpu_flags::suggestion(&f) {
                                Some(g) => format!("did you mean `{g}`?"),
                                None => "`cpu-features` takes the names of /proc/cpuinfo's `flags` (x86) or `Features` (Arm)".to_string(),
                            });
                        cx.push(d);
                    }
                    features.push(f);
                }
                target.cpu_features = Some(features);
            }
            "compilers" => compilers = super::compilers::lower_compilers(cx, c, fs),
            _ => {
                if let Some((s, e)) = cx.one_string_arg(c, "cc") {
                    super::compilers::check_compiler(cx, fs, &s, e);
                    cc = Some(s);
                }
            }
        }
    }
    if !seen.contains_key("bench-cpu") && !bench_typo {
        cx.missing_node(name_span(n), "bench-cpu", "`system`");
    }
    Some(System {
        name: sys_name?,
        arch: arch.unwrap_or_else(host_arch),
        bench_cpu: bench_cpu?,
        cc: cc
            .or_else(|| compilers.first().cloned())
            .unwrap_or_else(|| "cc".to_string()),
        compilers,
        isolation,
        target,
        executor,
        sandbox,
        role,
    })
}

/// The one string argument of `c`, one of `options` (by name); an error at the value naming
/// them otherwise ("unknown isolation `x`, expected one of `core`, `machine`").
fn choice<T: Copy>(
    cx: &mut NodeReader<'_>,
    c: &KdlNode,
    key: &str,
    label: &str,
    what: &str,
    options: &[(&str, T)],
) -> Option<T> {
    let (v, e) = cx.one_string_arg(c, key)?;
    if let Some(&(_, t)) = options.iter().find(|(n, _)| *n == v) {
        return Some(t);
    }
    let names: Vec<String> = options.iter().map(|(n, _)| format!("`{n}`")).collect();
    let s = cx.value_span(e);
    cx.error(
        s,
        label,
        format!("unknown {what} `{v}`, expected one of {}", names.join(", ")),
    );
    None
}

/// `executor "local"` or `executor "slurm" { partition "..."; ... }`.
fn lower_executor(cx: &mut NodeReader<'_>, n: &KdlNode) -> Option<Executor> {
    let (kind, e) = cx.one_string_arg(n, "executor")?;
    match kind.as_str() {
        "local" => {
            cx.no_children(n, "executor \"local\"");
            Some(Executor::Local)
        }
        "slurm" => {
            let mut o = SlurmOptions::default();
            let mut seen: BTreeMap<&str, &KdlNode> = BTreeMap::new();
            for c in n.children().map(|d| d.nodes()).unwrap_or_default() {
                let nm = name(c);
                if !SLURM_NODES.contains(&nm) {
                    cx.unknown_node(c, "`executor \"slurm\"`", &SLURM_NODES);
                    continue;
                }
                if let Some(first) = seen.get(nm) {
                    cx.duplicate_node(first, c, "`executor \"slurm\"`");
                    continue;
                }
                seen.insert(nm, c);
                cx.props(c, &format!("`{nm}`"), &[]);
                cx.no_children(c, nm);
                let v = cx.one_string_arg(c, nm).map(|(s, _)| s);
                match nm {
                    "partition" => o.partition = v,
                    "account" => o.account = v,
                    "qos" => o.qos = v,
                    _ => o.constraint = v,
                }
            }
            Some(Executor::Slurm(o))
        }
        other => {
            let s = cx.value_span(e);
            cx.error(
                s,
                "not an executor",
                format!("unknown executor `{other}`, expected one of `local`, `slurm`"),
            );
            None
        }
    }
}

fn lower_flags(cx: &mut NodeReader<'_>, n: &KdlNode) -> Option<FlagProfile> {
    cx.props(n, "`flags`", &[]);
    cx.no_children(n, "flags");
    let all: Vec<&KdlEntry> = args(n).collect();
    if all.len() != 2 {
        cx.error(
            name_span(n),
            "expected a name and a flag string",
            format!(
                "`flags` takes two arguments (a profile name and a flag string), found {}",
                all.len()
            ),
        );
        return None;
    }
    let name = cx.expect_string(all[0], "flags");
    let flags = cx.expect_string(all[1], "flags")?;
    // A refused option is reported; the profile is still declared (no second error at
    // the steps that use it).
    let mut prev: Option<&str> = None;
    for (w, r) in words(&flags) {
        if let Some(p) = flag_problem(w, prev) {
            let s = cx.sub_span(all[1], &r);
            let d = cx
                .diag(format!("compiler option refused: {p}"))
                .label(s, "refused")
                .help("flag profiles may change code generation, warnings, definitions and include folders, not run programs, load plugins or write elsewhere");
            cx.push(d);
        }
        prev = Some(w);
    }
    Some(FlagProfile {
        name: name?,
        flags: flags.split_whitespace().map(str::to_string).collect(),
    })
}

fn glob_manifests(
    cx: &mut NodeReader<'_>,
    fs: &dyn SourceFs,
    dir: &Path,
    pattern: &str,
    e: &KdlEntry,
    out: &mut Vec<(PathBuf, SourceSpan)>,
) {
    let span = cx.value_span(e);
    // The folder part is literal: escape glob metacharacters in it.
    let abs = normalize(&Path::new(&escape_glob(&dir.to_string_lossy())).join(pattern));
    let Some(abs_str) = abs.to_str() else {
        cx.error(
            span,
            "not UTF-8",
            format!("glob `{pattern}` is not valid UTF-8"),
        );
        return;
    };
    match fs.glob(abs_str) {
        Err(msg) => cx.error(
            span,
            "invalid glob",
            format!("invalid glob `{pattern}`: {msg}"),
        ),
        Ok(paths) if paths.is_empty() => {
            let d = cx
                .diag(format!("glob `{pattern}` matches no file"))
                .label(span, "no file matches")
                .help(format!(
                    "the glob is relative to the pipeline's folder; it resolved to {}",
                    fs.display(&abs)
                ));
            cx.push(d);
        }
        Ok(paths) => {
            for p in paths {
                if !out.iter().any(|(q, _)| *q == p) {
                    out.push((p, span));
                }
            }
        }
    }
}

/// `s` with glob metacharacters made literal (`[` -> `[[]`), for both `glob` and `globset`.
fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_escaping() {
        assert_eq!(escape_glob("/a[1]/b*"), "/a[[]1[]]/b[*]");
        let mut fs = crate::dsl::MemFs::new();
        fs.add_file("/we[i]rd/subs/x/manifest.kdl", "");
        let pat = format!("{}/subs/*/manifest.kdl", escape_glob("/we[i]rd"));
        assert_eq!(fs.glob(&pat).unwrap().len(), 1);
    }
}
