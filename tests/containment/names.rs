//! Untrusted names are text: a package's folder names and `CRYPTO_ALGNAME` with terminal
//! escapes, CR, newlines, C1 and bidi controls reach neither the terminal nor the manifest
//! raw, forge no output line and no manifest node; `check` shows a manifest's raw escapes
//! as text in its snippets.

use std::path::Path;

use super::common::*;
use super::import::{api_h, import, write_files};
use super::raw_control;

/// Names a hostile package uses: OSC window title and clear-screen, a carriage return, a
/// newline forging output lines, a right-to-left override, an isolate and a C1 CSI.
const HOSTILE_NAMES: [&str; 6] = [
    "osc\u{1b}]0;pwned\u{7}\u{1b}[2J",
    "cr\rwrote etc-passwd",
    "nl\nwrote etc-passwd\nnote: all good",
    "rlo\u{202e}SSAP",
    "iso\u{2067}x\u{2069}",
    "c1\u{9b}2K",
];

/// Issue 37 item 3, import: folder names and `CRYPTO_ALGNAME` from the package (and a
/// package path holding a newline that would end the manifest's `//` comment).
#[test]
fn import_shows_names_as_text_and_writes_them_as_kdl() {
    let tmp = tempdir();
    // The package's own folder: its name ends up in the manifest's header comment.
    let pkg = tmp
        .path()
        .join("Pkg\n}\nsubmission \"forged\" {\u{1b}[2J\u{202e}");
    let r = "Reference_Implementation/crypto_kem";
    let alg = "ML\u{1b}[31mKEM\u{9b}2K\u{202e}215\u{2066}-\r512";
    let mut files = vec![(format!("{r}/ml-kem-512/api.h"), api_h(alg, 1632))];
    for n in HOSTILE_NAMES {
        files.push((format!("{r}/{n}/api.h"), api_h("x", 64)));
        files.push((
            format!("Additional_Implementations/{n}/crypto_kem/ml-kem-512/api.h"),
            api_h("y", 64),
        ));
    }
    files.push((
        "KAT/ml-kem-512/PQCkemKAT_1632.rsp".into(),
        format!("# {alg}\n\ncount = 0\n"),
    ));
    write_files(&pkg, &files);
    let into = tmp.path().join("subs");
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    let run = import(&pkg, &into, &scratch, &[]);
    let mut c = Checks::default();
    c.check(run.code == 0, || format!("exit {}", run.code));
    for (what, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        c.check(raw_control(text).is_none(), || {
            format!("{what} holds a raw control: {:?}", raw_control(text))
        });
    }
    // One line per file written, decision or skip: no name forges a line.
    let lines: Vec<&str> = run.stdout.lines().collect();
    c.check(
        lines.iter().all(|l| {
            ["wrote ", "note: ", "skipped: "]
                .iter()
                .any(|p| l.starts_with(p))
        }),
        || "a line that is not wrote/note/skipped".into(),
    );
    let wrote = lines.iter().filter(|l| l.starts_with("wrote ")).count();
    c.check(wrote == 3, || format!("{wrote} `wrote` lines"));
    c.check(!run.stdout.contains("\nwrote etc-passwd"), || {
        "a forged `wrote` line".into()
    });
    // Each hostile folder is named in a note, escaped.
    c.check(run.stdout.contains("osc\\x1b]0;pwned\\x07\\x1b[2J"), || {
        "the OSC name is not shown escaped".into()
    });
    c.check(run.stdout.contains("rlo\\u{202e}SSAP"), || {
        "the RLO name is not shown escaped".into()
    });
    let sub = into.join(id_of(&pkg));
    let manifest = std::fs::read_to_string(sub.join("manifest.kdl")).unwrap_or_default();
    c.check(raw_control(&manifest).is_none(), || {
        format!(
            "manifest.kdl holds a raw control: {:?}",
            raw_control(&manifest)
        )
    });
    c.check(
        !manifest
            .lines()
            .any(|l| l.trim_start().starts_with("submission \"forged\"")),
        || format!("the package path wrote a node:\n{manifest}"),
    );
    c.check(
        manifest.contains("\\u{1b}[31mKEM\\u{9b}2K\\u{202e}"),
        || format!("CRYPTO_ALGNAME is not written with escapes:\n{manifest}"),
    );
    // The manifest is valid and holds one submission: `check` on a pipeline over it.
    let pipeline = tmp.path().join("p.kdl");
    std::fs::write(
        &pipeline,
        format!(
            "system \"s\" {{\n    bench-cpu 0\n    cc \"cc\"\n}}\nflags \"f\" \"-O2\"\n\
             submissions {}\nsubmissions-root {}\noutputs \"out\"\nstep \"source\"\n",
            kdl_str(&format!("{}/*/manifest.kdl", s(&into))),
            kdl_str(&s(tmp.path())),
        ),
    )
    .unwrap();
    let checked = run_with_env(&["check".as_ref(), pipeline.as_os_str()], &[]);
    c.check(
        checked.code == 0 && checked.stdout.contains("1 submissions"),
        || format!("check of the imported manifest: {}", checked.show()),
    );
    c.check(raw_control(&checked.stderr).is_none(), || {
        "check printed a raw control".into()
    });
    c.done(&format!("{}\n{manifest}", run.show()));
}

/// The submission id import makes of a package folder's name.
fn id_of(pkg: &Path) -> String {
    let name = pkg.file_name().unwrap().to_string_lossy();
    let id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.+".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    id.trim_matches('-').replace("..", ".")
}

/// Issue 37 item 3, `check`: a manifest with raw ESC, C1 and bidi characters in a string and
/// in a misspelt node shows them as text in the message and the snippet, at the same
/// line:col.
#[test]
fn check_snippets_show_raw_escapes_as_text() {
    let tmp = tempdir();
    let sub = tmp.path().join("subs/m");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(
        sub.join("manifest.kdl"),
        "submission \"m\" {\n    algoritm \"\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}2K\"\n    \u{202e}bad \"x\"\n}\n",
    )
    .unwrap();
    let pipeline = tmp.path().join("p.kdl");
    std::fs::write(
        &pipeline,
        "system \"s\" {\n    bench-cpu 0\n    cc \"cc\"\n}\nflags \"f\" \"-O2\"\nsubmissions \"subs/*/manifest.kdl\"\noutputs \"out\"\nstep \"source\"\n",
    )
    .unwrap();
    // Rendered as on a terminal without colours (miette's colours are its own escapes;
    // the file's must not show either way, see `dsl::diag`).
    let r = run_with_env(&["check".as_ref(), pipeline.as_os_str()], &[]);
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(r.stderr.contains("manifest.kdl:2:"), "{}", r.show());
    assert!(r.stderr.contains("\"?]0;pwned??[2J¿2K\""), "{}", r.show());
    assert!(
        raw_control(&r.stderr).is_none(),
        "raw control {:?} in\n{}",
        raw_control(&r.stderr),
        r.show()
    );
    // The unit test of `dsl::diag` renders the same with colours.
}
