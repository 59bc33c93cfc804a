//! NIST KAT `.rsp` files: parsing and "where do two files first differ".
//!
//! The format is line based: `count = N` opens an entry, then `name = HEX` fields follow
//! (`seed`, `pk`, `sk`, `ct`, `ss` for KEMs). Blank lines separate entries and `#` lines are
//! comments (liboqs and NIST print `# ML-KEM-768` headers). Each line is parsed with nom;
//! every error names the 1-based line number.
//!
//! [`first_difference`] compares a generated file with a reference one entry by entry and
//! field by field and names the first differing count, field and byte offset inside the
//! decoded value. Structural differences are named too: the `field` of the returned
//! [`RspDiff`] then carries the explanation, e.g. `ct (missing in generated)` or
//! `count (extra in generated)`. [`compare`] gives the same result with a full sentence.

use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::character::complete::{char, digit1, space0};
use nom::combinator::{all_consuming, map, map_res, rest};
use nom::sequence::{preceded, separated_pair, terminated, tuple};
use nom::IResult;

use crate::record::RspDiff;

/// One field of an entry: name, decoded value and the line it was on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RspField {
    pub name: String,
    pub value: Vec<u8>,
    /// 1-based line number.
    pub line: usize,
}

/// One `count = N` entry with its fields in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RspEntry {
    pub count: u32,
    /// 1-based line number of the `count` line.
    pub line: usize,
    pub fields: Vec<RspField>,
}

impl RspEntry {
    /// The decoded value of field `name`, if present.
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.value.as_slice())
    }
}

/// What one line of an `.rsp` file is.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    Blank,
    Comment,
    Count(u32),
    Field(&'a str, &'a str),
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn line_kind(input: &str) -> IResult<&str, Line<'_>> {
    let blank = map(all_consuming(space0), |_| Line::Blank);
    let comment = map(preceded(tuple((space0, char('#'))), rest), |_| {
        Line::Comment
    });
    let count = map(
        all_consuming(tuple((
            space0,
            tag("count"),
            space0,
            char('='),
            space0,
            map_res(digit1, str::parse::<u32>),
            space0,
        ))),
        |(_, _, _, _, _, n, _)| Line::Count(n),
    );
    let field = map(
        all_consuming(terminated(
            separated_pair(
                preceded(space0, take_while1(is_name_char)),
                tuple((space0, char('='), space0)),
                take_while(|c: char| !c.is_whitespace()),
            ),
            space0,
        )),
        |(name, value)| Line::Field(name, value),
    );
    alt((blank, comment, count, field))(input)
}

fn decode_hex(value: &str, line: usize, name: &str) -> Result<Vec<u8>, String> {
    if !value.len().is_multiple_of(2) {
        return Err(format!(
            "line {line}: `{name}` has an odd number of hex digits ({})",
            value.len()
        ));
    }
    hex::decode(value).map_err(|e| format!("line {line}: `{name}` is not hex: {e}"))
}

/// Parse the text of an `.rsp` file.
pub fn parse_rsp(text: &str) -> Result<Vec<RspEntry>, String> {
    let mut entries: Vec<RspEntry> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let kind = match line_kind(raw) {
            Ok((_, kind)) => kind,
            Err(_) => {
                let shown = crate::text::excerpt(raw, 60);
                return Err(format!(
                    "line {line}: expected `name = HEX`, `count = N`, a `#` comment or a blank line, found `{shown}`"
                ));
            }
        };
        match kind {
            Line::Blank | Line::Comment => {}
            Line::Count(count) => entries.push(RspEntry {
                count,
                line,
                fields: Vec::new(),
            }),
            Line::Field("count", value) => {
                return Err(format!(
                    "line {line}: `count` must be a decimal number, found `{}`",
                    crate::text::excerpt(value, 40)
                ))
            }
            Line::Field(name, value) => {
                let shown = crate::text::excerpt(name, 40);
                let Some(entry) = entries.last_mut() else {
                    return Err(format!(
                        "line {line}: field `{shown}` before the first `count = N` line"
                    ));
                };
                if let Some(prev) = entry.fields.iter().find(|f| f.name == name) {
                    return Err(format!(
                        "line {line}: field `{shown}` repeated in count {} (first on line {})",
                        entry.count, prev.line
                    ));
                }
                let value = decode_hex(value, line, &shown)?;
                entry.fields.push(RspField {
                    name: name.to_string(),
                    value,
                    line,
                });
            }
        }
    }
    Ok(entries)
}

