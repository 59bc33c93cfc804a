//! What a `ct` record holds: memcheck's findings with the secrets marked, and the
//! variable-latency scan of the same object (the engine's `ct/` computes both).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a `ct` record holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CtData {
    /// Operations run under memcheck with the secrets marked.
    pub runs: u32,
    /// What was secret and what declassified, in words (from kem-runner).
    pub marked: String,
    /// The valgrind object, relative to the output folder, and its flags.
    pub object: PathBuf,
    pub flags: Vec<String>,
    /// `valgrind --version`.
    pub valgrind: String,
    /// memcheck's XML output, relative to the output folder.
    pub raw_log: PathBuf,
    /// Secret-dependent branches and indexes inside the object, by location.
    pub findings: Vec<Finding>,
    /// `no secret-dependent branch or index found` / `N locations` (with the benign count).
    pub verdict: String,
    /// Other memcheck errors inside the run (invalid reads, ...), by kind.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub other_errors: BTreeMap<String, u64>,
    /// Secret-dependent reports with no frame in the object (the runner's own code).
    #[serde(default)]
    pub outside_object: u64,
    /// The variable-latency scan of the object from this operation's API function (absent
    /// in records written before the scan existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
}

impl CtData {
    /// How many variable-latency instructions the scan found in the instance's own code
    /// and in the provided primitives (`None`: not scanned).
    pub fn variable_latency(&self) -> Option<(usize, usize)> {
        let s = self.latency.as_ref().and_then(Latency::scanned)?;
        let (own, provided) = s.split();
        Some((own.len(), provided.len()))
    }
}

/// A location where memcheck saw a conditional jump or a memory index depend on secret
/// data: the first frame of the report's stack inside the checked object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// `UninitCondition` (a branch or conditional move) and/or `UninitValue` (an address
    /// computed from the secret: a memory index), as memcheck names them.
    pub kinds: Vec<String>,
    /// Function of the frame (an inlined function is named as itself).
    pub function: String,
    /// Source file (`dir/file` when memcheck knows the folder).
    pub file: String,
    pub line: u32,
    /// How many times memcheck saw it (summed over the contexts).
    pub count: u64,
    /// Distinct call stacks (memcheck's error contexts) that reached it.
    pub contexts: u32,
    /// The in-object frames of the first context, innermost first, as `function (file:line)`.
    pub stack: Vec<String>,
    /// The manifest's reason when its function is declared benign (`ct-benign`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benign: Option<String>,
    /// Its source line (trimmed), when the file could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A conditional (`UninitCondition`) at a source line with no branch on it
    /// (the engine's `ct::source_line::has_branch`): the compiler introduced the branch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compiler: bool,
}

impl Finding {
    /// `file:line` with the file's base name, as reports show it.
    pub fn location(&self) -> String {
        let base = self.file.rsplit('/').next().unwrap_or(&self.file);
        format!("{base}:{}", self.line)
    }

    /// `introduced by the compiler (flags ...)` for a finding the compiler introduced,
    /// with the flags of the checked object.
    pub fn compiler_label(&self, flags: &[String]) -> Option<String> {
        self.compiler
            .then(|| format!("introduced by the compiler (flags {})", flags.join(" ")))
    }
}

/// Why an instruction's latency depends on its operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyClass {
    /// `div`, `idiv`, `udiv`, `sdiv`.
    IntegerDivision,
    /// `divsd`, `vdivps`, `fdiv`, ...
    FloatDivision,
    /// `sqrtsd`, `vsqrtps`, `fsqrt`, ...
    SquareRoot,
}

impl LatencyClass {
    /// In words.
    pub fn words(self) -> &'static str {
        match self {
            LatencyClass::IntegerDivision => "integer division",
            LatencyClass::FloatDivision => "floating-point division",
            LatencyClass::SquareRoot => "square root",
        }
    }
}

/// One instruction with operand-dependent latency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VarLatency {
    pub class: LatencyClass,
    /// `div`, `udiv`, `sqrtsd`, ...
    pub mnemonic: String,
    /// The instruction as disassembled (Intel syntax on x86).
    pub text: String,
    /// The symbol whose code holds it.
    pub function: String,
    /// Its address in the object.
    pub address: u64,
    /// Source file and line from DWARF (the innermost inlined function's), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// When inlined: the frames, innermost first, as `function (file:line)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inlined: Vec<String>,
    /// The source file of the function holding it (the outermost frame's file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Whether that file is one of the provided primitives' sources (not the instance's
    /// own code).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provided: bool,
    /// Call path from the API function to `function`.
    pub path: Vec<String>,
    /// The disassembly around it, one instruction a line, itself marked `=>`.
    pub context: Vec<String>,
    /// memcheck's evidence that the function handles secret data (a finding in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The manifest's reason when the function is declared benign (`ct-benign`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benign: Option<String>,
}

impl VarLatency {
    /// `file:line` with the file's base name, or the address when DWARF has no line.
    pub fn location(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{}:{l}", f.rsplit('/').next().unwrap_or(f)),
            _ => format!("{:#x}", self.address),
        }
    }

    /// What the report says about its operands.
    pub fn operands(&self) -> String {
        match (&self.secret, &self.benign) {
            (_, Some(reason)) => format!("declared benign: {reason}"),
            (Some(s), None) => s.clone(),
            (None, None) => "reachable, operands not traced".to_string(),
        }
    }
}

/// Calls and jumps through a register or memory in one function (not followed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Indirect {
    pub function: String,
    pub calls: u32,
    pub jumps: u32,
}

/// The scan of one API function's reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyScan {
    /// `x86-64` or `aarch64`.
    pub isa: String,
    /// The API function scanned from.
    pub root: String,
    /// Functions of the object reachable from it (itself included).
    pub functions: usize,
    /// Variable-latency instructions in them, by address.
    pub instructions: Vec<VarLatency>,
    /// Functions called outside the object (PLT stubs: the C library), not scanned.
    pub outside: Vec<String>,
    /// Indirect calls and jumps, not followed, by function.
    pub indirect: Vec<Indirect>,
    /// Reachable functions whose address reachable code takes (followed).
    pub address_taken: Vec<String>,
    /// Whether the object has DWARF line tables (source lines known).
    pub line_info: bool,
}

/// The scan's outcome in a `ct` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Latency {
    Scanned(LatencyScan),
    /// The object's instruction set has no decoder here.
    NotScanned {
        reason: String,
    },
}

impl LatencyScan {
    /// The instructions in the instance's own code, and those in the provided primitives.
    pub fn split(&self) -> (Vec<&VarLatency>, Vec<&VarLatency>) {
        self.instructions.iter().partition(|v| !v.provided)
    }
}

impl Latency {
    /// The scan, when there is one.
    pub fn scanned(&self) -> Option<&LatencyScan> {
        match self {
            Latency::Scanned(s) => Some(s),
            Latency::NotScanned { .. } => None,
        }
    }
}
