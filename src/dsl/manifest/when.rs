//! `when` blocks of a manifest: conditions over matrix variables and what they add to the
//! instances they match (flags, sources, CPU needs, excluded files, libraries, the
//! submitted KAT file) or change (the folder, `dir`).

use kdl::{KdlEntry, KdlNode};

use super::super::cflags::flag_problem;
use super::super::cpu_flags;
use super::super::diag::{backticked, did_you_mean};
use super::super::reader::{name, name_span, NodeReader};
use super::super::template::Template;
use super::super::values::words;
use super::plain_node;
use super::source::check_root_path;
use super::templates::{kat_template, template_value, Matrix};
use super::wide::{library, pos_of};
use crate::model::Pos;

pub(super) const WHEN_NODES: [&str; 7] = [
    "cflags",
    "sources",
    "requires-cpu",
    "exclude",
    "link",
    "kat-submitted",
    "dir",
];

/// A `when` block: conditions (variable -> accepted values) and what it adds.
pub(super) struct When {
    pub cond: Vec<(String, Vec<String>)>,
    pub cflags: Vec<String>,
    pub sources: Vec<String>,
    pub requires_cpu: Vec<String>,
    pub exclude: Vec<String>,
    /// Libraries, with where each is named (for `check --deep`).
    pub libraries: Vec<(String, Pos)>,
    pub kat_submitted: Option<Template>,
    /// `dir "..."`: the instance's folder instead of its `dir=` (a template over the
    /// matrix), with where it is written.
    pub dir: Option<(Template, Pos)>,
}

pub(super) fn lower_when(cx: &mut NodeReader<'_>, n: &KdlNode, m: &Matrix) -> Option<When> {
    cx.no_args(n, "when");
    let vars: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
    let (cond, mut ok) = conditions(cx, n, m, &vars);
    let mut w = When {
        cond,
        cflags: Vec::new(),
        sources: Vec::new(),
        requires_cpu: Vec::new(),
        exclude: Vec::new(),
        libraries: Vec::new(),
        kat_submitted: None,
        dir: None,
    };
    let children = cx.expect_children(n, "when")?;
    for c in children.nodes() {
        ok &= when_child(cx, c, m, &vars, &mut w);
    }
    ok.then_some(w)
}

/// The block's conditions (variable -> accepted values), and whether they were all right
/// (what was wrong is reported).
fn conditions(
    cx: &mut NodeReader<'_>,
    n: &KdlNode,
    m: &Matrix,
    vars: &[&str],
) -> (Vec<(String, Vec<String>)>, bool) {
    let mut ok = true;
    let mut cond = Vec::new();
    if n.entries().iter().all(|e| e.name().is_none()) {
        cx.error(
            name_span(n),
            "no condition",
            "`when` needs at least one condition, e.g. `when impl=\"avx2\" { ... }`",
        );
        ok = false;
    }
    for e in n.entries() {
        let Some(key) = e.name() else { continue };
        let k = key.value();
        let Some((_, vals)) = m.iter().find(|(v, _)| v == k) else {
            let list = backticked(vars.iter().copied());
            let msg = if list.is_empty() {
                format!("unknown matrix variable `{k}` in `when`, no matrix variables are defined")
            } else {
                format!("unknown matrix variable `{k}` in `when`, expected one of {list}")
            };
            let d = cx
                .diag(msg)
                .label(key.span(), "unknown variable")
                .maybe_help(did_you_mean(k, vars.iter().copied()));
            cx.push(d);
            ok = false;
            continue;
        };
        let Some(text) = cx.expect_string(e, k) else {
            ok = false;
            continue;
        };
        let mut accepted = Vec::new();
        for (w, r) in words(&text) {
            if !vals.iter().any(|v| v == w) {
                let s = cx.sub_span(e, &r);
                let d = cx
                    .diag(format!(
                        "`{w}` is not a value of matrix variable `{k}`, expected one of {}",
                        backticked(vals.iter().map(|s| s.as_str()))
                    ))
                    .label(s, "no such value")
                    .maybe_help(did_you_mean(w, vals.iter().map(|s| s.as_str())));
                cx.push(d);
                ok = false;
            } else {
                accepted.push(w.to_string());
            }
        }
        cond.push((k.to_string(), accepted));
    }
    (cond, ok)
}

