//! Loading a built KEM object and calling it safely enough to diagnose misbehaviour.
//!
//! * [`Kem::load`] `dlopen`s the object (`RTLD_NOW | RTLD_LOCAL`), resolves the namespaced
//!   `crypto_kem_keypair/enc/dec` and `ngcc_set_randombytes`, and installs
//!   [`ngcc_randombytes_hook`], which forwards every `randombytes` call of the KEM to the
//!   process-wide [`Rng`] set with [`set_rng`].
//! * [`GuardedBuf`] puts patterned guard bytes before and after every buffer handed to the
//!   KEM, so a function writing past its declared size is reported instead of silently
//!   corrupting memory.
//! * [`run_on_big_stack`] runs a job on a thread with a 64 MiB stack (Classic McEliece keeps
//!   large matrices on the stack).
//!
//! The object stays loaded for the life of the process (it is never `dlclose`d: a runner
//! process runs exactly one job).

use crate::drbg::Rng;
use crate::error::{rc_check, KemError, LoadError, RandomError, SysError};
use crate::output::ApiSizes;
use std::ffi::{c_int, c_void, CStr, CString};
use std::path::Path;
use std::sync::Mutex;

/// `int crypto_kem_keypair(uint8_t *pk, uint8_t *sk)`.
pub type KeypairFn = unsafe extern "C" fn(*mut u8, *mut u8) -> c_int;
/// `int crypto_kem_enc(uint8_t *ct, uint8_t *ss, const uint8_t *pk)`; also the shape of
/// `crypto_kem_dec(uint8_t *ss, const uint8_t *ct, const uint8_t *sk)`.
pub type EncFn = unsafe extern "C" fn(*mut u8, *mut u8, *const u8) -> c_int;
/// `int crypto_kem_dec(uint8_t *ss, const uint8_t *ct, const uint8_t *sk)`.
pub type DecFn = unsafe extern "C" fn(*mut u8, *const u8, *const u8) -> c_int;
/// The random-byte callback type the shim stores.
pub type RandomBytesFn = unsafe extern "C" fn(*mut u8, usize) -> c_int;
/// `void ngcc_set_randombytes(int (*f)(uint8_t *, size_t))`.
type SetRandomBytesFn = unsafe extern "C" fn(Option<RandomBytesFn>);
/// The callback behind NIST's `randombytes_init(entropy, personalization, strength)`.
pub type RandomBytesInitFn = unsafe extern "C" fn(*const u8, *const u8, c_int);
/// `void ngcc_set_randombytes_init(void (*f)(const uint8_t *, const uint8_t *, int))`,
/// present in objects built for NIST packages (`api "nist"`).
type SetRandomBytesInitFn = unsafe extern "C" fn(Option<RandomBytesInitFn>);

/// Stack size of the thread that runs KEM operations.
pub const BIG_STACK_BYTES: usize = 64 << 20;

static CURRENT_RNG: Mutex<Option<Rng>> = Mutex::new(None);

/// Install `rng` as the source behind the KEM's `randombytes`; returns the previous one.
pub fn set_rng(rng: Rng) -> Option<Rng> {
    let mut guard = CURRENT_RNG.lock().unwrap_or_else(|e| e.into_inner());
    guard.replace(rng)
}

