//! `ngcc-pipe check`: validate a pipeline and every manifest it pulls in (with `--deep`,
//! also the fetched sources), reporting every problem at once.

use std::path::Path;

use super::CheckArgs;
use crate::error::Error;
use crate::graph::Plan;
use crate::run;

pub(super) fn exec(args: CheckArgs, outputs: Option<&Path>) -> Result<(), Error> {
    let CheckArgs { pipeline, deep } = args;
    let (loaded, mut problems) = crate::dsl::check_campaign(&pipeline);
    let mut c = match loaded {
        Ok(c) => c,
        Err(errors) => {
            problems.extend(errors);
            return Err(Error::Campaign(problems));
        }
    };
    super::set_outputs(&mut c, outputs);
    if deep {
        let scratch = c.outputs.join("cache").join("crates");
        let roots = c
            .submissions
            .iter()
            .map(|s| {
                (
                    s.id.clone(),
                    run::steps::source::resolve_root(&s.source, &scratch),
                )
            })
            .collect();
        let linker = run::link_check::EngineLinker::new().map_err(|source| Error::Io {
            what: "a temporary folder for the sandbox probe".into(),
            source,
        })?;
        let report = crate::dsl::deep_check(&c, &roots, &crate::dsl::RealFs::new(), &linker);
        let mut listing = String::new();
        for line in &report.listing {
            listing.push_str(&format!("{line}\n"));
        }
        super::print(&listing)?;
        problems.extend(report.problems);
    }
    if problems.iter().any(|d| !d.is_note()) {
        return Err(Error::Campaign(problems));
    }
    if !problems.is_empty() {
        eprint!("{}", problems.render(super::color()));
    }
    let instances: usize = c.submissions.iter().map(|s| s.instances.len()).sum();
    let plan = Plan::build(&c);
    super::print(&format!(
        "ok: system `{}`, {} submissions, {} instances, {} steps\n",
        c.system.name,
        c.submissions.len(),
        instances,
        plan.graph.node_count()
    ))
}
