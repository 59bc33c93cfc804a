//! `ngcc-pipe import` on hostile packages: nothing of the package evaluated on the host,
//! every file read defensively and named when skipped, nothing left behind when killed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::*;
use super::{contained, files_text, shadow_line};

/// Writes `files` (path relative to `root`, text) below `root`.
pub fn write_files<P: AsRef<str>, T: AsRef<str>>(root: &Path, files: &[(P, T)]) {
    for (rel, text) in files {
        let (rel, text) = (rel.as_ref(), text.as_ref());
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// An api.h with literal sizes.
pub fn api_h(alg: &str, sk: u64) -> String {
    format!(
        "#define CRYPTO_ALGNAME \"{alg}\"\n#define CRYPTO_SECRETKEYBYTES {sk}\n#define CRYPTO_PUBLICKEYBYTES 800\n\
         #define CRYPTO_CIPHERTEXTBYTES 768\n#define CRYPTO_BYTES 32\n"
    )
}

/// `ngcc-pipe import PKG --into INTO` with `TMPDIR` set to `tmp` (and `env`).
pub fn import(pkg: &Path, into: &Path, tmp: &Path, env: &[(&str, &str)]) -> Run {
    let mut all: Vec<(&str, &str)> = vec![("TMPDIR", tmp.to_str().unwrap())];
    all.extend_from_slice(env);
    run_with_env(
        &[
            "import".as_ref(),
            pkg.as_os_str(),
            "--into".as_ref(),
            into.as_os_str(),
        ],
        &all,
    )
}

/// A secret outside the package, in a folder of its own.
fn secret(dir: &Path) -> (PathBuf, String) {
    let text = format!("NGCC-SECRET-{}", std::process::id() ^ 0x5eed_1e57);
    let p = dir.join("secret").join("secret.txt");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, format!("{text}\n")).unwrap();
    (p, text)
}

/// The package of the first test: `p-incbin` puts the secret and `/etc/shadow` into its
/// probe's name symbol with `.incbin`; `p-hasinc` changes its sizes on `__has_include` of
/// them.
fn evaluating_package(root: &Path, secret: &Path) {
    let s = secret.display();
    let params = format!(
        "#define SK_BASE 1600\n#define PK 800\n\
         __asm__(\".section .rodata\\n.globl ngcc_api_algname\\nngcc_api_algname:\\n.incbin \\\"{s}\\\"\\n.incbin \\\"/etc/shadow\\\"\\n.byte 0\\n.previous\\n\");\n"
    );
    let incbin_api = "#include \"params.h\"\n#define CRYPTO_SECRETKEYBYTES (SK_BASE + 32)\n#define CRYPTO_PUBLICKEYBYTES PK\n\
                      #define CRYPTO_CIPHERTEXTBYTES 768\n#define CRYPTO_BYTES 32\n";
    let hasinc_api = format!(
        "#if __has_include(\"{s}\")\n#define LEVEL 3\n#else\n#define LEVEL 2\n#endif\n\
         #if __has_include(\"/etc/shadow\")\n#define EXTRA 1\n#else\n#define EXTRA 0\n#endif\n\
         #define CRYPTO_ALGNAME \"HasInclude\"\n#define CRYPTO_SECRETKEYBYTES (LEVEL * 800 + EXTRA)\n\
         #define CRYPTO_PUBLICKEYBYTES 800\n#define CRYPTO_CIPHERTEXTBYTES 768\n#define CRYPTO_BYTES 32\n"
    );
    let r = "Reference_Implementation/crypto_kem";
    let kem_c = "#include \"api.h\"\n".to_string();
    write_files(
        root,
        &[
            (format!("{r}/p-incbin/api.h"), incbin_api.to_string()),
            (format!("{r}/p-incbin/params.h"), params),
            (format!("{r}/p-incbin/kem.c"), kem_c.clone()),
            (format!("{r}/p-hasinc/api.h"), hasinc_api),
            (format!("{r}/p-hasinc/kem.c"), kem_c),
            (
                "KAT/p-incbin/PQCkemKAT_1632.rsp".into(),
                "# Incbin-512\n\ncount = 0\n".into(),
            ),
            (
                "KAT/p-hasinc/PQCkemKAT_1600.rsp".into(),
                "# HasInclude\n\ncount = 0\n".into(),
            ),
        ],
    );
}

/// What one import wrote and printed, checked for the secrets.
fn leaks(r: &Run, into: &Path, secrets: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut texts = vec![
        ("stdout".to_string(), r.stdout.clone()),
        ("stderr".into(), r.stderr.clone()),
    ];
    texts.extend(files_text(into));
    for (name, text) in texts {
        for s in secrets {
            if text.contains(s.as_str()) {
                out.push(format!("{name} holds secret text `{s}`"));
            }
        }
    }
    out
}

/// Issue 37 item 1: a top-level `asm(".incbin …")` and `__has_include` of files outside the
/// package change nothing import writes or prints: with bubblewrap the compiler runs in the
/// build jail (which sees neither file), without it the `#define`s are read without one.
#[test]
fn import_evaluates_nothing_of_the_package_on_the_host() {
    if !contained() {
        return;
    }
    let tmp = tempdir();
    let (secret_path, secret_text) = secret(tmp.path());
    let mut secrets = vec![secret_text];
    secrets.extend(shadow_line());
    let pkg = tmp.path().join("Evaluating");
    evaluating_package(&pkg, &secret_path);
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    let mut c = Checks::default();
    let mut shown = String::new();
    // With the sandbox, without it (no `bwrap` on PATH), and with the secret gone: the
    // sizes must not depend on what exists outside the package.
    let mut sizes = Vec::new();
    let cases = [
        ("jailed", None),
        ("no sandbox", Some("/nonexistent")),
        ("secret gone", None),
    ];
    for (i, (case, env)) in cases.into_iter().enumerate() {
        if case == "secret gone" {
            std::fs::remove_file(&secret_path).unwrap();
        }
        let into = tmp.path().join(format!("subs-{i}"));
        let env: Vec<(&str, &str)> = env.map(|p| ("PATH", p)).into_iter().collect();
        let r = import(&pkg, &into, &scratch, &env);
        shown.push_str(&format!("--- {case}\n{}\n", r.show()));
        c.check(r.code == 0, || format!("{case}: exit {}", r.code));
        for l in leaks(&r, &into, &secrets) {
            c.check(false, || format!("{case}: {l}"));
        }
        // Not even the paths the package names outside itself are repeated in notes.
        c.check(
            !r.stdout.contains("secret.txt") && !r.stdout.contains("/etc/shadow"),
            || format!("{case}: a note quotes the package's outside paths"),
        );
        let csv = std::fs::read_to_string(into.join("Evaluating/sizes.csv")).unwrap_or_default();
        // p-incbin's sizes come from its #defines either way (the jail cannot read the
        // `.incbin`'s files, so its compiler fails).
        c.check(csv.contains("p-incbin-reference,800,1632,768,32"), || {
            format!("{case}: p-incbin's sizes: {csv}")
        });
        c.check(
            r.stdout
                .contains("p-incbin: api.h's sizes are not plain numbers"),
            || format!("{case}: no note on how p-incbin's sizes were read"),
        );
        if case == "no sandbox" {
            // `__has_include` needs a compiler: a TODO, no guess.
            c.check(csv.contains("# TODO p-hasinc-reference"), || {
                format!("{case}: p-hasinc is not a TODO: {csv}")
            });
            c.check(r.stdout.contains("TODO sizes"), || {
                format!("{case}: no TODO note")
            });
        } else {
            sizes.push(csv.clone());
            c.check(csv.contains("p-hasinc-reference,800,1600,768,32"), || {
                format!("{case}: p-hasinc's sizes saw outside the jail: {csv}")
            });
        }
        let left = tree(&scratch);
        c.check(left.is_empty(), || format!("{case}: TMPDIR keeps {left:?}"));
    }
    c.check(sizes.len() == 2 && sizes[0] == sizes[1], || {
        format!("sizes.csv depends on the secret's existence: {sizes:?}")
    });
    c.done(&shown);
}

/// Makes a FIFO at `p`.
fn fifo(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let ok = Command::new("mkfifo").arg(p).status().unwrap().success();
    assert!(ok, "mkfifo {}", p.display());
}

/// Runs `cmd` to its end and returns its exit code and its peak resident memory (KiB).
// Waited for with `wait4`, which gives its resource usage, rather than `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_measured(mut cmd: Command) -> (i32, u64, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; `pid` is our child, waited once.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, usage.ru_maxrss as u64, reader.join().unwrap())
}

