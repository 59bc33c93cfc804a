//! The validated campaign model: what the DSL lowers to and what the graph is built from.
//!
//! Everything here is plain data. Parsing (with spans and diagnostics) lives in `dsl`;
//! nothing in this module can fail. Paths are absolute once lowered (resolved relative to
//! the file that named them), so later stages never need to know where a file came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A whole campaign: one pipeline file plus every manifest it pulled in.
#[derive(Debug, Clone, Serialize)]
pub struct Campaign {
    /// The pipeline file, absolute.
    pub pipeline_path: PathBuf,
    pub system: System,
    /// Named compiler-flag profiles (`flags "guide" "-O3 ..."`), by name.
    pub flags: BTreeMap<String, FlagProfile>,
    /// Output folder for this system, absolute (`outputs "../outputs/x86_1"`).
    pub outputs: PathBuf,
    /// Steps in the order the pipeline declares them.
    pub steps: Vec<StepSpec>,
    /// Submissions sorted by id.
    pub submissions: Vec<Submission>,
}

/// The machine being measured.
#[derive(Debug, Clone, Serialize)]
pub struct System {
    /// `system "x86_1"`.
    pub name: String,
    /// Architecture shown in report titles (`arch "x86-64"`); defaults to the host's.
    pub arch: String,
    /// Core that exclusive (timing, profile) steps are pinned to (`bench-cpu 1`).
    pub bench_cpu: usize,
    /// C compiler command (`cc "gcc"`); with `compilers`, the first of them unless `cc` is
    /// given too. The yardstick, library lookup and cross linking use it.
    pub cc: String,
    /// The compilers every instance is built with (`compilers "gcc" "clang-16"`), in
    /// declaration order; empty: `cc` alone. See [`System::compilers`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compilers: Vec<String>,
    /// What an exclusive step has to itself (`isolation "core"` or `"machine"`).
    pub isolation: Isolation,
    /// How target binaries run when `arch` is not this machine's (`emulator`,
    /// `cpu-features`); empty for a native system.
    #[serde(skip_serializing_if = "Target::is_native")]
    pub target: Target,
    /// Where steps run (`executor "slurm" { ... }`); local by default.
    #[serde(skip_serializing_if = "Executor::is_local")]
    pub executor: Executor,
    /// Whether submission code may run without bubblewrap (`sandbox "required"`: no).
    #[serde(skip_serializing_if = "SandboxPolicy::is_preferred")]
    pub sandbox: SandboxPolicy,
    /// What the campaign is for (`role "smoke"`): only `measure` campaigns are shown as
    /// systems beside one another.
    #[serde(skip_serializing_if = "Role::is_measure")]
    pub role: Role,
}

/// `sandbox "preferred"` (the default: without bubblewrap, run with a warning) or
/// `sandbox "required"` (without it, refuse to run submission code).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxPolicy {
    #[default]
    Preferred,
    Required,
}

impl SandboxPolicy {
    pub fn is_preferred(&self) -> bool {
        *self == SandboxPolicy::Preferred
    }
}

/// How a system whose `arch` differs from the host's is run here.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Target {
    /// Command that runs a target binary (`emulator "qemu-aarch64" "-L" "/usr/aarch64-linux-gnu"`),
    /// used only when this machine is not of the system's `arch`; empty when none is named.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub emulator: Vec<String>,
    /// CPU features of the emulated target, as `/proc/cpuinfo` names them (`cpu-features
    /// "asimd"`): what `requires-cpu` is judged against under emulation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_features: Option<Vec<String>>,
}

impl Target {
    fn is_native(&self) -> bool {
        self.emulator.is_empty() && self.cpu_features.is_none()
    }
}

/// The canonical name of an architecture (`x86_64` -> `x86-64`, `arm64` -> `aarch64`).
pub fn canonical_arch(arch: &str) -> String {
    match arch {
        "x86_64" | "amd64" | "x86-64" => "x86-64".to_string(),
        "arm64" | "aarch64" => "aarch64".to_string(),
        other => other.to_string(),
    }
}

