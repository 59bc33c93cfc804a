//! The steps. Each kind is one file, `run/steps/<kind>.rs`, holding its [`KindSpec`]
//! (cache-key inputs, dry-run estimate) and its `run`; [`behaviour`] maps the kind to it.
//! Records are the only way steps talk to each other (a KAT reads the build record to find
//! the object).
//!
//! Adding a kind (docs/architecture.md): its [`StepKind`] variant, name and record folder in
//! the evidence schema (`crates/ngcc-record/src/kinds.rs`), its row of facts in
//! `crate::model::KindTable` (scope, data needs, properties), a file here implementing
//! [`KindSpec`] with its `mod` line and its arm in [`behaviour`]; a kind that records a
//! payload also adds its variant to [`StepData`].

pub mod build;
mod build_job;
mod compiler;
mod count;
pub mod ct;
pub mod error;
pub mod harness;
mod index;
mod kat;
mod kat_dec;
pub mod kat_submitted;
mod kind;
pub mod link;
mod profile;
mod report;
pub mod runner_job;
mod shared;
mod sizes;
pub mod source;
mod survey;
pub mod time;
pub mod valgrind_object;

pub use error::{JobError, StepError};
pub use kind::{behaviour, kind_inputs, KindSpec};
pub use runner_job::{RunnerJob, RunnerRecord, Wrapper};

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use petgraph::graph::NodeIndex;

use super::sandbox::disk::{DiskGuard, DISK};
use super::sandbox::Jail;
use super::{exec, Ctx};
use crate::graph::Node;
use crate::model::{
    Campaign, Instance, InstanceSettings, KindFacts, StepKind, StepSpec, Submission,
};
use crate::record::{BuildData, SourceData, Status, StepData, StepRecord, RECORD_SCHEMA};

/// What one step produced; the scheduler adds ids, keys and times.
pub struct Done {
    pub status: Status,
    pub reason: Option<String>,
    pub data: Option<StepData>,
}

impl Done {
    pub fn ok(data: StepData) -> Done {
        Done {
            status: Status::Ok,
            reason: None,
            data: Some(data),
        }
    }

    pub fn failed(reason: impl Into<String>) -> Done {
        Done {
            status: Status::Failed,
            reason: Some(reason.into()),
            data: None,
        }
    }

    pub fn unsupported(reason: impl Into<String>) -> Done {
        Done {
            status: Status::Unsupported,
            reason: Some(reason.into()),
            data: None,
        }
    }
}

pub use super::stop::Stop;

impl From<Stop> for Done {
    fn from(s: Stop) -> Done {
        Done {
            status: s.status,
            reason: Some(s.reason),
            data: None,
        }
    }
}

impl From<StepError> for Done {
    fn from(e: StepError) -> Done {
        Stop::from(e).into()
    }
}

/// A running step: its node, its deadline, and the commands, logs and artefacts it has
/// produced so far.
pub struct Step<'a> {
    pub ctx: &'a Ctx,
    pub ix: NodeIndex,
    pub node: &'a Node,
    pub deadline: Instant,
    pub commands: Vec<Vec<String>>,
    pub logs: Vec<PathBuf>,
    pub artefacts: Vec<PathBuf>,
    /// Whether the step ran submission-controlled code (in the sandbox).
    pub contained: bool,
}

