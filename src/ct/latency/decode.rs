//! Decoding one function's machine code into what the scan needs: every instruction's
//! address and text, where control goes (direct calls and jumps with their targets, indirect
//! ones, addresses taken), and whether the instruction's latency depends on its operands.
//!
//! x86-64 is decoded with `iced-x86`, aarch64 with `yaxpeax-arm`.
//!
//! **Which instructions are flagged** ([`LatencyClass`]), and why:
//! * integer division: x86 `div`/`idiv`, Arm `udiv`/`sdiv`. Their latency depends on the
//!   operands' values on every x86 core measured (uops.info lists latency ranges; Intel's
//!   list of data-operand-independent-timing instructions leaves them out) and on Arm cores
//!   (the instructions Arm's DIT makes data-independent do not include them). This is the
//!   KyberSlash class.
//! * floating-point division and square root: x86 `div{s,p}{s,d}`, `sqrt{s,p}{s,d}` and their
//!   VEX/EVEX forms (also half precision), x87 `fdiv*`/`fidiv*`/`fsqrt`; Arm `fdiv`, `fsqrt`
//!   (scalar and vector). They finish early for some operands (zero, powers of two, special
//!   values) and take microcode assists on subnormals.
//!
//! Not flagged: multiplications, additions and other floating-point arithmetic, which are
//! slow only on subnormal operands on some cores, and approximations (`rsqrt*`, `rcp*`,
//! `frecpe`), which have fixed latency.

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Formatter, Instruction, IntelFormatter, Mnemonic,
};

pub use crate::record::ct::LatencyClass;

/// The instruction sets the scan decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    X86_64,
    Aarch64,
}

impl Isa {
    /// As reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Isa::X86_64 => "x86-64",
            Isa::Aarch64 => "aarch64",
        }
    }
}

/// Where an instruction sends control, as far as the code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Falls through (or a conditional branch inside the function: not an edge).
    Next,
    /// A direct call to this address.
    Call(u64),
    /// A direct jump (conditional or not) to this address: a tail call when it leaves the
    /// function.
    Jump(u64),
    /// A call through a register or memory.
    IndirectCall,
    /// A jump through a register or memory (a switch table or a tail call through a
    /// pointer): `Some(slot)` when it reads a pointer at a fixed address (a PLT stub's GOT
    /// slot).
    IndirectJump(Option<u64>),
    /// The instruction computes this address without jumping to it (`lea`, `adrp`+`add`):
    /// when it is a function's, the function's address is taken.
    Address(u64),
    /// Returns (or traps).
    Stop,
}

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    pub address: u64,
    pub len: u8,
    /// Mnemonic and operands (Intel syntax on x86).
    pub text: String,
    pub flow: Flow,
    /// `Some` when its latency depends on its operands.
    pub latency: Option<LatencyClass>,
    /// The mnemonic alone.
    pub mnemonic: String,
}

/// Decode `code`, loaded at `address`. Bytes that do not decode become one `(bad)` entry
/// per byte (x86) or word (aarch64) and the decoding goes on.
pub fn decode(isa: Isa, code: &[u8], address: u64) -> Vec<Insn> {
    match isa {
        Isa::X86_64 => decode_x86(code, address),
        Isa::Aarch64 => decode_a64(code, address),
    }
}

fn x86_class(m: Mnemonic) -> Option<LatencyClass> {
    use Mnemonic as M;
    match m {
        M::Div | M::Idiv => Some(LatencyClass::IntegerDivision),
        M::Divss
        | M::Divsd
        | M::Divps
        | M::Divpd
        | M::Vdivss
        | M::Vdivsd
        | M::Vdivps
        | M::Vdivpd
        | M::Vdivsh
        | M::Vdivph
        | M::Fdiv
        | M::Fdivp
        | M::Fdivr
        | M::Fdivrp
        | M::Fidiv
        | M::Fidivr => Some(LatencyClass::FloatDivision),
        M::Sqrtss
        | M::Sqrtsd
        | M::Sqrtps
        | M::Sqrtpd
        | M::Vsqrtss
        | M::Vsqrtsd
        | M::Vsqrtps
        | M::Vsqrtpd
        | M::Vsqrtsh
        | M::Vsqrtph
        | M::Fsqrt => Some(LatencyClass::SquareRoot),
        _ => None,
    }
}

