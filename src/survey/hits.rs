//! Source hits refined with the objects: a hit in a compiled file is reachable only when
//! the function enclosing it (or, failing that, its object; for a header, a live includer)
//! is; name-only hits in glue objects are marked as glue.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::provided::Glue;
use super::reach::{Graph, Node};
use super::sources::{abs, enclosing_function, family_title, includers, is_header};
use super::SurveyInput;
use crate::record::SourceHit;

/// Refines `hits[k].reachable` (and its note) in place; returns, per hit, whether it is
/// glue around a provided primitive. `weak[k]`: the hit's marker is a name.
pub(super) fn refine(
    hits: &mut [SourceHit],
    weak: &[bool],
    input: &SurveyInput,
    graph: &Graph,
    reach: &BTreeSet<Node>,
    glue: &Glue,
) -> Vec<bool> {
    let root = &input.root;
    let obj_of: BTreeMap<PathBuf, usize> = input
        .instance_objects
        .iter()
        .enumerate()
        .map(|(i, (src, _))| (abs(root, src), i))
        .collect();
    let object_live = |i: usize| reach.iter().any(|(o, _)| *o == i);
    let compiled_abs: BTreeSet<PathBuf> = input.compiled.iter().map(|c| abs(root, c)).collect();
    let mut is_glue = vec![false; hits.len()];
    for (k, hit) in hits.iter_mut().enumerate().filter(|(_, h)| h.reachable) {
        let path = root.join(&hit.file);
        let mut live_objects = Vec::new();
        if let Some(&oi) = obj_of.get(&path) {
            let enclosing = enclosing_function(&path, hit.line as usize);
            let live = match enclosing
                .as_deref()
                .filter(|f| graph.objects[oi].defined.iter().any(|d| d.name == *f))
            {
                Some(f) => reach.contains(&(oi, f.to_string())),
                None => object_live(oi),
            };
            if live {
                live_objects.push(oi);
            } else {
                hit.reachable = false;
                hit.note = Some(match enclosing {
                    Some(f) => format!("`{f}` is not reachable in the built object"),
                    None => "not reachable in the built object".to_string(),
                });
            }
        } else if is_header(&path) && !input.instance_objects.is_empty() {
            live_objects = includers(&path, &compiled_abs)
                .iter()
                .filter_map(|inc| obj_of.get(inc).copied())
                .filter(|&oi| object_live(oi))
                .collect();
            if live_objects.is_empty() {
                hit.reachable = false;
                hit.note = Some("not reachable in the built object (no live includer)".into());
            }
        }
        if hit.reachable && weak[k] {
            if let Some(sym) = live_objects
                .iter()
                .find_map(|&oi| glue[oi].get(&hit.family))
            {
                is_glue[k] = true;
                hit.note = Some(format!(
                    "glue around the provided {} (`{sym}`)",
                    family_title(&hit.family)
                ));
            }
        }
    }
    is_glue
}
