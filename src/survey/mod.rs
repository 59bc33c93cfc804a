//! Survey: which symmetric-crypto code a built instance really contains and uses.
//!
//! Two kinds of evidence, combined into a verdict:
//! - **source hits** ([`scan_sources`]): lines of the instance's sources (comments removed)
//!   that carry implementation markers of Keccak/SHA-3, SHA-2, AES, SM3, SM4, ChaCha or
//!   OpenSSL use: names like `KeccakF1600`, round constants, S-box bytes, `AESENC`
//!   intrinsics, `"expand 32-byte k"`, `#include <openssl/...>`, `EVP_` calls. Calls to the
//!   provided library (`shake256(...)`) are not markers. Only the first line per file,
//!   family and marker is kept.
//! - **symbols** ([`read_object_symbols`], object crate): defined functions, undefined
//!   symbols and relocations of the instance's and the primitives' `.o` files (the engine
//!   passes the objects it compiled before linking; for a shared object only dynamic
//!   relocations exist and local calls are invisible, hence the `.o` files).
//!
//! **Reachability rule** (an honest approximation, documented in the report's record):
//! the roots are the instance's API functions (`*crypto_kem_keypair/enc/dec`, or the
//! symbols given in [`SurveyInput::api_symbols`]). A symbol is reachable when a reachable
//! symbol's code or data contains a relocation naming it (global symbols are resolved
//! across all instance and primitive objects, as the linker would), or a relocation
//! against its section. Because the assembler resolves calls to `static` functions in the
//! same section without a relocation, every `static` function in the same section of the
//! same object as a reachable symbol is taken as reachable too (over-approximation: a
//! dead static helper next to live code counts as reachable; a dead *file* or a dead
//! *global* function does not). A source hit is reachable when its file is compiled and
//! the function enclosing the line (found by a simple scan back to the nearest function
//! header at column 0) is reachable in that file's object; when no enclosing function is
//! found (tables, macros) or the file has no object of its own (headers), the whole
//! object (for headers: any compiled object including it) decides.
//!
//! **Own symbols** are defined functions of the instance objects whose names say they
//! implement a family (`keccak`, `shake`, `sha3`, `sha256`, `aes`, `sm3`, ...), except
//! **glue**: an instance object that references a provided symbol of family F (ML-KEM's
//! `symmetric-shake.o` calls the provided `shake128_absorb`; avx2's `fips202x4.o` drives the
//! provided `KeccakP1600times4`), or that calls another instance object which is F-glue,
//! drives the provided F; its F-named functions are not own code, and its F *name*
//! markers (`keccak...` identifiers) are noted as glue instead of counted. Constant and
//! S-box markers always count. Consequence: extra sources that belong to the provided tree
//! (PQClean's `common/keccak4x`) must be passed as *primitive* sources and objects.
//!
//! **Verdict** ([`verdict`]): no reachable own code -> `provided-only`; own code reachable
//! and, for every family it implements, no provided symbol of that family used ->
//! `bypass`; otherwise `mixed`.
//!
//! The survey runs in phases, one file each: `sources` (markers in the instance's own
//! sources), `objects` (symbols and relocations of each object), `reach` (the symbol
//! graph and what the API reaches), `provided` (provided symbols used, glue, own
//! symbols), `hits` (source hits refined with the objects) and `verdict`.

mod hits;
mod objects;
mod provided;
mod reach;
mod sources;
mod verdict;

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::model::PrimitiveFn;
use crate::record::{SourceHit, SurveyData};

pub use objects::{read_object_symbols, DefinedSymbol, ObjSymbols, RelocEdge, RelocTarget};
pub use sources::{family_of_symbol, scan_sources};
pub use verdict::verdict;

