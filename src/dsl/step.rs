//! Lowering of the `step` nodes of a pipeline: the kind, its properties (which ones a
//! kind takes comes from its [`crate::model::KindTable`]), then `needs`, checked for
//! unknown steps and cycles.

use std::collections::BTreeMap;
use std::time::Duration;

use kdl::{KdlEntry, KdlNode};
use miette::SourceSpan;
use petgraph::graph::{DiGraph, NodeIndex};

use super::diag::{backticked, closest, did_you_mean};
use super::reader::{args, name, name_span, NodeReader};
use super::values::{duration_value, parse_bytes, words};
use crate::model::{
    FlagProfile, InstanceSettings, KatMode, KindFacts, Op, StepKind, StepParams, StepSpec,
};

/// Properties every step takes.
const COMMON_PROPS: [&str; 3] = ["needs", "exclusive", "timeout"];

pub(super) struct StepDraft<'n> {
    pub kind: StepKind,
    pub kind_span: SourceSpan,
    pub needs: Option<&'n KdlEntry>,
    /// `cells=`, for `best_cell::check_best_cell`.
    pub cells: Option<&'n KdlEntry>,
    pub spec: StepSpec,
}

/// The properties a step of `kind` takes: the common ones, then its own.
fn allowed_props(kind: StepKind) -> Vec<&'static str> {
    let mut v = COMMON_PROPS.to_vec();
    v.extend_from_slice(kind.table().props);
    v
}

/// Whether some step kind takes property `k` (to tell "does not apply" from "unknown").
fn is_step_prop(k: &str) -> bool {
    COMMON_PROPS.contains(&k) || StepKind::ALL.iter().any(|s| s.table().props.contains(&k))
}

pub(super) fn lower_step<'n>(
    cx: &mut NodeReader<'_>,
    n: &'n KdlNode,
    default_timeout: Duration,
    flags: &BTreeMap<String, FlagProfile>,
) -> Option<StepDraft<'n>> {
    let (kind, kind_span) = step_kind(cx, n)?;
    let on = format!("step `{kind}`");
    let props = step_props(cx, n, kind, &on);
    let exclusive = props
        .get("exclusive")
        .and_then(|e| cx.expect_bool(e, "exclusive"))
        .unwrap_or(false);
    let timeout = step_timeout(cx, &props, default_timeout);
    let params = step_params(cx, n, kind, &props, flags, exclusive, &on);
    // A broken step still takes part in duplicate/needs checks; the campaign fails anyway.
    Some(StepDraft {
        kind,
        kind_span,
        needs: props.get("needs").copied(),
        cells: props.get("cells").copied(),
        spec: StepSpec {
            kind,
            needs: Vec::new(),
            exclusive,
            timeout,
            params,
        },
    })
}

/// The step's kind (its one argument) and where it is written.
fn step_kind(cx: &mut NodeReader<'_>, n: &KdlNode) -> Option<(StepKind, SourceSpan)> {
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
    Some((kind, kind_span))
}

/// The properties given on the step, each once, among those its kind takes; one given
/// twice, one of another kind and an unknown one are diagnosed.
fn step_props<'n>(
    cx: &mut NodeReader<'_>,
    n: &'n KdlNode,
    kind: StepKind,
    on: &str,
) -> BTreeMap<&'n str, &'n KdlEntry> {
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
    props
}

/// `timeout=`, longer than zero; `default` without it.
fn step_timeout(
    cx: &mut NodeReader<'_>,
    props: &BTreeMap<&str, &KdlEntry>,
    default: Duration,
) -> Duration {
    let Some(e) = props.get("timeout") else {
        return default;
    };
    match duration_value(cx, e, "timeout") {
        Some(t) if t.is_zero() => {
            let s = cx.value_span(e);
            cx.error(s, "zero", "`timeout` must be longer than zero");
            default
        }
        Some(t) => t,
        None => default,
    }
}

