//! The crate's structure, read from its imports: the top-level modules of `src/` sit in the
//! layers [`LAYERS`] declares and import only from layers below their own, and inside every
//! folder ("room") no two modules import each other, directly or round a circle. The
//! evidence schema (`crates/ngcc-record`) depends on serde alone.
//!
//! What counts as an import: every `use` declaration (trees expanded) and every path that
//! starts with `crate::`, `super::` or `self::` in code, comments and string literals
//! blanked first. Test code (`#[cfg(test)]` items and the files they name) is left out: a
//! test may reach wherever it needs to.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, bottom layer first. A module may import from the layers
/// below its own, never from its own layer or one above. A new module is placed here.
const LAYERS: &[&[&str]] = &[
    // Text and files from outside made safe.
    &["text"],
    &["safe_fs"],
    // The evidence schema (ngcc-record) and the files that hold it.
    &["record"],
    // The validated campaign.
    &["model"],
    // The analyses behind the steps, and the statistics.
    &["archive", "count", "csource", "ct", "measure"],
    &["rsp", "sources"],
    &["libs", "sizes", "survey"],
    &["profile"],
    // The campaign language, the graph built from it, the typed errors.
    &["dsl"],
    &["error", "graph"],
    // Rendering from records alone.
    &["report"],
    // Running: scheduler, steps, sandbox, sessions.
    &["run"],
    // Commands built on running.
    &["bench", "import"],
    &["cli"],
];

/// One import: where it is and what it names.
#[derive(Debug, Clone)]
struct Import {
    file: String,
    line: usize,
    path: String,
    /// The module it lands in.
    target: Vec<String>,
}

/// `text` with comments and the contents of string and character literals replaced by
/// spaces (newlines kept, so line numbers stay).
fn blank(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let wipe = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                wipe(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, start) = (0usize, i);
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                wipe(&mut out, start, i);
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0
                    || !is_ident(b[i - 1])
                    || (b[i - 1] == b'b' && (i < 2 || !is_ident(b[i - 2])))) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let body = i + 2 + hashes;
                let end = text[body..]
                    .find(&close)
                    .map_or(b.len(), |n| body + n + close.len());
                wipe(&mut out, body, end.saturating_sub(close.len()).max(body));
                i = end;
            }
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                wipe(&mut out, start, i.min(b.len()));
                i += 1;
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{1F}'), not a lifetime ('a).
                let len = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..].iter().position(|&c| c == b'\'').map(|n| n + 3)
                } else {
                    let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (b.get(i + 1 + ch) == Some(&b'\'')).then_some(ch + 1)
                };
                match len {
                    Some(n) => {
                        wipe(&mut out, i + 1, i + n);
                        i += n + 1;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 (only ASCII bytes are replaced)")
}

/// The code of a blanked file without its `#[cfg(test)]` items, and the names of the
/// modules those items declare in files of their own (`#[cfg(test)] mod tests;`).
fn without_tests(code: &str) -> (String, BTreeSet<String>) {
    let mut out = code.as_bytes().to_vec();
    let mut test_mods = BTreeSet::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("#[cfg(test)]") {
        let start = from + n;
        let rest = &code[start..];
        let semi = rest.find(';');
        let brace = rest.find('{');
        let end = match (semi, brace) {
            (Some(s), b) if b.is_none_or(|b| s < b) => {
                let item = rest[..s].split_whitespace().collect::<Vec<_>>();
                if let Some(p) = item.iter().position(|w| *w == "mod") {
                    if let Some(name) = item.get(p + 1) {
                        test_mods.insert(name.to_string());
                    }
                }
                start + s + 1
            }
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = code.len();
                for (k, c) in rest[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = start + b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            _ => code.len(),
        };
        for c in &mut out[start..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    (String::from_utf8(out).unwrap(), test_mods)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Expand a use tree (`a::{b, c::{d, self}}`, `x as y`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    fn go(prefix: &str, t: &str, out: &mut Vec<String>) {
        let t = t.trim();
        let Some(open) = t.find('{') else {
            let t = t.split(" as ").next().unwrap_or(t).trim();
            match t {
                "self" | "*" => out.push(prefix.trim_end_matches("::").to_string()),
                _ => out.push(format!("{prefix}{}", t.trim_end_matches("::*"))),
            }
            return;
        };
        let head = format!("{prefix}{}", t[..open].trim());
        let inner = &t[open + 1..t.rfind('}').unwrap_or(t.len())];
        let (mut depth, mut part) = (0, String::new());
        let mut parts = Vec::new();
        for c in inner.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut part));
                    continue;
                }
                _ => {}
            }
            part.push(c);
        }
        parts.push(part);
        for p in parts.iter().filter(|p| !p.trim().is_empty()) {
            go(&head, p, out);
        }
    }
    let tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    go("", &tree, &mut out);
    out
}

