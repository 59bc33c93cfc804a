//! Progress output: an indicatif multi-progress on a terminal (overall bar with ETA, one
//! line per busy step), plain one-line-per-step logging elsewhere. `-q` keeps only
//! failures, `-v` adds up-to-date steps.

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::record::Status;

/// How chatty the run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

/// Progress reporting for a run.
pub struct Progress {
    verbosity: Verbosity,
    color: bool,
    bars: Option<Bars>,
    /// Steps of instances this CPU cannot run, said once per instance
    /// ([`planned_away`](Self::planned_away)): their own `unsupported` lines are not shown.
    planned_away: Mutex<HashSet<String>>,
}

struct Bars {
    multi: MultiProgress,
    overall: ProgressBar,
    busy: Mutex<HashMap<String, ProgressBar>>,
}

impl Progress {
    /// `total` steps will be reported as finished, one way or another.
    pub fn new(total: u64, verbosity: Verbosity) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let color = tty && std::env::var_os("NO_COLOR").is_none();
        let bars = (tty && verbosity != Verbosity::Quiet).then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let overall = multi.add(ProgressBar::new(total));
            overall.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} steps  {elapsed} (eta {eta}) {msg}",
                )
                .expect("static template"),
            );
            overall.enable_steady_tick(Duration::from_millis(200));
            Bars {
                multi,
                overall,
                busy: Mutex::new(HashMap::new()),
            }
        });
        Progress {
            verbosity,
            color,
            bars,
            planned_away: Mutex::new(HashSet::new()),
        }
    }

    fn println(&self, line: String) {
        match &self.bars {
            Some(b) => b.multi.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    fn paint(&self, status: Status, text: &str) -> String {
        if !self.color {
            return text.to_string();
        }
        let code = match status {
            Status::Ok => "32",
            Status::Failed | Status::TimedOut => "31",
            Status::Skipped | Status::Unsupported => "33",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }

    /// The instance `instance` (`<submission>/<instance>`) cannot run here (`why`): one
    /// line now, and none for its steps `ids` when they end unsupported (`-v` shows them).
    pub fn planned_away(&self, instance: &str, why: &str, ids: Vec<String>) {
        if self.verbosity == Verbosity::Quiet {
            return;
        }
        let n = ids.len();
        self.println(format!(
            "{:<11} {}: {}; its {n} step{} planned away",
            self.paint(Status::Unsupported, Status::Unsupported.name()),
            crate::text::clean_line(instance),
            crate::text::clean_line(why),
            if n == 1 { "" } else { "s" }
        ));
        if self.verbosity < Verbosity::Verbose {
            self.planned_away.lock().expect("progress lock").extend(ids);
        }
    }

    /// A step started running.
    pub fn started(&self, id: &str, exclusive: bool) {
        match &self.bars {
            Some(b) => {
                let bar = b
                    .multi
                    .insert_before(&b.overall, ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template("  {spinner} {msg} {elapsed}")
                        .expect("static template"),
                );
                let lane = if exclusive { " [bench lane]" } else { "" };
                bar.set_message(format!("{id}{lane}"));
                bar.enable_steady_tick(Duration::from_millis(120));
                b.busy
                    .lock()
                    .expect("progress lock")
                    .insert(id.to_string(), bar);
            }
            None if self.verbosity >= Verbosity::Verbose => self.println(format!("start  {id}")),
            None => {}
        }
    }

    /// A running step says how far it is ("trial 3/5").
    pub fn update(&self, id: &str, what: &str) {
        if let Some(b) = &self.bars {
            if let Some(bar) = b.busy.lock().expect("progress lock").get(id) {
                bar.set_message(format!(
                    "{id} [bench lane] {}",
                    crate::text::excerpt(what, 120)
                ));
            }
        }
    }

    /// A step finished (`ran` false: it was up to date).
    pub fn finished(&self, id: &str, status: Status, ran: bool, reason: Option<&str>, secs: f64) {
        if let Some(b) = &self.bars {
            if let Some(bar) = b.busy.lock().expect("progress lock").remove(id) {
                bar.finish_and_clear();
                b.multi.remove(&bar);
            }
            b.overall.inc(1);
        }
        let said = status == Status::Unsupported
            && self
                .planned_away
                .lock()
                .expect("progress lock")
                .contains(id);
        let show = !said
            && match self.verbosity {
                Verbosity::Quiet => status.is_failure(),
                Verbosity::Normal => ran || status != Status::Ok,
                Verbosity::Verbose => true,
            };
        if !show {
            return;
        }
        let word = if ran || status != Status::Ok {
            status.name()
        } else {
            "up-to-date"
        };
        let mut line = format!("{:<11} {id}", self.paint(status, word));
        if ran {
            line.push_str(&format!(" ({secs:.1}s)"));
        }
        if let Some(r) = reason {
            line.push_str(": ");
            line.push_str(&crate::text::clean_line(r.lines().next().unwrap_or("")));
        }
        self.println(line);
    }

    /// A line about the run itself (not a step), shown at every verbosity: e.g. that the
    /// bench CPU is held by another campaign.
    pub fn note(&self, line: &str) {
        self.println(crate::text::clean(line));
    }

    /// Clear the bars before the summary is printed.
    pub fn finish(&self) {
        if let Some(b) = &self.bars {
            b.overall.finish_and_clear();
        }
    }
}
