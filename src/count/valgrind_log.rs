//! What valgrind's own messages say about a run it could not finish: an instruction its
//! translator (VEX) does not handle, and the function it was in.
//!
//! ```text
//! vex amd64->IR: unhandled instruction bytes: 0x62 0xF1 0x7F 0x48 0x7F 0x84 0x24 0xA0 0x1 0x0
//! ==32105== valgrind: Unrecognised instruction at address 0x4a557b1.
//! ==32105==    at 0x4A557B1: sha3_512 (in /…/ML-KEM-768-clean.so)
//! ```

/// An instruction valgrind could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhandled {
    /// The instruction's bytes as valgrind printed them (`62 f1 7f 48 …`), when it did.
    pub bytes: Option<String>,
    /// The address.
    pub address: String,
    /// The function it was in (`sha3_512`), when valgrind named one.
    pub function: Option<String>,
}

impl Unhandled {
    /// One sentence for a step's reason.
    pub fn describe(&self) -> String {
        let what = match &self.bytes {
            Some(b) if b.starts_with("62 ") => {
                format!("the EVEX-encoded (AVX-512) instruction `{b}`")
            }
            Some(b) => format!("the instruction `{b}`"),
            None => "an instruction".to_string(),
        };
        let place = match &self.function {
            Some(f) => format!("in `{f}` at {}", self.address),
            None => format!("at {}", self.address),
        };
        format!("valgrind cannot execute {what} {place}")
    }
}

/// The first unhandled instruction valgrind reports in `log` (its stderr), if any.
pub fn unhandled(log: &str) -> Option<Unhandled> {
    let mut lines = log.lines();
    let mut bytes = None;
    while let Some(l) = lines.next() {
        if let Some(b) = l.split("unhandled instruction bytes:").nth(1) {
            bytes = Some(
                b.split_whitespace()
                    .map(|x| {
                        let h = x.trim_start_matches("0x").to_ascii_lowercase();
                        format!("{h:0>2}")
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        let Some(rest) = l.split("Unrecognised instruction at address ").nth(1) else {
            continue;
        };
        let address = rest.trim().trim_end_matches('.').to_string();
        let function = lines
            .find_map(|n| {
                let body = strip_pid(n)?.trim_start();
                body.strip_prefix("at ").map(str::to_string)
            })
            .and_then(|at| {
                let (_, name) = at.split_once(": ")?;
                let name = name.split(" (").next()?.trim();
                (!name.is_empty() && name != "???").then(|| name.to_string())
            });
        return Some(Unhandled {
            bytes,
            address,
            function,
        });
    }
    None
}

/// The text after valgrind's `==pid==` prefix.
fn strip_pid(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("==")?;
    let (_, after) = rest.split_once("==")?;
    Some(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// valgrind 3.19 on an `-march=native` ML-KEM-768 object of an AVX-512 CPU.
    const SIGILL: &str = "\
==32105== For interactive control, run 'callgrind_control -h'.
vex amd64->IR: unhandled instruction bytes: 0x62 0xF1 0x7F 0x48 0x7F 0x84 0x24 0xA0 0x1 0x0
vex amd64->IR:   REX=0 REX.W=0 REX.R=0 REX.X=0 REX.B=0
==32105== valgrind: Unrecognised instruction at address 0x4a557b1.
==32105==    at 0x4A557B1: sha3_512 (in /o/build/ml-kem/ML-KEM-768-clean/ML-KEM-768-clean.so)
==32105==    by 0x4A4C865: PQCLEAN_MLKEM768_CLEAN_indcpa_keypair_derand (in /o/x.so)
==32105== Your program just tried to execute an instruction that Valgrind
";

    #[test]
    fn names_the_instruction_and_function() {
        let u = unhandled(SIGILL).unwrap();
        assert_eq!(u.bytes.as_deref(), Some("62 f1 7f 48 7f 84 24 a0 01 00"));
        assert_eq!(u.address, "0x4a557b1");
        assert_eq!(u.function.as_deref(), Some("sha3_512"));
        assert_eq!(
            u.describe(),
            "valgrind cannot execute the EVEX-encoded (AVX-512) instruction \
             `62 f1 7f 48 7f 84 24 a0 01 00` in `sha3_512` at 0x4a557b1"
        );
    }

    #[test]
    fn a_clean_log_has_none() {
        assert_eq!(unhandled("==1== I   refs:      1,584,191\n"), None);
    }
}
