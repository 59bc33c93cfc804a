//! The content of the reports, section by section, as format-neutral [`Doc`]s.
//!
//! [`submission_doc`] follows the seed reports (`shared/seeds/`): title, intro, sections
//! 1-6, symmetric primitives, constant-time check, 7 raw evidence index, then the
//! constant-time appendix ([`ct`]: locations, instructions, disassembly). [`index_doc`] is
//! the campaign index.
//! This file holds the shared helpers and section 1; sections 2-6 are in [`environment`],
//! [`kat`], [`performance`] and [`resources`], the symmetric-primitives section in
//! [`primitives`], the raw evidence index in [`evidence`], the campaign index in [`index`]
//! (with [`categories`]). [`super::doc`] is the document model these are written in.
//! Links are relative to the folder the rendered file sits in (`reports/` or `site/`, both
//! one level below the system folder); links to other reports end in `.md` and the HTML
//! renderer rewrites them to `.html`.

mod appendix;
mod categories;
mod counts;
mod ct;
mod ct_cells;
mod environment;
mod evidence;
mod index;
mod kat;
mod matrix;
mod performance;
mod primitives;
mod profiles;
mod resources;
mod status;

pub use index::{index_doc, other_system_table, systems_table, this_system_table};

use std::collections::BTreeMap;

use crate::model::StepKind;
use crate::record::{KatStatus, Status};

use super::doc::{code, link, Doc, Table};
pub(super) use super::format::status_text;
use super::format::{self as fmt, DASH};
use super::results;
use super::view::{self, CampaignView, SubmissionView};

const UNKNOWN: &str = "unknown";

pub(super) fn or_unknown(v: Option<&str>) -> String {
    v.map(str::to_string).unwrap_or_else(|| UNKNOWN.to_string())
}

/// One line saying why a section is empty, or `None` when some record exists.
pub(super) fn did_not_run(
    view: &CampaignView,
    kind: StepKind,
    any: bool,
    what: &str,
) -> Option<String> {
    if any {
        None
    } else if !view.declared.contains(&kind) {
        Some(format!(
            "Not measured: the pipeline has no {} step ({what}).",
            code(kind.name())
        ))
    } else {
        Some(format!(
            "The {} step did not run for this submission: no records ({what}).",
            code(kind.name())
        ))
    }
}

/// The reason shared by timing records of an emulated system ("emulated (qemu-user):
/// timing needs a native aarch64 machine"), when the submission's time steps say so.
pub(super) fn emulated(sub: &SubmissionView) -> Option<String> {
    sub.instances
        .iter()
        .flat_map(|i| i.ops(StepKind::Time))
        .filter_map(|(_, r)| r?.reason.clone())
        .find(|why| why.starts_with("emulated ("))
}

/// Footnote numbering deduplicated by text.
#[derive(Default)]
pub(super) struct Footnotes {
    texts: Vec<String>,
}

impl Footnotes {
    fn mark(&mut self, text: String) -> String {
        let n = match self.texts.iter().position(|t| *t == text) {
            Some(i) => i + 1,
            None => {
                self.texts.push(text);
                self.texts.len()
            }
        };
        format!("[{n}]")
    }

    fn write(self, doc: &mut Doc) {
        for (i, t) in self.texts.into_iter().enumerate() {
            doc.p(format!("[{}] {}", i + 1, t));
        }
    }
}

pub(super) fn sentence(s: &str) -> String {
    let s = s.trim();
    if s.ends_with('.') || s.ends_with('!') || s.ends_with('?') {
        s.to_string()
    } else {
        format!("{s}.")
    }
}

