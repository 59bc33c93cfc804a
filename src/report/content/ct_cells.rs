//! The constant-time check across the build matrix: when an implementation is built as
//! several cells (compilers × flag profiles, [`crate::model::COMPILER_VAR`] and
//! [`crate::model::PROFILE_VAR`]), which cells each memcheck location and each
//! variable-latency instruction appears in. The same code compiled two ways lands at
//! different addresses, so a location is keyed by its function and source line. A location
//! that every cell of one compiler has and no cell of another is called out as introduced
//! by that compiler at those flags: the source is the same, the compiler added it (the
//! KyberSlash class of finding).

use std::collections::{BTreeMap, BTreeSet};

use crate::ct::latency::base_name;
use crate::model::{Op, StepKind};
use crate::record::ct::CtData;
use crate::record::{Status, StepData};

use super::listed;
use crate::report::doc::{code, Doc, Table};
use crate::report::view::{CampaignView, InstanceView, SubmissionView};

/// One cell of an implementation: its compiler (`None`: the campaign's one) and flag
/// profile, as the report names them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Cell {
    compiler: Option<String>,
    profile: String,
}

impl Cell {
    fn of(inst: &InstanceView, view: &CampaignView) -> Cell {
        Cell {
            compiler: inst.compiler().map(str::to_string),
            profile: inst
                .flags_profile(&view.build_flags)
                .unwrap_or_else(|| "the build's flags".to_string()),
        }
    }

    fn name(&self) -> String {
        match &self.compiler {
            Some(c) => format!("{c} at {}", self.profile),
            None => self.profile.clone(),
        }
    }
}

/// Where something was found: per operation, the cells that checked it and the cells that
/// have it.
#[derive(Default)]
struct Presence<K: Ord> {
    checked: BTreeMap<Op, BTreeSet<Cell>>,
    found: BTreeMap<K, BTreeMap<Op, BTreeSet<Cell>>>,
}

impl<K: Ord + Clone> Presence<K> {
    fn checked(&mut self, op: Op, cell: &Cell) {
        self.checked.entry(op).or_default().insert(cell.clone());
    }

    fn found(&mut self, key: K, op: Op, cell: &Cell) {
        self.found
            .entry(key)
            .or_default()
            .entry(op)
            .or_default()
            .insert(cell.clone());
    }

    /// One row per key and distinct (found, not found) pair, with the operations that share
    /// it; rows where every checking cell has it are kept (they say the code has it, not
    /// the compiler).
    fn rows(&self) -> Vec<Row<'_, K>> {
        let mut rows = Vec::new();
        for (key, by_op) in &self.found {
            let mut groups: BTreeMap<(BTreeSet<Cell>, BTreeSet<Cell>), Vec<Op>> = BTreeMap::new();
            for (op, have) in by_op {
                let missing = self.checked[op].difference(have).cloned().collect();
                groups.entry((have.clone(), missing)).or_default().push(*op);
            }
            for ((have, missing), ops) in groups {
                rows.push(Row {
                    key,
                    ops,
                    have,
                    missing,
                });
            }
        }
        rows
    }
}

struct Row<'k, K> {
    key: &'k K,
    ops: Vec<Op>,
    have: BTreeSet<Cell>,
    missing: BTreeSet<Cell>,
}