#[derive(Debug, Clone, Default)]
pub struct SurveyInput {
    /// Source root (hit paths are shown relative to it).
    pub root: PathBuf,
    /// Every source and header file of the instance (its folder and extra sources).
    pub instance_sources: Vec<PathBuf>,
    /// The subset of `instance_sources` that is compiled.
    pub compiled: BTreeSet<PathBuf>,
    /// The provided primitives' sources (not scanned: they are the provided library).
    pub primitive_sources: Vec<PathBuf>,
    /// (source, object) for each compiled instance source, objects as compiled before
    /// linking.
    pub instance_objects: Vec<(PathBuf, PathBuf)>,
    /// The primitives' objects.
    pub primitive_objects: Vec<PathBuf>,
    /// Declared primitive functions (families used for "provided used for that purpose").
    pub primitives: Vec<PrimitiveFn>,
    /// Roots of reachability; empty: every global function containing `crypto_kem_`.
    pub api_symbols: Vec<String>,
    /// Symbol prefix of the instance (`PQCLEAN_FRODOKEM640AES_CLEAN_`), removed before a
    /// name is classified (its `AES` says nothing about a function). Empty: taken from the
    /// API symbols (the text before `crypto_kem_`).
    pub namespace: String,
}

impl SurveyInput {
    /// Whether `name` is a root of reachability (an API symbol).
    fn is_root(&self, name: &str) -> bool {
        if self.api_symbols.is_empty() {
            name.contains("crypto_kem_")
        } else {
            self.api_symbols.iter().any(|s| s == name)
        }
    }
}

/// Why the objects cannot be surveyed.
#[derive(Debug, thiserror::Error)]
pub enum SurveyError {
    /// An object that cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The object.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file that is not an object file.
    #[error("{} is not an object file: {source}", path.display())]
    NotObject {
        /// The file.
        path: PathBuf,
        /// Why.
        source: object::Error,
    },
    /// No API function to start from.
    #[error(
        "no global `crypto_kem_*` function in the instance objects: cannot tell what is reachable"
    )]
    NoApi,
    /// The declared API symbols are not defined.
    #[error("none of the API symbols {} is defined in the instance objects", .0.join(", "))]
    NoRoots(Vec<String>),
}

/// Scan, read the objects, decide.
pub fn survey(input: &SurveyInput) -> Result<SurveyData, SurveyError> {
    let root = &input.root;
    // The instance's own sources (the provided ones are the library, not scanned).
    let provided_files: BTreeSet<PathBuf> = input
        .primitive_sources
        .iter()
        .map(|p| sources::abs(root, p))
        .collect();
    let scanned: Vec<PathBuf> = input
        .instance_sources
        .iter()
        .filter(|p| !provided_files.contains(&sources::abs(root, p)))
        .cloned()
        .collect();
    let scanned_hits = sources::scan(root, &scanned, &input.compiled);
    let weak: Vec<bool> = scanned_hits.iter().map(|(_, w)| *w).collect();
    let mut hits: Vec<SourceHit> = scanned_hits.into_iter().map(|(h, _)| h).collect();

    let graph = reach::Graph::read(input)?;
    let roots = graph.roots(input)?;
    let reach = graph.reachable(&roots);

    let provided = provided::Provided::new(&graph, input);
    let glue = provided::glue(&graph, &provided);
    let own = provided::own_symbols(&graph, input, &roots, &reach, &glue);

    let is_glue = hits::refine(&mut hits, &weak, input, &graph, &reach, &glue);

    let provided_used: Vec<String> = provided.used.iter().cloned().collect();
    let evidence: Vec<SourceHit> = hits
        .iter()
        .zip(&is_glue)
        .filter(|(_, g)| !**g)
        .map(|(h, _)| h.clone())
        .collect();
    let has_provided = !(input.primitive_sources.is_empty() && input.primitives.is_empty());
    let (verdict, mut summary) =
        verdict::verdict_with(&evidence, &own, &provided_used, has_provided, &|s| {
            provided.family(s)
        });
    let glue_files: BTreeSet<&str> = hits
        .iter()
        .zip(&is_glue)
        .filter(|(_, g)| **g)
        .map(|(h, _)| h.file.as_str())
        .collect();
    if !glue_files.is_empty() {
        summary.push_str(&format!(
            "; {} only call{} provided primitives (glue code, not an implementation)",
            glue_files.iter().copied().collect::<Vec<_>>().join(", "),
            if glue_files.len() == 1 { "s" } else { "" }
        ));
    }
    Ok(SurveyData {
        verdict,
        summary,
        source_hits: hits,
        own_symbols: own,
        provided_used,
    })
}
