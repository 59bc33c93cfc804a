//! `report`: render the submission's Markdown report and site page from its records, with
//! the campaign record as the records so far say it (`run::campaign::for_reports`).

use super::{Done, KindSpec, Step};
use crate::record::{ReportData, StepData};

/// The `report` kind: per submission, after every other step of it.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &crate::model::Campaign,
        node: &crate::graph::Node,
        _spec: &crate::model::StepSpec,
        _facts: &crate::run::keys::Facts,
        m: &mut std::collections::BTreeMap<String, String>,
    ) {
        m.insert(
            "meta".into(),
            crate::run::keys::json(&c.submissions[node.submission].meta),
        );
        // A newer ngcc-pipe renders the same records anew.
        m.insert("renderer".into(), crate::tool_version());
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }
}

fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let view = match crate::report::CampaignView::load_with(
        &ctx.campaign,
        &ctx.out,
        crate::run::campaign::for_reports(ctx),
    ) {
        Ok(v) => v,
        Err(e) => return Done::failed(format!("cannot read the records: {e}")),
    };
    let files = crate::report::render_submission(&view, &step.submission().id);
    if let Err(e) = crate::report::write_all(&ctx.out, &files) {
        return Done::failed(format!("cannot write the report: {e}"));
    }
    let files: Vec<_> = files.into_iter().map(|(p, _)| p).collect();
    step.artefacts.extend(files.iter().cloned());
    Done::ok(StepData::Report(ReportData { files }))
}
