//! The `ct` job: a few operations run under valgrind's memcheck with the secret data marked
//! undefined, so memcheck reports every conditional jump and memory index that depends on
//! it (the TIMECOP method of SUPERCOP).
//!
//! The marking is done by memcheck client requests compiled into the object valgrind runs
//! (the engine links a generated C file exporting `ngcc_ct_secret` and `ngcc_ct_public`
//! into it; outside valgrind they do nothing). What is marked, for the operation under
//! test only:
//!
//! * keygen: every byte `randombytes` hands the KEM is secret; pk is declassified when
//!   keygen returns (sk stays secret);
//! * enc: the `randombytes` output is secret (pk is public); ct and ss are declassified
//!   when enc returns;
//! * dec: the whole secret key is secret before dec; ss is declassified when dec returns.
//!
//! The inputs of enc and dec are prepared with unmarked randomness, so only the operation
//! under test can produce reports. Return codes are declassified before the runner reads
//! them. The random source is the NIST CTR_DRBG with a fixed seed, so two runs execute the
//! same paths with the same data and give the same reports.

use crate::drbg::{CtrDrbg, Rng};
use crate::error::{rc_check, KemError, LoadError};
use crate::kem::{self, ngcc_randombytes_hook, Buffers, Kem, RandomBytesFn};
use crate::timing::Op;
use serde::{Deserialize, Serialize};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// `void ngcc_ct_secret(const void *p, size_t n)` / `ngcc_ct_public`: memcheck client
/// requests (`VALGRIND_MAKE_MEM_UNDEFINED` / `_DEFINED`).
type MarkFn = unsafe extern "C" fn(*const c_void, usize);
/// `void ngcc_set_randombytes(int (*f)(uint8_t *, size_t))`.
type SetRandomBytesFn = unsafe extern "C" fn(Option<RandomBytesFn>);

/// Symbol that marks bytes secret (undefined for memcheck).
pub const SECRET_SYMBOL: &str = "ngcc_ct_secret";
/// Symbol that declassifies bytes (defined for memcheck).
pub const PUBLIC_SYMBOL: &str = "ngcc_ct_public";

/// The fixed seed of the CTR_DRBG behind `randombytes` in a `ct` job.
pub const SEED: [u8; 48] = {
    let mut s = [0u8; 48];
    let mut i = 0;
    while i < 48 {
        s[i] = i as u8;
        i += 1;
    }
    s
};

/// The marking functions of a loaded object.
#[derive(Clone, Copy)]
struct Marks {
    secret: MarkFn,
    public: MarkFn,
}

impl Marks {
    fn secret(&self, p: *const u8, n: usize) {
        // SAFETY: a memcheck client request on `n` bytes at `p`; it reads and writes no
        // memory of the program (only memcheck's shadow state), and outside valgrind it is
        // a few no-op instructions.
        unsafe { (self.secret)(p.cast(), n) }
    }

    fn public(&self, p: *const u8, n: usize) {
        // SAFETY: as in `secret`.
        unsafe { (self.public)(p.cast(), n) }
    }

    /// Declassify a return code and read it.
    fn rc(&self, rc: c_int) -> c_int {
        let mut v = rc;
        let p: *mut c_int = &mut v;
        self.public(p.cast(), std::mem::size_of::<c_int>());
        // SAFETY: `p` points to `v`, alive and aligned; the volatile read makes the compiler
        // reload the (now defined) value instead of reusing the register.
        unsafe { p.read_volatile() }
    }
}

/// The marks the random-byte hook uses, set once per process.
static MARKS: OnceLock<Marks> = OnceLock::new();
/// Whether `randombytes` output is marked secret right now.
static SECRET_RNG: AtomicBool = AtomicBool::new(false);

/// The random-byte hook of a `ct` job: fills from the installed source, then marks the
/// bytes secret while the operation under test runs.
///
/// # Safety
/// `buf` must point to `n` writable bytes (the KEM's own contract for `randombytes`).
unsafe extern "C" fn ct_randombytes_hook(buf: *mut u8, n: usize) -> c_int {
    // SAFETY: forwarded with the caller's guarantee.
    let rc = unsafe { ngcc_randombytes_hook(buf, n) };
    if rc == 0 && n > 0 && SECRET_RNG.load(Ordering::SeqCst) {
        if let Some(m) = MARKS.get() {
            m.secret(buf, n);
        }
    }
    rc
}

/// What a `ct` job reports (the findings come from valgrind's own XML output, not from
/// here).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CtOutput {
    /// The operation under test.
    pub op: String,
    /// Operations run with marked secrets.
    pub runs: u32,
    /// What was marked secret and what was declassified, in words.
    pub marked: String,
    /// How the KEM misbehaved, if it did (error return, shared secrets differ, overrun).
    pub failure: Option<String>,
}

/// What each operation marks, in words (kept in the record).
pub fn marked_text(op: Op) -> &'static str {
    match op {
        Op::Keygen => "secret: randombytes output during keygen; declassified on return: pk",
        Op::Enc => "secret: randombytes output during enc; declassified on return: ct, ss",
        Op::Dec => "secret: sk before dec; declassified on return: ss",
    }
}

