//! Parse NIST KAT response (`.rsp`) text and locate the first difference between two files.
//!
//! Used to turn a hash MISMATCH into "count 3, field ct, byte 17". The format is lines of
//! `name = value`; `count = N` starts a record; blank lines and `#` comments (headers of
//! submitted files, e.g. `# ML-KEM-768`) are skipped.

use nom::{
    bytes::complete::take_while1,
    character::complete::{char, space0},
    combinator::{all_consuming, map, rest},
    sequence::{delimited, preceded, separated_pair},
    IResult,
};
use std::fmt;

/// One `name = value` line, with the byte offset of its value in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RspField {
    /// Field name (`seed`, `pk`, `sk`, `ct`, `ss`, ...).
    pub name: String,
    /// Value as written (hex for the KEM fields).
    pub value: String,
    /// Byte offset of the value's first character in the whole text.
    pub offset: usize,
}

/// One `count = N` record and the fields after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RspRecord {
    /// The count number.
    pub count: u64,
    /// Fields in file order, `count` excluded.
    pub fields: Vec<RspField>,
}

/// `name = value` (the value runs to the end of the line, trailing blanks dropped).
fn assignment(line: &str) -> IResult<&str, (&str, &str)> {
    all_consuming(separated_pair(
        delimited(
            space0,
            take_while1(|c: char| c.is_ascii_alphanumeric() || c == '_'),
            space0,
        ),
        char('='),
        map(preceded(space0, rest), str::trim_end),
    ))(line)
}

/// Parse `.rsp` text. Errors name the 1-based line.
pub fn parse_rsp(text: &str) -> Result<Vec<RspRecord>, String> {
    let mut records: Vec<RspRecord> = Vec::new();
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let (_, (name, value)) = assignment(line)
            .map_err(|_| format!("line {}: expected `name = value`, found `{line}`", i + 1))?;
        if name == "count" {
            let count = value
                .parse()
                .map_err(|_| format!("line {}: `count = {value}` is not a number", i + 1))?;
            records.push(RspRecord {
                count,
                fields: Vec::new(),
            });
            continue;
        }
        let Some(rec) = records.last_mut() else {
            return Err(format!("line {}: `{name}` before the first `count`", i + 1));
        };
        // `value` is a slice of `text`: its offset is the pointer distance.
        let value_at = value.as_ptr() as usize - text.as_ptr() as usize;
        rec.fields.push(RspField {
            name: name.to_string(),
            value: value.to_string(),
            offset: value_at,
        });
    }
    Ok(records)
}

/// Where two `.rsp` texts first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RspDiff {
    /// A field's value differs.
    Field {
        /// Count of the record.
        count: u64,
        /// Field name.
        field: String,
        /// Index of the first differing byte within the field's hex-decoded value.
        byte: usize,
        /// Byte offset of that hex digit in the generated text.
        offset: usize,
    },
    /// Field names or order differ within a count.
    Layout {
        /// Count of the record.
        count: u64,
        /// What differs.
        detail: String,
    },
    /// One file has fewer records.
    Missing {
        /// First count present in one file only.
        count: u64,
        /// True when the generated file is the shorter one.
        in_generated: bool,
    },
}

impl fmt::Display for RspDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RspDiff::Field {
                count,
                field,
                byte,
                offset,
            } => write!(
                f,
                "count {count}, field {field}: first differing byte {byte} (file offset {offset})"
            ),
            RspDiff::Layout { count, detail } => write!(f, "count {count}: {detail}"),
            RspDiff::Missing {
                count,
                in_generated,
            } => {
                let which = if *in_generated {
                    "generated"
                } else {
                    "reference"
                };
                write!(f, "count {count} is missing from the {which} file")
            }
        }
    }
}