/// Remove and return the current source (the KEM's `randombytes` then fails).
pub fn take_rng() -> Option<Rng> {
    CURRENT_RNG.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// Fill `buf` from the installed source (used by KAT drivers for their own seeds).
pub fn fill_from_current(buf: &mut [u8]) -> Result<(), RandomError> {
    let mut guard = CURRENT_RNG.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_mut() {
        Some(rng) => rng.fill(buf),
        None => Err(RandomError::NotInstalled),
    }
}

/// The function the shim's `randombytes` forwards to: fills from the installed [`Rng`].
/// Returns -1 (and fills nothing) when none is installed or the OS source fails.
///
/// # Safety
/// `buf` must point to `n` writable bytes (the KEM's own contract for `randombytes`).
pub unsafe extern "C" fn ngcc_randombytes_hook(buf: *mut u8, n: usize) -> c_int {
    if n == 0 {
        return 0;
    }
    if buf.is_null() {
        return -1;
    }
    // SAFETY: the caller guarantees `buf` points to `n` writable bytes.
    let out = unsafe { std::slice::from_raw_parts_mut(buf, n) };
    match fill_from_current(out) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

/// The function the shim's `randombytes_init` forwards to: replaces the installed source
/// with a generator of the same family (NIST's CTR_DRBG, or HQC's PRNG during HQC KATs)
/// seeded with the 48-byte entropy and optional 48-byte personalization, as NIST's
/// `rng.c` does. The security strength is ignored, as there.
///
/// # Safety
/// `entropy` must point to 48 readable bytes; `personalization` to 48 or be null.
pub unsafe extern "C" fn ngcc_randombytes_init_hook(
    entropy: *const u8,
    personalization: *const u8,
    _strength: c_int,
) {
    if entropy.is_null() {
        return;
    }
    // SAFETY: the caller guarantees 48 readable bytes (NIST's `entropy_input[48]`).
    let e: [u8; 48] = unsafe { std::ptr::read_unaligned(entropy.cast::<[u8; 48]>()) };
    let p: Option<[u8; 48]> = (!personalization.is_null())
        // SAFETY: non-null personalization strings are 48 bytes by NIST's contract.
        .then(|| unsafe { std::ptr::read_unaligned(personalization.cast::<[u8; 48]>()) });
    let mut guard = CURRENT_RNG.lock().unwrap_or_else(|e| e.into_inner());
    let next = match guard.as_ref() {
        Some(Rng::Hqc(_)) => Rng::Hqc(Box::new(crate::drbg::HqcPrng::new(&e, p.as_ref()))),
        _ => Rng::Nist(Box::new(crate::drbg::CtrDrbg::new(&e, p.as_ref()))),
    };
    *guard = Some(next);
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libc, valid until the
    // next dl* call on this thread; we copy it at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dynamic-loader error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// A `dlopen`ed shared object.
#[derive(Debug)]
pub struct Library {
    handle: *mut c_void,
    path: String,
}

// SAFETY: a dlopen handle is a process-wide token; dlsym on it is thread-safe.
unsafe impl Send for Library {}
// SAFETY: as above; the handle is never mutated after dlopen.
unsafe impl Sync for Library {}

impl Library {
    /// `dlopen(path, RTLD_NOW | RTLD_LOCAL)`.
    pub fn open(path: &Path) -> Result<Library, LoadError> {
        if !path.is_file() {
            return Err(LoadError::NoObject(path.display().to_string()));
        }
        let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| LoadError::Nul {
            what: "path",
            name: path.display().to_string(),
        })?;
        // SAFETY: `c` is a valid NUL-terminated path; dlopen runs the object's constructors,
        // which is what loading a KEM means.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(LoadError::Dlopen {
                path: path.display().to_string(),
                reason: dlerror_text(),
            });
        }
        Ok(Library {
            handle,
            path: path.display().to_string(),
        })
    }

    /// Address of `name`, or an error naming the missing symbol and the object.
    pub fn symbol(&self, name: &str) -> Result<*mut c_void, LoadError> {
        let c = CString::new(name).map_err(|_| LoadError::Nul {
            what: "symbol name",
            name: name.to_string(),
        })?;
        // SAFETY: clearing the error state then looking up a symbol in a live handle.
        let ptr = unsafe {
            libc::dlerror();
            libc::dlsym(self.handle, c.as_ptr())
        };
        if ptr.is_null() {
            return Err(LoadError::MissingSymbol {
                name: name.to_string(),
                path: self.path.clone(),
            });
        }
        Ok(ptr)
    }

    /// Path the object was loaded from.
    pub fn path(&self) -> &str {
        &self.path
    }
}

/// One loaded KEM instance.
#[derive(Debug)]
pub struct Kem {
    /// The object, kept loaded.
    pub lib: Library,
    /// Sizes from api.h.
    pub sizes: ApiSizes,
    /// `<ns>crypto_kem_keypair`.
    pub keypair: KeypairFn,
    /// `<ns>crypto_kem_enc`.
    pub enc: EncFn,
    /// `<ns>crypto_kem_dec`.
    pub dec: DecFn,
}

