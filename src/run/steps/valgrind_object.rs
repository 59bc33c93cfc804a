//! The valgrind object: the instance's sources and primitives compiled again with the build's
//! flags plus debug information (function and line names in callgrind's output; it does not
//! change the generated code) in a format the installed valgrind reads ([`debug_flag`]) and, for each instruction-set extension valgrind cannot execute that the
//! compiler would use with those flags ([`UNRUNNABLE`]), the flag that turns it off. Built by
//! the `build` step when a step that runs under valgrind (`count`, `ct`) is declared; those
//! steps run this object, not the plain one, and their reports say which flags it had.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::compiler::Compiler;
use super::shared::{shared_key, shared_objects, stem};
use super::StepError;
use crate::model::Campaign;
use crate::run::exec::Exit;
use crate::run::keys::sha256_hex;

/// What the generated C files of the valgrind object (the client requests of `ct` and
/// `count`) add to the build's cache key: a change to either builds the object again.
pub fn generated_key() -> String {
    sha256_hex(
        format!(
            "{}{}",
            crate::ct::marks_source(),
            crate::count::requests_source()
        )
        .as_bytes(),
    )
}

/// Step kinds that run the valgrind object (by name: `ct` is added by its own change).
pub const VALGRIND_KINDS: &[&str] = &["count", "ct"];

/// Added to the build's flags for the valgrind object when this valgrind reads the
/// compilers' default debug information (3.20 and later read DWARF 5).
pub const DEBUG_FLAG: &str = "-g";

/// Added instead when valgrind is older than 3.20: it reads DWARF 4 only, and gcc 11+ and
/// clang 14+ write DWARF 5 by default. Measured: valgrind 3.19 on a clang-16 `-g` object
/// stops with "debuginfo reader: Possibly corrupted debuginfo file ... I can't recover".
pub const DWARF4_FLAG: &str = "-gdwarf-4";

/// The debug-information flag for a valgrind whose `--version` is `version`
/// (`valgrind-3.19.0`): [`DWARF4_FLAG`] before 3.20 or when the version cannot be read,
/// else [`DEBUG_FLAG`].
pub fn debug_flag_for(version: &str) -> &'static str {
    let numbers: Vec<u32> = version
        .trim_start_matches("valgrind-")
        .split(|c: char| !c.is_ascii_digit())
        .take(2)
        .map_while(|n| n.parse().ok())
        .collect();
    match numbers[..] {
        [major, minor] if (major, minor) >= (3, 20) => DEBUG_FLAG,
        _ => DWARF4_FLAG,
    }
}

/// The debug-information flag for this machine's valgrind ([`debug_flag_for`]); DWARF 4
/// when there is none (the object is then never run under valgrind here).
pub fn debug_flag() -> &'static str {
    valgrind()
        .map(|v| debug_flag_for(&v.version))
        .unwrap_or(DWARF4_FLAG)
}

/// Extensions valgrind 3.19 cannot execute: the compiler's macro saying it may use one, and
/// the flag that turns it off. Evidence, on this project's AVX-512 VM with
/// `-O3 -march=native`: EVEX code (AVX-512) dies with SIGILL in ML-KEM-768's `sha3_512`
/// (`62 f1 7f 48 …`); with `-mno-avx512f` alone, sntrup761-clean still dies in
/// `crypto_core_multsntrup761` on `c4 e2 49 52 …` (VEX `vpdpwssd`, AVX-VNNI).
pub const UNRUNNABLE: &[(&str, &str)] = &[
    ("__AVX512F__", "-mno-avx512f"),
    ("__AVXVNNI__", "-mno-avxvnni"),
];
/// valgrind as found on `PATH`: the file and the first line of its `--version`.
pub struct Valgrind {
    pub path: PathBuf,
    pub version: String,
}

/// The valgrind of this machine, probed once per process (shared by `count` and `ct`);
/// `None` when there is none that runs.
pub fn valgrind() -> Option<&'static Valgrind> {
    static V: OnceLock<Option<Valgrind>> = OnceLock::new();
    V.get_or_init(|| {
        let path = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("valgrind"))
                .find(|f| f.is_file())
        })?;
        let out = std::process::Command::new(&path)
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Some(Valgrind { path, version })
    })
    .as_ref()
}

