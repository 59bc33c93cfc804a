//! NIST-round packages made at test time from the PQClean sources cargo downloads
//! (`pqcrypto-mlkem` 0.1.1, `pqcrypto-frodo` 0.4.11): nothing third-party is committed.
//!
//! Each parameter set's folder gets the scheme's files with the `PQCLEAN_<NS>_` prefix
//! removed, the PQClean `common/` files it includes, NIST's `rng.h` API with an `rng.c`
//! written here (AES-256 CTR_DRBG, the AES from OpenSSL's EVP as NIST's own `rng.c` does,
//! or from PQClean's `aes.c`), a `PQCgenKAT_kem.c` written here, and a Makefile or
//! CMakeLists.txt. The submitted `KAT/crypto_kem/<param>/PQCkemKAT_<sk>.rsp` is what the
//! package's own `PQCgenKAT_kem`, compiled and run here, writes.
#![allow(dead_code)] // each test uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;

use ngcc_pipe::model::{KatMode, Op, StepKind};
use ngcc_pipe::record::{self, KatStatus, StepData, StepRecord};

/// The `pqclean` folder of a crate in cargo's registry, fetched with cargo when missing.
pub fn pqclean(krate: &str, version: &str, scratch: &Path) -> PathBuf {
    ngcc_pipe::run::steps::source::fetch_crate(scratch, krate, version)
        .unwrap_or_else(|e| panic!("cannot fetch {krate} {version}: {e}"))
        .join("pqclean")
}

/// Whether OpenSSL's headers and libcrypto are installed (libssl-dev).
pub fn openssl_available() -> bool {
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("t.c");
    std::fs::write(
        &c,
        "#include <openssl/evp.h>\nint main(void) { return EVP_aes_256_ecb() == 0; }\n",
    )
    .unwrap();
    Command::new("cc")
        .arg(&c)
        .arg("-o")
        .arg(d.path().join("t"))
        .arg("-lcrypto")
        .status()
        .is_ok_and(|s| s.success())
}

pub const RNG_H: &str = r#"/* NIST's rng.h API (written for ngcc-pipe's tests). */
#ifndef rng_h
#define rng_h
#define RNG_SUCCESS 0
void randombytes_init(unsigned char *entropy_input, unsigned char *personalization_string,
                      int security_strength);
int randombytes(unsigned char *x, unsigned long long xlen);
#endif
"#;

