//! One `build` of one instance (one cell: compiler x flag profile), phase by phase: what it
//! compiles and with which flags ([`Job::prepare`]), what the compiler may read and write
//! ([`Job::jail`]), then the objects, the links and the variants
//! ([`Job::compile_and_link`]).

use std::path::{Path, PathBuf};

use super::compiler::Compiler;
use super::link::{self, export_map, CODEGEN_FLAGS};
use super::shared::{shared_key, shared_objects, stem};
use super::{Done, Step, StepError};
use crate::model::{Instance, StepKind, Submission};
use crate::record::{BuildData, LayoutObject, LinkedLibrary, StepData};
use crate::run::keys::{sha256_hex, tree_hash};
use crate::run::sandbox::Jail;
use crate::sources::{instance_files, Listing};

/// Everything a build decided before the compiler runs.
pub(super) struct Job {
    /// The source root, absolute (the compiler runs with the build folder as working folder).
    root: PathBuf,
    inst_dir: PathBuf,
    /// The compiler command of this cell.
    pub(super) cc: String,
    profile_name: String,
    /// The flag profile's own flags (shim, anchor, wrappers, links).
    profile_flags: Vec<String>,
    /// The profile's flags and the instance's `cflags` (its sources and primitives).
    flags: Vec<String>,
    /// `-I` of the instance's folder and the primitives' include folders.
    includes: Vec<String>,
    /// `-I` of the primitives' include folders.
    prim_includes: Vec<String>,
    listing: Listing,
    libraries: Vec<LinkedLibrary>,
    build_dir: PathBuf,
    obj_dir: PathBuf,
    /// Key and folder of the primitives' objects, shared between instances built alike.
    prim_key: String,
    prim_dir: PathBuf,
}

/// The objects of the KEM itself and of the harness, before any link.
struct Objects {
    /// (source, object relative to the outputs) of every instance source.
    compiled: Vec<(PathBuf, PathBuf)>,
    /// The instance's objects then the primitives'.
    kem: Vec<PathBuf>,
    primitives: Vec<PathBuf>,
    shim: PathBuf,
    shim_obj: PathBuf,
    anchor: PathBuf,
}

/// The plain object's link: its flags and what follows the objects.
struct Linked {
    object: PathBuf,
    map: PathBuf,
    /// `-shared`, `-Wl,-z,defs`, the version script.
    link_flags: [String; 3],
    /// The profile's flags then `link_flags`.
    base: Vec<String>,
    layouts: Vec<LayoutObject>,
}

impl Job {
    /// The cell's compiler and flags, the instance's sources and libraries, the folders.
    pub(super) fn prepare(step: &Step) -> Result<Job, StepError> {
        let ctx = step.ctx;
        let sub = step.submission();
        let inst = step.instance();
        let source = step.source()?;
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
        let mut flags = profile.flags.clone();
        flags.extend(instance_cflags(&root, inst));
        // The trees the cache key hashed: a loop cannot make the walk spin (links are not
        // followed), but an absurd depth or size fails here with the walk's reason.
        for dir in std::iter::once(&inst.dir).chain(&sub.primitives.includes) {
            tree_hash(&root.join(dir)).map_err(StepError::Tree)?;
        }
        let listing = instance_files(&root, inst, sub.api)?;
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
        let inst_dir = root.join(&inst.dir);
        let prim_includes: Vec<String> = sub
            .primitives
            .includes
            .iter()
            .map(|i| format!("-I{}", root.join(i).display()))
            .collect();
        let mut includes = vec![format!("-I{}", inst_dir.display())];
        includes.extend(prim_includes.iter().cloned());
        let cc = inst
            .compiler()
            .unwrap_or(&ctx.campaign.system.cc)
            .to_string();
        let build_dir = ctx.out.join("build").join(step.slug());
        let obj_dir = build_dir.join("obj");
        std::fs::create_dir_all(&obj_dir).map_err(StepError::io(&obj_dir))?;
        // Primitives are shared between instances compiled with the same compiler and flags.
        let prim_key = shared_key(&root, &cc, &flags, &prim_includes, &sub.primitives.sources);
        let prim_dir = ctx.out.join("build").join("_shared").join(&prim_key[..16]);
        std::fs::create_dir_all(&prim_dir).map_err(StepError::io(&prim_dir))?;
        Ok(Job {
            root,
            inst_dir,
            cc,
            profile_name,
            profile_flags: profile.flags.clone(),
            flags,
            includes,
            prim_includes,
            listing,
            libraries,
            build_dir,
            obj_dir,
            prim_key,
            prim_dir,
        })
    }