impl<K> Row<'_, K> {
    fn ops(&self) -> String {
        self.ops
            .iter()
            .map(|o| o.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What a location's cells say about where it comes from: `introduced` is the verb for
/// a memcheck location ("introduced by"), `kept` for an instruction the source spells
/// (a division the other compiler turns into a multiplication).
fn reading(have: &BTreeSet<Cell>, missing: &BTreeSet<Cell>, verb: &str) -> String {
    if missing.is_empty() {
        return "in every cell: the code has it".to_string();
    }
    let compilers_with: BTreeSet<_> = have.iter().map(|c| &c.compiler).collect();
    let other_compiler_checked = missing
        .iter()
        .any(|c| !compilers_with.contains(&c.compiler));
    match compilers_with.iter().next() {
        Some(Some(compiler)) if compilers_with.len() == 1 && other_compiler_checked => {
            let profiles: BTreeSet<_> = have.iter().map(|c| code(&c.profile)).collect();
            format!(
                "{verb} by {} at {}: no cell of another compiler has it",
                code(compiler),
                profiles.into_iter().collect::<Vec<_>>().join(", ")
            )
        }
        _ => format!(
            "depends on the build: found at {}, not at {}",
            names(have),
            names(missing)
        ),
    }
}

fn names(cells: &BTreeSet<Cell>) -> String {
    cells.iter().map(Cell::name).collect::<Vec<_>>().join(", ")
}

/// The implementations built as two or more cells that have `ct` records, with their
/// checked cells' data.
fn implementations<'v>(
    view: &CampaignView,
    sub: &'v SubmissionView,
) -> BTreeMap<&'v str, Vec<(Cell, Op, &'v CtData)>> {
    let mut by_impl: BTreeMap<&str, Vec<(Cell, Op, &CtData)>> = BTreeMap::new();
    for inst in listed(sub).filter(|i| i.is_cell()) {
        let cell = Cell::of(inst, view);
        for (op, r) in inst.ops(StepKind::Ct) {
            if let Some(Some(StepData::Ct(d))) =
                r.filter(|r| r.status == Status::Ok).map(|r| &r.data)
            {
                by_impl
                    .entry(inst.manifest_id())
                    .or_default()
                    .push((cell.clone(), op, d));
            }
        }
    }
    by_impl.retain(|_, checked| {
        checked
            .iter()
            .map(|(c, _, _)| c)
            .collect::<BTreeSet<_>>()
            .len()
            > 1
    });
    by_impl
}