/// Breadcrumb with the system switch ("system: x86_1 · arm_1").
pub(super) fn breadcrumb(view: &CampaignView, sub: Option<&str>) -> String {
    let names = view.system_names();
    let switch: Vec<String> = names
        .iter()
        .map(|n| {
            if *n == view.system {
                n.clone()
            } else {
                let has_sub = |s: &str| {
                    view.other_systems
                        .iter()
                        .any(|r| r.system == *n && r.submissions.iter().any(|x| x.id == s))
                };
                let target = match sub {
                    Some(s) if has_sub(s) => format!("../../{n}/reports/{s}.md"),
                    _ => format!("../../{n}/reports/index.md"),
                };
                link(n, &target)
            }
        })
        .collect();
    let mut s = format!(
        "Performance measurements › {}",
        link(&view.system, "index.md")
    );
    if let Some(sub) = sub {
        s.push_str(&format!(" › {sub}"));
    }
    s.push_str(&format!(" · system: {}", switch.join(" · ")));
    s
}

/// The share of the hash/XOF families alone: the share of all provided families (each
/// counted once when nested) less the ciphers' shares.
pub(super) fn hash_only(all: f64, ciphers: &[f64]) -> f64 {
    (all - ciphers.iter().sum::<f64>()).max(0.0)
}

/// The instances that ran on this machine (not [`view::InstanceView::unsupported`]): the
/// body's tables list these; the unsupported ones are named once, in section 1.
pub(super) fn listed(sub: &SubmissionView) -> impl Iterator<Item = &view::InstanceView> {
    sub.instances.iter().filter(|i| i.unsupported().is_none())
}

/// How a report names its submission: its id and algorithm, as the reference reports do
/// (`kem-33 QUBE`); the algorithm alone where the id only spells it another way (`ml-kem`,
/// ML-KEM), and the id alone where it already ends with it (`CRYSTALS-Kyber`, not
/// `CRYSTALS-Kyber Kyber`). Letters compared without case, other characters left out.
pub(super) fn named(sub: &SubmissionView) -> String {
    name_of(&sub.id, &sub.meta.algorithm)
}

/// [`named`] of a submission id and its algorithm.
fn name_of(id: &str, algorithm: &str) -> String {
    let fold = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    let (folded_id, folded) = (fold(id), fold(algorithm));
    if folded.is_empty() || (folded_id.ends_with(&folded) && folded_id != folded) {
        id.to_string()
    } else if folded_id == folded {
        algorithm.to_string()
    } else {
        format!("{id} {algorithm}")
    }
}

/// The per-submission report body (`reports/<sub>.md`): the seed's sections in the seed's
/// order and columns, one headline figure per operation; the detail a specialist wants is
/// in [`appendix_doc`], which `appendix_href` links to.
pub fn submission_doc(view: &CampaignView, sub: &SubmissionView, appendix_href: &str) -> Doc {
    let mut doc = Doc {
        title: format!("{} — {}", named(sub), view.system),
        blocks: Vec::new(),
    };
    doc.p(breadcrumb(view, Some(&sub.id)));
    doc.h(
        1,
        format!(
            "{} — performance on {} (system {})",
            named(sub),
            view.arch,
            view.system
        ),
    );
    doc.p(format!(
        "Independent measurement by ngcc-pipe following the structure of the NICCS x86 \
         self-assessment guide, §3.5 (1)–(7). Not a submitter self-assessment. \
         Distributions, single-call samples, instruction counts, survey evidence and the \
         full evidence index are in the {}.",
        link("appendix", appendix_href)
    ));
    basic_information(&mut doc, view, sub);
    environment::environment(&mut doc, view, false);
    kat::functional_testing(&mut doc, view, sub);
    performance::performance(&mut doc, view, sub, appendix_href);
    resources::resources(&mut doc, view, sub);
    resources::sizes(&mut doc, view, sub);
    primitives::primitives(&mut doc, view, sub);
    ct::constant_time(&mut doc, view, sub);
    evidence::evidence_summary(&mut doc, view, sub, appendix_href);
    doc
}

