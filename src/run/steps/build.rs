//! `build`: compile an instance's C and assembly sources, the provided primitives and the
//! generated DRNG shim into one shared object with the step's flag profile; and, when the
//! campaign profiles, a second object linked with `--wrap` for every declared primitive.
//!
//! The primitives are compiled once per (source root, flags) and shared between instances.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use std::collections::BTreeMap;

pub(super) use super::compiler::Compiler;
use super::link::{self, export_map, CODEGEN_FLAGS};
use super::{Done, KindSpec, Step, StepError};
use crate::graph::Node;
use crate::model::{Campaign, Instance, Source, StepKind, StepSpec, Submission};
use crate::record::{BuildData, LayoutObject, Status, StepData};
use crate::run::keys::{file_hash, json, native, sha256_hex, tree_hash, tree_input, value, Facts};
use crate::run::sandbox::Jail;
use crate::sources::instance_files;

/// The objects compiled for one key, once: filled by the first caller, awaited by the rest.
type ObjectsCell = Arc<OnceLock<Result<Vec<PathBuf>, String>>>;

/// Objects shared between instances (compiled primitives), by a key over their inputs.
#[derive(Default)]
pub struct SharedObjects {
    cells: Mutex<HashMap<String, ObjectsCell>>,
}

impl SharedObjects {
    /// The objects for `key`, compiling them with `make` only the first time. Concurrent
    /// callers with the same key wait for the one compiling.
    pub(super) fn get(
        &self,
        key: &str,
        make: impl FnOnce() -> Result<Vec<PathBuf>, String>,
    ) -> Result<Vec<PathBuf>, String> {
        let cell = {
            let mut cells = self.cells.lock().expect("shared objects lock");
            Arc::clone(cells.entry(key.to_string()).or_default())
        };
        cell.get_or_init(make).clone()
    }
}

pub use super::harness::{drng_symbol, shim_source};

/// Sum of PT_LOAD segment memory sizes of an ELF object.
pub fn load_segments_size(path: &Path) -> Result<u64, StepError> {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let data = crate::safe_fs::read(path, crate::safe_fs::OUTPUT_CAP)?;
    let elf = ElfFile64::<object::Endianness>::parse(&*data).map_err(|e| StepError::Parse {
        what: path.display().to_string(),
        source: e.into(),
    })?;
    let endian = elf.endian();
    Ok(elf
        .elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
        .map(|ph| ph.p_memsz(endian))
        .sum())
}

/// The `build` kind: per instance.
pub struct Kind;

impl KindSpec for Kind {
    fn inputs(
        &self,
        c: &Campaign,
        node: &Node,
        spec: &StepSpec,
        facts: &Facts,
        m: &mut BTreeMap<String, String>,
    ) {
        let sub = &c.submissions[node.submission];
        let inst = &sub.instances[node.instance.expect("build is per instance")];
        m.insert("instance".into(), json(inst));
        m.insert("primitives".into(), json(&sub.primitives));
        let profile = inst
            .profile()
            .or(spec.params.flags.as_deref())
            .unwrap_or("");
        let flags = c
            .flags
            .get(profile)
            .map(|f| f.flags.join(" "))
            .unwrap_or_default();
        m.insert("flags".into(), value(format!("{profile}: {flags}")));
        m.insert(
            "cc".into(),
            value(format!("{}: {}", c.system.cc, facts.cc_version)),
        );
        m.insert("kem-native".into(), native());
        m.insert("anchor".into(), sha256_hex(link::ANCHOR_C.as_bytes()));
        let layouts = link::count(c);
        if layouts > 1 {
            m.insert("layouts".into(), layouts.to_string());
        }
        m.insert(
            "profile variant".into(),
            c.steps
                .iter()
                .any(|s| s.kind == StepKind::Profile)
                .to_string(),
        );
        if super::valgrind_object::wanted(c) {
            m.insert(
                "valgrind variant".into(),
                super::valgrind_object::generated_key(),
            );
        }
        for l in &inst.libraries {
            let resolved = facts
                .libraries
                .get(l)
                .map(crate::run::libs::key_text)
                .unwrap_or_else(|| "not resolved".to_string());
            m.insert(format!("library {l}"), value(resolved));
        }
        if let Source::Path { path } = &sub.source {
            let mut files = tree_input(&path.join(&inst.dir));
            for extra in inst.extra_sources.iter().chain(&sub.primitives.sources) {
                files.push_str(&file_hash(&path.join(extra)));
            }
            for inc in &sub.primitives.includes {
                files.push_str(&tree_input(&path.join(inc)));
            }
            m.insert("files".into(), sha256_hex(files.as_bytes()));
        }
    }