impl<'a> Step<'a> {
    pub fn submission(&self) -> &'a Submission {
        self.ctx.submission(self.node)
    }

    pub fn instance(&self) -> &'a Instance {
        self.ctx.instance(self.node).expect("per-instance step")
    }

    /// Run a command with the step's deadline, logging it.
    pub fn exec(
        &mut self,
        cmd: &mut Command,
        log: &mut exec::Log,
    ) -> std::io::Result<exec::Output> {
        self.commands.push(exec::argv(cmd));
        exec::run(cmd, self.deadline, log)
    }

    /// Run `program` with `args` in the sandbox (`jail`) with the step's deadline, logging
    /// and recording the command as written (not the sandbox around it).
    pub fn exec_contained(
        &mut self,
        program: &Path,
        args: &[String],
        jail: &Jail,
        log: &mut exec::Log,
        on_stderr_line: &(dyn Fn(&str) + Sync),
    ) -> std::io::Result<exec::Output> {
        // kem-runner of an emulated target runs under the system's emulator.
        let wrapped: Vec<String>;
        let (program, args) = match &self.ctx.emulator {
            Some(emu) if program == self.ctx.runner => {
                wrapped = emu[1..]
                    .iter()
                    .cloned()
                    .chain(std::iter::once(program.display().to_string()))
                    .chain(args.iter().cloned())
                    .collect();
                (Path::new(&emu[0]), &wrapped[..])
            }
            _ => (program, args),
        };
        let shown: Vec<String> = std::iter::once(program.display().to_string())
            .chain(args.iter().cloned())
            .collect();
        self.commands.push(shown.clone());
        self.contained = true;
        self.slurm_job()?;
        // A kem-runner job reads its words on stdin: the same command line for every job.
        let (args, line) = match exec::job_on_stdin(program, args, &self.ctx.runner) {
            Some((a, l)) => (a, Some(l)),
            None => (args.to_vec(), None),
        };
        let mut cmd = self.ctx.sandbox_for(self.ix).command(program, &args, jail);
        let guard = DiskGuard::new(&jail.write, DISK);
        let mut out = exec::run_guarded(
            &mut cmd,
            &shown,
            self.deadline,
            log,
            on_stderr_line,
            Some(&guard),
            line.as_deref(),
        )?;
        if self.ctx.sandbox.contained() {
            out.exit = out.exit.through_sandbox();
        }
        Ok(out)
    }

    /// With the Slurm executor, make sure this step has its job (submitted at its first
    /// contained command; its deadline then starts again, the queue wait not counted).
    fn slurm_job(&mut self) -> std::io::Result<()> {
        let Some(slurm) = &self.ctx.slurm else {
            return Ok(());
        };
        let timeout = self
            .ctx
            .spec(self.node.kind)
            .map(|s| s.timeout)
            .unwrap_or_default();
        let (_, new) =
            slurm.job_for(self.ix.index(), &self.node.id, self.node.exclusive, timeout)?;
        if new {
            self.deadline = Instant::now() + timeout;
        }
        Ok(())
    }

    /// A fresh, empty scratch folder for this step's contained processes
    /// (`scratch/<sub>/<instance>/<random>` under the outputs).
    pub fn scratch(&self) -> Result<PathBuf, StepError> {
        // A random name: the job works and has its HOME there, and a KEM can read its
        // working folder, so the name says nothing of the job (`time`, `kat`, `count`...).
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::UNIX_EPOCH.elapsed().map_or(0, |d| d.as_nanos()));
        let name = format!("{:016x}", h.finish());
        let dir = self.ctx.out.join("scratch").join(self.slug()).join(name);
        std::fs::create_dir_all(&dir).map_err(StepError::io(&dir))?;
        Ok(dir)
    }

    /// Remove a scratch folder made by [`Step::scratch`] and its parents left empty.
    pub fn drop_scratch(&self, dir: &Path) {
        let _ = crate::safe_fs::tree::remove_tree(dir);
        let top = self.ctx.out.join("scratch");
        let mut d = dir.parent();
        while let Some(p) = d.filter(|p| p.starts_with(&top)) {
            if std::fs::remove_dir(p).is_err() {
                break;
            }
            d = p.parent();
        }
    }

    /// The jail of a kem-runner job: it reads the runner, the object and its `api.h`, and
    /// writes only `scratch`.
    pub fn runner_jail(&self, object: &Path, api_h: &Path, scratch: &Path) -> Jail {
        let mut jail = Jail::runner(&self.ctx.runner, object, api_h, scratch, self.memory());
        // The system libraries objects link (`link "crypto"`): the loader maps them.
        for l in self.ctx.facts.libraries.values().flatten() {
            jail.read.extend([l.file.clone(), l.real.clone()]);
        }
        // The emulator and the folders it names (`-L` sysroot) must be readable inside.
        for a in self.ctx.emulator.iter().flatten() {
            if Path::new(a).is_absolute() {
                jail.read.push(PathBuf::from(a));
            }
        }
        jail
    }

    /// The limits a contained process had, for the reason of a crash (a failed allocation
    /// often ends in SIGSEGV or SIGABRT).
    pub fn limits_note(&self) -> String {
        super::sandbox::limits_note(self.memory())
    }

    /// Address-space limit of this step's contained processes.
    pub fn memory(&self) -> u64 {
        self.ctx
            .spec(self.node.kind)
            .and_then(|s| s.params.memory)
            .unwrap_or(super::sandbox::DEFAULT_MEMORY)
    }

    /// Open a log under the output folder (relative path) and remember it.
    pub fn open_log(&mut self, rel: PathBuf) -> std::io::Result<exec::Log> {
        if !stays_inside(&rel) {
            return Err(std::io::Error::other(format!(
                "refused: log path {} leaves the outputs folder",
                rel.display()
            )));
        }
        let f = exec::open_log(&self.ctx.out.join(&rel))?;
        if !self.logs.contains(&rel) {
            self.logs.push(rel);
        }
        Ok(f)
    }

    /// Open `logs/<sub>/<instance>/<name>.log` (a runner job's log) and remember it.
    pub fn job_log(&mut self, name: &str) -> Result<exec::Log, StepError> {
        let rel = Path::new("logs")
            .join(self.slug())
            .join(format!("{name}.log"));
        self.open_log(rel).map_err(StepError::File)
    }

    /// `<sub>/<instance>` for paths.
    pub fn slug(&self) -> PathBuf {
        let sub = &self.submission().id;
        match self.ctx.instance(self.node) {
            Some(i) => Path::new(sub).join(&i.id),
            None => PathBuf::from(sub),
        }
    }

    /// Where the submission's code is, from the source step's record.
    pub fn source(&self) -> Result<SourceData, StepError> {
        match self
            .ctx
            .sibling_record(self.node, StepKind::Source)
            .and_then(|r| r.data)
        {
            Some(StepData::Source(s)) => Ok(s),
            _ => Err(StepError::NoSource),
        }
    }

    /// The build record of this instance.
    pub fn build(&self) -> Result<(StepRecord, BuildData), StepError> {
        let rec = self
            .ctx
            .sibling_record(self.node, StepKind::Build)
            .ok_or(StepError::NoBuild)?;
        match &rec.data {
            Some(StepData::Build(b)) => {
                let b = b.clone();
                Ok((rec, b))
            }
            _ => Err(StepError::NoObject(rec.status.name())),
        }
    }

    /// Timeout of this step as text.
    pub fn timeout_text(&self) -> String {
        let t = self.ctx.timeout(self.node);
        format!("timed out after {} s (killed)", t.as_secs())
    }
}

