//! Containment, third round (issue 37): `ngcc-pipe import` and every file and name it reads
//! as contained as a build, untrusted text shown as text everywhere, manifest paths kept
//! inside their source, and a timed KEM kept on its core and off the clock.
//!
//! - [`import`]: a package whose headers `.incbin` a secret and `/etc/shadow` or probe them
//!   with `__has_include` (nothing of them in what import writes or prints, with and without
//!   a sandbox); links out of the package, FIFOs, `/dev/zero` and an 8 GiB sparse file (not
//!   read, each named, no hang, small memory); a killed import leaves nothing behind.
//! - [`names`]: folder names and `CRYPTO_ALGNAME` with OSC, clear-screen, CR, newlines, C1
//!   and bidi controls (escaped on the terminal and in the manifest, which still checks);
//!   `check`'s snippets of a manifest holding raw escapes.
//! - [`paths`]: `source path` climbing to `/` with `include "root"`, and links that leave
//!   the source from `dir`, `sources`, primitives and `kat submitted`: refused at their line.
//! - [`jail`]: KEM fixtures (`tests/fixtures/hostile/containment/`) that move themselves to
//!   another core while timed, trap the time-stamp counter, and print bidi overrides.
//!
//! `scripts/test.sh` runs this binary as root and as an unprivileged user, like
//! `tests/hostile`.

use std::path::Path;

#[path = "../common/mod.rs"]
mod common;
mod import;
mod jail;
mod names;
mod paths;

use common::*;

/// Whether bubblewrap contains processes here.
fn contained() -> bool {
    let sb = ngcc_pipe::run::sandbox::Sandbox::detect();
    require(
        "bubblewrap",
        (!sb.contained()).then(|| sb.info.missing.join("; ")),
    )
}

/// The first character of `text` a terminal or reader would not show as text (a control
/// other than newline and tab, ESC, C1, a bidi control or separator), with its offset.
fn raw_control(text: &str) -> Option<(usize, char)> {
    text.char_indices()
        .find(|(_, c)| ngcc_pipe::text::needs_escape(*c))
}

/// Every regular file below `dir` with its text (lossy), sorted by path.
fn files_text(dir: &Path) -> Vec<(String, String)> {
    tree(dir)
        .into_iter()
        .filter_map(|rel| {
            let bytes = std::fs::read(dir.join(&rel)).ok()?;
            Some((rel, String::from_utf8_lossy(&bytes).into_owned()))
        })
        .collect()
}

/// The first line of `/etc/shadow` when this user can read it (as root), else `None`.
fn shadow_line() -> Option<String> {
    let text = std::fs::read_to_string("/etc/shadow").ok()?;
    text.lines()
        .next()
        .filter(|l| l.len() > 4)
        .map(str::to_string)
}
