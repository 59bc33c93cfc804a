//! The JSON records `kem-runner` prints on stdout, one per job.
//!
//! These types are the contract between the runner and the engine: the engine
//! deserializes exactly these structs and embeds them in its step records.

use serde::{Deserialize, Serialize};

/// Sizes and name read from an instance's `api.h`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiSizes {
    /// `CRYPTO_ALGNAME`, when api.h defines it.
    pub algname: Option<String>,
    pub pk: u64,
    pub sk: u64,
    pub ct: u64,
    pub ss: u64,
}

/// `kem-runner kat`: one KAT file generated and checked for dec(enc) consistency.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KatOutput {
    pub sizes: ApiSizes,
    /// `single` or `all`.
    pub mode: String,
    /// `nist` or `hqc`.
    pub rng: String,
    /// Counts generated.
    pub counts: u32,
    /// Where the `.rsp` text was written.
    pub rsp_path: String,
    /// SHA-256 (lower-case hex) of the `.rsp` text.
    pub rsp_sha256: String,
    /// `None` when every count ran and dec(enc) agreed; otherwise why it failed
    /// ("crypto_kem_enc returned -1 in count 0", "shared secrets differ in count 3",
    /// "crypto_kem_enc wrote 16 bytes past the declared ciphertext size (CRYPTO_CIPHERTEXTBYTES = 32)").
    pub failure: Option<String>,
}

/// `kem-runner kat-dec`: a KAT's ciphertexts decapsulated in a fresh process from each
/// count's sk and ct alone; the shared secrets are in the file the engine named.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KatDecOutput {
    pub sizes: ApiSizes,
    /// Counts decapsulated (their shared secrets written, `CRYPTO_BYTES` each).
    pub counts: u32,
    /// Where the shared secrets were written.
    pub ss_path: String,
    /// `None` when every call returned 0 and no guard byte changed; otherwise why the job
    /// stopped ("crypto_kem_dec returned -1 in count 3").
    pub failure: Option<String>,
}

/// `kem-runner time`: one operation timed in its own process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimeOutput {
    pub op: String,
    pub sizes: ApiSizes,
    /// Core the process pinned itself to, if pinning succeeded.
    pub pinned_cpu: Option<usize>,
    /// Why pinning failed, if it did.
    pub pin_error: Option<String>,
    /// `rdtsc` (x86-64, lfence/rdtscp fenced), `cntvct_el0` (aarch64) or `monotonic`.
    pub counter: String,
    /// Random source behind the KEM's `randombytes` during the job: `ctr-drbg`
    /// (NIST AES-256 CTR_DRBG seeded from getrandom: no system call while timed) or `os`
    /// (getrandom on every call).
    #[serde(default)]
    pub rng: String,
    /// Core cycles from perf_event_open: `Some` per trial when available.
    pub core_cycles: CoreCycles,
    pub calibration: Calibration,
    pub warmup_iters: u64,
    /// The objects timed when there are several layouts of the same code (`serve
    /// --layout`): `--lib` first, then each `--layout`; every trial times all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layouts: Vec<String>,
    /// Every trial, in the order run.
    pub trials: Vec<Trial>,
    /// Single calls timed one by one (counter ticks per call), in the order run.
    pub samples: Vec<u64>,
    /// Loop overhead: an empty call through the same function-pointer path.
    pub overhead: Overhead,
    pub memory: Memory,
    /// `None` when every call returned 0 and no guard byte changed; otherwise why the
    /// measurement stopped ("crypto_kem_enc returned nonzero during trial 2 ...").
    /// Trials and samples up to that point are kept.
    #[serde(default)]
    pub failure: Option<String>,
}

/// Whether perf_event_open core cycles were recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum CoreCycles {
    /// Recorded in every `Trial::core_cycles`.
    Available,
    /// Not recorded, with the reason (e.g. "perf_event_open: EACCES (perf_event_paranoid=3)").
    Unavailable { reason: String },
}