/// `spec`'s `instances` entry matching `node`'s instance, if any (what a step kind adds to
/// its cache-key inputs; keys see the campaign, not a run context).
pub fn instance_settings<'a>(
    c: &Campaign,
    spec: &'a StepSpec,
    node: &Node,
) -> Option<&'a InstanceSettings> {
    let sub = &c.submissions[node.submission];
    spec.settings_for(&sub.id, &sub.instances[node.instance?].id)
}

/// True when `rel` names something inside the folder it is joined to: relative, only
/// plain names (no `..`, no root). Ids are validated by the DSL; this is the last guard
/// before anything is written.
pub fn stays_inside(rel: &Path) -> bool {
    rel.components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// The refusal of a step whose output paths would leave the outputs folder.
fn refused(step: &Step) -> Option<Done> {
    let record_rel = step.ctx.rel(&step.ctx.record_path(step.node));
    (!stays_inside(&step.slug()) || !stays_inside(&record_rel)).then(|| {
        Done::failed(format!(
            "refused: output paths of `{}` would leave the outputs folder",
            step.node.id
        ))
    })
}

fn new_step(ctx: &Ctx, ix: NodeIndex) -> Step<'_> {
    let node = ctx.node(ix);
    let timeout = ctx.timeout(node);
    Step {
        ctx,
        ix,
        node,
        deadline: Instant::now() + timeout,
        commands: Vec::new(),
        logs: Vec::new(),
        artefacts: Vec::new(),
        contained: false,
    }
}