/// Every path a blanked, test-free file names: `use` declarations and `crate::`/`super::`/
/// `self::` paths in code, with their line numbers.
fn paths(code: &str) -> Vec<(usize, String)> {
    let b = code.as_bytes();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut in_use = vec![false; b.len()];
    let mut from = 0;
    while let Some(n) = code[from..].find("use ") {
        let at = from + n;
        from = at + 4;
        if at > 0 && is_ident(b[at - 1]) {
            continue;
        }
        let Some(end) = code[at..].find(';').map(|e| at + e) else {
            break;
        };
        for p in expand(&code[at + 4..end]) {
            out.push((line_of(at), p));
        }
        in_use[at..end].iter_mut().for_each(|x| *x = true);
        from = end;
    }
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(n) = code[from..].find(start) {
            let at = from + n;
            from = at + start.len();
            if in_use[at] || (at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b':')) {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            out.push((line_of(at), code[at..end].trim_end_matches(':').to_string()));
            from = end;
        }
    }
    out
}

/// The module a path from module `here` lands in: its longest prefix that is a module of
/// `modules`; `None` for a path into another crate (or an item of the crate's root).
fn resolve(here: &[String], path: &str, modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut segs = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut at: Vec<String> = match *segs.peek()? {
        "crate" => {
            segs.next();
            Vec::new()
        }
        "self" | "super" => here.to_vec(),
        first => {
            // A child module named without `self::` (2018 paths), else another crate.
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            here.to_vec()
        }
    };
    while let Some(&s) = segs.peek() {
        match s {
            "self" => {}
            "super" => {
                at.pop()?;
            }
            _ => break,
        }
        segs.next();
    }
    for s in segs {
        let mut next = at.clone();
        next.push(s.to_string());
        if !modules.contains(&next) {
            break;
        }
        at = next;
    }
    (!at.is_empty()).then_some(at)
}

/// The arrows between the children of one room: (from, to) -> the imports behind it.
type Arrows = BTreeMap<(String, String), Vec<Import>>;

/// A source tree: file path (relative to `src/`) -> text.
type Tree = BTreeMap<String, String>;

/// The module path of a file of `src/` (`a/b.rs` and `a/b/mod.rs` are `a::b`).
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// Every import of the tree, test code left out.
fn imports(tree: &Tree) -> Vec<(Vec<String>, Import)> {
    let mut code = BTreeMap::new();
    let mut test_files = BTreeSet::new();
    for (file, text) in tree {
        let (c, tests) = without_tests(&blank(text));
        let here = module_of(file);
        for t in tests {
            let mut m = here.clone();
            m.push(t);
            test_files.insert(m);
        }
        code.insert(file.clone(), c);
    }
    let modules: BTreeSet<Vec<String>> = tree.keys().map(|f| module_of(f)).collect();
    let mut out = Vec::new();
    for (file, c) in &code {
        let here = module_of(file);
        if (1..=here.len()).any(|n| test_files.contains(&here[..n])) || file == "main.rs" {
            continue;
        }
        for (line, path) in paths(c) {
            if let Some(target) = resolve(&here, &path, &modules) {
                let import = Import {
                    file: format!("src/{file}"),
                    line,
                    path,
                    target,
                };
                out.push((here.clone(), import));
            }
        }
    }
    out
}