    /// The compiler sees its instance's folder, the folders of its extra sources, the
    /// primitives' sources, headers and include folders: not the rest of the source tree
    /// (another submission's, when they share a root) and nothing of the outputs but its own
    /// build folder and the shared primitives' (no `.incbin` of another submission's object).
    pub(super) fn jail(&self, step: &Step) -> Result<Jail, StepError> {
        let ctx = step.ctx;
        let sub = step.submission();
        let inst = step.instance();
        let root = &self.root;
        let read = compile_reads(root, inst, sub);
        // Links included: bubblewrap shows what a link points to, so each folder must
        // resolve inside the source root (a crate's or archive's links are met here first),
        // and none may hold the outputs or lie in them (unless the source itself is one the
        // engine unpacked there, under `cache/`).
        let real = |p: &Path| std::fs::canonicalize(p).ok();
        let unpacked =
            matches!((real(root), real(&ctx.out)), (Some(r), Some(o)) if r.starts_with(&o));
        for p in &read {
            crate::safe_fs::inside(root, p)?;
            if !unpacked {
                crate::safe_fs::apart(p, &ctx.out)?;
            }
        }
        Ok(Jail {
            read,
            write: vec![self.build_dir.clone(), self.prim_dir.clone()],
            cwd: self.build_dir.clone(),
            memory: step.memory(),
            cpu: None,
            alongside: 0,
        })
    }

    /// The primitives' sources, under the source root: compiled for the plain object and
    /// again for the valgrind object.
    fn primitive_sources(&self, sub: &Submission) -> Vec<PathBuf> {
        sub.primitives
            .sources
            .iter()
            .map(|s| self.root.join(s))
            .collect()
    }