/// Run the `time` steps at `ixs` together in one timing session ([`super::session`]) and
/// return their records, in the order of `ixs`.
pub fn run_time_session(ctx: &Ctx, ixs: &[NodeIndex]) -> Vec<StepRecord> {
    let spec = ctx.spec(StepKind::Time).expect("time steps are declared");
    let mut steps: Vec<Step> = ixs.iter().map(|&ix| new_step(ctx, ix)).collect();
    let mut members = Vec::new();
    let mut joined = Vec::new();
    let mut done: Vec<Option<Done>> = Vec::new();
    let k = super::session::processes_for(ixs.len());
    for (i, step) in steps.iter_mut().enumerate() {
        if let Some(refusal) = refused(step) {
            done.push(Some(refusal));
            continue;
        }
        if let Some(why) = emulation_refuses(ctx, step.node.kind) {
            done.push(Some(Done::unsupported(why)));
            continue;
        }
        match time::member(step, k) {
            Ok((m, rec, build, scratch)) => {
                members.push(m);
                joined.push((i, rec, build, scratch));
                done.push(None);
            }
            Err(e) => done.push(Some(e.into())),
        }
    }
    let settings = super::session::Settings {
        runner: ctx.runner.clone(),
        sandbox: ixs
            .first()
            .map_or_else(|| ctx.sandbox.clone(), |&ix| ctx.sandbox_for(ix)),
        bench_cpu: ctx.campaign.system.bench_cpu,
        precision: crate::measure::rounds::DEFAULT_PRECISION,
        batch: super::session::DEFAULT_BATCH.min(spec.params.trial),
        // The longest of the members' timeouts (`instances` entries may raise some).
        timeout: steps
            .iter()
            .map(|s| ctx.timeout(s.node))
            .max()
            .unwrap_or(spec.timeout),
        group: 1,
        gauge: if members.is_empty() {
            None
        } else {
            yardstick_gauge(ctx)
        },
    };
    let ids: Vec<String> = joined
        .iter()
        .map(|(i, ..)| steps[*i].node.id.clone())
        .collect();
    let show = |round: usize, worst: f64| {
        if let Some(p) = ctx.progress.get() {
            let what = if worst.is_finite() {
                format!("round {round}, widest CI ±{:.1}%", worst * 100.0)
            } else {
                format!("round {round}")
            };
            for id in &ids {
                p.update(id, &what);
            }
        }
    };
    let (_, _, outcomes) = super::session::run(members, &settings, &show);
    let _ = std::fs::remove_dir(ctx.out.join("scratch"));
    for ((i, rec, build, scratches), o) in joined.into_iter().zip(outcomes) {
        for s in &scratches {
            steps[i].drop_scratch(s);
        }
        steps[i].commands.extend(o.commands);
        done[i] = Some(time::from_session(
            &steps[i], rec, build, o.result, o.elapsed,
        ));
    }
    steps
        .into_iter()
        .zip(done)
        .map(|(step, d)| record_of(step, d.expect("every step has an outcome")))
        .collect()
}

/// The yardstick every runner of a session of `ctx`'s time steps times inside its
/// batches: compiled into `<outputs>/yardstick/` (the command in `logs/yardstick.log`).
/// `None` (the session runs without host states; the log says why) when it cannot be built.
fn yardstick_gauge(ctx: &Ctx) -> Option<super::session::Gauge> {
    use super::yardstick;
    let log_path = ctx.out.join("logs").join("yardstick.log");
    let mut log = super::exec::open_log(&log_path).ok()?;
    let built = match yardstick::build(&ctx.campaign.system.cc, &ctx.out.join("yardstick")) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(log, "{e}");
            return None;
        }
    };
    let _ = writeln!(log, "$ {}", built.command.join(" "));
    Some(super::session::Gauge {
        object: built.object,
        api_h: built.api_h,
        name: yardstick::NAME.into(),
        object_sha256: built.object_sha256,
    })
}

/// Run the step at `ix` and return its record (status, data, commands, logs).
pub fn run(ctx: &Ctx, ix: NodeIndex) -> StepRecord {
    let mut step = new_step(ctx, ix);
    let node = step.node;
    let done = match (refused(&step), emulation_refuses(ctx, node.kind)) {
        (Some(refusal), _) => refusal,
        (None, Some(why)) => Done::unsupported(why),
        (None, None) => behaviour(node.kind).run(&mut step),
    };
    record_of(step, done)
}

