//! NIST KAT (`.rsp`) generation, byte-identical to PQClean's `test/crypto_kem/nistkat.c`
//! (one count) and `hqckat.c` (HQC's SHAKE PRNG), and to liboqs `tests/kat_kem.c --all`.
//!
//! All three follow one scheme: an outer generator seeded with bytes 0..47 yields a 48-byte
//! seed per count; the KEM's generator is re-seeded with it before `keypair`; the outer
//! generator's state is kept across counts (liboqs saves and restores it). Each count prints
//! `count`, `seed`, `pk`, `sk`, `ct`, `ss` in upper-case hex (`00` for an empty field), and
//! a blank line separates counts (none after the last). dec(enc) must give the same shared
//! secret. The file is flushed after every count so a crash leaves partial evidence.

use crate::drbg::KatRngKind;
use crate::error::{KemError, RunnerError, SysError, UsageError};
use crate::kem::{self, Buffers, Kem};
use crate::output::KatOutput;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// `single` (one count) or `all` (liboqs `--all`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KatMode {
    /// PQClean nistkat.c / hqckat.c: count 0 only.
    Single,
    /// liboqs kat_kem.c `--all`: 100 counts (10 for Classic McEliece; the caller decides).
    All,
}

impl KatMode {
    /// Parse `single` or `all`.
    pub fn parse(s: &str) -> Result<KatMode, UsageError> {
        match s {
            "single" => Ok(KatMode::Single),
            "all" => Ok(KatMode::All),
            other => Err(UsageError::KatMode(other.to_string())),
        }
    }

    /// Name used on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            KatMode::Single => "single",
            KatMode::All => "all",
        }
    }

    /// Counts when none are given: 1 for `single`, 100 for `all`.
    pub fn default_counts(self) -> u32 {
        match self {
            KatMode::Single => 1,
            KatMode::All => 100,
        }
    }
}

/// Writes the `.rsp` text to a file and a SHA-256 at once.
struct RspWriter {
    file: BufWriter<File>,
    hash: Sha256,
    path: String,
}

impl RspWriter {
    fn line(&mut self, text: &str) -> Result<(), SysError> {
        self.hash.update(text.as_bytes());
        self.file
            .write_all(text.as_bytes())
            .map_err(|source| self.write_error(source))
    }

    fn write_error(&self, source: std::io::Error) -> SysError {
        SysError::Write {
            path: self.path.clone(),
            source,
        }
    }

    fn field(&mut self, label: &str, bytes: &[u8]) -> Result<(), SysError> {
        let hex = if bytes.is_empty() {
            "00".to_string()
        } else {
            hex::encode_upper(bytes)
        };
        self.line(&format!("{label} = {hex}\n"))
    }

    fn flush(&mut self) -> Result<(), SysError> {
        self.file.flush().map_err(|source| self.write_error(source))
    }
}

/// Why a KAT run stopped early: the KEM misbehaved (recorded) or the file failed (fatal).
enum Stop {
    Kem(KemError),
    Io(SysError),
}

/// Generate `counts` counts into `out`, calling the KEM on the current thread (run it on a
/// big-stack thread). `Err` only for I/O errors; KEM misbehaviour is `KatOutput::failure`,
/// with `counts` then the number of counts that completed.
/// Prefix of the stderr line written before every KEM call of a KAT
/// (`calling crypto_kem_enc in count 3`).
pub const CALLING: &str = "calling";