/// Issue 37 item 2: links out of the package (a Makefile to a secret, a parameter folder,
/// `/dev/zero`), FIFOs (a Makefile, a header, a KAT file) and an 8 GiB sparse source and KAT
/// file are not read: import ends at once with small memory and names each one.
#[test]
fn import_reads_the_package_defensively_and_names_what_it_skips() {
    let tmp = tempdir();
    let (secret_path, secret_text) = secret(tmp.path());
    std::fs::write(
        &secret_path,
        format!("CFLAGS = -mNGCCSECRETFLAG {secret_text}\n"),
    )
    .unwrap();
    let outside = tmp.path().join("outside/evil");
    write_files(&outside, &[("api.h", api_h("NGCC-OUTSIDE-NAME", 1632))]);
    let pkg = tmp.path().join("Defensive");
    let r = "Reference_Implementation/crypto_kem";
    write_files(
        &pkg,
        &[
            (format!("{r}/p1/api.h"), api_h("Def-1", 1632)),
            (format!("{r}/p1/kem.c"), "#include \"api.h\"\n".into()),
            (format!("{r}/p2/api.h"), api_h("Def-2", 2400)),
            (format!("{r}/p3/api.h"), api_h("Def-3", 3168)),
            (
                "KAT/p1/PQCkemKAT_1632.rsp".into(),
                "# Def-1\n\ncount = 0\n".into(),
            ),
        ],
    );
    std::os::unix::fs::symlink(&secret_path, pkg.join(r).join("p1/Makefile")).unwrap();
    fifo(&pkg.join(r).join("p1/params.h"));
    std::fs::File::create(pkg.join(r).join("p1/big.c"))
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    fifo(&pkg.join(r).join("p2/Makefile"));
    std::os::unix::fs::symlink("/dev/zero", pkg.join(r).join("p3/Makefile")).unwrap();
    std::os::unix::fs::symlink(&outside, pkg.join(r).join("evil")).unwrap();
    std::fs::create_dir_all(pkg.join("KAT/p2")).unwrap();
    std::fs::File::create(pkg.join("KAT/p2/PQCkemKAT_2400.rsp"))
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    fifo(&pkg.join("KAT/p3/PQCkemKAT_3168.rsp"));
    let into = tmp.path().join("subs");
    let scratch = tmp.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    let mut cmd = ngcc();
    cmd.args([
        "import".as_ref(),
        pkg.as_os_str(),
        "--into".as_ref(),
        into.as_os_str(),
    ])
    .env("TMPDIR", &scratch);
    let start = Instant::now();
    let (code, rss_kib, stdout) = run_measured(cmd);
    let secs = start.elapsed().as_secs_f64();
    let mut c = Checks::default();
    c.check(code == 0, || format!("exit {code}"));
    c.check(secs < 60.0, || format!("took {secs:.0} s"));
    c.check(rss_kib < 512 << 10, || format!("peak RSS {rss_kib} KiB"));
    let skipped = |path: &str, why: &str| {
        stdout
            .lines()
            .any(|l| l.starts_with("skipped: ") && l.contains(path) && l.contains(why))
    };
    for (path, why) in [
        ("p1/Makefile", "leaves the package"),
        ("p1/params.h", "FIFO"),
        ("p1/big.c", "larger than"),
        ("p2/Makefile", "FIFO"),
        ("p3/Makefile", "leaves the package"),
        ("crypto_kem/evil", "leaves the package"),
        ("KAT/p2/PQCkemKAT_2400.rsp", "larger than"),
        ("KAT/p3/PQCkemKAT_3168.rsp", "FIFO"),
    ] {
        c.check(skipped(path, why), || {
            format!("{path} not named as skipped ({why})")
        });
    }
    let mut all = vec![("stdout".to_string(), stdout.clone())];
    all.extend(files_text(&into));
    for (name, text) in &all {
        for bad in ["NGCCSECRETFLAG", "NGCC-OUTSIDE-NAME", secret_text.as_str()] {
            c.check(!text.contains(bad), || format!("{name} holds `{bad}`"));
        }
    }
    let manifest = std::fs::read_to_string(into.join("Defensive/manifest.kdl")).unwrap_or_default();
    c.check(manifest.contains("matrix param=\"p1 p2 p3\""), || {
        format!("the three parameter sets are not imported:\n{manifest}")
    });
    c.check(tree(&scratch).is_empty(), || {
        format!("TMPDIR keeps {:?}", tree(&scratch))
    });
    c.done(&stdout);
}