/// The appendix of a submission's report (`reports/<sub>.appendix.md`, and the collapsible
/// part of its site page): what a specialist checks behind the body's figures. Nothing the
/// body leaves out is lost: every figure here and there traces to a record of the evidence
/// index at its end.
pub fn appendix_doc(view: &CampaignView, sub: &SubmissionView, report_href: &str) -> Doc {
    let mut doc = Doc {
        title: format!("{} — {} — appendix", named(sub), view.system),
        blocks: Vec::new(),
    };
    doc.h(
        1,
        format!("{} — appendix (system {})", named(sub), view.system),
    );
    doc.p(format!(
        "Detail behind the figures of the {}: the build matrix, timing distributions, single-call samples, \
         outliers, link orders, host yardstick, instruction counts, survey evidence, \
         constant-time locations, environment and sandbox, and the raw evidence index.",
        link("report", report_href)
    ));
    matrix::build_matrix(&mut doc, view, sub);
    appendix::timing_detail(&mut doc, view, sub);
    appendix::instructions(&mut doc, sub);
    primitives::primitives_detail(&mut doc, sub);
    ct::constant_time_detail(&mut doc, view, sub);
    doc.h(2, "Environment and sandbox");
    environment::environment_table(&mut doc, view, true);
    evidence::evidence(&mut doc, view, sub);
    doc
}

fn basic_information(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    doc.h(2, "1. Basic information");
    let meta = &sub.meta;
    let mut items = Vec::new();
    match (&meta.category, &meta.function) {
        (Some(c), Some(f)) => items.push(format!("Category: {c}; function: {f}")),
        (Some(c), None) => items.push(format!("Category: {c}")),
        (None, Some(f)) => items.push(format!("Function: {f}")),
        (None, None) => {}
    }
    items.push(format!("Algorithm: {}", meta.algorithm));
    items.push(versions_measured(sub));
    // Each parameter set once, whatever its implementations and build cells.
    let mut sets: Vec<&str> = Vec::new();
    for i in &sub.instances {
        let set = parameter_set(sub, i);
        if !sets.contains(&set) {
            sets.push(set);
        }
    }
    items.push(format!("Parameter sets: {}", sets.join(", ")));
    let mut unsupported: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for i in &sub.instances {
        if let Some(why) = i.unsupported() {
            unsupported.entry(why).or_default().push(code(&i.id));
        }
    }
    for (why, ids) in unsupported {
        items.push(format!(
            "Not run on this machine ({}): {}; the tables below leave {} out",
            why.trim_end_matches('.'),
            ids.join(", "),
            if ids.len() == 1 { "it" } else { "them" }
        ));
    }
    match sub.record(StepKind::Source) {
        Some(r) => match view::source_data(r) {
            Some(s) => items.push(format!("Source: {}", s.origin)),
            None => items.push(format!("Source: {}", status_text(r))),
        },
        None if view.declared.contains(&StepKind::Source) => {
            items.push("Source: the `source` step did not run".to_string())
        }
        None => {}
    }
    if !meta.links.is_empty() {
        let links: Vec<String> = meta.links.iter().map(|(n, u)| link(n, u)).collect();
        items.push(format!("Links: {}", links.join(", ")));
    }
    doc.list(items);
}

/// The parameter set an instance measures: its `param` variable (what `import` writes),
/// else its manifest id without its implementation (the `impl` variable's value, or a
/// declared version, as the id's last or first part: `ML-KEM-512-clean` -> `ML-KEM-512`,
/// `HQC-128-clean` -> `HQC-128`), else the id.
fn parameter_set<'a>(sub: &SubmissionView, i: &'a view::InstanceView) -> &'a str {
    set_of(i.manifest_id(), &i.vars, &sub.meta.versions)
}

