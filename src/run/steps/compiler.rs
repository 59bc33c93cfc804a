//! The compiler as the build steps run it: in the sandbox, each error a step reason.

use std::path::Path;

use super::link::CODEGEN_FLAGS;
use super::{Step, StepError};
use crate::run::exec::{self, Exit};
use crate::run::sandbox::Jail;

/// The compiler, run in the sandbox: it reads the source tree and writes only the
/// instance's build folder and the shared primitives' folder.
pub(super) struct Compiler<'s, 'a> {
    pub(super) step: &'s mut Step<'a>,
    pub(super) cc: String,
    pub(super) log: exec::Log,
    pub(super) jail: Jail,
}

impl Compiler<'_, '_> {
    /// Compile one source into `obj`; a compile error becomes the step's reason.
    pub(super) fn compile(
        &mut self,
        src: &Path,
        obj: &Path,
        flags: &[String],
    ) -> Result<(), StepError> {
        let mut args = flags.to_vec();
        args.extend(CODEGEN_FLAGS.iter().map(|f| f.to_string()));
        args.extend([
            "-c".to_string(),
            src.display().to_string(),
            "-o".to_string(),
            obj.display().to_string(),
        ]);
        self.run(args, || format!("compile error in {}", src.display()))
    }

    pub(super) fn run(
        &mut self,
        args: Vec<String>,
        what: impl FnOnce() -> String,
    ) -> Result<(), StepError> {
        let out = self
            .step
            .exec_contained(
                Path::new(&self.cc),
                &args,
                &self.jail,
                &mut self.log,
                &|_| {},
            )
            .map_err(|source| StepError::Cc {
                cc: self.cc.clone(),
                source,
            })?;
        match out.exit {
            Exit::Code(0) => Ok(()),
            Exit::TimedOut => Err(StepError::TimedOut(self.step.timeout_text())),
            other => Err(StepError::Tool {
                what: what(),
                exit: other.describe(),
                limits: matches!(other, Exit::Signal(_)).then(|| self.step.limits_note()),
                tail: exec::tail(&out.stderr, 6),
            }),
        }
    }
}
