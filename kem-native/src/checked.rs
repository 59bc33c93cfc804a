//! Outputs checked while timed: the calls a timing session times prove what they computed.
//!
//! Why: the submitter writes the code that is timed, and it runs in this process. Code that
//! does less when timed (it reads the job, caches outputs for repeated inputs, or notices
//! calls coming back to back) used to publish figures 100× too fast. So every batch of a
//! session is made with inputs that differ call to call, and its outputs are folded, inside
//! the timed loop, into one 64-bit value ([`fold`]: a rotate-and-XOR of the outputs' 64-bit
//! words, which the compiler vectorizes: for ML-KEM-512's keygen, 2,464 output bytes, about
//! 330 instructions per call against some 100,000 for the KEM, see `docs/containment.md`);
//! the engine compares each batch's fold with one computed in another process:
//!
//! - **keygen and enc**: the batch's randomness comes from a NIST CTR_DRBG reseeded from a
//!   seed the engine sends with the batch (outside the timed region), so its outputs are
//!   fixed by that seed; a reference process (another `kem-runner serve` of the same
//!   object) replays chosen batches with the same seed, its calls spaced apart and each
//!   output checked by the other operations ([`Reference::replay`]), and must reach the
//!   same fold. Which batches are replayed is decided after the session.
//! - **dec**: each call decapsulates another ciphertext, made by the reference process's
//!   enc from the batch's seed ([`Reference::feed`]) and handed over by the engine as a
//!   file, so the timed process never ran the enc that made them (no table from enc to dec
//!   helps) and no two calls of a session see the same ciphertext (no cache can hit); the
//!   fold of the shared secrets the reference's enc returned must equal the fold of those
//!   the timed dec returned: dec(ct) = ss on every ciphertext of every batch.
//!
//! All the processes make the same key pair from a seed the engine sends (`--setup-seed` at
//! the start, then `key SEED` between batches, [`rekey`]), so the reference's enc uses the
//! timed processes' public key and the timed dec the reference's secret key without any
//! process sending them, and the key changes as the session goes: the figure is over many
//! keys, not one's.

use std::collections::HashSet;
use std::ffi::c_int;
use std::hash::{BuildHasher, RandomState};
use std::hint::black_box;

use crate::drbg::{CtrDrbg, Rng};
use crate::error::KemError;
use crate::kem::{self, Buffers, DecFn, EncFn, Kem, KeypairFn};
use crate::timer;
use crate::timing::{prepare, Batch, Op};

/// The fold after one call: the previous fold rotated (so the order of the calls counts),
/// XOR the 64-bit words of each output (a trailing partial word zero-padded), the second
/// output's rotated so that two equal outputs do not cancel.
#[inline(always)]
pub fn fold(acc: u64, first: &[u8], second: &[u8]) -> u64 {
    acc.rotate_left(7) ^ words(first) ^ words(second).rotate_left(29)
}

/// XOR of the little-endian 64-bit words of `b`.
#[inline(always)]
fn words(b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(8);
    let mut x = 0u64;
    for c in chunks.by_ref() {
        x ^= u64::from_le_bytes(c.try_into().expect("8 bytes"));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        x ^= u64::from_le_bytes(last);
    }
    x
}

/// A fold as it travels in the protocol: 16 hex digits.
pub fn fold_hex(f: u64) -> String {
    format!("{f:016x}")
}

/// A 48-byte DRBG seed from its 96 hex digits (what the engine sends).
pub fn seed_of(hex: &str) -> Option<[u8; 48]> {
    let v = hex::decode(hex).ok()?;
    <[u8; 48]>::try_from(v).ok()
}

/// Install a NIST CTR_DRBG seeded with `seed` as the KEM's `randombytes`.
pub fn reseed(seed: &[u8; 48]) {
    kem::set_rng(Rng::Nist(Box::new(CtrDrbg::new(seed, None))));
}

/// A new key pair (`key SEED`, between batches): the DRBG reseeded with `seed`, then the
/// operation's inputs prepared from it as at the start ([`prepare`]: a key pair for enc and
/// dec, one ciphertext for dec), so the timed processes and the reference make the same key
/// pair without sending it; the fold of the key pair, which must be the same in all. The
/// cost of some KEMs' enc and dec depends on the key (ML-KEM expands its matrix from the
/// public key's seed by rejection sampling): one key for a whole session would make its
/// figure that key's.
pub fn rekey(op: Op, kem: &Kem, bufs: &mut Buffers, seed: &[u8; 48]) -> Result<u64, KemError> {
    reseed(seed);
    prepare(op, kem, bufs)?;
    Ok(fold(0, bufs.pk.data(), bufs.sk.data()))
}

