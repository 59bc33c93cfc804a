//! ngcc-pipe's evidence schema: the only interface between measuring and reporting.
//!
//! Every step writes one [`StepRecord`] (JSON, atomically: temp file + rename). A record
//! says what ran (command lines), on what (environment, inputs and their hashes), what came
//! out (the kind-specific [`StepData`]) and where the logs and artefacts are. Reports are
//! rendered from records alone, so they can be re-rendered without measuring again, from
//! records written months before by an older engine.
//!
//! This crate holds the types only, plain data with serde derives and plain accessors: what
//! the analyses compute (a `ct` finding, a latency scan, a timing estimate, kem-runner's
//! [`output`]) is defined here and filled in by the engine's `ct/`, `measure/` and `count/`,
//! which keep the logic. It depends on serde alone, so nothing that measures or renders can
//! leak into the contract (ngcc-pipe's `tests/layers.rs` checks both).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod ct;
mod kinds;
pub mod output;
pub mod rounds;

pub use kinds::{CatalogSizes, KatMode, Op, Role, StepKind};
pub use output::{
    ApiSizes, CountOutput, KatOutput, ProfileOutput, SymbolProfile, TimeOutput, Trial,
};

/// Bumped whenever a record field changes meaning.
pub const RECORD_SCHEMA: u32 = 1;

/// Outcome of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Ran and succeeded.
    Ok,
    /// Ran and failed (compile error, crash, KAT mismatch, ...): `reason` says why.
    Failed,
    /// Killed after the step's timeout.
    TimedOut,
    /// Not run because a dependency failed or was skipped: `reason` names it.
    Skipped,
    /// Not applicable on this machine (e.g. avx2 on a CPU without AVX2): `reason` says why.
    Unsupported,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::TimedOut => "timed-out",
            Status::Skipped => "skipped",
            Status::Unsupported => "unsupported",
        }
    }

    /// Whether this outcome makes the campaign's exit code non-zero.
    pub fn is_failure(self) -> bool {
        matches!(self, Status::Failed | Status::TimedOut)
    }
}

/// One step's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepRecord {
    pub schema: u32,
    /// Step id: `<submission>/<instance>/<kind>[:<op>]`, or `<submission>/<kind>`.
    pub id: String,
    pub kind: StepKind,
    pub submission: String,
    pub instance: Option<String>,
    pub op: Option<Op>,
    pub status: Status,
    pub reason: Option<String>,
    /// SHA-256 over `inputs`; a record with the same key is up to date.
    pub cache_key: String,
    /// Named input fingerprints that make up the cache key (for `explain`).
    pub inputs: BTreeMap<String, String>,
    /// Every command line the step ran, in order.
    pub commands: Vec<Vec<String>>,
    /// UTC, RFC 3339 (`2026-09-25T10:02:21Z`).
    pub started: String,
    pub finished: String,
    pub duration_s: f64,
    /// Why the step ran ("no record", "inputs changed: flags", "forced", ...).
    #[serde(default)]
    pub ran_because: Option<String>,
    /// Environment fingerprint of the system when the step ran.
    pub env_fingerprint: String,
    /// Logs kept, relative to the system's output folder.
    pub logs: Vec<PathBuf>,
    /// Artefacts produced (objects, .rsp files), relative to the system's output folder.
    pub artefacts: Vec<PathBuf>,
    /// The containment its processes ran in (steps that run submission code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
    /// The Slurm job the step ran as (`executor "slurm"`; absent for local runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmJob>,
    pub data: Option<StepData>,
}

/// A Slurm job that ran a step's submission code (`srun` steps inside it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmJob {
    pub job_id: u64,
    /// The node it ran on.
    pub node: String,
    pub partition: Option<String>,
    /// Whether it had its node to itself (`--exclusive`).
    pub exclusive: bool,
}

/// How processes that run submission-controlled code are contained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    /// `bubblewrap 0.8.0`, or `none`.
    pub tool: String,
    /// Protections in force.
    pub protections: Vec<String>,
    /// Protections not in force, with why; empty when the sandbox is complete.
    pub missing: Vec<String>,
}

/// Kind-specific results.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum StepData {
    Source(SourceData),
    Build(BuildData),
    Kat(KatData),
    Sizes(SizesData),
    Time(Box<TimeData>),
    Profile(ProfileData),
    Count(Box<CountData>),
    Survey(SurveyData),
    Report(ReportData),
    Ct(ct::CtData),
}

