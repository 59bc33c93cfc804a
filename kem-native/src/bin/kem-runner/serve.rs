//! The `serve` job: load, prepare, warm up and calibrate once, then time one batch per
//! `batch` line until `finish` (the protocol is in `kem_native::serve`). Each phase is a
//! function over one [`Server`]: [`Server::start`], [`Server::batch`], [`Server::finish`].

use std::fs::File;
use std::io::{BufRead, Write as _};
use std::path::Path;

use kem_native::checked::{self, CheckedCall, Reference, Seen};
use kem_native::drbg::OsRng;
use kem_native::error::{RunnerError, SysError, UsageError};
use kem_native::kem::{run_on_big_stack, Buffers, Kem};
use kem_native::memory::status_kib;
use kem_native::output::{Calibration, CoreCycles, TimeOutput, Trial};
use kem_native::serve::{self, BatchReply, Gauge, Ready, SchedSnapshot};
use kem_native::timer::PerfCycles;
use kem_native::timing::{check_rc, measure_overhead, Batch, Op, OpCall};

use super::args::Args;
use super::{finish_memory, time_start, to_json, Outcome};

/// Write one protocol line on the record channel (the original stdout, see the module doc
/// of `main.rs`) as one buffer.
fn say(channel: &mut File, word: &str, json: &str) -> Result<(), SysError> {
    channel
        .write_all(format!("{word} {json}\n").as_bytes())
        .map_err(SysError::WriteChannel)
}

/// `serve`: the protocol lines go to `channel`, the record channel; whatever the KEM writes
/// to file descriptor 1 lands on stderr. With `--layout` objects, every batch times all of
/// them; with `--gauge`, the yardstick runs between the batch's blocks (see
/// `kem_native::serve`).
pub(crate) fn job_serve(args: &Args, channel: &File) -> Result<Outcome, RunnerError> {
    let settings = Settings::of(args)?;
    let channel = channel.try_clone().map_err(SysError::ShareChannel)?;
    let kem = args.load()?;
    let gauge = match (args.values.get("gauge"), args.values.get("gauge-api")) {
        (Some(object), Some(api)) => {
            let text = std::fs::read_to_string(api).map_err(|source| {
                kem_native::error::LoadError::ReadApi {
                    path: api.clone(),
                    source,
                }
            })?;
            Some(Gauge::load(Path::new(object), &text)?)
        }
        (None, None) => None,
        _ => {
            return Err(UsageError::Missing {
                job: "serve",
                key: "gauge-api",
            }
            .into())
        }
    };
    let names: Vec<String> = if settings.layouts.is_empty() {
        Vec::new()
    } else {
        std::iter::once(args.get("lib")?.to_string())
            .chain(settings.layouts.iter().cloned())
            .collect()
    };
    let mut settings = settings;
    let out = run_on_big_stack(move || -> Result<TimeOutput, RunnerError> {
        let rng = settings.rng.take().expect("the rng is taken once");
        let calibration = Calibration::unmeasured(settings.batch_ns, settings.min_iters);
        let (mut record, mut bufs) = time_start(settings.op, &kem, settings.cpu, rng, calibration)?;
        record.layouts = names;
        let perf = PerfCycles::open();
        record.core_cycles = match &perf {
            Ok(_) => CoreCycles::Available,
            Err(reason) => CoreCycles::Unavailable {
                reason: reason.to_string(),
            },
        };
        if let Err(e) = checked::setup(settings.op, &kem, &mut bufs, settings.setup.as_ref()) {
            record.failure = Some(e.to_string());
            return Ok(record);
        }
        let mut others = Vec::new();
        let mut server = Server {
            s: &settings,
            calls: Vec::new(),
            checked: Vec::new(),
            per: 0,
            seen: Seen::default(),
            gauge,
            perf: perf.ok(),
            channel,
        };
        if let Err(why) = server.start(&kem, &mut bufs, &mut others, &mut record) {
            record.failure = Some(why);
            return Ok(record);
        }
        server.serve(&kem, &mut bufs, &mut record)?;
        if record.failure.is_none() {
            server.finish(&bufs, &mut record);
        }
        Ok(record)
    })??;
    Outcome::of(&format!("{} ", serve::DONE), &out, &out.failure)
}

