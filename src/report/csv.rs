//! `reports/results.csv`: one row per instance and operation (RFC 4180 quoting).
//!
//! Columns, exactly: system, submission, instance, op, kat, mean_cycles, mean_ns,
//! ops_per_s, median_trial_ns, trials, iters, cv, static_bytes, baseline_rss_kib,
//! peak_rss_kib, stack_bytes, pk, sk, ct, ss, hash_share, drng_share, counter_ghz (the
//! measured counter rate), median_cycles, ci_low_cycles, ci_high_cycles, rounds,
//! interfered_rounds (the last five from a timing session's interleaved rounds: median
//! per-op cycles and its 95% bootstrap interval; empty for a block of trials),
//! instructions, cycles_per_instruction, hash_share_instr, drng_share_instr (the `count`
//! step: mean instructions per call, the median timed cycles (else the mean) over them,
//! and the instruction shares),
//! yardstick_cycles, per_yardstick (the yardstick timed in the same rounds: its median
//! per-call cycles, and the median of the per-round ratio operation / yardstick, which
//! `ngcc-pipe compare` uses to take the host's drift out of a comparison of two runs),
//! variable_latency (the `ct` step's scan: instructions with operand-dependent latency
//! reachable from the operation in the instance's own code; an operation checked by `ct`
//! but neither timed nor profiled gets a row of its own),
//! untrusted (why the operation's time, count and ct results contradict each other, see
//! `super::integrity`; empty when they agree).
//! A campaign that builds with several flag profiles (instance ids `<id>@<profile>`) gets one
//! more column, `flags`, last: the build's profile. Unknown values are
//! empty cells; an instance without timed or profiled operations gets one row with an empty
//! `op`. Cycles and ns have one decimal, ops/s three, cv and shares six (fractions).

use std::path::PathBuf;

use super::results::Results;
use super::view::CampaignView;
use super::Renderer;

/// Header line of `results.csv`.
pub const COLUMNS: [&str; 36] = [
    "system",
    "submission",
    "instance",
    "op",
    "kat",
    "mean_cycles",
    "mean_ns",
    "ops_per_s",
    "median_trial_ns",
    "trials",
    "iters",
    "cv",
    "static_bytes",
    "baseline_rss_kib",
    "peak_rss_kib",
    "stack_bytes",
    "pk",
    "sk",
    "ct",
    "ss",
    "hash_share",
    "drng_share",
    "counter_ghz",
    "median_cycles",
    "ci_low_cycles",
    "ci_high_cycles",
    "rounds",
    "interfered_rounds",
    "instructions",
    "cycles_per_instruction",
    "hash_share_instr",
    "drng_share_instr",
    "yardstick_cycles",
    "per_yardstick",
    "variable_latency",
    "untrusted",
];

/// The CSV renderer.
pub struct Csv;

