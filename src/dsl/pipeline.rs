//! Lowering of a pipeline file (`pipelines/<system>.kdl`): system, flag profiles,
//! submission globs, outputs, defaults and steps, with `needs` checked for unknown steps
//! and cycles.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kdl::{KdlDocument, KdlEntry, KdlNode};
use miette::SourceSpan;
use petgraph::graph::{DiGraph, NodeIndex};

use super::cflags::flag_problem;
use super::diag::{backticked, closest, did_you_mean};
use super::duration::parse_duration;
use super::fs::{normalize, SourceFs};
use super::reader::{args, name, name_span, Cx};
use crate::model::{FlagProfile, Isolation, KatMode, Op, StepKind, StepParams, StepSpec, System};

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
const SYSTEM_NODES: [&str; 4] = ["arch", "bench-cpu", "cc", "isolation"];
/// Properties every step takes.
const COMMON_PROPS: [&str; 3] = ["needs", "exclusive", "timeout"];
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

/// The host architecture as reports name it.
pub(crate) fn host_arch() -> String {
    match std::env::consts::ARCH {
        "x86_64" => "x86-64".to_string(),
        other => other.to_string(),
    }
}

/// Whitespace-separated words of `s` with their byte ranges.
pub(crate) fn words(s: &str) -> Vec<(&str, Range<usize>)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push((&s[st..i], st..i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        out.push((&s[st..], st..s.len()));
    }
    out
}

struct StepDraft<'n> {
    kind: StepKind,
    kind_span: SourceSpan,
    needs: Option<&'n KdlEntry>,
    spec: StepSpec,
}

/// Lowers a parsed pipeline document.
pub(crate) fn lower_pipeline(
    cx: &mut Cx<'_>,
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
            "system" => draft.system = lower_system(cx, n),
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
    draft.steps = steps.into_iter().map(|s| s.spec).collect();
    draft
}

fn lower_system(cx: &mut Cx<'_>, n: &KdlNode) -> Option<System> {
    cx.props(n, "`system`", &[]);
    let sys_name = cx.one_string_arg(n, "system").map(|(s, _)| s);
    let children = cx.expect_children(n, "system")?;
    let mut arch = None;
    let mut bench_cpu = None;
    let mut cc = None;
    let mut isolation = Isolation::Core;
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
            "isolation" => {
                if let Some((v, e)) = cx.one_string_arg(c, "isolation") {
                    match v.as_str() {
                        "core" => isolation = Isolation::Core,
                        "machine" => isolation = Isolation::Machine,
                        other => {
                            let s = cx.value_span(e);
                            cx.error(
                                s,
                                "not an isolation level",
                                format!("unknown isolation `{other}`, expected one of `core`, `machine`"),
                            );
                        }
                    }
                }
            }
            _ => cc = cx.one_string_arg(c, "cc").map(|(s, _)| s),
        }
    }
    if !seen.contains_key("bench-cpu") && !bench_typo {
        cx.missing_node(name_span(n), "bench-cpu", "`system`");
    }
    Some(System {
        name: sys_name?,
        arch: arch.unwrap_or_else(host_arch),
        bench_cpu: bench_cpu?,
        cc: cc.unwrap_or_else(|| "cc".to_string()),
        isolation,
    })
}

fn lower_flags(cx: &mut Cx<'_>, n: &KdlNode) -> Option<FlagProfile> {
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
    cx: &mut Cx<'_>,
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

/// The longest `trial`: a trial is repeated `trials` times per operation.
const MAX_TRIAL: Duration = Duration::from_secs(3600);
/// The longest `timeout` (a week): anything longer is a typo, not a plan.
const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// A duration-valued entry; reports a bad or absurd value at the value.
pub(crate) fn duration_value(cx: &mut Cx<'_>, e: &KdlEntry, what: &str) -> Option<Duration> {
    let s = cx.expect_string(e, what)?;
    let (max, max_text) = if what == "trial" {
        (MAX_TRIAL, "1h")
    } else {
        (MAX_TIMEOUT, "168h (a week)")
    };
    match parse_duration(&s) {
        Ok(d) if d > max => {
            let span = cx.value_span(e);
            let d = cx
                .diag(format!("`{what}` of `{s}` is longer than {max_text}"))
                .label(span, "too long")
                .help(format!("`{what}` is at most {max_text}; durations are written `250ms`, `1s`, `10m`, `1h`"));
            cx.push(d);
            None
        }
        Ok(d) => Some(d),
        Err(msg) => {
            let span = cx.value_span(e);
            cx.error(span, "bad duration", format!("bad `{what}`: {msg}"));
            None
        }
    }
}

/// A size such as `4G`, `512M`, `65536K` (binary multiples) or bytes; at least 64 MiB.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        Some((i, 'T' | 't')) => (&t[..i], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size (write e.g. `4G`, `512M`)"))?;
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    if bytes < 64 << 20 {
        return Err(format!("`{text}` is below 64M, too little to load a KEM"));
    }
    Ok(bytes)
}