impl Kem {
    /// Load `path`, resolve `<ns>crypto_kem_*` and install the random-byte hook.
    pub fn load(path: &Path, namespace: &str, sizes: ApiSizes) -> Result<Kem, LoadError> {
        let lib = Library::open(path)?;
        let keypair = lib.symbol(&format!("{namespace}crypto_kem_keypair"))?;
        let enc = lib.symbol(&format!("{namespace}crypto_kem_enc"))?;
        let dec = lib.symbol(&format!("{namespace}crypto_kem_dec"))?;
        let set_rng = lib.symbol("ngcc_set_randombytes")?;
        // SAFETY: the symbols are the NIST KEM API functions and the engine's shim, whose C
        // prototypes are exactly these function types.
        let (keypair, enc, dec, set_rng) = unsafe {
            (
                std::mem::transmute::<*mut c_void, KeypairFn>(keypair),
                std::mem::transmute::<*mut c_void, EncFn>(enc),
                std::mem::transmute::<*mut c_void, DecFn>(dec),
                std::mem::transmute::<*mut c_void, SetRandomBytesFn>(set_rng),
            )
        };
        // SAFETY: installs a function pointer in the shim's static; the hook matches
        // `int (*)(uint8_t *, size_t)`.
        unsafe { set_rng(Some(ngcc_randombytes_hook)) };
        if let Ok(set_init) = lib.symbol("ngcc_set_randombytes_init") {
            // SAFETY: the engine's NIST shim defines this setter with exactly this type,
            // and the hook matches `void (*)(const uint8_t *, const uint8_t *, int)`.
            unsafe {
                let set_init = std::mem::transmute::<*mut c_void, SetRandomBytesInitFn>(set_init);
                set_init(Some(ngcc_randombytes_init_hook));
            }
        }
        Ok(Kem {
            lib,
            sizes,
            keypair,
            enc,
            dec,
        })
    }
}

/// Bytes of guard before each buffer (keeps the data 64-byte aligned).
const FRONT_GUARD: usize = 64;
/// Bytes of guard after each buffer.
const BACK_GUARD: usize = 256;

fn guard_byte(i: usize) -> u8 {
    0xA5 ^ (i as u8).wrapping_mul(0x3B)
}

/// Which declared size a buffer has, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufKind {
    /// `CRYPTO_PUBLICKEYBYTES`.
    PublicKey,
    /// `CRYPTO_SECRETKEYBYTES`.
    SecretKey,
    /// `CRYPTO_CIPHERTEXTBYTES`.
    Ciphertext,
    /// `CRYPTO_BYTES`.
    SharedSecret,
}

impl BufKind {
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            BufKind::PublicKey => ("public key", "CRYPTO_PUBLICKEYBYTES"),
            BufKind::SecretKey => ("secret key", "CRYPTO_SECRETKEYBYTES"),
            BufKind::Ciphertext => ("ciphertext", "CRYPTO_CIPHERTEXTBYTES"),
            BufKind::SharedSecret => ("shared secret", "CRYPTO_BYTES"),
        }
    }
}

/// One 64-byte, 64-aligned line of buffer storage.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A buffer of the declared size with patterned guard bytes on both sides. The data
/// starts on a 64-byte boundary (cache line; enough for any SIMD load).
pub struct GuardedBuf {
    storage: Vec<Line>,
    len: usize,
    kind: BufKind,
}

impl GuardedBuf {
    /// A zeroed buffer of `len` bytes with fresh guards.
    pub fn new(len: usize, kind: BufKind) -> GuardedBuf {
        let total = FRONT_GUARD + len + BACK_GUARD;
        let mut b = GuardedBuf {
            storage: vec![Line([0u8; 64]); total.div_ceil(64)],
            len,
            kind,
        };
        b.reset_guards();
        b
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let total = FRONT_GUARD + self.len + BACK_GUARD;
        // SAFETY: `storage` holds at least `total` initialized bytes (Line is plain bytes);
        // u8 has no alignment or validity requirements.
        unsafe { std::slice::from_raw_parts_mut(self.storage.as_mut_ptr().cast::<u8>(), total) }
    }

    fn bytes(&self) -> &[u8] {
        let total = FRONT_GUARD + self.len + BACK_GUARD;
        // SAFETY: as in `bytes_mut`, read-only.
        unsafe { std::slice::from_raw_parts(self.storage.as_ptr().cast::<u8>(), total) }
    }

    /// Rewrite both guards with the pattern.
    pub fn reset_guards(&mut self) {
        let len = self.len;
        let bytes = self.bytes_mut();
        for (i, b) in bytes[..FRONT_GUARD].iter_mut().enumerate() {
            *b = guard_byte(i + 1000);
        }
        for (i, b) in bytes[FRONT_GUARD + len..].iter_mut().enumerate() {
            *b = guard_byte(i);
        }
    }

