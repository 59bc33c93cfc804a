//! One contained kem-runner job of a step, run directly or under a wrapper tool
//! (valgrind): the runner's argv (`<job> --lib --api --ns [--op] ...`), a fresh scratch
//! folder (the only place the job may write), the jail, the run with the step's deadline,
//! and what the exit code says ([`RunnerJob::record`]). `time`, `profile`, `kat`, `count`
//! and `ct` all start their runners through it; the timing session uses its scratch folder
//! and jail.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use super::error::{JobError, StepError};
use super::{exec, Step};
use crate::model::Op;
use crate::record::{BuildData, CountOutput, ProfileOutput, TimeOutput};
use crate::run::sandbox::Jail;

/// A runner record that can say the KEM misbehaved.
pub trait RunnerRecord: for<'de> serde::Deserialize<'de> {
    /// The record's `failure`.
    fn failure(&self) -> Option<&str>;
}

macro_rules! runner_records {
    ($($t:ty),*) => {$(
        impl RunnerRecord for $t {
            fn failure(&self) -> Option<&str> {
                self.failure.as_deref()
            }
        }
    )*};
}
runner_records!(
    TimeOutput,
    ProfileOutput,
    CountOutput,
    kem_native::ct::CtOutput,
    crate::record::KatOutput
);

/// A tool the runner runs under: its name for messages, its program and its options.
pub struct Wrapper {
    /// Shown in reasons (`enc under memcheck: ...`).
    pub name: &'static str,
    /// Shown in `cannot run <tool>`.
    pub tool: &'static str,
    /// The program.
    pub program: PathBuf,
    /// Its options, before the runner.
    pub options: Vec<String>,
}

/// One kem-runner job of a step.
pub struct RunnerJob<'a> {
    job: &'static str,
    object: &'a Path,
    build: &'a BuildData,
    options: Vec<String>,
    wrapper: Option<Wrapper>,
    scratch: PathBuf,
    /// The core the job is kept on (`--cpu`, and the jail's `cpu`).
    cpu: Option<usize>,
}

impl<'a> RunnerJob<'a> {
    /// `job` on `object` (with `build`'s api.h and namespace), with a fresh scratch folder
    /// (see [`Step::scratch`]).
    pub fn new(
        step: &Step,
        job: &'static str,
        object: &'a Path,
        build: &'a BuildData,
    ) -> Result<RunnerJob<'a>, StepError> {
        Ok(RunnerJob {
            job,
            object,
            build,
            options: Vec::new(),
            wrapper: None,
            scratch: step.scratch()?,
            cpu: None,
        })
    }

    /// The scratch folder (gone after [`run`](Self::run)).
    pub fn scratch(&self) -> &Path {
        &self.scratch
    }

    /// Add `--key value`.
    pub fn opt(mut self, key: &str, value: impl Display) -> Self {
        self.options.push(format!("--{key}"));
        self.options.push(value.to_string());
        self
    }

    /// Run on core `cpu` (`--cpu`), kept there by the sandbox (`sandbox::pinning`).
    pub fn on_core(mut self, cpu: usize) -> Self {
        self.cpu = Some(cpu);
        self.opt("cpu", cpu)
    }

    /// Add options as given.
    pub fn opts(mut self, options: &[String]) -> Self {
        self.options.extend(options.iter().cloned());
        self
    }

    /// Run the runner under `wrapper`.
    pub fn under(mut self, wrapper: Wrapper) -> Self {
        self.wrapper = Some(wrapper);
        self
    }

    /// The jail: reads the runner, the object and its api.h, writes only the scratch folder;
    /// kept on the job's core when it has one.
    pub fn jail(&self, step: &Step) -> Jail {
        let jail = step.runner_jail(self.object, &self.build.api_h, &self.scratch);
        match self.cpu {
            Some(c) => jail.on_core(c),
            None => jail,
        }
    }

    /// The program and its arguments: the wrapper and its options if any, the runner, the
    /// job, the object's options, then this job's.
    pub fn command(&self, runner: &Path) -> (PathBuf, Vec<String>) {
        let api_h =
            std::path::absolute(&self.build.api_h).unwrap_or_else(|_| self.build.api_h.clone());
        let job = [
            self.job.to_string(),
            "--lib".into(),
            self.object.display().to_string(),
            "--api".into(),
            api_h.display().to_string(),
            "--ns".into(),
            self.build.namespace.clone(),
        ]
        .into_iter()
        .chain(self.options.iter().cloned());
        match &self.wrapper {
            None => (runner.to_path_buf(), job.collect()),
            Some(w) => (
                w.program.clone(),
                w.options
                    .iter()
                    .cloned()
                    .chain([runner.display().to_string()])
                    .chain(job)
                    .collect(),
            ),
        }
    }

    /// Run the job in its jail with the step's deadline, logging to `log`; `read` sees the
    /// output and the scratch folder, which is removed after it.
    pub fn run<R>(
        self,
        step: &mut Step,
        log: &mut exec::Log,
        on_stderr_line: &(dyn Fn(&str) + Sync),
        read: impl FnOnce(&mut Step, exec::Output, &Path) -> Result<R, StepError>,
    ) -> Result<R, StepError> {
        let (program, args) = self.command(&step.ctx.runner);
        let jail = self.jail(step);
        let tool = self.wrapper.as_ref().map_or("kem-runner", |w| w.tool);
        let result = step
            .exec_contained(&program, &args, &jail, log, on_stderr_line)
            .map_err(|source| StepError::Spawn { tool, source })
            .and_then(|out| read(step, out, &self.scratch));
        step.drop_scratch(&self.scratch);
        result
    }
}

/// The record of a per-operation job from its exit: exit 0, the record; a timeout; exit 1
/// with the KEM's `failure`; a crash (with the step's limits); any other exit.
pub fn record<T: RunnerRecord>(
    step: &Step,
    out: &exec::Output,
    op: Op,
    under: Option<&'static str>,
) -> Result<T, StepError> {
    let tail = || exec::tail(&out.stderr, 3);
    match &out.exit {
        exec::Exit::Code(0) => Ok(parse_runner(out)?),
        exec::Exit::TimedOut => Err(StepError::TimedOut(step.timeout_text())),
        exec::Exit::Code(1) => Err(match parse_runner::<T>(out) {
            Ok(rec) if rec.failure().is_some() => JobError::Kem {
                op,
                failure: rec.failure().unwrap_or_default().to_string(),
            },
            _ => JobError::Exit1 { op, tail: tail() },
        }
        .into()),
        exec::Exit::Signal(_) => Err(JobError::Crashed {
            op,
            under,
            exit: out.exit.describe(),
            limits: step.limits_note(),
            tail: tail(),
        }
        .into()),
        other => Err(JobError::Ended {
            op,
            under,
            exit: other.describe(),
            tail: tail(),
        }
        .into()),
    }
}

/// Parse the one JSON record a runner job writes on its record channel (the stdout it was
/// started with; the KEM's own stdout goes to stderr).
pub fn parse_runner<T: for<'de> serde::Deserialize<'de>>(
    out: &exec::Output,
) -> Result<T, JobError> {
    serde_json::from_slice(&out.stdout).map_err(|source| JobError::NoRecord {
        source,
        truncated: out.truncated,
        exit: out.exit.describe(),
        tail: exec::tail(&out.stderr, 3),
    })
}

/// ` in <call>` for the KAT call a runner job crashed in (the runner names each call on
/// stderr just before making it), or nothing when it named none.
pub fn crashed_in(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    let prefix = format!("{} ", kem_native::kat::CALLING);
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|call| format!(" in {call}"))
        .unwrap_or_default()
}
