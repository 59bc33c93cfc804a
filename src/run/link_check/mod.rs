//! The engine's [`Linker`] for `check --deep`: it predicts an instance's build by doing its
//! first half. The instance's sources (and the submission's primitives) are compiled as the
//! `build` step compiles them — the same compiler, the build step's flag profile plus the
//! instance's `cflags`, the same `-I` folders and code-generation flags, in the same jail
//! (only the instance's folders readable, nothing of the host but the system) — together
//! with the generated DRNG shim, into `<outputs>/cache/deep/<submission>/<instance>/`, kept
//! and reused while their inputs are unchanged. Then the symbols are resolved with
//! `object` ([`symbols`]): what an object needs must be defined by another object, the
//! shim, a declared `link` library or the C runtime a `-shared -Wl,-z,defs` link adds (libc
//! and libgcc; libm is not among them, as in the build). Each symbol left over is named
//! with the files that need it, and the package's sources are searched for one that
//! defines it (the usual cause: a file in a subfolder that the instance does not compile).
//!
//! Nothing is compiled without the jail: where bubblewrap is not available the check says
//! the link was not predicted.

mod features;
mod symbols;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::dsl::{CpuGap, CpuNeed, LinkOutcome, Linker, Prediction, Unresolved};
use crate::model::{Campaign, Instance, StepKind, Submission};
use crate::run::keys::{file_hash, sha256_hex, tree_input};
use crate::run::sandbox::{Jail, Sandbox};
use crate::run::steps::link::CODEGEN_FLAGS;

/// How long one compile may take.
const TIMEOUT: Duration = Duration::from_secs(300);
/// Address space of the contained compiler.
const MEMORY: u64 = 4 << 30;
/// Largest object read back.
const OBJECT_CAP: u64 = 256 << 20;
/// Appended to a flag profile that names a `-march`, for the CPU-feature check: x86-64's
/// baseline, so that only the instance's own `-m` flags, intrinsics and assembly need more.
const BASELINE: &str = "-march=x86-64";
/// Largest package source searched for a definition.
const SEARCH_CAP: u64 = 16 << 20;

/// Compiles in the build jail and resolves with `object`; see the module.
pub struct EngineLinker {
    /// The trial run's scratch folder of the sandbox probe, removed with the linker.
    scratch: tempfile::TempDir,
    sandbox: RefCell<Option<Sandbox>>,
    /// What the C runtime defines, read once.
    runtime: RefCell<Option<BTreeSet<String>>>,
    /// Library name -> what it defines (empty when not found: `check` names that apart).
    libraries: RefCell<BTreeMap<String, BTreeSet<String>>>,
    /// This machine's CPU features (`/proc/cpuinfo`), read once.
    cpu_flags: std::cell::OnceCell<BTreeSet<String>>,
}

impl EngineLinker {
    pub fn new() -> std::io::Result<EngineLinker> {
        Ok(EngineLinker {
            scratch: tempfile::tempdir()?,
            sandbox: RefCell::new(None),
            runtime: RefCell::new(None),
            libraries: RefCell::new(BTreeMap::new()),
            cpu_flags: std::cell::OnceCell::new(),
        })
    }

    fn sandbox(&self) -> Sandbox {
        self.sandbox
            .borrow_mut()
            .get_or_insert_with(|| Sandbox::detect_in(self.scratch.path()))
            .clone()
    }
}

/// The flags the build compiles `inst` with: its profile's (the instance's `flags`
/// variable, else the build step's `flags=`), then its `cflags`.
fn build_flags(
    c: &Campaign,
    inst: &Instance,
    root: &Path,
) -> Result<(Vec<String>, Vec<String>), String> {
    let spec = c
        .steps
        .iter()
        .find(|s| s.kind == StepKind::Build)
        .ok_or("the pipeline has no `build` step")?;
    let name = inst
        .profile()
        .or(spec.params.flags.as_deref())
        .unwrap_or_default();
    let profile = c
        .flags
        .get(name)
        .ok_or_else(|| format!("the flag profile `{name}` is not defined"))?;
    let mut flags = profile.flags.clone();
    flags.extend(crate::run::steps::build::instance_cflags(root, inst));
    Ok((profile.flags.clone(), flags))
}

/// One compile: source, object, arguments before `-c`.
struct Unit {
    src: PathBuf,
    obj: PathBuf,
    flags: Vec<String>,
}

