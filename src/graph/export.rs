//! Graph exports: Graphviz dot, Mermaid and JSON, of the full graph (or a selection of it)
//! or of the step-level view that collapses instances and operations into one node per kind.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use petgraph::graph::NodeIndex;
use serde::Serialize;

use super::Plan;

/// Output format of `ngcc-pipe graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Dot,
    Mermaid,
    Json,
}

#[derive(Serialize)]
struct View {
    nodes: Vec<ViewNode>,
    edges: Vec<(usize, usize)>,
}

#[derive(Serialize)]
struct ViewNode {
    id: String,
    kind: String,
    exclusive: bool,
    /// How many steps this node stands for (1 in the full view).
    count: usize,
}

/// Build the view: the selected nodes, or (step level) one node per kind.
fn view(plan: &Plan, selected: &BTreeSet<NodeIndex>, step_level: bool) -> View {
    let key = |ix: NodeIndex| -> String {
        let n = &plan.graph[ix];
        if step_level {
            n.kind.name().to_string()
        } else {
            n.id.clone()
        }
    };
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut nodes: Vec<ViewNode> = Vec::new();
    for &ix in &plan.execution_order() {
        if !selected.contains(&ix) {
            continue;
        }
        let k = key(ix);
        match index.get(&k) {
            Some(&i) => nodes[i].count += 1,
            None => {
                let n = &plan.graph[ix];
                index.insert(k.clone(), nodes.len());
                nodes.push(ViewNode {
                    id: k,
                    kind: n.kind.name().to_string(),
                    exclusive: n.exclusive,
                    count: 1,
                });
            }
        }
    }
    let mut edges = BTreeSet::new();
    for e in plan.graph.edge_indices() {
        let (a, b) = plan.graph.edge_endpoints(e).expect("edge has endpoints");
        if selected.contains(&a) && selected.contains(&b) {
            let (ia, ib) = (index[&key(a)], index[&key(b)]);
            if ia != ib {
                edges.insert((ia, ib));
            }
        }
    }
    View {
        nodes,
        edges: edges.into_iter().collect(),
    }
}

fn label(n: &ViewNode) -> String {
    let mut l = n.id.clone();
    if n.count > 1 {
        let _ = write!(l, " (x{})", n.count);
    }
    if n.exclusive {
        l.push_str(" [exclusive]");
    }
    l
}

fn quote_dot(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Graphviz dot.
pub fn to_dot(plan: &Plan, selected: &BTreeSet<NodeIndex>, step_level: bool) -> String {
    let v = view(plan, selected, step_level);
    let mut out = String::from(
        "digraph ngcc {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for (i, n) in v.nodes.iter().enumerate() {
        let style = if n.exclusive {
            ", style=filled, fillcolor=\"#ffe0b0\""
        } else {
            ""
        };
        let _ = writeln!(out, "  n{i} [label={}{style}];", quote_dot(&label(n)));
    }
    for (a, b) in &v.edges {
        let _ = writeln!(out, "  n{a} -> n{b};");
    }
    out.push_str("}\n");
    out
}

/// Mermaid flowchart.
pub fn to_mermaid(plan: &Plan, selected: &BTreeSet<NodeIndex>, step_level: bool) -> String {
    let v = view(plan, selected, step_level);
    let mut out = String::from("flowchart LR\n");
    for (i, n) in v.nodes.iter().enumerate() {
        let text = label(n).replace('"', "#quot;");
        if n.exclusive {
            let _ = writeln!(out, "  n{i}[[\"{text}\"]]");
        } else {
            let _ = writeln!(out, "  n{i}[\"{text}\"]");
        }
    }
    for (a, b) in &v.edges {
        let _ = writeln!(out, "  n{a} --> n{b}");
    }
    out
}

/// JSON: `{"nodes": [{id, kind, exclusive, count}], "edges": [[from, to]]}`.
pub fn to_json(plan: &Plan, selected: &BTreeSet<NodeIndex>, step_level: bool) -> String {
    let mut s = serde_json::to_string_pretty(&view(plan, selected, step_level))
        .expect("graph view serializes");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::super::tests::campaign;
    use super::*;

    #[test]
    fn step_level_collapses_instances() {
        let plan = Plan::build(&campaign(3));
        let all = plan.select(&[]).unwrap();
        let dot = to_dot(&plan, &all, true);
        assert!(dot.contains("label=\"build (x3)\""), "{dot}");
        assert!(dot.contains("label=\"time (x6) [exclusive]\""), "{dot}");
        // source -> build -> kat -> time, build -> time, and report <- source, build, kat, time
        assert_eq!(dot.matches("->").count(), 8, "{dot}");
    }

    #[test]
    fn formats_name_every_selected_node() {
        let plan = Plan::build(&campaign(1));
        let all = plan.select(&[]).unwrap();
        let mermaid = to_mermaid(&plan, &all, false);
        assert!(
            mermaid.contains("[[\"s/K-0/time:keygen [exclusive]\"]]"),
            "{mermaid}"
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&plan, &all, false)).unwrap();
        assert_eq!(
            json["nodes"].as_array().unwrap().len(),
            plan.graph.node_count()
        );
    }
}