/// [`parameter_set`] of a manifest id, its matrix variables and the declared versions.
fn set_of<'a>(id: &'a str, vars: &'a BTreeMap<String, String>, declared: &[String]) -> &'a str {
    if let Some(p) = vars.get("param") {
        return p;
    }
    let versions = vars.get("impl").into_iter().chain(declared);
    for v in versions {
        for sep in ['-', '_', '.'] {
            let set = id
                .strip_suffix(v.as_str())
                .and_then(|s| s.strip_suffix(sep))
                .or_else(|| {
                    id.strip_prefix(v.as_str())
                        .and_then(|s| s.strip_prefix(sep))
                });
            if let Some(set) = set.filter(|s| !s.is_empty()) {
                return set;
            }
        }
    }
    id
}

/// "Implementation versions measured: clean; not measured: avx2 (unsupported on this
/// machine)". A version is measured when one of its instances (matrix variable `impl`) has
/// a successful timing record; without an `impl` variable every declared version is listed.
fn versions_measured(sub: &SubmissionView) -> String {
    let declared = if !sub.meta.versions.is_empty() {
        &sub.meta.versions
    } else {
        &sub.impls
    };
    if declared.is_empty() {
        return format!("Implementation versions measured: {UNKNOWN}");
    }
    let of = |v: &String| {
        sub.instances
            .iter()
            .filter(|i| i.vars.get("impl") == Some(v))
            .collect::<Vec<_>>()
    };
    if sub.impls.is_empty() || declared.iter().all(|v| of(v).is_empty()) {
        return format!("Implementation versions measured: {}", declared.join(", "));
    }
    let mut measured = Vec::new();
    let mut not = Vec::new();
    for v in declared {
        let insts = of(v);
        let timed = insts
            .iter()
            .any(|i| i.ops(StepKind::Time).any(|(op, _)| i.time_ok(op).is_some()));
        if timed {
            measured.push(v.clone());
            continue;
        }
        let unsupported = !insts.is_empty()
            && insts.iter().all(|i| {
                i.records()
                    .into_iter()
                    .any(|r| r.status == Status::Unsupported)
            });
        // Built and KAT-checked, but on an emulated target (its time records say so).
        let emulated = insts.iter().all(|i| {
            i.ops(StepKind::Time).all(|(_, r)| {
                r.and_then(|r| r.reason.as_deref())
                    .is_some_and(|why| why.starts_with("emulated ("))
            })
        });
        not.push(if unsupported && emulated {
            format!("{v} (emulated: not timed)")
        } else if unsupported {
            format!("{v} (unsupported on this machine)")
        } else if insts.is_empty() {
            format!("{v} (no instance)")
        } else {
            format!("{v} (no successful timing)")
        });
    }
    let mut line = format!(
        "Implementation versions measured: {}",
        if measured.is_empty() {
            "none".to_string()
        } else {
            measured.join(", ")
        }
    );
    if !not.is_empty() {
        line.push_str(&format!("; not measured: {}", not.join(", ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_submission_is_named_once() {
        assert_eq!(name_of("kem-33", "QUBE"), "kem-33 QUBE");
        assert_eq!(name_of("CRYSTALS-Kyber", "Kyber"), "CRYSTALS-Kyber");
        assert_eq!(name_of("ml-kem", "ML-KEM"), "ML-KEM");
        assert_eq!(name_of("hqc", ""), "hqc");
    }

    #[test]
    fn a_parameter_set_is_its_instance_without_the_implementation() {
        let vars = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let imported = vars(&[("param", "kyber768"), ("impl", "optimized")]);
        assert_eq!(set_of("kyber768-optimized", &imported, &[]), "kyber768");
        let pqclean = vars(&[("level", "512"), ("impl", "avx2")]);
        assert_eq!(set_of("ML-KEM-512-avx2", &pqclean, &[]), "ML-KEM-512");
        let declared = ["clean".to_string()];
        assert_eq!(
            set_of("HQC-128-clean", &vars(&[("level", "128")]), &declared),
            "HQC-128"
        );
        assert_eq!(
            set_of("clean_BW_KEM", &vars(&[("impl", "clean")]), &[]),
            "BW_KEM"
        );
        assert_eq!(set_of("qube-256", &vars(&[]), &[]), "qube-256");
    }
}
