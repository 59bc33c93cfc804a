//! Section 2: the assessment environment (machine, counters, warnings).

use std::collections::BTreeSet;

use super::*;
use crate::record::Environment;

/// What builds the objects: the engine's build step, not the package's build files.
const BUILD_TOOL: &str =
    "ngcc-pipe's build step (the compiler run directly; build files read, not run)";

/// SMT control values of `/sys/devices/system/cpu/smt/control` in words.
pub(super) fn smt_words(v: Option<&str>) -> String {
    match v {
        Some("notsupported") => "not supported".to_string(),
        Some("notimplemented") => "not implemented".to_string(),
        Some("forceoff") => "forced off".to_string(),
        other => or_unknown(other),
    }
}

/// Rows of the environment table shown in the appendix only.
const APPENDIX_ONLY: [&str; 5] = [
    "isolated cores",
    "logical CPUs",
    "sandbox for submission code",
    "timing nodes (Slurm)",
    "load average (1 min)",
];

/// Section 2 of the body: the seed's rows and the environment warnings; `full` adds the rows
/// only the appendix shows (isolated cores, logical CPUs, sandbox, Slurm nodes, load).
pub(super) fn environment(doc: &mut Doc, view: &CampaignView, full: bool) {
    doc.h(2, "2. Assessment environment");
    environment_table(doc, view, full);
}

/// The environment table (and, in the body, the warnings with their fixes).
pub(super) fn environment_table(doc: &mut Doc, view: &CampaignView, full: bool) {
    let Some(env) = view.environment() else {
        doc.p("No environment was recorded (`campaign.json` and timing records are missing).");
        return;
    };
    let nodes = timing_nodes(view);
    let mut t = Table::new(&["item", "value"]);
    machine_rows(&mut t, view, env);
    run_rows(&mut t, view, env, &nodes);
    if !full {
        t.rows.retain(|r| !APPENDIX_ONLY.contains(&r[0].as_str()));
    }
    doc.table(t);
    node_models(doc, &nodes);
    if !full {
        warnings(doc, env);
    }
}

/// The rows on the machine: processor (and an emulated target), clock, cores, memory, OS,
/// compiler, cycle counter.
fn machine_rows(t: &mut Table, view: &CampaignView, env: &Environment) {
    t.row(vec![
        "processor".into(),
        format!(
            "{} (CPU {}, one core)",
            or_unknown(env.cpu_model.as_deref()),
            env.bench_cpu
        ),
    ]);
    // An emulated target: the processor above is the host's, running the emulator.
    if let Some(why) = view.submissions.iter().find_map(super::emulated) {
        let tool = why
            .strip_prefix("emulated (")
            .and_then(|r| r.split(')').next())
            .unwrap_or("an emulator");
        t.row(vec![
            "target".into(),
            format!(
                "{} code run by {tool} on the processor above: functional results only, not timed",
                view.arch
            ),
        ]);
    }
    let clock = match env.max_mhz {
        Some(m) => format!("max {:.2} GHz", m / 1000.0),
        None => "max unknown".to_string(),
    };
    t.row(vec![
        "clock".into(),
        format!(
            "{clock}, governor {}, turbo {}, SMT {}",
            or_unknown(env.governor.as_deref()),
            or_unknown(env.turbo.as_deref()),
            smt_words(env.smt.as_deref())
        ),
    ]);
    t.row(vec![
        "isolated cores".into(),
        match env.isolated_cpus.as_deref() {
            Some("") => "none".to_string(),
            other => or_unknown(other),
        },
    ]);
    t.row(vec![
        "logical CPUs".into(),
        env.logical_cpus
            .map(|n| n.to_string())
            .unwrap_or_else(|| UNKNOWN.into()),
    ]);
    t.row(vec![
        "memory".into(),
        env.mem_total_mib
            .map(|m| format!("{m} MiB"))
            .unwrap_or_else(|| UNKNOWN.into()),
    ]);
    t.row(vec![
        "OS / kernel".into(),
        format!(
            "{} / {}",
            or_unknown(env.os.as_deref()),
            or_unknown(env.kernel.as_deref())
        ),
    ]);
    // The build step runs the compiler itself: a package's Makefile or build script is read
    // (for its flags and sources), never run, so `make` is no build tool of these figures.
    t.row(vec![
        "compiler / build tool".into(),
        format!("{} / {BUILD_TOOL}", or_unknown(env.cc_version.as_deref())),
    ]);
    t.row(vec!["cycle counter".into(), cycle_counter(view)]);
}

