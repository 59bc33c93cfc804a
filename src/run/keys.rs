//! Cache keys: each step's key is the SHA-256 of its named inputs. The names let `explain`
//! and the dry run say *which* input changed.
//!
//! A step's inputs are its own (parameters, the files it reads, compiler version, the
//! environment fingerprint for measurements, the kem-native version) plus the keys of the
//! steps it depends on, so a change anywhere upstream reaches everything downstream.

use std::collections::BTreeMap;
use std::path::Path;

use petgraph::graph::NodeIndex;
use sha2::{Digest, Sha256};

use crate::graph::{Node, Plan};
use crate::model::{Campaign, StepKind, StepSpec};
use crate::safe_fs::tree::SOURCE_BOUNDS;

/// Bumped when a step's logic changes in a way that invalidates its old records
/// (3: `time` measured in interleaved sessions, `profile` repeated; 4: the yardstick timed
/// in every round of the session).
pub const STEP_LOGIC_VERSION: &str = "4";

/// Facts about the machine and tools that feed into keys.
#[derive(Debug, Clone)]
pub struct Facts {
    /// First line of `cc --version` (the system's `cc`).
    pub cc_version: String,
    /// Each compiler instances are built with, by command: what build keys take of it.
    pub compilers: BTreeMap<String, CompilerId>,
    /// Environment fingerprint (CPU model, governor, kernel, ...).
    pub env_fingerprint: String,
    /// The system libraries instances link (`link "crypto"`), resolved once (`run/libs.rs`).
    pub libraries: BTreeMap<String, Result<crate::record::LinkedLibrary, String>>,
}

/// A compiler as found on this machine: its file, the first line of its `--version` and
/// its `-dumpmachine` target. A build's key holds all three (an upgraded compiler, another
/// one of the same name earlier on `PATH`, or a cross compiler builds again).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompilerId {
    pub path: Option<std::path::PathBuf>,
    pub version: String,
    pub target: String,
}