    /// Every object and link of the build, and its record.
    pub(super) fn compile_and_link(self, c: &mut Compiler) -> Result<Done, StepError> {
        let ctx = c.step.ctx;
        let inst = c.step.instance();
        let mut api_flags = self.flags.clone();
        api_flags.extend(self.includes.iter().cloned());
        let (api, api_h, api_evaluated) = super::harness::api_sizes(
            c,
            &self.root,
            &self.inst_dir.join("api.h"),
            &inst.namespace,
            &api_flags,
            &self.build_dir,
        )?;
        let objects = self.objects(c)?;
        let linked = self.link(c, &objects)?;
        let profile_object = if ctx.spec(StepKind::Profile).is_some() {
            Some(self.profile_variant(c, &objects, &linked)?)
        } else {
            None
        };
        let valgrind = if super::valgrind_object::wanted(&ctx.campaign) {
            Some(self.valgrind_variant(c, &objects, &linked)?)
        } else {
            None
        };
        let bytes = crate::safe_fs::read(&linked.object, crate::safe_fs::OUTPUT_CAP)?;
        // The size of the object without the anchor's page padding (up to 8 KiB that the
        // KEM does not need): measured on the same objects linked without it, then removed.
        let sizing = self.build_dir.join(format!("{}.unanchored.so", inst.id));
        let args = link::args(
            &linked.base,
            &sizing,
            None,
            &objects.kem,
            0,
            &self.tail(&objects, &[]),
        );
        c.run(args, || format!("link error for {}", sizing.display()))?;
        let static_bytes = load_segments_size(&sizing).ok();
        let executable_stack = executable_stack(&bytes).then(|| {
            objects
                .compiled
                .iter()
                .map(|(src, _)| src)
                .zip(&objects.kem)
                .filter(|(_, obj)| {
                    !crate::safe_fs::read(obj, crate::safe_fs::OUTPUT_CAP)
                        .is_ok_and(|b| has_stack_note(&b))
                })
                .map(|(src, _)| src.strip_prefix(&self.root).unwrap_or(src).to_path_buf())
                .collect()
        });
        std::fs::remove_file(&sizing).map_err(StepError::File)?;
        let step = &mut *c.step;
        step.artefacts.push(ctx.rel(&linked.object));
        step.artefacts
            .extend(profile_object.iter().map(|p| ctx.rel(p)));
        step.artefacts
            .extend(valgrind.iter().map(|v| ctx.rel(&v.object)));
        step.artefacts
            .extend(linked.layouts.iter().map(|l| l.object.clone()));
        let id = ctx.facts.compilers.get(&self.cc);
        let debug = super::valgrind_object::debug_flag();
        let valgrind_debug = valgrind.as_ref().map(|_| {
            let reader = super::valgrind_object::valgrind()
                .map_or("no valgrind found".to_string(), |v| v.version.clone());
            match debug {
                super::valgrind_object::DWARF4_FLAG => {
                    format!("{debug}: {reader} reads DWARF 4 only (before 3.20)")
                }
                _ => format!("{debug}: {reader} reads the compiler's default DWARF"),
            }
        });
        Ok(Done::ok(StepData::Build(BuildData {
            object: ctx.rel(&linked.object),
            object_sha256: sha256_hex(&bytes),
            profile_object: profile_object.map(|p| ctx.rel(&p)),
            valgrind_object: valgrind.as_ref().map(|v| ctx.rel(&v.object)),
            valgrind_flags: valgrind.map(|v| v.flags).unwrap_or_default(),
            cc_version: id.map_or_else(|| ctx.facts.cc_version.clone(), |i| i.version.clone()),
            cc_path: id.and_then(|i| i.path.clone()),
            cc_target: id.map(|i| i.target.clone()),
            valgrind_debug,
            cc: self.cc,
            flags_profile: self.profile_name,
            flags: self.flags,
            codegen_flags: CODEGEN_FLAGS.iter().map(|f| f.to_string()).collect(),
            link_flags: self
                .profile_flags
                .iter()
                .chain(&linked.link_flags[..2])
                .cloned()
                .chain([format!(
                    "-Wl,--version-script={}",
                    ctx.rel(&linked.map).display()
                )])
                .collect(),
            objects: objects.compiled,
            primitive_objects: objects.primitives.iter().map(|p| ctx.rel(p)).collect(),
            static_bytes,
            api,
            api_h,
            namespace: inst.namespace.clone(),
            anchor_object: Some(ctx.rel(&objects.anchor)),
            layouts: linked.layouts,
            libraries: self.libraries,
            left_out: self
                .listing
                .left_out
                .into_iter()
                .map(|l| (l.file, l.defines))
                .collect(),
            api_evaluated,
            executable_stack,
        })))
    }

    /// The instance's sources, the shared primitives, the DRNG shim and the anchor.
    fn objects(&self, c: &mut Compiler) -> Result<Objects, StepError> {
        let ctx = c.step.ctx;
        let sub = c.step.submission();
        let mut kem = Vec::new();
        let mut compiled = Vec::new();
        let mut f = self.flags.clone();
        f.extend(self.includes.iter().cloned());
        for (i, src) in self.listing.files.iter().enumerate() {
            let obj = self.obj_dir.join(format!("{i:03}-{}.o", stem(src)));
            c.compile(src, &obj, &f)?;
            compiled.push((src.clone(), ctx.rel(&obj)));
            kem.push(obj);
        }
        let sources = self.primitive_sources(sub);
        let mut prim_flags = self.flags.clone();
        prim_flags.extend(self.prim_includes.iter().cloned());
        let primitives = shared_objects(
            c,
            &self.prim_key,
            &self.prim_dir,
            &sources,
            &prim_flags,
            "shared primitives",
        )?;
        kem.extend(primitives.iter().cloned());

        let drng = super::harness::drng_symbol(sub);
        let shim = self.build_dir.join("ngcc_shim.c");
        std::fs::write(&shim, super::harness::shim_source(&drng, sub.api))
            .map_err(StepError::File)?;
        let shim_obj = self.build_dir.join("ngcc_shim.o");
        c.compile(&shim, &shim_obj, &self.profile_flags)?;
        // The anchor, linked before the KEM's objects in every object (link.rs).
        let anchor_c = self.build_dir.join("ngcc_anchor.c");
        std::fs::write(&anchor_c, link::ANCHOR_C).map_err(StepError::File)?;
        let anchor = self.build_dir.join("ngcc_anchor.o");
        c.compile(&anchor_c, &anchor, &self.profile_flags)?;
        Ok(Objects {
            compiled,
            kem,
            primitives,
            shim,
            shim_obj,
            anchor,
        })
    }