/// One node inside a `when` block, added to `w`; whether it was right (else reported).
fn when_child(
    cx: &mut NodeReader<'_>,
    c: &KdlNode,
    m: &Matrix,
    vars: &[&str],
    w: &mut When,
) -> bool {
    let nm = name(c);
    if !WHEN_NODES.contains(&nm) {
        cx.unknown_node(c, "`when`", &WHEN_NODES);
        return false;
    }
    plain_node(cx, c);
    match nm {
        "link" => {
            let mut ok = true;
            for e in c.entries().iter().filter(|e| e.name().is_none()) {
                match library(cx, e) {
                    Some(l) if !w.libraries.iter().any(|(x, _)| *x == l.0) => w.libraries.push(l),
                    Some(_) => {}
                    None => ok = false,
                }
            }
            return ok;
        }
        "kat-submitted" => {
            let Some((_, e)) = cx.one_string_arg(c, nm) else {
                return false;
            };
            return match kat_template(cx, e, "kat-submitted", m) {
                Some(t) => {
                    w.kat_submitted = Some(t);
                    true
                }
                None => false,
            };
        }
        "dir" => {
            let Some((_, e)) = cx.one_string_arg(c, nm) else {
                return false;
            };
            return match template_value(cx, e, "dir", vars) {
                Some(t) => {
                    w.dir = Some((t, pos_of(cx, cx.value_span(e))));
                    true
                }
                None => false,
            };
        }
        _ => {}
    }
    let args = cx.string_args(c, nm, 1);
    let mut ok = true;
    match nm {
        "sources" => {
            for (p, e) in &args {
                ok &= check_root_path(cx, p, e, "source");
            }
        }
        "cflags" => ok &= check_cflags(cx, &args),
        "requires-cpu" => ok &= check_cpu_features(cx, &args),
        _ => {}
    }
    let vals = args.into_iter().map(|(s, _)| s);
    match nm {
        "cflags" => w.cflags.extend(vals),
        "sources" => w.sources.extend(vals),
        "requires-cpu" => w.requires_cpu.extend(vals),
        _ => w.exclude.extend(vals),
    }
    ok
}

/// Every compiler option allowed (each refused one reported).
fn check_cflags(cx: &mut NodeReader<'_>, args: &[(String, &KdlEntry)]) -> bool {
    let mut ok = true;
    let mut prev: Option<&str> = None;
    for (flag, e) in args {
        if let Some(p) = flag_problem(flag, prev) {
            let s = cx.value_span(e);
            let d = cx
                .diag(format!("compiler option refused: {p}"))
                .label(s, "refused")
                .help("`cflags` may change code generation, warnings, definitions and include folders, not run programs, load plugins or write elsewhere");
            cx.push(d);
            ok = false;
        }
        prev = Some(flag);
    }
    ok
}

/// Every CPU feature a name /proc/cpuinfo uses (each unknown one reported).
fn check_cpu_features(cx: &mut NodeReader<'_>, args: &[(String, &KdlEntry)]) -> bool {
    let mut ok = true;
    for (flag, e) in args {
        if cpu_flags::known(flag) {
            continue;
        }
        let s = cx.value_span(e);
        let d = cx
            .diag(format!(
                "`{flag}` is not a CPU feature name that /proc/cpuinfo uses"
            ))
            .label(s, "unknown CPU feature")
            .help(match cpu_flags::suggestion(flag) {
                Some(g) => format!("did you mean `{g}`? (`requires-cpu` takes the names of /proc/cpuinfo's `flags`, not gcc's `-m` names)"),
                None => "`requires-cpu` takes the names of /proc/cpuinfo's `flags` (x86) or `Features` (Arm)".to_string(),
            });
        cx.push(d);
        ok = false;
    }
    ok
}
