//! The static reference of `bench fidelity`: the instance's sources, the provided
//! primitives and the build record's flags compiled again with a minimal C loop
//! (`kem-native/c/minimal_loop.c`) and linked with `gcc -static`, contained like the build
//! step's compiler; and the check that what came out is a static executable.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::run::sandbox::{Jail, Sandbox, DEFAULT_MEMORY};
use crate::run::steps::link;

/// The C main of the static reference `bench fidelity` compares kem-runner with.
const MINIMAL_LOOP_C: &str = include_str!("../../kem-native/c/minimal_loop.c");

/// What the static reference is built from: the instance's sources, the provided
/// primitives and the build record's flags, nothing of the campaign's object.
#[derive(Clone)]
pub struct ReferenceSpec {
    /// C compiler.
    pub cc: String,
    /// The build record's flags (the profile's and the instance's `cflags`) and its
    /// code-generation flags.
    pub flags: Vec<String>,
    /// `-I` options: the instance folder and the primitives' include folders.
    pub includes: Vec<String>,
    /// Instance sources, then primitive sources, in the link order wanted (linked after
    /// the anchor, [`link::ANCHOR_C`]).
    pub sources: Vec<PathBuf>,
    /// Namespace of `crypto_kem_*`.
    pub namespace: String,
    /// The random-byte function the scheme calls (defined by the reference).
    pub drng: String,
    /// Buffer sizes.
    pub api: kem_native::output::ApiSizes,
}

/// Compile and link the static reference executable into `dir`; returns its path and the
/// command line.
pub fn build_reference(
    spec: &ReferenceSpec,
    dir: &Path,
    sandbox: &Sandbox,
) -> Result<(PathBuf, Vec<String>), Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir.display()))?;
    let src = dir.join("minimal_loop.c");
    let exe = dir.join("minimal_loop");
    std::fs::write(&src, MINIMAL_LOOP_C).map_err(Error::io(src.display()))?;
    let anchor = dir.join("ngcc_anchor.c");
    std::fs::write(&anchor, link::ANCHOR_C).map_err(Error::io(anchor.display()))?;
    let ns = &spec.namespace;
    let mut args: Vec<String> = vec!["-static".into()];
    args.extend(spec.flags.iter().cloned());
    args.extend(spec.includes.iter().cloned());
    args.extend([
        format!("-DNGCC_KEYPAIR={ns}crypto_kem_keypair"),
        format!("-DNGCC_ENC={ns}crypto_kem_enc"),
        format!("-DNGCC_DEC={ns}crypto_kem_dec"),
        format!("-DNGCC_DRNG={}", spec.drng),
        format!("-DNGCC_PK={}", spec.api.pk),
        format!("-DNGCC_SK={}", spec.api.sk),
        format!("-DNGCC_CT={}", spec.api.ct),
        format!("-DNGCC_SS={}", spec.api.ss),
        "-o".into(),
        exe.display().to_string(),
        src.display().to_string(),
        anchor.display().to_string(),
    ]);
    args.extend(spec.sources.iter().map(|p| p.display().to_string()));
    // The compiler reads submission-controlled sources and flags: it runs contained, like
    // the build step's, reading the sources and include folders and writing only `dir`.
    let mut read: Vec<PathBuf> = spec.sources.clone();
    read.extend(
        spec.includes
            .iter()
            .filter_map(|i| i.strip_prefix("-I"))
            .map(PathBuf::from),
    );
    let jail = Jail {
        read,
        write: vec![dir.to_path_buf()],
        cwd: dir.to_path_buf(),
        memory: DEFAULT_MEMORY,
        cpu: None,
        alongside: 0,
    };
    let out = sandbox
        .command(Path::new(&spec.cc), &args, &jail)
        .output()
        .map_err(|e| Error::ToolMissing(format!("cannot run `{}`: {e}", spec.cc)))?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "building the static reference failed:\n{}",
            crate::run::exec::tail(&out.stderr, 12)
        )));
    }
    let mut command = vec![spec.cc.clone()];
    command.extend(args);
    Ok((exe, command))
}

/// Check that `path` is a statically linked ELF executable (no program interpreter, no
/// `DT_NEEDED`), and say what it is (`ELF64 ET_EXEC, statically linked`).
pub fn static_elf_kind(path: &Path) -> Result<String, Error> {
    use object::elf;
    use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
    let data = std::fs::read(path).map_err(Error::io(path.display()))?;
    let file = ElfFile64::<object::Endianness>::parse(&*data)
        .map_err(|e| Error::Tool(format!("{} is not a 64-bit ELF file: {e}", path.display())))?;
    let endian = file.endian();
    let e_type = match file.elf_header().e_type(endian) {
        elf::ET_EXEC => "ET_EXEC",
        elf::ET_DYN => "ET_DYN",
        other => {
            return Err(Error::Tool(format!(
                "{}: ELF type {other} is not an executable",
                path.display()
            )))
        }
    };
    let mut needed = Vec::new();
    for ph in file.elf_program_headers() {
        if ph.p_type(endian) == elf::PT_INTERP {
            return Err(Error::Tool(format!(
                "{} has a program interpreter: dynamically linked",
                path.display()
            )));
        }
        if let Ok(Some(dynamic)) = ph.dynamic(endian, &*data) {
            needed.extend(
                dynamic
                    .iter()
                    .filter(|d| d.tag(endian) == elf::DT_NEEDED)
                    .map(|d| d.d_val(endian)),
            );
        }
    }
    if !needed.is_empty() {
        return Err(Error::Tool(format!(
            "{} needs {} shared libraries (DT_NEEDED)",
            path.display(),
            needed.len()
        )));
    }
    let pie = if e_type == "ET_DYN" {
        " (static PIE)"
    } else {
        ""
    };
    Ok(format!(
        "ELF64 {e_type}, statically linked{pie}, no DT_NEEDED"
    ))
}
