//! What the scan reads from a linked object (object crate): its instruction set, the
//! functions of its symbol table with their code, the names behind its PLT stubs, and
//! source lines from its DWARF line tables (addr2line crate).

use object::{
    Object, ObjectKind, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget,
    SymbolKind,
};
use std::borrow::Cow;
use std::collections::BTreeMap;

use super::decode::{decode, Flow, Isa};
use super::LatencyError;

/// A function of the symbol table with its code.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub address: u64,
    pub size: u64,
    /// Its bytes (empty when the section has no data in the file).
    pub code: Vec<u8>,
}

/// DWARF read in place from the object's bytes.
type Dwarf<'d> = gimli::EndianSlice<'d, gimli::RunTimeEndian>;

/// A linked object, read.
pub struct Image<'d> {
    pub isa: Isa,
    /// Functions sorted by address; of several names at one address, a global one, else
    /// one without a compiler suffix (`.localalias`), else the first.
    pub functions: Vec<Function>,
    /// PLT stub address -> the symbol its GOT slot is bound to.
    pub plt: BTreeMap<u64, String>,
    /// DWARF line tables, when the object has them.
    lines: Option<addr2line::Context<Dwarf<'d>>>,
}

/// One frame of a source position: the innermost function first (inlined code has one
/// frame per inlined call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

fn isa_of(file: &object::File<'_>) -> Result<Isa, LatencyError> {
    match file.architecture() {
        object::Architecture::X86_64 => Ok(Isa::X86_64),
        object::Architecture::Aarch64 => Ok(Isa::Aarch64),
        other => Err(LatencyError::Arch(format!("{other:?}"))),
    }
}

impl<'d> Image<'d> {
    /// Read a linked object (a shared object or an executable). A relocatable `.o` is
    /// refused: its calls are not resolved yet.
    pub fn read(data: &'d [u8]) -> Result<Image<'d>, LatencyError> {
        let file = object::File::parse(data).map_err(|e| LatencyError::NotObject(e.to_string()))?;
        if file.kind() == ObjectKind::Relocatable {
            return Err(LatencyError::Relocatable);
        }
        let isa = isa_of(&file)?;
        // Per address the best name: a global one, else one without a compiler suffix
        // (`f` rather than its `f.localalias`), else the first.
        let rank = |name: &str, global: bool| (global, !name.contains('.'));
        let mut by_address: BTreeMap<u64, (String, bool, u64, object::SectionIndex)> =
            BTreeMap::new();
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            if sym.kind() != SymbolKind::Text || sym.size() == 0 || sym.is_undefined() {
                continue;
            }
            let (Ok(name), Some(section)) = (sym.name(), sym.section_index()) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            let global = sym.is_global();
            let better = by_address
                .get(&sym.address())
                .is_none_or(|(n, g, _, _)| rank(name, global) > rank(n, *g));
            if better {
                by_address.insert(
                    sym.address(),
                    (name.to_string(), global, sym.size(), section),
                );
            }
        }
        let mut functions = Vec::new();
        for (address, (name, _, size, section)) in by_address {
            let code = file
                .section_by_index(section)
                .ok()
                .and_then(|s| s.data_range(address, size).ok().flatten())
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
            functions.push(Function {
                name,
                address,
                size,
                code,
            });
        }
        let plt = plt_names(&file, isa);
        let lines = dwarf(&file);
        Ok(Image {
            isa,
            functions,
            plt,
            lines,
        })
    }

    /// The function whose code holds `address`.
    pub fn function_at(&self, address: u64) -> Option<usize> {
        let i = self.functions.partition_point(|f| f.address <= address);
        let f = self.functions.get(i.checked_sub(1)?)?;
        (address < f.address + f.size).then_some(i - 1)
    }

    /// Whether the object has DWARF line tables.
    pub fn has_lines(&self) -> bool {
        self.lines.is_some()
    }

    /// The source frames of `address`, innermost first (empty without line tables).
    pub fn frames(&self, address: u64) -> Vec<Frame> {
        let Some(ctx) = &self.lines else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let Ok(mut frames) = ctx.find_frames(address).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = frames.next() {
            let function = f
                .function
                .as_ref()
                .and_then(|n| n.raw_name().ok().map(|s| s.into_owned()));
            let (file, line) = f
                .location
                .as_ref()
                .map_or((None, None), |l| (l.file.map(str::to_string), l.line));
            out.push(Frame {
                function,
                file,
                line,
            });
        }
        out
    }
}

/// Names behind the PLT stubs: each stub jumps through a GOT slot that a dynamic
/// relocation binds to a symbol. x86-64: the stub's `jmp [rip+slot]` gives the slot;
/// aarch64: stubs are 16 bytes after a 32-byte header, in the order of `.rela.plt`.
fn plt_names(file: &object::File<'_>, isa: Isa) -> BTreeMap<u64, String> {
    let mut slots: BTreeMap<u64, String> = BTreeMap::new();
    let mut in_order: Vec<String> = Vec::new();
    let dynsym = file.dynamic_symbol_table();
    if let (Some(relocs), Some(table)) = (file.dynamic_relocations(), dynsym) {
        for (offset, r) in relocs {
            let RelocationTarget::Symbol(ix) = r.target() else {
                continue;
            };
            let Some(name) = table
                .symbol_by_index(ix)
                .ok()
                .and_then(|s| s.name().ok().map(str::to_string))
            else {
                continue;
            };
            if matches!(
                r.flags(),
                object::RelocationFlags::Elf {
                    r_type: object::elf::R_X86_64_JUMP_SLOT
                } if isa == Isa::X86_64
            ) || matches!(
                r.flags(),
                object::RelocationFlags::Elf {
                    r_type: object::elf::R_AARCH64_JUMP_SLOT
                } if isa == Isa::Aarch64
            ) {
                in_order.push(name.clone());
            }
            slots.insert(offset, name);
        }
    }
    let mut out = BTreeMap::new();
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        if !name.starts_with(".plt") {
            continue;
        }
        let Ok(data) = section.data() else { continue };
        match isa {
            Isa::X86_64 => {
                // Stubs are 16 bytes; each has one `jmp [rip+slot]`.
                for (k, stub) in data.chunks(16).enumerate() {
                    let at = section.address() + 16 * k as u64;
                    let slot = decode(isa, stub, at).iter().find_map(|i| match i.flow {
                        Flow::IndirectJump(Some(slot)) => Some(slot),
                        _ => None,
                    });
                    if let Some(n) = slot.and_then(|s| slots.get(&s)) {
                        out.insert(at, n.clone());
                    }
                }
            }
            Isa::Aarch64 if name == ".plt" => {
                for (k, n) in in_order.iter().enumerate() {
                    out.insert(section.address() + 32 + 16 * k as u64, n.clone());
                }
            }
            Isa::Aarch64 => {}
        }
    }
    out
}

/// The DWARF sections as an addr2line context; `None` without `.debug_info` or when a
/// section cannot be read in place (compressed debug sections).
fn dwarf<'d>(file: &object::File<'d>) -> Option<addr2line::Context<Dwarf<'d>>> {
    file.section_by_name(".debug_info")?;
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Dwarf<'d>, ()> {
        let data: &'d [u8] = match file.section_by_name(id.name()) {
            Some(s) => match s.uncompressed_data() {
                Ok(Cow::Borrowed(b)) => b,
                _ => return Err(()),
            },
            None => &[],
        };
        Ok(gimli::EndianSlice::new(data, endian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}
