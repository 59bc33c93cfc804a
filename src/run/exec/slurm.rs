//! The Slurm executor: the engine stays the scheduler (as Snakemake's Slurm executor does)
//! and each step that runs submission code becomes one Slurm job.
//!
//! A step's job is an allocation submitted with `sbatch` (one task, one CPU; `--exclusive`
//! for exclusive steps, so timing has its node to itself and pins itself to the bench core
//! there) whose batch script only sleeps; every contained command of the step then runs
//! inside it as a job step, `srun --jobid=N --overlap <the contained command>`, with the
//! same sandbox, limits and output capture as locally ([`super::super::sandbox`] puts the
//! launcher in front). `srun` forwards stdin and stdout, so the timing session's served
//! runners work through it unchanged. The job is released (`scancel`) when the step ends;
//! Ctrl-C cancels every job the engine started, queued ones included. A job that ended
//! before the engine released it was cancelled or timed out from outside, and the step
//! says so.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use super::cancelled;
use crate::measure::env;
use crate::model::{SlurmOptions, System};
use crate::record::{EnvWarning, Environment, SlurmJob};

/// How often a queued job's state is polled.
const POLL: Duration = Duration::from_millis(200);
/// How long a job that ended from outside may stay COMPLETING before its state is read.
const SETTLE: Duration = Duration::from_secs(20);

/// A running job that steps run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub id: u64,
    pub node: String,
    pub exclusive: bool,
}

/// How a job ended when its step was done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Still running: the engine cancelled it.
    Released,
    /// It ended before the engine was done with it: `timed_out` when it reached its
    /// `--time`, else cancelled or failed from outside; `why` says which.
    Outside { timed_out: bool, why: String },
}

/// The Slurm executor of one run: the options every job is submitted with, the jobs of
/// running steps (by graph node), and every job submitted and not yet released.
pub struct Slurm {
    opts: SlurmOptions,
    jobs: Mutex<BTreeMap<usize, Job>>,
    live: Mutex<BTreeSet<u64>>,
    /// Environments of the nodes timing ran on, captured there once per run.
    envs: Mutex<BTreeMap<String, Environment>>,
}

/// This machine's environment for bench core `bench_cpu` and compiler `cc` (what
/// `ngcc-pipe env` prints on a node).
pub fn local_env(bench_cpu: usize, cc: &str) -> Environment {
    env::capture(&System {
        name: String::new(),
        arch: String::new(),
        bench_cpu,
        cc: cc.to_string(),
        compilers: vec![],
        isolation: crate::model::Isolation::Core,
        sandbox: crate::model::SandboxPolicy::Preferred,
        role: Default::default(),
        target: Default::default(),
        executor: Default::default(),
    })
}