/// The kind's parameters: the `instances` block, the required properties, what to build
/// and check (`flags`, `modes`, `ops`), then how to measure ([`measure_params`]).
fn step_params(
    cx: &mut NodeReader<'_>,
    n: &KdlNode,
    kind: StepKind,
    props: &BTreeMap<&str, &KdlEntry>,
    flags: &BTreeMap<String, FlagProfile>,
    exclusive: bool,
    on: &str,
) -> StepParams {
    let mut params = StepParams {
        instances: lower_instances(cx, n, kind),
        ..StepParams::default()
    };
    for p in kind.table().required_props {
        if !props.contains_key(p) {
            cx.missing_prop(n, p, on);
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
    measure_params(cx, props, exclusive, &mut params);
    params
}

/// How to measure: `trials`, `trial`, `min-iters`, `samples`, `layouts` (above 1 only on
/// an exclusive step), `iters`, `memory`.
fn measure_params(
    cx: &mut NodeReader<'_>,
    props: &BTreeMap<&str, &KdlEntry>,
    exclusive: bool,
    params: &mut StepParams,
) {
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
    if let Some(e) = props.get("layouts") {
        let max = crate::model::MAX_LAYOUTS;
        match cx.expect_int_as::<u32>(e, "layouts", 1) {
            Some(v) if v > max => {
                let span = cx.value_span(e);
                cx.error(
                    span,
                    "too many",
                    format!("`layouts` is at most {max} (link orders timed in every batch)"),
                );
            }
            Some(v) if v > 1 && !exclusive => {
                let span = cx.value_span(e);
                cx.error(
                    span,
                    "needs the timing session",
                    "`layouts` above 1 needs `exclusive=#true`: the link orders are timed together in the timing session",
                );
            }
            Some(v) => params.layouts = v,
            None => {}
        }
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
    if let Some(e) = props.get("cells") {
        params.best_cell = super::best_cell::lower_cells(cx, e);
    }
}

/// The step's `{ instances "<glob>" timeout="2h" all-count=2 }` block: settings for the
/// instances whose `<submission>/<instance>` id matches (`all-count` and `modes` on `kat`,
/// `iters` on `profile`, `samples` on `time`).
fn lower_instances(cx: &mut NodeReader<'_>, n: &KdlNode, kind: StepKind) -> Vec<InstanceSettings> {
    let Some(children) = n.children() else {
        return Vec::new();
    };
    let on = format!("`instances` of step `{kind}`");
    let allowed: &[&str] = match kind {
        StepKind::Kat => &["timeout", "all-count", "modes"],
        StepKind::Profile => &["timeout", "iters"],
        StepKind::Time => &["timeout", "samples"],
        _ => &["timeout"],
    };
    let mut out = Vec::new();
    for c in children.nodes() {
        if name(c) != "instances" {
            cx.error(
                name_span(c),
                "unknown node",
                format!(
                    "unknown node `{}` in step `{kind}`, expected `instances`",
                    name(c)
                ),
            );
            continue;
        }
        cx.no_children(c, "instances");
        let props = cx.props(c, &on, allowed);
        let mut patterns = Vec::new();
        for e in args(c) {
            let Some(p) = cx.expect_string(e, "instances") else {
                continue;
            };
            match globset::Glob::new(&p) {
                Ok(_) => patterns.push(p),
                Err(err) => {
                    let span = cx.value_span(e);
                    cx.error(span, "bad glob", format!("bad pattern `{p}`: {err}"));
                }
            }
        }
        if patterns.is_empty() {
            cx.error(
                name_span(c),
                "no pattern",
                "`instances` takes one or more globs over `<submission>/<instance>`",
            );
            continue;
        }
        let pattern = patterns.join(" ");
        let timeout = props
            .get("timeout")
            .and_then(|e| duration_value(cx, e, "timeout"));
        let all_count = props
            .get("all-count")
            .and_then(|e| cx.expect_int_as::<u32>(e, "all-count", 1));
        let kat_modes = props
            .get("modes")
            .and_then(|e| word_list(cx, e, "modes", &["single", "all"]))
            .map(|ws| {
                ws.iter()
                    .filter_map(|w| match w.as_str() {
                        "single" => Some(KatMode::Single),
                        "all" => Some(KatMode::All),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
            });
        let iters = props
            .get("iters")
            .and_then(|e| cx.expect_int_as::<u64>(e, "iters", 1));
        let samples = props
            .get("samples")
            .and_then(|e| cx.expect_int_as::<u32>(e, "samples", 1));
        let any_prop = c.entries().iter().any(|e| e.name().is_some());
        if timeout.is_none()
            && all_count.is_none()
            && kat_modes.is_none()
            && iters.is_none()
            && samples.is_none()
        {
            if any_prop {
                continue; // already reported (unknown or bad property)
            }
            cx.error(
                name_span(c),
                "no setting",
                format!(
                    "`instances \"{pattern}\"` sets nothing: give {}",
                    backticked(allowed.iter().copied())
                ),
            );
            continue;
        }
        out.push(InstanceSettings {
            patterns,
            timeout,
            all_count,
            kat_modes,
            iters,
            samples,
        });
    }
    out
}

/// The `flags=` value of a build step: one declared profile name, or several separated by
/// spaces (every instance is then built once per profile; see [`super::profiles`]).
fn flags_profile(
    cx: &mut NodeReader<'_>,
    e: &KdlEntry,
    flags: &BTreeMap<String, FlagProfile>,
) -> Option<String> {
    let f = cx.expect_string(e, "flags")?;
    if flags.contains_key(&f) {
        return Some(f);
    }
    let ws = words(&f);
    if ws.len() < 2 {
        let span = cx.value_span(e);
        unknown_profile(cx, span, ws.first().map_or(f.as_str(), |w| w.0), flags);
        return None;
    }
    let mut out: Vec<&str> = Vec::new();
    let mut ok = true;
    for (w, r) in ws {
        let span = cx.sub_span(e, &r);
        if !flags.contains_key(w) {
            unknown_profile(cx, span, w, flags);
            ok = false;
        } else if !w
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
        {
            cx.error(
                span,
                "profile name",
                format!(
                    "flags profile `{w}` cannot be one of several: its name becomes part of \
                     instance ids (letters, digits and `-_.+` only)"
                ),
            );
            ok = false;
        } else if !out.contains(&w) {
            out.push(w);
        }
    }
    ok.then(|| out.join(" "))
}

fn unknown_profile(
    cx: &mut NodeReader<'_>,
    span: SourceSpan,
    f: &str,
    flags: &BTreeMap<String, FlagProfile>,
) {
    let names = || flags.keys().map(|s| s.as_str());
    let help = did_you_mean(f, names()).unwrap_or_else(|| {
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
}

/// A space-separated list of words from `allowed`, deduplicated in order.
fn word_list(
    cx: &mut NodeReader<'_>,
    e: &KdlEntry,
    what: &str,
    allowed: &[&str],
) -> Option<Vec<String>> {
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

pub(super) fn resolve_needs(cx: &mut NodeReader<'_>, steps: &mut [StepDraft<'_>]) {
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
pub(super) fn check_cycles(cx: &mut NodeReader<'_>, steps: &[StepDraft<'_>]) {
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