/// How two `.rsp` files first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffKind {
    /// Same field, different bytes (or lengths: the offset is then the shorter length).
    Bytes,
    /// Entry numbers disagree at the same position.
    CountNumber,
    /// The reference has an entry (or field) that the generated file lacks.
    MissingInGenerated,
    /// The generated file has an entry (or field) that the reference lacks.
    ExtraInGenerated,
    /// Same entries and values; the texts differ only in formatting (case, spaces, comments).
    FormattingOnly,
}

/// The first difference with a sentence explaining it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub diff: RspDiff,
    pub kind: DiffKind,
    /// "count 3, field `ct`: first differing byte at offset 17 (generated line 23, reference line 23)".
    pub message: String,
}

/// Where `generated` first differs from `reference`; `None` when the texts are identical.
///
/// Errors (with the file and line) when either text is not a valid `.rsp` file.
pub fn first_difference(generated: &str, reference: &str) -> Result<Option<RspDiff>, String> {
    Ok(compare(generated, reference)?.map(|d| d.diff))
}

/// [`first_difference`] with the kind of difference and a full sentence.
pub fn compare(generated: &str, reference: &str) -> Result<Option<Difference>, String> {
    if generated == reference {
        return Ok(None);
    }
    let gen = parse_rsp(generated).map_err(|e| format!("generated .rsp: {e}"))?;
    let refr = parse_rsp(reference).map_err(|e| format!("reference .rsp: {e}"))?;
    for i in 0..gen.len().max(refr.len()) {
        let (g, r) = match (gen.get(i), refr.get(i)) {
            (Some(g), Some(r)) => (g, r),
            (None, Some(r)) => {
                return Ok(Some(structural(
                    r.count,
                    "count",
                    DiffKind::MissingInGenerated,
                    format!(
                        "count {} (reference line {}) is missing in the generated file, which has {} entries",
                        r.count,
                        r.line,
                        gen.len()
                    ),
                )))
            }
            (Some(g), None) => {
                return Ok(Some(structural(
                    g.count,
                    "count",
                    DiffKind::ExtraInGenerated,
                    format!(
                        "count {} (generated line {}) is extra: the reference has {} entries",
                        g.count,
                        g.line,
                        refr.len()
                    ),
                )))
            }
            (None, None) => unreachable!("index below the longer length"),
        };
        if g.count != r.count {
            return Ok(Some(Difference {
                diff: RspDiff {
                    count: r.count,
                    field: "count".to_string(),
                    offset: 0,
                },
                kind: DiffKind::CountNumber,
                message: format!(
                    "entry {} is count {} in the generated file (line {}) but count {} in the reference (line {})",
                    i + 1,
                    g.count,
                    g.line,
                    r.count,
                    r.line
                ),
            }));
        }
        if let Some(d) = compare_entry(g, r) {
            return Ok(Some(d));
        }
    }
    let line = first_differing_line(generated, reference);
    let count = entry_at_line(&refr, line).unwrap_or(0);
    Ok(Some(Difference {
        diff: RspDiff {
            count,
            field: format!("formatting (line {line})"),
            offset: 0,
        },
        kind: DiffKind::FormattingOnly,
        message: format!(
            "same counts and values, but the texts differ in formatting from line {line} (hex case, spaces, comments or line endings)"
        ),
    }))
}

fn structural(count: u32, field: &str, kind: DiffKind, message: String) -> Difference {
    let what = match kind {
        DiffKind::MissingInGenerated => "missing in generated",
        _ => "extra in generated",
    };
    Difference {
        diff: RspDiff {
            count,
            field: format!("{field} ({what})"),
            offset: 0,
        },
        kind,
        message,
    }
}