/// The session's shared start: the DRBG seeded with `setup_seed` (when given), then the
/// operation's inputs prepared (a key pair for enc and dec, one ciphertext for dec's
/// warm-up).
pub fn setup(
    op: Op,
    kem: &Kem,
    bufs: &mut Buffers,
    setup_seed: Option<&[u8; 48]>,
) -> Result<(), KemError> {
    if let Some(s) = setup_seed {
        reseed(s);
    }
    prepare(op, kem, bufs)
}

/// One operation bound to the buffers, its calls timed with their outputs folded.
pub struct CheckedCall {
    op: Op,
    keypair: KeypairFn,
    /// enc, or dec in enc's shape (they differ only in a pointer's constness).
    three: EncFn,
    pk: *mut u8,
    sk: *mut u8,
    ct: *mut u8,
    ss_enc: *mut u8,
    ss_dec: *mut u8,
    sizes: [usize; 4],
}

// SAFETY: function pointers and pointers into buffers that the caller keeps alive and does
// not touch while the one thread that uses the call makes it.
unsafe impl Send for CheckedCall {}

impl CheckedCall {
    /// Bind `op` of `kem` to `bufs`; the buffers must outlive every use of the result.
    pub fn new(op: Op, kem: &Kem, bufs: &mut Buffers) -> CheckedCall {
        // SAFETY: `dec(uint8_t *ss, const uint8_t *ct, const uint8_t *sk)` and the EncFn
        // shape differ only in the constness of a pointer: same C ABI.
        let dec = unsafe { std::mem::transmute::<DecFn, EncFn>(kem.dec) };
        CheckedCall {
            op,
            keypair: kem.keypair,
            three: if op == Op::Dec { dec } else { kem.enc },
            pk: bufs.pk.as_mut_ptr(),
            sk: bufs.sk.as_mut_ptr(),
            ct: bufs.ct.as_mut_ptr(),
            ss_enc: bufs.ss_enc.as_mut_ptr(),
            ss_dec: bufs.ss_dec.as_mut_ptr(),
            sizes: [
                bufs.pk.len(),
                bufs.sk.len(),
                bufs.ct.len(),
                bufs.ss_enc.len(),
            ],
        }
    }

    /// `iters` calls between two counter reads, each call's outputs folded into `acc`
    /// ([`fold`]: keygen's pk and sk, enc's ct and ss, dec's ss). Dec takes call `i`'s
    /// ciphertext from `fed[i * ct_len..]` when given (`iters` ciphertexts at least), else
    /// the buffers' one.
    #[inline(never)]
    pub fn batch(&self, iters: u64, fed: Option<&[u8]>, mut acc: u64) -> (Batch, u64) {
        let [pk, sk, ct, ss] = self.sizes;
        let n = iters as usize;
        if let Some(f) = fed {
            assert!(f.len() >= n * ct, "fed inputs hold every call's ciphertext");
        }
        let mut rc_or: c_int = 0;
        let n0 = timer::now_ns();
        let t0 = timer::start();
        for i in 0..n {
            // SAFETY: every pointer addresses a buffer of the size api.h declares (guards
            // around it catch overruns), a fed ciphertext lies inside `fed` (asserted).
            unsafe {
                match self.op {
                    Op::Keygen => {
                        rc_or |= black_box(self.keypair)(black_box(self.pk), black_box(self.sk));
                        acc = fold(
                            acc,
                            std::slice::from_raw_parts(self.pk, pk),
                            std::slice::from_raw_parts(self.sk, sk),
                        );
                    }
                    Op::Enc => {
                        rc_or |= black_box(self.three)(
                            black_box(self.ct),
                            black_box(self.ss_enc),
                            black_box(self.pk),
                        );
                        acc = fold(
                            acc,
                            std::slice::from_raw_parts(self.ct, ct),
                            std::slice::from_raw_parts(self.ss_enc, ss),
                        );
                    }
                    Op::Dec => {
                        let input = match fed {
                            Some(f) => f.as_ptr().add(i * ct),
                            None => self.ct as *const u8,
                        };
                        rc_or |= black_box(self.three)(
                            black_box(self.ss_dec),
                            black_box(input as *mut u8),
                            black_box(self.sk),
                        );
                        acc = fold(acc, std::slice::from_raw_parts(self.ss_dec, ss), &[]);
                    }
                }
            }
        }
        let t1 = timer::stop();
        let n1 = timer::now_ns();
        let b = Batch {
            ticks: t1.wrapping_sub(t0),
            ns: n1.saturating_sub(n0),
            rc_or,
        };
        (b, acc)
    }
}