/// The architecture of this machine, canonical ([`canonical_arch`]).
pub fn host_arch() -> String {
    canonical_arch(std::env::consts::ARCH)
}

impl System {
    /// The compilers instances are built with: `compilers`, else `cc` alone.
    pub fn compilers(&self) -> Vec<&str> {
        if self.compilers.is_empty() {
            vec![self.cc.as_str()]
        } else {
            self.compilers.iter().map(String::as_str).collect()
        }
    }

    /// Whether the system's architecture differs from this machine's: kem-runner and the
    /// objects are then built for the target and run under the `emulator`.
    pub fn foreign(&self) -> bool {
        canonical_arch(&self.arch) != host_arch()
    }

    /// Rust target triple of kem-runner for a foreign system (`aarch64-unknown-linux-gnu`).
    pub fn rust_target(&self) -> Option<&'static str> {
        match canonical_arch(&self.arch).as_str() {
            "x86-64" => Some("x86_64-unknown-linux-gnu"),
            "aarch64" => Some("aarch64-unknown-linux-gnu"),
            "riscv64" => Some("riscv64gc-unknown-linux-gnu"),
            _ => None,
        }
    }

    /// The emulator command when target binaries run emulated here (foreign system with
    /// an `emulator`), else `None` (native: run directly).
    pub fn emulator(&self) -> Option<&[String]> {
        (self.foreign() && !self.target.emulator.is_empty()).then_some(&self.target.emulator[..])
    }

    /// Why steps that measure the target's own speed cannot run here (`time`, `profile`),
    /// or `None` when the system runs natively.
    pub fn emulated_reason(&self) -> Option<String> {
        let emu = self.emulator()?;
        let tool = Path::new(&emu[0])
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tool = if tool.starts_with("qemu-") {
            "qemu-user".to_string()
        } else {
            tool
        };
        Some(format!(
            "emulated ({tool}): timing needs a native {} machine",
            canonical_arch(&self.arch)
        ))
    }
}

/// Where the engine runs the steps it schedules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Executor {
    /// Child processes of the engine, on this machine.
    #[default]
    Local,
    /// Each step that runs submission code is a Slurm job.
    Slurm(SlurmOptions),
}

impl Executor {
    pub fn is_local(&self) -> bool {
        *self == Executor::Local
    }
}

/// `executor "slurm" { ... }`: what every job is submitted with (absent: Slurm's default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SlurmOptions {
    /// `partition "ngcc"` (`--partition`).
    pub partition: Option<String>,
    /// `account "..."` (`--account`).
    pub account: Option<String>,
    /// `qos "..."` (`--qos`).
    pub qos: Option<String>,
    /// `constraint "..."` (`--constraint`): node features, e.g. one CPU model.
    pub constraint: Option<String>,
}

/// How much of the machine an exclusive (timing, profile) step has to itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// The bench core: builds and KATs go on on the other cores meanwhile. Right when the
    /// other cores share nothing that matters with the bench core.
    Core,
    /// The whole machine: no parallel step runs while an exclusive one does. Needed where
    /// the other cores are SMT siblings of the bench core or share its caches (VMs).
    Machine,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Core => "core",
            Isolation::Machine => "machine",
        }
    }
}

/// A named set of compiler flags.
#[derive(Debug, Clone, Serialize)]
pub struct FlagProfile {
    pub name: String,
    /// Already split on whitespace.
    pub flags: Vec<String>,
}

pub mod kind;

/// Most link orders a `time` step may ask for.
pub const MAX_LAYOUTS: u32 = 8;

/// The names campaigns share with records: defined by the evidence schema (`ngcc-record`).
pub use crate::record::{CatalogSizes, KatMode, Op, Role};
pub use kind::{KindFacts, KindTable, StepKind};

/// How many graph nodes one step declaration becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepScope {
    Campaign,
    Submission,
    Instance,
    Operation,
}