    fn run(&self, step: &mut Step) -> Done {
        run(step)
    }
}

fn run(step: &mut Step) -> Done {
    let mut done = build(step).unwrap_or_else(Done::from);
    // A failed build names the manifest lines behind it: the instance, its folder, its flags.
    let o = &step.instance().origin;
    if done.status == Status::Failed && !o.manifest.is_empty() {
        if let Some(r) = &mut done.reason {
            r.push_str(&format!(
                " (instance declared at {}, dir= at {})",
                o.at(&o.instance),
                o.at(&o.dir)
            ));
        }
    }
    done
}

/// Why the CPU the campaign runs on cannot run `inst` (`this CPU lacks asimd (not in
/// /proc/cpuinfo flags)`), if it cannot: its `requires-cpu` flags it lacks.
pub fn lacks_cpu(ctx: &crate::run::Ctx, inst: &crate::model::Instance) -> Option<String> {
    let missing: Vec<&str> = inst
        .requires_cpu
        .iter()
        .filter(|f| !ctx.cpu_flags.contains(*f))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        return None;
    }
    let emulated = ctx.emulator.is_some();
    Some(format!(
        "{} lacks {} (not in {})",
        if emulated { "the target" } else { "this CPU" },
        missing.join(", "),
        if emulated {
            "the system's cpu-features"
        } else {
            "/proc/cpuinfo flags"
        }
    ))
}