impl Linker for EngineLinker {
    fn link(
        &self,
        c: &Campaign,
        sub: &Submission,
        inst: &Instance,
        root: &Path,
        files: &[PathBuf],
    ) -> Prediction {
        let skipped = |why: String| Prediction::link_only(LinkOutcome::Skipped(why));
        // An instance the run plans away on this CPU is not built, so not predicted.
        if c.system.emulator().is_none() {
            let flags = self.cpu_flags.get_or_init(crate::measure::env::cpu_flags);
            let lacks: Vec<&str> = inst
                .requires_cpu
                .iter()
                .filter(|f| !flags.contains(*f))
                .map(String::as_str)
                .collect();
            if !lacks.is_empty() {
                return skipped(format!(
                    "this CPU lacks {}, so the run plans the instance away",
                    lacks.join(", ")
                ));
            }
        }
        let sandbox = self.sandbox();
        if !sandbox.contained() {
            return skipped(
                "bubblewrap is not available, and the package's code is compiled only in the build's jail".into(),
            );
        }
        let Ok(root) = std::path::absolute(root) else {
            return skipped("the source root cannot be made absolute".into());
        };
        let (profile, flags) = match build_flags(c, inst, &root) {
            Ok(f) => f,
            Err(e) => return skipped(e),
        };
        let out = match std::path::absolute(
            c.outputs
                .join("cache")
                .join("deep")
                .join(&sub.id)
                .join(&inst.id),
        ) {
            Ok(o) => o,
            Err(e) => return skipped(e.to_string()),
        };
        let units = units(sub, inst, &root, files, &out, &profile, &flags);
        let jail = Compiles {
            campaign: c,
            sub,
            inst,
            root: &root,
            sandbox: &sandbox,
        };
        match jail.compile_all(&out, &units, false) {
            Err(why) => return skipped(why),
            Ok(failed) => {
                if let Some(f) = failed.into_iter().next() {
                    return Prediction::link_only(LinkOutcome::CompileFailed(format!(
                        "`{}` does not compile ({}): {}",
                        rel(&root, &units[f.unit].src),
                        f.exit,
                        f.message
                    )));
                }
            }
        }
        Prediction {
            link: self.resolve(c, inst, &root, &units),
            cpu: cpu_gaps(&jail, &out, &units),
        }
    }
}

/// `path` relative to the source root, for messages.
fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The sources of `units` (the shim left out) that need CPU features the manifest does not
/// give ([`features`]): compiled again for x86-64's baseline when the flag profile names a
/// `-march` (into `out/baseline/`, kept like the others), a source that then does not
/// compile needs flags its `cflags` lack; the others' instructions are held against
/// `requires-cpu`. Not for other architectures, nor where the baseline cannot be compiled.
fn cpu_gaps(jail: &Compiles<'_>, out: &Path, units: &[Unit]) -> Vec<CpuGap> {
    if jail.campaign.system.arch != "x86-64" {
        return Vec::new();
    }
    let units = &units[..units.len() - 1];
    let marched = units
        .iter()
        .any(|u| u.flags.iter().any(|f| f.starts_with("-march=")));
    let base_dir = out.join("baseline");
    let baseline: Vec<Unit> = units
        .iter()
        .map(|u| Unit {
            src: u.src.clone(),
            obj: base_dir.join(u.obj.file_name().unwrap_or_default()),
            flags: u
                .flags
                .iter()
                .cloned()
                .chain([BASELINE.to_string()])
                .collect(),
        })
        .collect();
    let (units, failed) = if marched {
        match jail.compile_all(&base_dir, &baseline, true) {
            Ok(failed) => (&baseline[..], failed),
            Err(_) => return Vec::new(),
        }
    } else {
        (units, Vec::new())
    };
    let mut gaps = Vec::new();
    let mut needs = Vec::new();
    for (i, u) in units.iter().enumerate() {
        let file = rel(jail.root, &u.src);
        if let Some(f) = failed.iter().find(|f| f.unit == i) {
            gaps.push(CpuGap {
                file,
                need: CpuNeed::Flags(f.message.clone()),
                dispatches: false,
            });
            continue;
        }
        let read = crate::safe_fs::read(&u.obj, OBJECT_CAP).map_err(|e| e.to_string());
        if let Ok(n) = read.and_then(|b| features::needed(&b)) {
            needs.push((file, n));
        }
    }
    // One object may pick the code of another at run time.
    let dispatches = needs.iter().any(|(_, n)| n.dispatches);
    for (file, n) in needs {
        let missing = features::missing(n.features, &jail.inst.requires_cpu);
        if !missing.is_empty() {
            gaps.push(CpuGap {
                file,
                need: CpuNeed::Features(missing),
                dispatches,
            });
        }
    }
    gaps
}