/// The properties a step of `kind` takes: the common ones, then its own.
fn allowed_props(kind: StepKind) -> Vec<&'static str> {
    let mut v = COMMON_PROPS.to_vec();
    v.extend_from_slice(kind.describe().props());
    v
}

/// Whether some step kind takes property `k` (to tell "does not apply" from "unknown").
fn is_step_prop(k: &str) -> bool {
    COMMON_PROPS.contains(&k)
        || StepKind::ALL
            .iter()
            .any(|s| s.describe().props().contains(&k))
}

fn lower_step<'n>(
    cx: &mut Cx<'_>,
    n: &'n KdlNode,
    default_timeout: Duration,
    flags: &BTreeMap<String, FlagProfile>,
) -> Option<StepDraft<'n>> {
    cx.no_children(n, "step");
    let (kind_name, kind_entry) = cx.one_string_arg(n, "step")?;
    let kind_span = cx.value_span(kind_entry);
    let Some(kind) = StepKind::from_name(&kind_name) else {
        let kinds: Vec<&str> = StepKind::ALL.iter().map(|k| k.name()).collect();
        let d = cx
            .diag(format!(
                "unknown step kind `{kind_name}`, expected one of {}",
                backticked(kinds.iter().copied())
            ))
            .label(kind_span, "unknown step kind")
            .maybe_help(did_you_mean(&kind_name, kinds.iter().copied()));
        cx.push(d);
        return None;
    };
    let on = format!("step `{kind}`");
    let allowed = allowed_props(kind);
    let mut props: BTreeMap<&str, &KdlEntry> = BTreeMap::new();
    for e in n.entries() {
        let Some(key) = e.name() else { continue };
        let k = key.value();
        if allowed.contains(&k) {
            if let Some(prev) = props.get(k) {
                let d = cx
                    .diag(format!("property `{k}` is given twice on {on}"))
                    .label(key.span(), "given again here")
                    .label(prev.span(), "first given here");
                cx.push(d);
            } else {
                props.insert(k, e);
            }
        } else if is_step_prop(k) {
            // A parameter of another kind: say so rather than "unknown".
            let d = cx
                .diag(format!("property `{k}` does not apply to step `{kind}`"))
                .label(key.span(), "not a parameter of this step")
                .help(format!(
                    "step `{kind}` takes {}",
                    backticked(allowed.iter().copied())
                ));
            cx.push(d);
        } else {
            let guess = closest(k, allowed.iter().copied());
            if let Some(g) = guess {
                cx.guessed_prop(n, g);
            }
            let help = match guess {
                Some(g) => format!("did you mean `{g}`?"),
                None => format!(
                    "step `{kind}` takes {}",
                    backticked(allowed.iter().copied())
                ),
            };
            let d = cx
                .diag(format!("unknown property `{k}` on {on}"))
                .label(key.span(), "unknown property")
                .help(help);
            cx.push(d);
        }
    }

    let mut params = StepParams::default();
    let mut exclusive = false;
    let mut timeout = default_timeout;
    if let Some(b) = props
        .get("exclusive")
        .and_then(|e| cx.expect_bool(e, "exclusive"))
    {
        exclusive = b;
    }
    if let Some(e) = props.get("timeout") {
        match duration_value(cx, e, "timeout") {
            Some(t) if t.is_zero() => {
                let s = cx.value_span(e);
                cx.error(s, "zero", "`timeout` must be longer than zero");
            }
            Some(t) => timeout = t,
            None => {}
        }
    }
    for p in kind.describe().required_props() {
        if !props.contains_key(p) {
            cx.missing_prop(n, p, &on);
        }
    }
    if let Some(e) = props.get("flags") {
        params.flags = flags_profile(cx, e, flags);
    }
    if let Some(ws) = props
        .get("modes")
        .and_then(|e| word_list(cx, e, "modes", &["single", "all"]))
    {
        params.kat_modes = ws
            .iter()
            .map(|w| {
                if w == "all" {
                    KatMode::All
                } else {
                    KatMode::Single
                }
            })
            .collect();
    }
    let op_names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
    if let Some(ws) = props
        .get("ops")
        .and_then(|e| word_list(cx, e, "ops", &op_names))
    {
        params.ops = ws.iter().filter_map(|w| Op::from_name(w)).collect();
    }
    if let Some(v) = props
        .get("trials")
        .and_then(|e| cx.expect_int_as::<u32>(e, "trials", 1))
    {
        params.trials = v;
    }
    if let Some(v) = props
        .get("trial")
        .and_then(|e| duration_value(cx, e, "trial"))
    {
        params.trial = v;
    }
    if let Some(v) = props
        .get("min-iters")
        .and_then(|e| cx.expect_int_as::<u64>(e, "min-iters", 1))
    {
        params.min_iters = v;
    }
    if let Some(v) = props
        .get("samples")
        .and_then(|e| cx.expect_int_as::<u32>(e, "samples", 0))
    {
        params.samples = v;
    }
    if let Some(v) = props
        .get("iters")
        .and_then(|e| cx.expect_int_as::<u64>(e, "iters", 1))
    {
        params.iters = v;
    }
    if let Some(e) = props.get("memory") {
        if let Some(text) = cx.expect_string(e, "memory") {
            match parse_bytes(&text) {
                Ok(b) => params.memory = Some(b),
                Err(msg) => {
                    let span = cx.value_span(e);
                    cx.error(span, "bad size", format!("bad `memory`: {msg}"));
                }
            }
        }
    }
    // A broken step still takes part in duplicate/needs checks; the campaign fails anyway.
    Some(StepDraft {
        kind,
        kind_span,
        needs: props.get("needs").copied(),
        spec: StepSpec {
            kind,
            needs: Vec::new(),
            exclusive,
            timeout,
            params,
        },
    })
}