fn build(step: &mut Step) -> Result<Done, StepError> {
    let ctx = step.ctx;
    let sub = step.submission();
    let inst = step.instance();
    if let Some(why) = lacks_cpu(ctx, inst) {
        return Ok(Done {
            status: Status::Unsupported,
            reason: Some(format!("{why}; instance skipped")),
            data: None,
        });
    }
    let source = step.source()?;
    // Absolute: the compiler runs in the sandbox with the build folder as working folder.
    let root = std::path::absolute(&source.root).map_err(StepError::File)?;
    let spec = ctx.spec(StepKind::Build).expect("build step is declared");
    let profile_name = inst
        .profile()
        .or(spec.params.flags.as_deref())
        .unwrap_or_default()
        .to_string();
    let profile = ctx
        .campaign
        .flags
        .get(&profile_name)
        .ok_or_else(|| StepError::UnknownFlags(profile_name.clone()))?;
    let mut flags: Vec<String> = profile.flags.clone();
    flags.extend(inst.cflags.iter().cloned());

    let inst_dir = root.join(&inst.dir);
    // The trees the cache key hashed: a loop cannot make the walk spin (links are not
    // followed), but an absurd depth or size fails here with the walk's reason.
    for dir in std::iter::once(&inst.dir).chain(&sub.primitives.includes) {
        tree_hash(&root.join(dir)).map_err(StepError::Tree)?;
    }
    let api_h = inst_dir.join("api.h");
    let listing = instance_files(&root, inst, sub.api)?;
    let sources = listing.files;
    let mut libraries = Vec::new();
    for l in &inst.libraries {
        match ctx.facts.libraries.get(l) {
            Some(Ok(found)) => libraries.push(found.clone()),
            Some(Err(why)) => return Err(StepError::Library(why.clone())),
            None => {
                return Err(StepError::Library(format!(
                    "system library `{l}` was not resolved"
                )))
            }
        }
    }
    let mut includes = vec![format!("-I{}", inst_dir.display())];
    includes.extend(
        sub.primitives
            .includes
            .iter()
            .map(|i| format!("-I{}", root.join(i).display())),
    );

    let build_dir = ctx.out.join("build").join(step.slug());
    let obj_dir = build_dir.join("obj");
    std::fs::create_dir_all(&obj_dir).map_err(StepError::io(&obj_dir))?;
    let log = step.job_log("build")?;
    let cc = ctx.campaign.system.cc.clone();
    // Primitives are shared between instances compiled with the same flags.
    let mut prim_flags = flags.clone();
    prim_flags.extend(
        sub.primitives
            .includes
            .iter()
            .map(|i| format!("-I{}", root.join(i).display())),
    );
    let prim_key = sha256_hex(
        format!(
            "{}|{}|{:?}|{:?}",
            root.display(),
            cc,
            prim_flags,
            sub.primitives.sources
        )
        .as_bytes(),
    );
    let prim_dir = ctx.out.join("build").join("_shared").join(&prim_key[..16]);
    std::fs::create_dir_all(&prim_dir).map_err(StepError::io(&prim_dir))?;
    // The compiler sees its instance's folder, the folders of its extra sources, the
    // primitives' sources, headers and include folders: not the rest of the source tree
    // (another submission's, when they share a root) and nothing of the outputs but its own
    // build folder and the shared primitives' (no `.incbin` of another submission's object).
    let read = compile_reads(&root, inst, sub);
    // Links included: bubblewrap shows what a link points to, so each folder must resolve
    // inside the source root (a crate's or archive's links are met here first), and none
    // may hold the outputs or lie in them (unless the source itself is one the engine
    // unpacked there, under `cache/`).
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let unpacked = matches!((real(&root), real(&ctx.out)), (Some(r), Some(o)) if r.starts_with(&o));
    for p in &read {
        crate::safe_fs::inside(&root, p)?;
        if !unpacked {
            crate::safe_fs::apart(p, &ctx.out)?;
        }
    }
    let jail = Jail {
        read,
        write: vec![build_dir.clone(), prim_dir.clone()],
        cwd: build_dir.clone(),
        memory: step.memory(),
        cpu: None,
    };
    let mut c = Compiler {
        step,
        cc: cc.clone(),
        log,
        jail,
    };
    let mut api_flags = flags.clone();
    api_flags.extend(includes.iter().cloned());
    let (api, api_h, api_evaluated) = super::harness::api_sizes(
        &mut c,
        &root,
        &api_h,
        &inst.namespace,
        &api_flags,
        &build_dir,
    )?;
    let lib_files: Vec<PathBuf> = libraries.iter().map(|l| l.file.clone()).collect();

    // Instance sources.
    let mut objects = Vec::new();
    let mut compiled = Vec::new();
    for (i, src) in sources.iter().enumerate() {
        let stem = src
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let obj = obj_dir.join(format!("{i:03}-{stem}.o"));
        let mut f = flags.clone();
        f.extend(includes.iter().cloned());
        c.compile(src, &obj, &f)?;
        compiled.push((src.clone(), ctx.rel(&obj)));
        objects.push(obj);
    }

    // Primitives, shared between instances compiled with the same flags.
    let prim_objects = {
        let sources: Vec<PathBuf> = sub
            .primitives
            .sources
            .iter()
            .map(|s| root.join(s))
            .collect();
        let mut failure = None;
        let result = ctx.shared_objects.get(&prim_key, || {
            let mut objs = Vec::new();
            for (i, src) in sources.iter().enumerate() {
                let stem = src
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let obj = prim_dir.join(format!("{i:03}-{stem}.o"));
                if let Err(e) = c.compile(src, &obj, &prim_flags) {
                    let reason = e.to_string();
                    failure = Some(e);
                    return Err(reason);
                }
                objs.push(obj);
            }
            Ok(objs)
        });
        match (result, failure) {
            (Ok(o), _) => o,
            (Err(_), Some(d)) => return Err(d),
            (Err(reason), None) => {
                return Err(StepError::SharedFailed {
                    what: "shared primitives",
                    reason,
                })
            }
        }
    };

    // DRNG shim.
    let drng = drng_symbol(sub);
    let shim = build_dir.join("ngcc_shim.c");
    std::fs::write(&shim, shim_source(&drng, sub.api)).map_err(StepError::File)?;
    let shim_obj = build_dir.join("ngcc_shim.o");
    c.compile(&shim, &shim_obj, &profile.flags)?;

    // The anchor, linked before the KEM's objects in every object below (link.rs).
    let anchor_c = build_dir.join("ngcc_anchor.c");
    std::fs::write(&anchor_c, link::ANCHOR_C).map_err(StepError::File)?;
    let anchor = build_dir.join("ngcc_anchor.o");
    c.compile(&anchor_c, &anchor, &profile.flags)?;
    let kem_objects: Vec<PathBuf> = objects.iter().chain(&prim_objects).cloned().collect();

    // Link the plain object (layout `listed`), then the other layouts.
    let map = build_dir.join("ngcc_exports.map");
    std::fs::write(&map, export_map(&inst.namespace)).map_err(StepError::File)?;
    let link_flags = [
        "-shared".to_string(),
        "-Wl,-z,defs".to_string(),
        format!("-Wl,--version-script={}", map.display()),
    ];
    let mut link_base = profile.flags.clone();
    link_base.extend(link_flags.iter().cloned());
    let object = build_dir.join(format!("{}.so", inst.id));
    let mut tail: Vec<&Path> = vec![&shim_obj];
    tail.extend(lib_files.iter().map(PathBuf::as_path));
    let args = link::args(&link_base, &object, Some(&anchor), &kem_objects, 0, &tail);
    c.run(args, || format!("link error for {}", object.display()))?;
    let mut layouts = Vec::new();
    for j in 1..link::count(&ctx.campaign) {
        let name = link::name(j);
        let obj = build_dir.join(format!("{}.{name}.so", inst.id));
        let args = link::args(&link_base, &obj, Some(&anchor), &kem_objects, j, &tail);
        c.run(args, || format!("link error for {}", obj.display()))?;
        let bytes = crate::safe_fs::read(&obj, crate::safe_fs::OUTPUT_CAP)?;
        layouts.push(LayoutObject {
            name,
            object: ctx.rel(&obj),
            object_sha256: sha256_hex(&bytes),
        });
    }

    // The profile variant: the same objects plus generated wrappers, linked with --wrap.
    let profile_object = if ctx.spec(StepKind::Profile).is_some() {
        let mut headers = Vec::new();
        for h in &sub.primitives.headers {
            let text = crate::safe_fs::read_within(&root, &root.join(h), 16 << 20)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .map_err(|e| StepError::Read {
                    path: format!("primitives header {h}"),
                    source: e.into_io(),
                })?;
            headers.push((h.clone(), text));
        }
        let wrappers =
            crate::profile::generate_wrappers(&headers, &sub.primitives.functions, Some(&drng))
                .map_err(|e| StepError::Parse {
                    what: "profile wrappers".into(),
                    source: e.into(),
                })?;
        let wrap_c = build_dir.join("ngcc_wrappers.c");
        std::fs::write(&wrap_c, wrappers).map_err(StepError::File)?;
        let wrap_obj = build_dir.join("ngcc_wrappers.o");
        let mut wflags = profile.flags.clone();
        wflags.extend(includes.iter().cloned());
        wflags.push(format!("-I{}", root.display()));
        c.compile(&wrap_c, &wrap_obj, &wflags)?;
        let prof = build_dir.join(format!("{}.prof.so", inst.id));
        let mut base = link_base.clone();
        base.extend(crate::profile::wrap_link_flags(
            &sub.primitives.functions,
            Some(&drng),
        ));
        let mut prof_tail: Vec<&Path> = vec![&shim_obj, &wrap_obj];
        prof_tail.extend(lib_files.iter().map(PathBuf::as_path));
        let args = link::args(&base, &prof, Some(&anchor), &kem_objects, 0, &prof_tail);
        c.run(args, || format!("link error for {}", prof.display()))?;
        Some(prof)
    } else {
        None
    };

    // The object valgrind runs (`count`, `ct`): see valgrind_object.rs.
    let valgrind = if super::valgrind_object::wanted(&ctx.campaign) {
        let prim_sources: Vec<PathBuf> = sub
            .primitives
            .sources
            .iter()
            .map(|s| root.join(s))
            .collect();
        let prim_includes = &prim_flags[flags.len()..];
        let inputs = super::valgrind_object::Inputs {
            root: &root,
            sources: &sources,
            includes: &includes,
            prim_sources: &prim_sources,
            prim_includes,
            flags: &flags,
            profile_flags: &profile.flags,
            shim: &shim,
            link_flags: &link_flags,
            libraries: &lib_files,
            build_dir: &build_dir,
            id: &inst.id,
        };
        Some(super::valgrind_object::build(&mut c, &inputs)?)
    } else {
        None
    };

    let bytes = crate::safe_fs::read(&object, crate::safe_fs::OUTPUT_CAP)?;
    // The size of the object without the anchor's page padding (up to 8 KiB that the KEM
    // does not need): measured on the same objects linked without it, then removed.
    let sizing = build_dir.join(format!("{}.unanchored.so", inst.id));
    let args = link::args(&link_base, &sizing, None, &kem_objects, 0, &tail);
    c.run(args, || format!("link error for {}", sizing.display()))?;
    let static_bytes = load_segments_size(&sizing).ok();
    std::fs::remove_file(&sizing).map_err(StepError::File)?;
    let step = c.step;
    step.artefacts.push(ctx.rel(&object));
    if let Some(p) = &profile_object {
        step.artefacts.push(ctx.rel(p));
    }
    if let Some(v) = &valgrind {
        step.artefacts.push(ctx.rel(&v.object));
    }
    step.artefacts
        .extend(layouts.iter().map(|l| l.object.clone()));
    Ok(Done::ok(StepData::Build(BuildData {
        object: ctx.rel(&object),
        object_sha256: sha256_hex(&bytes),
        profile_object: profile_object.map(|p| ctx.rel(&p)),
        valgrind_object: valgrind.as_ref().map(|v| ctx.rel(&v.object)),
        valgrind_flags: valgrind.map(|v| v.flags).unwrap_or_default(),
        cc,
        cc_version: ctx.facts.cc_version.clone(),
        flags_profile: profile_name,
        flags,
        codegen_flags: CODEGEN_FLAGS.iter().map(|f| f.to_string()).collect(),
        link_flags: profile
            .flags
            .iter()
            .chain(&link_flags[..2])
            .cloned()
            .chain([format!("-Wl,--version-script={}", ctx.rel(&map).display())])
            .collect(),
        objects: compiled,
        primitive_objects: prim_objects.iter().map(|p| ctx.rel(p)).collect(),
        static_bytes,
        api,
        api_h,
        namespace: inst.namespace.clone(),
        anchor_object: Some(ctx.rel(&anchor)),
        layouts,
        libraries,
        left_out: listing
            .left_out
            .into_iter()
            .map(|l| (l.file, l.defines))
            .collect(),
        api_evaluated,
    })))
}

