//! The constant-time section of a submission's report, in two parts kept apart:
//! [`constant_time`], the body section (the method, its limits, and per instance and
//! operation one line with both verdicts of the `ct` step: memcheck's secret-dependent
//! branches and indexes, and the variable-latency scan's count), and
//! [`constant_time_detail`], the appendix (every memcheck location, declared benign or not
//! and whether its source line has a branch; what each scan reached and did not follow;
//! every variable-latency instruction with its disassembly). The appendix is self-contained
//! (its own heading, naming the submission) so it can be rendered elsewhere. Both are
//! present only when the pipeline declares a `ct` step.

use std::collections::BTreeMap;

use crate::ct::latency::{base_name, Latency, LatencyScan, VarLatency};
use crate::ct::Finding;
use crate::model::{Op, StepKind};
use crate::record::ct::CtData;
use crate::record::{Status, StepData, StepRecord};

use super::{did_not_run, listed};
use crate::report::doc::{code, Doc, Table};
use crate::report::results::{ct_latency, ct_verdict};
use crate::report::view::{CampaignView, InstanceView, SubmissionView};

/// The method in one paragraph (shown under the heading).
pub const METHOD: &str = "Method (TIMECOP): each operation runs under valgrind's memcheck on \
an object built with the build's flags plus debug information (`-gdwarf-4`; AVX-512 \
excluded), with the secret data marked undefined through memcheck's client requests (the \
random bytes of keygen and enc, the secret key before dec; pk, ct and ss declassified when \
the call returns); every conditional jump or memory index that depends on them is a \
finding. A finding at a function the manifest declares benign (rejection sampling on a \
public seed, say) is labelled with the manifest's reason, not hidden; a conditional at a source line with no branch on it is labelled as \
introduced by the compiler, and no declaration covers it. The same object is then \
disassembled: every instruction whose latency depends on its operands (integer division, \
floating-point division and square root: the KyberSlash class) in a function reachable from \
the operation's API function is listed.";

/// What the check does not see, and which part covers what.
pub const LIMITS: &str = "Limits: memcheck sees only the paths executed with these inputs \
(a branch not taken on them is not checked), and only two uses of secret data: a conditional \
jump or move, and a memory address. A secret-dependent address (a table lookup, the \
cache-timing class) is seen whenever it is used, but not how much the cache leaks of it; an \
instruction whose latency depends on secret operands (a division: the KyberSlash class) is \
neither, and memcheck cannot see it. The variable-latency scan covers that class: it lists \
division and square-root instructions in the functions reached from the API function by \
direct calls, jumps and taken addresses, but it does not trace operands (an instruction is \
said to handle secret data only when memcheck has a finding in the same function), follows \
no indirect call or jump, does not scan code outside the object (the C library), and lists \
no instruction whose latency varies only on some cores (multiplication on some older cores, \
arithmetic on subnormal floats). Both check the compiler's output at these flags: another \
compiler or other flags may add or remove branches and divisions. Speculative execution, \
power and electromagnetic leaks are out of scope.";

fn ct_data(r: &StepRecord) -> Option<&CtData> {
    match &r.data {
        Some(StepData::Ct(d)) if r.status == Status::Ok => Some(d),
        _ => None,
    }
}

