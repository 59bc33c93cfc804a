//! memcheck's XML output (`valgrind --tool=memcheck --xml=yes --xml-file=F`, protocol 4)
//! read with roxmltree into findings.
//!
//! Each `<error>` has a `<kind>`, a `<unique>` id and a `<stack>` of `<frame>`s (`obj`, `fn`,
//! `dir`, `file`, `line`; inlined functions get frames of their own); `<errorcounts>` says
//! how many times each unique error was seen. Errors of kind `UninitCondition` (a jump or
//! move depends on undefined data) and `UninitValue` (undefined data used as an address,
//! among others) become findings at the first frame inside the checked object, merged by
//! location (function, file, line) with their counts summed. Every other kind is counted
//! by kind; errors with no frame in the object (the runner's own code) are counted apart.

use std::collections::BTreeMap;

use super::Finding;
use crate::text::excerpt;

/// Error kinds that make a finding.
pub const SECRET_KINDS: [&str; 2] = ["UninitCondition", "UninitValue"];

/// What one memcheck run reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memcheck {
    /// Findings inside the object, sorted by file, line and function.
    pub findings: Vec<Finding>,
    /// Other error kinds (invalid reads, leaks, ...) with their counts, by kind.
    pub other: BTreeMap<String, u64>,
    /// Secret-dependent reports with no frame inside the object (the runner's own code).
    pub outside_object: u64,
    /// Whether valgrind wrote its closing status (`<state>FINISHED</state>`).
    pub finished: bool,
}

fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, tag: &str) -> Option<roxmltree::Node<'a, 'i>> {
    n.children().find(|c| c.has_tag_name(tag))
}

fn text<'a>(n: roxmltree::Node<'a, '_>, tag: &str) -> Option<&'a str> {
    child(n, tag).and_then(|c| c.text()).map(str::trim)
}

/// One frame of a stack.
struct Frame<'a> {
    obj: Option<&'a str>,
    function: Option<&'a str>,
    dir: Option<&'a str>,
    file: Option<&'a str>,
    line: Option<u32>,
}

impl Frame<'_> {
    fn in_object(&self, object_name: &str) -> bool {
        self.obj
            .and_then(|o| std::path::Path::new(o).file_name())
            .is_some_and(|n| n == object_name)
    }

    fn path(&self) -> String {
        match (self.dir, self.file) {
            (Some(d), Some(f)) => format!("{d}/{f}"),
            (None, Some(f)) => f.to_string(),
            _ => "?".to_string(),
        }
    }

    fn shown(&self) -> String {
        let base = self.file.unwrap_or("?");
        match self.line {
            Some(l) => format!("{} ({base}:{l})", self.function.unwrap_or("?")),
            None => format!("{} ({base})", self.function.unwrap_or("?")),
        }
    }
}

/// Why memcheck's XML output cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum MemcheckError {
    /// Not XML.
    #[error("memcheck's XML output does not parse: {0}")]
    Xml(#[from] roxmltree::Error),
    /// XML of something else.
    #[error("memcheck's XML output has root <{0}>, expected <valgrindoutput>")]
    Root(String),
    /// Another valgrind tool's output.
    #[error("valgrind ran `{0}`, expected memcheck")]
    Tool(String),
    /// An error count that is not a number.
    #[error("memcheck error count `{0}` is not a number")]
    Count(String),
}