    /// What follows the KEM's objects on a link line: the shim, `extra`, the libraries.
    fn tail<'o>(&'o self, o: &'o Objects, extra: &[&'o Path]) -> Vec<&'o Path> {
        let mut tail: Vec<&Path> = vec![&o.shim_obj];
        tail.extend(extra);
        tail.extend(self.libraries.iter().map(|l| l.file.as_path()));
        tail
    }

    /// The plain object (layout `listed`), then the other link orders.
    fn link(&self, c: &mut Compiler, o: &Objects) -> Result<Linked, StepError> {
        let ctx = c.step.ctx;
        let id = &c.step.instance().id;
        let map = self.build_dir.join("ngcc_exports.map");
        std::fs::write(&map, export_map(&c.step.instance().namespace)).map_err(StepError::File)?;
        let link_flags = [
            "-shared".to_string(),
            "-Wl,-z,defs".to_string(),
            format!("-Wl,--version-script={}", map.display()),
        ];
        let mut base = self.profile_flags.clone();
        base.extend(link_flags.iter().cloned());
        let object = self.build_dir.join(format!("{id}.so"));
        let tail = self.tail(o, &[]);
        let args = link::args(&base, &object, Some(&o.anchor), &o.kem, 0, &tail);
        c.run(args, || format!("link error for {}", object.display()))?;
        let mut layouts = Vec::new();
        for j in 1..link::count(&ctx.campaign) {
            let name = link::name(j);
            let obj = self.build_dir.join(format!("{id}.{name}.so"));
            let args = link::args(&base, &obj, Some(&o.anchor), &o.kem, j, &tail);
            c.run(args, || format!("link error for {}", obj.display()))?;
            let bytes = crate::safe_fs::read(&obj, crate::safe_fs::OUTPUT_CAP)?;
            layouts.push(LayoutObject {
                name,
                object: ctx.rel(&obj),
                object_sha256: sha256_hex(&bytes),
            });
        }
        Ok(Linked {
            object,
            map,
            link_flags,
            base,
            layouts,
        })
    }

    /// The profile variant: the same objects plus generated wrappers, linked with --wrap.
    fn profile_variant(
        &self,
        c: &mut Compiler,
        o: &Objects,
        l: &Linked,
    ) -> Result<PathBuf, StepError> {
        let sub = c.step.submission();
        let drng = super::harness::drng_symbol(sub);
        let mut headers = Vec::new();
        for h in &sub.primitives.headers {
            let text = crate::safe_fs::read_within(&self.root, &self.root.join(h), 16 << 20)
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
        let wrap_c = self.build_dir.join("ngcc_wrappers.c");
        std::fs::write(&wrap_c, wrappers).map_err(StepError::File)?;
        let wrap_obj = self.build_dir.join("ngcc_wrappers.o");
        let mut wflags = self.profile_flags.clone();
        wflags.extend(self.includes.iter().cloned());
        wflags.push(format!("-I{}", self.root.display()));
        c.compile(&wrap_c, &wrap_obj, &wflags)?;
        let prof = self
            .build_dir
            .join(format!("{}.prof.so", c.step.instance().id));
        let mut base = l.base.clone();
        base.extend(crate::profile::wrap_link_flags(
            &sub.primitives.functions,
            Some(&drng),
        ));
        let tail = self.tail(o, &[&wrap_obj]);
        let args = link::args(&base, &prof, Some(&o.anchor), &o.kem, 0, &tail);
        c.run(args, || format!("link error for {}", prof.display()))?;
        Ok(prof)
    }

    /// The object valgrind runs (`count`, `ct`): see valgrind_object.rs.
    fn valgrind_variant(
        &self,
        c: &mut Compiler,
        o: &Objects,
        l: &Linked,
    ) -> Result<super::valgrind_object::Built, StepError> {
        let sub = c.step.submission();
        let prim_sources = self.primitive_sources(sub);
        let lib_files: Vec<PathBuf> = self.libraries.iter().map(|l| l.file.clone()).collect();
        let id = c.step.instance().id.clone();
        let inputs = super::valgrind_object::Inputs {
            root: &self.root,
            sources: &self.listing.files,
            includes: &self.includes,
            prim_sources: &prim_sources,
            prim_includes: &self.prim_includes,
            flags: &self.flags,
            profile_flags: &self.profile_flags,
            shim: &o.shim,
            link_flags: &l.link_flags,
            libraries: &lib_files,
            build_dir: &self.build_dir,
            id: &id,
        };
        super::valgrind_object::build(c, &inputs)
    }
}

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

