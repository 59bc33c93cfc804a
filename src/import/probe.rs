//! api.h's sizes and `CRYPTO_ALGNAME` when api.h does not state them as plain numbers.
//! Nothing of the package is evaluated on the host: the compiler runs in the build jail
//! (`run::sandbox`, as a build step's compiler: no network, none of the host's files but
//! the system folders, an unprivileged user, limits and a [`TIMEOUT`]) on a copy of the
//! package's headers (`Package::copy_headers`) in a guarded temporary folder, and its
//! object is read back as untrusted. Where the compiler cannot run contained (no
//! bubblewrap) or cannot evaluate them, the `#define`s are read without a compiler
//! ([`super::defines`]); what neither finds is left to the user, said.

use std::path::PathBuf;
use std::time::Duration;

use kem_native::output::ApiSizes;

use super::defines;
use super::guard::Guard;
use super::read::{join, Package};
use crate::run::sandbox::{Jail, Sandbox};

/// How long the contained compiler may take for one api.h.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// Address space of the contained compiler.
const MEMORY: u64 = 2 << 30;
/// Largest probe object read back.
const OBJECT_CAP: u64 = 16 << 20;

/// What api.h gives for one parameter set.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// The sizes, when they were found.
    pub sizes: Option<ApiSizes>,
    /// `CRYPTO_ALGNAME`, when found (also without the sizes).
    pub algname: Option<String>,
    /// How they were found, or why they were not: for import's notes.
    pub note: Option<String>,
}

/// Evaluates api.h files of one package; the jail and the copy are made once.
pub struct Prober {
    cc: String,
    sandbox: Option<Sandbox>,
    /// The guarded folder (`copy/` the headers, `out-N/` one per compilation).
    work: Option<(PathBuf, Guard)>,
    runs: usize,
}

impl Prober {
    pub fn new(cc: &str) -> Prober {
        Prober {
            cc: cc.to_string(),
            sandbox: None,
            work: None,
            runs: 0,
        }
    }

    /// The sizes and name of the parameter set in `dir` (relative to the package), whose
    /// build file names the `-I` folders `includes` (relative to `dir`).
    pub fn api(&mut self, pkg: &Package, dir: &str, includes: &[String]) -> Result<Found, String> {
        let api_h = join(dir, "api.h");
        let text = pkg
            .read_text(&api_h)
            .ok_or_else(|| "api.h cannot be read".to_string())?;
        let literal = match kem_native::api::parse_api_h(&text, "") {
            Ok(a) => {
                return Ok(Found {
                    algname: a.algname.clone(),
                    sizes: Some(a),
                    note: None,
                })
            }
            Err(e) => e.to_string(),
        };
        let jailed = match self.sandbox(pkg)?.contained() {
            true => match self.compile(pkg, dir, includes) {
                Ok(a) => {
                    return Ok(Found {
                        algname: a.algname.clone(),
                        sizes: Some(a),
                        note: None,
                    })
                }
                Err(e) => format!("the contained compiler could not evaluate them ({e})"),
            },
            false => {
                "the compiler is not run: it cannot be contained here (no bubblewrap)".to_string()
            }
        };
        // Without a compiler: the #defines alone.
        let defs = defines::read(pkg, dir, includes);
        let algname = defs
            .as_ref()
            .ok()
            .and_then(|d| d.string("CRYPTO_ALGNAME").ok().flatten());
        let sizes = defs.and_then(|d| {
            Ok(ApiSizes {
                algname: algname.clone(),
                sk: d.number("CRYPTO_SECRETKEYBYTES")?,
                pk: d.number("CRYPTO_PUBLICKEYBYTES")?,
                ct: d.number("CRYPTO_CIPHERTEXTBYTES")?,
                ss: d.number("CRYPTO_BYTES")?,
            })
        });
        Ok(match sizes {
            Ok(a) => Found {
                sizes: Some(a),
                algname,
                note: Some(format!(
                    "api.h's sizes are not plain numbers ({literal}) and {jailed}: read from the #defines of api.h and the headers it includes, without a compiler"
                )),
            },
            Err(e) => Found {
                sizes: None,
                algname,
                note: Some(format!(
                    "TODO sizes: api.h's sizes are not plain numbers ({literal}), {jailed}, and the #defines alone do not give them ({e}): sizes.csv has no row for it; add one, and check `CRYPTO_ALGNAME`"
                )),
            },
        })
    }

