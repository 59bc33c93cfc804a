//! Issue 37 item 4: paths stay where they belong. A `source path` must resolve inside the
//! manifest's folder or the pipeline's `submissions-root`; `dir`, `sources`, the primitives'
//! folders and headers and `kat submitted` must resolve inside the source root with their
//! links followed. `check` refuses each escape at its file:line:col, and nothing of what
//! they point to is shown.

use std::path::Path;

use super::common::*;

/// A submission folder `sub` with a valid manifest made of `body` lines, the source being
/// `sub/src` unless `body` names another.
fn manifest(sub: &Path, source: &str, body: &str) {
    std::fs::create_dir_all(sub.join("src/inst")).unwrap();
    std::fs::write(sub.join("kat.sha256"), "").unwrap();
    std::fs::write(
        sub.join("manifest.kdl"),
        format!(
            "submission \"m\" {{\n    algorithm \"M\"\n    source path={}\n    kat rng=\"nist\" manifest=\"kat.sha256\"\n{body}}}\n",
            kdl_str(source)
        ),
    )
    .unwrap();
}

fn pipeline(dir: &Path, root: Option<&Path>) -> std::path::PathBuf {
    let p = dir.join("p.kdl");
    let root = root
        .map(|r| format!("submissions-root {}\n", kdl_str(&s(r))))
        .unwrap_or_default();
    std::fs::write(
        &p,
        format!(
            "system \"s\" {{\n    bench-cpu 0\n    cc \"cc\"\n}}\nflags \"f\" \"-O2\"\nsubmissions \"subs/*/manifest.kdl\"\n{root}outputs \"out\"\nstep \"source\"\nstep \"build\" needs=\"source\" flags=\"f\"\n"
        ),
    )
    .unwrap();
    p
}

/// `check` on `pipeline`: exit 2 with `want` at `at` (`manifest.kdl:line:col`).
fn refused(c: &mut Checks, case: &str, pipeline: &Path, at: &str, want: &str) {
    let r = run(&["check".as_ref(), pipeline.as_os_str()]);
    c.check(r.code == 2, || {
        format!("{case}: exit {}\n{}", r.code, r.show())
    });
    c.check(r.stderr.contains(at), || {
        format!("{case}: not at {at}\n{}", r.show())
    });
    c.check(r.stderr.contains(want), || {
        format!("{case}: no `{want}`\n{}", r.show())
    });
    c.check(
        !r.stderr.contains("root:") && !r.stdout.contains("root:"),
        || format!("{case}: something of /root or /etc shown\n{}", r.show()),
    );
}

#[test]
fn source_path_climbing_to_the_root_is_refused_at_its_line() {
    let tmp = tempdir();
    let sub = tmp.path().join("subs/m");
    let up = "../".repeat(sub.components().count() + 2);
    manifest(
        &sub,
        &up,
        "    primitives {\n        include \"root\" \"etc\"\n    }\n    instance \"m\" dir=\"tmp\" namespace=\"M_\"\n",
    );
    let mut c = Checks::default();
    for root in [None, Some(tmp.path())] {
        let p = pipeline(tmp.path(), root);
        refused(
            &mut c,
            "source path to /",
            &p,
            "manifest.kdl:3:17",
            "source path",
        );
    }
    // Inside the manifest's folder it loads.
    manifest(
        &sub,
        "src",
        "    instance \"m\" dir=\"inst\" namespace=\"M_\"\n",
    );
    let r = run(&["check".as_ref(), pipeline(tmp.path(), None).as_os_str()]);
    c.check(r.code == 0, || {
        format!("a source inside is refused: {}", r.show())
    });
    c.done("");
}

#[test]
fn links_that_leave_the_source_are_refused_at_their_line() {
    let tmp = tempdir();
    let sub = tmp.path().join("subs/m");
    let p = pipeline(tmp.path(), None);
    let src = sub.join("src");
    let mut c = Checks::default();
    let cases: [(&str, &str, &str, &str); 4] = [
        (
            "instance dir",
            "    instance \"m\" dir=\"home\" namespace=\"M_\"\n",
            "manifest.kdl:5:22",
            "instance folder `home` resolves outside the source root",
        ),
        (
            "when sources",
            "    matrix impl=\"ref\"\n    instance \"m\" dir=\"inst\" namespace=\"M_\"\n    when impl=\"ref\" {\n        sources \"inst/passwd.c\"\n    }\n",
            "manifest.kdl:8:17",
            "source `inst/passwd.c` resolves outside the source root",
        ),
        (
            "primitives header",
            "    primitives {\n        header \"inst/shadow.h\"\n    }\n    instance \"m\" dir=\"inst\" namespace=\"M_\"\n",
            "manifest.kdl:6:16",
            "primitives header `inst/shadow.h` resolves outside the source root",
        ),
        (
            "kat submitted",
            "    kat-file\n    instance \"m\" dir=\"inst\" namespace=\"M_\"\n",
            "manifest.kdl:4:",
            "submitted KAT file",
        ),
    ];
    for (case, body, at, want) in cases {
        let _ = std::fs::remove_dir_all(&sub);
        let body = body.replace("    kat-file\n", "");
        manifest(&sub, "src", &body);
        std::os::unix::fs::symlink("/root", src.join("home")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("inst/passwd.c")).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", src.join("inst/shadow.h")).unwrap();
        std::os::unix::fs::symlink("/etc", src.join("KAT")).unwrap();
        if case == "kat submitted" {
            let text = std::fs::read_to_string(sub.join("manifest.kdl"))
                .unwrap()
                .replace(
                    "manifest=\"kat.sha256\"",
                    "manifest=\"kat.sha256\" submitted=\"KAT/PQCkemKAT_{sk}.rsp\"",
                );
            std::fs::write(sub.join("manifest.kdl"), text).unwrap();
        }
        refused(&mut c, case, &p, at, want);
    }
    c.done("");
}
