//! Symbols read with `object`, for `check --deep`'s link prediction: what a compiled
//! object defines and needs, what a system library defines (a shared object's dynamic
//! symbols, an archive's symbol table, the files a linker script such as glibc's `libc.so`
//! names), and what the C runtime a `-shared` link adds by default defines (libc, its
//! `libc_nonshared.a` and loader, libgcc). The libraries are the host's, found with the
//! pipeline's compiler (`cc -print-file-name`), never the package's.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Largest library or object read.
const CAP: u64 = 256 << 20;
/// How deep linker scripts may name other scripts.
const SCRIPT_DEPTH: usize = 3;

/// Symbols the linker itself or the start files of a `-shared` link (`crti.o`,
/// `crtbeginS.o`, ...) define; `__start_<section>` and `__stop_<section>` likewise.
const LINKER_DEFINED: &[&str] = &[
    "_GLOBAL_OFFSET_TABLE_",
    "_DYNAMIC",
    "__ehdr_start",
    "__dso_handle",
    "__TMC_END__",
    "_init",
    "_fini",
    "_edata",
    "_end",
    "__bss_start",
    "__executable_start",
    "__init_array_start",
    "__init_array_end",
    "__fini_array_start",
    "__fini_array_end",
];

/// Whether the linker provides `name` (see [`LINKER_DEFINED`]).
pub fn linker_defined(name: &str) -> bool {
    LINKER_DEFINED.contains(&name) || name.starts_with("__start_") || name.starts_with("__stop_")
}

/// What one object defines (global or weak) and needs (undefined, not weak).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Symbols {
    pub defined: BTreeSet<String>,
    pub undefined: BTreeSet<String>,
}

/// The symbols of a relocatable object file (`.o`).
pub fn of_object(bytes: &[u8]) -> Result<Symbols, String> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let file = object::File::parse(bytes).map_err(|e| e.to_string())?;
    let mut out = Symbols::default();
    for s in file.symbols() {
        if matches!(s.kind(), SymbolKind::Section | SymbolKind::File) {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        if name.is_empty() {
            continue;
        }
        if s.is_undefined() {
            if !s.is_weak() && !linker_defined(name) {
                out.undefined.insert(name.to_string());
            }
        } else if !s.is_local() {
            out.defined.insert(name.to_string());
        }
    }
    Ok(out)
}

/// The file `cc -print-file-name=<name>` names, when it exists.
pub fn file_of(cc: &str, name: &str) -> Option<PathBuf> {
    Command::new(cc)
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.is_absolute() && p.is_file())
}

/// What the library file `path` defines: a shared object's dynamic symbols, an archive's
/// symbol table, or those of the files a linker script names (found with `cc`).
pub fn of_library(cc: &str, path: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    add_library(cc, path, 0, &mut out);
    out
}

fn add_library(cc: &str, path: &Path, depth: usize, out: &mut BTreeSet<String>) {
    use object::{Object, ObjectSymbol};
    // A system library is usually a link (`libcrypto.so` -> `libcrypto.so.3`), which
    // `safe_fs` does not follow: the file it resolves to is read.
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let Ok(bytes) = crate::safe_fs::read(&real, CAP) else {
        return;
    };
    if let Ok(archive) = object::read::archive::ArchiveFile::parse(&*bytes) {
        if let Ok(Some(symbols)) = archive.symbols() {
            for s in symbols.flatten() {
                out.insert(String::from_utf8_lossy(s.name()).into_owned());
            }
        }
        return;
    }
    if let Ok(file) = object::File::parse(&*bytes) {
        for s in file.dynamic_symbols().filter(|s| !s.is_undefined()) {
            if let Ok(n) = s.name() {
                out.insert(n.to_string());
            }
        }
        return;
    }
    if depth >= SCRIPT_DEPTH {
        return;
    }
    // A linker script: `GROUP ( /lib/.../libc.so.6 /usr/lib/.../libc_nonshared.a
    // AS_NEEDED ( /lib64/ld-linux-x86-64.so.2 ) )`, or names and `-l` options.
    let text = String::from_utf8_lossy(&bytes);
    for word in script_files(&text) {
        let file = if word.starts_with('/') {
            Some(PathBuf::from(word))
        } else if let Some(l) = word.strip_prefix("-l") {
            file_of(cc, &format!("lib{l}.so")).or_else(|| file_of(cc, &format!("lib{l}.a")))
        } else {
            file_of(cc, word)
        };
        if let Some(f) = file {
            add_library(cc, &f, depth + 1, out);
        }
    }
}

/// The files a linker script names (paths, `lib...` names, `-l` options), comments out.
fn script_files(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        let before = &rest[..start];
        out.extend(words(before));
        rest = rest[start..]
            .find("*/")
            .map_or("", |e| &rest[start + e + 2..]);
    }
    out.extend(words(rest));
    out
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || "(),".contains(c))
        .filter(|w| w.starts_with('/') || w.starts_with("lib") || w.starts_with("-l"))
}

/// What a `-shared` link gets without asking: libc (through its linker script: the
/// shared library, `libc_nonshared.a`, the loader) and libgcc.
pub fn runtime(cc: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for name in ["libc.so", "libgcc_s.so"] {
        if let Some(f) = file_of(cc, name) {
            add_library(cc, &f, 0, &mut out);
        }
    }
    let libgcc = Command::new(cc)
        .arg("-print-libgcc-file-name")
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.is_absolute() && p.is_file());
    if let Some(f) = libgcc {
        add_library(cc, &f, 0, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_scripts_objects_and_the_runtime() {
        let script = "/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( /lib/x/libc.so.6 /usr/lib/x/libc_nonshared.a  AS_NEEDED ( /lib64/ld.so.2 ) )\n";
        assert_eq!(
            script_files(script),
            [
                "/lib/x/libc.so.6",
                "/usr/lib/x/libc_nonshared.a",
                "/lib64/ld.so.2"
            ]
        );
        assert_eq!(
            script_files("GROUP ( libgcc_s.so.1 -lgcc )"),
            ["libgcc_s.so.1", "-lgcc"]
        );
        let rt = runtime("cc");
        for s in ["memcpy", "malloc", "__stack_chk_fail"] {
            assert!(rt.contains(s), "the C runtime defines {s}");
        }
        assert!(!rt.contains("sqrt"), "libm is not linked by default");
        // Through the `libm.so` script or link, as a `link "m"` finds it.
        let libm = of_library("cc", &file_of("cc", "libm.so").unwrap());
        assert!(libm.contains("sqrt"));
        let d = tempfile::tempdir().unwrap();
        let c = d.path().join("a.c");
        std::fs::write(&c, "int need(void);\nstatic int local(void) { return 1; }\nint have(void) { return need() + local(); }\n").unwrap();
        let o = d.path().join("a.o");
        let st = Command::new("cc")
            .arg("-c")
            .arg(&c)
            .arg("-o")
            .arg(&o)
            .status()
            .unwrap();
        assert!(st.success());
        let s = of_object(&std::fs::read(&o).unwrap()).unwrap();
        assert_eq!(s.defined.iter().collect::<Vec<_>>(), ["have"]);
        assert_eq!(s.undefined.iter().collect::<Vec<_>>(), ["need"]);
    }
}