/// The compiles of one instance, in the build's order: its sources, the primitives (with
/// their include folders, not the instance's), the DRNG shim (the profile's flags alone).
fn units(
    sub: &Submission,
    inst: &Instance,
    root: &Path,
    files: &[PathBuf],
    out: &Path,
    profile: &[String],
    flags: &[String],
) -> Vec<Unit> {
    let prim_inc: Vec<String> = sub
        .primitives
        .includes
        .iter()
        .map(|i| format!("-I{}", root.join(i).display()))
        .collect();
    let mut inst_flags = flags.to_vec();
    inst_flags.push(format!("-I{}", root.join(&inst.dir).display()));
    inst_flags.extend(prim_inc.iter().cloned());
    let mut prim_flags = flags.to_vec();
    prim_flags.extend(prim_inc);
    let stem = |p: &Path| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut v: Vec<Unit> = files
        .iter()
        .enumerate()
        .map(|(i, f)| Unit {
            src: f.clone(),
            obj: out.join(format!("{i:03}-{}.o", stem(f))),
            flags: inst_flags.clone(),
        })
        .collect();
    for (i, s) in sub.primitives.sources.iter().enumerate() {
        let src = root.join(s);
        v.push(Unit {
            obj: out.join(format!("p{i:03}-{}.o", stem(&src))),
            src,
            flags: prim_flags.clone(),
        });
    }
    v.push(Unit {
        src: out.join("ngcc_shim.c"),
        obj: out.join("ngcc_shim.o"),
        flags: profile.to_vec(),
    });
    v
}

/// What every compile of one instance shares: the campaign, the instance, its source root
/// and the sandbox whose jail the compiler runs in.
struct Compiles<'a> {
    campaign: &'a Campaign,
    sub: &'a Submission,
    inst: &'a Instance,
    root: &'a Path,
    sandbox: &'a Sandbox,
}

/// A unit that did not compile: its index, the compiler's exit and its message's tail.
struct Failed {
    unit: usize,
    exit: String,
    message: String,
}

impl Compiles<'_> {
    /// Compiles `units` into `out` in the build's jail, unless the objects of the same
    /// inputs are there: the units that did not compile, by index, with the compiler's
    /// exit and message (the first stops the rest unless `keep_going`); `Err` when nothing
    /// could be compiled, and why.
    fn compile_all(
        &self,
        out: &Path,
        units: &[Unit],
        keep_going: bool,
    ) -> Result<Vec<Failed>, String> {
        let (c, sub, inst, root) = (self.campaign, self.sub, self.inst, self.root);
        let skip = |e: &dyn std::fmt::Display| e.to_string();
        let drng = crate::run::steps::build::drng_symbol(sub);
        let shim = crate::run::steps::build::shim_source(&drng, sub.api);
        let mut key = format!(
            "{}|{}|{shim}",
            c.system.cc,
            tree_input(&root.join(&inst.dir))
        );
        for u in units {
            key.push_str(&format!(
                "|{}|{:?}|{}",
                u.src.display(),
                u.flags,
                file_hash(&u.src)
            ));
        }
        for i in &sub.primitives.includes {
            key.push_str(&tree_input(&root.join(i)));
        }
        let key = sha256_hex(key.as_bytes());
        let key_file = out.join("inputs.sha256");
        let fresh = std::fs::read_to_string(&key_file).is_ok_and(|k| k.trim() == key)
            && units.iter().all(|u| u.obj.is_file());
        if fresh {
            return Ok(Vec::new());
        }
        let _ = std::fs::remove_dir_all(out);
        std::fs::create_dir_all(out).map_err(|e| skip(&e))?;
        std::fs::write(out.join("ngcc_shim.c"), shim).map_err(|e| skip(&e))?;
        // What the build's compiler reads (the same folders as the build's).
        let read = crate::run::steps::build::compile_reads(root, inst, sub);
        for p in &read {
            crate::safe_fs::inside(root, p).map_err(|e| skip(&e))?;
        }
        let jail = Jail {
            read,
            write: vec![out.to_path_buf()],
            cwd: out.to_path_buf(),
            memory: MEMORY,
            cpu: None,
            alongside: 0,
        };
        let mut log = crate::run::exec::open_log(&out.join("compile.log")).map_err(|e| skip(&e))?;
        let mut failed = Vec::new();
        for (i, u) in units.iter().enumerate() {
            let mut args = u.flags.clone();
            args.extend(CODEGEN_FLAGS.iter().map(|f| f.to_string()));
            args.extend([
                "-c".to_string(),
                u.src.display().to_string(),
                "-o".to_string(),
                u.obj.display().to_string(),
            ]);
            let ran = crate::run::exec::run_jailed(
                self.sandbox,
                &c.system.cc,
                args,
                &jail,
                TIMEOUT,
                &mut log,
            )
            .map_err(|e| format!("cannot run `{}`: {e}", c.system.cc))?;
            if !ran.exit.success() {
                failed.push(Failed {
                    unit: i,
                    exit: ran.exit.describe(),
                    message: crate::run::exec::tail(&ran.stderr, 6),
                });
                if !keep_going {
                    break;
                }
            }
        }
        if failed.is_empty() {
            std::fs::write(&key_file, key).map_err(|e| skip(&e))?;
        }
        Ok(failed)
    }
}

