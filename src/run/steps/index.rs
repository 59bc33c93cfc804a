//! `index`: the campaign index, results.csv/json and the site's front page, once per
//! campaign after every other step. Its inputs are the keys of every submission's steps
//! (its dependencies) and the renderer's version.

use super::{Done, KindSpec, Step};
use crate::record::{ReportData, StepData};

/// The `index` kind: once per campaign.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        _c: &crate::model::Campaign,
        _node: &crate::graph::Node,
        _spec: &crate::model::StepSpec,
        _facts: &crate::run::keys::Facts,
        m: &mut std::collections::BTreeMap<String, String>,
    ) {
        // A newer ngcc-pipe renders the same records anew.
        m.insert("renderer".into(), crate::tool_version());
    }

    fn run(&self, step: &mut Step) -> Done {
        let ctx = step.ctx;
        let view = match crate::report::CampaignView::load_with(
            &ctx.campaign,
            &ctx.out,
            crate::run::campaign::for_reports(ctx),
        ) {
            Ok(v) => v,
            Err(e) => return Done::failed(format!("cannot read the records: {e}")),
        };
        let files = crate::report::render_campaign(&view);
        if let Err(e) = crate::report::write_all(&ctx.out, &files) {
            return Done::failed(format!("cannot write the index: {e}"));
        }
        let files: Vec<_> = files.into_iter().map(|(p, _)| p).collect();
        step.artefacts.extend(files.iter().cloned());
        Done::ok(StepData::Report(ReportData { files }))
    }
}
