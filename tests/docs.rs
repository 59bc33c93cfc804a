//! The guide cannot drift from the code: every KDL example in README.md and `docs/` parses,
//! every `ngcc-pipe` command shown (in a code block, or in inline code) names a subcommand
//! and flags that exist, with values they accept, every repository path a page cites exists,
//! and every step property is explained in the language guide.

use std::path::{Path, PathBuf};

/// README.md and every page of `docs/`.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut v = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 5, "the guide has its pages: {docs:?}");
    v.extend(docs);
    v
}

/// Fenced code blocks of a Markdown text: (info string, first line number, body).
fn blocks(text: &str) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            match open.take() {
                Some(b) => out.push(b),
                None => open = Some((info.trim().to_string(), i + 2, String::new())),
            }
        } else if let Some((_, _, body)) = &mut open {
            body.push_str(line);
            body.push('\n');
        }
    }
    assert!(open.is_none(), "unclosed code block");
    out
}

/// Shell words of one command line, up to a pipe, a redirection or a comment.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '|' | '>' | '#' | ';') => break,
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The `ngcc-pipe` command of a line, as argv (`cargo run --release --` counts as the binary).
fn command_of(line: &str) -> Option<Vec<String>> {
    let line = line.trim().trim_start_matches("$ ");
    let rest = line
        .strip_prefix("ngcc-pipe ")
        .or_else(|| line.strip_prefix("target/release/ngcc-pipe "))
        .or_else(|| line.strip_prefix("cargo run --release -- "))?;
    let mut argv = vec!["ngcc-pipe".to_string()];
    argv.extend(words(rest));
    Some(argv)
}

/// Inline code spans of a Markdown line.
fn inline_code(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

#[test]
fn kdl_examples_parse() {
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (info, line, body) in blocks(&text) {
            if info != "kdl" {
                continue;
            }
            if let Err(e) = body.parse::<kdl::KdlDocument>() {
                panic!(
                    "{}:{line}: this KDL example does not parse: {e:?}",
                    page.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} KDL examples found");
}

#[test]
fn commands_use_flags_that_exist() {
    let cli = ngcc_pipe::cli::command();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut commands: Vec<(usize, Vec<String>)> = Vec::new();
        for (info, first, body) in blocks(&text) {
            if matches!(info.as_str(), "sh" | "bash" | "console" | "text" | "") {
                for (i, l) in body.lines().enumerate() {
                    if let Some(argv) = command_of(l) {
                        commands.push((first + i, argv));
                    }
                }
            }
        }
        for (i, l) in text.lines().enumerate() {
            for span in inline_code(l) {
                // Inline spans with an ellipsis abbreviate a command; they are not examples.
                if span.contains('…') || span.contains("...") {
                    continue;
                }
                match command_of(span) {
                    // `ngcc-pipe run` in prose names a subcommand: it must exist.
                    Some(argv) if argv.len() == 2 => {
                        if cli.find_subcommand(&argv[1]).is_none() {
                            wrong.push(format!(
                                "{}:{}: no subcommand `{}`",
                                page.display(),
                                i + 1,
                                argv[1]
                            ));
                        }
                        checked += 1;
                    }
                    Some(argv) => commands.push((i + 1, argv)),
                    None => {}
                }
            }
        }
        for (line, argv) in commands {
            if let Err(e) = cli.clone().try_get_matches_from(&argv) {
                use clap::error::ErrorKind::{DisplayHelp, DisplayVersion};
                if !matches!(e.kind(), DisplayHelp | DisplayVersion) {
                    wrong.push(format!(
                        "{}:{line}: `{}` is not a valid command:\n{e}",
                        page.display(),
                        argv.join(" ")
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 20, "only {checked} commands found");
}

#[test]
fn the_readme_is_a_front_door() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 250,
        "README.md has {} lines; the reference belongs in docs/",
        readme.lines().count()
    );
    // Every page the README links to exists.
    for l in readme.lines() {
        for part in l.split("](").skip(1) {
            let target = part.split(')').next().unwrap();
            if target.starts_with("docs/") {
                let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
                let page = std::fs::read_to_string(root.join(file))
                    .unwrap_or_else(|_| panic!("README links to missing {file}"));
                // An anchor names a heading of that page (GitHub's slug of it).
                let slug = |h: &str| -> String {
                    h.trim_start_matches('#')
                        .trim()
                        .to_lowercase()
                        .chars()
                        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
                        .map(|c| if c == ' ' { '-' } else { c })
                        .collect()
                };
                assert!(
                    anchor.is_empty()
                        || page
                            .lines()
                            .any(|l| l.starts_with('#') && slug(l) == anchor),
                    "README links to {target}, but {file} has no such heading"
                );
            }
        }
    }
}

/// Repository paths cited in inline code that name the reader's own files or another
/// project's, not this repository's: (path, why).
const NOT_OURS: &[(&str, &str)] = &[
    (
        "submissions/Kyber",
        "the folder a reader imports a package into",
    ),
    ("pipelines/nist.kdl", "a pipeline the reader writes"),
    ("tests/KATs/kem/kats.json", "a file of liboqs's tree"),
];

#[test]
fn every_path_a_page_cites_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tops = [
        "src/",
        "tests/",
        "scripts/",
        "docs/",
        "pipelines/",
        "kem-native/",
        "crates/",
        "submissions/",
        ".ci/",
    ];
    let mut missing = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (i, line) in text.lines().enumerate() {
            for span in inline_code(line) {
                let t = span.trim();
                // Placeholders and globs (`run/steps/<kind>.rs`, `*/manifest.kdl`) are
                // patterns, not paths; `path:line` and `path::item` cite the path.
                if !tops.iter().any(|p| t.starts_with(p)) || t.contains(['<', '>', '*', '{', ' ']) {
                    continue;
                }
                let path = t.split(':').next().unwrap_or(t);
                if NOT_OURS.iter().any(|(p, _)| *p == path) {
                    continue;
                }
                checked += 1;
                if !root.join(path).exists() {
                    missing.push(format!("{}:{}: `{path}`", page.display(), i + 1));
                }
            }
        }
    }
    assert!(checked >= 50, "only {checked} cited paths found");
    assert!(
        missing.is_empty(),
        "cited paths that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_step_property_is_explained_in_the_language_guide() {
    use ngcc_pipe::model::{KindFacts, StepKind};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/language.md")).unwrap();
    let mut missing = Vec::new();
    for kind in StepKind::ALL {
        let common = ["needs", "exclusive", "timeout"];
        for p in kind.table().props.iter().chain(&common) {
            if !guide.contains(&format!("{p}=")) && !guide.contains(&format!("`{p}`")) {
                missing.push(format!("{p} (step `{}`)", kind.name()));
            }
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "not in docs/language.md: {}",
        missing.join(", ")
    );
}
