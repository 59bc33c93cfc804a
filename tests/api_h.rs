//! `api.h` of real KEMs: the sizes and algorithm names `kem_native::api::parse_api_h` reads
//! from PQClean trees (the crates `pqcrypto-mlkem` 0.1.1 and `pqcrypto-frodo` 0.4.11,
//! fetched with cargo as the `source` step does), against the sizes those schemes publish.
//!
//! Needs the crates (group `crates`, see `tests/common/require.rs`).

mod common;
use common::*;

#[test]
fn real_api_h_files_give_the_published_sizes() {
    if !require_crates(&[MLKEM_CRATE, FRODO_CRATE]) {
        return;
    }
    // crate, instance folder, namespace, (pk, sk, ct, ss), algorithm name.
    let cases = [
        (
            MLKEM_CRATE,
            "ml-kem-768/clean",
            "PQCLEAN_MLKEM768_CLEAN_",
            (1184, 2400, 1088, 32),
            "ML-KEM-768",
        ),
        (
            MLKEM_CRATE,
            "hqc-128/clean",
            "PQCLEAN_HQC128_CLEAN_",
            (2249, 2305, 4433, 64),
            "HQC-128",
        ),
        (
            MLKEM_CRATE,
            "mceliece348864/clean",
            "PQCLEAN_MCELIECE348864_CLEAN_",
            (261120, 6492, 96, 32),
            "Classic McEliece 348864",
        ),
        (
            FRODO_CRATE,
            "frodokem640aes/clean",
            "PQCLEAN_FRODOKEM640AES_CLEAN_",
            (9616, 19888, 9720, 16),
            "FrodoKEM-640-AES",
        ),
    ];
    for ((name, version), dir, ns, (pk, sk, ct, ss), alg) in cases {
        let tree = registry_crate(name, version)
            .expect("required above")
            .join("pqclean");
        let path = tree.join("crypto_kem").join(dir).join("api.h");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let s = kem_native::api::parse_api_h(&text, ns).unwrap();
        assert_eq!((s.pk, s.sk, s.ct, s.ss), (pk, sk, ct, ss), "{dir}");
        assert_eq!(s.algname.as_deref(), Some(alg), "{dir}");
    }
}
