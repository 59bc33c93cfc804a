//! System libraries a submission links (`link "crypto"`), resolved once per run through
//! `crate::libs` (file, version, SHA-256). The build links the file by path, records all
//! three, and they are part of the build's cache key: another OpenSSL is another build.

use std::collections::BTreeMap;

use crate::model::Campaign;
use crate::record::LinkedLibrary;

/// Every library any instance of `c` links, resolved with `c`'s compiler; a library that
/// cannot be found maps to the reason.
pub fn resolve_all(c: &Campaign) -> BTreeMap<String, Result<LinkedLibrary, String>> {
    let mut out = BTreeMap::new();
    for sub in &c.submissions {
        for inst in &sub.instances {
            for l in &inst.libraries {
                if !out.contains_key(l) {
                    out.insert(l.clone(), crate::libs::resolve(&c.system.cc, l));
                }
            }
        }
    }
    out
}

/// The key input of a resolved (or missing) library.
pub fn key_text(l: &Result<LinkedLibrary, String>) -> String {
    match l {
        Ok(l) => format!("{} ({}) sha256 {}", l.real.display(), l.version, l.sha256),
        Err(e) => format!("missing: {e}"),
    }
}