/// The job's options.
struct Settings {
    op: Op,
    cpu: Option<usize>,
    batch_ns: u64,
    min_iters: u64,
    samples: u32,
    /// Taken by the operation's thread when it starts.
    rng: Option<(kem_native::drbg::Rng, &'static str)>,
    layouts: Vec<String>,
    ns: String,
    /// Where the key pair enc and dec use comes from (`--setup-seed`).
    setup: Option<[u8; 48]>,
    /// Whether `finish` measures the stack of one call (`--stack measure`, the default) or
    /// leaves it to another process of the same member (`--stack skip`): painting the
    /// 64 MiB stack twice takes about 0.1 s of the bench core.
    stack: bool,
    /// Calls per batch given (`--batch-iters`: the member's first process calibrated them,
    /// and its processes share each dec batch's ciphertexts): warm-up only, no calibration.
    batch_iters: Option<u64>,
}

impl Settings {
    fn of(args: &Args) -> Result<Settings, RunnerError> {
        Ok(Settings {
            op: args.op()?,
            cpu: args.opt_num("cpu")?,
            batch_ns: args.num("batch-ns", 20_000_000)?,
            min_iters: args.num("min-iters", 1)?,
            samples: args.num("samples", 101)?,
            rng: Some(args.timing_rng()?),
            layouts: args.layouts.clone(),
            ns: args.get("ns")?.to_string(),
            setup: match args.values.get("setup-seed") {
                None => None,
                Some(hex) => {
                    Some(checked::seed_of(hex).ok_or_else(|| UsageError::SetupSeed(hex.clone()))?)
                }
            },
            stack: match args.values.get("stack").map(String::as_str) {
                None | Some("measure") => true,
                Some("skip") => false,
                Some(other) => return Err(UsageError::Stack(other.to_string()).into()),
            },
            batch_iters: args.opt_num("batch-iters")?,
        })
    }
}

/// A calibrated runner: the operation bound to each layout (plain and with its outputs
/// folded), the calls each makes per batch, the yardstick, the perf counter, the record
/// channel, and as a reference the ciphertexts it fed so far.
struct Server<'a> {
    s: &'a Settings,
    calls: Vec<OpCall>,
    checked: Vec<CheckedCall>,
    per: u64,
    seen: Seen,
    gauge: Option<Gauge>,
    perf: Option<PerfCycles>,
    channel: File,
}

