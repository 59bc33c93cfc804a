use super::*;

fn jail(dir: &Path) -> Jail {
    Jail {
        read: vec![dir.to_path_buf()],
        write: vec![dir.join("rw")],
        cwd: dir.join("rw"),
        memory: DEFAULT_MEMORY,
        cpu: None,
        alongside: 0,
    }
}

fn sh(sb: &Sandbox, j: &Jail, script: &str) -> std::process::Output {
    sb.command(Path::new("/bin/sh"), &["-c".into(), script.into()], j)
        .output()
        .unwrap()
}

#[test]
fn bwrap_hides_home_and_keeps_writes_in_the_jail() {
    let sb = Sandbox::detect();
    let missing = (!sb.contained()).then(|| sb.info.missing.join("; "));
    if !crate::require::require("bubblewrap", missing) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // Readable by the jail user of a root engine.
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir_all(d.path().join("rw")).unwrap();
    std::fs::write(d.path().join("input"), "in").unwrap();
    let j = jail(d.path());
    let out = sh(
        &sb,
        &j,
        "cat ../input && echo ok > out && touch ../outside; ls /root | wc -l; \
         head -c 1 /dev/zero | od -An -tx1; env | sort",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("in0\n"),
        "input unreadable or /root not empty: {text}"
    );
    // The jail's devices open (as root the code runs under a second bwrap: a plain
    // bind of the first one's view made them nodev, and gcc -dM -E of /dev/null failed).
    assert!(text.contains("\n 00\n"), "/dev/zero unreadable: {text}");
    assert!(!text.contains("CARGO"), "environment leaked: {text}");
    assert_eq!(
        std::fs::read_to_string(d.path().join("rw/out")).unwrap(),
        "ok\n"
    );
    assert!(!d.path().join("outside").exists());
}

#[test]
fn limits_apply_with_and_without_bwrap() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("rw")).unwrap();
    let mut j = jail(d.path());
    j.memory = 1 << 30;
    for sb in [Sandbox::detect(), Sandbox::unavailable("test")] {
        let out = sh(&sb, &j, "ulimit -v; ulimit -n");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text,
            format!("{}\n{OPEN_FILES}\n", (1u64 << 30) / 1024),
            "{:?}",
            sb.info
        );
    }
    assert!(!Sandbox::unavailable("x").info.missing.is_empty());
}