/// Where a submission's code was found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceData {
    /// Absolute source root (the crate's `root` folder or the manifest's path).
    pub root: PathBuf,
    /// `path` or `crate NAME VERSION (checksum verified by cargo)`.
    pub origin: String,
    /// Checksum from Cargo.lock for crate sources.
    pub checksum: Option<String>,
}

/// A compiled shared object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildData {
    /// Plain object, relative to the output folder.
    pub object: PathBuf,
    pub object_sha256: String,
    /// Variant linked with `--wrap` for every declared primitive, when a profile step exists.
    pub profile_object: Option<PathBuf>,
    /// Variant valgrind can run (`count`, `ct`): `valgrind_flags`, same sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valgrind_object: Option<PathBuf>,
    /// The valgrind object's flags: `flags`, `-g` or `-gdwarf-4`, and `-mno-<ext>` for each extension
    /// valgrind cannot run that `flags` would enable (`-mno-avx512f`, `-mno-avxvnni`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub valgrind_flags: Vec<String>,
    /// The compiler command (`gcc`, `clang-16`).
    pub cc: String,
    /// First line of its `--version`.
    pub cc_version: String,
    /// The file the command ran, links resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc_path: Option<PathBuf>,
    /// Its `-dumpmachine` target (`x86_64-linux-gnu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc_target: Option<String>,
    /// Why the valgrind object has the debug-information flag it has (`-gdwarf-4: valgrind
    /// 3.19.0 reads DWARF 4 only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valgrind_debug: Option<String>,
    pub flags_profile: String,
    /// The profile's flags and the instance's `cflags`, as given.
    pub flags: Vec<String>,
    /// Added to every compile of the object after `flags` (`-fPIC`, local binding).
    #[serde(default)]
    pub codegen_flags: Vec<String>,
    /// The link command's flags (before the objects), paths relative to the output folder.
    #[serde(default)]
    pub link_flags: Vec<String>,
    /// (source, object) for every compiled instance source, objects as before linking.
    #[serde(default)]
    pub objects: Vec<(PathBuf, PathBuf)>,
    /// The provided primitives' objects (shared between instances).
    #[serde(default)]
    pub primitive_objects: Vec<PathBuf>,
    /// Sum of PT_LOAD segment memory sizes of the plain object, linked without the anchor's
    /// page padding for this measurement.
    pub static_bytes: Option<u64>,
    pub api: ApiSizes,
    /// api.h of the instance, absolute.
    pub api_h: PathBuf,
    pub namespace: String,
    /// `ngcc_anchor.o`, linked before the KEM's objects in every object of this build (see
    /// `run::steps::link`), relative to the output folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_object: Option<PathBuf>,
    /// The same objects linked in other orders (`layouts=` on the time step), timed in
    /// every batch together with the plain object, which is the order `listed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layouts: Vec<LayoutObject>,
    /// System libraries linked (`link "crypto"`), as resolved for this build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<LinkedLibrary>,
    /// Files of the instance's folder left out because they define a function the harness
    /// provides (`api "nist"`: `main`, `randombytes`, `randombytes_init`), with those
    /// functions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<(PathBuf, Vec<String>)>,
    /// The sizes were evaluated by the compiler (api.h defines them through other macros
    /// or headers), and `api_h` is the header the engine wrote with their values.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub api_evaluated: bool,
    /// Set when the plain object asks for an executable stack (its `PT_GNU_STACK` segment
    /// is executable; the linker warns of it in the build log): the compiled sources whose
    /// objects carry no `.note.GNU-stack` section (assembly files without the note, as a
    /// rule), relative to the source root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable_stack: Option<Vec<PathBuf>>,
}

/// A system library an object links, as found on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedLibrary {
    /// `crypto`.
    pub name: String,
    /// The file the compiler links (`/usr/lib/x86_64-linux-gnu/libcrypto.so`).
    pub file: PathBuf,
    /// That file with links resolved (`.../libcrypto.so.3`).
    pub real: PathBuf,
    /// `libcrypto 3.0.17` (pkg-config), or the resolved file's name.
    pub version: String,
    /// SHA-256 of the resolved file.
    pub sha256: String,
}

