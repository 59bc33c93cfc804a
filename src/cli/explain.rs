//! `ngcc-pipe explain`: the decision for one step (run or up to date, and why), with
//! every changed input named.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::Error;
use crate::run::ctx::Purpose;
use crate::run::decide::{decide_all, Decision};
use crate::run::{keys, Ctx};

pub(super) fn exec(pipeline: &Path, step: &str, outputs: Option<&Path>) -> Result<(), Error> {
    let c = super::load(pipeline, outputs)?;
    let ctx = Ctx::new(c, Purpose::Plan)?;
    super::print(&explain(&ctx, step)?)
}

/// The decision for one step, with every changed input named.
fn explain(ctx: &Ctx, id: &str) -> Result<String, Error> {
    let Some(&ix) = ctx.plan.by_id.get(id) else {
        let mut close: Vec<&String> = ctx
            .plan
            .by_id
            .keys()
            .filter(|k| k.contains(id) || id.contains(k.as_str()))
            .collect();
        close.sort();
        close.truncate(5);
        return Err(Error::Input(format!(
            "no step `{id}`{}",
            if close.is_empty() {
                "; see `ngcc-pipe list <pipeline> steps`".to_string()
            } else {
                format!(
                    "; did you mean {}?",
                    close
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        )));
    };
    // Decide every ancestor first, so "upstream runs" is known.
    let ancestors = ctx
        .plan
        .select(&[globset::escape(id)])
        .map_err(Error::Input)?;
    let decision = decide_all(ctx, &ancestors, &[])[&ix].clone();
    let node = ctx.node(ix);
    let mut o = String::new();
    let _ = writeln!(o, "step {id}");
    match &decision {
        Decision::UpToDate(s) => {
            let _ = writeln!(o, "  up to date (last run {})", s.name());
        }
        Decision::Run(why) => {
            let _ = writeln!(o, "  would run: {why}");
        }
    }
    let current = &ctx.inputs[ix.index()];
    match ctx.read_record(node) {
        None => {
            let _ = writeln!(o, "  no record at {}", ctx.record_path(node).display());
        }
        Some(rec) => {
            let _ = writeln!(
                o,
                "  record {} ({}, finished {})",
                ctx.record_path(node).display(),
                rec.status.name(),
                rec.finished
            );
            if let Some(r) = &rec.reason {
                let _ = writeln!(o, "  reason: {r}");
            }
            for name in keys::changed(&rec.inputs, current) {
                let _ = writeln!(
                    o,
                    "  input `{name}`: {} -> {}",
                    rec.inputs.get(&name).map_or("(absent)", String::as_str),
                    current.get(&name).map_or("(absent)", String::as_str)
                );
            }
        }
    }
    let _ = writeln!(o, "  inputs:");
    for (k, v) in current {
        let _ = writeln!(o, "    {k}: {v}");
    }
    Ok(o)
}
