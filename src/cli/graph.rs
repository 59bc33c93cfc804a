//! `ngcc-pipe graph`: export the step graph as DOT, Mermaid or JSON.

use std::path::Path;

use super::{GraphArgs, Level};
use crate::error::Error;
use crate::graph::{self, Format, Plan};

pub(super) fn exec(args: GraphArgs, outputs: Option<&Path>) -> Result<(), Error> {
    let GraphArgs {
        pipeline,
        format,
        only,
        level,
    } = args;
    let c = super::load(&pipeline, outputs)?;
    let plan = Plan::build(&c);
    let sel = plan.select(&only).map_err(Error::Input)?;
    let step = level == Level::Step;
    let text = match format {
        Format::Dot => graph::to_dot(&plan, &sel, step),
        Format::Mermaid => graph::to_mermaid(&plan, &sel, step),
        Format::Json => graph::to_json(&plan, &sel, step),
    };
    super::print(&text)
}
