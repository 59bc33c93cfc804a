//! The bench core under contention (issue 35, item 6): a real run while a busy loop is pinned
//! to the bench core gives flagged time records and an index that claims no precision for
//! them; two real runs started together never time on the bench core at the same time, and
//! the one that waits says which process and outputs folder hold the core.
//!
//! Each test uses a lock folder of its own (`NGCC_LOCK_DIR`), so that other tests of this
//! binary never make its runs wait, and the two tests run one after the other (the busy loop
//! would disturb the other's sessions).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{StepData, StepRecord};

mod common;
use common::*;

const OPS: [Op; 3] = [Op::Keygen, Op::Enc, Op::Dec];

/// One test at a time.
static ONE: Mutex<()> = Mutex::new(());

/// The fixture campaign of the `good` KEM with a timing session of 10 batches of `trial`
/// per operation, written into `dir`.
fn pipeline(dir: &Path, name: &str, trial: &str) -> PathBuf {
    let kems = repo().join("tests/fixtures/kems");
    let text =
        fixture_pipeline(name, &kems, &["good"], "single", trial).replace("trials=2", "trials=10");
    assert!(text.contains("trials=10"), "{text}");
    let p = dir.join(format!("{name}.kdl"));
    std::fs::write(&p, text).unwrap();
    p
}

/// `ngcc-pipe run` of `pipeline` into `out` with the lock folder `locks`, started now.
fn start(pipeline: &Path, out: &Path, locks: &Path) -> std::process::Child {
    ngcc()
        .args(["run", &s(pipeline), "--outputs", &s(out)])
        .env("NGCC_LOCK_DIR", locks)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ngcc-pipe starts")
}

fn finish(child: std::process::Child, what: &str) -> String {
    let out = child.wait_with_output().expect("ngcc-pipe ends");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

fn time_records(out: &Path) -> Vec<StepRecord> {
    OPS.iter()
        .map(|&op| rec(out, StepKind::Time, "good", Some("good"), Some(op)))
        .collect()
}

/// A thread that keeps `cpu` busy until dropped.
struct BusyLoop {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BusyLoop {
    fn on(cpu: usize) -> BusyLoop {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            kem_native::sys::set_thread_affinity(&[cpu]).expect("pin the busy loop");
            let mut x = 0u64;
            while !flag.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
        BusyLoop {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_busy_bench_core_gives_flagged_figures_and_no_claimed_precision() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempdir();
    let locks = tmp.path().join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let p = pipeline(tmp.path(), "busy", "100ms");
    let out = tmp.path().join("out");
    let stderr = {
        let _busy = BusyLoop::on(bench_cpu());
        finish(start(&p, &out, &locks), "run with a busy bench core")
    };
    for t in time_records(&out) {
        let Some(StepData::Time(td)) = &t.data else {
            panic!("{}: no time data: {:?}", t.id, t.reason);
        };
        let rounds = td.rounds.as_ref().expect("timed in a session");
        assert!(
            rounds
                .flags
                .iter()
                .any(|f| f.contains("batches clean") && f.contains("the bench core was shared")),
            "{}: a figure timed beside a busy loop on its core is not flagged \
             as shared (flags {:?}; interfered batches: {} of {}; estimate {:?})\n{stderr}",
            t.id,
            rounds.flags,
            rounds.interference.iter().filter(|w| !w.is_empty()).count(),
            rounds.interference.len(),
            rounds.estimate
        );
        assert!(
            !rounds.reached,
            "{}: a flagged figure reached its precision",
            t.id
        );
    }
    let index = std::fs::read_to_string(out.join("reports/index.md")).expect("the index");
    assert!(
        !index.contains("every timing reached its precision target"),
        "the index claims precision for flagged figures:\n{index}"
    );
}

#[test]
fn two_runs_started_together_take_turns_on_the_bench_core() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempdir();
    let locks = tmp.path().join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let (pa, pb) = (
        pipeline(tmp.path(), "first", "200ms"),
        pipeline(tmp.path(), "second", "200ms"),
    );
    let (oa, ob) = (tmp.path().join("a"), tmp.path().join("b"));
    let a = start(&pa, &oa, &locks);
    let b = start(&pb, &ob, &locks);
    let (ea, eb) = (finish(a, "first run"), finish(b, "second run"));
    // The session's span, from its records (RFC 3339 to the second: a session that ends
    // within the second the other starts in is not an overlap).
    let span = |out: &Path| {
        let recs = time_records(out);
        let from = recs.iter().map(|r| r.started.clone()).min().unwrap();
        let to = recs.iter().map(|r| r.finished.clone()).max().unwrap();
        (from, to)
    };
    let (sa, sb) = (span(&oa), span(&ob));
    assert!(
        sa.1 <= sb.0 || sb.1 <= sa.0,
        "the two timing sessions overlap: {sa:?} and {sb:?}"
    );
    let said = |e: &str, holder: &Path| {
        let e: String = e.split_whitespace().collect::<Vec<_>>().join(" ");
        e.contains(&format!(
            "waiting for bench CPU {}: in use by process",
            bench_cpu()
        )) && e.contains(&s(holder))
    };
    assert!(
        said(&ea, &ob) || said(&eb, &oa),
        "neither run said which campaign holds the bench core:\n--- first\n{ea}\n--- second\n{eb}"
    );
    for out in [&oa, &ob] {
        for t in time_records(out) {
            assert_eq!(
                t.status,
                ngcc_pipe::record::Status::Ok,
                "{}: {:?}",
                t.id,
                t.reason
            );
        }
    }
}