/// Run a Slurm client command and return its stdout; its stderr's first line on failure.
fn client(program: &str, args: &[String]) -> io::Result<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run `{program}`: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(io::Error::other(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            err.lines().next().unwrap_or("no message")
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `--time` for a step with timeout `t`: whole minutes, one more than the timeout, so the
/// engine's own deadline (to the second) normally ends the step first.
pub fn time_limit(t: Duration) -> String {
    (t.as_secs().div_ceil(60) + 1).to_string()
}

/// State, node list and reason of a job (`squeue -t all`; `None` once Slurm forgot it).
fn state(id: u64) -> io::Result<Option<(String, String, String)>> {
    let out = client(
        "squeue",
        &[
            "-h".into(),
            "-t".into(),
            "all".into(),
            "-j".into(),
            id.to_string(),
            "-o".into(),
            "%T|%N|%r".into(),
        ],
    );
    let out = match out {
        Ok(o) => o,
        // squeue fails on an id it no longer knows.
        Err(e) if e.to_string().contains("Invalid job id") => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(out.lines().next().and_then(|l| {
        let mut f = l.trim().splitn(3, '|');
        Some((
            f.next()?.to_string(),
            f.next()?.to_string(),
            f.next().unwrap_or("").to_string(),
        ))
    }))
}

fn scancel(id: u64) {
    let _ = client("scancel", &[id.to_string()]);
}

impl Slurm {
    /// The executor for `opts`, once `sbatch` answers.
    pub fn new(opts: &SlurmOptions) -> Result<Slurm, String> {
        client("sbatch", &["--version".into()]).map_err(|e| {
            format!("{e}; the Slurm executor needs Slurm's commands (sbatch, srun, squeue, scancel) on PATH")
        })?;
        Ok(Slurm {
            opts: opts.clone(),
            jobs: Mutex::new(BTreeMap::new()),
            live: Mutex::new(BTreeSet::new()),
            envs: Mutex::new(BTreeMap::new()),
        })
    }

    /// The environment of `job`'s node, captured there (`ngcc-pipe env` as a job step) the
    /// first time; `engine`'s sandbox entry is kept. A node whose capture fails gets an
    /// empty environment with a warning saying why.
    pub fn node_env(&self, job: &Job, system: &System, engine: &Environment) -> Environment {
        if let Some(e) = self.envs.lock().expect("envs lock").get(&job.node) {
            return e.clone();
        }
        let captured = std::env::current_exe().and_then(|exe| {
            let mut args = self.launcher(job);
            let program = args.remove(0);
            args.extend([
                exe.display().to_string(),
                "env".into(),
                "--bench-cpu".into(),
                system.bench_cpu.to_string(),
                "--cc".into(),
                system.cc.clone(),
            ]);
            let text = client(&program, &args)?;
            serde_json::from_str::<Environment>(text.trim()).map_err(io::Error::other)
        });
        let mut e = captured.unwrap_or_else(|err| Environment {
            bench_cpu: system.bench_cpu,
            warnings: vec![EnvWarning {
                what: format!(
                    "the environment of node {} could not be captured: {err}",
                    job.node
                ),
                fix: "make ngcc-pipe's executable reachable at the same path on every node".into(),
            }],
            ..Environment::default()
        });
        e.sandbox.clone_from(&engine.sandbox);
        self.envs
            .lock()
            .expect("envs lock")
            .insert(job.node.clone(), e.clone());
        e
    }

    pub fn partition(&self) -> Option<&str> {
        self.opts.partition.as_deref()
    }

    /// The job of node `key`, submitted (and waited for until it runs) when it has none;
    /// `true` when it was submitted now.
    pub fn job_for(
        &self,
        key: usize,
        name: &str,
        exclusive: bool,
        time: Duration,
    ) -> io::Result<(Job, bool)> {
        if let Some(j) = self.jobs.lock().expect("jobs lock").get(&key) {
            return Ok((j.clone(), false));
        }
        let job = self.submit(name, exclusive, time)?;
        self.jobs
            .lock()
            .expect("jobs lock")
            .insert(key, job.clone());
        Ok((job, true))
    }

    /// One job shared by the nodes `keys` (the timing session's steps).
    pub fn job_for_all(
        &self,
        keys: &[usize],
        name: &str,
        exclusive: bool,
        time: Duration,
    ) -> io::Result<Job> {
        let job = self.submit(name, exclusive, time)?;
        let mut jobs = self.jobs.lock().expect("jobs lock");
        for &k in keys {
            jobs.insert(k, job.clone());
        }
        Ok(job)
    }

    /// The job of node `key`, if it has one.
    pub fn job_of(&self, key: usize) -> Option<Job> {
        self.jobs.lock().expect("jobs lock").get(&key).cloned()
    }

    /// Forget node `key`'s job and return it.
    pub fn take(&self, key: usize) -> Option<Job> {
        self.jobs.lock().expect("jobs lock").remove(&key)
    }

    /// The `sbatch` arguments of a job named `name`.
    pub fn sbatch_args(&self, name: &str, exclusive: bool, time: Duration) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--parsable".into(),
            format!("--job-name=ngcc:{name}"),
            format!("--time={}", time_limit(time)),
            "--nodes=1".into(),
            "--ntasks=1".into(),
            "--cpus-per-task=1".into(),
            "--output=/dev/null".into(),
            "--error=/dev/null".into(),
        ];
        if exclusive {
            a.push("--exclusive".into());
        }
        for (flag, v) in [
            ("partition", &self.opts.partition),
            ("account", &self.opts.account),
            ("qos", &self.opts.qos),
            ("constraint", &self.opts.constraint),
        ] {
            if let Some(v) = v {
                a.push(format!("--{flag}={v}"));
            }
        }
        a.extend(["--wrap".into(), "exec sleep infinity".into()]);
        a
    }

    /// Submit a job and wait until it runs (Ctrl-C cancels it while it waits).
    fn submit(&self, name: &str, exclusive: bool, time: Duration) -> io::Result<Job> {
        if cancelled() {
            return Err(io::Error::other("interrupted"));
        }
        let out = client("sbatch", &self.sbatch_args(name, exclusive, time))?;
        let id: u64 = out
            .trim()
            .split(';')
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other(format!("sbatch printed no job id: {out:?}")))?;
        self.live.lock().expect("live lock").insert(id);
        loop {
            if cancelled() {
                self.cancel(id);
                return Err(io::Error::other("interrupted"));
            }
            match state(id)? {
                Some((s, node, _)) if s == "RUNNING" => {
                    return Ok(Job {
                        id,
                        node,
                        exclusive,
                    })
                }
                Some((s, _, _)) if matches!(s.as_str(), "PENDING" | "CONFIGURING") => {}
                other => {
                    self.cancel(id);
                    let (s, r) =
                        other.map_or(("unknown".into(), String::new()), |(s, _, r)| (s, r));
                    return Err(io::Error::other(format!(
                        "Slurm job {id} ended before it ran: {s} ({r})"
                    )));
                }
            }
            thread::sleep(POLL);
        }
    }

    /// The launcher of a job step in `job`.
    pub fn launcher(&self, job: &Job) -> Vec<String> {
        vec![
            "srun".into(),
            format!("--jobid={}", job.id),
            "--overlap".into(),
            "--nodes=1".into(),
            "--ntasks=1".into(),
            "--quiet".into(),
        ]
    }

    /// The step is done with `job`: release it, or say how it ended without us.
    pub fn release(&self, job: &Job) -> Ended {
        if !self.live.lock().expect("live lock").contains(&job.id) {
            // Already released (a job shared by several steps) or cancelled by Ctrl-C.
            return Ended::Released;
        }
        let until = Instant::now() + SETTLE;
        let mut last = state(job.id).ok().flatten();
        let running = |s: &Option<(String, String, String)>| matches!(s, Some((st, _, _)) if st == "RUNNING" || st == "CONFIGURING");
        if running(&last) {
            self.cancel(job.id);
            return Ended::Released;
        }
        while matches!(&last, Some((st, _, _)) if st == "COMPLETING") && Instant::now() < until {
            thread::sleep(POLL);
            last = state(job.id).ok().flatten();
        }
        self.cancel(job.id);
        let (st, reason) = last.map_or(("gone".to_string(), String::new()), |(s, _, r)| (s, r));
        let why = match st.as_str() {
            "CANCELLED" => format!(
                "Slurm job {} on {} was cancelled from outside the engine (scancel)",
                job.id, job.node
            ),
            "TIMEOUT" => format!("Slurm job {} reached its time limit (--time)", job.id),
            other => {
                let reason = if reason.is_empty() || reason == "None" {
                    String::new()
                } else {
                    format!(" ({reason})")
                };
                format!(
                    "Slurm job {} on {} ended: {other}{reason}",
                    job.id, job.node
                )
            }
        };
        Ended::Outside {
            timed_out: st == "TIMEOUT",
            why,
        }
    }

    /// What a step record keeps of its job.
    pub fn record(&self, job: &Job) -> SlurmJob {
        SlurmJob {
            job_id: job.id,
            node: job.node.clone(),
            partition: self.opts.partition.clone(),
            exclusive: job.exclusive,
        }
    }

    fn cancel(&self, id: u64) {
        scancel(id);
        self.live.lock().expect("live lock").remove(&id);
    }

    /// Cancel every job submitted and not yet released (end of run, Ctrl-C).
    pub fn cancel_all(&self) {
        let ids: Vec<u64> = std::mem::take(&mut *self.live.lock().expect("live lock"))
            .into_iter()
            .collect();
        if !ids.is_empty() {
            let _ = client(
                "scancel",
                &ids.iter().map(u64::to_string).collect::<Vec<_>>(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_leave_the_engine_deadline_first() {
        assert_eq!(time_limit(Duration::from_secs(30)), "2");
        assert_eq!(time_limit(Duration::from_secs(600)), "11");
        assert_eq!(time_limit(Duration::from_secs(601)), "12");
    }

    #[test]
    fn jobs_carry_the_options_and_exclusive_steps_their_node() {
        let s = Slurm {
            opts: SlurmOptions {
                partition: Some("ngcc".into()),
                account: None,
                qos: Some("short".into()),
                constraint: None,
            },
            jobs: Mutex::new(BTreeMap::new()),
            live: Mutex::new(BTreeSet::new()),
            envs: Mutex::new(BTreeMap::new()),
        };
        let a = s.sbatch_args("ml-kem/x/time:keygen", true, Duration::from_secs(60));
        for want in [
            "--parsable",
            "--job-name=ngcc:ml-kem/x/time:keygen",
            "--time=2",
            "--exclusive",
            "--partition=ngcc",
            "--qos=short",
        ] {
            assert!(a.contains(&want.to_string()), "{want} in {a:?}");
        }
        assert!(!a.iter().any(|x| x.starts_with("--account")));
        assert!(!s
            .sbatch_args("b", false, Duration::from_secs(1))
            .contains(&"--exclusive".to_string()));
        let job = Job {
            id: 42,
            node: "n1".into(),
            exclusive: false,
        };
        assert_eq!(s.launcher(&job)[..3], ["srun", "--jobid=42", "--overlap"]);
    }
}
