//! The variable-latency scan (the KyberSlash class): memcheck sees secret-dependent branches
//! and memory indexes, not an instruction whose *latency* depends on its operands, integer
//! division above all. This scan disassembles the linked object the `ct` step checked and
//! lists every such instruction ([`decode`] says which and why) in the functions reachable
//! from one API function (`<ns>crypto_kem_dec`, say).
//!
//! **Call graph** ([`scan`]): functions are the symbol table's (static ones included; a
//! stripped object has only its exported ones). From the root, a function reaches every
//! function its code calls or jumps to directly (tail calls and `.cold` parts included) and
//! every function whose address it computes (`lea`, `adrp`+`add`: the address may be
//! called through a pointer later). Not followed, and listed: indirect calls and jumps
//! (through a register or memory: function pointers, switch tables), and calls that leave
//! the object (PLT stubs, named after the symbol their GOT slot is bound to). A function
//! pointer read from a data table is not seen.
//!
//! **Source lines** come from the object's DWARF line tables (the valgrind object is
//! compiled with `-g`), innermost inlined function first.
//!
//! **Secret data** ([`annotate`]): the scan does not trace operands. An instruction is said
//! to be in a function that handles secret data when the `ct` step's memcheck run has a
//! finding in the same function (the symbol, or a function inlined at the instruction);
//! otherwise it is "reachable, operands not traced". Functions declared `ct-benign` in the
//! manifest get the manifest's reason, as memcheck's findings do.

pub mod decode;
mod elf;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::Finding;
use crate::model::CtBenign;
/// The schema's types the scan fills in (`ngcc-record`).
pub use crate::record::ct::{Indirect, Latency, LatencyScan, VarLatency};
use decode::{Flow, Insn};
pub use decode::{Isa, LatencyClass};
use elf::Image;

/// Instructions shown before and after a flagged one in its context.
pub const CONTEXT_BEFORE: usize = 4;
pub const CONTEXT_AFTER: usize = 2;

/// Why an object cannot be scanned.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    /// Not an object file.
    #[error("not an object file: {0}")]
    NotObject(String),
    /// A relocatable object: its calls are not resolved.
    #[error("a relocatable object (.o): link it first, its calls are not resolved yet")]
    Relocatable,
    /// An instruction set the scan does not decode.
    #[error("no decoder for architecture {0} (x86-64 and aarch64 only)")]
    Arch(String),
    /// The API function is not in the symbol table.
    #[error("function `{0}` is not in the object's symbol table")]
    NoRoot(String),
}

/// A symbol without the compiler's clone suffix: `f.cold` / `f.part.0` / `f.isra.0` -> `f`.
pub fn base_name(symbol: &str) -> &str {
    symbol.split('.').next().unwrap_or(symbol)
}

