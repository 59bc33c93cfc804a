//! Objects shared between the builds of a run: the provided primitives, compiled once per
//! (source root, compiler, flags) and used by every instance's plain and valgrind object.
//! One module for both, so the two objects name, key and fail their shared compiles alike.

use std::path::{Path, PathBuf};

use super::compiler::Compiler;
use super::StepError;
use crate::run::keys::sha256_hex;

/// The key of primitives' objects shared between instances: the source root, the compiler,
/// the flags and the sources.
pub(super) fn shared_key<S: std::fmt::Debug>(
    root: &Path,
    cc: &str,
    flags: &[String],
    includes: &[String],
    sources: &[S],
) -> String {
    let mut all = flags.to_vec();
    all.extend(includes.iter().cloned());
    sha256_hex(format!("{}|{}|{:?}|{:?}", root.display(), cc, all, sources).as_bytes())
}

/// The objects of `sources` compiled into `dir` with `flags`, once per `key` among all the
/// builds of a run (the others wait for the first and take its objects or its failure).
pub(super) fn shared_objects(
    c: &mut Compiler,
    key: &str,
    dir: &Path,
    sources: &[PathBuf],
    flags: &[String],
    what: &'static str,
) -> Result<Vec<PathBuf>, StepError> {
    let ctx = c.step.ctx;
    let mut failure = None;
    let result = ctx.shared_objects.get(key, || {
        let mut objs = Vec::new();
        for (i, src) in sources.iter().enumerate() {
            let obj = dir.join(format!("{i:03}-{}.o", stem(src)));
            if let Err(e) = c.compile(src, &obj, flags) {
                let reason = e.to_string();
                failure = Some(e);
                return Err(reason);
            }
            objs.push(obj);
        }
        Ok(objs)
    });
    match (result, failure) {
        (Ok(o), _) => Ok(o),
        (Err(_), Some(d)) => Err(d),
        (Err(reason), None) => Err(StepError::SharedFailed { what, reason }),
    }
}

pub(super) fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}
