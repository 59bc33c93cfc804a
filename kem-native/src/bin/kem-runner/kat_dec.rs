//! The `kat-dec` job: decapsulate a KAT's ciphertexts in a process that never ran keygen
//! or enc. The engine writes each count's secret key and ciphertext (`sk || ct` at api.h's
//! sizes, count after count) to `--in`; the job copies each pair into the guarded buffers,
//! calls `crypto_kem_dec` and appends the shared secret to `--out`, flushed after every
//! count so that a crash leaves the counts before it. The engine compares them with the
//! KAT's `ss`: nothing of enc reaches this process but sk and ct, so a dec that needs state
//! kept by enc in its own process (a static table behind a short ciphertext) fails. Like
//! `kat`, it seeds the KAT generator with bytes 0..47 (a dec that draws random bytes gets
//! the same ones every run) and names each call on stderr before making it.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::Path;

use kem_native::drbg::KatRngKind;
use kem_native::error::{RunnerError, SysError, UsageError};
use kem_native::kat::CALLING;
use kem_native::kem::{self, run_on_big_stack, Buffers, Kem};
use kem_native::output::KatDecOutput;

use super::args::Args;
use super::Outcome;

/// `kat-dec --rng nist|hqc --in PAIRS --out SS`.
pub(crate) fn job_kat_dec(args: &Args) -> Result<Outcome, RunnerError> {
    let rng = args.kat_rng()?;
    let input = args.get("in")?.to_string();
    let out = args.get("out")?.to_string();
    let kem = args.load()?;
    let pairs = std::fs::read(&input).map_err(|source| SysError::Read {
        path: input.clone(),
        source,
    })?;
    let pair = (kem.sizes.sk + kem.sizes.ct) as usize;
    if pair == 0 || !pairs.len().is_multiple_of(pair) {
        return Err(UsageError::Pairs {
            path: input,
            len: pairs.len() as u64,
            pair: pair as u64,
        }
        .into());
    }
    let result = run_on_big_stack(move || decapsulate(&kem, rng, &pairs, Path::new(&out)))??;
    Outcome::of("", &result, &result.failure)
}

/// Every pair of `pairs` decapsulated in order, the shared secrets written to `out`; stops
/// at the first call that fails (its reason is the record's `failure`).
fn decapsulate(
    kem: &Kem,
    rng: KatRngKind,
    pairs: &[u8],
    out: &Path,
) -> Result<KatDecOutput, RunnerError> {
    let path = out.display().to_string();
    let write_error = |source| SysError::Write {
        path: path.clone(),
        source,
    };
    let file = File::create(out).map_err(|source| SysError::Create {
        path: path.clone(),
        source,
    })?;
    let mut w = BufWriter::new(file);
    let mut bufs = Buffers::new(&kem.sizes)?;
    let entropy: [u8; 48] = std::array::from_fn(|i| i as u8);
    kem::set_rng(rng.seeded(&entropy));
    let sk = kem.sizes.sk as usize;
    let pair = sk + kem.sizes.ct as usize;
    let (mut counts, mut failure) = (0u32, None);
    for (count, p) in pairs.chunks_exact(pair).enumerate() {
        bufs.sk.data_mut().copy_from_slice(&p[..sk]);
        bufs.ct.data_mut().copy_from_slice(&p[sk..]);
        bufs.ss_dec.data_mut().fill(0);
        eprintln!("{CALLING} crypto_kem_dec in count {count}");
        if let Err(e) = bufs.dec(kem) {
            failure = Some(e.at(format!("in count {count}")).to_string());
            break;
        }
        w.write_all(bufs.ss_dec.data())
            .and_then(|()| w.flush())
            .map_err(write_error)?;
        counts += 1;
    }
    w.flush().map_err(write_error)?;
    kem::take_rng();
    Ok(KatDecOutput {
        sizes: kem.sizes.clone(),
        counts,
        ss_path: path,
        failure,
    })
}