/// One `step` line of the pipeline.
#[derive(Debug, Clone, Serialize)]
pub struct StepSpec {
    pub kind: StepKind,
    /// Kinds this step waits for (`needs="build kat"`).
    pub needs: Vec<StepKind>,
    /// Runs alone on the bench core (`exclusive=#true`).
    pub exclusive: bool,
    /// Kill the step after this long (`timeout="10m"`, else `defaults timeout=`, else 30m).
    pub timeout: Duration,
    pub params: StepParams,
}

/// Step parameters. Each kind reads the ones that concern it; the DSL rejects the rest.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepParams {
    /// build: flag profile name (`flags="guide"`), or several separated by single spaces
    /// (`flags="guide harness-default"`): every instance is then built once per profile.
    pub flags: Option<String>,
    /// time, profile: operations (`ops="keygen enc dec"`).
    pub ops: Vec<Op>,
    /// time: number of trials (`trials=5`).
    pub trials: u32,
    /// time: target length of one trial (`trial="1s"`).
    pub trial: Duration,
    /// time: minimum iterations per trial (`min-iters=20`).
    pub min_iters: u64,
    /// time: single-call samples recorded for the distribution (`samples=101`).
    pub samples: u32,
    /// time: link orders of every instance timed together, each batch the mean over them
    /// (`layouts=4`; 1, the default, times the object as listed only).
    pub layouts: u32,
    /// profile: iterations per operation (`iters=20`).
    pub iters: u64,
    /// time, profile: measure only each implementation's best cell, the one with the fewest
    /// counted instructions for enc + dec (`cells="best"`); the others are skipped.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub best_cell: bool,
    /// kat: which KAT modes to generate (`modes="single all"`).
    pub kat_modes: Vec<KatMode>,
    /// build, kat, time, profile: address-space limit of the sandboxed processes, bytes
    /// (`memory="8G"`); `None`: the default, 4 GiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    /// Settings for some instances only (`instances "mceliece/*8192128*" timeout="2h"` in
    /// the step's block), first match wins. Not part of cache keys as such: a node's key
    /// takes the settings that change its result (`all-count`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceSettings>,
}

/// `instances "<glob>" ... timeout="2h" all-count=2 modes="single"` inside a step's block: settings for the
/// instances whose `<submission>/<instance>` id matches the glob (`*` also crosses `/`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct InstanceSettings {
    /// Globs over `<submission>/<instance>`; any may match.
    pub patterns: Vec<String>,
    /// Replaces the step's timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// kat: counts of the `all` mode, fewer than the manifest's `all-count` (a reduced KAT:
    /// its hash is not compared with the manifest's, and the report says so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_count: Option<u32>,
    /// kat: the modes to generate for these instances (`modes="single"`), instead of the
    /// step's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kat_modes: Option<Vec<KatMode>>,
    /// profile: calls per profile run, instead of the step's `iters` (slow schemes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iters: Option<u64>,
    /// time: single-call samples each runner takes at the end, instead of the step's
    /// `samples` (slow schemes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u32>,
}

impl InstanceSettings {
    /// Whether `<submission>/<instance>` matches (the DSL has checked the glob).
    pub fn matches(&self, submission: &str, instance: &str) -> bool {
        let id = format!("{submission}/{instance}");
        self.patterns.iter().any(|p| {
            globset::Glob::new(p)
                .map(|g| g.compile_matcher().is_match(&id))
                .unwrap_or(false)
        })
    }
}

impl StepSpec {
    /// The first `instances` block entry matching this instance, if any.
    pub fn settings_for(&self, submission: &str, instance: &str) -> Option<&InstanceSettings> {
        self.params
            .instances
            .iter()
            .find(|s| s.matches(submission, instance))
    }

    /// This step's timeout for one instance (its `instances` entry's, else the step's).
    pub fn timeout_for(&self, submission: &str, instance: Option<&str>) -> Duration {
        instance
            .and_then(|i| self.settings_for(submission, i))
            .and_then(|s| s.timeout)
            .unwrap_or(self.timeout)
    }

