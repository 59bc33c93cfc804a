//! The provided primitives as the instance uses them: which provided symbols it
//! references, which family each belongs to, which instance objects are glue around a
//! provided family, and which family-named functions are the instance's own code (rules in
//! the [module doc](super)).

use std::collections::{BTreeMap, BTreeSet};

use super::reach::{Graph, Node};
use super::sources::family_of_symbol;
use super::SurveyInput;
use crate::record::OwnSymbol;

/// Provided symbols and the families they belong to.
pub(super) struct Provided<'a> {
    /// Global symbols the primitive objects define, and the declared primitive functions.
    defs: BTreeSet<&'a str>,
    /// Declared primitive functions: symbol -> family.
    declared_family: BTreeMap<&'a str, &'a str>,
    /// Provided symbols used: undefined in instance objects, defined by primitive objects,
    /// or declared primitives when no primitive objects are given.
    pub used: BTreeSet<String>,
}

impl<'a> Provided<'a> {
    pub fn new(graph: &'a Graph, input: &'a SurveyInput) -> Self {
        let defs: BTreeSet<&str> = graph
            .primitives()
            .iter()
            .flat_map(|o| {
                o.defined
                    .iter()
                    .filter(|d| d.global)
                    .map(|d| d.name.as_str())
            })
            .chain(input.primitives.iter().map(|p| p.symbol.as_str()))
            .collect();
        let used: BTreeSet<String> = graph
            .instance()
            .iter()
            .flat_map(|o| o.undefined.iter())
            .filter(|u| defs.contains(u.as_str()))
            .cloned()
            .collect();
        let declared_family: BTreeMap<&str, &str> = input
            .primitives
            .iter()
            .map(|p| (p.symbol.as_str(), p.family.as_str()))
            .collect();
        Provided {
            defs,
            declared_family,
            used,
        }
    }

    /// Whether `name` is a provided symbol.
    pub fn defines(&self, name: &str) -> bool {
        self.defs.contains(name)
    }

    /// The family of a provided symbol: declared, else guessed from its name.
    pub fn family(&self, s: &str) -> Option<String> {
        self.declared_family
            .get(s)
            .map(|f| f.to_string())
            .or_else(|| family_of_symbol(s).map(str::to_string))
    }
}

/// Per instance object, the provided families it is glue around: family -> the provided
/// symbol that shows it.
pub(super) type Glue = Vec<BTreeMap<String, String>>;

/// Glue: an instance object that references a provided symbol of family F drives the
/// provided F; its F-named functions and F-named source lines are glue, not an own
/// implementation (constants and S-boxes still count: see `NAME_MARKERS`).
pub(super) fn glue(graph: &Graph, provided: &Provided<'_>) -> Glue {
    let n_inst = graph.n_inst;
    let mut glue: Glue = graph
        .instance()
        .iter()
        .map(|o| {
            let mut m = BTreeMap::new();
            for u in o.undefined.iter().filter(|u| provided.defines(u)) {
                if let Some(f) = provided.family(u) {
                    m.entry(f).or_insert_with(|| u.clone());
                }
            }
            m
        })
        .collect();
    // ... and so is an object that calls such glue in another instance object
    // (ML-KEM avx2's poly.c calls fips202x4.c's shake256x4, which drives KeccakP1600times4).
    loop {
        let mut changed = false;
        for i in 0..n_inst {
            for u in &graph.objects[i].undefined {
                let Some(&j) = graph.globals.get(u) else {
                    continue;
                };
                if j >= n_inst || j == i {
                    continue;
                }
                let inherited: Vec<(String, String)> = glue[j]
                    .iter()
                    .filter(|(f, _)| !glue[i].contains_key(*f))
                    .map(|(f, s)| (f.clone(), s.clone()))
                    .collect();
                for (f, s) in inherited {
                    glue[i].insert(f, s);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    glue
}

/// Own symbols: family-named functions of instance objects that are not glue.
pub(super) fn own_symbols(
    graph: &Graph,
    input: &SurveyInput,
    roots: &[Node],
    reach: &BTreeSet<Node>,
    glue: &Glue,
) -> Vec<OwnSymbol> {
    let namespace = if input.namespace.is_empty() {
        roots
            .iter()
            .find_map(|(_, n)| n.find("crypto_kem_").map(|p| n[..p].to_string()))
            .unwrap_or_default()
    } else {
        input.namespace.clone()
    };
    let mut own = Vec::new();
    for (i, o) in graph.instance().iter().enumerate() {
        for d in o.defined.iter().filter(|d| d.function) {
            let bare = match d.name.strip_prefix(namespace.as_str()) {
                Some(rest) if !namespace.is_empty() => rest,
                _ => d.name.as_str(),
            };
            let Some(fam) = family_of_symbol(bare) else {
                continue;
            };
            if input.is_root(&d.name) || glue[i].contains_key(fam) {
                continue;
            }
            own.push(OwnSymbol {
                name: d.name.clone(),
                family: fam.to_string(),
                referenced: reach.contains(&(i, d.name.clone())),
            });
        }
    }
    own
}