/// Most calls of a batch. Calibration repeats its inputs (the setup's one public key or
/// ciphertext, calls back to back), so a KEM that caches or idles then calibrates to
/// millions of calls, each of which the reference must then replay (spaced apart) or feed.
/// An honest call of a real KEM takes microseconds (the toy fixtures' 0.4 µs), so 20 ms
/// batches stay below this.
pub const MAX_BATCH_CALLS: u64 = 65_536;

/// Most bytes of a dec batch's ciphertexts (a KEM declares its own sizes).
pub const MAX_FED_BYTES: u64 = 16 << 20;

/// Calls of a batch of `op` at most, for ciphertexts of `ct_len` bytes: [`MAX_BATCH_CALLS`],
/// for dec fewer when its ciphertexts would exceed [`MAX_FED_BYTES`]; at least one.
pub fn batch_cap(op: Op, ct_len: usize) -> u64 {
    let bytes = match op {
        Op::Dec => MAX_FED_BYTES / (ct_len as u64).max(1),
        Op::Keygen | Op::Enc => u64::MAX,
    };
    MAX_BATCH_CALLS.min(bytes).max(1)
}

/// Pause between the reference's calls: they are spaced apart, not back to back.
pub const SPACING: std::time::Duration = std::time::Duration::from_micros(20);

/// Wait [`SPACING`] on the monotonic clock (a busy wait: a sleep's timer slack would make
/// it 50 to 100 µs, and a replay makes thousands of calls).
fn pause() {
    let until = std::time::Instant::now() + SPACING;
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// The reference process of one member: the same object, untimed.
pub struct Reference<'a> {
    pub op: Op,
    pub kem: &'a Kem,
    pub bufs: &'a mut Buffers,
}

/// Outputs seen so far, by a keyed 64-bit hash of each (a ciphertext of every call of a
/// session kept whole would take megabytes).
#[derive(Default)]
pub struct Seen {
    keys: RandomState,
    hashes: HashSet<u64>,
}

/// `Err` naming the call when an output repeats one of the same batch (`seen`): from a
/// seeded DRBG no two key pairs or ciphertexts are the same, unless the KEM ignores its
/// randomness or hands back earlier outputs.
fn fresh(seen: &mut Seen, out: &[u8], what: &str, i: u64) -> Result<(), String> {
    if seen.hashes.insert(seen.keys.hash_one(out)) {
        Ok(())
    } else {
        Err(format!(
            "call {} returned the {what} of an earlier call",
            i + 1
        ))
    }
}

