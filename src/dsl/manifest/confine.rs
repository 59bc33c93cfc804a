//! The paths a manifest names inside its source — instance `dir`s, `when` blocks' `sources`,
//! the primitives' `sources`, `include` folders and `header`s, `kat submitted` files — stay
//! inside the source root with their links followed, not only as written: `dir="good"`
//! where `good` is a link to `/root` is refused at its line like `dir="../../root"`. The
//! lexical rule is [`super::source::root_path_problem`]; this pass resolves links for a
//! `source path=` folder, whose files `check` can see (a crate or archive is checked when
//! it is unpacked: `check --deep` and the build step). A folder that holds the campaign's
//! outputs, or lies in them, is refused the same way (the compiler would see other
//! submissions' objects and records).

use std::path::Path;

use kdl::{KdlEntry, KdlNode, KdlValue};
use miette::SourceSpan;

use super::super::loader::Loader;
use super::super::reader::{name_span, NodeReader};
use crate::model::{Instance, Primitives};

/// The manifest's nodes the paths come from (for the position of an error).
pub(super) struct Nodes<'n> {
    pub source: Option<&'n KdlNode>,
    pub primitives: Option<&'n KdlNode>,
    pub kat: Option<&'n KdlNode>,
    pub whens: Vec<&'n KdlNode>,
}

/// Reports every path of `primitives` and `instances` that resolves outside `root` (a
/// `source path=` folder); false when one did.
pub(super) fn check_links(
    cx: &mut NodeReader<'_>,
    loader: &Loader<'_>,
    root: &Path,
    nodes: &Nodes<'_>,
    primitives: &Primitives,
    instances: &[Instance],
) -> bool {
    let fs = loader.fs;
    let real_root = fs.canonical(root);
    let real_out = loader.outputs.as_deref().map(|o| fs.canonical(o));
    // Outside the source root, or overlapping the outputs (other submissions' objects and
    // records): either way not for the compiler to see.
    let outside = |rel: &str| {
        let real = fs.canonical(&root.join(rel));
        !real.starts_with(&real_root)
            || real_out
                .as_ref()
                .is_some_and(|o| real.starts_with(o) || o.starts_with(&real))
    };
    let fallback = nodes
        .source
        .map(name_span)
        .unwrap_or(SourceSpan::new(0.into(), 0));
    let mut bad: Vec<(String, String, SourceSpan)> = Vec::new();
    let mut note = |what: &str, p: &str, span: SourceSpan| {
        if !bad.iter().any(|(_, q, s)| q == p && *s == span) {
            bad.push((what.to_string(), p.to_string(), span));
        }
    };
    for inst in instances {
        if outside(&inst.dir) {
            let o = inst.origin.dir;
            note(
                "instance folder",
                &inst.dir,
                SourceSpan::new(o.offset.into(), o.len),
            );
        }
        for s in inst.extra_sources.iter().filter(|s| outside(s)) {
            let span = find(cx, &nodes.whens, s).unwrap_or(fallback);
            note("source", s, span);
        }
        if let Some(k) = &inst.kat_submitted {
            // Any size gives the same folders: try it with `1`.
            let probe = ["pk", "sk", "ct", "ss"]
                .iter()
                .fold(k.clone(), |p, v| p.replace(&format!("{{{v}}}"), "1"));
            if outside(&probe) {
                let span = nodes
                    .kat
                    .and_then(|n| n.entry("submitted"))
                    .map(|e| cx.value_span(e))
                    .or_else(|| find_node(cx, &nodes.whens, "kat-submitted"))
                    .unwrap_or(fallback);
                note("submitted KAT file", &probe, span);
            }
        }
    }
    let prim_span = nodes.primitives.map(|p| match p.entry("include") {
        Some(e) => cx.value_span(e),
        None => name_span(p),
    });
    for (what, list) in [
        ("primitives source", &primitives.sources),
        ("primitives include folder", &primitives.includes),
        ("primitives header", &primitives.headers),
    ] {
        for p in list.iter().filter(|p| outside(p)) {
            let span = nodes
                .primitives
                .and_then(|n| find(cx, &[n], p))
                .or(prim_span)
                .unwrap_or(fallback);
            note(what, p, span);
        }
    }
    let ok = bad.is_empty();
    for (what, p, span) in bad {
        let d = cx
            .diag(format!(
                "{what} `{p}` resolves outside the source root through a link, or into the outputs"
            ))
            .label(span, "leaves the source")
            .help(format!(
                "paths in a manifest's sources stay inside the source root ({}) with their links followed, and away from the campaign's outputs",
                loader.fs.display(root)
            ));
        cx.push(d);
    }
    ok
}

/// The span of the first string argument equal to `value` among the nodes and their
/// children.
fn find(cx: &NodeReader<'_>, nodes: &[&KdlNode], value: &str) -> Option<SourceSpan> {
    let is = |e: &KdlEntry| matches!(e.value(), KdlValue::String(s) if s == value);
    for n in nodes {
        if let Some(e) = n.entries().iter().find(|e| is(e)) {
            return Some(cx.value_span(e));
        }
        let kids: Vec<&KdlNode> = n
            .children()
            .map(|c| c.nodes().iter().collect())
            .unwrap_or_default();
        if let Some(s) = find(cx, &kids, value) {
            return Some(s);
        }
    }
    None
}

/// The span of the first argument of the first child node named `name`.
fn find_node(cx: &NodeReader<'_>, nodes: &[&KdlNode], name: &str) -> Option<SourceSpan> {
    nodes
        .iter()
        .filter_map(|n| n.children())
        .flat_map(|c| c.nodes())
        .find(|c| c.name().value() == name)
        .and_then(|c| c.entries().first())
        .map(|e| cx.value_span(e))
}