/// Whether a linked ELF object asks for an executable stack: its `PT_GNU_STACK` segment has
/// the execute flag (the linker sets it when an input object has no `.note.GNU-stack`).
/// An object that does not parse, or has no such segment, is not said to.
pub fn executable_stack(data: &[u8]) -> bool {
    use object::read::elf::{ElfFile64, ProgramHeader};
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(data) else {
        return false;
    };
    let endian = elf.endian();
    elf.elf_program_headers().iter().any(|ph| {
        ph.p_type(endian) == object::elf::PT_GNU_STACK
            && ph.p_flags(endian).contains(object::elf::PF_X)
    })
}

/// Whether a relocatable object says which stack it needs (a `.note.GNU-stack` section;
/// the compiler writes one into every object, an assembly file only when it asks for it).
pub fn has_stack_note(data: &[u8]) -> bool {
    use object::{Object, ObjectSection};
    object::File::parse(data).is_ok_and(|f| f.sections().any(|s| s.name() == Ok(".note.GNU-stack")))
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
    read.extend(
        cflag_includes(root, &inst.cflags)
            .into_iter()
            .map(|(_, p)| p),
    );
    read.sort();
    read.dedup();
    read
}

/// Options whose value is an include folder.
const INCLUDE_OPTIONS: [&str; 4] = ["-I", "-isystem", "-iquote", "-idirafter"];

/// The relative include folders of `cflags`, resolved against the source root `root`
/// (the compiler's working folder is the build folder, so a relative folder means one of
/// the source): (index of the flag holding the folder, folder). A folder that is not there
/// is left out (the compiler would not find it either).
fn cflag_includes(root: &Path, cflags: &[String]) -> Vec<(usize, PathBuf)> {
    let mut out = Vec::new();
    for (i, f) in cflags.iter().enumerate() {
        let value = match INCLUDE_OPTIONS.iter().find_map(|o| f.strip_prefix(o)) {
            Some("") => continue,
            Some(v) => v,
            None if i > 0 && INCLUDE_OPTIONS.contains(&cflags[i - 1].as_str()) => f.as_str(),
            None => continue,
        };
        let path = Path::new(value);
        if path.is_relative() && root.join(path).is_dir() {
            out.push((i, crate::safe_fs::normalize(&root.join(path))));
        }
    }
    out
}

/// The instance's `cflags` as the compiler gets them: relative include folders made
/// absolute under the source root `root` (they are in the jail's read list too, see
/// [`compile_reads`]).
pub fn instance_cflags(root: &Path, inst: &Instance) -> Vec<String> {
    let mut flags = inst.cflags.clone();
    for (i, dir) in cflag_includes(root, &inst.cflags) {
        let f = &flags[i];
        let option = INCLUDE_OPTIONS
            .iter()
            .find(|o| f.starts_with(**o) && f.len() > o.len())
            .map_or("", |o| *o);
        flags[i] = format!("{option}{}", dir.display());
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_include_folders_of_cflags_are_under_the_source_root() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("R/common")).unwrap();
        let cflags: Vec<String> = [
            "-mavx2",
            "-IR/common",
            "-isystem",
            "R/common",
            "-Imissing",
            "-I/usr/include",
            "-DX=1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let inc = cflag_includes(d.path(), &cflags);
        let common = d.path().join("R/common");
        assert_eq!(inc, [(1, common.clone()), (3, common.clone())]);
        let mut inst_flags = cflags.clone();
        for (i, p) in &inc {
            inst_flags[*i] = format!("{}{}", if *i == 1 { "-I" } else { "" }, p.display());
        }
        let mut inst = crate::graph::tests::campaign(1).submissions[0].instances[0].clone();
        inst.cflags = cflags;
        assert_eq!(instance_cflags(d.path(), &inst), inst_flags);
    }

    #[test]
    fn sums_load_segments_of_a_real_object() {
        let exe = std::env::current_exe().unwrap();
        let n = load_segments_size(&exe).unwrap();
        assert!(n > 4096, "{n}");
        assert!(load_segments_size(Path::new("/nonexistent")).is_err());
    }
}