fn compare_entry(g: &RspEntry, r: &RspEntry) -> Option<Difference> {
    let count = r.count;
    for j in 0..g.fields.len().max(r.fields.len()) {
        match (g.fields.get(j), r.fields.get(j)) {
            (Some(gf), Some(rf)) if gf.name == rf.name => {
                if gf.value == rf.value {
                    continue;
                }
                let offset = gf
                    .value
                    .iter()
                    .zip(&rf.value)
                    .position(|(a, b)| a != b)
                    .unwrap_or(gf.value.len().min(rf.value.len()));
                let lengths = if gf.value.len() != rf.value.len() {
                    format!(
                        "; lengths {} (generated) and {} (reference) bytes",
                        gf.value.len(),
                        rf.value.len()
                    )
                } else {
                    String::new()
                };
                return Some(Difference {
                    diff: RspDiff {
                        count,
                        field: gf.name.clone(),
                        offset,
                    },
                    kind: DiffKind::Bytes,
                    message: format!(
                        "count {count}, field `{}`: first differing byte at offset {offset} (generated line {}, reference line {}){lengths}",
                        gf.name, gf.line, rf.line
                    ),
                });
            }
            (gf, rf) => {
                // Names differ at this position, or one side ran out of fields: report the
                // reference field the generated file lacks, else the generated extra one.
                if let Some(rf) = rf.filter(|rf| g.field(&rf.name).is_none()) {
                    return Some(structural(
                        count,
                        &rf.name,
                        DiffKind::MissingInGenerated,
                        format!(
                            "count {count}: field `{}` (reference line {}) is missing in the generated file",
                            rf.name, rf.line
                        ),
                    ));
                }
                if let Some(gf) = gf.filter(|gf| r.field(&gf.name).is_none()) {
                    return Some(structural(
                        count,
                        &gf.name,
                        DiffKind::ExtraInGenerated,
                        format!(
                            "count {count}: field `{}` (generated line {}) is not in the reference",
                            gf.name, gf.line
                        ),
                    ));
                }
                // Both names exist on both sides: the order differs.
                let (gf, rf) = (gf?, rf?);
                return Some(Difference {
                    diff: RspDiff {
                        count,
                        field: format!("{} (order differs)", rf.name),
                        offset: 0,
                    },
                    kind: DiffKind::Bytes,
                    message: format!(
                        "count {count}: fields in a different order: `{}` on generated line {}, `{}` on reference line {}",
                        gf.name, gf.line, rf.name, rf.line
                    ),
                });
            }
        }
    }
    None
}

fn first_differing_line(a: &str, b: &str) -> usize {
    let mut la = a.lines();
    let mut lb = b.lines();
    let mut n = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            (None, None) => return n,
            _ => return n,
        }
    }
}

