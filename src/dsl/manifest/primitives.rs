//! The `primitives` node of a manifest: an inline block or an included primitives file
//! (parsed once per campaign), naming the provided symmetric library.

use std::path::Path;

use kdl::{KdlDocument, KdlNode};
use miette::SourceSpan;

use super::super::loader::Loader;
use super::super::reader::{name, name_span, NodeReader};
use super::confined_path;
use super::source::check_root_path;
use crate::model::{PrimitiveFn, Primitives};

const PRIMITIVES_NODES: [&str; 5] = ["sources", "include", "header", "hash", "drng"];

pub(super) fn lower_primitives_node(
    cx: &mut NodeReader<'_>,
    loader: &mut Loader<'_>,
    n: &KdlNode,
    dir: &Path,
) -> Option<Primitives> {
    cx.no_args(n, "primitives");
    let props = cx.props(n, "`primitives`", &["include"]);
    match (props.get("include"), n.children()) {
        (Some(e), Some(_)) => {
            let s = cx.value_span(e);
            cx.error(
                s,
                "include given here",
                "`primitives` takes either `include=` or a block, not both",
            );
            None
        }
        (Some(e), None) => {
            let rel = cx.expect_string(e, "include")?;
            let abs = confined_path(cx, loader, dir, &rel, e, "primitives file")?;
            if let Some(cached) = loader.primitives.get(&abs) {
                return cached.clone();
            }
            let span = cx.value_span(e);
            let result = match loader.load_named(&abs, cx.file, span, "primitives file", &rel) {
                Some((pfile, pdoc)) => {
                    let mut pdiags = Vec::new();
                    let p = {
                        let mut pcx = NodeReader::new(&pfile, &mut pdiags);
                        lower_primitives_file(&mut pcx, &pdoc)
                    };
                    let ok = pdiags.is_empty();
                    loader.diags.append(&mut pdiags);
                    p.filter(|_| ok)
                }
                None => None,
            };
            loader.primitives.insert(abs, result.clone());
            result
        }
        (None, Some(c)) => lower_primitives_block(cx, c),
        (None, None) => {
            cx.error(
                name_span(n),
                "empty",
                "`primitives` needs `include=\"file.kdl\"` or a `{ ... }` block",
            );
            None
        }
    }
}

fn lower_primitives_file(cx: &mut NodeReader<'_>, doc: &KdlDocument) -> Option<Primitives> {
    let mut found: Option<&KdlNode> = None;
    for n in doc.nodes() {
        if name(n) != "primitives" {
            cx.unknown_node(n, "a primitives file", &["primitives"]);
        } else if let Some(first) = found {
            cx.duplicate_node(first, n, "a primitives file");
        } else {
            found = Some(n);
        }
    }
    let Some(n) = found else {
        cx.missing_node(
            SourceSpan::new(0.into(), 0),
            "primitives",
            "a primitives file",
        );
        return None;
    };
    cx.no_args(n, "primitives");
    cx.props(n, "`primitives` in an included file", &[]);
    let c = cx.expect_children(n, "primitives")?;
    lower_primitives_block(cx, c)
}

fn lower_primitives_block(cx: &mut NodeReader<'_>, doc: &KdlDocument) -> Option<Primitives> {
    let mut p = Primitives::default();
    let mut drng: Option<&KdlNode> = None;
    for n in doc.nodes() {
        let nm = name(n);
        if !PRIMITIVES_NODES.contains(&nm) {
            cx.unknown_node(n, "`primitives`", &PRIMITIVES_NODES);
            continue;
        }
        cx.no_children(n, nm);
        match nm {
            "hash" => {
                let props = cx.props(n, "`hash`", &["family"]);
                let family = match props.get("family") {
                    Some(e) => cx.expect_string(e, "family"),
                    None => {
                        cx.missing_prop(n, "family", "`hash`");
                        None
                    }
                };
                let syms = cx.string_args(n, "hash", 1);
                if let Some(family) = family {
                    for (symbol, _) in syms {
                        p.functions.push(PrimitiveFn {
                            symbol,
                            family: family.clone(),
                        });
                    }
                }
            }
            "drng" => {
                if let Some(first) = drng {
                    cx.duplicate_node(first, n, "`primitives`");
                    continue;
                }
                drng = Some(n);
                cx.props(n, "`drng`", &[]);
                p.drng = cx.one_string_arg(n, "drng").map(|(s, _)| s);
            }
            _ => {
                cx.props(n, &format!("`{nm}`"), &[]);
                let args = cx.string_args(n, nm, 1);
                let what = match nm {
                    "sources" => "primitives source",
                    "include" => "primitives include folder",
                    _ => "primitives header",
                };
                let vals: Vec<String> = args
                    .into_iter()
                    .filter(|(p, e)| check_root_path(cx, p, e, what))
                    .map(|(s, _)| s)
                    .collect();
                match nm {
                    "sources" => p.sources.extend(vals),
                    "include" => p.includes.extend(vals),
                    _ => p.headers.extend(vals),
                }
            }
        }
    }
    Some(p)
}
