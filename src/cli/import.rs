//! `ngcc-pipe import`: a NIST-round package (folder or archive) into a submission folder
//! (`src/import/`), printing each file written and each decision left to the user.

use super::ImportArgs;
use crate::error::Error;
use crate::import::{import, ImportError, Options};

pub(super) fn exec(args: ImportArgs) -> Result<(), Error> {
    let o = Options {
        package: args.package,
        into: args.into,
        name: args.name,
        force: args.force,
        cc: args.cc,
    };
    let done = import(&o).map_err(|e| match e {
        ImportError::Write { path, source } => Error::Io {
            what: path.display().to_string(),
            source,
        },
        other => Error::Input(other.to_string()),
    })?;
    let mut out = String::new();
    for w in &done.written {
        out.push_str(&format!("wrote {}\n", w.display()));
    }
    for d in &done.decisions {
        out.push_str(&format!("note: {d}\n"));
    }
    super::print(&out)
}