    /// profile: calls per profile run for one instance (its `instances` entry's, else the
    /// step's `iters`).
    pub fn iters_for(&self, submission: &str, instance: &str) -> u64 {
        self.settings_for(submission, instance)
            .and_then(|s| s.iters)
            .unwrap_or(self.params.iters)
    }

    /// time: single-call samples for one instance (its `instances` entry's, else the step's
    /// `samples`).
    pub fn samples_for(&self, submission: &str, instance: &str) -> u32 {
        self.settings_for(submission, instance)
            .and_then(|s| s.samples)
            .unwrap_or(self.params.samples)
    }
}

impl StepParams {
    /// The flag profiles named by `flags=`, in declaration order.
    pub fn flag_profiles(&self) -> Vec<&str> {
        self.flags
            .as_deref()
            .map(|f| f.split(' ').collect())
            .unwrap_or_default()
    }
}

impl Default for StepParams {
    fn default() -> Self {
        StepParams {
            flags: None,
            ops: Op::ALL.to_vec(),
            trials: 5,
            trial: Duration::from_secs(1),
            min_iters: 20,
            samples: 101,
            layouts: 1,
            iters: 20,
            best_cell: false,
            kat_modes: vec![KatMode::Single],
            memory: None,
            instances: Vec::new(),
        }
    }
}

/// The random-byte generator a KAT is produced with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KatRng {
    /// NIST SP 800-90A AES-256 CTR_DRBG as in NIST's `rng.c`.
    Nist,
    /// The SHAKE-256 PRNG of HQC's KATs.
    Hqc,
}

impl KatRng {
    /// Its name on kem-runner's command line and in cache keys (`nist`, `hqc`).
    pub fn name(self) -> &'static str {
        match self {
            KatRng::Nist => "nist",
            KatRng::Hqc => "hqc",
        }
    }
}

/// One KEM submission (`submissions/<id>/manifest.kdl`).
#[derive(Debug, Clone, Serialize)]
pub struct Submission {
    /// `submission "ml-kem"`.
    pub id: String,
    /// The manifest file, absolute.
    pub manifest_path: PathBuf,
    /// The folder holding the manifest, absolute.
    pub dir: PathBuf,
    pub meta: ReportMeta,
    pub source: Source,
    pub primitives: Primitives,
    pub kat: KatSettings,
    /// External size catalog (`sizes` block or `sizes.csv`), by instance id.
    pub sizes: BTreeMap<String, CatalogSizes>,
    /// Matrix-expanded instances, in declaration order.
    pub instances: Vec<Instance>,
    /// Functions whose constant-time findings are known to be harmless (`ct-benign`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ct_benign: Vec<CtBenign>,
    /// The API the sources follow (`api "nist"`); namespaced (PQClean) when absent.
    #[serde(skip_serializing_if = "Api::is_namespaced")]
    pub api: Api,
}

/// The API a submission's sources follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// PQClean style: symbols under a per-instance `namespace`, the harness supplies the
    /// DRNG symbol `drng` names (`int f(uint8_t *, size_t)`).
    #[default]
    Namespaced,
    /// A NIST-round package (`api "nist"`): no namespace; the harness supplies NIST's
    /// `int randombytes(unsigned char *, unsigned long long)` and `randombytes_init`, and
    /// leaves out the package's own files that define `main`, `randombytes` or
    /// `randombytes_init` (its `rng.c`, `PQCgenKAT_kem.c`).
    Nist,
}

impl Api {
    /// Whether this is the default (namespaced) API.
    pub fn is_namespaced(&self) -> bool {
        *self == Api::Namespaced
    }

    /// Functions the harness defines itself: a source file that defines one is left out.
    pub fn harness_functions(self) -> &'static [&'static str] {
        match self {
            Api::Namespaced => &[],
            Api::Nist => &["main", "randombytes", "randombytes_init"],
        }
    }
}

/// `ct-benign "function" reason="..."`: findings of the constant-time check in this function
/// are labelled with the reason (shown, never hidden).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtBenign {
    /// The C function as the source defines it (without the instance's namespace).
    pub function: String,
    pub reason: String,
}