/// First difference between a reference and a generated `.rsp`, `None` when they hold the
/// same records and fields (comments and blank lines are ignored).
pub fn first_difference(reference: &str, generated: &str) -> Result<Option<RspDiff>, String> {
    let a = parse_rsp(reference).map_err(|e| format!("reference .rsp: {e}"))?;
    let b = parse_rsp(generated).map_err(|e| format!("generated .rsp: {e}"))?;
    for (ra, rb) in a.iter().zip(&b) {
        if ra.count != rb.count {
            return Ok(Some(RspDiff::Layout {
                count: ra.count,
                detail: format!(
                    "reference has count {} where the generated file has count {}",
                    ra.count, rb.count
                ),
            }));
        }
        for (i, (fa, fb)) in ra.fields.iter().zip(&rb.fields).enumerate() {
            if fa.name != fb.name {
                return Ok(Some(RspDiff::Layout {
                    count: ra.count,
                    detail: format!(
                        "field {} is `{}` in the reference, `{}` generated",
                        i + 1,
                        fa.name,
                        fb.name
                    ),
                }));
            }
            if !fa.value.eq_ignore_ascii_case(&fb.value) {
                let at = fa
                    .value
                    .bytes()
                    .zip(fb.value.bytes())
                    .position(|(x, y)| !x.eq_ignore_ascii_case(&y))
                    .unwrap_or_else(|| fa.value.len().min(fb.value.len()));
                return Ok(Some(RspDiff::Field {
                    count: ra.count,
                    field: fa.name.clone(),
                    byte: at / 2,
                    offset: fb.offset + at,
                }));
            }
        }
        if ra.fields.len() != rb.fields.len() {
            return Ok(Some(RspDiff::Layout {
                count: ra.count,
                detail: format!(
                    "{} fields in the reference, {} generated",
                    ra.fields.len(),
                    rb.fields.len()
                ),
            }));
        }
    }
    if a.len() != b.len() {
        let in_generated = b.len() < a.len();
        let count = if in_generated {
            a[b.len()].count
        } else {
            b[a.len()].count
        };
        return Ok(Some(RspDiff::Missing {
            count,
            in_generated,
        }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str =
        "# ML-KEM-768\n\ncount = 0\nseed = 0011\npk = AABBCC\nct = 0102\nss = FF\n\n\
                        count = 1\nseed = 2233\npk = DDEEFF\nct = 0304\nss = EE\n";

    #[test]
    fn parses_records_fields_and_offsets() {
        let r = parse_rsp(TEXT).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].count, 1);
        let ct = &r[1].fields[2];
        assert_eq!((ct.name.as_str(), ct.value.as_str()), ("ct", "0304"));
        assert_eq!(&TEXT[ct.offset..ct.offset + 4], "0304");
    }

    #[test]
    fn identical_texts_have_no_difference_even_with_other_comments() {
        let other = TEXT.replace("# ML-KEM-768\n\n", "");
        assert_eq!(first_difference(TEXT, &other).unwrap(), None);
    }

    #[test]
    fn names_count_field_byte_and_offset() {
        let generated = TEXT.replace("ct = 0304", "ct = 0305");
        let d = first_difference(TEXT, &generated).unwrap().unwrap();
        let off = generated.find("0305").unwrap() + 3;
        assert_eq!(
            d,
            RspDiff::Field {
                count: 1,
                field: "ct".into(),
                byte: 1,
                offset: off
            }
        );
        assert_eq!(
            d.to_string(),
            format!("count 1, field ct: first differing byte 1 (file offset {off})")
        );
    }

    #[test]
    fn missing_counts_and_bad_lines() {
        let short = TEXT.split("\n\ncount = 1").next().unwrap().to_string() + "\n";
        let d = first_difference(TEXT, &short).unwrap().unwrap();
        assert_eq!(d.to_string(), "count 1 is missing from the generated file");
        let e = parse_rsp("count = 0\npk AABB\n").unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        assert!(parse_rsp("pk = 00\n")
            .unwrap_err()
            .contains("before the first `count`"));
    }
}
