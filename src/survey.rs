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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget, SymbolKind,
};

use crate::model::PrimitiveFn;
use crate::profile::prototype::strip_comments;
use crate::record::{OwnSymbol, SourceHit, SurveyData, Verdict};

/// A source marker: family, what to look for and how.
struct Marker {
    family: &'static str,
    needle: &'static str,
    /// Compare lower-cased, with all whitespace removed from the line.
    squeeze: bool,
}

const fn m(family: &'static str, needle: &'static str, squeeze: bool) -> Marker {
    Marker {
        family,
        needle,
        squeeze,
    }
}

/// Markers that are names, not constants: on their own they may be glue code around the
/// provided library (ML-KEM avx2's `fips202x4.c` drives the provided `KeccakP1600times4`).
const NAME_MARKERS: &[&str] = &[
    "keccak",
    "crypto_hashblocks_sha",
    "sha256_compress",
    "sha512_compress",
    "rijndael",
    "sm3_compress",
    "quarterround",
];

/// Markers; `squeeze` ones are lower case without spaces.
const MARKERS: &[Marker] = &[
    m("keccak", "keccak", true),
    m("keccak", "0x0000000000008082", true),
    m("keccak", "0x800000000000808a", true),
    m("keccak", "0x8000000080008000", true),
    m("sha2", "0x428a2f98", true),
    m("sha2", "0x6a09e667", true),
    m("sha2", "crypto_hashblocks_sha", true),
    m("sha2", "sha256_compress", true),
    m("sha2", "sha512_compress", true),
    m("aes", "0x63,0x7c,0x77,0x7b", true),
    m("aes", "0xc66363a5", true),
    m("aes", "aesenc", true),
    m("aes", "aeskeygenassist", true),
    m("aes", "vaeseq_u8", true),
    m("aes", "rijndael", true),
    m("sm3", "0x7380166f", true),
    m("sm3", "0x79cc4519", true),
    m("sm3", "sm3_compress", true),
    m("sm4", "0xa3b1bac6", true),
    m("sm4", "0xd6,0x90,0xe9,0xfe", true),
    m("chacha", "expand 32-byte k", false),
    m("chacha", "quarterround", true),
    m("chacha", "0x61707865", true),
    m("openssl", "#include<openssl/", true),
    m("openssl", "EVP_", false),
    m("openssl", "SHA256_Init", false),
    m("openssl", "SHA512_Init", false),
    m("openssl", "AES_set_encrypt_key", false),
];

/// Name fragments (lower case) that say a function implements a family.
const NAME_FAMILIES: &[(&str, &str)] = &[
    ("keccak", "keccak"),
    ("shake", "keccak"),
    ("sha3", "keccak"),
    ("kmac", "keccak"),
    ("sha224", "sha2"),
    ("sha256", "sha2"),
    ("sha384", "sha2"),
    ("sha512", "sha2"),
    ("hashblocks", "sha2"),
    ("aes", "aes"),
    ("rijndael", "aes"),
    ("sm3", "sm3"),
    ("sm4", "sm4"),
    ("chacha", "chacha"),
    ("salsa20", "chacha"),
];

/// The family a symbol name suggests, if any.
pub fn family_of_symbol(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    NAME_FAMILIES
        .iter()
        .find(|(frag, _)| lower.contains(frag))
        .map(|(_, fam)| *fam)
}

fn family_title(family: &str) -> &str {
    match family {
        "keccak" => "Keccak",
        "sha2" => "SHA-2",
        "aes" => "AES",
        "sm3" => "SM3",
        "sm4" => "SM4",
        "chacha" => "ChaCha",
        "openssl" => "OpenSSL",
        other => other,
    }
}

fn rel_display(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .replace('\\', "/")
}

fn abs(root: &Path, file: &Path) -> PathBuf {
    if file.is_absolute() {
        file.to_path_buf()
    } else {
        root.join(file)
    }
}

/// Scan `files` (absolute or relative to `root`) for symmetric-crypto markers.
///
/// `reachable` is set to "the file is compiled" (for a header: included by name from a
/// compiled file); [`survey`] refines it with the object files. Unreadable files are
/// skipped (the survey fails on missing *objects*, which is what decides reachability).
pub fn scan_sources(
    root: &Path,
    files: &[PathBuf],
    compiled: &BTreeSet<PathBuf>,
) -> Vec<SourceHit> {
    scan(root, files, compiled)
        .into_iter()
        .map(|(h, _)| h)
        .collect()
}

