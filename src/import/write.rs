//! The files `ngcc-pipe import` writes: `manifest.kdl` (a matrix over parameter sets and
//! implementations, `api "nist"`, the submitted KAT files, the libraries and `-m` options
//! the sources need), `kat.sha256` (the SHA-256 of each instance's submitted KAT file) and
//! `sizes.csv` (api.h's sizes).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::kat::{template_of, KatFile};
use super::scan::{Implementation, Param};

/// A KDL string literal of `s`, whatever it holds: `\\`, `"`, newlines, tabs, control
/// characters, bidi controls and every other character KDL forbids or `crate::text` would
/// show escaped are written as escapes, so the literal stays on its line and reads back as
/// `s`.
pub fn kdl_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if crate::text::needs_escape(c) || c == '\u{feff}' => {
                o.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Text for a `//` comment: on one line whatever it holds (a newline in a package's path
/// cannot end the comment and start a node).
fn comment(s: &str) -> String {
    crate::text::clean_line(s)
}

/// One instance: its implementation, parameter set and submitted KAT file.
pub struct Pair<'a> {
    pub kind: &'a str,
    pub param: &'a Param,
    pub kat: Option<&'a KatFile>,
}

impl Pair<'_> {
    pub fn id(&self) -> String {
        format!("{}-{}", self.param.name, self.kind.to_lowercase())
    }

    /// `param="x" impl="Y"`, the `when` condition of this instance alone.
    fn cond(&self) -> String {
        format!(
            "param={} impl={}",
            kdl_str(&self.param.name),
            kdl_str(self.kind)
        )
    }

    /// The libraries its compiled sources need, sorted.
    pub fn needed_libs(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .param
            .source_libs
            .iter()
            .map(|(l, _)| l.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// What the manifest is made of.
pub struct Manifest<'a> {
    pub id: &'a str,
    pub algorithm: &'a str,
    /// The `source ...` line's properties.
    pub source: String,
    /// Where the package came from, for the header comment.
    pub from: &'a str,
    pub impls: &'a [Implementation],
    /// Parameter sets every implementation has, in order.
    pub params: &'a [String],
    pub pairs: &'a [Pair<'a>],
    pub drng: Option<&'a str>,
    /// Each parameter set's NIST category and where it comes from, when known.
    pub categories: &'a [(String, Option<(u8, String)>)],
}

/// The text of `manifest.kdl`.
pub fn manifest(m: &Manifest<'_>, decisions: &mut Vec<String>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Written by `ngcc-pipe import` from {}.\n// Check it with `ngcc-pipe check --deep PIPELINE`, PIPELINE a pipeline whose `submissions` glob includes it.",
        comment(m.from)
    );
    let _ = writeln!(s, "submission {} {{", kdl_str(m.id));
    let _ = writeln!(s, "    algorithm {}", kdl_str(m.algorithm));
    let _ = writeln!(s, "    category \"public-key algorithm\"");
    let _ = writeln!(s, "    function \"key encapsulation\"");
    let _ = writeln!(s, "    source {}", m.source);
    let _ = writeln!(
        s,
        "    // NIST's API: no namespace; the harness provides randombytes and randombytes_init\n    // and leaves out the package's rng.c and PQCgenKAT_kem.c.\n    api \"nist\""
    );
    if let Some(d) = m.drng {
        let _ = writeln!(s, "    primitives {{\n        drng {}\n    }}", kdl_str(d));
    }
    // The submitted KAT files: one template where they all follow it.
    let mut templates: BTreeMap<String, usize> = BTreeMap::new();
    for p in m.pairs {
        if let Some(k) = p.kat {
            *templates
                .entry(template_of(&k.rel, &p.param.name, k.sk))
                .or_default() += 1;
        }
    }
    let common = templates
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(t, _)| t.clone());
    if let Some(t) = &common {
        let _ = writeln!(
            s,
            "    // The expected answers: the package's own KAT files, pinned in kat.sha256.\n    kat submitted={}",
            kdl_str(t)
        );
    } else {
        decisions
            .push("no submitted KAT file matched any instance: every KAT will be NOKAT".into());
    }
    let _ = writeln!(s, "    sizes catalog=\"sizes.csv\"");
    let kinds: Vec<&str> = m.impls.iter().map(|i| i.kind.as_str()).collect();
    let _ = writeln!(
        s,
        "    matrix param={} impl={}",
        kdl_str(&m.params.join(" ")),
        kdl_str(&kinds.join(" "))
    );
    let _ = writeln!(
        s,
        "    instance \"{{param}}-{{impl:lower}}\" dir=\"{{impl}}_Implementation/crypto_kem/{{param}}\""
    );
    impl_dirs(&mut s, m.impls);
    // Libraries: for everyone when all need the same, else per instance.
    let libs: Vec<Vec<String>> = m.pairs.iter().map(Pair::needed_libs).collect();
    let all_same = libs.windows(2).all(|w| w[0] == w[1]);
    if all_same {
        for l in libs.first().into_iter().flatten() {
            let _ = writeln!(s, "    link {}", kdl_str(l));
        }
    }
    s.push_str(&when_blocks(
        m,
        &libs,
        all_same,
        common.as_deref(),
        decisions,
    ));
    nist_categories(&mut s, m);
    let _ = writeln!(s, "}}");
    s
}