/// Report metadata for section 1.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReportMeta {
    /// `algorithm "ML-KEM"`.
    pub algorithm: String,
    /// `category "public-key algorithm"`.
    pub category: Option<String>,
    /// `function "key encapsulation"`.
    pub function: Option<String>,
    /// `versions "clean" "avx2"`; when absent, the values of the `impl` matrix variable.
    pub versions: Vec<String>,
    /// Free-text notes (`note "..."`), printed as footnotes under the KAT table.
    pub notes: Vec<String>,
    /// Links shown in section 1 (`link "Submission" "https://..."`).
    pub links: Vec<(String, String)>,
}

/// Where a submission's code comes from.
#[derive(Debug, Clone, Serialize)]
pub enum Source {
    /// A folder (absolute once lowered) holding the unpacked code.
    Path { path: PathBuf },
    /// A crates.io package at an exact version; `root` is the folder inside it that
    /// instance `dir`s are relative to (e.g. `pqclean`).
    Crate {
        name: String,
        version: String,
        root: String,
    },
    /// A `.tar`, `.tar.gz`/`.tgz` or `.zip` file (absolute once lowered) with its SHA-256;
    /// the engine unpacks it (every entry checked, see `archive.rs`) and `root` is the
    /// folder inside it that instance `dir`s are relative to (empty: the top).
    Archive {
        path: PathBuf,
        sha256: String,
        root: String,
    },
}

/// The provided symmetric library and the functions to profile.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Primitives {
    /// Sources compiled into every instance, relative to the source root.
    pub sources: Vec<String>,
    /// Include folders, relative to the source root.
    pub includes: Vec<String>,
    /// Headers holding the prototypes of the profiled functions, relative to the source root.
    pub headers: Vec<String>,
    /// Functions to profile, in declaration order.
    pub functions: Vec<PrimitiveFn>,
    /// The random-byte symbol the harness supplies (`drng "PQCLEAN_randombytes"`).
    pub drng: Option<String>,
}

/// One profiled primitive function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrimitiveFn {
    /// Linker symbol.
    pub symbol: String,
    /// Family it is reported under: `keccak`, `sha2`, `aes`, `sm3`, ... (`hash family="aes" ...`).
    pub family: String,
}

/// KAT settings of a submission.
#[derive(Debug, Clone, Serialize)]
pub struct KatSettings {
    pub rng: KatRng,
    /// sha256sum-format file of expected hashes, absolute (`manifest="kat.sha256"`).
    pub manifest: PathBuf,
    /// Counts in `all` mode (`all-count=10` for Classic McEliece; default 100).
    pub all_count: u32,
    /// Whether the expected answers are the package's own KAT files (`kat submitted=`):
    /// each instance's `kat_submitted` names its file, and `manifest` then pins the SHA-256
    /// of each file (`<hash>  <instance>`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub submitted: bool,
    /// Folder of reference `.rsp` files (`reference="kat"`), absolute; a file there named
    /// `<instance>.rsp` (single) or `<instance>.all.rsp` (all) is diffed on mismatch.
    pub reference_dir: Option<PathBuf>,
}

/// One parameter set x implementation: the unit that is built and measured.
#[derive(Debug, Clone, Serialize)]
pub struct Instance {
    /// Expanded `instance "ML-KEM-{level}-{impl}"`; unique within its submission.
    pub id: String,
    /// Folder of the instance's sources, relative to the source root.
    pub dir: String,
    /// Symbol prefix (`PQCLEAN_MLKEM768_CLEAN_`): `<ns>crypto_kem_keypair`, and in api.h
    /// `<ns>CRYPTO_PUBLICKEYBYTES`.
    pub namespace: String,
    /// Extra compiler flags for this instance (from `when` blocks).
    pub cflags: Vec<String>,
    /// Extra sources relative to the source root (from `when` blocks).
    pub extra_sources: Vec<String>,
    /// CPU flags (/proc/cpuinfo names) without which the instance is skipped.
    pub requires_cpu: Vec<String>,
    /// Sources inside `dir` that are not compiled (glob patterns relative to `dir`).
    pub exclude: Vec<String>,
    /// System libraries the object links (`link "crypto"`): plain names, as `-l<name>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<String>,
    /// The submitted KAT file this instance's KAT is compared with, relative to the source
    /// root: `kat submitted=` (or a `when` block's `kat-submitted`) with the matrix
    /// variables expanded; `{pk}`, `{sk}`, `{ct}` and `{ss}` stay, for api.h's sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kat_submitted: Option<String>,
    /// The matrix values that produced this instance.
    pub vars: BTreeMap<String, String>,
    /// Where the manifest declares it (for messages; not part of any cache key).
    #[serde(skip)]
    pub origin: Origin,
    /// NIST security category (1-5) from the manifest's `nist-category`, if given.
    pub nist_category: Option<u8>,
}

