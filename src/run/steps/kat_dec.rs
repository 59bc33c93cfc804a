//! The KAT's decapsulation in a fresh process: a mode's ciphertexts, decapsulated by
//! `kem-runner kat-dec` from each count's sk and ct alone, must give the KAT's `ss`.
//!
//! The KAT job checks dec(enc) in the process that ran enc, where a KEM can keep what it
//! needs in a static table and hand out a short ciphertext that only indexes it. Here the
//! engine writes the pairs (`sk || ct`, count after count) into the job's fresh scratch
//! folder, which is all the jailed runner sees of the KAT: the `.rsp` with its shared
//! secrets stays outside, and the private `/tmp` of the KAT's process is gone. The shared
//! secrets come back in a file the engine reads and compares itself; the runner's record
//! only says where a call failed.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use super::runner_job::{crashed_in, parse_runner};
use super::{RunnerJob, Step, StepError};
use crate::record::{BuildData, FreshDec, KatModeResult, KatStatus};
use crate::rsp::RspEntry;
use crate::run::exec::{Exit, Log};
use kem_native::output::KatDecOutput;

/// A file of at most this many bytes of shared secrets is read back (32 bytes per count
/// for most KEMs; the cap only guards against a runner that writes a flood).
const SS_CAP: u64 = 64 << 20;

/// The shared secrets `kem-runner kat-dec` wrote, compared with the KAT's: `None` when all
/// agree, else the first that differs (or is missing).
fn compare(entries: &[RspEntry], ss: &[u8], width: usize, record: &KatDecOutput) -> Option<String> {
    for (count, e) in entries.iter().enumerate() {
        let want = e.field("ss").unwrap_or_default();
        match ss.get(count * width..(count + 1) * width) {
            Some(got) if got == want => {}
            Some(got) => {
                return Some(format!(
                    "count {}: ss {} differs from the KAT's {}",
                    e.count,
                    hex::encode_upper(got),
                    hex::encode_upper(want)
                ))
            }
            None => {
                let mut why = format!("count {}: no shared secret", e.count);
                match &record.failure {
                    Some(f) => {
                        let _ = write!(why, " ({f})");
                    }
                    None => {
                        let _ = write!(
                            why,
                            " (kem-runner wrote {} of {} and reported success; record not trusted)",
                            ss.len() / width.max(1),
                            entries.len()
                        );
                    }
                }
                return Some(why);
            }
        }
    }
    // Every shared secret agreed, yet the runner says a call failed (after the last one).
    record.failure.clone()
}

/// Decapsulate the ciphertexts of `entries` (a mode's generated counts, sizes checked) in a
/// fresh `kem-runner kat-dec` process and compare with their `ss`.
fn fresh_dec(
    step: &mut Step,
    object: &Path,
    build: &BuildData,
    entries: &[RspEntry],
    log: &mut Log,
) -> Result<FreshDec, StepError> {
    let job = RunnerJob::new(step, "kat-dec", object, build)?;
    let pairs = job.scratch().join("pairs.bin");
    let ss = job.scratch().join("ss.bin");
    let bytes: Vec<u8> = entries
        .iter()
        .flat_map(|e| {
            let sk = e.field("sk").unwrap_or_default();
            let ct = e.field("ct").unwrap_or_default();
            sk.iter().chain(ct).copied().collect::<Vec<u8>>()
        })
        .collect();
    std::fs::write(&pairs, bytes).map_err(StepError::io(&pairs))?;
    let width = build.api.ss as usize;
    let job = job
        .opt("rng", step.submission().kat.rng.name())
        .opt("in", pairs.display())
        .opt("out", ss.display());
    let failure = job.run(step, log, &|_| {}, |step, out, _| match &out.exit {
        Exit::Code(0) | Exit::Code(1) => Ok(match parse_runner::<KatDecOutput>(&out) {
            Ok(record) => match crate::safe_fs::read(&ss, SS_CAP) {
                Ok(got) => compare(entries, &got, width, &record),
                Err(e) => Some(format!("its shared secrets cannot be read ({e})")),
            },
            Err(e) => Some(e.to_string()),
        }),
        Exit::TimedOut => Err(StepError::TimedOut(step.timeout_text())),
        Exit::Signal(_) => Ok(Some(format!(
            "crashed{}: {} ({})",
            crashed_in(&out.stderr),
            out.exit.describe(),
            step.limits_note()
        ))),
        other => Ok(Some(format!(
            "kem-runner failed ({}): {}",
            other.describe(),
            crate::run::exec::tail(&out.stderr, 3)
        ))),
    })?;
    Ok(FreshDec {
        counts: entries.len() as u32,
        failure,
    })
}

/// Decapsulate the mode's ciphertexts (those of its kept `.rsp`) in a fresh process; a
/// shared secret other than the KAT's fails the mode, whatever the comparison said.
pub fn check(
    step: &mut Step,
    object: &Path,
    build: &BuildData,
    r: &mut KatModeResult,
    rsp: &Path,
    log: &mut Log,
) -> Result<(), StepError> {
    let entries = crate::safe_fs::read_text(rsp, crate::safe_fs::OUTPUT_CAP)
        .map_err(|e| e.to_string())
        .and_then(|t| crate::rsp::parse_rsp(&t));
    let fresh = match entries {
        Ok(entries) => fresh_dec(step, object, build, &entries, log)?,
        Err(e) => FreshDec {
            counts: 0,
            failure: Some(format!("the kept .rsp file cannot be read back: {e}")),
        },
    };
    let _ = writeln!(
        log,
        "# {} KAT decapsulated in a fresh process ({} counts): {}",
        r.mode.name(),
        fresh.counts,
        fresh
            .failure
            .as_deref()
            .unwrap_or("every shared secret agrees")
    );
    if let Some(why) = &fresh.failure {
        r.status = KatStatus::Fail;
        r.reason = Some(reason(why));
    }
    r.fresh_dec = Some(fresh);
    Ok(())
}

/// The reason of a mode whose fresh-process decapsulation failed.
fn reason(failure: &str) -> String {
    format!(
        "decapsulation in a fresh process, from sk and ct alone, does not give the KAT's shared \
         secret ({failure}): dec depends on state kept from enc in the KAT's process"
    )
}
