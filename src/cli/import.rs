//! `ngcc-pipe import`: a NIST-round package (folder or archive) into a submission folder
//! (`src/import/`), printing each file written, each decision left to the user and each
//! file of the package that was not read. Names and text from the package are untrusted:
//! every line is shown with control and bidi characters escaped, one line each.

use super::ImportArgs;
use crate::error::Error;
use crate::import::{import, ImportError, Options};
use crate::text::clean_line;

pub(super) fn exec(args: ImportArgs) -> Result<(), Error> {
    let o = Options {
        package: args.package,
        into: args.into,
        name: args.name,
        force: args.force,
        cc: args.cc,
        root: args.root,
    };
    let done = import(&o).map_err(|e| match e {
        ImportError::Write { path, source } => Error::Io {
            what: clean_line(&path.display().to_string()),
            source,
        },
        other => Error::Input(other.to_string()),
    })?;
    let mut out = String::new();
    for w in &done.written {
        out.push_str(&format!("wrote {}\n", clean_line(&w.display().to_string())));
    }
    for d in &done.decisions {
        out.push_str(&format!("note: {}\n", clean_line(d)));
    }
    for s in &done.skipped {
        out.push_str(&format!("skipped: {}\n", clean_line(s)));
    }
    super::print(&out)
}