/// Scan the linked object `data` from the function `root`.
pub fn scan(data: &[u8], root: &str) -> Result<LatencyScan, LatencyError> {
    let image = Image::read(data)?;
    let start = image
        .functions
        .iter()
        .position(|f| f.name == root)
        .ok_or_else(|| LatencyError::NoRoot(root.to_string()))?;
    // Breadth-first from the root; parent links give each function's call path.
    let mut parent: BTreeMap<usize, Option<usize>> = BTreeMap::from([(start, None)]);
    let mut todo = VecDeque::from([start]);
    let mut decoded: BTreeMap<usize, Vec<Insn>> = BTreeMap::new();
    let mut outside = BTreeSet::new();
    let mut taken = BTreeSet::new();
    let mut indirect = Vec::new();
    while let Some(fi) = todo.pop_front() {
        let f = &image.functions[fi];
        let insns = decode::decode(image.isa, &f.code, f.address);
        let (mut calls, mut jumps) = (0, 0);
        for i in &insns {
            let (target, address_only) = match i.flow {
                Flow::Call(t) | Flow::Jump(t) => (t, false),
                Flow::Address(t) => (t, true),
                Flow::IndirectCall => {
                    calls += 1;
                    continue;
                }
                Flow::IndirectJump(_) => {
                    jumps += 1;
                    continue;
                }
                Flow::Next | Flow::Stop => continue,
            };
            match image.function_at(target) {
                Some(ti) if ti == fi => {}
                Some(ti) => {
                    // An address inside a function that is not its start is data-like
                    // (a jump table's base, say): not a reference to the function.
                    if address_only && image.functions[ti].address != target {
                        continue;
                    }
                    if address_only {
                        taken.insert(ti);
                    }
                    if let std::collections::btree_map::Entry::Vacant(e) = parent.entry(ti) {
                        e.insert(Some(fi));
                        todo.push_back(ti);
                    }
                }
                None if !address_only => {
                    outside.insert(
                        image
                            .plt
                            .get(&target)
                            .cloned()
                            .unwrap_or_else(|| format!("{target:#x}")),
                    );
                }
                None => {}
            }
        }
        if calls + jumps > 0 {
            indirect.push(Indirect {
                function: f.name.clone(),
                calls,
                jumps,
            });
        }
        decoded.insert(fi, insns);
    }
    let path_of = |mut fi: usize| {
        let mut p = vec![image.functions[fi].name.clone()];
        while let Some(Some(up)) = parent.get(&fi) {
            p.push(image.functions[*up].name.clone());
            fi = *up;
        }
        p.reverse();
        p
    };
    let mut instructions = Vec::new();
    for (&fi, insns) in &decoded {
        for (k, i) in insns.iter().enumerate() {
            let Some(class) = i.latency else { continue };
            let frames = image.frames(i.address);
            let first = frames.first();
            let inlined = if frames.len() > 1 {
                frames
                    .iter()
                    .map(|f| {
                        let file = f
                            .file
                            .as_deref()
                            .map_or("?", |p| p.rsplit('/').next().unwrap_or(p));
                        format!(
                            "{} ({file}:{})",
                            f.function.as_deref().unwrap_or("?"),
                            f.line.map_or("?".to_string(), |l| l.to_string())
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let lo = k.saturating_sub(CONTEXT_BEFORE);
            let hi = (k + CONTEXT_AFTER + 1).min(insns.len());
            let context = insns[lo..hi]
                .iter()
                .map(|c| {
                    let mark = if c.address == i.address { "=>" } else { "  " };
                    format!("{mark} {:#x}  {}", c.address, c.text)
                })
                .collect();
            instructions.push(VarLatency {
                unit: frames.last().and_then(|f| f.file.clone()),
                provided: false,
                class,
                mnemonic: i.mnemonic.clone(),
                text: i.text.clone(),
                function: image.functions[fi].name.clone(),
                address: i.address,
                file: first.and_then(|f| f.file.clone()),
                line: first.and_then(|f| f.line),
                inlined,
                path: path_of(fi),
                context,
                secret: None,
                benign: None,
            });
        }
    }
    instructions.sort_by_key(|v| v.address);
    indirect.sort_by(|a, b| a.function.cmp(&b.function));
    Ok(LatencyScan {
        isa: image.isa.name().to_string(),
        root: root.to_string(),
        functions: decoded.len(),
        instructions,
        outside: outside.into_iter().collect(),
        indirect,
        address_taken: taken
            .into_iter()
            .map(|i| image.functions[i].name.clone())
            .collect(),
        line_info: image.has_lines(),
    })
}

/// What [`annotate`] compares the scan with.
pub struct Known<'k> {
    /// memcheck's findings for the same operation.
    pub findings: &'k [Finding],
    /// The manifest's `ct-benign` declarations.
    pub benign: &'k [CtBenign],
    /// The instance's symbol prefix (declared names match with or without it).
    pub namespace: &'k str,
    /// The provided primitives' source files, as the compiler was given them (absolute).
    pub provided: &'k [std::path::PathBuf],
}

/// Say, per instruction, whether it lies in the provided primitives' code, whether memcheck
/// found secret-dependent code in the same function, and whether the manifest declares the
/// function benign (the name as declared or with the instance's namespace prefix, as
/// memcheck's findings are classified).
pub fn annotate(scan: &mut LatencyScan, known: &Known) {
    let Known {
        findings,
        benign,
        namespace,
        provided,
    } = *known;
    for v in &mut scan.instructions {
        v.provided = v.unit.as_deref().is_some_and(|u| {
            provided
                .iter()
                .any(|p| p.as_path() == std::path::Path::new(u))
        });
        let names = names(v);
        v.secret = findings
            .iter()
            .find(|f| names.contains(&f.function) || names.contains(super::owner(f)))
            .map(|f| {
                format!(
                    "memcheck saw secret data in `{}` ({} at {})",
                    f.function,
                    f.kinds.join(", "),
                    f.location()
                )
            });
        v.benign = benign
            .iter()
            .find(|b| {
                names.iter().any(|n| {
                    *n == b.function || n.strip_prefix(namespace).is_some_and(|r| r == b.function)
                })
            })
            .map(|b| b.reason.clone());
    }
}

/// The names an instruction belongs to: its symbol without a compiler suffix (`.cold`,
/// `.part.0`, `.isra.0`, ...) and every function inlined at it.
fn names(v: &VarLatency) -> BTreeSet<String> {
    let mut n = BTreeSet::from([base_name(&v.function).to_string()]);
    for f in &v.inlined {
        n.insert(f.split(" (").next().unwrap_or(f).to_string());
    }
    n
}

/// The report's words for a `ct` record's scan outcome: [`verdict`], or `not scanned: why`.
pub fn outcome(latency: &Latency) -> String {
    match latency {
        Latency::Scanned(s) => verdict(s),
        Latency::NotScanned { reason } => format!("not scanned: {reason}"),
    }
}

/// The report's words for one scan: `no variable-latency instruction reachable`, or how
/// many in the instance's code (by mnemonic) in how many functions and what is known of
/// their operands, then how many in the provided primitives (by function).
pub fn verdict(scan: &LatencyScan) -> String {
    let (own, provided) = scan.split();
    if own.is_empty() && provided.is_empty() {
        return "no variable-latency instruction reachable".to_string();
    }
    let mut text = if own.is_empty() {
        "none in the instance's code".to_string()
    } else {
        own_words(&own)
    };
    if !provided.is_empty() {
        let functions: BTreeSet<&str> = provided.iter().map(|i| base_name(&i.function)).collect();
        text.push_str(&format!(
            "; {} in the provided primitives ({})",
            provided.len(),
            functions
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    text
}

fn own_words(v: &[&VarLatency]) -> String {
    let mut by_mnemonic: BTreeMap<&str, usize> = BTreeMap::new();
    for i in v {
        *by_mnemonic.entry(&i.mnemonic).or_default() += 1;
    }
    let mnemonics = by_mnemonic
        .iter()
        .map(|(m, n)| format!("{n} `{m}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let functions: BTreeSet<&str> = v.iter().map(|i| base_name(&i.function)).collect();
    let benign = v.iter().filter(|i| i.benign.is_some()).count();
    let secret = v
        .iter()
        .filter(|i| i.benign.is_none() && i.secret.is_some())
        .count();
    let untraced = v.len() - benign - secret;
    let mut parts = Vec::new();
    if secret > 0 {
        parts.push(format!(
            "{secret} in a function where memcheck saw secret data"
        ));
    }
    if benign > 0 {
        parts.push(format!("{benign} declared benign"));
    }
    if untraced > 0 {
        parts.push(if untraced == v.len() {
            "reachable, operands not traced".to_string()
        } else {
            format!("{untraced} reachable, operands not traced")
        });
    }
    format!(
        "{} ({mnemonics}) in {} function{}: {}",
        v.len(),
        functions.len(),
        if functions.len() == 1 { "" } else { "s" },
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests;