/// What is wrong with the tree's structure, one line each: imports against `layers`, and
/// circles among the modules of one folder.
fn problems(tree: &Tree, layers: &[&[&str]]) -> Vec<String> {
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, l)| l.iter().map(move |m| (*m, i)))
        .collect();
    let mut out = Vec::new();
    let tops: BTreeSet<String> = tree
        .keys()
        .map(|f| module_of(f))
        .filter_map(|m| m.first().cloned())
        .filter(|m| m != "main")
        .collect();
    for t in &tops {
        if !layer_of.contains_key(t.as_str()) {
            out.push(format!("module `{t}` is in no layer: place it in LAYERS"));
        }
    }
    for m in layer_of.keys() {
        if !tops.contains(*m) {
            out.push(format!("LAYERS names `{m}`, which is not a module of src/"));
        }
    }
    // Room (a folder's module path) -> (from child, to child) -> the imports behind it.
    let mut rooms: BTreeMap<Vec<String>, Arrows> = BTreeMap::new();
    for (here, import) in imports(tree) {
        let common = here
            .iter()
            .zip(&import.target)
            .take_while(|(a, b)| a == b)
            .count();
        if common == here.len() || common == import.target.len() {
            continue; // into its own module, a parent or a child
        }
        let (a, b) = (here[common].clone(), import.target[common].clone());
        if common == 0 {
            if let (Some(&la), Some(&lb)) = (layer_of.get(a.as_str()), layer_of.get(b.as_str())) {
                if lb >= la {
                    let why = if la == lb {
                        "its own layer"
                    } else {
                        "a layer above"
                    };
                    out.push(format!(
                        "{}:{}: `{a}` imports `{}` from `{b}`, {why} (LAYERS in tests/layers.rs)",
                        import.file, import.line, import.path
                    ));
                }
            }
            continue;
        }
        rooms
            .entry(here[..common].to_vec())
            .or_default()
            .entry((a, b))
            .or_default()
            .push(import);
    }
    for (room, edges) in &rooms {
        out.extend(circles(room, edges));
    }
    out
}

