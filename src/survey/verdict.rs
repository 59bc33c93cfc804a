//! The verdict and its one-line summary from the evidence (see the rules in the
//! [module doc](super)).

use std::collections::{BTreeMap, BTreeSet};

use super::sources::{family_of_symbol, family_title};
use crate::record::{OwnSymbol, SourceHit, Verdict};

/// Verdict and one-line summary from the evidence; families of provided symbols are
/// guessed from their names (`shake256` -> keccak, `aes128_ecb` -> aes).
pub fn verdict(
    hits: &[SourceHit],
    own: &[OwnSymbol],
    provided_used: &[String],
) -> (Verdict, String) {
    verdict_with(hits, own, provided_used, true, &|s| {
        family_of_symbol(s).map(str::to_string)
    })
}

/// [`verdict`] with the families of provided symbols from `provided_family`;
/// `has_provided` is false when the submission declares no provided library at all (a
/// NIST-round package brings all its symmetric code), which the summary then says.
pub(super) fn verdict_with(
    hits: &[SourceHit],
    own: &[OwnSymbol],
    provided_used: &[String],
    has_provided: bool,
    provided_family: &dyn Fn(&str) -> Option<String>,
) -> (Verdict, String) {
    // family -> evidence (symbol names, else file:line)
    let mut own_fams: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in own.iter().filter(|s| s.referenced) {
        let ev = own_fams.entry(s.family.clone()).or_default();
        if ev.len() < 4 {
            ev.push(s.name.clone());
        }
    }
    // Source lines are evidence only for families no symbol speaks for (inline code).
    let by_symbol: BTreeSet<String> = own_fams.keys().cloned().collect();
    for h in hits
        .iter()
        .filter(|h| h.reachable && !by_symbol.contains(&h.family))
    {
        let ev = own_fams.entry(h.family.clone()).or_default();
        if ev.len() < 2 && !ev.iter().any(|e| e.starts_with(&format!("{}:", h.file))) {
            ev.push(format!("{}:{}", h.file, h.line));
        }
    }
    let mut provided_fams: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for p in provided_used {
        if let Some(f) = provided_family(p) {
            provided_fams.entry(f).or_default().push(p);
        }
    }
    let dead: Vec<&SourceHit> = hits.iter().filter(|h| !h.reachable).collect();
    let dead_note = if dead.is_empty() {
        String::new()
    } else {
        let files: BTreeSet<&str> = dead.iter().map(|h| h.file.as_str()).collect();
        format!(
            "; {} source hit(s) not reachable ({})",
            dead.len(),
            files.into_iter().collect::<Vec<_>>().join(", ")
        )
    };
    let list = |v: &[&str]| {
        let mut s = v.iter().take(4).copied().collect::<Vec<_>>().join(", ");
        if v.len() > 4 {
            s.push_str(&format!(" (+{} more)", v.len() - 4));
        }
        s
    };
    if own_fams.is_empty() {
        let used: Vec<&str> = provided_used.iter().map(String::as_str).collect();
        let uses = if used.is_empty() {
            "no provided primitive referenced".to_string()
        } else {
            format!("references provided {}", list(&used))
        };
        return (
            Verdict::ProvidedOnly,
            format!(
                "provided-only: {uses}; no own implementation of a symmetric primitive \
                 reachable{dead_note}"
            ),
        );
    }
    let own_desc: Vec<String> = own_fams
        .iter()
        .map(|(f, ev)| format!("own {} ({})", family_title(f), ev.join(", ")))
        .collect();
    let overlapping: Vec<&String> = own_fams
        .keys()
        .filter(|f| provided_fams.contains_key(*f))
        .collect();
    if overlapping.is_empty() {
        let unused: Vec<&str> = own_fams
            .keys()
            .filter(|f| *f != "openssl")
            .map(|f| family_title(f))
            .collect();
        let tail = if !has_provided {
            "; no provided library declared".to_string()
        } else if unused.is_empty() {
            String::new()
        } else {
            format!("; provided {} unused", unused.join(", "))
        };
        (
            Verdict::Bypass,
            format!(
                "bypass — {} reachable{tail}{dead_note}",
                own_desc.join(", ")
            ),
        )
    } else {
        let alongside: Vec<String> = overlapping
            .iter()
            .map(|f| {
                format!(
                    "provided {} ({})",
                    family_title(f),
                    list(&provided_fams[*f])
                )
            })
            .collect();
        (
            Verdict::Mixed,
            format!(
                "mixed — {} reachable alongside {}{dead_note}",
                own_desc.join(", "),
                alongside.join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(file: &str, family: &str, reachable: bool) -> SourceHit {
        SourceHit {
            file: file.into(),
            line: 7,
            family: family.into(),
            text: "x".into(),
            reachable,
            note: None,
        }
    }

    fn own(name: &str, family: &str, referenced: bool) -> OwnSymbol {
        OwnSymbol {
            name: name.into(),
            family: family.into(),
            referenced,
        }
    }

    #[test]
    fn verdict_rules() {
        let (v, s) = verdict(
            &[hit("keccak.c", "keccak", false)],
            &[],
            &["shake256".into()],
        );
        assert_eq!(v, Verdict::ProvidedOnly);
        assert!(
            s.contains("references provided shake256") && s.contains("not reachable (keccak.c)"),
            "{s}"
        );

        let (v, s) = verdict(
            &[],
            &[own("KeccakF1600_StatePermute", "keccak", true)],
            &["PQCLEAN_randombytes".into()],
        );
        assert_eq!(v, Verdict::Bypass);
        assert!(
            s.contains("own Keccak (KeccakF1600_StatePermute)")
                && s.contains("provided Keccak unused"),
            "{s}"
        );

        let (v, s) = verdict(
            &[],
            &[own("my_keccak", "keccak", true)],
            &["shake256".into()],
        );
        assert_eq!(v, Verdict::Mixed);
        assert!(s.contains("alongside provided Keccak (shake256)"), "{s}");

        // An unreferenced own symbol is not evidence of use.
        let (v, _) = verdict(&[], &[own("my_keccak", "keccak", false)], &[]);
        assert_eq!(v, Verdict::ProvidedOnly);
        // Own AES while the provided Keccak is used: a bypass for AES.
        let (v, _) = verdict(&[hit("aes.c", "aes", true)], &[], &["shake256".into()]);
        assert_eq!(v, Verdict::Bypass);
        // A NIST package declares no provided library: nothing provided is "unused".
        let (v, s) = verdict_with(
            &[],
            &[own("KeccakF1600_StatePermute", "keccak", true)],
            &[],
            false,
            &|_| None,
        );
        assert_eq!(v, Verdict::Bypass);
        assert!(
            s.ends_with("reachable; no provided library declared"),
            "{s}"
        );
    }
}
