//! KATs against PQClean's meta hashes and liboqs' vectors.

use super::*;

#[test]
fn mlkem768_single_kat_matches_pqclean_meta() {
    let Some((so, api)) = mlkem768() else { return };
    let out = work_dir("kat").join("mlkem768-single.rsp");
    let (o, rec) = kat(
        &so,
        &api,
        "PQCLEAN_MLKEM768_CLEAN_",
        "nist",
        "single",
        "1",
        &out,
    );
    assert!(o.status.success(), "{rec:?}");
    let expected = meta_hash("ml-kem-768");
    assert_eq!(
        expected,
        "5352539586b6c3df58be6158a6250aeff402bd73060b0a3de68850ac074c17c3"
    );
    assert_eq!(rec.rsp_sha256, expected);
    assert_eq!((rec.counts, rec.failure.as_deref()), (1, None));
    assert_eq!(rec.sizes.algname.as_deref(), Some("ML-KEM-768"));
    // The evidence on disk is the hashed text.
    use sha2::Digest;
    let text = std::fs::read(&out).unwrap();
    assert_eq!(hex::encode(sha2::Sha256::digest(&text)), expected);
    assert!(text.starts_with(
        b"count = 0\nseed = 061550234D158C5EC95595FE04EF7A25767F2E24CC2BC479D09D86DC9ABCFDE7"
    ));
}

#[test]
fn hqc128_single_kat_matches_pqclean_meta() {
    let Some((so, api)) = pqclean_so("hqc-128", &["fips202.c"], None) else {
        return;
    };
    let out = work_dir("kat").join("hqc128-single.rsp");
    let (o, rec) = kat(
        &so,
        &api,
        "PQCLEAN_HQC128_CLEAN_",
        "hqc",
        "single",
        "1",
        &out,
    );
    assert!(o.status.success(), "{rec:?}");
    assert_eq!(rec.rsp_sha256, meta_hash("hqc-128"));
    assert_eq!(rec.rng, "hqc");
    // With the wrong generator the text must differ (the rng choice matters).
    let (_, nist) = kat(
        &so,
        &api,
        "PQCLEAN_HQC128_CLEAN_",
        "nist",
        "single",
        "1",
        &work_dir("kat").join("hqc128-nist.rsp"),
    );
    assert_ne!(nist.rsp_sha256, rec.rsp_sha256);
    // liboqs `kat_kem HQC-128 --all` uses the same SHAKE PRNG with saved/restored state.
    let Some(kats) = liboqs_kats() else { return };
    let (o, all) = kat(
        &so,
        &api,
        "PQCLEAN_HQC128_CLEAN_",
        "hqc",
        "all",
        "100",
        &work_dir("kat").join("hqc128-all.rsp"),
    );
    assert!(o.status.success(), "{all:?}");
    assert_eq!(all.rsp_sha256, kats["HQC-128"]["all"].as_str().unwrap());
}

#[test]
fn mlkem512_all_kat_matches_liboqs() {
    let Some(kats) = liboqs_kats() else { return };
    let Some((so, api)) = pqclean_so("ml-kem-512", &["fips202.c"], None) else {
        return;
    };
    let out = work_dir("kat").join("mlkem512-all.rsp");
    let (o, rec) = kat(
        &so,
        &api,
        "PQCLEAN_MLKEM512_CLEAN_",
        "nist",
        "all",
        "100",
        &out,
    );
    assert!(o.status.success(), "{rec:?}");
    assert_eq!(rec.counts, 100);
    assert_eq!(rec.rsp_sha256, kats["ML-KEM-512"]["all"].as_str().unwrap());
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\n\ncount = 99\n") && !text.ends_with("\n\n"));
    // One count in `all` mode is the `single` file.
    let (_, one) = kat(
        &so,
        &api,
        "PQCLEAN_MLKEM512_CLEAN_",
        "nist",
        "all",
        "1",
        &work_dir("kat").join("mlkem512-1.rsp"),
    );
    assert_eq!(
        one.rsp_sha256,
        kats["ML-KEM-512"]["single"].as_str().unwrap()
    );
}