impl Server<'_> {
    /// Warm up and calibrate the listed object, load and warm up the other layouts (once
    /// the listed object has run, so that the peak RSS is that of one object), calibrate
    /// the yardstick, and say `ready`. `Err` is the failure for the record.
    fn start(
        &mut self,
        kem: &Kem,
        bufs: &mut Buffers,
        others: &mut Vec<Kem>,
        record: &mut TimeOutput,
    ) -> Result<(), String> {
        let op = self.s.op;
        let first = OpCall::new(op, kem, bufs);
        let (mut warm, mut cal) = match self.s.batch_iters {
            Some(iters) => serve::warm_up(op, &first, self.s.batch_ns).map(|w| {
                let given = Calibration::unmeasured(self.s.batch_ns, self.s.min_iters);
                let iters = iters.max(1);
                (w, Calibration { iters, ..given })
            }),
            None => serve::warm_and_calibrate(op, &first, self.s.batch_ns, self.s.min_iters),
        }
        .and_then(|c| bufs.check_all(op.c_name()).map(|_| c))
        .map_err(|e| e.to_string())?;
        // Calibrated on repeated inputs: a KEM that caches or idles then calibrates to huge
        // batches, each of which its reference would have to replay or feed.
        cal.iters = cal.iters.min(checked::batch_cap(op, bufs.ct.len()));
        let single_peak = (!self.s.layouts.is_empty()).then(|| status_kib("VmHWM"));
        for l in &self.s.layouts {
            let k = Kem::load(Path::new(l), &self.s.ns, kem.sizes.clone())
                .map_err(|e| format!("layout {l}: {e}"))?;
            others.push(k);
        }
        self.calls = std::iter::once(first)
            .chain(others.iter().map(|k| OpCall::new(op, k, bufs)))
            .collect();
        self.checked = std::iter::once(kem)
            .chain(others.iter())
            .map(|k| CheckedCall::new(op, k, bufs))
            .collect();
        let k = self.calls.len();
        self.per = serve::per_layout(cal.iters, k);
        for (j, c) in self.calls.iter().enumerate().skip(1) {
            warm += serve::warm_up(op, c, self.s.batch_ns / k as u64)
                .and_then(|w| bufs.check_all(op.c_name()).map(|_| w))
                .map_err(|e| format!("layout {}: {e}", record.layouts[j]))?;
        }
        if let Some(g) = self.gauge.as_mut() {
            g.calibrate(self.s.batch_ns)
                .and_then(|()| g.check())
                .map_err(|e| format!("the yardstick: {e}"))?;
        }
        record.warmup_iters = warm;
        record.calibration = cal.clone();
        if let Some(p) = single_peak {
            record.memory.peak_rss_kib = p;
        }
        let ready = Ready {
            calibration: cal,
            warmup_iters: warm,
            pinned_cpu: record.pinned_cpu,
            gauge_calls: self.gauge.as_ref().map(|g| g.calls),
            batch_calls: self.per * k as u64,
        };
        let json = to_json(&ready).map_err(|e| e.to_string())?;
        say(&mut self.channel, serve::READY, &json).map_err(|e| e.to_string())
    }

    /// Answer `batch`, `replay` and `feed` lines until `finish` (or a failure, kept in the
    /// record).
    fn serve(
        &mut self,
        kem: &Kem,
        bufs: &mut Buffers,
        record: &mut TimeOutput,
    ) -> Result<(), RunnerError> {
        let mut line = String::new();
        let stdin = std::io::stdin();
        loop {
            line.clear();
            if stdin
                .lock()
                .read_line(&mut line)
                .map_err(SysError::ReadStdin)?
                == 0
            {
                return Err(UsageError::StdinClosed.into());
            }
            let bad = || UsageError::Command(line.trim().to_string());
            let seed = |hex: &str| checked::seed_of(hex).ok_or_else(bad);
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["batch", rest @ ..] if rest.len() <= 2 => {
                    if let Some(s) = rest.first().map(|h| seed(h)).transpose()? {
                        checked::reseed(&s);
                    }
                    match self.batch(bufs, rest.get(1).copied(), record) {
                        Ok(r) => say(&mut self.channel, serve::BATCH, &to_json(&r)?)?,
                        Err(why) => {
                            record.failure = Some(why);
                            return Ok(());
                        }
                    }
                }
                ["key", s] => {
                    let s = seed(s)?;
                    let r = checked::rekey(self.s.op, kem, bufs, &s).map_err(|e| e.to_string());
                    self.answer(serve::KEYED, r)?;
                }
                ["replay", s, n] => {
                    let (s, n) = (seed(s)?, n.parse::<u64>().map_err(|_| bad())?);
                    let mut side = [0u8; 48];
                    OsRng.try_fill(&mut side)?;
                    let op = self.s.op;
                    let r = Reference { op, kem, bufs }.replay(&s, n, &side);
                    self.answer(serve::REPLAYED, r)?;
                }
                ["feed", s, n, file] => {
                    let (s, n) = (seed(s)?, n.parse::<u64>().map_err(|_| bad())?);
                    let mut cts = Vec::new();
                    let op = self.s.op;
                    let r = Reference { op, kem, bufs }
                        .feed(&s, n, &mut cts, &mut self.seen)
                        .and_then(|f| {
                            std::fs::write(file, &cts)
                                .map(|()| f)
                                .map_err(|e| format!("cannot write {file}: {e}"))
                        });
                    self.answer(serve::FED, r)?;
                }
                ["finish"] => return Ok(()),
                _ => return Err(bad().into()),
            }
        }
    }

    /// Say a reference's answer: the fold, or why there is none.
    fn answer(&mut self, word: &str, r: Result<u64, String>) -> Result<(), RunnerError> {
        let (fold, failure) = match r {
            Ok(f) => (Some(checked::fold_hex(f)), None),
            Err(why) => (None, Some(why)),
        };
        let json = to_json(&serve::Checked { fold, failure })?;
        Ok(say(&mut self.channel, word, &json)?)
    }

    /// The ciphertexts of a dec batch from `file`: one per call of the batch, no more, no
    /// fewer.
    fn read_fed(&self, file: &str, ct_len: usize) -> Result<Vec<u8>, String> {
        let calls = self.per as usize * self.calls.len();
        let want = calls * ct_len;
        let cts = std::fs::read(file).map_err(|e| format!("cannot read {file}: {e}"))?;
        if cts.len() != want {
            return Err(format!(
                "{file} holds {} bytes, not the {want} of {calls} ciphertexts",
                cts.len()
            ));
        }
        Ok(cts)
    }

    /// One timed batch: the KEM's blocks ([`serve::blocks`]), each layout in turn from a
    /// different one each batch, with a yardstick block before each and after the last;
    /// for a checked batch the caller reseeded the DRBG first, dec's ciphertexts from `fed`
    /// (a file), the outputs folded in the order they were made.
    fn batch(
        &mut self,
        bufs: &Buffers,
        fed: Option<&str>,
        record: &mut TimeOutput,
    ) -> Result<BatchReply, String> {
        let op = self.s.op;
        let k = self.calls.len();
        let ct_len = bufs.ct.len();
        let fed = fed.map(|f| self.read_fed(f, ct_len)).transpose()?;
        let (mut acc, mut done) = (0u64, 0usize);
        let before = SchedSnapshot::read();
        let plan = serve::blocks(self.per, k, record.trials.len() % k);
        let mut each = vec![Batch::default(); k];
        let mut gauge_cycles = Vec::with_capacity(plan.len() + 1);
        let mut core: Option<u64> = self.perf.as_ref().map(|_| 0);
        let mut gauge_failure = None;
        for &(j, n) in &plan {
            if let Some(g) = &self.gauge {
                match g.block() {
                    Ok(t) => gauge_cycles.push(t),
                    Err(e) => gauge_failure = Some(e),
                }
            }
            if let Some(p) = self.perf.as_mut() {
                p.reset_enable();
            }
            let part = fed.as_deref().map(|f| &f[done * ct_len..]);
            let (b, folded) = self.checked[j].batch(n, part, acc);
            (acc, done) = (folded, done + n as usize);
            if let Some(p) = self.perf.as_mut() {
                core = core.zip(p.disable_read()).map(|(a, c)| a + c);
            }
            each[j].ticks += b.ticks;
            each[j].ns += b.ns;
            each[j].rc_or |= b.rc_or;
        }
        if let Some(g) = &self.gauge {
            match g.block() {
                Ok(t) => gauge_cycles.push(t),
                Err(e) => gauge_failure = Some(e),
            }
        }
        let own = SchedSnapshot::read().since(&before);
        let iters = self.per * k as u64;
        let cycles: u64 = each.iter().map(|b| b.ticks).sum();
        let ns: u64 = each.iter().map(|b| b.ns).sum();
        let rc_or = each.iter().fold(0, |a, b| a | b.rc_or);
        let layout_cycles: Vec<u64> = if k > 1 {
            each.iter().map(|b| b.ticks).collect()
        } else {
            Vec::new()
        };
        record.trials.push(Trial {
            iters,
            cycles,
            ns,
            core_cycles: core,
            layout_cycles: layout_cycles.clone(),
            gauge_cycles: gauge_cycles.clone(),
        });
        let n = record.trials.len();
        check_rc(op, rc_or, &format!("batch {n}"))
            .and_then(|_| {
                bufs.check_all(op.c_name())
                    .map_err(|e| e.during("during the batches"))
            })
            .map_err(|e| e.to_string())?;
        if let Some(e) = gauge_failure {
            return Err(format!("the yardstick in batch {n}: {e}"));
        }
        if let Some(g) = &self.gauge {
            g.check()
                .map_err(|e| format!("the yardstick in batch {n}: {e}"))?;
        }
        Ok(BatchReply {
            iters,
            cycles,
            ns,
            core_cycles: core,
            own,
            layout_cycles,
            gauge_cycles,
            fold: Some(checked::fold_hex(acc)),
        })
    }

    /// The single-call samples, layout by layout, the same number each (to within one),
    /// each layout's led by one call that is timed like them and dropped: a member's
    /// process takes few samples per layout (a session splits them among several
    /// processes), after other processes and the yardstick have run on the core, and a
    /// first call into cold code and data took 3-4x a warm one (the 1.1 k-cycle `good`
    /// fixture: 3.7-13 k), which is not what the batch figure is held against. Then the
    /// loop overhead; stack and peak RSS.
    fn finish(&self, bufs: &Buffers, record: &mut TimeOutput) {
        let op = self.s.op;
        let k = self.calls.len();
        let samples = self.s.samples as usize;
        let mut single = Vec::with_capacity(samples);
        let mut rc = 0;
        for (j, c) in self.calls.iter().enumerate() {
            let n = serve::share(samples, k, j);
            if n == 0 {
                continue;
            }
            let mut part = vec![0u64; n + 1];
            rc |= c.samples(false, &mut part);
            single.extend_from_slice(&part[1..]);
        }
        record.samples = single;
        if let Err(e) = check_rc(op, rc, "the single-call samples") {
            record.failure = Some(e.to_string());
            return;
        }
        record.overhead = measure_overhead(&self.calls[0]);
        let single_peak = record.memory.peak_rss_kib;
        let stack = self.s.stack.then(|| &self.calls[0]);
        finish_memory(op, stack, bufs, record);
        if !self.s.layouts.is_empty() {
            record.memory.peak_rss_kib = single_peak;
        }
    }
}