/// A field on one line with control and bidi characters shown escaped
/// (`crate::text::clean_line`), quoted when it holds a comma or quote.
pub fn field(s: &str) -> String {
    let s = crate::text::clean_line(s);
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn f(x: Option<f64>, decimals: usize) -> String {
    x.filter(|v| v.is_finite())
        .map(|v| format!("{v:.decimals$}"))
        .unwrap_or_default()
}

fn i<T: ToString>(x: Option<T>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// The whole CSV text of one system's results.
pub fn to_csv(results: &Results) -> String {
    // `@` is refused in manifest instance ids: it marks an instance x profile.
    let profiles = results
        .submissions
        .iter()
        .flat_map(|s| &s.instances)
        .any(|i| i.id.contains('@'));
    let mut out = COLUMNS.join(",");
    if profiles {
        out.push_str(",flags");
    }
    out.push('\n');
    for sub in &results.submissions {
        for inst in &sub.instances {
            let common = |op: &str| {
                vec![
                    results.system.clone(),
                    sub.id.clone(),
                    inst.id.clone(),
                    op.to_string(),
                    inst.kat.clone().unwrap_or_default(),
                ]
            };
            let sizes = [i(inst.pk), i(inst.sk), i(inst.ct), i(inst.ss)];
            let variable_latency = |op: Option<crate::model::Op>| {
                i(inst
                    .constant_time
                    .iter()
                    .find(|c| Some(c.op) == op)
                    .and_then(|c| c.variable_latency))
            };
            // No timing figures: the instance's own cells only.
            let blank = |op: Option<crate::model::Op>| {
                let mut r = common(op.map_or("", |o| o.name()));
                r.extend(std::iter::repeat_n(String::new(), 7));
                r.push(i(inst.static_bytes));
                r.extend(std::iter::repeat_n(String::new(), 3));
                r.extend(sizes.iter().cloned());
                r.extend(std::iter::repeat_n(String::new(), 14));
                r.push(variable_latency(op));
                r.push(
                    inst.constant_time
                        .iter()
                        .find(|c| Some(c.op) == op)
                        .and_then(|c| c.untrusted.clone())
                        .unwrap_or_default(),
                );
                r
            };
            let mut rows: Vec<Vec<String>> = Vec::new();
            for o in &inst.ops {
                let mut r = common(o.op.name());
                r.extend([
                    f(o.mean_cycles, 1),
                    f(o.mean_ns, 1),
                    f(o.ops_per_s, 3),
                    f(o.median_trial_ns, 1),
                    i(o.trials),
                    i(o.iters),
                    f(o.cv, 6),
                    i(inst.static_bytes),
                    i(o.baseline_rss_kib),
                    i(o.peak_rss_kib),
                    i(o.stack_bytes),
                ]);
                r.extend(sizes.iter().cloned());
                r.extend([f(o.hash_share, 6), f(o.drng_share, 6), f(o.counter_ghz, 4)]);
                r.extend([
                    f(o.median_cycles, 1),
                    f(o.ci_low_cycles, 1),
                    f(o.ci_high_cycles, 1),
                    i(o.rounds),
                    i(o.interfered_rounds),
                    f(o.instructions, 1),
                    f(o.cycles_per_instruction, 4),
                    f(o.hash_share_instr, 6),
                    f(o.drng_share_instr, 6),
                    f(o.yardstick_cycles, 1),
                    f(o.per_yardstick, 6),
                    variable_latency(Some(o.op)),
                    o.untrusted.clone().unwrap_or_default(),
                ]);
                rows.push(r);
            }
            for c in &inst.constant_time {
                if !inst.ops.iter().any(|o| o.op == c.op) {
                    rows.push(blank(Some(c.op)));
                }
            }
            if rows.is_empty() {
                rows.push(blank(None));
            }
            for mut r in rows {
                if profiles {
                    r.push(inst.build_flags.clone().unwrap_or_default());
                }
                out.push_str(&r.iter().map(|c| field(c)).collect::<Vec<_>>().join(","));
                out.push('\n');
            }
        }
    }
    out
}

impl Renderer for Csv {
    fn render_campaign(&self, _view: &CampaignView, results: &Results) -> Vec<(PathBuf, Vec<u8>)> {
        vec![(
            PathBuf::from("reports").join("results.csv"),
            to_csv(results).into_bytes(),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(field("a"), "a");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(field("a\nb\x1b[2J\u{202e}c"), "a\\nb\\x1b[2J\\u{202e}c");
    }

    #[test]
    fn header_is_exact() {
        let r = Results {
            schema: super::super::results::RESULTS_SCHEMA.into(),
            system: "s".into(),
            arch: "a".into(),
            started: None,
            finished: None,
            environment: None,
            submissions: vec![],
        };
        assert_eq!(
            to_csv(&r),
            "system,submission,instance,op,kat,mean_cycles,mean_ns,ops_per_s,median_trial_ns,\
             trials,iters,cv,static_bytes,baseline_rss_kib,peak_rss_kib,stack_bytes,pk,sk,ct,ss,\
             hash_share,drng_share,counter_ghz,median_cycles,ci_low_cycles,ci_high_cycles,\
             rounds,interfered_rounds,instructions,cycles_per_instruction,hash_share_instr,\
             drng_share_instr,yardstick_cycles,per_yardstick,variable_latency,untrusted\n"
        );
    }
}
