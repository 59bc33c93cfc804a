//! Symbols and relocations of one object file ([`read_object_symbols`], object crate):
//! the raw material of the reachability graph.

use super::SurveyError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget, SymbolKind,
};

/// A symbol defined in an object file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinedSymbol {
    pub name: String,
    pub global: bool,
    /// Code (`true`) or data.
    pub function: bool,
    /// Name of the section holding it.
    pub section: String,
    pub address: u64,
    pub size: u64,
}

/// What a relocation points at.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum RelocTarget {
    Symbol(String),
    Section(String),
}

/// A relocation attributed to the defined symbol whose bytes contain it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelocEdge {
    /// The containing symbol (`None` when no symbol covers the offset).
    pub from: Option<String>,
    pub to: RelocTarget,
}

/// Symbols and references of one object file (relocatable `.o` or shared object).
#[derive(Debug, Clone, Default)]
pub struct ObjSymbols {
    pub defined: Vec<DefinedSymbol>,
    /// Undefined symbols, sorted and unique.
    pub undefined: Vec<String>,
    /// Every symbol name a relocation (static or dynamic) refers to.
    pub referenced: BTreeSet<String>,
    /// Static relocations of code and data sections (none for a shared object's
    /// already-resolved local calls).
    pub edges: Vec<RelocEdge>,
}

/// Read the symbol table and relocations of an object file.
pub fn read_object_symbols(object: &Path) -> Result<ObjSymbols, SurveyError> {
    let data = std::fs::read(object).map_err(|source| SurveyError::Read {
        path: object.to_path_buf(),
        source,
    })?;
    let file = object::File::parse(&*data).map_err(|source| SurveyError::NotObject {
        path: object.to_path_buf(),
        source,
    })?;
    let mut out = ObjSymbols::default();
    let mut undefined = BTreeSet::new();
    // Defined symbols per section index, for attributing relocations.
    let mut by_section: BTreeMap<usize, Vec<(u64, u64, String)>> = BTreeMap::new();
    let mut seen_defined = BTreeSet::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() || matches!(sym.kind(), SymbolKind::Section | SymbolKind::File) {
            continue;
        }
        if sym.is_undefined() {
            undefined.insert(name.to_string());
            continue;
        }
        let Some(index) = sym.section_index() else {
            continue;
        };
        let section = file
            .section_by_index(index)
            .ok()
            .and_then(|s| s.name().ok().map(str::to_string))
            .unwrap_or_default();
        if !seen_defined.insert((name.to_string(), sym.address())) {
            continue;
        }
        by_section
            .entry(index.0)
            .or_default()
            .push((sym.address(), sym.size(), name.to_string()));
        out.defined.push(DefinedSymbol {
            name: name.to_string(),
            global: sym.is_global(),
            function: sym.kind() == SymbolKind::Text,
            section,
            address: sym.address(),
            size: sym.size(),
        });
    }
    let target_name = |t: RelocationTarget, dynamic: bool| -> Option<RelocTarget> {
        match t {
            RelocationTarget::Symbol(idx) => {
                let sym = if dynamic {
                    file.dynamic_symbol_table()?.symbol_by_index(idx).ok()?
                } else {
                    file.symbol_by_index(idx).ok()?
                };
                if sym.kind() == SymbolKind::Section {
                    let sec = file.section_by_index(sym.section_index()?).ok()?;
                    return Some(RelocTarget::Section(sec.name().ok()?.to_string()));
                }
                let name = sym.name().ok()?;
                (!name.is_empty()).then(|| RelocTarget::Symbol(name.to_string()))
            }
            RelocationTarget::Section(idx) => {
                let sec = file.section_by_index(idx).ok()?;
                Some(RelocTarget::Section(sec.name().ok()?.to_string()))
            }
            _ => None,
        }
    };
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        if name.starts_with(".debug")
            || name.starts_with(".eh_frame")
            || name.starts_with(".note")
            || name == ".comment"
        {
            continue;
        }
        let syms = by_section.get(&section.index().0);
        for (offset, reloc) in section.relocations() {
            let Some(to) = target_name(reloc.target(), false) else {
                continue;
            };
            // Relocatable objects: symbol addresses are section offsets.
            let from = syms.and_then(|v| {
                v.iter()
                    .find(|(a, s, _)| offset >= *a && offset < a + (*s).max(1))
                    .map(|(_, _, n)| n.clone())
            });
            if let RelocTarget::Symbol(n) = &to {
                out.referenced.insert(n.clone());
            }
            out.edges.push(RelocEdge { from, to });
        }
    }
    if let Some(dynrel) = file.dynamic_relocations() {
        for (_, reloc) in dynrel {
            if let Some(RelocTarget::Symbol(n)) = target_name(reloc.target(), true) {
                out.referenced.insert(n);
            }
        }
    }
    out.undefined = undefined.into_iter().collect();
    Ok(out)
}
