//! The campaign index (`reports/index.md`, the site's front page): one row per instance,
//! the other systems side by side, the failures.

use crate::model::Op;
use crate::record::KatStatus;

use super::{breadcrumb, UNKNOWN};
use crate::report::doc::{code, link, Doc, Table};
use crate::report::format::{self as fmt, DASH};
use crate::report::results::{self, ResultInstance, Results};
use crate::report::view::CampaignView;

/// The index's constant-time cell: per checked operation the locations not declared
/// benign (`+N benign` beside, and the variable-latency instructions of the instance's own
/// code when there are any), `not checked` otherwise, `not trusted` where the operation's
/// figures contradict each other.
fn ct_cell(inst: &ResultInstance) -> String {
    if inst.constant_time.is_empty() {
        return DASH.into();
    }
    inst.constant_time
        .iter()
        .map(|c| {
            if c.untrusted.is_some() {
                return format!("{} not trusted", c.op);
            }
            let mut cell = match (c.locations, c.benign) {
                (Some(n), Some(0)) => format!("{} {n}", c.op),
                (Some(n), Some(b)) => format!("{} {n} (+{b} benign)", c.op),
                _ => return format!("{} not checked", c.op),
            };
            if let Some(v) = c.variable_latency.filter(|v| *v > 0) {
                cell.push_str(&format!(", {v} variable-latency"));
            }
            cell
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Per-instance row cells of the campaign index for one system's results.
fn index_table(results: &Results, link_ext: &str, prefix: &str) -> Table {
    let with_ct = results
        .submissions
        .iter()
        .any(|s| s.instances.iter().any(|i| !i.constant_time.is_empty()));
    // AES is a family of its own (as in the submission reports): a column when any
    // operation spent time in it, and never part of the hash share.
    let with_aes = results.submissions.iter().any(|s| {
        s.instances.iter().any(|i| {
            i.ops
                .iter()
                .any(|o| o.cipher_share.is_some_and(|c| c > 0.0))
        })
    });
    let mut head = vec![
        "submission",
        "instance",
        "KAT",
        "keygen cycles",
        "enc cycles",
        "dec cycles",
        "pk bytes",
        "ct bytes",
        "hash share (keygen / enc / dec)",
    ];
    if with_aes {
        head.push("AES share (keygen / enc / dec)");
    }
    if with_ct {
        head.push("constant-time locations (not benign)");
    }
    let mut t = Table::new(&head);
    for sub in &results.submissions {
        let best = super::categories::best_cells(&sub.instances);
        for inst in &sub.instances {
            let id = match best.get(inst.id.as_str()) {
                Some(n) => format!("{} (best of {n} cells)", code(&inst.id)),
                None => code(&inst.id),
            };
            let cyc = |op: Op| match inst.op(op) {
                Some(o) => match (o.cycles(), super::status::precision_cell(o)) {
                    (Some(c), _) if o.untrusted.is_some() => {
                        format!("{} ⚠ not trusted", fmt::cycles(c))
                    }
                    (Some(c), Some(p)) => format!("{} {p}", fmt::cycles(c)),
                    (Some(c), None) => fmt::cycles(c),
                    (None, _) => DASH.into(),
                },
                None => DASH.into(),
            };
            let shares = |share: &dyn Fn(&results::ResultOp) -> Option<f64>| {
                Op::ALL
                    .iter()
                    .map(|&op| {
                        inst.op(op)
                            .and_then(share)
                            .map(fmt::share)
                            .unwrap_or_else(|| DASH.into())
                    })
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            t.row(vec![
                link(&sub.id, &format!("{prefix}{}.{link_ext}", sub.id)),
                id,
                kat_evidence(inst),
                cyc(Op::Keygen),
                cyc(Op::Enc),
                cyc(Op::Dec),
                fmt::opt_int(inst.pk),
                fmt::opt_int(inst.ct),
                shares(&|o| {
                    o.hash_share
                        .map(|h| super::hash_only(h, &[o.cipher_share.unwrap_or(0.0)]))
                }),
            ]);
            if with_aes {
                let row = t.rows.last_mut().expect("row just added");
                row.push(shares(&|o| o.cipher_share));
            }
            if with_ct {
                let row = t.rows.last_mut().expect("row just added");
                row.push(ct_cell(inst));
            }
        }
    }
    t
}

/// The best KAT evidence of an instance: "PASS" when every mode passed, "PASS (single), no
/// all-KAT hash" when the others had no expected hash, else each mode's status.
fn kat_evidence(inst: &ResultInstance) -> String {
    let modes = &inst.kat_modes;
    if modes.is_empty() {
        return inst.kat.clone().unwrap_or_else(|| "did not run".into());
    }
    let with = |st: KatStatus| -> Vec<&str> {
        modes
            .iter()
            .filter(|m| m.status == st)
            .map(|m| m.mode.as_str())
            .collect()
    };
    let (pass, nokat) = (with(KatStatus::Pass), with(KatStatus::Nokat));
    if pass.len() == modes.len() {
        "PASS".to_string()
    } else if !pass.is_empty() && pass.len() + nokat.len() == modes.len() {
        format!(
            "PASS ({}), no {} hash",
            pass.join(", "),
            nokat
                .iter()
                .map(|m| format!("{m}-KAT"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    } else if modes.len() == 1 {
        modes[0].status.name().to_string()
    } else {
        modes
            .iter()
            .map(|m| format!("{} {}", m.status.name(), m.mode))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The campaign index (`reports/index.md`): one row per instance, links, failures.
pub fn index_doc(view: &CampaignView, results: &Results) -> Doc {
    let mut doc = Doc {
        title: format!("{} — performance measurements", view.system),
        blocks: Vec::new(),
    };
    doc.p(breadcrumb(view, None));
    doc.h(
        1,
        format!(
            "Performance measurements on {} (system {})",
            view.arch, view.system
        ),
    );
    if let Some(c) = &view.campaign {
        doc.p(format!(
            "Campaign start / end (UTC): {} / {}.",
            fmt::utc(&c.started),
            c.finished
                .as_deref()
                .map(fmt::utc)
                .unwrap_or_else(|| UNKNOWN.into())
        ));
    }
    super::status::status(&mut doc, view);
    doc.h(2, "Per instance");
    doc.p(
        "Cycles per operation: the median of the interleaved rounds (the mean of its runner \
         processes' medians) with the half width of its 95% CI (\"±1.2%\"; the mean where an \
         operation was timed in one block of \
         trials, with its CV when above 2%). KAT is the worst status over the checked modes. \
         Hash share: the part of each operation's time spent in the provided hash/XOF \
         functions (the `profile` step), AES not included (a column of its own when an \
         operation used it). Machine-readable: [`results.csv`](results.csv), [`results.json`](results.json).",
    );
    doc.table(index_table(results, "md", ""));
    super::categories::by_category(&mut doc, view, results);
    if !view.other_systems.is_empty() {
        let mut all: Vec<&Results> = view.other_systems.iter().collect();
        all.push(results);
        all.sort_by(|a, b| a.system.cmp(&b.system));
        doc.h(2, "Across systems");
        doc.p(
            "Cycles per operation (median of rounds, else mean) on every system whose outputs \
             sit beside this one \
             (read from their `reports/results.json`); cycles of different counters \
             (`rdtsc`, `cntvct_el0`) are not comparable across architectures.",
        );
        doc.table(systems_table(&all));
        doc.p(
            "KAT per instance on every system: PASS on two systems means both produced the \
             hash in the submission's `kat.sha256` (PQClean's `META.yml`), so the same output \
             on both architectures.",
        );
        doc.table(kat_systems_table(&all));
    }
    super::status::precision_in_full(&mut doc, view);
    doc
}

/// One row per submission, instance and operation; one column per system.
pub fn systems_table(all: &[&Results]) -> Table {
    let mut head = vec![
        "submission".to_string(),
        "instance".into(),
        "operation".into(),
    ];
    head.extend(all.iter().map(|r| r.system.clone()));
    let mut t = Table {
        head,
        rows: Vec::new(),
    };
    // keys in first-seen order over the systems, sorted systems first
    let mut keys: Vec<(String, String, Op)> = Vec::new();
    for r in all {
        for sub in &r.submissions {
            for inst in &sub.instances {
                for o in &inst.ops {
                    let k = (sub.id.clone(), inst.id.clone(), o.op);
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
            }
        }
    }
    for (sub, inst, op) in keys {
        let mut row = vec![sub.clone(), code(&inst), op.name().to_string()];
        for r in all {
            let cell = r
                .instance(&sub, &inst)
                .and_then(|i| i.op(op))
                .and_then(|o| o.cycles())
                .map(fmt::cycles)
                .unwrap_or_else(|| DASH.into());
            row.push(cell);
        }
        t.row(row);
    }
    t
}

/// One row per submission and instance; one column per system with its KAT status.
pub fn kat_systems_table(all: &[&Results]) -> Table {
    let mut head = vec!["submission".to_string(), "instance".into()];
    head.extend(all.iter().map(|r| format!("KAT {}", r.system)));
    let mut t = Table {
        head,
        rows: Vec::new(),
    };
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in all {
        for sub in &r.submissions {
            for inst in &sub.instances {
                let k = (sub.id.clone(), inst.id.clone());
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
    }
    for (sub, inst) in keys {
        let mut row = vec![sub.clone(), code(&inst)];
        for r in all {
            let cell = r
                .instance(&sub, &inst)
                .and_then(|i| i.kat.clone())
                .unwrap_or_else(|| DASH.into());
            row.push(cell);
        }
        t.row(row);
    }
    t
}

/// The index table of another system (site side-by-side view).
pub fn other_system_table(results: &Results) -> Table {
    index_table(results, "md", &format!("../../{}/reports/", results.system))
}

/// The index table of this system, with links relative to `reports/`.
pub fn this_system_table(results: &Results) -> Table {
    index_table(results, "md", "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::results::KatModeStatus;

    fn inst(modes: &[(&str, KatStatus)]) -> ResultInstance {
        ResultInstance {
            id: "K".into(),
            implementation: None,
            compiler: None,
            level: None,
            nist_category: None,
            kat: None,
            kat_modes: modes
                .iter()
                .map(|(m, s)| KatModeStatus {
                    mode: m.to_string(),
                    status: *s,
                })
                .collect(),
            build_flags: None,
            static_bytes: None,
            layouts: None,
            pk: None,
            sk: None,
            ct: None,
            ss: None,
            survey: None,
            ops: vec![],
            constant_time: vec![],
        }
    }

    #[test]
    fn kat_evidence_shows_the_best_evidence() {
        use KatStatus::*;
        assert_eq!(
            kat_evidence(&inst(&[("single", Pass), ("all", Pass)])),
            "PASS"
        );
        assert_eq!(
            kat_evidence(&inst(&[("single", Pass), ("all", Nokat)])),
            "PASS (single), no all-KAT hash"
        );
        assert_eq!(kat_evidence(&inst(&[("single", Nokat)])), "NOKAT");
        assert_eq!(
            kat_evidence(&inst(&[("single", Pass), ("all", Mismatch)])),
            "PASS single, MISMATCH all"
        );
        assert_eq!(kat_evidence(&inst(&[])), "did not run");
    }

    /// Issue #27 item 7: AES is a family of its own in the index, as in the submission
    /// reports: the hash share leaves it out and a column of its own shows it.
    #[test]
    fn aes_is_not_counted_as_hash() {
        let op = |name: &str, hash: f64, aes: Option<f64>| -> results::ResultOp {
            serde_json::from_value(serde_json::json!({
                "op": name, "trial_cycles": [], "calls_per_op": [],
                "hash_share": hash, "cipher_share": aes,
            }))
            .unwrap()
        };
        let system = |ops: Vec<results::ResultOp>| Results {
            schema: String::new(),
            system: "x86_1".into(),
            arch: String::new(),
            started: None,
            finished: None,
            environment: None,
            submissions: vec![crate::report::results::ResultSubmission {
                id: "frodo".into(),
                algorithm: "FrodoKEM".into(),
                instances: vec![ResultInstance {
                    id: "FrodoKEM-640-AES".into(),
                    ops,
                    ..inst(&[])
                }],
            }],
        };
        let t = this_system_table(&system(vec![
            op("keygen", 0.70, Some(0.60)),
            op("enc", 0.50, Some(0.45)),
            op("dec", 0.40, None),
        ]));
        assert_eq!(
            &t.head[8..],
            [
                "hash share (keygen / enc / dec)",
                "AES share (keygen / enc / dec)"
            ]
        );
        assert_eq!(
            &t.rows[0][8..],
            [
                "10% / 5.0% / 40%".to_string(),
                format!("60% / 45% / {DASH}")
            ]
        );
        // No cipher used anywhere: no AES column, the hash share as recorded.
        let t = this_system_table(&system(vec![op("keygen", 0.70, Some(0.0))]));
        assert_eq!(t.head.len(), 9);
        assert_eq!(t.rows[0][8], format!("70% / {DASH} / {DASH}"));
    }

    /// Issue #14 item 4: the KAT of each instance on every system, side by side; an
    /// instance one system lacks shows a dash there.
    #[test]
    fn kat_side_by_side_across_systems() {
        let system = |name: &str, insts: &[(&str, &str)]| Results {
            schema: String::new(),
            system: name.into(),
            arch: String::new(),
            started: None,
            finished: None,
            environment: None,
            submissions: vec![crate::report::results::ResultSubmission {
                id: "ml-kem".into(),
                algorithm: "ML-KEM".into(),
                instances: insts
                    .iter()
                    .map(|(id, kat)| ResultInstance {
                        id: id.to_string(),
                        kat: Some(kat.to_string()),
                        ..inst(&[])
                    })
                    .collect(),
            }],
        };
        let arm = system(
            "arm_1",
            &[("ML-KEM-512-clean", "PASS"), ("ML-KEM-512-aarch64", "PASS")],
        );
        let x86 = system(
            "x86_1",
            &[("ML-KEM-512-clean", "PASS"), ("ML-KEM-512-avx2", "PASS")],
        );
        let t = kat_systems_table(&[&arm, &x86]);
        assert_eq!(t.head, ["submission", "instance", "KAT arm_1", "KAT x86_1"]);
        let cells: Vec<Vec<&str>> = t
            .rows
            .iter()
            .map(|r| r.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            cells,
            [
                ["ml-kem", "`ML-KEM-512-clean`", "PASS", "PASS"],
                ["ml-kem", "`ML-KEM-512-aarch64`", "PASS", DASH],
                ["ml-kem", "`ML-KEM-512-avx2`", DASH, "PASS"],
            ]
        );
    }
}