/// Circles among the children of one room: for every set of children that reach one
/// another, the shortest circle through its first member, as `a -> b -> a` with the
/// import behind every arrow.
fn circles(room: &[String], edges: &Arrows) -> Vec<String> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().insert(b);
    }
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from];
        while let Some(n) = todo.pop() {
            for &m in next.get(n).into_iter().flatten() {
                if seen.insert(m) {
                    todo.push(m);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|&n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for (&start, from_start) in &reaches {
        if done.contains(start) || !from_start.contains(start) {
            continue;
        }
        let members: BTreeSet<&str> = from_start
            .iter()
            .copied()
            .filter(|m| reaches.get(m).is_some_and(|r| r.contains(start)))
            .collect();
        done.extend(members.iter().copied());
        // Breadth first from `start` back to it, inside the members.
        let mut back: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        'search: while let Some(n) = queue.pop_front() {
            for &m in &next[n] {
                if m == start {
                    back.insert(start, n);
                    break 'search;
                }
                if members.contains(m) && !back.contains_key(m) {
                    back.insert(m, n);
                    queue.push_back(m);
                }
            }
        }
        let mut cycle = vec![start];
        let mut at = back[start];
        while at != start {
            cycle.push(at);
            at = back[at];
        }
        cycle.push(start);
        cycle.reverse();
        let arrows: Vec<String> = cycle
            .windows(2)
            .map(|w| {
                let i = &edges[&(w[0].to_string(), w[1].to_string())][0];
                format!("{}:{} ({})", i.file, i.line, i.path)
            })
            .collect();
        out.push(format!(
            "a circle in `{}`: {} [{}]",
            room.join("::"),
            cycle.join(" -> "),
            arrows.join("; ")
        ));
    }
    out
}

fn read_tree(dir: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut out = Tree::new();
    walk(dir, dir, &mut out);
    out
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn imports_follow_the_layers_and_no_room_has_a_circle() {
    let tree = read_tree(&root().join("src"));
    assert!(tree.len() > 100, "src/ read: {} files", tree.len());
    let found = imports(&tree);
    // The reader sees the imports it must judge (a `use` tree and an inline path).
    assert!(found
        .iter()
        .any(|(h, i)| h == &["report", "content", "counts"] && i.target == ["report", "doc"]));
    assert!(found
        .iter()
        .any(|(h, i)| h == &["run", "steps", "kat"] && i.target[0] == "record"));
    let problems = problems(&tree, LAYERS);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checker catches what it is there to catch: an upward import, one inside a layer, a
/// circle of two and of three inside a room, an unplaced module; and it ignores comments,
/// strings and test code.
#[test]
fn the_checker_catches_arrows_against_the_layers_and_circles() {
    let tree: Tree = [
        ("low.rs", "//! x\nuse crate::high::Thing;\n"),
        ("peer.rs", "pub fn f() { crate::low::g(); }\n"),
        ("high.rs", "use crate::low::{self, g};\n"),
        ("loose.rs", "fn f() {}\n"),
        ("room/mod.rs", "mod a; mod b; mod c; mod d;\n#[cfg(test)]\nmod tests;\n"),
        ("room/a.rs", "use super::b::X;\n"),
        ("room/b.rs", "fn f() { super::a::y() }\n"),
        (
            "room/c.rs",
            "use super::super::room::d::Z;\n// crate::high::Q\nconst S: &str = \"crate::high::R\";\n",
        ),
        ("room/d.rs", "use super::{e::{W, V as U}, self as s};\n"),
        ("room/e.rs", "use super::c::U;\n#[cfg(test)]\nmod t { use crate::high::P; }\n"),
        ("room/tests.rs", "use crate::high::T;\n"),
    ]
    .into_iter()
    .map(|(f, t)| (f.to_string(), t.to_string()))
    .collect();
    let layers: &[&[&str]] = &[&["low", "peer"], &["high", "room"]];
    let p = problems(&tree, layers);
    let has = |s: &str| p.iter().any(|l| l.contains(s));
    assert!(
        has("src/low.rs:2: `low` imports `crate::high::Thing` from `high`, a layer above"),
        "{p:#?}"
    );
    assert!(
        has("src/peer.rs:1: `peer` imports `crate::low::g` from `low`, its own layer"),
        "{p:#?}"
    );
    assert!(has("module `loose` is in no layer"), "{p:#?}");
    assert!(has("a circle in `room`: a -> b -> a"), "{p:#?}");
    assert!(has("a circle in `room`: c -> d -> e -> c"), "{p:#?}");
    assert!(!has("high.rs"), "a downward import is fine: {p:#?}");
    assert_eq!(
        p.len(),
        5,
        "nothing else (comments, strings, tests): {p:#?}"
    );
}

/// The evidence schema depends on serde alone.
#[test]
fn the_record_crate_depends_on_serde_alone() {
    let manifest = std::fs::read_to_string(root().join("crates/ngcc-record/Cargo.toml")).unwrap();
    let mut section = String::new();
    let mut deps = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            deps.push(line.split(['=', ' ']).next().unwrap().to_string());
        }
    }
    assert_eq!(deps, ["serde"], "{manifest}");
    // And its code names nothing of the engine's.
    for (file, text) in read_tree(&root().join("crates/ngcc-record/src")) {
        let (code, _) = without_tests(&blank(&text));
        for (line, path) in paths(&code) {
            let first = path.split("::").next().unwrap_or("");
            assert!(
                ["crate", "super", "self", "std", "serde", "kinds", "ct", "output", "rounds"]
                    .contains(&first),
                "crates/ngcc-record/src/{file}:{line}: `{path}`"
            );
        }
    }
}

/// Reports read kem-runner's output as the records hold it (`crate::record::output`), never
/// through `kem-native`, the crate that runs KEM code.
#[test]
fn reports_read_the_runners_output_through_the_schema() {
    let tree = read_tree(&root().join("src"));
    let mut seen = 0;
    for (file, text) in tree
        .iter()
        .filter(|(f, _)| f.starts_with("report/") || *f == "record.rs")
    {
        seen += 1;
        let (code, _) = without_tests(&blank(text));
        for (n, line) in code.lines().enumerate() {
            assert!(
                !line.contains("kem_native"),
                "src/{file}:{}: {}",
                n + 1,
                line.trim()
            );
        }
    }
    assert!(seen > 20, "report/ read: {seen} files");
}
