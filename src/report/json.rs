//! `reports/results.json`: [`Results`] as pretty JSON (schema `ngcc-pipe/results/1`,
//! documented in [`super::results::RESULTS_SCHEMA_DOC`]).

use std::path::PathBuf;

use super::results::Results;
use super::view::CampaignView;
use super::Renderer;

/// The JSON renderer.
pub struct Json;

/// Pretty JSON with a final newline. Serializing plain data cannot fail; should it ever,
/// the error text is written instead of panicking.
pub fn to_json(results: &Results) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(results)
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}").into_bytes());
    v.push(b'\n');
    v
}

impl Renderer for Json {
    fn render_campaign(&self, _view: &CampaignView, results: &Results) -> Vec<(PathBuf, Vec<u8>)> {
        vec![(
            PathBuf::from("reports").join("results.json"),
            to_json(results),
        )]
    }
}