/// Per instance a `when` block with what it alone needs: its libraries (unless all need
/// the same), its KAT file where it does not follow the `common` template, its sources
/// outside its folder, its `cflags`; none where it needs nothing of its own.
fn when_blocks(
    m: &Manifest<'_>,
    libs: &[Vec<String>],
    all_same: bool,
    common: Option<&str>,
    decisions: &mut Vec<String>,
) -> String {
    let mut blocks = String::new();
    for (p, need) in m.pairs.iter().zip(libs) {
        let mut body = String::new();
        if !all_same {
            for l in need {
                let _ = writeln!(body, "        link {}", kdl_str(l));
            }
        }
        if let (Some(k), Some(t)) = (p.kat, common) {
            let own = template_of(&k.rel, &p.param.name, k.sk);
            if own != t {
                let _ = writeln!(body, "        kat-submitted {}", kdl_str(&own));
            }
        }
        if !p.param.extra_sources.is_empty() {
            let files: Vec<String> = p.param.extra_sources.iter().map(|f| kdl_str(f)).collect();
            let _ = writeln!(body, "        sources {}", files.join(" "));
        }
        cflags_lines(&mut body, p, decisions);
        if !body.is_empty() {
            let from = p.param.build_file.as_deref().unwrap_or("the package");
            let _ = writeln!(blocks, "    // {}: from {}", p.id(), comment(from));
            let _ = writeln!(blocks, "    when {} {{\n{body}    }}", p.cond());
        }
    }
    blocks
}

/// The `cflags` line of one instance's `when` block, and `requires-cpu` for its `-m` flags
/// (a flag with no known CPU feature is said in the decisions).
fn cflags_lines(body: &mut String, p: &Pair<'_>, decisions: &mut Vec<String>) {
    if p.param.cflags.is_empty() {
        return;
    }
    let flags: Vec<String> = p.param.cflags.iter().map(|f| kdl_str(f)).collect();
    let _ = writeln!(body, "        cflags {}", flags.join(" "));
    let mut cpu = Vec::new();
    for f in p.param.cflags.iter().filter(|f| f.starts_with("-m")) {
        match crate::dsl::cpuinfo_name_of_gcc_flag(f) {
            Some(c) if !cpu.contains(&c) => cpu.push(c),
            Some(_) => {}
            None => decisions.push(format!(
                "{}: no CPU feature is known for `{f}`, so no `requires-cpu` for it",
                p.id()
            )),
        }
    }
    if !cpu.is_empty() {
        let names: Vec<String> = cpu.iter().map(|c| kdl_str(c)).collect();
        let _ = writeln!(body, "        requires-cpu {}", names.join(" "));
    }
}

