//! Random-byte sources the runner installs behind the KEM's `randombytes`.
//!
//! * [`CtrDrbg`]: NIST SP 800-90A AES-256 CTR_DRBG without derivation function,
//!   byte-for-byte as NIST's `rng.c` (`randombytes_init(entropy, pers, 256)` then
//!   `randombytes`), used for the NIST KAT files.
//! * [`HqcPrng`]: the SHAKE-256 PRNG of HQC's KATs (PQClean `test/common/hqckatrng.c`):
//!   absorb the 48-byte seed (and personalization), then the domain byte 1, then squeeze
//!   incrementally across calls.
//! * [`OsRng`]: the operating system (`getrandom(2)`), for seeding timing runs.
//!
//! [`Rng`] wraps them so a KAT driver can save and restore the outer generator's state
//! (liboqs `OQS_KAT_PRNG_save_state`).

use crate::error::{RandomError, UsageError};
use aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes::Aes256;
use sha3::digest::{ExtendableOutput, Update, XofReader};
use sha3::{Shake256, Shake256Reader};

/// AES-256 CTR_DRBG without derivation function (NIST `rng.c`).
#[derive(Clone)]
pub struct CtrDrbg {
    key: [u8; 32],
    v: [u8; 16],
    cipher: Aes256,
    reseed_counter: u64,
}

fn increment_v(v: &mut [u8; 16]) {
    for byte in v.iter_mut().rev() {
        if *byte == 0xff {
            *byte = 0;
        } else {
            *byte += 1;
            break;
        }
    }
}

impl CtrDrbg {
    /// `randombytes_init(entropy_input, personalization_string, 256)`.
    pub fn new(entropy: &[u8; 48], personalization: Option<&[u8; 48]>) -> Self {
        let mut seed_material = *entropy;
        if let Some(p) = personalization {
            for (s, b) in seed_material.iter_mut().zip(p) {
                *s ^= b;
            }
        }
        let key = [0u8; 32];
        let mut drbg = CtrDrbg {
            key,
            v: [0u8; 16],
            cipher: Aes256::new(GenericArray::from_slice(&key)),
            reseed_counter: 0,
        };
        drbg.update(Some(&seed_material));
        drbg.reseed_counter = 1;
        drbg
    }

    fn encrypt_v(&self) -> [u8; 16] {
        let mut block = GenericArray::clone_from_slice(&self.v);
        self.cipher.encrypt_block(&mut block);
        block.into()
    }

    /// `AES256_CTR_DRBG_Update`.
    fn update(&mut self, provided: Option<&[u8; 48]>) {
        let mut temp = [0u8; 48];
        for chunk in temp.chunks_exact_mut(16) {
            increment_v(&mut self.v);
            chunk.copy_from_slice(&self.encrypt_v());
        }
        if let Some(p) = provided {
            for (t, b) in temp.iter_mut().zip(p) {
                *t ^= b;
            }
        }
        self.key.copy_from_slice(&temp[..32]);
        self.v.copy_from_slice(&temp[32..]);
        self.cipher = Aes256::new(GenericArray::from_slice(&self.key));
    }

    /// `randombytes(buf, n)`: one generate call (the state is updated once per call).
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(16) {
            increment_v(&mut self.v);
            let block = self.encrypt_v();
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
        self.update(None);
        self.reseed_counter += 1;
    }
}

/// SHAKE-256 PRNG of the HQC KATs (`hqc_kat_init` / `randombytes`).
#[derive(Clone)]
pub struct HqcPrng {
    reader: Shake256Reader,
}

/// Domain-separation byte `PRNG_DOMAIN` of `hqckatrng.c`.
const HQC_PRNG_DOMAIN: u8 = 1;

impl HqcPrng {
    /// `hqc_kat_init(entropy_input, personalization_string, 256)`.
    pub fn new(entropy: &[u8; 48], personalization: Option<&[u8; 48]>) -> Self {
        let mut shake = Shake256::default();
        shake.update(entropy);
        if let Some(p) = personalization {
            shake.update(p);
        }
        shake.update(&[HQC_PRNG_DOMAIN]);
        HqcPrng {
            reader: shake.finalize_xof(),
        }
    }

    /// `randombytes(buf, n)`: continue squeezing the same SHAKE-256 stream.
    pub fn fill(&mut self, buf: &mut [u8]) {
        self.reader.read(buf);
    }
}

/// The operating system's random source (`getrandom(2)`, falling back to `/dev/urandom`).
#[derive(Clone, Copy, Debug, Default)]
pub struct OsRng;

impl OsRng {
    /// Fill `buf` from the OS; errors name the source that failed.
    pub fn try_fill(&mut self, buf: &mut [u8]) -> Result<(), RandomError> {
        let mut done = 0;
        while done < buf.len() {
            let rest = &mut buf[done..];
            // SAFETY: `rest` is a valid, writable slice of `rest.len()` bytes.
            let r = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
            if r < 0 {
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                use std::io::Read;
                return std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| f.read_exact(rest))
                    .map_err(|urandom| RandomError::Os {
                        getrandom: err,
                        urandom,
                    });
            }
            done += r as usize;
        }
        Ok(())
    }
}

/// Which deterministic KAT generator a submission uses (`nistkat-rng` in PQClean's META.yml).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KatRngKind {
    /// NIST AES-256 CTR_DRBG.
    Nist,
    /// HQC SHAKE-256 PRNG.
    Hqc,
}