impl BuildData {
    /// The other layouts' objects under the output folder `out`.
    pub fn layout_objects(&self, out: &Path) -> Vec<PathBuf> {
        self.layouts.iter().map(|l| out.join(&l.object)).collect()
    }
}

/// One more link order of a build's objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutObject {
    /// `reversed`, `shuffle-1`, ... (`run::steps::link::name`).
    pub name: String,
    /// Relative to the output folder.
    pub object: PathBuf,
    pub object_sha256: String,
}

/// KAT outcome of one mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum KatStatus {
    Pass,
    Mismatch,
    Nokat,
    Fail,
}

impl KatStatus {
    /// `PASS`, `MISMATCH`, `NOKAT` or `FAIL`, as reports and `results.json` write it.
    pub fn name(self) -> &'static str {
        match self {
            KatStatus::Pass => "PASS",
            KatStatus::Mismatch => "MISMATCH",
            KatStatus::Nokat => "NOKAT",
            KatStatus::Fail => "FAIL",
        }
    }
}

impl KatData {
    /// Each mode's verdict for a progress line: `single PASS, all PASS`.
    pub fn verdicts(&self) -> String {
        self.modes
            .iter()
            .map(|m| format!("{} {}", m.mode.name(), m.status.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Where a generated `.rsp` first differs from a reference one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RspDiff {
    pub count: u32,
    pub field: String,
    /// Byte offset inside the field's value (0-based, in bytes of the decoded value).
    pub offset: usize,
}

/// One KAT mode's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KatModeResult {
    pub mode: KatMode,
    pub status: KatStatus,
    pub counts: u32,
    pub expected_sha256: Option<String>,
    pub actual_sha256: Option<String>,
    /// `.rsp` relative to the output folder.
    pub rsp: Option<PathBuf>,
    pub reason: Option<String>,
    pub diff: Option<RspDiff>,
    /// The submitted KAT file this mode was compared with (`kat submitted=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted: Option<SubmittedKat>,
    /// The mode's ciphertexts decapsulated in a fresh process (absent in older records and
    /// where generating the counts failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_dec: Option<FreshDec>,
}

/// A KAT mode's ciphertexts decapsulated by `kem-runner kat-dec`, a process that never ran
/// keygen or enc, from each count's sk and ct alone, and compared with the KAT's `ss`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreshDec {
    /// Counts decapsulated.
    pub counts: u32,
    /// `None` when every shared secret was the KAT's; else the first that was not, or why
    /// the process stopped.
    pub failure: Option<String>,
}

/// A package's own KAT file, as a KAT mode compared with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmittedKat {
    /// Relative to the source root (`KAT/crypto_kem/ml-kem-512/PQCkemKAT_1632.rsp`).
    pub file: String,
    /// SHA-256 of the whole file.
    pub sha256: String,
    /// Counts the file holds.
    pub counts: u32,
    /// Counts compared (the first ones): the mode's.
    pub compared: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KatData {
    pub modes: Vec<KatModeResult>,
    /// SHA-256 of the KAT log (`kat/<sub>/<instance>.log`).
    pub log_sha256: String,
    /// Single-count KAT of the profile object, compared with the plain one.
    pub profile_object_kat: Option<ProfileKatCheck>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileKatCheck {
    pub sha256: String,
    pub equal: bool,
}

/// Sizes shown in section 6 and the audit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizesData {
    pub api: ApiSizes,
    pub catalog: CatalogSizes,
    /// Lengths of pk/sk/ct/ss in the generated `.rsp` (count 0), when a KAT ran.
    pub kat: Option<CatalogSizes>,
    /// What the report shows: catalog pk and ct when present, api sk and ss.
    pub shown: CatalogSizes,
    /// One line per disagreement between catalog, api.h and the KAT.
    pub audit: Vec<String>,
}

/// Summary statistics of one timing record (the engine's `measure::stats::summarize`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeSummary {
    pub trials: u32,
    pub iters: u64,
    /// trials x iters.
    pub n: u64,
    pub mean_cycles: f64,
    pub mean_ns: f64,
    pub ops_per_s: f64,
    /// Per-op time and cycles of the median trial.
    pub median_trial_ns: f64,
    pub median_trial_cycles: f64,
    /// Per-op cycles across trials.
    pub min_cycles: f64,
    pub q1_cycles: f64,
    pub q3_cycles: f64,
    pub max_cycles: f64,
    /// Coefficient of variation of per-op cycles across trials (fraction, not %).
    pub cv: f64,
    /// Single-call samples: median and quartiles (ticks).
    pub sample_median: Option<f64>,
    pub sample_q1: Option<f64>,
    pub sample_q3: Option<f64>,
    /// Trial indices whose per-op cycles are outliers by modified Z-score > 3.5.
    pub trial_outliers: Vec<usize>,
    /// Number of single-call samples that are outliers by the same rule.
    pub sample_outliers: usize,
    /// cv > 2%.
    pub unstable: bool,
    /// Interleaved rounds (absent for a block of trials): median per-op cycles of the
    /// rounds used, its 95% bootstrap interval, the rounds and how many were interfered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_low_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_high_cycles: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfered_rounds: Option<u32>,
    /// Trial indices that lasted less than half or more than twice the target trial length
    /// (calibration fooled, or the machine interfered).
    #[serde(default)]
    pub off_target_trials: Vec<usize>,
    /// Measured counter rate: total ticks over total monotonic ns of the trials, in GHz
    /// (for the TSC, the rate of reference cycles).
    #[serde(default)]
    pub counter_ghz: Option<f64>,
    /// When the single-call samples fall into three or more separate groups (the time depends
    /// on the inputs: a retrying key generation, say), the median of each group in counter
    /// ticks, smallest first; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_groups: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimeData {
    pub output: TimeOutput,
    pub summary: TimeSummary,
    pub static_bytes: Option<u64>,
    /// Cache key of the build record whose object was timed.
    pub object_cache_key: String,
    pub object_sha256: String,
    pub environment: Environment,
    /// The timing session this was measured in (absent for a block of trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<rounds::Rounds>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileData {
    pub output: ProfileOutput,
    /// Share of the operation's cycles in hash/XOF/cipher functions, 0..=1.
    pub hash_share: f64,
    /// Share in the DRNG, 0..=1.
    pub drng_share: f64,
    /// Share per family (`keccak`, `aes`, `drng`, ...).
    #[serde(default)]
    pub family_shares: Vec<(String, f64)>,
    /// Mean calls per operation for each symbol called at least once.
    pub calls_per_op: Vec<(String, f64)>,
    pub environment: Environment,
    /// Every repeat of the measurement (the figures above are the median-share repeat's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<ProfileRepeat>,
    /// The wrapped total per operation (wrapper cost taken out) over the timed cycles of the
    /// same operation, when a time record exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapped_over_timed: Option<f64>,
}

/// `count`: instructions of one operation counted by callgrind on the valgrind object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CountData {
    /// The runner's record: operation, calls, KAT generator and its seed.
    pub output: CountOutput,
    /// `valgrind --version`.
    pub valgrind: String,
    /// The command's callgrind options (before the runner's command line).
    pub tool_options: Vec<String>,
    /// The object counted (the build's valgrind object), relative to the output folder.
    pub object: PathBuf,
    /// Its flags: the build's, `-g`, and the exclusions.
    pub flags: Vec<String>,
    /// Flags added to turn off extensions valgrind cannot run (`-mno-avx512f`, …): when
    /// any, the counted code differs from the timed code.
    pub excluded: Vec<String>,
    /// Instructions of each call, in call order.
    pub per_call: Vec<u64>,
    /// Mean, min and max of `per_call`.
    pub instructions_mean: f64,
    pub instructions_min: u64,
    pub instructions_max: u64,
    /// Inclusive instruction share of every declared hash/XOF/cipher family together, 0..=1
    /// (a primitive called inside another counts once).
    pub hash_share: f64,
    /// Inclusive instruction share of the DRNG (`randombytes`).
    pub drng_share: f64,
    /// Inclusive share per family (`keccak`, `sha2`, `aes`, `drng`, ...).
    pub family_shares: Vec<(String, f64)>,
    /// Calls per operation of each declared symbol called at least once.
    pub calls_per_op: Vec<(String, f64)>,
    /// Functions whose calls into a family could not be told nested or not (their calls
    /// are counted: the shares are then upper bounds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nesting_ambiguous: Vec<String>,
    /// The callgrind profiles, one per call, relative to the output folder.
    pub profiles: Vec<PathBuf>,
}

