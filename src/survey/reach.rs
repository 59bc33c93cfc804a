//! Reachability: the graph of symbols across the instance's and the primitives' objects,
//! its roots (the instance's API functions) and what they reach (rules in the
//! [module doc](super)).

use std::collections::{BTreeMap, BTreeSet};

use super::objects::{read_object_symbols, ObjSymbols, RelocTarget};
use super::{SurveyError, SurveyInput};

/// Node of the reachability graph: (object index, symbol name).
pub(super) type Node = (usize, String);

/// Symbols of every object: the instance's first, then the primitives'.
pub(super) struct Graph {
    pub objects: Vec<ObjSymbols>,
    /// How many of `objects` are the instance's (the rest are the primitives').
    pub n_inst: usize,
    /// Global definitions: name -> object index (first definition wins, like the linker).
    pub globals: BTreeMap<String, usize>,
}

impl Graph {
    /// Reads the instance's objects, then the primitives'.
    pub fn read(input: &SurveyInput) -> Result<Graph, SurveyError> {
        let n_inst = input.instance_objects.len();
        let mut objects = Vec::new();
        for (_, o) in &input.instance_objects {
            objects.push(read_object_symbols(o)?);
        }
        for o in &input.primitive_objects {
            objects.push(read_object_symbols(o)?);
        }
        let mut globals = BTreeMap::new();
        for (i, o) in objects.iter().enumerate() {
            for d in o.defined.iter().filter(|d| d.global) {
                globals.entry(d.name.clone()).or_insert(i);
            }
        }
        Ok(Graph {
            objects,
            n_inst,
            globals,
        })
    }

    /// The instance's objects.
    pub fn instance(&self) -> &[ObjSymbols] {
        &self.objects[..self.n_inst]
    }

    /// The primitives' objects.
    pub fn primitives(&self) -> &[ObjSymbols] {
        &self.objects[self.n_inst..]
    }

    /// The roots: global functions of the instance objects that are API symbols.
    pub fn roots(&self, input: &SurveyInput) -> Result<Vec<Node>, SurveyError> {
        let roots: Vec<Node> = self
            .instance()
            .iter()
            .enumerate()
            .flat_map(|(i, o)| {
                o.defined
                    .iter()
                    .filter(|d| d.global && d.function && input.is_root(&d.name))
                    .map(move |d| (i, d.name.clone()))
            })
            .collect();
        if roots.is_empty() && self.n_inst > 0 {
            return Err(if input.api_symbols.is_empty() {
                SurveyError::NoApi
            } else {
                SurveyError::NoRoots(input.api_symbols.clone())
            });
        }
        Ok(roots)
    }

    fn resolve(&self, from_obj: usize, name: &str) -> Option<Node> {
        let o = &self.objects[from_obj];
        if o.defined.iter().any(|d| d.name == name && !d.global) {
            return Some((from_obj, name.to_string()));
        }
        if o.defined.iter().any(|d| d.name == name && d.global) {
            return Some((from_obj, name.to_string()));
        }
        self.globals.get(name).map(|&i| (i, name.to_string()))
    }

    pub fn reachable(&self, roots: &[Node]) -> BTreeSet<Node> {
        let mut seen: BTreeSet<Node> = BTreeSet::new();
        let mut todo: Vec<Node> = roots.to_vec();
        while let Some(node) = todo.pop() {
            if !seen.insert(node.clone()) {
                continue;
            }
            let (oi, name) = &node;
            let obj = &self.objects[*oi];
            let section = obj
                .defined
                .iter()
                .find(|d| &d.name == name)
                .map(|d| d.section.clone());
            // Static functions beside it in the same section (calls without relocations).
            if let Some(sec) = &section {
                for d in &obj.defined {
                    if !d.global && d.function && &d.section == sec {
                        todo.push((*oi, d.name.clone()));
                    }
                }
            }
            for e in obj.edges.iter().filter(|e| e.from.as_ref() == Some(name)) {
                match &e.to {
                    RelocTarget::Symbol(t) => {
                        if let Some(n) = self.resolve(*oi, t) {
                            todo.push(n);
                        }
                    }
                    RelocTarget::Section(sec) => {
                        for d in obj.defined.iter().filter(|d| &d.section == sec) {
                            todo.push((*oi, d.name.clone()));
                        }
                    }
                }
            }
        }
        seen
    }
}