fn entry_at_line(entries: &[RspEntry], line: usize) -> Option<u32> {
    entries
        .iter()
        .take_while(|e| e.line <= line)
        .last()
        .map(|e| e.count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small `.rsp` in PQClean/liboqs layout: `counts` entries, 4-byte ct.
    fn sample(counts: u32) -> String {
        let mut s = String::from("# ML-KEM-768\n\n");
        for c in 0..counts {
            s.push_str(&format!("count = {c}\n"));
            s.push_str(&format!("seed = {:02X}{:02X}\n", c, c + 1));
            s.push_str("pk = 0A0B0C\n");
            s.push_str("sk = 0D0E\n");
            s.push_str(&format!("ct = 1122{:02X}44\n", c));
            s.push_str("ss = FFEE\n\n");
        }
        s
    }

    #[test]
    fn parses_entries_fields_and_header() {
        let entries = parse_rsp(&sample(2)).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].count, 1);
        assert_eq!(entries[1].line, 10);
        let names: Vec<_> = entries[0].fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["seed", "pk", "sk", "ct", "ss"]);
        assert_eq!(entries[1].field("ct"), Some(&[0x11, 0x22, 0x01, 0x44][..]));
        assert_eq!(entries[0].field("pk"), Some(&[0x0a, 0x0b, 0x0c][..]));
    }

    #[test]
    fn crlf_and_lower_case_hex_parse() {
        let e = parse_rsp("count = 0\r\npk = abCD\r\n").unwrap();
        assert_eq!(e[0].field("pk"), Some(&[0xab, 0xcd][..]));
    }

    #[test]
    fn identical_texts_have_no_difference() {
        assert_eq!(first_difference(&sample(5), &sample(5)).unwrap(), None);
    }

    #[test]
    fn one_byte_of_ct_in_count_3() {
        let reference = sample(5);
        // count 3's ct is 11220344; change its last byte.
        let generated = reference.replace("ct = 11220344", "ct = 11220345");
        assert_ne!(generated, reference);
        let d = compare(&generated, &reference).unwrap().unwrap();
        assert_eq!(
            d.diff,
            RspDiff {
                count: 3,
                field: "ct".into(),
                offset: 3
            }
        );
        assert_eq!(d.kind, DiffKind::Bytes);
        assert!(d.message.contains("line 28"), "{}", d.message);
    }

    #[test]
    fn shorter_field_reports_the_shorter_length() {
        let reference = sample(1);
        let generated = reference.replace("pk = 0A0B0C", "pk = 0A0B");
        let d = compare(&generated, &reference).unwrap().unwrap();
        assert_eq!(d.diff.field, "pk");
        assert_eq!(d.diff.offset, 2);
        assert!(d
            .message
            .contains("lengths 2 (generated) and 3 (reference)"));
    }

    #[test]
    fn missing_and_extra_counts_are_named() {
        let d = compare(&sample(2), &sample(3)).unwrap().unwrap();
        assert_eq!(d.kind, DiffKind::MissingInGenerated);
        assert_eq!(d.diff.count, 2);
        assert_eq!(d.diff.field, "count (missing in generated)");
        let d = compare(&sample(3), &sample(2)).unwrap().unwrap();
        assert_eq!(d.kind, DiffKind::ExtraInGenerated);
        assert_eq!(d.diff.count, 2);
    }

    #[test]
    fn missing_and_extra_fields_are_named() {
        let reference = sample(2);
        let generated = reference.replacen("ss = FFEE\n", "", 1);
        let d = compare(&generated, &reference).unwrap().unwrap();
        assert_eq!(d.diff.count, 0);
        assert_eq!(d.diff.field, "ss (missing in generated)");
        let generated = reference.replacen("ss = FFEE\n", "ss = FFEE\nxx = 00\n", 1);
        let d = compare(&generated, &reference).unwrap().unwrap();
        assert_eq!(d.diff.field, "xx (extra in generated)");
    }

    #[test]
    fn formatting_only_difference_is_not_silent() {
        let reference = sample(2);
        let generated = reference.replace("pk = 0A0B0C", "pk = 0a0b0c");
        let d = compare(&generated, &reference).unwrap().unwrap();
        assert_eq!(d.kind, DiffKind::FormattingOnly);
        assert_eq!(d.diff.count, 0);
        assert_eq!(d.diff.field, "formatting (line 5)");
    }

    #[test]
    fn errors_name_the_line() {
        let err = parse_rsp("count = 0\npk = 0A0\n").unwrap_err();
        assert!(err.starts_with("line 2:") && err.contains("odd"), "{err}");
        let err = parse_rsp("pk = 00\n").unwrap_err();
        assert!(
            err.contains("line 1") && err.contains("before the first"),
            "{err}"
        );
        let err = parse_rsp("count = 0\npk = 0G\n").unwrap_err();
        assert!(
            err.starts_with("line 2:") && err.contains("not hex"),
            "{err}"
        );
        let err = parse_rsp("count = 0\nthis is not rsp\n").unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
        let err = parse_rsp("count = x1\n").unwrap_err();
        assert!(err.starts_with("line 1:"), "{err}");
        let err = compare("count = 0\n", "count = 0\npk = 1\n").unwrap_err();
        assert!(err.starts_with("reference .rsp: line 2"), "{err}");
    }

    #[test]
    fn never_panics_on_arbitrary_text() {
        for text in [
            "",
            "=",
            "count =",
            "count = 99999999999",
            "\u{feff}count = 0",
            "a=b=c",
        ] {
            let _ = parse_rsp(text);
        }
    }

    mod props {
        use super::super::*;
        use proptest::prelude::*;

        fn render(entries: &[Vec<Vec<u8>>]) -> String {
            let names = ["seed", "pk", "sk", "ct", "ss"];
            let mut s = String::from("# prop\n\n");
            for (c, fields) in entries.iter().enumerate() {
                s.push_str(&format!("count = {c}\n"));
                for (n, v) in names.iter().zip(fields) {
                    s.push_str(&format!("{n} = {}\n", hex::encode_upper(v)));
                }
                s.push('\n');
            }
            s
        }

        proptest! {
            #[test]
            fn one_flipped_byte_is_found_exactly(
                entries in prop::collection::vec(
                    prop::collection::vec(prop::collection::vec(any::<u8>(), 1..40), 5),
                    1..6,
                ),
                pick in any::<(usize, usize, usize)>(),
            ) {
                let count = pick.0 % entries.len();
                let field = pick.1 % 5;
                let offset = pick.2 % entries[count][field].len();
                let mut changed = entries.clone();
                changed[count][field][offset] ^= 0x01;
                let d = first_difference(&render(&changed), &render(&entries)).unwrap().unwrap();
                let names = ["seed", "pk", "sk", "ct", "ss"];
                prop_assert_eq!(d, RspDiff { count: count as u32, field: names[field].to_string(), offset });
                prop_assert_eq!(first_difference(&render(&entries), &render(&entries)).unwrap(), None);
            }

            #[test]
            fn parser_never_panics(text in "\\PC{0,200}") {
                let _ = parse_rsp(&text);
                let _ = compare(&text, "count = 0\n");
            }
        }
    }
}