    /// Pointer to the first data byte, for the KEM.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        // SAFETY: FRONT_GUARD is within the allocation.
        unsafe { self.storage.as_mut_ptr().cast::<u8>().add(FRONT_GUARD) }
    }

    /// Pointer to the first data byte, read-only.
    pub fn as_ptr(&self) -> *const u8 {
        // SAFETY: FRONT_GUARD is within the allocation.
        unsafe { self.storage.as_ptr().cast::<u8>().add(FRONT_GUARD) }
    }

    /// The data bytes.
    pub fn data(&self) -> &[u8] {
        &self.bytes()[FRONT_GUARD..FRONT_GUARD + self.len]
    }

    /// The data bytes, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.bytes_mut()[FRONT_GUARD..FRONT_GUARD + len]
    }

    /// Declared length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `Err("<func> wrote past the declared ciphertext size (CRYPTO_CIPHERTEXTBYTES = 32): ...")`
    /// when a guard byte changed since the last [`reset_guards`](Self::reset_guards).
    pub fn check(&self, func: &str) -> Result<(), KemError> {
        let (what, define) = self.kind.describe();
        let bytes = self.bytes();
        let back = &bytes[FRONT_GUARD + self.len..];
        if let Some(last) = (0..back.len()).rev().find(|&i| back[i] != guard_byte(i)) {
            let n = last + 1;
            let extent = if n == BACK_GUARD {
                format!("at least {n} bytes beyond it (the whole guard)")
            } else {
                format!("{n} bytes beyond it")
            };
            return Err(KemError::Overrun {
                func: func.to_string(),
                what,
                define,
                len: self.len,
                extent,
            });
        }
        let front = &bytes[..FRONT_GUARD];
        if let Some(first) = (0..FRONT_GUARD).find(|&i| front[i] != guard_byte(i + 1000)) {
            return Err(KemError::Underrun {
                func: func.to_string(),
                what,
                define,
                len: self.len,
                before: FRONT_GUARD - first,
            });
        }
        Ok(())
    }
}

/// All buffers one KEM round trip needs.
pub struct Buffers {
    /// Public key.
    pub pk: GuardedBuf,
    /// Secret key.
    pub sk: GuardedBuf,
    /// Ciphertext.
    pub ct: GuardedBuf,
    /// Shared secret from enc.
    pub ss_enc: GuardedBuf,
    /// Shared secret from dec.
    pub ss_dec: GuardedBuf,
}

fn usize_of(n: u64, define: &'static str) -> Result<usize, LoadError> {
    usize::try_from(n).map_err(|_| LoadError::TooLarge { define, n })
}

impl Buffers {
    /// Buffers of the declared sizes.
    pub fn new(sizes: &ApiSizes) -> Result<Buffers, LoadError> {
        Ok(Buffers {
            pk: GuardedBuf::new(
                usize_of(sizes.pk, "CRYPTO_PUBLICKEYBYTES")?,
                BufKind::PublicKey,
            ),
            sk: GuardedBuf::new(
                usize_of(sizes.sk, "CRYPTO_SECRETKEYBYTES")?,
                BufKind::SecretKey,
            ),
            ct: GuardedBuf::new(
                usize_of(sizes.ct, "CRYPTO_CIPHERTEXTBYTES")?,
                BufKind::Ciphertext,
            ),
            ss_enc: GuardedBuf::new(usize_of(sizes.ss, "CRYPTO_BYTES")?, BufKind::SharedSecret),
            ss_dec: GuardedBuf::new(usize_of(sizes.ss, "CRYPTO_BYTES")?, BufKind::SharedSecret),
        })
    }

    /// Check every guard (after calls made through raw pointers, e.g. the timing loop).
    pub fn check_all(&self, func: &str) -> Result<(), KemError> {
        self.pk.check(func)?;
        self.sk.check(func)?;
        self.ct.check(func)?;
        self.ss_enc.check(func)?;
        self.ss_dec.check(func)
    }

    /// `crypto_kem_keypair(pk, sk)`, checking the return code and guards.
    pub fn keypair(&mut self, kem: &Kem) -> Result<(), KemError> {
        // SAFETY: pk and sk hold the sizes api.h declares; overruns land in the guards.
        let rc = unsafe { (kem.keypair)(self.pk.as_mut_ptr(), self.sk.as_mut_ptr()) };
        self.pk.check("crypto_kem_keypair")?;
        self.sk.check("crypto_kem_keypair")?;
        rc_check("crypto_kem_keypair", rc)
    }

    /// `crypto_kem_enc(ct, ss_enc, pk)`, checking the return code and guards.
    pub fn enc(&mut self, kem: &Kem) -> Result<(), KemError> {
        // SAFETY: ct, ss_enc and pk hold the declared sizes; overruns land in the guards.
        let rc = unsafe {
            (kem.enc)(
                self.ct.as_mut_ptr(),
                self.ss_enc.as_mut_ptr(),
                self.pk.as_ptr(),
            )
        };
        self.ct.check("crypto_kem_enc")?;
        self.ss_enc.check("crypto_kem_enc")?;
        self.pk.check("crypto_kem_enc")?;
        rc_check("crypto_kem_enc", rc)
    }