fn decode_x86(code: &[u8], address: u64) -> Vec<Insn> {
    let mut decoder = Decoder::with_ip(64, code, address, DecoderOptions::NONE);
    let mut formatter = IntelFormatter::new();
    let mut out = Vec::new();
    let mut i = Instruction::default();
    while decoder.can_decode() {
        decoder.decode_out(&mut i);
        let mut text = String::new();
        formatter.format(&i, &mut text);
        let mnemonic = text.split_whitespace().next().unwrap_or("").to_string();
        if i.is_invalid() {
            out.push(Insn {
                address: i.ip(),
                len: i.len() as u8,
                text: "(bad)".into(),
                flow: Flow::Next,
                latency: None,
                mnemonic: "(bad)".into(),
            });
            continue;
        }
        let flow = match i.flow_control() {
            FlowControl::Call => Flow::Call(i.near_branch_target()),
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch => {
                Flow::Jump(i.near_branch_target())
            }
            FlowControl::IndirectCall => Flow::IndirectCall,
            FlowControl::IndirectBranch => Flow::IndirectJump(
                i.is_ip_rel_memory_operand()
                    .then(|| i.ip_rel_memory_address()),
            ),
            FlowControl::Return | FlowControl::Exception | FlowControl::Interrupt => Flow::Stop,
            _ if i.mnemonic() == Mnemonic::Lea && i.is_ip_rel_memory_operand() => {
                Flow::Address(i.ip_rel_memory_address())
            }
            _ => Flow::Next,
        };
        out.push(Insn {
            address: i.ip(),
            len: i.len() as u8,
            text,
            flow,
            latency: x86_class(i.mnemonic()),
            mnemonic,
        });
    }
    out
}

fn a64_class(op: yaxpeax_arm::armv8::a64::Opcode) -> Option<LatencyClass> {
    use yaxpeax_arm::armv8::a64::Opcode as O;
    match op {
        O::UDIV | O::SDIV => Some(LatencyClass::IntegerDivision),
        O::FDIV => Some(LatencyClass::FloatDivision),
        O::FSQRT => Some(LatencyClass::SquareRoot),
        _ => None,
    }
}