/// [`scan_sources`] with, per hit, whether its marker is a name (weak evidence).
fn scan(root: &Path, files: &[PathBuf], compiled: &BTreeSet<PathBuf>) -> Vec<(SourceHit, bool)> {
    let compiled_abs: BTreeSet<PathBuf> = compiled.iter().map(|c| abs(root, c)).collect();
    let mut hits = Vec::new();
    for file in files {
        let path = abs(root, file);
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let code = strip_comments(&text);
        let is_compiled = compiled_abs.contains(&path) || header_included(&path, &compiled_abs);
        let mut seen = BTreeSet::new();
        for (i, line) in code.lines().enumerate() {
            let squeezed: String = line
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect::<String>()
                .to_ascii_lowercase();
            for mk in MARKERS {
                let found = if mk.squeeze {
                    squeezed.contains(mk.needle)
                } else {
                    line.contains(mk.needle)
                };
                if !found || !seen.insert((mk.family, mk.needle)) {
                    continue;
                }
                let shown: String = line.trim().chars().take(120).collect();
                let hit = SourceHit {
                    file: rel_display(root, &path),
                    line: (i + 1) as u32,
                    family: mk.family.to_string(),
                    text: shown,
                    reachable: is_compiled,
                    note: (!is_compiled).then(|| "file not compiled into the object".to_string()),
                };
                hits.push((hit, NAME_MARKERS.contains(&mk.needle)));
            }
        }
    }
    hits
}

fn is_header(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("h" | "hpp" | "inc")
    )
}

/// Compiled files that `#include` the header `path` by its file name.
fn includers(path: &Path, compiled: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
    if !is_header(path) {
        return Vec::new();
    }
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    compiled
        .iter()
        .filter(|c| {
            std::fs::read_to_string(c).is_ok_and(|t| {
                t.lines().any(|l| {
                    let l = l.trim_start();
                    l.starts_with('#') && l.contains("include") && l.contains(name)
                })
            })
        })
        .cloned()
        .collect()
}

fn header_included(path: &Path, compiled: &BTreeSet<PathBuf>) -> bool {
    !includers(path, compiled).is_empty()
}

/// A symbol defined in an object file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinedSymbol {
    pub name: String,
    pub global: bool,
    /// Code (`true`) or data.
    pub function: bool,
    /// Name of the section holding it.
    pub section: String,
    pub address: u64,
    pub size: u64,
}

/// What a relocation points at.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum RelocTarget {
    Symbol(String),
    Section(String),
}

/// A relocation attributed to the defined symbol whose bytes contain it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelocEdge {
    /// The containing symbol (`None` when no symbol covers the offset).
    pub from: Option<String>,
    pub to: RelocTarget,
}

/// Symbols and references of one object file (relocatable `.o` or shared object).
#[derive(Debug, Clone, Default)]
pub struct ObjSymbols {
    pub defined: Vec<DefinedSymbol>,
    /// Undefined symbols, sorted and unique.
    pub undefined: Vec<String>,
    /// Every symbol name a relocation (static or dynamic) refers to.
    pub referenced: BTreeSet<String>,
    /// Static relocations of code and data sections (none for a shared object's
    /// already-resolved local calls).
    pub edges: Vec<RelocEdge>,
}