/// The AES-256 block function of `rng.c`: through OpenSSL's EVP (as NIST's rng.c), or
/// PQClean's `aes.c`.
pub fn rng_c(openssl: bool) -> String {
    let aes = if openssl {
        r#"#include <openssl/evp.h>
static void AES256_ECB(unsigned char *key, unsigned char *ctr, unsigned char *buffer) {
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int len;
    EVP_EncryptInit_ex(ctx, EVP_aes_256_ecb(), NULL, key, NULL);
    EVP_EncryptUpdate(ctx, buffer, &len, ctr, 16);
    EVP_CIPHER_CTX_free(ctx);
}
"#
    } else {
        r#"#include "aes.h"
static void AES256_ECB(unsigned char *key, unsigned char *ctr, unsigned char *buffer) {
    aes256ctx ctx;
    aes256_ecb_keyexp(&ctx, key);
    aes256_ecb(buffer, ctr, 1, &ctx);
    aes256_ctx_release(&ctx);
}
"#
    };
    format!(
        r#"/* NIST SP 800-90A AES-256 CTR_DRBG as in NIST's rng.c (written for ngcc-pipe's tests). */
#include <string.h>
#include "rng.h"
{aes}
static struct {{ unsigned char Key[32]; unsigned char V[16]; int reseed_counter; }} DRBG_ctx;

static void increment(unsigned char *V) {{
    for (int j = 15; j >= 0; j--) {{
        if (V[j] == 0xff) {{
            V[j] = 0x00;
        }} else {{
            V[j]++;
            break;
        }}
    }}
}}

static void AES256_CTR_DRBG_Update(unsigned char *provided_data, unsigned char *Key, unsigned char *V) {{
    unsigned char temp[48];
    for (int i = 0; i < 3; i++) {{
        increment(V);
        AES256_ECB(Key, V, temp + 16 * i);
    }}
    if (provided_data != NULL)
        for (int i = 0; i < 48; i++) temp[i] ^= provided_data[i];
    memcpy(Key, temp, 32);
    memcpy(V, temp + 32, 16);
}}

void randombytes_init(unsigned char *entropy_input, unsigned char *personalization_string,
                      int security_strength)
{{
    unsigned char seed_material[48];
    (void)security_strength;
    memcpy(seed_material, entropy_input, 48);
    if (personalization_string)
        for (int i = 0; i < 48; i++) seed_material[i] ^= personalization_string[i];
    memset(DRBG_ctx.Key, 0x00, 32);
    memset(DRBG_ctx.V, 0x00, 16);
    AES256_CTR_DRBG_Update(seed_material, DRBG_ctx.Key, DRBG_ctx.V);
    DRBG_ctx.reseed_counter = 1;
}}

int randombytes(unsigned char *x, unsigned long long xlen) {{
    unsigned char block[16];
    unsigned long long i = 0;
    while (xlen > 0) {{
        increment(DRBG_ctx.V);
        AES256_ECB(DRBG_ctx.Key, DRBG_ctx.V, block);
        if (xlen > 15) {{
            memcpy(x + i, block, 16);
            i += 16;
            xlen -= 16;
        }} else {{
            memcpy(x + i, block, xlen);
            xlen = 0;
        }}
    }}
    AES256_CTR_DRBG_Update(NULL, DRBG_ctx.Key, DRBG_ctx.V);
    DRBG_ctx.reseed_counter++;
    return RNG_SUCCESS;
}}
"#
    )
}