/// Issue 37 item 2: an import killed with SIGKILL at any moment (while unpacking, while the
/// contained compiler runs, while writing) leaves nothing in `TMPDIR` and, in `--into`,
/// either the whole submission folder or nothing.
#[test]
fn a_killed_import_leaves_nothing_behind() {
    let tmp = tempdir();
    let pkg = tmp.path().join("Killed");
    let r = "Reference_Implementation/crypto_kem";
    let mut files: Vec<(String, String)> = Vec::new();
    for (p, k) in [("k2", 2), ("k3", 3), ("k4", 4)] {
        files.push((
            format!("{r}/{p}/api.h"),
            format!(
                "#include \"params.h\"\n#define CRYPTO_ALGNAME \"Killed-{k}\"\n\
                 #define CRYPTO_SECRETKEYBYTES (K * 800)\n#define CRYPTO_PUBLICKEYBYTES (K * 400)\n\
                 #define CRYPTO_CIPHERTEXTBYTES (K * 300)\n#define CRYPTO_BYTES 32\n"
            ),
        ));
        files.push((format!("{r}/{p}/params.h"), format!("#define K {k}\n")));
    }
    write_files(&pkg, &files);
    let archive = tmp.path().join("Killed.tar.gz");
    let ok = Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(tmp.path())
        .arg("Killed")
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let mut c = Checks::default();
    let mut killed_early = 0;
    for (i, after_ms) in [30u64, 120, 250, 400, 700, 1000].into_iter().enumerate() {
        let scratch = tmp.path().join(format!("tmp-{i}"));
        let into = tmp.path().join(format!("subs-{i}"));
        std::fs::create_dir(&scratch).unwrap();
        let mut child = ngcc()
            .args([
                "import".as_ref(),
                archive.as_os_str(),
                "--into".as_ref(),
                into.as_os_str(),
            ])
            .env("TMPDIR", &scratch)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(after_ms));
        let running = child.try_wait().unwrap().is_none();
        child.kill().unwrap();
        child.wait().unwrap();
        killed_early += usize::from(running);
        // The watcher removes what the import made once it is gone.
        let until = Instant::now() + Duration::from_secs(10);
        while !tree(&scratch).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        c.check(tree(&scratch).is_empty(), || {
            format!(
                "killed after {after_ms} ms: TMPDIR keeps {:?}",
                tree(&scratch)
            )
        });
        let written = tree(&into);
        let whole = [
            "Killed/kat.sha256",
            "Killed/manifest.kdl",
            "Killed/sizes.csv",
        ];
        c.check(written.is_empty() || written == whole, || {
            format!("killed after {after_ms} ms: --into holds {written:?}")
        });
    }
    c.check(killed_early > 0, || {
        "every import ended before it was killed".into()
    });
    c.done("");
}