/// The `flags=` value of a build step: a declared profile name.
fn flags_profile(
    cx: &mut Cx<'_>,
    e: &KdlEntry,
    flags: &BTreeMap<String, FlagProfile>,
) -> Option<String> {
    let f = cx.expect_string(e, "flags")?;
    if flags.contains_key(&f) {
        return Some(f);
    }
    let span = cx.value_span(e);
    let names = || flags.keys().map(|s| s.as_str());
    let help = did_you_mean(&f, names()).unwrap_or_else(|| {
        if flags.is_empty() {
            "declare it with `flags \"name\" \"-O2 ...\"`".to_string()
        } else {
            format!("declared profiles: {}", backticked(names()))
        }
    });
    let d = cx
        .diag(format!("unknown flags profile `{f}`"))
        .label(span, "no `flags` profile of this name")
        .help(help);
    cx.push(d);
    None
}

/// A space-separated list of words from `allowed`, deduplicated in order.
fn word_list(cx: &mut Cx<'_>, e: &KdlEntry, what: &str, allowed: &[&str]) -> Option<Vec<String>> {
    let s = cx.expect_string(e, what)?;
    let ws = words(&s);
    if ws.is_empty() {
        let span = cx.value_span(e);
        cx.error(
            span,
            "empty",
            format!(
                "`{what}` must name at least one of {}",
                backticked(allowed.iter().copied())
            ),
        );
        return None;
    }
    let mut out: Vec<String> = Vec::new();
    let mut ok = true;
    for (w, r) in ws {
        if !allowed.contains(&w) {
            let span = cx.sub_span(e, &r);
            let d = cx
                .diag(format!(
                    "unknown value `{w}` in `{what}`, expected one of {}",
                    backticked(allowed.iter().copied())
                ))
                .label(span, "unknown value")
                .maybe_help(did_you_mean(w, allowed.iter().copied()));
            cx.push(d);
            ok = false;
        } else if !out.iter().any(|o| o == w) {
            out.push(w.to_string());
        }
    }
    ok.then_some(out)
}

fn resolve_needs(cx: &mut Cx<'_>, steps: &mut [StepDraft<'_>]) {
    let declared: Vec<StepKind> = steps.iter().map(|s| s.kind).collect();
    let declared_names: Vec<&str> = declared.iter().map(|k| k.name()).collect();
    for s in steps.iter_mut() {
        let Some(e) = s.needs else { continue };
        let Some(text) = cx.expect_string(e, "needs") else {
            continue;
        };
        for (w, r) in words(&text) {
            match StepKind::from_name(w).filter(|k| declared.contains(k)) {
                Some(k) => {
                    if !s.spec.needs.contains(&k) {
                        s.spec.needs.push(k);
                    }
                }
                None => {
                    let span = cx.sub_span(e, &r);
                    let what = if StepKind::from_name(w).is_some() {
                        format!("step `{w}` in `needs` is not declared in this pipeline, declared steps are {}", backticked(declared_names.iter().copied()))
                    } else {
                        format!(
                            "unknown step `{w}` in `needs`, expected one of {}",
                            backticked(declared_names.iter().copied())
                        )
                    };
                    let d = cx
                        .diag(what)
                        .label(span, "unknown step")
                        .maybe_help(did_you_mean(w, declared_names.iter().copied()));
                    cx.push(d);
                }
            }
        }
    }
}