/// How the iteration count per trial was chosen.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Calibration {
    /// Target length of one trial, ns.
    pub target_trial_ns: u64,
    /// Final batch size of the doubling search and the median duration of the batches of
    /// that size timed after it ([`batches_ns`](Self::batches_ns)), ns.
    pub batch_iters: u64,
    pub batch_ns: u64,
    /// Durations of the batches of `batch_iters` calls whose median chose `iters`, ns.
    #[serde(default)]
    pub batches_ns: Vec<u64>,
    /// Iterations per trial that were chosen (at least `min_iters`).
    pub iters: u64,
    pub min_iters: u64,
}

impl Calibration {
    /// Before calibration: the target and the floor, nothing chosen yet.
    pub fn unmeasured(target_trial_ns: u64, min_iters: u64) -> Calibration {
        Calibration {
            target_trial_ns,
            batch_iters: 0,
            batch_ns: 0,
            batches_ns: Vec::new(),
            iters: 0,
            min_iters,
        }
    }
}

/// One timed trial of `iters` back-to-back calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trial {
    pub iters: u64,
    /// Counter ticks for the whole trial.
    pub cycles: u64,
    /// Monotonic-clock nanoseconds for the whole trial.
    pub ns: u64,
    /// perf core cycles for the whole trial, when available.
    pub core_cycles: Option<u64>,
    /// With several layouts (`serve --layout`): counter ticks of each one's share of the
    /// trial (`iters / layouts` calls each), in the order of [`TimeOutput::layouts`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layout_cycles: Vec<u64>,
    /// With a yardstick inside the batches (`serve --gauge`): counter ticks of each of its
    /// blocks in this trial (before each block of the KEM and after the last), the same
    /// number of calls each (the `ready` line says how many).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gauge_cycles: Vec<u64>,
}

/// Cost of the measurement loop itself, per call (zero until measured).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Overhead {
    pub cycles_per_call: f64,
    pub ns_per_call: f64,
    /// Median counter ticks of one empty call timed on its own, the way `samples` are
    /// timed (the cost of the fenced counter reads plus the call): subtract it from
    /// `samples` for the operation alone.
    #[serde(default)]
    pub single_call_cycles: f64,
}

/// Memory figures of the operation's own process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Memory {
    /// VmRSS after loading the object and allocating buffers, before the first call, KiB.
    pub baseline_rss_kib: Option<u64>,
    /// VmHWM after the timing loop, KiB.
    pub peak_rss_kib: Option<u64>,
    /// Stack bytes touched by one call on a freshly painted thread stack.
    pub stack_bytes: Option<u64>,
    /// Size of the painted stack, bytes.
    pub stack_painted_bytes: u64,
}

/// `kem-runner profile`: one operation run on the wrapped (profile) object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileOutput {
    pub op: String,
    pub iters: u64,
    /// Counter ticks for all `iters` calls of the operation.
    pub total_cycles: u64,
    /// Calibrated cost one wrapper adds to a call (ticks), already subtracted below.
    pub wrapper_overhead_cycles: f64,
    /// One entry per wrapped symbol, in the object's table order.
    pub symbols: Vec<SymbolProfile>,
    /// `None` when every call returned 0 and no guard byte changed; otherwise why not.
    #[serde(default)]
    pub failure: Option<String>,
}

/// Counts of one wrapped symbol over all `iters` calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SymbolProfile {
    pub symbol: String,
    /// Family from the manifest, or `drng`.
    pub family: String,
    pub calls: u64,
    /// Ticks spent inside the symbol as the outermost wrapped call, overhead subtracted.
    pub cycles: f64,
}

/// `kem-runner count`: `iters` calls of one operation with the KAT DRBG seeded from a fixed
/// seed, made to be run under valgrind's callgrind (which counts the instructions; the runner
/// only makes the calls and checks them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CountOutput {
    pub op: String,
    pub iters: u64,
    /// `nist` (AES-256 CTR_DRBG) or `hqc` (SHAKE-256 PRNG), seeded once before the inputs
    /// are prepared.
    pub rng: String,
    /// The 48-byte seed, lower-case hex.
    pub seed: String,
    /// `None` when every call returned 0 and no guard byte changed; otherwise why not.
    #[serde(default)]
    pub failure: Option<String>,
}