/// The `nist-category` lines: the known ones with where they come from, a TODO for the rest.
fn nist_categories(s: &mut String, m: &Manifest<'_>) {
    let known: Vec<_> = m
        .categories
        .iter()
        .filter_map(|(p, c)| c.as_ref().map(|c| (p, c)))
        .collect();
    if !known.is_empty() {
        let _ = writeln!(s, "    // NIST security categories:");
    }
    for (p, (c, why)) in &known {
        let _ = writeln!(
            s,
            "    nist-category {c} param={}  // {}",
            kdl_str(p),
            comment(why)
        );
    }
    let unknown: Vec<&String> = m
        .categories
        .iter()
        .filter(|(_, c)| c.is_none())
        .map(|(p, _)| p)
        .collect();
    if !unknown.is_empty() {
        let _ = writeln!(
            s,
            "    // TODO nist-category: the package does not say which NIST security category these\n    // parameter sets claim; add one line each, N the category (1 to 5):"
        );
    }
    for p in unknown {
        let _ = writeln!(s, "    // nist-category N param={}", kdl_str(p));
    }
}

/// The `when` blocks that give the folder of implementations laid out otherwise
/// (additional ones, `<param>/src/`): for the implementation or, where its parameter sets
/// differ, each.
fn impl_dirs(s: &mut String, impls: &[Implementation]) {
    for i in impls {
        let default = format!("{}_Implementation/crypto_kem/{{param}}", i.kind);
        let dirs: Vec<String> = i.params.iter().map(dir_template).collect();
        if dirs.iter().all(|d| *d == default) {
            continue;
        }
        if dirs.windows(2).all(|w| w[0] == w[1]) {
            let _ = writeln!(
                s,
                "    when impl={} {{\n        dir {}\n    }}",
                kdl_str(&i.kind),
                kdl_str(&dirs[0])
            );
            continue;
        }
        for (p, d) in i.params.iter().zip(&dirs).filter(|(_, d)| **d != default) {
            let _ = writeln!(
                s,
                "    when param={} impl={} {{\n        dir {}\n    }}",
                kdl_str(&p.name),
                kdl_str(&i.kind),
                kdl_str(d)
            );
        }
    }
}

/// A parameter set's folder as a `dir` template: braces escaped, the folder named after it
/// `{param}` (`Reference_Implementation/{param}/src`).
fn dir_template(p: &Param) -> String {
    p.dir
        .replace('{', "{{")
        .replace('}', "}}")
        .split('/')
        .map(|c| if c == p.name { "{param}" } else { c })
        .collect::<Vec<_>>()
        .join("/")
}

/// `kat.sha256`: the SHA-256 of each instance's submitted file.
pub fn kat_sha256(pairs: &[Pair<'_>]) -> String {
    let mut s = String::from(
        "# SHA-256 of each instance's submitted KAT file (kat submitted= in manifest.kdl),\n# written by ngcc-pipe import: a package whose files change no longer passes.\n",
    );
    for p in pairs {
        if let Some(k) = p.kat {
            let _ = writeln!(s, "{}  {}", k.sha256, p.id());
        }
    }
    s
}

/// `sizes.csv`: api.h's sizes per instance; a `# TODO` line for one whose sizes were not
/// found.
pub fn sizes_csv(pairs: &[Pair<'_>]) -> String {
    let mut s = String::from("instance,pk,sk,ct,ss\n");
    for p in pairs {
        match &p.param.api {
            Some(a) => {
                let _ = writeln!(s, "{},{},{},{},{}", p.id(), a.pk, a.sk, a.ct, a.ss);
            }
            None => {
                let _ = writeln!(
                    s,
                    "# TODO {}: api.h's sizes were not found without running its headers: add `{},<pk>,<sk>,<ct>,<ss>`",
                    p.id(),
                    p.id()
                );
            }
        }
    }
    s
}