impl Reference<'_> {
    /// Replay a batch of keygen or enc: the DRBG reseeded with `seed`, `n` calls spaced
    /// [`SPACING`] apart, their fold. Each output is checked with the other operations
    /// between the calls (so no operation runs twice in a row): a key pair by an enc with
    /// its public key (randomness from `side`, not the batch's stream) and a dec with its
    /// secret key, a ciphertext by a dec with the shared secret key; the shared secrets
    /// must agree and no output may repeat an earlier one.
    pub fn replay(&mut self, seed: &[u8; 48], n: u64, side: &[u8; 48]) -> Result<u64, String> {
        let mut side = Some(Rng::Nist(Box::new(CtrDrbg::new(side, None))));
        let mut seen = Seen::default();
        reseed(seed);
        let mut acc = 0u64;
        let e = |e: KemError| e.to_string();
        for i in 0..n {
            match self.op {
                Op::Keygen => {
                    self.bufs.keypair(self.kem).map_err(e)?;
                    acc = fold(acc, self.bufs.pk.data(), self.bufs.sk.data());
                    fresh(&mut seen, self.bufs.pk.data(), "public key", i)?;
                    let batch_rng = kem::take_rng();
                    kem::set_rng(side.take().expect("the side stream is put back"));
                    let r = self.bufs.enc(self.kem);
                    side = kem::take_rng();
                    if let Some(b) = batch_rng {
                        kem::set_rng(b);
                    }
                    r.map_err(e)?;
                }
                Op::Enc | Op::Dec => {
                    self.bufs.enc(self.kem).map_err(e)?;
                    acc = fold(acc, self.bufs.ct.data(), self.bufs.ss_enc.data());
                    fresh(&mut seen, self.bufs.ct.data(), "ciphertext", i)?;
                }
            }
            self.bufs.dec(self.kem).map_err(e)?;
            if self.bufs.ss_dec.data() != self.bufs.ss_enc.data() {
                return Err(format!(
                    "call {}: dec of its output does not give enc's shared secret",
                    i + 1
                ));
            }
            pause();
        }
        Ok(acc)
    }

    /// Dec's inputs of a batch: the DRBG reseeded with `seed`, `n` ciphertexts made by enc
    /// with the current public key ([`rekey`]), each decapsulated here too (so enc never runs
    /// twice in a row), appended to `cts` (none the same as another of `seen`, the session's
    /// so far); the fold of the shared secrets enc returned (the fold dec must reach on
    /// them).
    pub fn feed(
        &mut self,
        seed: &[u8; 48],
        n: u64,
        cts: &mut Vec<u8>,
        seen: &mut Seen,
    ) -> Result<u64, String> {
        reseed(seed);
        let mut acc = 0u64;
        for i in 0..n {
            self.bufs.enc(self.kem).map_err(|e| e.to_string())?;
            fresh(seen, self.bufs.ct.data(), "ciphertext", i)?;
            self.bufs.dec(self.kem).map_err(|e| e.to_string())?;
            if self.bufs.ss_dec.data() != self.bufs.ss_enc.data() {
                return Err(format!(
                    "ciphertext {}: dec does not give enc's shared secret",
                    i + 1
                ));
            }
            cts.extend_from_slice(self.bufs.ct.data());
            acc = fold(acc, self.bufs.ss_enc.data(), &[]);
        }
        Ok(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fold_depends_on_every_word_and_on_the_order_of_the_calls() {
        let a = [1u8; 20];
        let mut b = a;
        b[19] = 2;
        assert_ne!(fold(0, &a, &[]), fold(0, &b, &[]));
        // Two calls in another order fold differently.
        let ab = fold(fold(0, &a, &[]), &b, &[]);
        let ba = fold(fold(0, &b, &[]), &a, &[]);
        assert_ne!(ab, ba);
        // A call repeated is not the same as one call, nor as none.
        assert_ne!(fold(fold(0, &a, &[]), &a, &[]), fold(0, &a, &[]));
        assert_ne!(fold(fold(0, &a, &[]), &a, &[]), 0);
        // The two outputs do not cancel each other.
        assert_ne!(fold(0, &a, &a), 0);
        // A trailing partial word counts, zero-padded.
        assert_eq!(words(&[1, 0, 0, 0, 0, 0, 0, 0, 2]), 3);
        assert_eq!(words(&[]), 0);
        assert_eq!(fold_hex(0xab), "00000000000000ab");
    }

    #[test]
    fn a_batch_is_capped_by_calls_and_a_dec_batch_by_bytes() {
        assert_eq!(batch_cap(Op::Dec, 32), MAX_BATCH_CALLS);
        assert_eq!(batch_cap(Op::Dec, 256), MAX_BATCH_CALLS);
        assert_eq!(batch_cap(Op::Dec, 16 << 10), 1024);
        assert_eq!(batch_cap(Op::Dec, 1 << 30), 1);
        assert_eq!(batch_cap(Op::Dec, 0), MAX_BATCH_CALLS);
        assert_eq!(batch_cap(Op::Keygen, 1 << 30), MAX_BATCH_CALLS);
        assert_eq!(batch_cap(Op::Enc, 1 << 30), MAX_BATCH_CALLS);
    }

    #[test]
    fn a_seed_is_96_hex_digits() {
        assert_eq!(seed_of(&"00".repeat(48)), Some([0u8; 48]));
        assert_eq!(seed_of(&"ff".repeat(48)), Some([0xffu8; 48]));
        assert_eq!(seed_of("00"), None);
        assert_eq!(seed_of(&"zz".repeat(48)), None);
        assert_eq!(seed_of(&"00".repeat(49)), None);
    }

    #[test]
    fn an_output_seen_before_in_the_batch_is_named() {
        let mut seen = Seen::default();
        assert!(fresh(&mut seen, b"one", "ciphertext", 0).is_ok());
        assert!(fresh(&mut seen, b"two", "ciphertext", 1).is_ok());
        assert_eq!(
            fresh(&mut seen, b"one", "ciphertext", 2),
            Err("call 3 returned the ciphertext of an earlier call".to_string())
        );
    }
}
