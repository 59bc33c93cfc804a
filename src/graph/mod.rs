//! The step graph: one node per step and instance (and operation, for time and profile),
//! one per submission for `source` and `report`, edges from what a step needs to the step.
//!
//! Edges come from two places: the `needs` the pipeline declares, and the data a step
//! cannot run without (a KAT needs the object a build made, whatever `needs` says). Both are
//! edges of the same kind; `explain` and the dry run do not distinguish them.

mod export;

pub use export::{to_dot, to_json, to_mermaid, Format};

use std::collections::{BTreeSet, HashMap};

use globset::{Glob, GlobMatcher};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Bfs, Reversed};
use petgraph::Direction;

use crate::model::{Campaign, KindFacts, Op, StepKind, StepScope};

/// One schedulable step.
#[derive(Debug, Clone)]
pub struct Node {
    /// `<submission>/<instance>/<kind>[:<op>]` or `<submission>/<kind>`.
    pub id: String,
    pub kind: StepKind,
    /// Index into `Campaign::submissions`.
    pub submission: usize,
    /// Index into that submission's `instances`.
    pub instance: Option<usize>,
    pub op: Option<Op>,
    pub exclusive: bool,
}

/// The graph plus a lookup by id.
#[derive(Debug, Clone)]
pub struct Plan {
    pub graph: DiGraph<Node, ()>,
    pub by_id: HashMap<String, NodeIndex>,
}

/// Step id for a node.
pub fn step_id(sub: &str, instance: Option<&str>, kind: StepKind, op: Option<Op>) -> String {
    match (instance, op) {
        (Some(i), Some(op)) => format!("{sub}/{i}/{kind}:{op}"),
        (Some(i), None) => format!("{sub}/{i}/{kind}"),
        (None, _) => format!("{sub}/{kind}"),
    }
}

impl Plan {
    /// Expand the campaign into its step graph.
    pub fn build(campaign: &Campaign) -> Plan {
        let mut graph = DiGraph::new();
        let mut by_id = HashMap::new();
        // (submission, kind) -> nodes of that kind in that submission, with their instance/op.
        let mut nodes_of: HashMap<(usize, StepKind), Vec<NodeIndex>> = HashMap::new();

        for (si, sub) in campaign.submissions.iter().enumerate() {
            for spec in &campaign.steps {
                let mut add = |instance: Option<usize>, op: Option<Op>| {
                    let inst_id = instance.map(|i| sub.instances[i].id.as_str());
                    let id = step_id(&sub.id, inst_id, spec.kind, op);
                    let ix = graph.add_node(Node {
                        id: id.clone(),
                        kind: spec.kind,
                        submission: si,
                        instance,
                        op,
                        exclusive: spec.exclusive,
                    });
                    by_id.insert(id, ix);
                    nodes_of.entry((si, spec.kind)).or_default().push(ix);
                };
                match spec.kind.scope() {
                    StepScope::Campaign => {}
                    StepScope::Submission => add(None, None),
                    StepScope::Instance => {
                        (0..sub.instances.len()).for_each(|i| add(Some(i), None))
                    }
                    StepScope::Operation => {
                        for i in 0..sub.instances.len() {
                            for &op in &spec.params.ops {
                                add(Some(i), Some(op));
                            }
                        }
                    }
                }
            }
        }

        // Campaign-level steps (the index): one node, after everything of every submission.
        let mut campaign_nodes = Vec::new();
        if !campaign.submissions.is_empty() {
            for spec in campaign
                .steps
                .iter()
                .filter(|s| s.kind.scope() == StepScope::Campaign)
            {
                let id = spec.kind.name().to_string();
                let ix = graph.add_node(Node {
                    id: id.clone(),
                    kind: spec.kind,
                    submission: 0,
                    instance: None,
                    op: None,
                    exclusive: spec.exclusive,
                });
                by_id.insert(id, ix);
                campaign_nodes.push(ix);
            }
        }

        let mut edges = BTreeSet::new();
        for &t in &campaign_nodes {
            for s in graph.node_indices() {
                if graph[s].kind.scope() != StepScope::Campaign {
                    edges.insert((s, t));
                }
            }
        }
        for spec in &campaign.steps {
            let mut needs: Vec<StepKind> = spec.needs.clone();
            needs.extend_from_slice(spec.kind.table().data_needs);
            if spec.kind.table().collects {
                // A report renders whatever the submission measured.
                needs.extend(
                    campaign
                        .steps
                        .iter()
                        .map(|s| s.kind)
                        .filter(|k| !k.table().collects),
                );
            }
            for (si, _) in campaign.submissions.iter().enumerate() {
                let Some(targets) = nodes_of.get(&(si, spec.kind)) else {
                    continue;
                };
                for need in &needs {
                    let Some(sources) = nodes_of.get(&(si, *need)) else {
                        continue;
                    };
                    for &t in targets {
                        for &s in sources {
                            if s != t && related(&graph[s], &graph[t]) {
                                edges.insert((s, t));
                            }
                        }
                    }
                }
            }
        }
        cell_edges(campaign, &graph, &nodes_of, &mut edges);
        for (s, t) in edges {
            graph.add_edge(s, t, ());
        }
        Plan { graph, by_id }
    }

