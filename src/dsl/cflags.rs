//! Compiler options a campaign file may give (`flags` profiles, `cflags` in `when` blocks).
//!
//! Flags reach the compiler's command line as they are, so an option that runs another
//! program, loads a plugin, reads options from a file or writes somewhere else turns a
//! manifest into a command. Options are therefore allowed by family (code generation,
//! warnings, preprocessor definitions and include folders, language standard, debug
//! information), with the families' dangerous members refused; anything else is refused
//! with the reason, so `check` stops it at its line.

/// Options that take their value as the next argument and are allowed (include folders
/// and files, macro definitions).
const WITH_VALUE: [&str; 8] = [
    "-D",
    "-U",
    "-I",
    "-isystem",
    "-iquote",
    "-idirafter",
    "-include",
    "-imacros",
];

/// `-f` options that load code, run programs, or write files outside the build folder.
const F_REFUSED: [(&str, &str); 11] = [
    ("-fplugin", "loads a compiler plugin"),
    ("-fuse-ld", "chooses the linker program"),
    ("-fuse-linker-plugin", "loads a linker plugin"),
    (
        "-fprofile-generate",
        "makes the KEM write profile files when it runs",
    ),
    (
        "-fprofile-arcs",
        "makes the KEM write coverage files when it runs",
    ),
    ("-fprofile-dir", "names where profile files are written"),
    ("-fprofile-use", "reads profile files from elsewhere"),
    ("-fauto-profile", "reads a profile file from elsewhere"),
    ("-fdump-", "writes compiler dumps beside the sources"),
    ("-fcallgraph-info", "writes files beside the sources"),
    ("-fstack-usage", "writes files beside the sources"),
];

/// What is wrong with one compiler argument, or `None` if it is allowed. `after` is the
/// argument before it (an option such as `-I` takes the next argument as its value).
pub(crate) fn flag_problem(flag: &str, after: Option<&str>) -> Option<String> {
    if after.is_some_and(|a| WITH_VALUE.contains(&a)) {
        return value_problem(flag);
    }
    let refuse = |why: &str| Some(format!("`{flag}` {why}"));
    if flag.starts_with("-f") {
        for (p, why) in F_REFUSED {
            if flag.starts_with(p) {
                return refuse(why);
            }
        }
        return None;
    }
    if flag.starts_with("-W") {
        return match flag {
            f if f.starts_with("-Wl,") => refuse("passes options to the linker"),
            f if f.starts_with("-Wa,") => refuse("passes options to the assembler"),
            f if f.starts_with("-Wp,") => refuse("passes options to the preprocessor"),
            _ => None,
        };
    }
    if WITH_VALUE.contains(&flag) {
        return None;
    }
    // The value attached: `-DX=1`, `-Iinclude`, `-isystem/usr/include/x`.
    for p in WITH_VALUE {
        if let Some(v) = flag.strip_prefix(p) {
            return value_problem(v.trim_start_matches('='));
        }
    }
    let allowed_prefix = ["-O", "-m", "-g", "-std=", "-pedantic"];
    let allowed_exact = ["-w", "-ansi", "-pthread", "-pipe"];
    if allowed_exact.contains(&flag) || allowed_prefix.iter().any(|p| flag.starts_with(p)) {
        return None;
    }
    if flag.starts_with('@') {
        return refuse("reads more options from a file");
    }
    let known: [(&str, &str); 13] = [
        (
            "-wrapper",
            "runs the compiler's programs through another program",
        ),
        (
            "-B",
            "makes the compiler look for its programs in another folder",
        ),
        ("-specs", "reads a specs file, which can run programs"),
        ("--specs", "reads a specs file, which can run programs"),
        ("--sysroot", "takes headers and libraries from another root"),
        ("-isysroot", "takes headers from another root"),
        ("-iplugindir", "loads compiler plugins from a folder"),
        ("-o", "writes the output elsewhere"),
        ("-save-temps", "writes intermediate files elsewhere"),
        ("-dump", "writes files elsewhere"),
        ("-M", "writes dependency files elsewhere"),
        ("-X", "passes options to another program"),
        ("-x", "changes the source language of what follows"),
    ];
    for (p, why) in known {
        if flag.starts_with(p) {
            return refuse(why);
        }
    }
    if flag.starts_with('-') {
        refuse("is not among the allowed options (code generation `-O`/`-m`/`-f`, warnings `-W`, `-D`/`-U`/`-I`, `-std=`, `-g`)")
    } else {
        refuse("is not an option (file names are given with `sources`)")
    }
}

/// A value of an include or definition option: no option smuggled in as the value.
fn value_problem(v: &str) -> Option<String> {
    if v.starts_with('-') || v.starts_with('@') {
        Some(format!("`{v}` is an option where a value was expected"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(flags: &[&str]) -> Vec<Option<String>> {
        let mut prev = None;
        flags
            .iter()
            .map(|f| {
                let p = flag_problem(f, prev);
                prev = Some(f);
                p
            })
            .collect()
    }

    #[test]
    fn usual_flags_pass() {
        let ok = [
            "-O3",
            "-march=native",
            "-mavx2",
            "-fomit-frame-pointer",
            "-fno-strict-aliasing",
            "-Wall",
            "-Wno-unused",
            "-DX=1",
            "-UNDEBUG",
            "-Iinclude",
            "-std=c99",
            "-g",
            "-pedantic",
            "-fPIC",
        ];
        assert!(check(&ok).iter().all(Option::is_none), "{:?}", check(&ok));
        assert!(check(&["-I", "common", "-include", "x.h", "-D", "A"])
            .iter()
            .all(Option::is_none));
    }

    #[test]
    fn programs_plugins_and_files_are_refused() {
        for f in [
            "-wrapper",
            "-fplugin=/tmp/p.so",
            "-fplugin-arg-p-x=y",
            "-B/tmp",
            "-specs=x",
            "--specs=x",
            "@opts",
            "--sysroot=/",
            "-Wl,--plugin=x",
            "-Wa,-a=/tmp/l",
            "-Xlinker",
            "-o",
            "-MF",
            "-save-temps=obj",
            "-fprofile-generate=/tmp",
            "-fuse-ld=/tmp/ld",
            "/bin/sh,-c,touch x",
        ] {
            assert!(flag_problem(f, None).is_some(), "{f} passed");
        }
        // An option smuggled in as the value of `-I`.
        assert!(flag_problem("-wrapper", Some("-I")).is_some());
    }
}