/// One repeat of a profile measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRepeat {
    pub hash_share: f64,
    pub drng_share: f64,
    /// Cycles per operation with the wrappers' cost taken out.
    pub cycles_per_op: Option<f64>,
}

/// Survey verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    ProvidedOnly,
    Bypass,
    Mixed,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::ProvidedOnly => "provided-only",
            Verdict::Bypass => "bypass",
            Verdict::Mixed => "mixed",
        }
    }
}

/// A source line that looks like symmetric-crypto code.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceHit {
    /// Relative to the source root.
    pub file: String,
    pub line: u32,
    /// Family: keccak, sha2, aes, sm3, sm4, chacha, openssl.
    pub family: String,
    pub text: String,
    /// Whether the file is compiled into the built object and the hit's function is reachable.
    pub reachable: bool,
    pub note: Option<String>,
}

/// A symbol in the built object that implements symmetric crypto outside the provided library.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OwnSymbol {
    pub name: String,
    pub family: String,
    /// Whether any relocation or other symbol in the object refers to it.
    pub referenced: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SurveyData {
    pub verdict: Verdict,
    /// One line: "own inline Keccak (KeccakF1600_StatePermute) reachable; provided SHAKE unused".
    pub summary: String,
    pub source_hits: Vec<SourceHit>,
    pub own_symbols: Vec<OwnSymbol>,
    /// Provided primitive symbols the object references.
    pub provided_used: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportData {
    /// Files written, relative to the output folder.
    pub files: Vec<PathBuf>,
}

/// The machine as captured at campaign start (section 2). `None` means "unknown".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub cpu_model: Option<String>,
    pub bench_cpu: usize,
    pub logical_cpus: Option<usize>,
    pub max_mhz: Option<f64>,
    pub governor: Option<String>,
    /// `on` / `off`.
    pub turbo: Option<String>,
    /// `on` / `off` / `notsupported` ...
    pub smt: Option<String>,
    /// `/sys/devices/system/cpu/isolated` (empty string: none isolated).
    pub isolated_cpus: Option<String>,
    pub mem_total_mib: Option<u64>,
    pub os: Option<String>,
    pub kernel: Option<String>,
    pub cc_version: Option<String>,
    pub build_tool: Option<String>,
    /// 1-minute load average at capture time.
    pub loadavg: Option<f64>,
    /// Conditions that spoil timing, each with its fix.
    pub warnings: Vec<EnvWarning>,
    /// The sandbox submission code ran in (absent in records from before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Box<SandboxInfo>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvWarning {
    pub what: String,
    pub fix: String,
}