pub fn run_kat(
    kem: &Kem,
    rng: KatRngKind,
    mode: KatMode,
    counts: u32,
    out: &Path,
) -> Result<KatOutput, RunnerError> {
    let path = out.display().to_string();
    let file = File::create(out).map_err(|source| SysError::Create {
        path: path.clone(),
        source,
    })?;
    let mut w = RspWriter {
        file: BufWriter::new(file),
        hash: Sha256::new(),
        path: path.clone(),
    };
    let mut bufs = Buffers::new(&kem.sizes)?;
    let entropy: [u8; 48] = std::array::from_fn(|i| i as u8);
    let mut outer = rng.seeded(&entropy);
    let mut completed = 0u32;
    let mut failure = None;

    for count in 0..counts {
        match one_count(kem, &mut bufs, &mut outer, rng, &mut w, count, counts) {
            Ok(()) => completed += 1,
            Err(Stop::Kem(why)) => {
                failure = Some(why.at(format!("in count {count}")).to_string());
                break;
            }
            Err(Stop::Io(e)) => {
                kem::take_rng();
                return Err(e.into());
            }
        }
        w.flush()?;
    }
    w.flush()?;
    kem::take_rng();
    Ok(KatOutput {
        sizes: kem.sizes.clone(),
        mode: mode.name().into(),
        rng: rng.name().into(),
        counts: completed,
        rsp_path: path,
        rsp_sha256: hex::encode(w.hash.finalize()),
        failure,
    })
}

fn one_count(
    kem: &Kem,
    bufs: &mut Buffers,
    outer: &mut crate::drbg::Rng,
    rng: KatRngKind,
    w: &mut RspWriter,
    count: u32,
    counts: u32,
) -> Result<(), Stop> {
    let io = Stop::Io;
    w.line(&format!("count = {count}\n")).map_err(io)?;
    let mut seed = [0u8; 48];
    outer.fill(&mut seed).map_err(|e| Stop::Kem(e.into()))?;
    w.field("seed", &seed).map_err(io)?;
    kem::set_rng(rng.seeded(&seed));

    // Before each call: what is written so far reaches the file, and stderr says which
    // call is next, so a crash (a signal the parent observes) can be pinned on one call.
    let calling = |w: &mut RspWriter, f: &str| -> Result<(), Stop> {
        w.flush().map_err(Stop::Io)?;
        eprintln!("{CALLING} {f} in count {count}");
        Ok(())
    };
    calling(w, "crypto_kem_keypair")?;
    bufs.keypair(kem).map_err(Stop::Kem)?;
    w.field("pk", bufs.pk.data()).map_err(io)?;
    w.field("sk", bufs.sk.data()).map_err(io)?;
    calling(w, "crypto_kem_enc")?;
    bufs.enc(kem).map_err(Stop::Kem)?;
    w.field("ct", bufs.ct.data()).map_err(io)?;
    w.field("ss", bufs.ss_enc.data()).map_err(io)?;
    if count + 1 != counts {
        w.line("\n").map_err(io)?;
    }
    calling(w, "crypto_kem_dec")?;
    bufs.dec(kem).map_err(Stop::Kem)?;
    if bufs.ss_enc.data() != bufs.ss_dec.data() {
        return Err(Stop::Kem(KemError::SecretsDiffer {
            enc: hex::encode_upper(bufs.ss_enc.data()),
            dec: hex::encode_upper(bufs.ss_dec.data()),
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_default_counts() {
        assert_eq!(KatMode::parse("single").unwrap().default_counts(), 1);
        assert_eq!(KatMode::parse("all").unwrap().default_counts(), 100);
        assert!(KatMode::parse("one")
            .unwrap_err()
            .to_string()
            .contains("`one`"));
    }

    #[test]
    fn empty_field_prints_00_and_hash_tracks_text() {
        let dir = std::env::temp_dir().join(format!("kem-native-kat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.rsp");
        let mut w = RspWriter {
            file: BufWriter::new(File::create(&p).unwrap()),
            hash: Sha256::new(),
            path: p.display().to_string(),
        };
        w.line("count = 0\n").unwrap();
        w.field("ss", &[]).unwrap();
        w.field("ct", &[0xab, 0x01]).unwrap();
        w.flush().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "count = 0\nss = 00\nct = AB01\n");
        assert_eq!(
            hex::encode(w.hash.finalize()),
            hex::encode(Sha256::digest(text.as_bytes()))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
