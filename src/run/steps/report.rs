//! `report`: render the submission's Markdown report and site page from its records;
//! `index`: the campaign index, results.csv/json and the site's front page. (At the end of
//! every run all of them are rendered once more, so the campaign's end time is final.)

use super::{Done, Step};
use crate::record::{ReportData, StepData};

pub fn run(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let view = match crate::report::CampaignView::load(&ctx.campaign, &ctx.out) {
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

pub fn run_index(step: &mut Step) -> Done {
    let ctx = step.ctx;
    let view = match crate::report::CampaignView::load(&ctx.campaign, &ctx.out) {
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