/// `campaign.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CampaignRecord {
    pub schema: u32,
    pub system: String,
    pub arch: String,
    pub pipeline: PathBuf,
    pub command: Vec<String>,
    /// Earliest start among the step records (the invocation's start while it runs).
    pub started: String,
    /// Latest end among the step records; `None` while the run is in progress.
    pub finished: Option<String>,
    pub environment: Environment,
    pub env_fingerprint: String,
    pub steps: Vec<CampaignStep>,
    /// The tool that ran the campaign (`ngcc_pipe::tool_version`); absent in older records.
    #[serde(default)]
    pub tool: Option<String>,
    /// The system's `role` (absent: `measure`): only a `measure` campaign is shown beside
    /// another one.
    #[serde(default, skip_serializing_if = "Role::is_measure")]
    pub role: Role,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CampaignStep {
    pub id: String,
    pub status: Status,
    pub reason: Option<String>,
    /// Record path relative to the output folder.
    pub record: PathBuf,
    /// Whether this run executed it (false: up to date from an earlier run). A run that
    /// executes nothing and finds every step as recorded keeps the rest of `campaign.json`
    /// (command, environment, times) as the run before it wrote it.
    pub ran: bool,
}

/// Where a step's record lives, relative to the system's output folder.
pub fn record_path(
    kind: StepKind,
    submission: &str,
    instance: Option<&str>,
    op: Option<Op>,
) -> PathBuf {
    let dir = kind.record_dir();
    let file = match (instance, op) {
        (Some(i), Some(op)) => format!("{i}__{op}.json"),
        (Some(i), None) => format!("{i}__{kind}.json"),
        (None, _) => format!("_{kind}.json"),
    };
    PathBuf::from(dir).join(submission).join(file)
}