impl EngineLinker {
    /// The symbols the objects of `units` leave undefined.
    fn resolve(&self, c: &Campaign, inst: &Instance, root: &Path, units: &[Unit]) -> LinkOutcome {
        let cc = &c.system.cc;
        let mut defined = BTreeSet::new();
        let mut needed: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for u in units {
            let bytes = match crate::safe_fs::read(&u.obj, OBJECT_CAP) {
                Ok(b) => b,
                Err(e) => return LinkOutcome::Skipped(e.to_string()),
            };
            let s = match symbols::of_object(&bytes) {
                Ok(s) => s,
                Err(e) => return LinkOutcome::Skipped(format!("{}: {e}", u.obj.display())),
            };
            let rel = rel(root, &u.src);
            for n in s.undefined {
                needed.entry(n).or_default().push(rel.clone());
            }
            defined.extend(s.defined);
        }
        needed.retain(|n, _| !defined.contains(n));
        if needed.is_empty() {
            return LinkOutcome::Resolved;
        }
        {
            let mut rt = self.runtime.borrow_mut();
            let rt = rt.get_or_insert_with(|| symbols::runtime(cc));
            needed.retain(|n, _| !rt.contains(n));
        }
        for l in &inst.libraries {
            let mut libs = self.libraries.borrow_mut();
            let defs = libs.entry(l.clone()).or_insert_with(|| {
                crate::libs::find(cc, l)
                    .map(|f| symbols::of_library(cc, &f))
                    .unwrap_or_default()
            });
            needed.retain(|n, _| !defs.contains(n));
        }
        if needed.is_empty() {
            return LinkOutcome::Resolved;
        }
        let libm = symbols::file_of(cc, "libm.so")
            .map(|f| symbols::of_library(cc, &f))
            .unwrap_or_default();
        let compiled: Vec<&Path> = units.iter().map(|u| u.src.as_path()).collect();
        let sources = package_sources(root, &compiled);
        let list = needed
            .into_iter()
            .map(|(symbol, needed_by)| {
                let hint = definer(&sources, &symbol)
                    .map(|f| format!("`{f}` defines it but is not compiled for this instance: add `sources \"{f}\"` (in a `when` block for these instances)"))
                    .or_else(|| libm.contains(&symbol).then(|| "the math library defines it: add `link \"m\"`".to_string()));
                Unresolved {
                    symbol,
                    needed_by,
                    hint,
                }
            })
            .collect();
        LinkOutcome::Unresolved(list)
    }
}

/// The package's C and assembly files that `compiled` does not hold: (relative path, text).
fn package_sources(root: &Path, compiled: &[&Path]) -> Vec<(String, String)> {
    use crate::safe_fs::tree::{walk_with, Kind, SOURCE_BOUNDS};
    let mut out = Vec::new();
    let _ = walk_with(root, SOURCE_BOUNDS, |e| {
        let is_src = matches!(
            e.rel.extension().and_then(|x| x.to_str()),
            Some("c" | "S" | "s")
        );
        if !is_src || !matches!(e.kind, Kind::File(n) if n <= SEARCH_CAP) {
            return;
        }
        let path = root.join(&e.rel);
        if compiled.contains(&path.as_path()) {
            return;
        }
        if let Ok(b) = crate::safe_fs::read_within(root, &path, SEARCH_CAP) {
            out.push((
                e.rel.display().to_string(),
                String::from_utf8_lossy(&b).into_owned(),
            ));
        }
    });
    out.sort();
    out
}

/// The first of `sources` that defines `symbol`: a C function, or an assembly label that
/// is made global.
fn definer(sources: &[(String, String)], symbol: &str) -> Option<String> {
    sources
        .iter()
        .find(|(rel, text)| {
            if rel.ends_with(".c") {
                !crate::csource::defined_functions(text, &[symbol]).is_empty()
            } else {
                text.lines().any(|l| {
                    let l = l.trim();
                    l.strip_prefix(symbol).is_some_and(|r| r.starts_with(':'))
                })
            }
        })
        .map(|(rel, _)| rel.clone())
}