pub const GENKAT_C: &str = r##"/* Writes PQCkemKAT_<CRYPTO_SECRETKEYBYTES>.rsp as NIST's PQCgenKAT_kem does
   (written for ngcc-pipe's tests). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rng.h"
#include "api.h"

static void fprintBstr(FILE *fp, const char *S, const unsigned char *A, unsigned long long L) {
    fprintf(fp, "%s", S);
    for (unsigned long long i = 0; i < L; i++) fprintf(fp, "%02X", A[i]);
    if (L == 0) fprintf(fp, "00");
    fprintf(fp, "\n");
}

int main(void) {
    unsigned char entropy_input[48], seed[100][48];
    unsigned char *pk = malloc(CRYPTO_PUBLICKEYBYTES), *sk = malloc(CRYPTO_SECRETKEYBYTES);
    unsigned char *ct = malloc(CRYPTO_CIPHERTEXTBYTES);
    unsigned char ss[CRYPTO_BYTES], ss1[CRYPTO_BYTES];
    char fn[64];
    for (int i = 0; i < 48; i++) entropy_input[i] = (unsigned char)i;
    randombytes_init(entropy_input, NULL, 256);
    for (int i = 0; i < 100; i++) randombytes(seed[i], 48);
    snprintf(fn, sizeof fn, "PQCkemKAT_%d.rsp", (int)CRYPTO_SECRETKEYBYTES);
    FILE *fp = fopen(fn, "w");
    if (!fp) return 1;
    fprintf(fp, "# %s\n\n", CRYPTO_ALGNAME);
    for (int count = 0; count < 100; count++) {
        fprintf(fp, "count = %d\n", count);
        fprintBstr(fp, "seed = ", seed[count], 48);
        randombytes_init(seed[count], NULL, 256);
        if (crypto_kem_keypair(pk, sk) != 0) return 2;
        fprintBstr(fp, "pk = ", pk, CRYPTO_PUBLICKEYBYTES);
        fprintBstr(fp, "sk = ", sk, CRYPTO_SECRETKEYBYTES);
        if (crypto_kem_enc(ct, ss, pk) != 0) return 3;
        fprintBstr(fp, "ct = ", ct, CRYPTO_CIPHERTEXTBYTES);
        fprintBstr(fp, "ss = ", ss, CRYPTO_BYTES);
        fprintf(fp, "\n");
        if (crypto_kem_dec(ss1, ct, sk) != 0) return 4;
        if (memcmp(ss, ss1, CRYPTO_BYTES) != 0) return 5;
    }
    fclose(fp);
    return 0;
}
"##;

/// FrodoKEM's AES-128 through OpenSSL's EVP (as FrodoKEM's own `USE_OPENSSL` build).
pub const AES_OPENSSL_H: &str = r#"/* AES-128 ECB through OpenSSL (written for ngcc-pipe's tests). */
#ifndef AES_H
#define AES_H
#include <stddef.h>
#define AES_BLOCKBYTES 16
typedef struct { unsigned char key[16]; } aes128ctx;
void aes128_ecb_keyexp(aes128ctx *r, const unsigned char *key);
void aes128_ecb(unsigned char *out, const unsigned char *in, size_t nblocks, const aes128ctx *ctx);
void aes128_ctx_release(aes128ctx *r);
#endif
"#;

pub const AES_OPENSSL_C: &str = r#"/* AES-128 ECB through OpenSSL's EVP (written for ngcc-pipe's tests). */
#include <string.h>
#include <openssl/evp.h>
#include "aes.h"

void aes128_ecb_keyexp(aes128ctx *r, const unsigned char *key) { memcpy(r->key, key, 16); }

void aes128_ecb(unsigned char *out, const unsigned char *in, size_t nblocks, const aes128ctx *ctx) {
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len;
    EVP_EncryptInit_ex(c, EVP_aes_128_ecb(), NULL, ctx->key, NULL);
    EVP_CIPHER_CTX_set_padding(c, 0);
    EVP_EncryptUpdate(c, out, &len, in, (int)(nblocks * 16));
    EVP_CIPHER_CTX_free(c);
}

void aes128_ctx_release(aes128ctx *r) { memset(r, 0, sizeof *r); }
"#;

/// One parameter set to make from a PQClean folder.
pub struct ParamSpec<'a> {
    /// PQClean's folder, relative to `pqclean/` (`crypto_kem/ml-kem-512/clean`).
    pub from: &'a str,
    /// The namespace to remove (`PQCLEAN_MLKEM512_CLEAN_`).
    pub namespace: &'a str,
    /// The folder name under `crypto_kem/`.
    pub name: &'a str,
    /// PQClean `common/` files to copy beside the sources.
    pub common: &'a [&'a str],
    /// Files written instead of (or besides) PQClean's: (name, text).
    pub own: Vec<(&'a str, String)>,
    /// api.h sizes through `params.h` (`#define CRYPTO_SECRETKEYBYTES KYBER_SECRETKEYBYTES`).
    pub api_via_params: Option<&'a str>,
    /// `rng.c` with OpenSSL's AES (else PQClean's `aes.c`, which is then copied).
    pub rng_openssl: bool,
}