/// The folders an instance's compiler reads, under the source root `root`: the instance's
/// folder, the folders of its extra sources and of the primitives' sources and headers, the
/// primitives' include folders; sorted, once each. The build and `check --deep`'s link
/// prediction both jail the compiler to these.
pub fn compile_reads(root: &Path, inst: &Instance, sub: &Submission) -> Vec<PathBuf> {
    let mut read = vec![root.join(&inst.dir)];
    for f in inst
        .extra_sources
        .iter()
        .chain(&sub.primitives.sources)
        .chain(&sub.primitives.headers)
    {
        read.extend(root.join(f).parent().map(Path::to_path_buf));
    }
    read.extend(sub.primitives.includes.iter().map(|i| root.join(i)));
    read.sort();
    read.dedup();
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::instance_sources;

    #[test]
    fn lists_sources_with_excludes_and_extras() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("k")).unwrap();
        for f in ["a.c", "b.S", "c.h", "skip_test.c"] {
            std::fs::write(root.join("k").join(f), "").unwrap();
        }
        std::fs::write(root.join("extra.c"), "").unwrap();
        let files = instance_sources(root, "k", &["*_test.c".into()], &["extra.c".into()]).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["a.c", "b.S", "extra.c"]);
        assert!(instance_sources(root, "k", &[], &["nope.c".into()])
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
    }

    #[test]
    fn sums_load_segments_of_a_real_object() {
        let exe = std::env::current_exe().unwrap();
        let n = load_segments_size(&exe).unwrap();
        assert!(n > 4096, "{n}");
        assert!(load_segments_size(Path::new("/nonexistent")).is_err());
    }

    #[test]
    fn shared_objects_are_made_once() {
        let s = SharedObjects::default();
        let mut calls = 0;
        let a = s.get("k", || {
            calls += 1;
            Ok(vec![PathBuf::from("x.o")])
        });
        let b = s.get("k", || panic!("second make"));
        assert_eq!(a, b);
        assert_eq!(calls, 1);
    }
}
