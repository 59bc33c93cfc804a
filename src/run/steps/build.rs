//! `build`: compile an instance's C and assembly sources, the provided primitives and the
//! generated DRNG shim into one shared object with the step's flag profile; and, when the
//! campaign profiles, a second object linked with `--wrap` for every declared primitive.
//!
//! The primitives are compiled once per (source root, flags) and shared between instances.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use std::collections::BTreeMap;

use super::build_job::Job;
pub(super) use super::compiler::Compiler;
use super::link;
use super::{Done, KindSpec, Step, StepError};
use crate::graph::Node;
use crate::model::{Campaign, Source, StepKind, StepSpec};
use crate::record::Status;
use crate::run::keys::{file_hash, json, native, sha256_hex, tree_input, value, Facts};

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

pub use super::build_job::{compile_reads, instance_cflags, load_segments_size};
pub use super::harness::{drng_symbol, shim_source};

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
        let cc = inst.compiler().unwrap_or(&c.system.cc);
        let identity = facts.compilers.get(cc).map_or_else(
            || facts.cc_version.clone(),
            crate::run::keys::CompilerId::key_text,
        );
        m.insert("cc".into(), value(format!("{cc}: {identity}")));
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
            m.insert(
                "valgrind debug info".into(),
                super::valgrind_object::debug_flag().to_string(),
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
    if let Some(unsupported) = cpu_missing(step) {
        return Ok(unsupported);
    }
    let job = Job::prepare(step)?;
    let jail = job.jail(step)?;
    let log = step.job_log("build")?;
    let mut c = Compiler {
        step,
        cc: job.cc.clone(),
        log,
        jail,
    };
    job.compile_and_link(&mut c)
}

/// The instance skipped when the CPU (or the emulated target) lacks a feature it requires.
fn cpu_missing(step: &Step) -> Option<Done> {
    lacks_cpu(step.ctx, step.instance()).map(|why| Done {
        status: Status::Unsupported,
        reason: Some(format!("{why}; instance skipped")),
        data: None,
    })
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