/// Makes `<pkg>/<impl>/crypto_kem/<name>/` from `spec`.
pub fn make_param(
    pqclean: &Path,
    pkg: &Path,
    implementation: &str,
    spec: &ParamSpec<'_>,
) -> PathBuf {
    let dir = pkg.join(implementation).join("crypto_kem").join(spec.name);
    std::fs::create_dir_all(&dir).unwrap();
    // Without the prefix, PQClean's `#define CRYPTO_BYTES PQCLEAN_..._CRYPTO_BYTES`
    // (FrodoKEM's params.h) would define a name as itself: such lines go.
    let strip = |text: &str| {
        let text = text
            .replace(spec.namespace, "")
            .replace("#include \"randombytes.h\"", "#include \"rng.h\"");
        text.lines()
            .filter(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                !(w.len() == 3 && w[0] == "#define" && w[1] == w[2])
            })
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    for e in std::fs::read_dir(pqclean.join(spec.from))
        .unwrap()
        .flatten()
    {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if [".c", ".h", ".S", ".inc"].iter().any(|x| name.ends_with(x)) {
            std::fs::write(
                dir.join(&name),
                strip(&std::fs::read_to_string(&p).unwrap()),
            )
            .unwrap();
        }
    }
    let mut common: Vec<&str> = spec.common.to_vec();
    if !spec.rng_openssl {
        common.extend(["aes.c", "aes.h"]);
    }
    for c in common {
        if spec.own.iter().any(|(n, _)| *n == c) {
            continue;
        }
        std::fs::copy(pqclean.join("common").join(c), dir.join(c)).unwrap();
    }
    for (n, text) in &spec.own {
        std::fs::write(dir.join(n), text).unwrap();
    }
    if let Some(alg) = spec.api_via_params {
        std::fs::write(
            dir.join("api.h"),
            format!(
                "#ifndef API_H\n#define API_H\n#include <stdint.h>\n#include \"params.h\"\n\n\
                 #define CRYPTO_SECRETKEYBYTES  KYBER_SECRETKEYBYTES\n\
                 #define CRYPTO_PUBLICKEYBYTES  KYBER_PUBLICKEYBYTES\n\
                 #define CRYPTO_CIPHERTEXTBYTES KYBER_CIPHERTEXTBYTES\n\
                 #define CRYPTO_BYTES           KYBER_SSBYTES\n\
                 #define CRYPTO_ALGNAME \"{alg}\"\n\n\
                 int crypto_kem_keypair(uint8_t *pk, uint8_t *sk);\n\
                 int crypto_kem_enc(uint8_t *ct, uint8_t *ss, const uint8_t *pk);\n\
                 int crypto_kem_dec(uint8_t *ss, const uint8_t *ct, const uint8_t *sk);\n#endif\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(dir.join("rng.h"), RNG_H).unwrap();
    std::fs::write(dir.join("rng.c"), rng_c(spec.rng_openssl)).unwrap();
    std::fs::write(dir.join("PQCgenKAT_kem.c"), GENKAT_C).unwrap();
    dir
}

/// Compiles the folder's `PQCgenKAT_kem` (every `.c` of it) with its own `rng.c`, runs it
/// and moves its `.rsp` to `<pkg>/KAT/crypto_kem/<name>/`; returns that file.
pub fn submitted_kat(pkg: &Path, param_dir: &Path, name: &str, openssl: bool) -> PathBuf {
    let work = tempfile::tempdir().unwrap();
    let exe = work.path().join("PQCgenKAT_kem");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(param_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    sources.sort();
    let mut cc = Command::new("cc");
    cc.args(["-O2", "-std=c99", "-o"])
        .arg(&exe)
        .args(&sources)
        .arg(format!("-I{}", param_dir.display()));
    if openssl {
        cc.arg("-lcrypto");
    }
    let out = cc.output().unwrap();
    assert!(
        out.status.success(),
        "PQCgenKAT_kem of {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = Command::new(&exe)
        .current_dir(work.path())
        .status()
        .unwrap();
    assert!(st.success(), "PQCgenKAT_kem of {name} failed: {st}");
    let rsp = std::fs::read_dir(work.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "rsp"))
        .expect("PQCgenKAT_kem wrote an .rsp");
    let dest = pkg.join("KAT/crypto_kem").join(name);
    std::fs::create_dir_all(&dest).unwrap();
    let to = dest.join(rsp.file_name().unwrap());
    std::fs::copy(&rsp, &to).unwrap();
    to
}

/// ML-KEM-512/768/1024 reference, a Makefile per parameter set; api.h takes its sizes
/// from params.h. Returns the package folder.
pub fn ml_kem(mlkem: &Path, pkgs: &Path, levels: &[&str]) -> PathBuf {
    let pkg = pkgs.join("ML-KEM");
    for level in levels {
        let makefile = "CC ?= cc\nCFLAGS ?= -O3 -std=c99 -Wall -Wextra\nSOURCES = $(wildcard *.c)\n\nPQCgenKAT_kem: $(SOURCES)\n\t$(CC) $(CFLAGS) -o $@ $(SOURCES)\n";
        let dir = ml_kem_param(
            mlkem,
            &pkg,
            level,
            ("clean", "Reference_Implementation"),
            ("Makefile", makefile),
        );
        submitted_kat(&pkg, &dir, &format!("ml-kem-{level}"), false);
    }
    pkg
}

/// One parameter set of ML-KEM-<level> from PQClean's `variant` folder (`clean`, `avx2`)
/// into `<pkg>/<implementation>/crypto_kem/ml-kem-<level>/`, with the build file `own`
/// (name, text) and an api.h that takes its sizes from params.h.
fn ml_kem_param(
    mlkem: &Path,
    pkg: &Path,
    level: &str,
    (variant, implementation): (&str, &str),
    (file, text): (&str, &str),
) -> PathBuf {
    let (from, ns, name, alg) = (
        format!("crypto_kem/ml-kem-{level}/{variant}"),
        format!("PQCLEAN_MLKEM{level}_{}_", variant.to_uppercase()),
        format!("ml-kem-{level}"),
        format!("ML-KEM-{level}"),
    );
    let spec = ParamSpec {
        from: &from,
        namespace: &ns,
        name: &name,
        common: &["fips202.c", "fips202.h", "compat.h"],
        own: vec![(file, text.to_string())],
        api_via_params: Some(&alg),
        rng_openssl: false,
    };
    make_param(mlkem, pkg, implementation, &spec)
}

/// A round-3-style optimized implementation of ML-KEM-<level> beside the reference of
/// [`ml_kem`]: PQClean's AVX2 code (C, `.S` and `.inc` files), the 4-way Keccak in a
/// `keccak4x/` subfolder, and a plain `build.sh` that names the subfolder's source, its
/// `-I` and the `-m` flags; the submitted KAT is the reference's (the same answers).
/// Returns the implementation's folder.
pub fn ml_kem_avx2(mlkem: &Path, pkg: &Path, level: &str) -> PathBuf {
    let build = "#!/bin/sh\nset -e\ncc -O3 -std=c99 -mavx2 -mbmi2 -mpopcnt -Ikeccak4x -o PQCgenKAT_kem *.c *.S keccak4x/KeccakP-1600-times4-SIMD256.c\n";
    let dir = ml_kem_param(
        mlkem,
        pkg,
        level,
        ("avx2", "Optimized_Implementation"),
        ("build.sh", build),
    );
    let k4 = dir.join("keccak4x");
    std::fs::create_dir(&k4).unwrap();
    for e in std::fs::read_dir(mlkem.join("common/keccak4x"))
        .unwrap()
        .flatten()
    {
        let n = e.file_name().to_string_lossy().into_owned();
        if [".c", ".h", ".macros"].iter().any(|x| n.ends_with(x)) {
            std::fs::copy(e.path(), k4.join(&n)).unwrap();
        }
    }
    dir
}

/// FrodoKEM-<level>-SHAKE reference and optimized (the latter built with `-mavx2`), a
/// CMakeLists.txt per folder, in `pkgs/<folder>`.
pub fn frodo_shake(frodo: &Path, pkgs: &Path, folder: &str, level: &str) -> PathBuf {
    let pkg = pkgs.join(folder);
    let name = format!("frodo{level}shake");
    for (imp, from, flags) in [
        ("Reference_Implementation", "clean", "-O3"),
        ("Optimized_Implementation", "opt", "-O3 -mavx2"),
    ] {
        let cmake = format!(
            "cmake_minimum_required(VERSION 3.10)\nproject({name} C)\nset(CMAKE_C_FLAGS \"${{CMAKE_C_FLAGS}} {flags}\")\nfile(GLOB SOURCES *.c)\nadd_executable(PQCgenKAT_kem ${{SOURCES}})\n"
        );
        let path = format!("crypto_kem/frodokem{level}shake/{from}");
        let ns = format!("PQCLEAN_FRODOKEM{level}SHAKE_{}_", from.to_uppercase());
        let spec = ParamSpec {
            from: &path,
            namespace: &ns,
            name: &name,
            common: &["fips202.c", "fips202.h"],
            own: vec![("CMakeLists.txt", cmake)],
            api_via_params: None,
            rng_openssl: false,
        };
        let dir = make_param(frodo, &pkg, imp, &spec);
        if from == "clean" {
            submitted_kat(&pkg, &dir, &name, false);
        }
    }
    pkg
}

/// FrodoKEM-640-AES (its AES-128 through OpenSSL's EVP) and FrodoKEM-976-AES (PQClean's
/// own AES), reference; the package's rng.c uses OpenSSL as NIST's does.
pub fn frodo_aes(frodo: &Path, pkgs: &Path) -> PathBuf {
    let pkg = pkgs.join("FrodoKEM-AES");
    let makefile = "CC ?= cc\nCFLAGS ?= -O3 -std=c99\nLDFLAGS = -lcrypto\nSOURCES = $(wildcard *.c)\n\nPQCgenKAT_kem: $(SOURCES)\n\t$(CC) $(CFLAGS) -o $@ $(SOURCES) $(LDFLAGS)\n".to_string();
    for (level, own_aes) in [("640", false), ("976", true)] {
        let name = format!("frodo{level}aes");
        let mut own = vec![("Makefile", makefile.clone())];
        let common: &[&str] = if own_aes {
            &["fips202.c", "fips202.h", "aes.c", "aes.h"]
        } else {
            own.push(("aes.h", AES_OPENSSL_H.to_string()));
            own.push(("aes_openssl.c", AES_OPENSSL_C.to_string()));
            &["fips202.c", "fips202.h"]
        };
        let (path, ns) = (
            format!("crypto_kem/frodokem{level}aes/clean"),
            format!("PQCLEAN_FRODOKEM{level}AES_CLEAN_"),
        );
        let spec = ParamSpec {
            from: &path,
            namespace: &ns,
            name: &name,
            common,
            own,
            api_via_params: None,
            rng_openssl: true,
        };
        let dir = make_param(frodo, &pkg, "Reference_Implementation", &spec);
        submitted_kat(&pkg, &dir, &name, true);
    }
    pkg
}

/// `dir` packed as `<archive>` (`.tar.gz`), its entries under the folder's own name.
pub fn tar_gz(dir: &Path, archive: &Path) {
    let f = std::fs::File::create(archive).unwrap();
    let gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
    let mut b = tar::Builder::new(gz);
    b.append_dir_all(dir.file_name().unwrap(), dir).unwrap();
    b.into_inner().unwrap().finish().unwrap();
}

/// The first CPU this process may run on (`Cpus_allowed_list` of /proc/self/status).
pub fn allowed_cpu() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| l.trim().split([',', '-']).next().map(str::to_string))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub fn ngcc(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let exe = Path::new(env!("CARGO_BIN_EXE_ngcc-pipe"));
    let mut cmd = Command::new(exe);
    cmd.current_dir(dir).env("NO_COLOR", "1").args(args);
    if let Some(runner) = exe
        .parent()
        .map(|d| d.join("kem-runner"))
        .filter(|r| r.is_file())
    {
        cmd.env("NGCC_KEM_RUNNER", runner);
    }
    let out = cmd.output().expect("ngcc-pipe starts");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = ngcc(dir, args);
    assert_eq!(
        code, 0,
        "ngcc-pipe {args:?}\n--- stdout\n{out}\n--- stderr\n{err}"
    );
    out
}

/// Whether this CPU has `flag` (a `/proc/cpuinfo` name: its `flags` on x86, `Features` on
/// Arm).
pub fn cpu_has(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("flags") || l.starts_with("Features"))
        .any(|l| l.split_whitespace().any(|f| f == flag))
}

/// ML-KEM-512's reference package ([`ml_kem`]) made under `dir/pkgs` from the crate's
/// PQClean sources and imported into `dir/subs`; returns the package folder.
pub fn imported_ml_kem_512(dir: &Path) -> PathBuf {
    let mlkem = pqclean("pqcrypto-mlkem", "0.1.1", &dir.join("crates"));
    let pkg = ml_kem(&mlkem, &dir.join("pkgs"), &["512"]);
    ok(
        dir,
        &["import", &pkg.display().to_string(), "--into", "subs"],
    );
    pkg
}

/// `lines` written into the imported ML-KEM manifest under `dir/subs` right after its
/// `api "nist"` line (an edit a team makes by hand); returns the new text.
pub fn add_after_api(dir: &Path, lines: &str) -> String {
    let path = dir.join("subs/ML-KEM/manifest.kdl");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replacen(
        "    api \"nist\"\n",
        &format!("    api \"nist\"\n{lines}"),
        1,
    );
    std::fs::write(&path, &text).unwrap();
    text
}

/// What a team does with an imported package, checked: `check --deep` of the campaign in
/// `dir` with KAT modes `modes`, then its run, both succeeding unedited, then every KAT mode
/// of each of `instances` of submission `sub` PASS. Returns what the check printed.
pub fn check_run_pass(dir: &Path, modes: &str, sub: &str, instances: &[&str]) -> String {
    let p = pipeline(dir, modes, false);
    let checked = ok(dir, &["check", "--deep", &p.display().to_string()]);
    ok(dir, &["run", &p.display().to_string()]);
    for inst in instances {
        for (mode, status, reason) in kat_modes(&dir.join("out"), sub, inst) {
            assert_eq!(status, KatStatus::Pass, "{inst} {mode:?}: {reason:?}");
        }
    }
    checked
}

pub fn rec(out: &Path, kind: StepKind, sub: &str, inst: &str, op: Option<Op>) -> StepRecord {
    let p = out.join(record::record_path(kind, sub, Some(inst), op));
    record::read_json(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .unwrap_or_else(|| panic!("no record {}", p.display()))
}

/// A work folder whose path holds a space.
pub fn work() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("nist pkgs")
        .tempdir()
        .unwrap()
}

pub fn pipeline(dir: &Path, modes: &str, timing: bool) -> PathBuf {
    let mut text = format!(
        "system \"nist\" {{\n    bench-cpu {}\n    cc \"cc\"\n}}\nflags \"guide\" \"-O2\"\nsubmissions \"subs/*/manifest.kdl\"\nsubmissions-root \".\"\noutputs \"out\"\ndefaults timeout=\"20m\"\nstep \"source\"\nstep \"build\" needs=\"source\" flags=\"guide\"\nstep \"kat\" needs=\"build\" modes=\"{modes}\"\n",
        allowed_cpu()
    );
    if timing {
        text.push_str("step \"time\" needs=\"kat\" exclusive=#true ops=\"keygen\" trials=1 trial=\"20ms\" min-iters=2 samples=3\n");
        text.push_str("step \"report\" needs=\"kat time\"\n");
    }
    let p = dir.join("campaign.kdl");
    std::fs::write(&p, text).unwrap();
    p
}

/// The `kat` record's modes of one instance: (mode, status, reason).
pub fn kat_modes(out: &Path, sub: &str, inst: &str) -> Vec<(KatMode, KatStatus, Option<String>)> {
    let kat = rec(out, StepKind::Kat, sub, inst, None);
    let Some(StepData::Kat(k)) = &kat.data else {
        panic!("{sub}/{inst}: kat {:?}: {:?}", kat.status, kat.reason)
    };
    k.modes
        .iter()
        .map(|m| (m.mode, m.status, m.reason.clone()))
        .collect()
}

/// `text` without whitespace and the box-drawing rule miette wraps lines with.
pub fn squash(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && *c != '│')
        .collect()
}
