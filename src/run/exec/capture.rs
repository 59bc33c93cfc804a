//! Bounded capture: a stream kept as its first and last bytes with the cut marked
//! ([`Capture`]), and the step log written the same way ([`Log`]).

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::CAP;

/// A stream kept within a bound: its first `head_cap` bytes, its last `tail_cap` bytes,
/// and how many bytes in between were dropped.
#[derive(Debug)]
pub struct Capture {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    cut: u64,
}

impl Capture {
    /// Keep the first and the last `cap` bytes.
    pub fn new(cap: usize) -> Capture {
        Capture {
            head_cap: cap,
            tail_cap: cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            cut: 0,
        }
    }

    pub fn push(&mut self, mut data: &[u8]) {
        let n = data.len().min(self.head_cap - self.head.len());
        self.head.extend_from_slice(&data[..n]);
        data = &data[n..];
        if data.len() >= self.tail_cap {
            self.cut += (self.tail.len() + data.len() - self.tail_cap) as u64;
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_cap..]);
            return;
        }
        let over = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..over);
        self.cut += over as u64;
        self.tail.extend(data);
    }

    /// Whether bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.cut > 0
    }

    /// Head, the cut marker (if any), tail.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = self.head.clone();
        if self.cut > 0 {
            if !out.is_empty() && !out.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(cut_marker(self.cut).as_bytes());
        }
        out.extend(self.tail.iter());
        out
    }
}

fn cut_marker(bytes: u64) -> String {
    format!("[... {bytes} bytes cut by ngcc-pipe: only the first and last MiB are kept ...]\n")
}

/// A step's log file, capped like a [`Capture`]: the first [`CAP`] bytes go straight to
/// the file, the last [`CAP`] bytes are held in memory and written (after the cut marker)
/// when the log is dropped.
pub struct Log {
    file: File,
    written: usize,
    rest: Capture,
}

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let direct = buf.len().min(CAP - self.written);
        if direct > 0 {
            self.file.write_all(&buf[..direct])?;
            self.written += direct;
        }
        self.rest.push(&buf[direct..]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = self.file.write_all(&self.rest.bytes());
    }
}

/// Open (truncate) a step's log file.
pub fn open_log(path: &Path) -> std::io::Result<Log> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    Ok(Log {
        file: File::create(path)?,
        written: 0,
        rest: Capture {
            head_cap: 0,
            ..Capture::new(CAP)
        },
    })
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::super::{run, tests::log};
    use super::*;

    #[test]
    fn captures_are_bounded_and_marked() {
        let mut c = Capture::new(4);
        c.push(b"abcdefghij");
        c.push(b"kl");
        assert_eq!(
            c.bytes(),
            b"abcd\n[... 4 bytes cut by ngcc-pipe: only the first and last MiB are kept ...]\nijkl"
        );
        let mut small = Capture::new(4);
        small.push(b"abc");
        small.push(b"def");
        assert_eq!(small.bytes(), b"abcdef");
        assert!(!small.truncated());

        let (d, mut log) = log();
        let far = Instant::now() + Duration::from_secs(30);
        let out = run(
            Command::new("sh").args(["-c", "yes x | head -c 5000000 >&2; echo end >&2"]),
            far,
            &mut log,
        )
        .unwrap();
        drop(log);
        assert!(out.truncated);
        assert!(out.stderr.len() < 2 * CAP + 200, "{}", out.stderr.len());
        assert!(out.stderr.ends_with(b"x\nx\nend\n"));
        let kept = std::fs::read(d.path().join("x.log")).unwrap();
        assert!(kept.len() < 2 * CAP + 400, "{}", kept.len());
        assert!(String::from_utf8_lossy(&kept).contains("bytes cut by ngcc-pipe"));
        assert!(kept.ends_with(b"end\n# exit code 0\n"));
    }
}
