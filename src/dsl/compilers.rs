//! The compilers of a system: `cc "gcc"` and `compilers "gcc" "clang-16"`. Each one must be
//! installed: a missing one is an error at its value, with the line that installs it.

use std::path::Path;

use kdl::{KdlEntry, KdlNode};

use super::fs::SourceFs;
use super::reader::NodeReader;
use crate::model::compiler_label;

/// `compilers "gcc" "clang-16"`: the commands, each checked, two with the same label
/// (`/usr/bin/gcc` and `gcc`) refused.
pub(super) fn lower_compilers(
    cx: &mut NodeReader<'_>,
    n: &KdlNode,
    fs: &dyn SourceFs,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (command, e) in cx.string_args(n, "compilers", 1) {
        if let Some(first) = out
            .iter()
            .find(|c| compiler_label(c) == compiler_label(&command))
        {
            let s = cx.value_span(e);
            cx.error(
                s,
                "named twice",
                format!(
                    "compiler `{command}` is already in the list as `{first}`: each compiler is \
                     named once (instances are told apart by the compiler's file name)"
                ),
            );
            continue;
        }
        check_compiler(cx, fs, &command, e);
        out.push(command);
    }
    out
}

/// An error at `e` when `command` names no installed program, with its install line.
pub(super) fn check_compiler(
    cx: &mut NodeReader<'_>,
    fs: &dyn SourceFs,
    command: &str,
    e: &KdlEntry,
) {
    if command.is_empty() || command.chars().any(char::is_whitespace) {
        let s = cx.value_span(e);
        cx.error(
            s,
            "not a command",
            format!("`{command}` is not a compiler command: name one program (flags go in `flags` profiles)"),
        );
        return;
    }
    if fs.program(command).is_some() {
        return;
    }
    let s = cx.value_span(e);
    let d = cx
        .diag(format!(
            "compiler `{command}` is not installed on this machine"
        ))
        .label(s, "not found")
        .help(install_hint(command));
    cx.push(d);
}

/// How to install a compiler on Debian, by its command's name.
pub fn install_hint(command: &str) -> String {
    let name = compiler_label(command);
    let package = debian_package(name);
    let how = match package {
        Some(p) => format!("install it with `apt-get install {p}`"),
        None => "install it".to_string(),
    };
    let where_ = if Path::new(command).is_absolute() {
        format!("no file {command}")
    } else {
        format!("no `{command}` in any folder of PATH")
    };
    format!("{where_}; {how}, or name the compiler's path")
}

/// The Debian package holding a compiler command (`clang-16` -> `clang-16`, `cc` -> `gcc`,
/// `aarch64-linux-gnu-gcc-12` -> `gcc-12-aarch64-linux-gnu`), when the name says it.
fn debian_package(name: &str) -> Option<String> {
    let versioned = |base: &str, rest: &str| -> Option<String> {
        match rest {
            "" => Some(base.to_string()),
            v if v.strip_prefix('-')?.chars().all(|c| c.is_ascii_digit()) => {
                Some(format!("{base}{v}"))
            }
            _ => None,
        }
    };
    match name {
        "cc" | "c99" => return Some("gcc".into()),
        _ => {}
    }
    for base in ["gcc", "clang"] {
        if let Some(rest) = name.strip_prefix(base) {
            return versioned(base, rest);
        }
    }
    // A cross compiler: `<triple>-gcc[-N]` is in `gcc[-N]-<triple>`.
    let (triple, tail) = name.split_once("-gcc")?;
    let version = versioned("gcc", tail)?;
    Some(format!("{version}-{triple}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_packages_of_compiler_names() {
        assert_eq!(debian_package("clang-16").as_deref(), Some("clang-16"));
        assert_eq!(debian_package("clang").as_deref(), Some("clang"));
        assert_eq!(debian_package("gcc-12").as_deref(), Some("gcc-12"));
        assert_eq!(debian_package("cc").as_deref(), Some("gcc"));
        assert_eq!(
            debian_package("aarch64-linux-gnu-gcc").as_deref(),
            Some("gcc-aarch64-linux-gnu")
        );
        assert_eq!(
            debian_package("aarch64-linux-gnu-gcc-12").as_deref(),
            Some("gcc-12-aarch64-linux-gnu")
        );
        assert_eq!(debian_package("icx"), None);
        assert_eq!(debian_package("clang-tidy"), None);
        assert!(install_hint("/opt/x/clang-17").contains("no file /opt/x/clang-17"));
        assert!(install_hint("clang-16").contains("apt-get install clang-16"));
    }
}
