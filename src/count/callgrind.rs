//! A parser of callgrind's profile format (`callgrind.out.*`), as specified in valgrind's
//! manual ("Callgrind Format Specification"): header lines (`events:`, `positions:`,
//! `summary:`, `totals:`), name compression (`fn=(12) name` defines id 12, `fn=(12)` refers to
//! it; separate id spaces for objects, files and functions), position compression (`+3`,
//! `-2`, `*`), cost lines, and call arcs (`cfn=`, `calls=<count> <target>` followed by one
//! cost line holding the call's inclusive cost).
//!
//! What comes out is a function-level graph: every function's self cost and every call arc
//! with its count and inclusive cost. Functions are identified by object and name (static
//! functions of the same name in one object are merged). Jump lines (`jump=`, `jcnd=`) are
//! skipped.

use std::collections::HashMap;

/// One function of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The ELF object (`ob=`), empty when the profile names none.
    pub object: String,
    pub name: String,
    /// Events of the function's own instructions, in [`Profile::events`] order.
    pub self_cost: Vec<u64>,
}

/// One caller -> callee arc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Index into [`Profile::functions`].
    pub caller: usize,
    pub callee: usize,
    /// Calls made along this arc.
    pub count: u64,
    /// Events of everything the calls executed (callee and its callees).
    pub inclusive: Vec<u64>,
}

/// One profile (one dump) of callgrind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    /// Event names (`events: Ir ...`).
    pub events: Vec<String>,
    /// `totals:` (or `summary:`) as written by callgrind, when present.
    pub totals: Option<Vec<u64>>,
    pub functions: Vec<Function>,
    pub calls: Vec<Call>,
}

impl Profile {
    /// Column of event `name`.
    pub fn event(&self, name: &str) -> Option<usize> {
        self.events.iter().position(|e| e == name)
    }

    /// Sum of every function's self cost of event `ev` (what the dump collected).
    pub fn self_total(&self, ev: usize) -> u64 {
        self.functions
            .iter()
            .map(|f| f.self_cost.get(ev).copied().unwrap_or(0))
            .sum()
    }
}

/// A malformed line: its number (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("callgrind profile line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// The three name-compression spaces.
#[derive(Default)]
struct Names {
    objects: HashMap<String, String>,
    files: HashMap<String, String>,
    functions: HashMap<String, String>,
}

/// `(id) name`, `(id)` or `name`: resolve against (and define in) `table`.
fn name(table: &mut HashMap<String, String>, text: &str) -> Result<String, String> {
    let t = text.trim();
    let Some(rest) = t.strip_prefix('(') else {
        return Ok(t.to_string());
    };
    let (id, after) = rest
        .split_once(')')
        .ok_or_else(|| format!("unclosed name id in `{t}`"))?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("bad name id `({id})`"));
    }
    let after = after.trim();
    if after.is_empty() {
        table
            .get(id)
            .cloned()
            .ok_or_else(|| format!("name id ({id}) used before it is defined"))
    } else {
        table.insert(id.to_string(), after.to_string());
        Ok(after.to_string())
    }
}

/// Check one position column: absolute (decimal or `0x` hex), relative (`+n`, `-n`) or
/// same (`*`). Positions (source lines, addresses) do not enter any figure computed here, so
/// their values are not tracked.
fn position(text: &str) -> Result<(), String> {
    match text {
        "*" => Ok(()),
        t => number(t.strip_prefix(['+', '-']).unwrap_or(t)).map(|_| ()),
    }
}

fn number(text: &str) -> Result<u64, String> {
    let r = match text.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => text.parse(),
    };
    r.map_err(|_| format!("`{text}` is not a number"))
}

fn costs(fields: &[&str], n_events: usize) -> Result<Vec<u64>, String> {
    if fields.len() > n_events {
        return Err(format!("{} costs for {n_events} events", fields.len()));
    }
    let mut v = vec![0u64; n_events];
    for (slot, f) in v.iter_mut().zip(fields) {
        *slot = number(f)?;
    }
    Ok(v)
}