    /// Nodes whose id matches any of `patterns`, plus everything they depend on.
    /// `*` matches any run of characters, `/` included. An empty pattern list selects all.
    pub fn select(&self, patterns: &[String]) -> Result<BTreeSet<NodeIndex>, String> {
        if patterns.is_empty() {
            return Ok(self.graph.node_indices().collect());
        }
        let matchers = matchers(patterns)?;
        let mut selected = BTreeSet::new();
        let reversed = Reversed(&self.graph);
        for ix in self.graph.node_indices() {
            if matchers.iter().any(|m| m.is_match(&self.graph[ix].id)) {
                let mut bfs = Bfs::new(reversed, ix);
                while let Some(dep) = bfs.next(reversed) {
                    selected.insert(dep);
                }
            }
        }
        if selected.is_empty() {
            return Err(format!(
                "no step id matches {}; ids look like `ml-kem/ML-KEM-512-clean/kat` (see `ngcc-pipe list steps`)",
                patterns.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(selected)
    }

    /// Nodes in an order where every node comes after all it depends on; ties broken by
    /// insertion order (submission, step declaration, instance, op), so plans read naturally.
    pub fn execution_order(&self) -> Vec<NodeIndex> {
        let mut indegree: Vec<usize> = self
            .graph
            .node_indices()
            .map(|ix| {
                self.graph
                    .neighbors_directed(ix, Direction::Incoming)
                    .count()
            })
            .collect();
        let mut ready: BTreeSet<NodeIndex> = self
            .graph
            .node_indices()
            .filter(|ix| indegree[ix.index()] == 0)
            .collect();
        let mut order = Vec::with_capacity(indegree.len());
        while let Some(ix) = ready.pop_first() {
            order.push(ix);
            for next in self.graph.neighbors_directed(ix, Direction::Outgoing) {
                indegree[next.index()] -= 1;
                if indegree[next.index()] == 0 {
                    ready.insert(next);
                }
            }
        }
        order
    }

    /// Direct dependencies of a node.
    pub fn deps(&self, ix: NodeIndex) -> impl Iterator<Item = NodeIndex> + '_ {
        self.graph.neighbors_directed(ix, Direction::Incoming)
    }
}

/// Whether an edge between these two nodes of related kinds belongs in the graph: same
/// submission, same instance where both have one, same op where both have one.
/// `cells="best"` (time, profile): a node waits for the `count` of every cell of its
/// implementation, its own included, whose records choose the cell to measure. These edges
/// only order, they never block (a cell's failed count leaves that cell out of the choice;
/// see `run::scheduler`).
fn cell_edges(
    campaign: &Campaign,
    graph: &DiGraph<Node, ()>,
    nodes_of: &HashMap<(usize, StepKind), Vec<NodeIndex>>,
    edges: &mut BTreeSet<(NodeIndex, NodeIndex)>,
) {
    for spec in campaign.steps.iter().filter(|s| s.params.best_cell) {
        for (si, sub) in campaign.submissions.iter().enumerate() {
            let (Some(targets), Some(counts)) = (
                nodes_of.get(&(si, spec.kind)),
                nodes_of.get(&(si, StepKind::Count)),
            ) else {
                continue;
            };
            let implementation = |n: &Node| n.instance.map(|i| sub.instances[i].manifest_id());
            for &t in targets {
                for &c in counts {
                    let (tn, cn) = (&graph[t], &graph[c]);
                    // Every cell's count, its own too: a cell whose own count had not yet
                    // finished was timed as if it had none to compare.
                    if implementation(tn) == implementation(cn) {
                        edges.insert((c, t));
                    }
                }
            }
        }
    }
}

fn related(a: &Node, b: &Node) -> bool {
    a.submission == b.submission
        && (a.instance.is_none() || b.instance.is_none() || a.instance == b.instance)
        && (a.op.is_none() || b.op.is_none() || a.op == b.op)
}

/// Compile `--only`/`--force` patterns: `*` matches across `/`.
pub fn matchers(patterns: &[String]) -> Result<Vec<GlobMatcher>, String> {
    patterns
        .iter()
        .map(|p| {
            Glob::new(p)
                .map(|g| g.compile_matcher())
                .map_err(|e| format!("bad pattern `{p}`: {e}"))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::time::Duration;

    fn step(kind: StepKind, needs: &[StepKind], exclusive: bool) -> StepSpec {
        StepSpec {
            kind,
            needs: needs.to_vec(),
            exclusive,
            timeout: Duration::from_secs(60),
            params: StepParams {
                flags: (kind == StepKind::Build).then(|| "guide".to_string()),
                ops: vec![Op::Keygen, Op::Dec],
                ..StepParams::default()
            },
        }
    }

    /// A small campaign: one submission, `n` instances, the usual steps.
    pub(crate) fn campaign(n: usize) -> Campaign {
        use StepKind::*;
        let instances = (0..n)
            .map(|i| Instance {
                id: format!("K-{i}"),
                dir: format!("k{i}"),
                namespace: format!("K{i}_"),
                cflags: vec![],
                extra_sources: vec![],
                requires_cpu: vec![],
                exclude: vec![],
                libraries: vec![],
                kat_submitted: None,
                vars: BTreeMap::new(),
                origin: Default::default(),
                nist_category: None,
            })
            .collect();
        Campaign {
            pipeline_path: PathBuf::from("/p/x.kdl"),
            system: System {
                name: "x".into(),
                arch: "x86-64".into(),
                bench_cpu: 1,
                cc: "cc".into(),
                compilers: vec![],
                isolation: Isolation::Core,
                sandbox: SandboxPolicy::Preferred,
                role: Default::default(),
                target: Default::default(),
                executor: Default::default(),
            },
            flags: BTreeMap::from([(
                "guide".to_string(),
                FlagProfile {
                    name: "guide".into(),
                    flags: vec!["-O2".into()],
                },
            )]),
            outputs: PathBuf::from("/p/out"),
            steps: vec![
                step(Source, &[], false),
                step(Build, &[], false),
                step(Kat, &[Build], false),
                step(Time, &[Kat], true),
                step(Report, &[Kat, Time], false),
            ],
            submissions: vec![Submission {
                id: "s".into(),
                manifest_path: PathBuf::from("/p/s/manifest.kdl"),
                dir: PathBuf::from("/p/s"),
                meta: ReportMeta::default(),
                source: crate::model::Source::Path {
                    path: PathBuf::from("/p/s"),
                },
                primitives: Primitives::default(),
                kat: KatSettings {
                    rng: KatRng::Nist,
                    manifest: PathBuf::from("/p/s/kat.sha256"),
                    all_count: 100,
                    reference_dir: None,
                    submitted: false,
                },
                sizes: BTreeMap::new(),
                instances,
                ct_benign: Vec::new(),
                api: Default::default(),
            }],
        }
    }

    fn dep_ids(plan: &Plan, id: &str) -> Vec<String> {
        let mut v: Vec<String> = plan
            .deps(plan.by_id[id])
            .map(|d| plan.graph[d].id.clone())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn expands_per_instance_and_op() {
        let plan = Plan::build(&campaign(2));
        // source + report + 2 x (build, kat, 2 time ops)
        assert_eq!(plan.graph.node_count(), 2 + 2 * 4);
        assert_eq!(
            dep_ids(&plan, "s/K-1/time:dec"),
            vec!["s/K-1/build", "s/K-1/kat"]
        );
        assert_eq!(dep_ids(&plan, "s/K-0/build"), vec!["s/source"]);
        assert_eq!(dep_ids(&plan, "s/report").len(), 1 + 2 * 4);
    }

    #[test]
    fn order_respects_dependencies() {
        let plan = Plan::build(&campaign(3));
        let order = plan.execution_order();
        assert_eq!(order.len(), plan.graph.node_count());
        let pos: HashMap<NodeIndex, usize> =
            order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        for e in plan.graph.edge_indices() {
            let (a, b) = plan.graph.edge_endpoints(e).unwrap();
            assert!(
                pos[&a] < pos[&b],
                "{} before {}",
                plan.graph[a].id,
                plan.graph[b].id
            );
        }
    }

    #[test]
    fn index_comes_after_everything() {
        let mut c = campaign(2);
        c.steps
            .push(step(StepKind::Index, &[StepKind::Report], false));
        let plan = Plan::build(&c);
        let index = plan.by_id["index"];
        assert_eq!(plan.deps(index).count(), plan.graph.node_count() - 1);
        assert_eq!(plan.execution_order().last(), Some(&index));
        // The report does not wait for the index (no cycle).
        assert!(plan.deps(plan.by_id["s/report"]).all(|d| d != index));
    }

    #[test]
    fn select_pulls_in_dependencies() {
        let plan = Plan::build(&campaign(2));
        let sel = plan.select(&["*/K-1/kat".to_string()]).unwrap();
        let mut ids: Vec<&str> = sel.iter().map(|&i| plan.graph[i].id.as_str()).collect();
        ids.sort();
        assert_eq!(ids, vec!["s/K-1/build", "s/K-1/kat", "s/source"]);
        assert!(plan
            .select(&["nothing".to_string()])
            .unwrap_err()
            .contains("no step id matches"));
    }
}