fn decode_a64(code: &[u8], address: u64) -> Vec<Insn> {
    use yaxpeax_arch::{Decoder as _, U8Reader};
    use yaxpeax_arm::armv8::a64::{InstDecoder, Opcode as O, Operand};
    let decoder = InstDecoder::default();
    let mut out: Vec<Insn> = Vec::new();
    // The page an `adrp` put in each register (for `adrp` + `add`: an address taken).
    let mut pages: [Option<u64>; 32] = [None; 32];
    for (n, word) in code.chunks_exact(4).enumerate() {
        let at = address + 4 * n as u64;
        let mut reader = U8Reader::new(word);
        let Ok(i) = decoder.decode(&mut reader) else {
            out.push(Insn {
                address: at,
                len: 4,
                text: "(bad)".into(),
                flow: Flow::Next,
                latency: None,
                mnemonic: "(bad)".into(),
            });
            continue;
        };
        let text = i.to_string();
        let mnemonic = text.split_whitespace().next().unwrap_or("").to_string();
        let pc_target = |k: usize| match i.operands[k] {
            Operand::PCOffset(off) => Some(at.wrapping_add_signed(off)),
            _ => None,
        };
        let flow = match i.opcode {
            O::BL => pc_target(0).map_or(Flow::IndirectCall, Flow::Call),
            // B, B.cond, CBZ/CBNZ (target in operand 1), TBZ/TBNZ (operand 2).
            O::B | O::Bcc(_) | O::CBZ | O::CBNZ | O::TBZ | O::TBNZ => {
                (0..3).find_map(pc_target).map_or(Flow::Next, Flow::Jump)
            }
            O::BLR | O::BLRAA | O::BLRAAZ | O::BLRAB | O::BLRABZ => Flow::IndirectCall,
            O::BR | O::BRAA | O::BRAAZ | O::BRAB | O::BRABZ => Flow::IndirectJump(None),
            O::RET | O::RETAA | O::RETAB => Flow::Stop,
            O::ADRP => {
                if let (Operand::Register(_, rd), Operand::PCOffset(off)) =
                    (i.operands[0], i.operands[1])
                {
                    pages[usize::from(rd) & 31] = Some((at & !0xfff).wrapping_add_signed(off));
                }
                Flow::Next
            }
            O::ADR => pc_target(1).map_or(Flow::Next, Flow::Address),
            O::ADD => match (i.operands[1], i.operands[2]) {
                (Operand::RegisterOrSP(_, rn), Operand::Immediate(imm))
                | (Operand::Register(_, rn), Operand::Immediate(imm)) => pages
                    [usize::from(rn) & 31]
                    .map_or(Flow::Next, |p| Flow::Address(p + u64::from(imm))),
                _ => Flow::Next,
            },
            _ => Flow::Next,
        };
        out.push(Insn {
            address: at,
            len: 4,
            text,
            flow,
            latency: a64_class(i.opcode),
            mnemonic,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_divisions_calls_and_addresses() {
        // 0x1000: f7 f6           div esi
        // 0x1002: 41 f7 fa        idiv r10d
        // 0x1005: f2 0f 51 c1     sqrtsd xmm0, xmm1
        // 0x1009: c5 fa 5e c1     vdivss xmm0, xmm0, xmm1
        // 0x100d: 0f af c1        imul eax, ecx
        // 0x1010: e8 eb 0f 00 00  call 0x2000
        // 0x1015: 48 8d 05 e4 1f 00 00  lea rax, [rip+0x1fe4] -> 0x3000
        // 0x101c: ff d0           call rax
        // 0x101e: e9 dd 2f 00 00  jmp 0x4000
        // 0x1023: c3              ret
        let code = [
            0xf7, 0xf6, 0x41, 0xf7, 0xfa, 0xf2, 0x0f, 0x51, 0xc1, 0xc5, 0xfa, 0x5e, 0xc1, 0x0f,
            0xaf, 0xc1, 0xe8, 0xeb, 0x0f, 0x00, 0x00, 0x48, 0x8d, 0x05, 0xe4, 0x1f, 0x00, 0x00,
            0xff, 0xd0, 0xe9, 0xdd, 0x2f, 0x00, 0x00, 0xc3,
        ];
        let d = decode(Isa::X86_64, &code, 0x1000);
        let got: Vec<(u64, &str, Option<LatencyClass>, Flow)> = d
            .iter()
            .map(|i| (i.address, i.mnemonic.as_str(), i.latency, i.flow))
            .collect();
        use LatencyClass::*;
        assert_eq!(
            got,
            [
                (0x1000, "div", Some(IntegerDivision), Flow::Next),
                (0x1002, "idiv", Some(IntegerDivision), Flow::Next),
                (0x1005, "sqrtsd", Some(SquareRoot), Flow::Next),
                (0x1009, "vdivss", Some(FloatDivision), Flow::Next),
                (0x100d, "imul", None, Flow::Next),
                (0x1010, "call", None, Flow::Call(0x2000)),
                (0x1015, "lea", None, Flow::Address(0x3000)),
                (0x101c, "call", None, Flow::IndirectCall),
                (0x101e, "jmp", None, Flow::Jump(0x4000)),
                (0x1023, "ret", None, Flow::Stop),
            ]
        );
        assert_eq!(d[1].text, "idiv r10d");
    }

    #[test]
    fn a64_divisions_calls_and_addresses() {
        // Encodings from the Arm ARM (little-endian words):
        let words: [u32; 9] = [
            0x1ac1_0800, // 0x0: udiv w0, w0, w1
            0x9ac2_0c20, // 0x4: sdiv x0, x1, x2
            0x1e61_1800, // 0x8: fdiv d0, d0, d1
            0x1e21_c000, // 0xc: fsqrt s0, s0
            0x1b01_7c00, // 0x10: mul w0, w0, w1
            0x9400_0004, // 0x14: bl +0x10 -> 0x24
            0x9000_0010, // 0x18: adrp x16, 0x0 (page of 0x18 = 0x0)
            0x9104_0210, // 0x1c: add x16, x16, #0x100 -> address 0x100
            0xd63f_0200, // 0x20: blr x16
        ];
        let code: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let d = decode(Isa::Aarch64, &code, 0);
        use LatencyClass::*;
        let got: Vec<(&str, Option<LatencyClass>, Flow)> = d
            .iter()
            .map(|i| (i.mnemonic.as_str(), i.latency, i.flow))
            .collect();
        assert_eq!(
            got,
            [
                ("udiv", Some(IntegerDivision), Flow::Next),
                ("sdiv", Some(IntegerDivision), Flow::Next),
                ("fdiv", Some(FloatDivision), Flow::Next),
                ("fsqrt", Some(SquareRoot), Flow::Next),
                ("mul", None, Flow::Next),
                ("bl", None, Flow::Call(0x24)),
                ("adrp", None, Flow::Next),
                ("add", None, Flow::Address(0x100)),
                ("blr", None, Flow::IndirectCall),
            ]
        );
    }
}