    /// The sandbox, probed once (its trial run's scratch folder in the guarded folder).
    fn sandbox(&mut self, pkg: &Package) -> Result<&Sandbox, String> {
        if self.sandbox.is_none() {
            let work = self.work(pkg)?;
            self.sandbox = Some(Sandbox::detect_in(&work));
        }
        Ok(self.sandbox.as_ref().expect("just made"))
    }

    /// The folder holding the copy of the package's headers, made on first use.
    fn work(&mut self, pkg: &Package) -> Result<PathBuf, String> {
        if let Some((w, _)) = &self.work {
            return Ok(w.clone());
        }
        let (dir, guard) = Guard::temp_dir().map_err(|e| format!("a temporary folder: {e}"))?;
        let copy = dir.join("copy");
        std::fs::create_dir(&copy)
            .and_then(|()| pkg.copy_headers(&copy))
            .map_err(|e| format!("copying the headers: {e}"))?;
        self.work = Some((dir.clone(), guard));
        Ok(dir)
    }

    /// Compile the probe of `dir`'s api.h in the jail and read its object.
    fn compile(
        &mut self,
        pkg: &Package,
        dir: &str,
        includes: &[String],
    ) -> Result<ApiSizes, String> {
        let work = self.work(pkg)?;
        let copy = work.join("copy");
        let real = pkg
            .real_rel(dir)
            .ok_or_else(|| "its folder cannot be resolved".to_string())?;
        let inst = copy.join(&real);
        self.runs += 1;
        let out = work.join(format!("out-{}", self.runs));
        std::fs::create_dir(&out).map_err(|e| e.to_string())?;
        let probe = out.join("probe.c");
        std::fs::write(&probe, crate::run::steps::harness::probe_source(""))
            .map_err(|e| e.to_string())?;
        let obj = out.join("probe.o");
        let mut args = vec![
            "-c".to_string(),
            probe.display().to_string(),
            "-o".into(),
            obj.display().to_string(),
            format!("-I{}", inst.display()),
        ];
        for i in includes {
            let p = crate::safe_fs::normalize(&inst.join(i));
            if p.starts_with(&copy) {
                args.push(format!("-I{}", p.display()));
            }
        }
        let jail = Jail {
            read: vec![copy.clone()],
            write: vec![out.clone()],
            cwd: out.clone(),
            memory: MEMORY,
            cpu: None,
            alongside: 0,
        };
        let sandbox = self.sandbox(pkg)?.clone();
        let log_path = work.join(format!("compile-{}.log", self.runs));
        let mut log = crate::run::exec::open_log(&log_path).map_err(|e| e.to_string())?;
        let ran = crate::run::exec::run_jailed(&sandbox, &self.cc, args, &jail, TIMEOUT, &mut log)
            .map_err(|e| format!("cannot run `{}`: {e}", crate::text::clean_line(&self.cc)))?;
        let exit = ran.exit;
        if !exit.success() {
            // Its messages quote the package (paths it names, its lines): not repeated.
            let errors = String::from_utf8_lossy(&ran.stderr).matches("rror").count();
            return Err(format!(
                "{}, {errors} error message(s), not shown: they quote the package",
                exit.describe()
            ));
        }
        let bytes = crate::safe_fs::read(&obj, OBJECT_CAP).map_err(|e| e.to_string())?;
        crate::run::steps::harness::read_probe(&bytes)
    }
}
