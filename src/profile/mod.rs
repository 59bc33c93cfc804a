//! The profile build: link-time wrappers around the provided symmetric primitives.
//!
//! [`prototype`] reads the C prototypes of the declared header(s) (nom);
//! [`wrappers`] turns them into one generated C file of `__wrap_SYM` functions plus a small
//! counter table the runner reads with `dlsym`, and gives the `-Wl,--wrap=SYM` link flags.
//! [`provided_symbols_used`] answers "which provided functions does this instance call at
//! all", from the object files, to help write or check a manifest's `hash` list.
//!
//! How the engine uses it (build step, profile variant):
//! 1. compile the primitives' sources into their own `.o` files (never in the same
//!    translation unit as the instance or the wrappers: `--wrap` only redirects references
//!    between object files);
//! 2. write [`generate_wrappers`]'s output to `prof_wrappers.c`, compile it with
//!    `-I <source root>` and the primitives' include folders;
//! 3. link instance objects + primitive objects + wrappers + DRNG shim with
//!    [`wrap_link_flags`].

pub mod prototype;
pub mod wrappers;

use std::collections::BTreeSet;
use std::path::PathBuf;

pub use prototype::{parse_header, parse_prototypes, HeaderDecls, Param, Prototype};
pub use wrappers::{generate_wrappers, wrap_link_flags, DRNG_FAMILY};

use crate::survey::read_object_symbols;

/// Provided symbols the instance uses: symbols undefined in some instance object and
/// defined (as global functions) in some primitive object, sorted.
pub fn provided_symbols_used(
    instance_objects: &[PathBuf],
    primitive_objects: &[PathBuf],
) -> Result<Vec<String>, String> {
    let mut defined = BTreeSet::new();
    for o in primitive_objects {
        let s = read_object_symbols(o)?;
        defined.extend(s.defined.into_iter().filter(|d| d.global).map(|d| d.name));
    }
    let mut used = BTreeSet::new();
    for o in instance_objects {
        let s = read_object_symbols(o)?;
        used.extend(s.undefined.into_iter().filter(|u| defined.contains(u)));
    }
    Ok(used.into_iter().collect())
}