/// Read the symbol table and relocations of an object file.
pub fn read_object_symbols(object: &Path) -> Result<ObjSymbols, String> {
    let data =
        std::fs::read(object).map_err(|e| format!("cannot read {}: {e}", object.display()))?;
    let file = object::File::parse(&*data)
        .map_err(|e| format!("{} is not an object file: {e}", object.display()))?;
    let mut out = ObjSymbols::default();
    let mut undefined = BTreeSet::new();
    // Defined symbols per section index, for attributing relocations.
    let mut by_section: BTreeMap<usize, Vec<(u64, u64, String)>> = BTreeMap::new();
    let mut seen_defined = BTreeSet::new();
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() || matches!(sym.kind(), SymbolKind::Section | SymbolKind::File) {
            continue;
        }
        if sym.is_undefined() {
            undefined.insert(name.to_string());
            continue;
        }
        let Some(index) = sym.section_index() else {
            continue;
        };
        let section = file
            .section_by_index(index)
            .ok()
            .and_then(|s| s.name().ok().map(str::to_string))
            .unwrap_or_default();
        if !seen_defined.insert((name.to_string(), sym.address())) {
            continue;
        }
        by_section
            .entry(index.0)
            .or_default()
            .push((sym.address(), sym.size(), name.to_string()));
        out.defined.push(DefinedSymbol {
            name: name.to_string(),
            global: sym.is_global(),
            function: sym.kind() == SymbolKind::Text,
            section,
            address: sym.address(),
            size: sym.size(),
        });
    }
    let target_name = |t: RelocationTarget, dynamic: bool| -> Option<RelocTarget> {
        match t {
            RelocationTarget::Symbol(idx) => {
                let sym = if dynamic {
                    file.dynamic_symbol_table()?.symbol_by_index(idx).ok()?
                } else {
                    file.symbol_by_index(idx).ok()?
                };
                if sym.kind() == SymbolKind::Section {
                    let sec = file.section_by_index(sym.section_index()?).ok()?;
                    return Some(RelocTarget::Section(sec.name().ok()?.to_string()));
                }
                let name = sym.name().ok()?;
                (!name.is_empty()).then(|| RelocTarget::Symbol(name.to_string()))
            }
            RelocationTarget::Section(idx) => {
                let sec = file.section_by_index(idx).ok()?;
                Some(RelocTarget::Section(sec.name().ok()?.to_string()))
            }
            _ => None,
        }
    };
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        if name.starts_with(".debug")
            || name.starts_with(".eh_frame")
            || name.starts_with(".note")
            || name == ".comment"
        {
            continue;
        }
        let syms = by_section.get(&section.index().0);
        for (offset, reloc) in section.relocations() {
            let Some(to) = target_name(reloc.target(), false) else {
                continue;
            };
            // Relocatable objects: symbol addresses are section offsets.
            let from = syms.and_then(|v| {
                v.iter()
                    .find(|(a, s, _)| offset >= *a && offset < a + (*s).max(1))
                    .map(|(_, _, n)| n.clone())
            });
            if let RelocTarget::Symbol(n) = &to {
                out.referenced.insert(n.clone());
            }
            out.edges.push(RelocEdge { from, to });
        }
    }
    if let Some(dynrel) = file.dynamic_relocations() {
        for (_, reloc) in dynrel {
            if let Some(RelocTarget::Symbol(n)) = target_name(reloc.target(), true) {
                out.referenced.insert(n);
            }
        }
    }
    out.undefined = undefined.into_iter().collect();
    Ok(out)
}

/// Everything the survey of one instance needs; the engine fills it after the build.
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

/// Node of the reachability graph: (object index, symbol name).
type Node = (usize, String);

struct Graph {
    objects: Vec<ObjSymbols>,
    /// Global definitions: name -> object index (first definition wins, like the linker).
    globals: BTreeMap<String, usize>,
}

impl Graph {
    fn resolve(&self, from_obj: usize, name: &str) -> Option<Node> {
        let o = &self.objects[from_obj];
        if o.defined.iter().any(|d| d.name == name && !d.global) {
            return Some((from_obj, name.to_string()));
        }
        if o.defined.iter().any(|d| d.name == name && d.global) {
            return Some((from_obj, name.to_string()));
        }
        self.globals.get(name).map(|&i| (i, name.to_string()))
    }

    fn reachable(&self, roots: &[Node]) -> BTreeSet<Node> {
        let mut seen: BTreeSet<Node> = BTreeSet::new();
        let mut todo: Vec<Node> = roots.to_vec();
        while let Some(node) = todo.pop() {
            if !seen.insert(node.clone()) {
                continue;
            }
            let (oi, name) = &node;
            let obj = &self.objects[*oi];
            let section = obj
                .defined
                .iter()
                .find(|d| &d.name == name)
                .map(|d| d.section.clone());
            // Static functions beside it in the same section (calls without relocations).
            if let Some(sec) = &section {
                for d in &obj.defined {
                    if !d.global && d.function && &d.section == sec {
                        todo.push((*oi, d.name.clone()));
                    }
                }
            }
            for e in obj.edges.iter().filter(|e| e.from.as_ref() == Some(name)) {
                match &e.to {
                    RelocTarget::Symbol(t) => {
                        if let Some(n) = self.resolve(*oi, t) {
                            todo.push(n);
                        }
                    }
                    RelocTarget::Section(sec) => {
                        for d in obj.defined.iter().filter(|d| &d.section == sec) {
                            todo.push((*oi, d.name.clone()));
                        }
                    }
                }
            }
        }
        seen
    }
}