/// The `valgrind` input of the `count` and `ct` cache keys: the version of [`valgrind`], or
/// `not installed` (one spelling, so both steps see the same change).
pub fn valgrind_key() -> String {
    valgrind()
        .map_or("not installed", |v| v.version.as_str())
        .to_string()
}

/// Whether the campaign declares a step that runs the valgrind object.
pub fn wanted(c: &Campaign) -> bool {
    // valgrind runs only on this machine's architecture: none for a foreign target.
    !c.system.foreign()
        && c.steps
            .iter()
            .any(|s| VALGRIND_KINDS.contains(&s.kind.name()))
}

/// The flags of [`UNRUNNABLE`] whose macro the compiler's predefined macros
/// (`cc <flags> -dM -E -x c <empty file>`) define.
pub fn exclusions(macros: &str) -> Vec<String> {
    let defined: Vec<&str> = macros
        .lines()
        .filter_map(|l| l.strip_prefix("#define "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    UNRUNNABLE
        .iter()
        .filter(|(m, _)| defined.contains(m))
        .map(|(_, f)| f.to_string())
        .collect()
}

/// The valgrind object's flags: `flags`, the debug flag (`-g` or `-gdwarf-4`, see
/// [`debug_flag`]), then `exclusions`.
pub fn valgrind_flags(flags: &[String], debug: &str, exclusions: &[String]) -> Vec<String> {
    let mut f = flags.to_vec();
    f.push(debug.to_string());
    f.extend(exclusions.iter().cloned());
    f
}

/// The flags of `valgrind_flags` that turn an extension off (the counted code is then not
/// the timed code).
pub fn excluded_in(valgrind_flags: &[String]) -> Vec<String> {
    valgrind_flags
        .iter()
        .filter(|f| UNRUNNABLE.iter().any(|(_, x)| x == f))
        .cloned()
        .collect()
}

/// What the build step compiled the plain object from, to compile it again.
pub struct Inputs<'i> {
    /// Source root (absolute).
    pub root: &'i Path,
    /// The instance's sources.
    pub sources: &'i [PathBuf],
    /// `-I` flags of the instance's compiles.
    pub includes: &'i [String],
    /// The primitives' sources.
    pub prim_sources: &'i [PathBuf],
    /// `-I` flags of the primitives' compiles.
    pub prim_includes: &'i [String],
    /// The profile's flags and the instance's `cflags`.
    pub flags: &'i [String],
    /// The flag profile's own flags (shim and link).
    pub profile_flags: &'i [String],
    /// The DRNG shim's C source.
    pub shim: &'i Path,
    /// Link flags before the objects (`-shared`, the version script).
    pub link_flags: &'i [String],
    /// System libraries linked after the objects.
    pub libraries: &'i [PathBuf],
    /// The instance's build folder.
    pub build_dir: &'i Path,
    /// The instance id (the object's file name).
    pub id: &'i str,
}

/// The object and the flags it was compiled with.
pub struct Built {
    pub object: PathBuf,
    pub flags: Vec<String>,
}

/// Compile and link the valgrind object in `<build_dir>/valgrind/`; its primitives are
/// shared between instances like the plain object's.
pub(super) fn build(c: &mut Compiler, i: &Inputs) -> Result<Built, StepError> {
    let dir = i.build_dir.join("valgrind");
    std::fs::create_dir_all(&dir).map_err(StepError::io(&dir))?;
    let excluded = exclusions_for(c, i.flags, &dir)?;
    let debug = debug_flag();
    let flags = valgrind_flags(i.flags, debug, &excluded);
    let profile_flags = valgrind_flags(i.profile_flags, debug, &excluded);

    let mut objects = Vec::new();
    for (n, src) in i.sources.iter().enumerate() {
        let obj = dir.join(format!("{n:03}-{}.o", stem(src)));
        let mut f = flags.clone();
        f.extend(i.includes.iter().cloned());
        c.compile(src, &obj, &f)?;
        objects.push(obj);
    }

    let prim_key = shared_key(i.root, &c.cc, &flags, i.prim_includes, i.prim_sources);
    let ctx = c.step.ctx;
    let prim_dir = ctx.out.join("build").join("_shared").join(&prim_key[..16]);
    std::fs::create_dir_all(&prim_dir).map_err(StepError::io(&prim_dir))?;
    c.jail.write.push(prim_dir.clone());
    let mut prim_flags = flags.clone();
    prim_flags.extend(i.prim_includes.iter().cloned());
    let prims = shared_objects(
        c,
        &prim_key,
        &prim_dir,
        i.prim_sources,
        &prim_flags,
        "valgrind object's primitives",
    )?;

    let shim_obj = dir.join("ngcc_shim.o");
    c.compile(i.shim, &shim_obj, &profile_flags)?;
    // The memcheck client requests of the `ct` step (crate::ct::marks_source).
    let marks = dir.join("ngcc_ct_marks.c");
    std::fs::write(&marks, crate::ct::marks_source()).map_err(StepError::io(&marks))?;
    let marks_obj = dir.join("ngcc_ct_marks.o");
    c.compile(&marks, &marks_obj, &profile_flags)?;
    // The callgrind client request of the `count` step (crate::count::requests_source).
    let requests = dir.join("ngcc_callgrind.c");
    std::fs::write(&requests, crate::count::requests_source()).map_err(StepError::io(&requests))?;
    let requests_obj = dir.join("ngcc_callgrind.o");
    c.compile(&requests, &requests_obj, &profile_flags)?;
    let object = dir.join(format!("{}.so", i.id));
    let mut link = profile_flags.clone();
    link.extend(i.link_flags.iter().cloned());
    link.extend(["-o".into(), object.display().to_string()]);
    link.extend(
        objects
            .iter()
            .chain(&prims)
            .chain([&shim_obj, &marks_obj, &requests_obj])
            .chain(i.libraries)
            .map(|o| o.display().to_string()),
    );
    c.run(link, || format!("link error for {}", object.display()))?;
    Ok(Built { object, flags })
}

/// Ask the compiler (in the sandbox) which of [`UNRUNNABLE`] `flags` enable, by
/// preprocessing an empty file written in `dir` (not `/dev/null`: a jail in a user namespace
/// cannot open device nodes).
fn exclusions_for(
    c: &mut Compiler,
    flags: &[String],
    dir: &Path,
) -> Result<Vec<String>, StepError> {
    let empty = dir.join("ngcc_predefined.c");
    std::fs::write(&empty, "").map_err(StepError::io(&empty))?;
    let mut args = flags.to_vec();
    args.extend(["-dM", "-E", "-x", "c"].map(String::from));
    args.push(empty.display().to_string());
    let out = c
        .step
        .exec_contained(Path::new(&c.cc), &args, &c.jail, &mut c.log, &|_| {})
        .map_err(|source| StepError::Cc {
            cc: c.cc.clone(),
            source,
        })?;
    match out.exit {
        Exit::Code(0) => Ok(exclusions(&String::from_utf8_lossy(&out.stdout))),
        Exit::TimedOut => Err(StepError::TimedOut(c.step.timeout_text())),
        other => Err(StepError::Predefined {
            cc: c.cc.clone(),
            exit: other.describe(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_what_the_predefined_macros_enable() {
        let on = "#define __AVX2__ 1\n#define __AVXVNNI__ 1\n#define __AVX512F__ 1\n";
        assert_eq!(exclusions(on), ["-mno-avx512f", "-mno-avxvnni"]);
        assert!(exclusions("#define __AVX2__ 1\n#define __AVX512F_UNUSED 1\n").is_empty());
    }

    #[test]
    fn adds_debug_info_then_the_exclusions() {
        let f = vec!["-O3".to_string(), "-march=native".to_string()];
        let v = valgrind_flags(&f, "-g", &["-mno-avx512f".to_string()]);
        assert_eq!(v, ["-O3", "-march=native", "-g", "-mno-avx512f"]);
        assert_eq!(excluded_in(&v), ["-mno-avx512f"]);
        assert_eq!(
            valgrind_flags(&f, "-g", &[]),
            ["-O3", "-march=native", "-g"]
        );
    }

    #[test]
    fn dwarf_4_before_valgrind_3_20() {
        assert_eq!(debug_flag_for("valgrind-3.19.0"), "-gdwarf-4");
        assert_eq!(debug_flag_for("valgrind-3.9.0"), "-gdwarf-4");
        assert_eq!(debug_flag_for("valgrind-3.20.0"), "-g");
        assert_eq!(debug_flag_for("valgrind-3.22.0.GIT"), "-g");
        assert_eq!(debug_flag_for("valgrind-4.0"), "-g");
        assert_eq!(debug_flag_for("something else"), "-gdwarf-4");
    }
}