/// One error per strongly connected component of the `needs` graph that holds a cycle,
/// showing one cycle through it as `a -> b -> a`.
fn check_cycles(cx: &mut Cx<'_>, steps: &[StepDraft<'_>]) {
    let mut g: DiGraph<usize, ()> = DiGraph::new();
    let idx: Vec<NodeIndex> = (0..steps.len()).map(|i| g.add_node(i)).collect();
    for (i, s) in steps.iter().enumerate() {
        for need in &s.spec.needs {
            if let Some(j) = steps.iter().position(|t| t.kind == *need) {
                g.add_edge(idx[i], idx[j], ());
            }
        }
    }
    let mut sccs = petgraph::algo::tarjan_scc(&g);
    sccs.iter_mut().for_each(|c| c.sort());
    sccs.sort();
    for scc in sccs {
        let members: Vec<usize> = scc.iter().map(|n| g[*n]).collect();
        let start = members[0];
        let self_loop = steps[start].spec.needs.contains(&steps[start].kind);
        if members.len() == 1 && !self_loop {
            continue;
        }
        let path = cycle_path(steps, start, &members);
        let names: Vec<&str> = path.iter().map(|i| steps[*i].kind.name()).collect();
        let mut d = cx
            .diag(format!("dependency cycle: `{}`", names.join(" -> ")))
            .help("remove one of these `needs` so the steps can run in order");
        for w in path.windows(2) {
            let (from, to) = (w[0], w[1]);
            if let Some(e) = steps[from].needs {
                let text = e.value().as_string().unwrap_or("");
                let to_name = steps[to].kind.name();
                let r = words(text)
                    .into_iter()
                    .find(|(word, _)| *word == to_name)
                    .map(|(_, r)| r)
                    .unwrap_or(0..0);
                let span = cx.sub_span(e, &r);
                d = d.label(span, format!("`{}` needs `{to_name}`", steps[from].kind));
            }
        }
        cx.push(d);
    }
}

/// A cycle from `start` back to itself, using only `members` (an SCC holding a cycle).
fn cycle_path(steps: &[StepDraft<'_>], start: usize, members: &[usize]) -> Vec<usize> {
    let pos = |k: StepKind| steps.iter().position(|s| s.kind == k);
    // Depth-first search for a path back to `start`.
    let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
    let mut on_path = vec![false; steps.len()];
    on_path[start] = true;
    while let Some(&mut (node, ref mut next)) = stack.last_mut() {
        let needs = &steps[node].spec.needs;
        if *next >= needs.len() {
            on_path[node] = false;
            stack.pop();
            continue;
        }
        let target = pos(needs[*next]);
        *next += 1;
        let Some(t) = target else { continue };
        if t == start {
            let mut path: Vec<usize> = stack.iter().map(|(n, _)| *n).collect();
            path.push(start);
            return path;
        }
        if members.contains(&t) && !on_path[t] {
            on_path[t] = true;
            stack.push((t, 0));
        }
    }
    vec![start, start]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_for_memory() {
        assert_eq!(parse_bytes("4G"), Ok(4 << 30));
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("1t"), Ok(1 << 40));
        assert!(parse_bytes("1M").unwrap_err().contains("below 64M"));
        assert!(parse_bytes("4GB").unwrap_err().contains("not a size"));
        assert!(parse_bytes("99999999999T")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn glob_escaping() {
        assert_eq!(escape_glob("/a[1]/b*"), "/a[[]1[]]/b[*]");
        let mut fs = crate::dsl::MemFs::new();
        fs.add_file("/we[i]rd/subs/x/manifest.kdl", "");
        let pat = format!("{}/subs/*/manifest.kdl", escape_glob("/we[i]rd"));
        assert_eq!(fs.glob(&pat).unwrap().len(), 1);
    }

    #[test]
    fn words_have_ranges() {
        assert_eq!(
            words("  kat time\tsizes "),
            vec![("kat", 2..5), ("time", 6..10), ("sizes", 11..16)]
        );
        assert!(words("   ").is_empty());
    }
}