/// Resolve the marking functions and install the marking random-byte hook. Fails when the
/// object was not built for the check (no `ngcc_ct_*` symbols).
fn install(kem: &Kem) -> Result<Marks, LoadError> {
    let missing = |e: LoadError| LoadError::NotBuiltForCt(Box::new(e));
    let secret = kem.lib.symbol(SECRET_SYMBOL).map_err(missing)?;
    let public = kem.lib.symbol(PUBLIC_SYMBOL).map_err(missing)?;
    let set_rng = kem.lib.symbol("ngcc_set_randombytes")?;
    // SAFETY: the symbols are the engine's generated C functions with exactly these
    // prototypes (`void (const void *, size_t)` and the shim's setter).
    let (secret, public, set_rng) = unsafe {
        (
            std::mem::transmute::<*mut c_void, MarkFn>(secret),
            std::mem::transmute::<*mut c_void, MarkFn>(public),
            std::mem::transmute::<*mut c_void, SetRandomBytesFn>(set_rng),
        )
    };
    let marks = *MARKS.get_or_init(|| Marks { secret, public });
    // SAFETY: installs a function pointer in the shim's static; the hook matches
    // `int (*)(uint8_t *, size_t)`.
    unsafe { set_rng(Some(ct_randombytes_hook)) };
    Ok(marks)
}

/// One operation under test with its marks; inputs were prepared unmarked.
fn one(op: Op, kem: &Kem, m: &Marks, b: &mut Buffers) -> Result<(), KemError> {
    match op {
        Op::Keygen => {
            SECRET_RNG.store(true, Ordering::SeqCst);
            // SAFETY: pk and sk hold the sizes api.h declares; overruns land in the guards.
            let rc = unsafe { (kem.keypair)(b.pk.as_mut_ptr(), b.sk.as_mut_ptr()) };
            SECRET_RNG.store(false, Ordering::SeqCst);
            m.public(b.pk.as_ptr(), b.pk.len());
            let rc = m.rc(rc);
            b.pk.check("crypto_kem_keypair")?;
            b.sk.check("crypto_kem_keypair")?;
            rc_check("crypto_kem_keypair", rc)
        }
        Op::Enc => {
            SECRET_RNG.store(true, Ordering::SeqCst);
            // SAFETY: ct, ss_enc and pk hold the declared sizes; overruns land in the guards.
            let rc = unsafe { (kem.enc)(b.ct.as_mut_ptr(), b.ss_enc.as_mut_ptr(), b.pk.as_ptr()) };
            SECRET_RNG.store(false, Ordering::SeqCst);
            m.public(b.ct.as_ptr(), b.ct.len());
            m.public(b.ss_enc.as_ptr(), b.ss_enc.len());
            let rc = m.rc(rc);
            b.ct.check("crypto_kem_enc")?;
            b.ss_enc.check("crypto_kem_enc")?;
            rc_check("crypto_kem_enc", rc)
        }
        Op::Dec => {
            m.secret(b.sk.as_ptr(), b.sk.len());
            // SAFETY: ss_dec, ct and sk hold the declared sizes; overruns land in the guards.
            let rc = unsafe { (kem.dec)(b.ss_dec.as_mut_ptr(), b.ct.as_ptr(), b.sk.as_ptr()) };
            m.public(b.ss_dec.as_ptr(), b.ss_dec.len());
            let rc = m.rc(rc);
            b.ss_dec.check("crypto_kem_dec")?;
            b.sk.check("crypto_kem_dec")?;
            rc_check("crypto_kem_dec", rc)?;
            if b.ss_dec.data() != b.ss_enc.data() {
                return Err(KemError::DecMismatch);
            }
            Ok(())
        }
    }
}

/// Prepare the inputs of `op` with unmarked randomness.
fn prepare(op: Op, kem: &Kem, b: &mut Buffers) -> Result<(), KemError> {
    crate::timing::prepare(op, kem, b)
}

/// Run `op` `runs` times with its secrets marked (each run on fresh inputs), from the
/// fixed-seed CTR_DRBG. Under valgrind's memcheck the reports name every secret-dependent
/// branch and index; run natively it is a plain functional check.
pub fn run_ct(kem: &Kem, op: Op, runs: u32) -> Result<CtOutput, LoadError> {
    let marks = install(kem)?;
    kem::set_rng(Rng::Nist(Box::new(CtrDrbg::new(&SEED, None))));
    let mut out = CtOutput {
        op: op.name().into(),
        runs: 0,
        marked: marked_text(op).into(),
        failure: None,
    };
    let mut bufs = Buffers::new(&kem.sizes)?;
    for _ in 0..runs {
        let step = prepare(op, kem, &mut bufs).and_then(|_| one(op, kem, &marks, &mut bufs));
        if let Err(e) = step {
            out.failure = Some(e.to_string());
            break;
        }
        out.runs += 1;
    }
    Ok(out)
}