    /// `crypto_kem_dec(ss_dec, ct, sk)`, checking the return code and guards.
    pub fn dec(&mut self, kem: &Kem) -> Result<(), KemError> {
        // SAFETY: ss_dec, ct and sk hold the declared sizes; overruns land in the guards.
        let rc = unsafe { (kem.dec)(self.ss_dec.as_mut_ptr(), self.ct.as_ptr(), self.sk.as_ptr()) };
        self.ss_dec.check("crypto_kem_dec")?;
        self.ct.check("crypto_kem_dec")?;
        self.sk.check("crypto_kem_dec")?;
        rc_check("crypto_kem_dec", rc)
    }
}

/// Run `f` on a fresh thread with a [`BIG_STACK_BYTES`] stack and return its result.
/// A panic on that thread is turned into an error.
pub fn run_on_big_stack<T, F>(f: F) -> Result<T, SysError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let handle = std::thread::Builder::new()
        .name("kem-op".into())
        .stack_size(BIG_STACK_BYTES)
        .spawn(f)
        .map_err(|source| SysError::Thread {
            mib: BIG_STACK_BYTES >> 20,
            source,
        })?;
    handle.join().map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        SysError::Panicked(msg)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_detects_overrun_and_counts_bytes() {
        let mut b = GuardedBuf::new(32, BufKind::Ciphertext);
        assert!(b.check("crypto_kem_enc").is_ok());
        b.data_mut().fill(0xff);
        assert!(
            b.check("crypto_kem_enc").is_ok(),
            "writing the data must not trip the guard"
        );
        // SAFETY: 16 bytes past the data are inside the back guard.
        unsafe { std::ptr::write_bytes(b.as_mut_ptr().add(32), 0, 16) };
        let e = b.check("crypto_kem_enc").unwrap_err().to_string();
        assert_eq!(
            e,
            "crypto_kem_enc wrote past the declared ciphertext size (CRYPTO_CIPHERTEXTBYTES = 32): 16 bytes beyond it"
        );
        b.reset_guards();
        assert!(b.check("crypto_kem_enc").is_ok());
    }

    #[test]
    fn guard_detects_underrun() {
        let mut b = GuardedBuf::new(8, BufKind::SharedSecret);
        // SAFETY: 2 bytes before the data are inside the front guard.
        unsafe { *b.as_mut_ptr().sub(2) ^= 1 };
        let e = b.check("crypto_kem_dec").unwrap_err().to_string();
        assert!(
            e.contains("before the start of the shared secret buffer (CRYPTO_BYTES = 8): 2 bytes"),
            "{e}"
        );
    }

    #[test]
    fn data_is_64_byte_aligned() {
        let mut b = GuardedBuf::new(5, BufKind::PublicKey);
        assert_eq!(b.as_mut_ptr() as usize % 64, 0);
        assert_eq!(b.len(), 5);
    }

    #[test]
    fn missing_object_is_a_clear_error() {
        let e = Library::open(Path::new("/nonexistent/x.so"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/x.so") && e.contains("does not exist"),
            "{e}"
        );
    }

    #[test]
    fn missing_symbol_is_named() {
        let lib = Library::open(Path::new("/lib/x86_64-linux-gnu/libc.so.6"))
            .or_else(|_| Library::open(Path::new("/lib64/libc.so.6")));
        let Ok(lib) = lib else {
            eprintln!("SKIP: no libc.so.6 at a known path");
            return;
        };
        assert!(lib.symbol("memcpy").is_ok());
        let e = lib.symbol("PQ_crypto_kem_keypair").unwrap_err().to_string();
        assert!(e.contains("`PQ_crypto_kem_keypair` not found"), "{e}");
    }

    #[test]
    fn hook_forwards_to_installed_rng() {
        use crate::drbg::{CtrDrbg, Rng};
        let seed: [u8; 48] = std::array::from_fn(|i| i as u8);
        let prev = set_rng(Rng::Nist(Box::new(CtrDrbg::new(&seed, None))));
        let mut out = [0u8; 48];
        // SAFETY: `out` is 48 writable bytes.
        let rc = unsafe { ngcc_randombytes_hook(out.as_mut_ptr(), out.len()) };
        if let Some(p) = prev {
            set_rng(p);
        }
        assert_eq!(rc, 0);
        assert_eq!(hex::encode_upper(&out[..4]), "06155023");
    }

    #[test]
    fn big_stack_thread_can_use_a_large_frame() {
        let r = run_on_big_stack(|| {
            let big = [7u8; 16 << 20];
            std::hint::black_box(&big)[12345] as u32
        })
        .unwrap();
        assert_eq!(r, 7);
    }
}
