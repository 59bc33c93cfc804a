//! `reports/results.json`: [`Results`] as pretty JSON (schema `ngcc-pipe/results/1`,
//! documented in [`super::results::RESULTS_SCHEMA_DOC`]).

use std::path::PathBuf;

use super::results::Results;
use super::view::CampaignView;
use super::Renderer;

/// The JSON renderer.
pub struct Json;

/// Pretty JSON with a final newline. Serializing plain data cannot fail; should it ever,
/// the error text is written instead of panicking. Bidi controls and line separators in
/// strings (a KEM's or a manifest's text) are written as `\uXXXX` escapes: the same JSON
/// value, but no raw reordering character for whoever reads the file.
pub fn to_json(results: &Results) -> Vec<u8> {
    let text =
        serde_json::to_string_pretty(results).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    let mut v = escape_bidi(&text).into_bytes();
    v.push(b'\n');
    v
}

/// JSON text with every bidi control or separator written as a `\uXXXX` escape (they
/// can only occur inside strings, where the escape means the same character).
pub fn escape_bidi(json: &str) -> String {
    if !json.chars().any(crate::text::is_bidi_or_separator) {
        return json.to_string();
    }
    let mut o = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if crate::text::is_bidi_or_separator(c) {
            o.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            o.push(c);
        }
    }
    o
}

impl Renderer for Json {
    fn render_campaign(&self, _view: &CampaignView, results: &Results) -> Vec<(PathBuf, Vec<u8>)> {
        vec![(
            PathBuf::from("reports").join("results.json"),
            to_json(results),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_characters_are_escaped_and_mean_the_same() {
        let v = serde_json::json!({ "reason": "FAIL \u{202e}SSAP\u{2066}x\u{2028}" });
        let text = escape_bidi(&serde_json::to_string(&v).unwrap());
        assert!(
            !text.chars().any(crate::text::is_bidi_or_separator),
            "{text}"
        );
        assert!(text.contains("\\u202e"), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
    }
}