/// The body's constant-time section: one verdict per instance and operation (the
/// locations are in the appendix, [`locations`]).
pub(super) fn constant_time(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    if !view.declared.contains(&StepKind::Ct) {
        return;
    }
    doc.h(2, "Constant-time check");
    doc.p(METHOD);
    doc.p(LIMITS);
    if let Some(line) = did_not_run(
        view,
        StepKind::Ct,
        any_record(sub),
        "no constant-time verdict",
    ) {
        doc.p(line);
        return;
    }
    let mut verdicts = Table::new(&[
        "instance",
        "operation",
        "secret-dependent branches and indexes (memcheck)",
        "variable-latency instructions (scan)",
    ]);
    let mut untrusted = false;
    for inst in listed(sub) {
        for (op, r) in inst.ops(StepKind::Ct) {
            // A clean verdict of code that behaves differently under valgrind says nothing.
            let verdict = match inst.untrusted(op) {
                Some(u) if r.and_then(ct_data).is_some() => {
                    untrusted = true;
                    format!("⚠ {}", u.mark())
                }
                _ => ct_verdict(r),
            };
            verdicts.row(vec![
                code(&inst.id),
                op.name().to_string(),
                verdict,
                ct_latency(r),
            ]);
        }
    }
    doc.table(verdicts);
    super::ct_cells::across_cells(doc, view, sub);
    if untrusted {
        doc.p(
            "⚠ not trusted: memcheck ran the code it was given, but the timing and the \
             instruction count of these operations contradict each other (section 4), so the \
             code that ran under valgrind is not the code that runs natively and no verdict \
             is given for it. The variable-latency scan reads the object's instructions \
             without running them and stands.",
        );
    }
    doc.p(format!(
        "Where each location and instruction is, with its source line and disassembly: \
         \"{}\" in the appendix.",
        detail_heading(sub)
    ));
}

/// Whether any operation of the submission has a `ct` record.
fn any_record(sub: &SubmissionView) -> bool {
    sub.instances
        .iter()
        .any(|i| i.ops(StepKind::Ct).any(|(_, r)| r.is_some()))
}

fn detail_heading(sub: &SubmissionView) -> String {
    format!("Appendix: constant-time detail of {}", sub.id)
}

/// Every checked operation's record with its data.
fn checked(inst: &InstanceView) -> Vec<(Op, &CtData)> {
    inst.ops(StepKind::Ct)
        .filter_map(|(op, r)| r.and_then(ct_data).map(|d| (op, d)))
        .collect()
}

/// What the report says of a finding's source line; a branch the compiler introduced is
/// named with the compiler when the cell says which (`compilers` in the pipeline).
fn source_cell(f: &Finding, flags: &[String], compiler: Option<&str>) -> String {
    let label = match compiler {
        Some(c) if f.compiler => Some(format!(
            "introduced by the compiler {} (flags {})",
            code(c),
            flags.join(" ")
        )),
        _ => f.compiler_label(flags),
    };
    if let Some(label) = label {
        return match &f.source {
            Some(line) => format!("{label}: {}", code(line)),
            None => label,
        };
    }
    match &f.source {
        None => "not read".to_string(),
        Some(_) if !f.kinds.iter().any(|k| k == "UninitCondition") => "memory index".to_string(),
        Some(_) => "branch in the source".to_string(),
    }
}

/// The appendix of the constant-time check, on its own (headed, self-contained): memcheck's
/// locations, what each variable-latency scan covered and did not follow, the instructions
/// and the disassembly around each. Nothing when no operation has a `ct` record (the body
/// section says why).
pub(super) fn constant_time_detail(doc: &mut Doc, view: &CampaignView, sub: &SubmissionView) {
    if !view.declared.contains(&StepKind::Ct) || !any_record(sub) {
        return;
    }
    doc.h(2, detail_heading(sub));
    doc.h(3, "memcheck's locations");
    let mut places = Table::new(&[
        "instance",
        "operation",
        "function",
        "location",
        "kind",
        "count",
        "source line",
        "declared benign (manifest)",
    ]);
    for inst in listed(sub) {
        for (op, d) in checked(inst) {
            for f in &d.findings {
                places.row(vec![
                    code(&inst.id),
                    op.name().to_string(),
                    code(&f.function),
                    f.location(),
                    f.kinds.join(", "),
                    format!(
                        "{} ({} stack{})",
                        f.count,
                        f.contexts,
                        if f.contexts == 1 { "" } else { "s" }
                    ),
                    source_cell(f, &d.flags, inst.compiler()),
                    f.benign
                        .clone()
                        .unwrap_or_else(|| "not declared".to_string()),
                ]);
            }
        }
    }
    if places.rows.is_empty() {
        doc.p("No location found in any checked operation.");
    } else {
        doc.p(
            "memcheck's locations (the first frame inside the object; count: how many times \
             memcheck saw it). Declared benign: by the submission's manifest (`ct-benign`), \
             with its reason; nothing else declares a location benign.",
        );
        doc.table(places);
    }
    latency_detail(doc, sub);
}

