//! kem-runner's command line: the jobs, the options each takes, and their values.

use std::collections::HashMap;
use std::path::Path;

use kem_native::api::parse_api_h;
use kem_native::drbg::{CtrDrbg, KatRngKind, OsRng, Rng};
use kem_native::error::{LoadError, RunnerError, UsageError};
use kem_native::kem::Kem;
use kem_native::timing::Op;

pub(crate) const USAGE: &str =
    "usage: kem-runner kat|kat-dec|time|profile|serve|count|ct --lib X.so --api api.h --ns PREFIX [options] \
(kat: --rng nist|hqc --mode single|all [--counts N] --out F.rsp; \
kat-dec: --rng nist|hqc --in PAIRS --out SS; \
time: --op keygen|enc|dec [--cpu N] [--trials N] [--trial-ns NS] [--min-iters N] [--samples N] [--rng ctr-drbg|os]; \
profile: --op keygen|enc|dec [--cpu N] [--iters N] [--rng ctr-drbg|os]; \
serve: --op keygen|enc|dec [--cpu N] [--batch-ns NS] [--min-iters N] [--samples N] [--rng ctr-drbg|os] [--layout Y.so ...] [--gauge Y.so --gauge-api api.h] [--setup-seed HEX96] [--stack measure|skip] [--batch-iters N]; \
count: --op keygen|enc|dec --rng nist|hqc [--iters N] [--seed HEX96]; \
ct: --op keygen|enc|dec [--runs N]); or `kem-runner -` with the words as a JSON array on the first line of stdin";

/// The jobs and the options each takes besides [`OBJECT`]: the one table the parser reads.
const JOBS: &[(&str, &[&str])] = &[
    ("kat", &["rng", "mode", "counts", "out"]),
    ("kat-dec", &["rng", "in", "out"]),
    (
        "time",
        &[
            "op",
            "cpu",
            "trials",
            "trial-ns",
            "min-iters",
            "samples",
            "rng",
        ],
    ),
    ("profile", &["op", "cpu", "iters", "rng"]),
    (
        "serve",
        &[
            "op",
            "cpu",
            "batch-ns",
            "min-iters",
            "samples",
            "rng",
            "layout",
            "gauge",
            "gauge-api",
            "setup-seed",
            "stack",
            "batch-iters",
        ],
    ),
    ("count", &["op", "rng", "iters", "seed"]),
    ("ct", &["op", "runs"]),
];

/// Options of every job: the object to load.
const OBJECT: &[&str] = &["lib", "api", "ns"];

/// Parsed `--key value` pairs of one job.
pub(crate) struct Args {
    pub(crate) job: &'static str,
    pub(crate) values: HashMap<&'static str, String>,
    /// `--layout`, the one option that may repeat (`serve`).
    pub(crate) layouts: Vec<String>,
}

impl Args {
    pub(crate) fn parse(argv: &[String]) -> Result<Args, UsageError> {
        let word = argv.first().ok_or(UsageError::MissingJob)?;
        let &(job, options) = JOBS
            .iter()
            .find(|(name, _)| name == word)
            .ok_or_else(|| UsageError::UnknownJob(word.clone()))?;
        let mut values = HashMap::new();
        let mut layouts = Vec::new();
        let mut it = argv[1..].iter();
        while let Some(flag) = it.next() {
            let key = flag
                .strip_prefix("--")
                .ok_or_else(|| UsageError::Unexpected(flag.clone()))?;
            let key = *OBJECT
                .iter()
                .chain(options)
                .find(|k| **k == key)
                .ok_or_else(|| UsageError::UnknownOption {
                    key: key.to_string(),
                    job: job.to_string(),
                })?;
            let value = it
                .next()
                .ok_or_else(|| UsageError::NoValue(key.to_string()))?;
            if key == "layout" {
                layouts.push(value.clone());
            } else if values.insert(key, value.clone()).is_some() {
                return Err(UsageError::Twice(key.to_string()));
            }
        }
        Ok(Args {
            job,
            values,
            layouts,
        })
    }

    pub(crate) fn get(&self, key: &'static str) -> Result<&str, UsageError> {
        self.values
            .get(key)
            .map(String::as_str)
            .ok_or(UsageError::Missing { job: self.job, key })
    }

    pub(crate) fn opt_num<T: std::str::FromStr>(
        &self,
        key: &'static str,
    ) -> Result<Option<T>, UsageError> {
        self.values
            .get(key)
            .map(|v| {
                v.parse().map_err(|_| UsageError::NotANumber {
                    key,
                    value: v.clone(),
                })
            })
            .transpose()
    }

    pub(crate) fn num<T: std::str::FromStr>(
        &self,
        key: &'static str,
        default: T,
    ) -> Result<T, UsageError> {
        Ok(self.opt_num(key)?.unwrap_or(default))
    }

    /// A count that must be at least 1 (`--trials`, `--runs`, ...).
    pub(crate) fn count<T: std::str::FromStr + PartialEq + From<u8>>(
        &self,
        key: &'static str,
        default: T,
    ) -> Result<T, UsageError> {
        let n = self.num(key, default)?;
        if n == T::from(0) {
            return Err(UsageError::Zero(key));
        }
        Ok(n)
    }

    /// `--op`.
    pub(crate) fn op(&self) -> Result<Op, UsageError> {
        Op::parse(self.get("op")?)
    }

    /// `--rng` of the jobs that use a KAT generator (`nist`, `hqc`).
    pub(crate) fn kat_rng(&self) -> Result<KatRngKind, UsageError> {
        KatRngKind::parse(self.get("rng")?)
    }

    /// The random source for timing and profiling (`--rng`): by default the NIST CTR_DRBG
    /// seeded from the OS, so no system call happens inside a timed region; `os` calls
    /// getrandom on every `randombytes`.
    pub(crate) fn timing_rng(&self) -> Result<(Rng, &'static str), RunnerError> {
        match self.values.get("rng").map(String::as_str) {
            None | Some("ctr-drbg") => {
                let mut seed = [0u8; 48];
                OsRng.try_fill(&mut seed)?;
                Ok((Rng::Nist(Box::new(CtrDrbg::new(&seed, None))), "ctr-drbg"))
            }
            Some("os") => Ok((Rng::Os(OsRng), "os")),
            Some(other) => Err(UsageError::TimingRng(other.to_string()).into()),
        }
    }

    /// Load the object (`--lib`) with the sizes of its `--api` under namespace `--ns`.
    pub(crate) fn load(&self) -> Result<Kem, RunnerError> {
        let api_path = self.get("api")?;
        let text = std::fs::read_to_string(api_path).map_err(|source| LoadError::ReadApi {
            path: api_path.to_string(),
            source,
        })?;
        let ns = self.get("ns")?;
        let sizes = parse_api_h(&text, ns).map_err(|source| LoadError::Api {
            path: api_path.to_string(),
            source,
        })?;
        Ok(Kem::load(Path::new(self.get("lib")?), ns, sizes)?)
    }
}