fn starts_cost_line(line: &str) -> bool {
    line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*'))
}

struct Parser {
    names: Names,
    index: HashMap<(String, String), usize>,
    profile: Profile,
    positions: usize,
    object: String,
    current: Option<usize>,
    call_object: Option<String>,
    callee: Option<usize>,
    /// `calls=` count waiting for its cost line.
    pending: Option<u64>,
}

impl Parser {
    fn function(&mut self, object: &str, name: &str) -> usize {
        let key = (object.to_string(), name.to_string());
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.profile.functions.len();
        self.profile.functions.push(Function {
            object: key.0.clone(),
            name: key.1.clone(),
            self_cost: vec![0; self.profile.events.len()],
        });
        self.index.insert(key, i);
        i
    }

    fn line(&mut self, line: &str) -> Result<(), String> {
        if let Some(count) = self.pending.take() {
            if !starts_cost_line(line) {
                return Err("a `calls=` line must be followed by a cost line".into());
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            self.positions_of(&fields)?;
            let inclusive = costs(&fields[self.positions..], self.profile.events.len())?;
            let caller = self.current.ok_or("`calls=` outside a function")?;
            let callee = self.callee.take().ok_or("`calls=` without `cfn=`")?;
            self.call_object = None;
            self.profile.calls.push(Call {
                caller,
                callee,
                count,
                inclusive,
            });
            return Ok(());
        }
        if starts_cost_line(line) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            self.positions_of(&fields)?;
            let c = costs(&fields[self.positions..], self.profile.events.len())?;
            let f = self.current.ok_or("cost line outside a function")?;
            for (s, v) in self.profile.functions[f].self_cost.iter_mut().zip(c) {
                *s += v;
            }
            return Ok(());
        }
        if let Some((key, value)) = line
            .split_once(':')
            .filter(|(k, _)| k.bytes().all(|b| b.is_ascii_alphanumeric()))
        {
            self.header(key, value)?;
            return Ok(());
        }
        if let Some((key, value)) = line.split_once('=') {
            match key {
                "ob" => self.object = name(&mut self.names.objects, value)?,
                "fl" | "fi" | "fe" | "cfi" | "cfl" => {
                    name(&mut self.names.files, value)?;
                }
                "fn" => {
                    let n = name(&mut self.names.functions, value)?;
                    let ob = self.object.clone();
                    self.current = Some(self.function(&ob, &n));
                }
                "cob" => self.call_object = Some(name(&mut self.names.objects, value)?),
                "cfn" => {
                    let n = name(&mut self.names.functions, value)?;
                    let ob = self
                        .call_object
                        .clone()
                        .unwrap_or_else(|| self.object.clone());
                    self.callee = Some(self.function(&ob, &n));
                }
                "calls" => {
                    let count = value
                        .split_whitespace()
                        .next()
                        .ok_or("`calls=` without a count")?;
                    self.pending = Some(number(count)?);
                }
                "jump" | "jcnd" => {}
                other => return Err(format!("unknown specification `{other}=`")),
            }
            return Ok(());
        }
        Err(format!("unrecognised line `{line}`"))
    }

    fn header(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "events" => {
                if !self.profile.functions.is_empty() {
                    return Err("`events:` after cost lines".into());
                }
                self.profile.events = value.split_whitespace().map(String::from).collect();
            }
            "positions" => {
                let p: Vec<&str> = value.split_whitespace().collect();
                if p.is_empty() || p.iter().any(|x| !matches!(*x, "instr" | "line")) {
                    return Err(format!("unknown positions `{}`", value.trim()));
                }
                self.positions = p.len();
            }
            "totals" | "summary" => {
                let f: Vec<&str> = value.split_whitespace().collect();
                let t = costs(&f, self.profile.events.len())?;
                if key == "totals" || self.profile.totals.is_none() {
                    self.profile.totals = Some(t);
                }
            }
            _ => {} // version, creator, pid, cmd, part, desc, event, ...
        }
        Ok(())
    }

    fn positions_of(&mut self, fields: &[&str]) -> Result<(), String> {
        if fields.len() < self.positions {
            return Err(format!(
                "cost line with fewer than {} positions",
                self.positions
            ));
        }
        for p in &fields[..self.positions] {
            position(p)?;
        }
        Ok(())
    }
}