/// Scan, read the objects, decide.
pub fn survey(input: &SurveyInput) -> Result<SurveyData, String> {
    let root = &input.root;
    let provided_files: BTreeSet<PathBuf> = input
        .primitive_sources
        .iter()
        .map(|p| abs(root, p))
        .collect();
    let scanned: Vec<PathBuf> = input
        .instance_sources
        .iter()
        .filter(|p| !provided_files.contains(&abs(root, p)))
        .cloned()
        .collect();
    let scanned_hits = scan(root, &scanned, &input.compiled);
    let weak: Vec<bool> = scanned_hits.iter().map(|(_, w)| *w).collect();
    let mut hits: Vec<SourceHit> = scanned_hits.into_iter().map(|(h, _)| h).collect();

    // Objects: instance ones first, then primitives.
    let n_inst = input.instance_objects.len();
    let mut objects = Vec::new();
    for (_, o) in &input.instance_objects {
        objects.push(read_object_symbols(o)?);
    }
    for o in &input.primitive_objects {
        objects.push(read_object_symbols(o)?);
    }
    let mut globals = BTreeMap::new();
    for (i, o) in objects.iter().enumerate() {
        for d in o.defined.iter().filter(|d| d.global) {
            globals.entry(d.name.clone()).or_insert(i);
        }
    }
    let graph = Graph { objects, globals };
    let is_root = |name: &str| {
        if input.api_symbols.is_empty() {
            name.contains("crypto_kem_")
        } else {
            input.api_symbols.iter().any(|s| s == name)
        }
    };
    let roots: Vec<Node> = graph.objects[..n_inst]
        .iter()
        .enumerate()
        .flat_map(|(i, o)| {
            o.defined
                .iter()
                .filter(|d| d.global && d.function && is_root(&d.name))
                .map(move |d| (i, d.name.clone()))
        })
        .collect();
    if roots.is_empty() && n_inst > 0 {
        return Err(if input.api_symbols.is_empty() {
            "no global `crypto_kem_*` function in the instance objects: cannot tell what is reachable".to_string()
        } else {
            format!(
                "none of the API symbols {} is defined in the instance objects",
                input.api_symbols.join(", ")
            )
        });
    }
    let reach = graph.reachable(&roots);

    // Provided symbols used: undefined in instance objects, defined by primitive objects,
    // or declared primitives when no primitive objects are given.
    let primitive_defs: BTreeSet<&str> = graph.objects[n_inst..]
        .iter()
        .flat_map(|o| {
            o.defined
                .iter()
                .filter(|d| d.global)
                .map(|d| d.name.as_str())
        })
        .chain(input.primitives.iter().map(|p| p.symbol.as_str()))
        .collect();
    let provided_used: BTreeSet<String> = graph.objects[..n_inst]
        .iter()
        .flat_map(|o| o.undefined.iter())
        .filter(|u| primitive_defs.contains(u.as_str()))
        .cloned()
        .collect();
    let declared_family: BTreeMap<&str, &str> = input
        .primitives
        .iter()
        .map(|p| (p.symbol.as_str(), p.family.as_str()))
        .collect();
    let provided_family = |s: &str| -> Option<String> {
        declared_family
            .get(s)
            .map(|f| f.to_string())
            .or_else(|| family_of_symbol(s).map(str::to_string))
    };

    // Glue: an instance object that references a provided symbol of family F drives the
    // provided F; its F-named functions and F-named source lines are glue, not an own
    // implementation (constants and S-boxes still count: see `NAME_MARKERS`).
    let mut glue: Vec<BTreeMap<String, String>> = graph.objects[..n_inst]
        .iter()
        .map(|o| {
            let mut m = BTreeMap::new();
            for u in o
                .undefined
                .iter()
                .filter(|u| primitive_defs.contains(u.as_str()))
            {
                if let Some(f) = provided_family(u) {
                    m.entry(f).or_insert_with(|| u.clone());
                }
            }
            m
        })
        .collect();
    // ... and so is an object that calls such glue in another instance object
    // (ML-KEM avx2's poly.c calls fips202x4.c's shake256x4, which drives KeccakP1600times4).
    loop {
        let mut changed = false;
        for i in 0..n_inst {
            for u in &graph.objects[i].undefined {
                let Some(&j) = graph.globals.get(u) else {
                    continue;
                };
                if j >= n_inst || j == i {
                    continue;
                }
                let inherited: Vec<(String, String)> = glue[j]
                    .iter()
                    .filter(|(f, _)| !glue[i].contains_key(*f))
                    .map(|(f, s)| (f.clone(), s.clone()))
                    .collect();
                for (f, s) in inherited {
                    glue[i].insert(f, s);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }

    // Own symbols: family-named functions of instance objects that are not glue.
    let namespace = if input.namespace.is_empty() {
        roots
            .iter()
            .find_map(|(_, n)| n.find("crypto_kem_").map(|p| n[..p].to_string()))
            .unwrap_or_default()
    } else {
        input.namespace.clone()
    };
    let mut own = Vec::new();
    for (i, o) in graph.objects[..n_inst].iter().enumerate() {
        for d in o.defined.iter().filter(|d| d.function) {
            let bare = match d.name.strip_prefix(namespace.as_str()) {
                Some(rest) if !namespace.is_empty() => rest,
                _ => d.name.as_str(),
            };
            let Some(fam) = family_of_symbol(bare) else {
                continue;
            };
            if is_root(&d.name) || glue[i].contains_key(fam) {
                continue;
            }
            own.push(OwnSymbol {
                name: d.name.clone(),
                family: fam.to_string(),
                referenced: reach.contains(&(i, d.name.clone())),
            });
        }
    }

    // Refine hit reachability with the objects; mark name-only hits in glue objects.
    let obj_of: BTreeMap<PathBuf, usize> = input
        .instance_objects
        .iter()
        .enumerate()
        .map(|(i, (src, _))| (abs(root, src), i))
        .collect();
    let object_live = |i: usize| reach.iter().any(|(o, _)| *o == i);
    let compiled_abs: BTreeSet<PathBuf> = input.compiled.iter().map(|c| abs(root, c)).collect();
    let mut is_glue = vec![false; hits.len()];
    for (k, hit) in hits.iter_mut().enumerate().filter(|(_, h)| h.reachable) {
        let path = root.join(&hit.file);
        let mut live_objects = Vec::new();
        if let Some(&oi) = obj_of.get(&path) {
            let enclosing = enclosing_function(&path, hit.line as usize);
            let live = match enclosing
                .as_deref()
                .filter(|f| graph.objects[oi].defined.iter().any(|d| d.name == *f))
            {
                Some(f) => reach.contains(&(oi, f.to_string())),
                None => object_live(oi),
            };
            if live {
                live_objects.push(oi);
            } else {
                hit.reachable = false;
                hit.note = Some(match enclosing {
                    Some(f) => format!("`{f}` is not reachable in the built object"),
                    None => "not reachable in the built object".to_string(),
                });
            }
        } else if is_header(&path) && !input.instance_objects.is_empty() {
            live_objects = includers(&path, &compiled_abs)
                .iter()
                .filter_map(|inc| obj_of.get(inc).copied())
                .filter(|&oi| object_live(oi))
                .collect();
            if live_objects.is_empty() {
                hit.reachable = false;
                hit.note = Some("not reachable in the built object (no live includer)".into());
            }
        }
        if hit.reachable && weak[k] {
            if let Some(sym) = live_objects
                .iter()
                .find_map(|&oi| glue[oi].get(&hit.family))
            {
                is_glue[k] = true;
                hit.note = Some(format!(
                    "glue around the provided {} (`{sym}`)",
                    family_title(&hit.family)
                ));
            }
        }
    }

    let provided_used: Vec<String> = provided_used.into_iter().collect();
    let evidence: Vec<SourceHit> = hits
        .iter()
        .zip(&is_glue)
        .filter(|(_, g)| !**g)
        .map(|(h, _)| h.clone())
        .collect();
    let (verdict, mut summary) = verdict_with(&evidence, &own, &provided_used, &provided_family);
    let glue_files: BTreeSet<&str> = hits
        .iter()
        .zip(&is_glue)
        .filter(|(_, g)| **g)
        .map(|(h, _)| h.file.as_str())
        .collect();
    if !glue_files.is_empty() {
        summary.push_str(&format!(
            "; own glue around provided primitives in {}",
            glue_files.into_iter().collect::<Vec<_>>().join(", ")
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

/// The name of the function whose body contains `line` (1-based), by scanning back to the
/// nearest line at column 0 that looks like a function header (`... name(`).
fn enclosing_function(path: &Path, line: usize) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let code = strip_comments(&text);
    let lines: Vec<&str> = code.lines().collect();
    for l in lines.get(..line.min(lines.len()))?.iter().rev() {
        let starts_code = l
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !starts_code {
            continue;
        }
        let Some(paren) = l.find('(') else {
            // A column-0 declaration without `(` (a table, a typedef) ends the search.
            return None;
        };
        let before = l[..paren].trim_end();
        let name: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return (!name.is_empty() && before.len() > name.len()).then_some(name);
    }
    None
}

/// Verdict and one-line summary from the evidence; families of provided symbols are
/// guessed from their names (`shake256` -> keccak, `aes128_ecb` -> aes).
pub fn verdict(
    hits: &[SourceHit],
    own: &[OwnSymbol],
    provided_used: &[String],
) -> (Verdict, String) {
    verdict_with(hits, own, provided_used, &|s| {
        family_of_symbol(s).map(str::to_string)
    })
}

fn verdict_with(
    hits: &[SourceHit],
    own: &[OwnSymbol],
    provided_used: &[String],
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
            format!("provided-only: {uses}; no own symmetric code reachable{dead_note}"),
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
        let tail = if unused.is_empty() {
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
    }

    #[test]
    fn symbol_families() {
        assert_eq!(family_of_symbol("KeccakF1600_StatePermute"), Some("keccak"));
        assert_eq!(family_of_symbol("sha3_512"), Some("keccak"));
        assert_eq!(family_of_symbol("aes256_ctr_keyexp"), Some("aes"));
        assert_eq!(family_of_symbol("sha512_inc_init"), Some("sha2"));
        assert_eq!(family_of_symbol("PQCLEAN_randombytes"), None);
        assert_eq!(family_of_symbol("poly_ntt"), None);
    }

    #[test]
    fn scan_finds_markers_outside_comments_once_per_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("k.c"),
            "/* Keccak in a comment is not a hit */\n\
             static const uint64_t RC[2] = {0x0000000000000001ULL, 0x0000000000008082ULL};\n\
             static void KeccakF1600(uint64_t *s) { (void)s; }\n\
             static void keccak_again(void) {}\n\
             #include <openssl/evp.h>\n\
             static const uint8_t sbox[4] = { 0x63, 0x7c, 0x77, 0x7b };\n",
        )
        .unwrap();
        let compiled = BTreeSet::new();
        let hits = scan_sources(dir.path(), &[PathBuf::from("k.c")], &compiled);
        let got: Vec<(u32, &str)> = hits.iter().map(|h| (h.line, h.family.as_str())).collect();
        assert_eq!(
            got,
            [(2, "keccak"), (3, "keccak"), (5, "openssl"), (6, "aes")]
        );
        assert!(hits.iter().all(|h| !h.reachable && h.note.is_some()));
        assert_eq!(hits[0].file, "k.c");
    }

    #[test]
    fn enclosing_function_scan() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.c");
        std::fs::write(
            &p,
            "#include <stdint.h>\nstatic const int T[2] = {1,\n 2};\nvoid KeccakF1600(uint64_t *s)\n{\n    s[0] ^= 1;\n}\n",
        )
        .unwrap();
        assert_eq!(enclosing_function(&p, 6).as_deref(), Some("KeccakF1600"));
        assert_eq!(enclosing_function(&p, 3), None);
    }
}
