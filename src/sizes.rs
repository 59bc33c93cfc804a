//! Section 6 sizes and the size audit.
//!
//! Three sources describe an instance's pk/sk/ct/ss lengths: the instance's `api.h`
//! (parsed by the build step into [`ApiSizes`]), the external catalog the submission
//! declares (a `sizes` block or `sizes.csv`, lowered by the DSL into [`CatalogSizes`]) and
//! what the KAT actually wrote (hex lengths in count 0 of the generated `.rsp`,
//! [`kat_sizes`]). The report shows catalog pk and ct when present and API sk and ss, as the
//! reference reports do; [`audit`] lists every disagreement among the three.

use crate::model::CatalogSizes;
use crate::record::{ApiSizes, SizesData};
use crate::rsp::parse_rsp;

/// Build the sizes record: the figures shown and one audit line per disagreement.
///
/// Audit lines look like `pk: catalog 800, api.h 801` or
/// `ct: catalog 768, api.h 768, KAT 760` (every source that has a figure is named, so
/// the reader sees which one is the odd one out). A catalog without a figure for a field
/// is not a disagreement.
pub fn audit(api: &ApiSizes, catalog: &CatalogSizes, kat: Option<&CatalogSizes>) -> SizesData {
    let fields: [(&str, u64, Option<u64>, Option<u64>); 4] = [
        ("pk", api.pk, catalog.pk, kat.and_then(|k| k.pk)),
        ("sk", api.sk, catalog.sk, kat.and_then(|k| k.sk)),
        ("ct", api.ct, catalog.ct, kat.and_then(|k| k.ct)),
        ("ss", api.ss, catalog.ss, kat.and_then(|k| k.ss)),
    ];
    let mut lines = Vec::new();
    for (name, api_v, cat_v, kat_v) in fields {
        let values: Vec<u64> = [Some(api_v), cat_v, kat_v].into_iter().flatten().collect();
        if values.iter().all(|v| *v == api_v) {
            continue;
        }
        let mut parts = Vec::new();
        if let Some(c) = cat_v {
            parts.push(format!("catalog {c}"));
        }
        parts.push(format!("api.h {api_v}"));
        if let Some(k) = kat_v {
            parts.push(format!("KAT {k}"));
        }
        lines.push(format!("{name}: {}", parts.join(", ")));
    }
    SizesData {
        api: api.clone(),
        catalog: *catalog,
        kat: kat.copied(),
        shown: CatalogSizes {
            pk: Some(catalog.pk.unwrap_or(api.pk)),
            sk: Some(api.sk),
            ct: Some(catalog.ct.unwrap_or(api.ct)),
            ss: Some(api.ss),
        },
        audit: lines,
    }
}

/// Why a `.rsp` text gives no sizes.
#[derive(Debug, thiserror::Error)]
pub enum KatSizesError {
    /// Not `.rsp` text.
    #[error("{0}")]
    Rsp(String),
    /// No count 0.
    #[error("the .rsp has no `count = 0` entry")]
    NoCount0,
}

/// Byte lengths of pk, sk, ct and ss in count 0 of a generated `.rsp` text.
///
/// A field absent from count 0 stays `None`; a file without count 0 is an error.
pub fn kat_sizes(rsp_text: &str) -> Result<CatalogSizes, KatSizesError> {
    let entries = parse_rsp(rsp_text).map_err(KatSizesError::Rsp)?;
    let entry = entries
        .iter()
        .find(|e| e.count == 0)
        .ok_or(KatSizesError::NoCount0)?;
    let len = |name: &str| entry.field(name).map(|v| v.len() as u64);
    Ok(CatalogSizes {
        pk: len("pk"),
        sk: len("sk"),
        ct: len("ct"),
        ss: len("ss"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> ApiSizes {
        ApiSizes {
            algname: Some("ML-KEM-512".into()),
            pk: 800,
            sk: 1632,
            ct: 768,
            ss: 32,
        }
    }

    fn all(pk: u64, sk: u64, ct: u64, ss: u64) -> CatalogSizes {
        CatalogSizes {
            pk: Some(pk),
            sk: Some(sk),
            ct: Some(ct),
            ss: Some(ss),
        }
    }

    #[test]
    fn agreement_gives_an_empty_audit() {
        let d = audit(
            &api(),
            &all(800, 1632, 768, 32),
            Some(&all(800, 1632, 768, 32)),
        );
        assert!(d.audit.is_empty(), "{:?}", d.audit);
        assert_eq!(d.shown, all(800, 1632, 768, 32));
    }

    #[test]
    fn catalog_pk_disagreeing_with_api_is_listed_and_shown() {
        let d = audit(&api(), &all(801, 1632, 768, 32), None);
        assert_eq!(d.audit, ["pk: catalog 801, api.h 800"]);
        // The table shows the catalog's pk and ct, the API's sk and ss.
        assert_eq!(d.shown.pk, Some(801));
        let d = audit(&api(), &all(800, 1600, 760, 16), None);
        assert_eq!(d.shown, all(800, 1632, 760, 32));
        assert_eq!(
            d.audit,
            [
                "sk: catalog 1600, api.h 1632",
                "ct: catalog 760, api.h 768",
                "ss: catalog 16, api.h 32"
            ]
        );
    }

    #[test]
    fn kat_disagreement_names_all_three_sources() {
        let d = audit(
            &api(),
            &all(800, 1632, 768, 32),
            Some(&all(800, 1632, 784, 32)),
        );
        assert_eq!(d.audit, ["ct: catalog 768, api.h 768, KAT 784"]);
    }

    #[test]
    fn missing_catalog_falls_back_to_api() {
        let d = audit(&api(), &CatalogSizes::default(), None);
        assert!(d.audit.is_empty());
        assert_eq!(d.shown, all(800, 1632, 768, 32));
        let d = audit(
            &api(),
            &CatalogSizes::default(),
            Some(&all(800, 1632, 768, 24)),
        );
        assert_eq!(d.audit, ["ss: api.h 32, KAT 24"]);
    }

    #[test]
    fn kat_sizes_reads_count_0() {
        let text = "# x\n\ncount = 0\nseed = 00\npk = 010203\nsk = 04\nct = 0506\nss = 0708090A\n\ncount = 1\npk = 01\n";
        assert_eq!(kat_sizes(text).unwrap(), all(3, 1, 2, 4));
        let partial = kat_sizes("count = 0\npk = 0102\n").unwrap();
        assert_eq!(partial.pk, Some(2));
        assert_eq!(partial.ct, None);
        assert!(kat_sizes("count = 1\npk = 00\n")
            .unwrap_err()
            .to_string()
            .contains("count = 0"));
        assert!(kat_sizes("count = 0\npk = 0\n")
            .unwrap_err()
            .to_string()
            .contains("line 2"));
    }
}