/// Parse one callgrind profile.
pub fn parse(text: &str) -> Result<Profile, ParseError> {
    let mut p = Parser {
        names: Names::default(),
        index: HashMap::new(),
        profile: Profile::default(),
        positions: 1,
        object: String::new(),
        current: None,
        call_object: None,
        callee: None,
        pending: None,
    };
    let mut seen_events = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if starts_cost_line(line) && !seen_events {
            return Err(ParseError {
                line: i + 1,
                message: "cost line before `events:`".into(),
            });
        }
        // The profile is a file the KEM could have written: quote at most an excerpt.
        p.line(line).map_err(|message| ParseError {
            line: i + 1,
            message: crate::text::excerpt(&message, 200),
        })?;
        seen_events |= !p.profile.events.is_empty();
    }
    if p.pending.is_some() {
        return Err(ParseError {
            line: text.lines().count(),
            message: "the file ends after a `calls=` line".into(),
        });
    }
    if p.profile.events.is_empty() {
        return Err(ParseError {
            line: 1,
            message: "no `events:` line: not a callgrind profile".into(),
        });
    }
    Ok(p.profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "# callgrind format\nversion: 1\npositions: line\nevents: Ir Dr\n\
        summary: 31 4\n\nob=(1) /lib/a.so\nfl=(1) a.c\nfn=(1) outer\n10 5 1\n+2 3\n\
        cfn=(2) inner\ncalls=2 20\n* 20 3\n-1 2\n\nfn=(2)\n20 20 3\n\
        cob=(2) /lib/b.so\ncfi=(2) b.c\ncfn=(3) leaf\ncalls=1 0x10\n21 0\n\ntotals: 30 4\n";

    #[test]
    fn reads_names_positions_self_costs_and_arcs() {
        let p = parse(SMALL).unwrap();
        assert_eq!(p.events, ["Ir", "Dr"]);
        assert_eq!(p.totals, Some(vec![30, 4]));
        let names: Vec<_> = p.functions.iter().map(|f| (&*f.object, &*f.name)).collect();
        assert_eq!(
            names,
            [
                ("/lib/a.so", "outer"),
                ("/lib/a.so", "inner"),
                ("/lib/b.so", "leaf")
            ]
        );
        assert_eq!(p.functions[0].self_cost, [10, 1]);
        assert_eq!(p.functions[1].self_cost, [20, 3]);
        assert_eq!(
            p.calls,
            [
                Call {
                    caller: 0,
                    callee: 1,
                    count: 2,
                    inclusive: vec![20, 3]
                },
                Call {
                    caller: 1,
                    callee: 2,
                    count: 1,
                    inclusive: vec![0, 0]
                },
            ]
        );
        assert_eq!(p.self_total(0), 30);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("events: Ir\nfn=(3)\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("(3) used before"), "{e}");
        let e = parse("events: Ir\nfn=f\ncfn=g\ncalls=1 2\n").unwrap_err();
        assert!(e.message.contains("ends after a `calls=`"), "{e}");
        let e = parse("fn=f\n3 4\n").unwrap_err();
        assert_eq!((e.line, &*e.message), (2, "cost line before `events:`"));
        let e = parse("events: Ir\nfn=f\n3 4 5\n").unwrap_err();
        assert!(e.message.contains("2 costs for 1 events"), "{e}");
        assert!(parse("hello\n").is_err());
        assert!(parse("version: 1\n")
            .unwrap_err()
            .message
            .contains("no `events:`"));
    }
}