/// The matrix variable holding an instance's flag profile when the build step names several
/// (`flags="guide harness-default"`); absent with one profile.
pub const PROFILE_VAR: &str = "flags";

/// The matrix variable holding an instance's compiler command when the system names several
/// (`compilers "gcc" "clang-16"`); absent with one compiler.
pub const COMPILER_VAR: &str = "cc";

/// How a compiler command is named in instance ids and reports: its file name
/// (`/usr/bin/clang-16` -> `clang-16`).
pub fn compiler_label(command: &str) -> &str {
    command.rsplit('/').next().unwrap_or(command)
}

/// How the reason of a measurement left to another cell (`cells="best"`) begins.
pub const NOT_BEST_CELL: &str = "not the best cell";

/// The id the manifest declares from an instance id and its matrix variables: without the
/// `@<compiler>` and `@<profile>` of its cell (see `dsl/profiles.rs`).
pub fn manifest_id_of<'a>(id: &'a str, vars: &BTreeMap<String, String>) -> &'a str {
    let mut base = id;
    if let Some(p) = vars.get(PROFILE_VAR) {
        base = base
            .strip_suffix(p.as_str())
            .and_then(|s| s.strip_suffix('@'))
            .unwrap_or(base);
    }
    if let Some(c) = vars.get(COMPILER_VAR) {
        base = base
            .strip_suffix(compiler_label(c))
            .and_then(|s| s.strip_suffix('@'))
            .unwrap_or(base);
    }
    base
}

impl Instance {
    /// The flag profile this instance is built with when the pipeline builds several
    /// (its id then ends in `@<profile>`); `None` with one profile.
    pub fn profile(&self) -> Option<&str> {
        self.vars.get(PROFILE_VAR).map(String::as_str)
    }

    /// The compiler command this instance is built with when the system names several (its
    /// id then holds `@<compiler>`); `None` with one compiler.
    pub fn compiler(&self) -> Option<&str> {
        self.vars.get(COMPILER_VAR).map(String::as_str)
    }

    /// The id the manifest declares (without `@<compiler>` and `@<profile>`): the key of
    /// `kat.sha256`, `sizes.csv` and reference `.rsp` files, and the implementation whose
    /// cells the instance is one of.
    pub fn manifest_id(&self) -> &str {
        manifest_id_of(&self.id, &self.vars)
    }
}

/// Where an instance is declared: the manifest and the spans of its `instance` line's id,
/// `dir=` and `namespace=` values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// The manifest as shown in messages (relative to the working directory when possible).
    pub manifest: String,
    /// The id template of the `instance` node.
    pub instance: Pos,
    /// The `dir=` value.
    pub dir: Pos,
    /// The `namespace=` value.
    pub namespace: Pos,
    /// Each library of the instance's `libraries` and the `link` value that names it.
    pub links: Vec<(String, Pos)>,
}

impl Origin {
    /// `manifest:line:col` of one of its positions.
    pub fn at(&self, pos: &Pos) -> String {
        format!("{}:{}:{}", self.manifest, pos.line, pos.col)
    }
}

/// A span in a file: byte offset and length, and the 1-based line and column it starts at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    pub offset: usize,
    pub len: usize,
    pub line: usize,
    pub col: usize,
}