/// The body's cross-cell part of the constant-time section: per implementation built
/// several ways, each memcheck location and variable-latency instruction with the cells
/// that have it. Nothing when no implementation has two checked cells.
pub(super) fn across_cells(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    let by_impl = implementations(view, sub);
    if by_impl.is_empty() {
        return;
    }
    doc.h(3, "Across the build matrix");
    doc.p(
        "The same source compiled by each compiler at each flag profile (the cells of an \
         implementation). A location is keyed by its function and source line, so one row is \
         the same code in several cells. A location that only one compiler's cells have is \
         introduced by that compiler at those flags: the other compiler built the same source \
         without it. An instruction only one compiler's cells have was kept by it (a division \
         the source spells, which the other compiler turned into a multiplication).",
    );
    let mut places = Table::new(&[
        "implementation",
        "operations",
        "function",
        "location",
        "found in",
        "not found in",
        "reading",
    ]);
    let mut latency = Table::new(&[
        "implementation",
        "operations",
        "function",
        "location",
        "instruction",
        "found in",
        "not found in",
        "reading",
    ]);
    for (id, checked) in &by_impl {
        let mut locations: Presence<(String, String)> = Presence::default();
        let mut benign: BTreeMap<(String, String), String> = BTreeMap::new();
        let mut instructions: Presence<(String, String, String)> = Presence::default();
        for (cell, op, d) in checked {
            locations.checked(*op, cell);
            for f in &d.findings {
                let key = (f.function.clone(), f.location());
                if let Some(reason) = &f.benign {
                    benign.insert(key.clone(), reason.clone());
                }
                locations.found(key, *op, cell);
            }
            let Some(scan) = d.latency.as_ref().and_then(|l| l.scanned()) else {
                continue;
            };
            instructions.checked(*op, cell);
            for v in &scan.instructions {
                let function = base_name(&v.function).to_string();
                instructions.found((function, v.location(), v.mnemonic.clone()), *op, cell);
            }
        }
        for row in locations.rows() {
            let (function, location) = row.key;
            let mut said = reading(&row.have, &row.missing, "introduced");
            if let Some(reason) = benign.get(row.key) {
                said = format!("declared benign ({reason}); {said}");
            }
            places.row(vec![
                code(id),
                row.ops(),
                code(function),
                location.clone(),
                names(&row.have),
                names(&row.missing),
                said,
            ]);
        }
        for row in instructions.rows() {
            let (function, location, mnemonic) = row.key;
            latency.row(vec![
                code(id),
                row.ops(),
                code(function),
                location.clone(),
                code(mnemonic),
                names(&row.have),
                names(&row.missing),
                reading(&row.have, &row.missing, "kept"),
            ]);
        }
    }
    if places.rows.is_empty() {
        doc.p("memcheck found no location in any cell.");
    } else {
        doc.p("memcheck's locations by cell:");
        doc.table(places);
    }
    if latency.rows.is_empty() {
        doc.p("The variable-latency scan found no instruction in any scanned cell.");
    } else {
        doc.p("Variable-latency instructions by cell (keyed by function, line and mnemonic):");
        doc.table(latency);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(compiler: &str, profile: &str) -> Cell {
        Cell {
            compiler: Some(compiler.to_string()),
            profile: profile.to_string(),
        }
    }

    fn set(cells: &[Cell]) -> BTreeSet<Cell> {
        cells.iter().cloned().collect()
    }

    #[test]
    fn a_location_one_compiler_alone_has_is_introduced_by_it() {
        let have = set(&[cell("clang-16", "Os"), cell("clang-16", "O3")]);
        let missing = set(&[cell("gcc", "Os"), cell("gcc", "O3")]);
        assert_eq!(
            reading(&have, &missing, "introduced"),
            "introduced by `clang-16` at `O3`, `Os`: no cell of another compiler has it"
        );
        // Clangover: clang at -Os only, its other profile and gcc at both without it.
        let have = set(&[cell("clang-16", "os")]);
        let missing = set(&[
            cell("clang-16", "guide"),
            cell("gcc", "os"),
            cell("gcc", "guide"),
        ]);
        assert_eq!(
            reading(&have, &missing, "introduced"),
            "introduced by `clang-16` at `os`: no cell of another compiler has it"
        );
    }

    #[test]
    fn a_location_in_some_profiles_of_both_compilers_depends_on_the_build() {
        let have = set(&[cell("clang-16", "Os"), cell("gcc", "Os")]);
        let missing = set(&[cell("gcc", "O3")]);
        assert_eq!(
            reading(&have, &missing, "introduced"),
            "depends on the build: found at clang-16 at Os, gcc at Os, not at gcc at O3"
        );
        // One compiler only, several profiles: the flags, not another compiler, tell.
        let have = set(&[cell("gcc", "Os")]);
        let missing = set(&[cell("gcc", "O3")]);
        assert!(reading(&have, &missing, "kept").starts_with("depends on the build"));
        assert_eq!(
            reading(&have, &BTreeSet::new(), "kept"),
            "in every cell: the code has it"
        );
    }

    #[test]
    fn rows_group_operations_that_share_their_cells() {
        let mut p: Presence<&str> = Presence::default();
        let (g, c) = (cell("gcc", "O3"), cell("clang-16", "O3"));
        for op in [Op::Enc, Op::Dec] {
            p.checked(op, &g);
            p.checked(op, &c);
            p.found("poly_tomsg", op, &c);
        }
        p.found("poly_tomsg", Op::Enc, &g);
        let rows = p.rows();
        assert_eq!(rows.len(), 2);
        let dec = rows.iter().find(|r| r.ops == [Op::Dec]).unwrap();
        assert_eq!(dec.have, set(std::slice::from_ref(&c)));
        assert_eq!(dec.missing, set(std::slice::from_ref(&g)));
        let enc = rows.iter().find(|r| r.ops == [Op::Enc]).unwrap();
        assert!(enc.missing.is_empty());
    }
}