/// Why a step of `kind` cannot run on an emulated target: timing and profiling measure the
/// emulator, not the target; valgrind (`count`, `ct`) runs only on its host's architecture.
fn emulation_refuses(ctx: &Ctx, kind: StepKind) -> Option<String> {
    let system = &ctx.campaign.system;
    match kind {
        StepKind::Time | StepKind::Profile => system.emulated_reason(),
        StepKind::Count | StepKind::Ct => system.emulated_reason().map(|r| {
            format!(
                "{r}; valgrind runs only on this machine's architecture ({})",
                crate::model::host_arch()
            )
        }),
        _ => None,
    }
}

fn record_of(step: Step, done: Done) -> StepRecord {
    let mut rec = base_record(step.ctx, step.ix, done.status, done.reason);
    rec.data = done.data;
    rec.commands = step.commands;
    rec.logs = step.logs;
    rec.artefacts = step.artefacts;
    if step.contained {
        // Timing and profiling jobs were kept on the bench core: what held them there.
        rec.sandbox = Some(match step.node.kind {
            StepKind::Time | StepKind::Profile => step
                .ctx
                .sandbox
                .info_on_core(step.ctx.campaign.system.bench_cpu),
            _ => step.ctx.sandbox.info.clone(),
        });
    }
    rec
}

/// The record of a step that did not run (skipped, unsupported).
pub fn not_run(ctx: &Ctx, ix: NodeIndex, status: Status, reason: String) -> StepRecord {
    let mut rec = base_record(ctx, ix, status, Some(reason));
    let now = super::utc_now();
    rec.started = now.clone();
    rec.finished = now;
    rec
}

fn base_record(ctx: &Ctx, ix: NodeIndex, status: Status, reason: Option<String>) -> StepRecord {
    let node = ctx.node(ix);
    StepRecord {
        schema: RECORD_SCHEMA,
        id: node.id.clone(),
        kind: node.kind,
        submission: if node.kind.scope() == crate::model::StepScope::Campaign {
            String::new()
        } else {
            ctx.submission(node).id.clone()
        },
        instance: ctx.instance(node).map(|i| i.id.clone()),
        op: node.op,
        status,
        reason,
        cache_key: ctx.key(ix),
        inputs: ctx.inputs[ix.index()].clone(),
        commands: Vec::new(),
        started: String::new(),
        finished: String::new(),
        duration_s: 0.0,
        ran_because: None,
        env_fingerprint: ctx.facts.env_fingerprint.clone(),
        logs: Vec::new(),
        artefacts: Vec::new(),
        sandbox: None,
        slurm: None,
        data: None,
    }
}

/// Run one per-operation kem-runner job (`time`, `profile`) on `object`, pinned to the
/// bench core, with `extra` arguments, logging to `logs/<sub>/<instance>/<job>__<op>.log`.
/// The KEM's own failure (exit 1 with `failure` set), a crash, a timeout or a runner error
/// become the step's reason. Returns the record and the runner's wall-clock time.
pub fn runner_job<T: RunnerRecord>(
    step: &mut Step,
    job: &'static str,
    object: &Path,
    build: &BuildData,
    extra: &[String],
) -> Result<(T, std::time::Duration), StepError> {
    let op = step.node.op.expect("runner jobs are per operation");
    let name = format!("{job}__{op}");
    let mut log = step.job_log(&name)?;
    let runner = RunnerJob::new(step, job, object, build)?
        .opt("op", op.name())
        .on_core(step.ctx.campaign.system.bench_cpu)
        .opts(extra);
    let (ctx, id) = (step.ctx, step.node.id.clone());
    let prefix = format!("{} ", kem_native::timing::PROGRESS);
    let show = |line: &str| {
        if let (Some(what), Some(p)) = (line.strip_prefix(&prefix), ctx.progress.get()) {
            p.update(&id, what);
        }
    };
    let started = std::time::Instant::now();
    let out = runner.run(step, &mut log, &show, |_, out, _| Ok(out))?;
    let elapsed = started.elapsed();
    Ok((runner_job::record(step, &out, op, None)?, elapsed))
}