impl CompilerId {
    /// The text a build's key takes: `<path>; <version>; <target>`.
    pub fn key_text(&self) -> String {
        format!(
            "{}; {}; {}",
            self.path
                .as_deref()
                .map_or("not found".into(), |p| p.display().to_string()),
            self.version,
            self.target
        )
    }
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Key over named inputs.
pub fn key_of(inputs: &BTreeMap<String, String>) -> String {
    sha256_hex(&serde_json::to_vec(inputs).expect("string map serializes"))
}

/// Short values are kept as they are (readable in `explain`), long ones hashed.
pub fn value(s: String) -> String {
    if s.len() <= 96 {
        s
    } else {
        format!("sha256:{}", sha256_hex(s.as_bytes()))
    }
}

/// A model value as JSON, kept or hashed as [`value`] does.
pub fn json<T: serde::Serialize>(v: &T) -> String {
    value(serde_json::to_string(v).expect("model serializes"))
}

/// Hash of the files below `dir` (sorted by path; a symbolic link counts as its target's
/// name, never followed); a missing folder hashes as empty. A tree deeper or larger than
/// [`SOURCE_BOUNDS`], or a file that cannot be read, is an error (the step that uses the
/// tree fails with it; see `steps/build.rs`).
pub fn tree_hash(dir: &Path) -> Result<String, String> {
    use crate::safe_fs::tree::{walk, Kind};
    let mut entries = walk(dir, SOURCE_BOUNDS).map_err(|e| e.to_string())?;
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    let mut h = Sha256::new();
    for e in entries {
        let content = match &e.kind {
            Kind::Dir => continue,
            Kind::File(_) => crate::safe_fs::read(&dir.join(&e.rel), crate::safe_fs::OUTPUT_CAP)
                .map_err(|e| e.to_string())?,
            Kind::Link(target) => format!("-> {}", target.display()).into_bytes(),
            Kind::Other => b"(not a file)".to_vec(),
        };
        h.update(e.rel.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(content);
        h.update([0]);
    }
    Ok(hex::encode(h.finalize()))
}

/// [`tree_hash`] as a cache-key input: the hash, or `unreadable: <why>` (which the step
/// then fails with).
pub fn tree_input(dir: &Path) -> String {
    tree_hash(dir).unwrap_or_else(|why| format!("unreadable: {why}"))
}

/// Hash of one file's contents, or `missing`.
pub fn file_hash(path: &Path) -> String {
    crate::safe_fs::read(path, crate::safe_fs::OUTPUT_CAP)
        .map(|b| sha256_hex(&b))
        .unwrap_or_else(|_| "missing".to_string())
}

/// The inputs of every node, in node-index order. Upstream keys must be known first, so
/// nodes are visited in execution order.
pub fn all_inputs(
    campaign: &Campaign,
    plan: &Plan,
    facts: &Facts,
    kind_inputs: KindInputs,
) -> Vec<BTreeMap<String, String>> {
    let mut inputs = vec![BTreeMap::new(); plan.graph.node_count()];
    let mut keys = vec![String::new(); plan.graph.node_count()];
    for ix in plan.execution_order() {
        let mut map = own_inputs(campaign, &plan.graph[ix], facts, kind_inputs);
        for dep in plan.deps(ix) {
            map.insert(
                format!("after {}", plan.graph[dep].id),
                keys[dep.index()].clone(),
            );
        }
        keys[ix.index()] = key_of(&map);
        inputs[ix.index()] = map;
    }
    inputs
}

/// Key of one node given all inputs.
pub fn key_at(inputs: &[BTreeMap<String, String>], ix: NodeIndex) -> String {
    key_of(&inputs[ix.index()])
}

fn spec_of(campaign: &Campaign, kind: StepKind) -> &StepSpec {
    campaign
        .steps
        .iter()
        .find(|s| s.kind == kind)
        .expect("node kinds come from declared steps")
}

/// A step kind's own cache-key inputs of one node (`run/steps`' `KindSpec::inputs`).
pub type KindInputs =
    &'static dyn Fn(&Campaign, &Node, &StepSpec, &Facts, &mut BTreeMap<String, String>);

/// A node's own inputs (not counting its dependencies).
fn own_inputs(
    c: &Campaign,
    node: &Node,
    facts: &Facts,
    kind_inputs: KindInputs,
) -> BTreeMap<String, String> {
    let spec = spec_of(c, node.kind);
    let mut m = BTreeMap::new();
    m.insert(
        "logic".into(),
        format!("{} v{STEP_LOGIC_VERSION}", node.kind),
    );
    // A build of one profile among several depends on that profile only.
    let profile = node
        .instance
        .and_then(|i| c.submissions[node.submission].instances[i].profile());
    // `instances` entries count where they change a node's result (the kind's inputs).
    let mut params = spec.params.clone();
    params.instances.clear();
    if let (Some(p), StepKind::Build) = (profile, node.kind) {
        params.flags = Some(p.to_string());
    }
    m.insert("params".into(), json(&params));
    kind_inputs(c, node, spec, facts, &mut m);
    m
}

/// The `kem-native` input of steps whose records come from the runner.
pub fn native() -> String {
    format!("kem-native {}", kem_native_version())
}

/// Version of the runner crate (its records change meaning with it).
pub fn kem_native_version() -> &'static str {
    kem_native::VERSION
}

/// Names of inputs that differ between an old record's inputs and the current ones.
pub fn changed(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> Vec<String> {
    let mut names: Vec<String> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .collect();
    names.extend(old.keys().filter(|k| !new.contains_key(*k)).cloned());
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::campaign;

    fn facts() -> Facts {
        Facts {
            libraries: BTreeMap::new(),
            cc_version: "gcc 12".into(),
            compilers: BTreeMap::new(),
            env_fingerprint: "fp".into(),
        }
    }

    #[test]
    fn keys_propagate_downstream() {
        let mut c = campaign(2);
        let plan = Plan::build(&c);
        let before = all_inputs(&c, &plan, &facts(), &crate::run::steps::kind_inputs);
        c.flags.get_mut("guide").unwrap().flags = vec!["-O3".into()];
        let after = all_inputs(&c, &plan, &facts(), &crate::run::steps::kind_inputs);
        let build = plan.by_id["s/K-0/build"];
        let time = plan.by_id["s/K-0/time:keygen"];
        assert_eq!(
            changed(&before[build.index()], &after[build.index()]),
            vec!["flags"]
        );
        assert_ne!(key_at(&before, time), key_at(&after, time));
        assert_eq!(
            changed(&before[time.index()], &after[time.index()]),
            vec!["after s/K-0/build", "after s/K-0/kat"]
        );
        let source = plan.by_id["s/source"];
        assert_eq!(key_at(&before, source), key_at(&after, source));
    }

    #[test]
    fn per_instance_samples_key_only_the_instances_they_name() {
        let mut c = campaign(2);
        let plan = Plan::build(&c);
        let before = all_inputs(&c, &plan, &facts(), &crate::run::steps::kind_inputs);
        let time = c
            .steps
            .iter_mut()
            .find(|s| s.kind == StepKind::Time)
            .unwrap();
        time.params.instances.push(crate::model::InstanceSettings {
            patterns: vec!["s/K-1".into()],
            timeout: None,
            all_count: None,
            kat_modes: None,
            iters: None,
            samples: Some(11),
        });
        let after = all_inputs(&c, &plan, &facts(), &crate::run::steps::kind_inputs);
        let named = plan.by_id["s/K-1/time:keygen"];
        let other = plan.by_id["s/K-0/time:keygen"];
        assert_eq!(
            changed(&before[named.index()], &after[named.index()]),
            vec!["samples"]
        );
        assert_eq!(key_at(&before, other), key_at(&after, other));
    }

    #[test]
    fn measurements_depend_on_the_machine() {
        let c = campaign(1);
        let plan = Plan::build(&c);
        let a = all_inputs(&c, &plan, &facts(), &crate::run::steps::kind_inputs);
        let b = all_inputs(
            &c,
            &plan,
            &Facts {
                env_fingerprint: "other".into(),
                ..facts()
            },
            &crate::run::steps::kind_inputs,
        );
        let time = plan.by_id["s/K-0/time:keygen"];
        let kat = plan.by_id["s/K-0/kat"];
        assert_eq!(
            changed(&a[time.index()], &b[time.index()]),
            vec!["environment"]
        );
        assert_eq!(key_at(&a, kat), key_at(&b, kat));
    }

    #[test]
    fn short_values_are_kept_long_ones_hashed() {
        // FIPS 180-2's example: SHA-256("abc").
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let short = "x".repeat(96);
        assert_eq!(value(short.clone()), short);
        let long = "x".repeat(97);
        assert_eq!(
            value(long.clone()),
            format!("sha256:{}", sha256_hex(long.as_bytes()))
        );
        assert_eq!(json(&["-O2", "-g"]), r#"["-O2","-g"]"#);
    }

    #[test]
    fn changed_names_new_edited_and_removed_inputs() {
        let map = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let old = map(&[("cc", "gcc 12"), ("flags", "-O2"), ("gone", "x")]);
        let new = map(&[("cc", "gcc 12"), ("flags", "-O3"), ("added", "y")]);
        assert_eq!(changed(&old, &new), ["added", "flags", "gone"]);
        assert!(changed(&old, &old).is_empty());
    }

    #[test]
    fn a_tree_hash_follows_names_contents_and_link_targets_not_what_links_point_to() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("src");
        // A missing folder hashes as an empty one, and folders alone add nothing.
        let empty = tree_hash(&dir).unwrap();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        assert_eq!(tree_hash(&dir).unwrap(), empty);
        std::fs::write(dir.join("sub/a.c"), "int a;").unwrap();
        let one = tree_hash(&dir).unwrap();
        assert_ne!(one, empty);
        assert_eq!(tree_input(&dir), one);
        // The same tree elsewhere hashes the same; a content edit or a rename does not.
        let copy = tmp.path().join("copy");
        std::fs::create_dir_all(copy.join("sub")).unwrap();
        std::fs::write(copy.join("sub/a.c"), "int a;").unwrap();
        assert_eq!(tree_hash(&copy).unwrap(), one);
        std::fs::write(copy.join("sub/a.c"), "int b;").unwrap();
        assert_ne!(tree_hash(&copy).unwrap(), one);
        std::fs::write(copy.join("sub/a.c"), "int a;").unwrap();
        std::fs::rename(copy.join("sub/a.c"), copy.join("sub/b.c")).unwrap();
        assert_ne!(tree_hash(&copy).unwrap(), one);
        // A link counts as its target's name: retargeted it changes the hash, an edit of
        // the file it points to (outside the tree) does not.
        let outside = tmp.path().join("outside.h");
        std::fs::write(&outside, "1").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("l.h")).unwrap();
        let linked = tree_hash(&dir).unwrap();
        assert_ne!(linked, one);
        std::fs::write(&outside, "2").unwrap();
        assert_eq!(tree_hash(&dir).unwrap(), linked);
        std::fs::remove_file(dir.join("l.h")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("other.h"), dir.join("l.h")).unwrap();
        assert_ne!(tree_hash(&dir).unwrap(), linked);
    }

    #[test]
    fn a_tree_too_deep_to_hash_is_an_unreadable_input() {
        let tmp = tempfile::tempdir().unwrap();
        let mut deep = tmp.path().join("src");
        for _ in 0..SOURCE_BOUNDS.depth + 2 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let why = tree_hash(&tmp.path().join("src")).unwrap_err();
        assert_eq!(
            tree_input(&tmp.path().join("src")),
            format!("unreadable: {why}")
        );
    }

    #[test]
    fn a_file_hash_is_its_contents_or_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("kat.sha256");
        assert_eq!(file_hash(&f), "missing");
        std::fs::write(&f, "abc").unwrap();
        assert_eq!(file_hash(&f), sha256_hex(b"abc"));
    }

    #[test]
    fn runner_records_are_keyed_on_the_runner_version() {
        assert_eq!(kem_native_version(), kem_native::VERSION);
        assert_eq!(native(), format!("kem-native {}", kem_native::VERSION));
        let c = campaign(1);
        let plan = Plan::build(&c);
        let inputs = all_inputs(&c, &plan, &facts(), &crate::run::steps::kind_inputs);
        let time = plan.by_id["s/K-0/time:keygen"];
        assert_eq!(inputs[time.index()]["kem-native"], native());
    }
}
