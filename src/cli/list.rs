//! `ngcc-pipe list`: the campaign's submissions, instances or steps, one a line.

use std::fmt::Write as _;
use std::path::Path;

use super::{ListArgs, ListWhat};
use crate::error::Error;
use crate::graph::Plan;

pub(super) fn exec(args: ListArgs, outputs: Option<&Path>) -> Result<(), Error> {
    let c = super::load(&args.pipeline, outputs)?;
    let mut text = String::new();
    match args.what {
        ListWhat::Submissions => {
            for s in &c.submissions {
                let _ = writeln!(
                    text,
                    "{:<20} {:<24} {} instances  {}",
                    s.id,
                    s.meta.algorithm,
                    s.instances.len(),
                    s.manifest_path.display()
                );
            }
        }
        ListWhat::Instances => {
            for s in &c.submissions {
                for i in &s.instances {
                    let _ = writeln!(text, "{}/{:<32} {}  ({})", s.id, i.id, i.dir, i.namespace);
                }
            }
        }
        ListWhat::Steps => {
            let plan = Plan::build(&c);
            for ix in plan.execution_order() {
                let n = &plan.graph[ix];
                let _ = writeln!(
                    text,
                    "{}{}",
                    n.id,
                    if n.exclusive { "  [exclusive]" } else { "" }
                );
            }
        }
    }
    super::print(&text)
}