/// One variable-latency instruction of an instance with the operations that reach it.
struct Seen<'d> {
    v: &'d VarLatency,
    ops: Vec<Op>,
}

fn latency_detail(doc: &mut Doc, sub: &SubmissionView) {
    doc.h(3, "Variable-latency instructions");
    let mut reach = Table::new(&[
        "instance",
        "operation",
        "scanned from",
        "functions reached",
        "not followed: indirect calls / jumps",
        "calls leaving the object (not scanned)",
    ]);
    let mut table = Table::new(&[
        "instance",
        "operations",
        "function",
        "location",
        "instruction",
        "operands",
    ]);
    let mut contexts: Vec<(String, String, Vec<String>)> = Vec::new();
    for inst in listed(sub) {
        let mut by_address: BTreeMap<u64, Seen> = BTreeMap::new();
        for (op, d) in checked(inst) {
            let Some(s) = d.latency.as_ref().and_then(Latency::scanned) else {
                continue;
            };
            reach.row(reach_row(&inst.id, op, s));
            for v in &s.instructions {
                by_address
                    .entry(v.address)
                    .or_insert(Seen { v, ops: Vec::new() })
                    .ops
                    .push(op);
            }
        }
        for Seen { v, ops } in by_address.values() {
            let ops = ops.iter().map(|o| o.name()).collect::<Vec<_>>().join(", ");
            let mut location = v.location();
            if !v.inlined.is_empty() {
                location.push_str(&format!(" (inlined: {})", v.inlined.join(" in ")));
            }
            if v.provided {
                location.push_str(" (provided primitives)");
            }
            table.row(vec![
                code(&inst.id),
                ops,
                code(base_name(&v.function)),
                location,
                code(&v.text),
                v.operands(),
            ]);
            contexts.push((
                format!(
                    "{} in {} at {} ({:#x}; reached by {}):",
                    code(&inst.id),
                    code(base_name(&v.function)),
                    v.location(),
                    v.address,
                    v.path
                        .iter()
                        .map(|p| code(base_name(p)))
                        .collect::<Vec<_>>()
                        .join(" → ")
                ),
                v.class.words().to_string(),
                v.context.iter().map(|c| code(c)).collect(),
            ));
        }
    }
    if reach.rows.is_empty() {
        doc.p("No variable-latency scan in any checked operation.");
        return;
    }
    doc.p(
        "What each scan covered: the functions reached from the API function by direct calls, \
         jumps and taken addresses; indirect calls and jumps are not followed, and code outside \
         the object (the C library) is not scanned.",
    );
    doc.table(reach);
    if table.rows.is_empty() {
        doc.p("No variable-latency instruction in any reachable function.");
        return;
    }
    doc.p(
        "Instructions whose latency depends on their operands, once per instance (operations: \
         the ones that reach it). Operands: what memcheck showed about the function (a finding \
         in it means it handles secret data), or the manifest's reason when it is declared \
         benign; otherwise the scan cannot tell.",
    );
    doc.table(table);
    doc.p("Disassembly around each instruction (`=>` marks it):");
    for (head, class, lines) in contexts {
        doc.p(format!("{head} {class}"));
        doc.list(lines);
    }
}

fn reach_row(id: &str, op: Op, s: &LatencyScan) -> Vec<String> {
    let indirect = if s.indirect.is_empty() {
        "none".to_string()
    } else {
        s.indirect
            .iter()
            .map(|i| format!("{} {} / {}", code(base_name(&i.function)), i.calls, i.jumps))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let outside = if s.outside.is_empty() {
        "none".to_string()
    } else {
        s.outside
            .iter()
            .map(|o| code(o))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut functions = s.functions.to_string();
    if !s.address_taken.is_empty() {
        functions.push_str(&format!(
            " (by taken address: {})",
            s.address_taken
                .iter()
                .map(|f| code(base_name(f)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    vec![
        code(id),
        op.name().to_string(),
        code(&s.root),
        functions,
        indirect,
        outside,
    ]
}