impl KatRngKind {
    /// Parse `nist` or `hqc`.
    pub fn parse(s: &str) -> Result<Self, UsageError> {
        match s {
            "nist" => Ok(KatRngKind::Nist),
            "hqc" => Ok(KatRngKind::Hqc),
            other => Err(UsageError::KatRng(other.to_string())),
        }
    }

    /// The name used on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            KatRngKind::Nist => "nist",
            KatRngKind::Hqc => "hqc",
        }
    }

    /// A generator of this kind seeded like `*_kat_init(seed, NULL, 256)`.
    pub fn seeded(self, seed: &[u8; 48]) -> Rng {
        match self {
            KatRngKind::Nist => Rng::Nist(Box::new(CtrDrbg::new(seed, None))),
            KatRngKind::Hqc => Rng::Hqc(Box::new(HqcPrng::new(seed, None))),
        }
    }
}

/// Any random source the runner can install.
#[derive(Clone)]
pub enum Rng {
    /// NIST CTR_DRBG.
    Nist(Box<CtrDrbg>),
    /// HQC SHAKE-256 PRNG.
    Hqc(Box<HqcPrng>),
    /// Operating system.
    Os(OsRng),
}

impl Rng {
    /// Fill `buf`; only the OS source can fail.
    pub fn fill(&mut self, buf: &mut [u8]) -> Result<(), RandomError> {
        match self {
            Rng::Nist(d) => {
                d.fill(buf);
                Ok(())
            }
            Rng::Hqc(p) => {
                p.fill(buf);
                Ok(())
            }
            Rng::Os(o) => o.try_fill(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed_0_to_47() -> [u8; 48] {
        std::array::from_fn(|i| i as u8)
    }

    #[test]
    fn nist_ctr_drbg_known_answer() {
        let mut d = CtrDrbg::new(&seed_0_to_47(), None);
        let mut out = [0u8; 48];
        d.fill(&mut out);
        assert_eq!(
            hex::encode_upper(out),
            "061550234D158C5EC95595FE04EF7A25767F2E24CC2BC479D09D86DC9ABCFDE7056A8C266F9EF97ED08541DBD2E1FFA1"
        );
    }

    #[test]
    fn nist_ctr_drbg_calls_are_not_a_stream() {
        // rng.c updates Key and V after every call, so two 24-byte calls differ from one
        // 48-byte call after the first 16-byte block boundary... and from its second half.
        let mut a = CtrDrbg::new(&seed_0_to_47(), None);
        let mut b = a.clone();
        let mut one = [0u8; 48];
        a.fill(&mut one);
        let mut two = [0u8; 48];
        b.fill(&mut two[..24]);
        b.fill(&mut two[24..]);
        assert_eq!(one[..24], two[..24]);
        assert_ne!(one[24..], two[24..]);
    }

    #[test]
    fn nist_personalization_is_xored_into_seed() {
        let p = [0xffu8; 48];
        let mut a = CtrDrbg::new(&seed_0_to_47(), Some(&p));
        let flipped: [u8; 48] = std::array::from_fn(|i| (i as u8) ^ 0xff);
        let mut b = CtrDrbg::new(&flipped, None);
        let (mut x, mut y) = ([0u8; 32], [0u8; 32]);
        a.fill(&mut x);
        b.fill(&mut y);
        assert_eq!(x, y);
    }

    #[test]
    fn hqc_prng_known_answer() {
        let mut p = HqcPrng::new(&seed_0_to_47(), None);
        let mut out = [0u8; 48];
        p.fill(&mut out);
        assert_eq!(
            hex::encode_upper(out),
            "42C667A186390F26C8F024D31D5FE3D20145BC2FCCF26C865E20DF7626CEF09E4D9EADD263D95EDE934A74B3721EAAB0"
        );
    }

    #[test]
    fn hqc_prng_incremental_squeeze_is_one_stream() {
        // shake256_inc_squeeze continues where the last call stopped, across the
        // 136-byte rate boundary too.
        let mut whole = HqcPrng::new(&seed_0_to_47(), None);
        let mut big = [0u8; 600];
        whole.fill(&mut big);
        let mut parts = HqcPrng::new(&seed_0_to_47(), None);
        let mut pieced = [0u8; 600];
        let mut at = 0;
        for len in [1usize, 47, 88, 1, 135, 137, 191] {
            parts.fill(&mut pieced[at..at + len]);
            at += len;
        }
        assert_eq!(at, 600);
        assert_eq!(big, pieced);
    }

    #[test]
    fn hqc_prng_matches_plain_shake256_with_domain_byte() {
        let mut shake = Shake256::default();
        let mut input = seed_0_to_47().to_vec();
        input.push(1);
        shake.update(&input);
        let mut expect = [0u8; 64];
        shake.finalize_xof().read(&mut expect);
        let mut got = [0u8; 64];
        HqcPrng::new(&seed_0_to_47(), None).fill(&mut got);
        assert_eq!(expect, got);
    }

    #[test]
    fn os_rng_fills() {
        let mut a = [0u8; 64];
        OsRng.try_fill(&mut a).unwrap();
        let mut b = [0u8; 64];
        OsRng.try_fill(&mut b).unwrap();
        assert_ne!(a, b, "two 64-byte OS draws were equal");
    }

    #[test]
    fn kat_rng_kind_parses() {
        assert_eq!(KatRngKind::parse("hqc").unwrap(), KatRngKind::Hqc);
        assert!(KatRngKind::parse("aes")
            .unwrap_err()
            .to_string()
            .contains("aes"));
    }
}