/// The rows on the run: the sandbox, the Slurm nodes timed on, the load, the campaign's
/// start and end.
fn run_rows(
    t: &mut Table,
    view: &CampaignView,
    env: &Environment,
    nodes: &BTreeMap<String, Option<String>>,
) {
    if let Some(sb) = &env.sandbox {
        t.row(vec![
            "sandbox for submission code".into(),
            if sb.missing.is_empty() {
                format!("{}: {}", sb.tool, sb.protections.join("; "))
            } else {
                format!(
                    "{}: {}; not in force: {}",
                    sb.tool,
                    sb.protections.join("; "),
                    sb.missing.join("; ")
                )
            },
        ]);
    }
    if !nodes.is_empty() {
        t.row(vec![
            "timing nodes (Slurm)".into(),
            nodes
                .iter()
                .map(|(n, m)| format!("{n}: {}", or_unknown(m.as_deref())))
                .collect::<Vec<_>>()
                .join("; "),
        ]);
    }
    t.row(vec![
        "load average (1 min)".into(),
        env.loadavg
            .map(|l| format!("{l:.2}"))
            .unwrap_or_else(|| UNKNOWN.into()),
    ]);
    let (start, end) = match &view.campaign {
        Some(c) => (
            fmt::utc(&c.started),
            c.finished
                .as_deref()
                .map(fmt::utc)
                .unwrap_or_else(|| UNKNOWN.into()),
        ),
        None => (UNKNOWN.into(), UNKNOWN.into()),
    };
    t.row(vec![
        "campaign start / end (UTC)".into(),
        format!("{start} / {end}"),
    ]);
}

/// A note when timing ran on nodes of different CPU models.
fn node_models(doc: &mut Doc, nodes: &BTreeMap<String, Option<String>>) {
    let models: BTreeSet<Option<&String>> = nodes.values().map(Option::as_ref).collect();
    if models.len() > 1 {
        doc.p(format!(
            "Timing ran on nodes with different CPU models ({}): cycle counts from different \
             models are not comparable with each other.",
            models
                .iter()
                .map(|m| or_unknown(m.map(String::as_str)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
}

/// The environment warnings, each with its fix, or a line saying there are none.
fn warnings(doc: &mut Doc, env: &Environment) {
    if env.warnings.is_empty() {
        doc.p("No environment warnings: nothing recorded that spoils timing.");
    } else {
        doc.p("Environment warnings (conditions that spoil timing, each with its fix):");
        doc.list(
            env.warnings
                .iter()
                .map(|w| format!("{} — fix: {}", w.what, w.fix))
                .collect(),
        );
    }
}

/// The Slurm nodes timing records were measured on, with the CPU model captured there.
fn timing_nodes(view: &CampaignView) -> BTreeMap<String, Option<String>> {
    let mut nodes = BTreeMap::new();
    for inst in view.submissions.iter().flat_map(|s| &s.instances) {
        for (op, rec) in inst.ops(StepKind::Time) {
            if let (Some(job), Some(td)) = (rec.and_then(|r| r.slurm.as_ref()), inst.time_ok(op)) {
                nodes.insert(job.node.clone(), td.environment.cpu_model.clone());
            }
        }
    }
    nodes
}

/// What a cycle is in this campaign: the counter of the timing records, its measured rate
/// (median over the records of ticks / monotonic ns of the trials), and whether perf core
/// cycles were available.
pub(super) fn cycle_counter(view: &CampaignView) -> String {
    let mut counters: Vec<String> = Vec::new();
    let mut rates: Vec<f64> = Vec::new();
    let mut core = false;
    for inst in view.submissions.iter().flat_map(|s| &s.instances) {
        for (op, _) in inst.ops(StepKind::Time) {
            let Some(td) = inst.time_ok(op) else {
                continue;
            };
            if !counters.contains(&td.output.counter) {
                counters.push(td.output.counter.clone());
            }
            rates.extend(td.summary.counter_ghz);
            core |= matches!(
                td.output.core_cycles,
                crate::record::output::CoreCycles::Available
            );
        }
    }
    if counters.is_empty() {
        return "no timing record".to_string();
    }
    let name = |c: &str| match c {
        "rdtsc" => "TSC (`rdtsc`)".to_string(),
        "cntvct_el0" => "generic timer (`cntvct_el0`)".to_string(),
        other => code(other),
    };
    let rate = match crate::measure::stats::median(&rates) {
        Some(g) => format!(
            "measured rate {g:.2} GHz (ticks / monotonic ns over the timed trials, median of {} records)",
            rates.len()
        ),
        None => "rate not measured".to_string(),
    };
    let what = if core {
        "perf core cycles were recorded beside them in every trial"
    } else if counters.iter().any(|c| c == "rdtsc") {
        "TSC ticks are reference cycles at this constant rate, not core cycles (perf core cycles were not available)"
    } else {
        "counter ticks, not core cycles (perf core cycles were not available)"
    };
    format!(
        "{}; {rate}; {what}",
        counters
            .iter()
            .map(|c| name(c))
            .collect::<Vec<_>>()
            .join(", ")
    )
}