/// Parse memcheck's XML; `object_name` is the file name of the checked object (frames are
/// matched by the file name of their `obj`, so the paths the sandbox shows do not matter).
pub fn parse_memcheck_xml(xml: &str, object_name: &str) -> Result<Memcheck, MemcheckError> {
    let doc = roxmltree::Document::parse(xml)?;
    let root = doc.root_element();
    if !root.has_tag_name("valgrindoutput") {
        return Err(MemcheckError::Root(excerpt(root.tag_name().name(), 60)));
    }
    if let Some(tool) = text(root, "tool") {
        if tool != "memcheck" {
            return Err(MemcheckError::Tool(excerpt(tool, 60)));
        }
    }
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    if let Some(ec) = child(root, "errorcounts") {
        for pair in ec.children().filter(|c| c.has_tag_name("pair")) {
            let (Some(u), Some(c)) = (text(pair, "unique"), text(pair, "count")) else {
                continue;
            };
            let c: u64 = c
                .parse()
                .map_err(|_| MemcheckError::Count(excerpt(c, 40)))?;
            counts.insert(u, c);
        }
    }
    let finished = root
        .children()
        .filter(|c| c.has_tag_name("status"))
        .any(|s| text(s, "state") == Some("FINISHED"));

    let mut out = Memcheck {
        finished,
        ..Memcheck::default()
    };
    // (file, line, function) -> finding
    let mut by_place: BTreeMap<(String, u32, String), Finding> = BTreeMap::new();
    for err in root.children().filter(|c| c.has_tag_name("error")) {
        let kind = text(err, "kind").unwrap_or("unknown");
        // A unique id missing from <errorcounts> was seen once (valgrind writes every
        // error's count there; a truncated file may lack it).
        let count = text(err, "unique")
            .and_then(|u| counts.get(u).copied())
            .unwrap_or(1);
        if !SECRET_KINDS.contains(&kind) {
            *out.other.entry(kind.to_string()).or_default() += count;
            continue;
        }
        let frames: Vec<Frame> = child(err, "stack")
            .map(|s| {
                s.children()
                    .filter(|c| c.has_tag_name("frame"))
                    .map(|f| Frame {
                        obj: text(f, "obj"),
                        function: text(f, "fn"),
                        dir: text(f, "dir"),
                        file: text(f, "file"),
                        line: text(f, "line").and_then(|l| l.parse().ok()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let Some(first) = frames.iter().position(|f| f.in_object(object_name)) else {
            out.outside_object += count;
            continue;
        };
        let top = &frames[first];
        let place = (
            top.path(),
            top.line.unwrap_or(0),
            top.function.unwrap_or("?").to_string(),
        );
        let f = by_place.entry(place.clone()).or_insert_with(|| Finding {
            kinds: Vec::new(),
            function: place.2.clone(),
            file: place.0.clone(),
            line: place.1,
            count: 0,
            contexts: 0,
            stack: frames[first..]
                .iter()
                .take_while(|f| f.in_object(object_name))
                .map(Frame::shown)
                .collect(),
            benign: None,
            source: None,
            compiler: false,
        });
        if !f.kinds.iter().any(|k| k == kind) {
            f.kinds.push(kind.to_string());
            f.kinds.sort();
        }
        f.count += count;
        f.contexts += 1;
    }
    out.findings = by_place.into_values().collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<?xml version="1.0"?>
<valgrindoutput>
<protocolversion>4</protocolversion>
<tool>memcheck</tool>
<status><state>RUNNING</state></status>
<error>
  <unique>0x0</unique><tid>1</tid><kind>UninitCondition</kind>
  <stack>
    <frame><ip>0x1</ip><obj>/out/build/k.vg.so</obj><fn>rej_uniform</fn><dir>/src</dir><file>indcpa.c</file><line>128</line></frame>
    <frame><ip>0x1</ip><obj>/out/build/k.vg.so</obj><fn>gen_matrix</fn><dir>/src</dir><file>indcpa.c</file><line>173</line></frame>
    <frame><ip>0x2</ip><obj>/usr/bin/kem-runner</obj><fn>main</fn></frame>
  </stack>
</error>
<error>
  <unique>0x1</unique><tid>1</tid><kind>UninitCondition</kind>
  <stack>
    <frame><ip>0x9</ip><obj>/lib/libc.so.6</obj><fn>memcmp</fn></frame>
    <frame><ip>0x1</ip><obj>/elsewhere/k.vg.so</obj><fn>rej_uniform</fn><dir>/src</dir><file>indcpa.c</file><line>128</line></frame>
  </stack>
</error>
<error>
  <unique>0x2</unique><tid>1</tid><kind>UninitValue</kind>
  <stack>
    <frame><ip>0x3</ip><obj>/out/build/k.vg.so</obj><fn>lookup</fn><file>t.c</file><line>7</line></frame>
  </stack>
</error>
<error>
  <unique>0x3</unique><tid>1</tid><kind>UninitCondition</kind>
  <stack><frame><ip>0x4</ip><obj>/usr/bin/kem-runner</obj><fn>check</fn></frame></stack>
</error>
<error>
  <unique>0x4</unique><tid>1</tid><kind>InvalidRead</kind>
  <stack><frame><ip>0x5</ip><obj>/out/build/k.vg.so</obj><fn>f</fn></frame></stack>
</error>
<status><state>FINISHED</state></status>
<errorcounts>
  <pair><count>10</count><unique>0x0</unique></pair>
  <pair><count>5</count><unique>0x1</unique></pair>
  <pair><count>2</count><unique>0x2</unique></pair>
  <pair><count>4</count><unique>0x3</unique></pair>
</errorcounts>
</valgrindoutput>
"#;

    #[test]
    fn merges_by_location_inside_the_object() {
        let m = parse_memcheck_xml(XML, "k.vg.so").unwrap();
        assert!(m.finished);
        assert_eq!(m.findings.len(), 2);
        let r = &m.findings[0];
        assert_eq!(
            (r.function.as_str(), r.file.as_str(), r.line),
            ("rej_uniform", "/src/indcpa.c", 128)
        );
        assert_eq!((r.count, r.contexts), (15, 2));
        assert_eq!(
            r.stack,
            ["rej_uniform (indcpa.c:128)", "gen_matrix (indcpa.c:173)"]
        );
        let t = &m.findings[1];
        assert_eq!(
            (t.function.as_str(), t.file.as_str(), t.line, t.count),
            ("lookup", "t.c", 7, 2)
        );
        assert_eq!(t.kinds, ["UninitValue"]);
        assert_eq!(m.outside_object, 4);
        // Missing from <errorcounts>: seen once.
        assert_eq!(m.other.get("InvalidRead"), Some(&1));
    }

    /// Real memcheck output (valgrind 3.19, kem-runner `ct`) kept in tests/fixtures/ct/memcheck.
    fn real(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/ct/memcheck")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn real_output_of_the_leaky_fixtures() {
        let m = parse_memcheck_xml(&real("branch-dec.xml"), "f-branch.so").unwrap();
        assert!(m.finished);
        assert_eq!(m.findings.len(), 1, "{:?}", m.findings);
        let f = &m.findings[0];
        assert_eq!(
            (
                f.function.as_str(),
                f.location().as_str(),
                f.kinds.as_slice()
            ),
            (
                "FIX_CTBRANCH_crypto_kem_dec",
                "kem.c:28",
                &["UninitCondition".to_string()][..]
            )
        );
        // Three runs of dec, one branch each.
        assert_eq!((f.count, f.contexts), (3, 1));
        let m = parse_memcheck_xml(&real("table-keygen.xml"), "f-table.so").unwrap();
        assert_eq!(m.findings.len(), 1, "{:?}", m.findings);
        let f = &m.findings[0];
        assert_eq!(
            (
                f.function.as_str(),
                f.location().as_str(),
                f.kinds.as_slice()
            ),
            (
                "FIX_CTTABLE_crypto_kem_keypair",
                "kem.c:25",
                &["UninitValue".to_string()][..]
            )
        );
        // 32 lookups per keygen, three keygens.
        assert_eq!(f.count, 96);
        let m = parse_memcheck_xml(&real("clean-dec.xml"), "f-clean.so").unwrap();
        assert!(m.finished && m.findings.is_empty() && m.other.is_empty());
        assert_eq!(m.outside_object, 0);
    }

    #[test]
    fn real_output_of_ml_kem_768_keygen() {
        let m = parse_memcheck_xml(&real("mlkem768-keygen.xml"), "k.vg.so").unwrap();
        let places: Vec<(String, String)> = m
            .findings
            .iter()
            .map(|f| (f.function.clone(), f.location()))
            .collect();
        assert_eq!(
            places,
            [
                ("rej_uniform".to_string(), "indcpa.c:128".to_string()),
                ("rej_uniform".to_string(), "indcpa.c:131".to_string())
            ]
        );
        assert!(m.findings[0].stack[1].starts_with("PQCLEAN_MLKEM768_CLEAN_gen_matrix"));
        // Another object name: nothing is inside it.
        let other = parse_memcheck_xml(&real("mlkem768-keygen.xml"), "x.so").unwrap();
        assert!(other.findings.is_empty());
        assert_eq!(
            other.outside_object,
            m.findings.iter().map(|f| f.count).sum::<u64>()
        );
    }

    #[test]
    fn bad_output_is_an_error_not_a_panic() {
        assert!(parse_memcheck_xml("", "k.so")
            .unwrap_err()
            .to_string()
            .contains("does not parse"));
        assert!(parse_memcheck_xml("<valgrindoutput><error>", "k.so").is_err());
        assert!(parse_memcheck_xml("<other/>", "k.so")
            .unwrap_err()
            .to_string()
            .contains("expected <valgrindoutput>"));
        assert!(parse_memcheck_xml(
            "<valgrindoutput><tool>callgrind</tool></valgrindoutput>",
            "k.so"
        )
        .unwrap_err()
        .to_string()
        .contains("callgrind"));
        let m = parse_memcheck_xml("<valgrindoutput/>", "k.so").unwrap();
        assert!(!m.finished && m.findings.is_empty());
    }
}
