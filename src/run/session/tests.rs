//! A whole session against stand-in runners: a shell script that speaks `kem-runner serve`'s
//! protocol (`ready`, then a `batch` answer per `batch`, the final record on `finish`) with
//! cycles chosen by its `--ns` argument, so the rounds, the stop rule, the budget, the
//! yardstick inside the batches, the host's states and a member's failure are checked
//! without a KEM.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use kem_native::output::{
    ApiSizes, Calibration, CoreCycles, Memory, Overhead, TimeOutput as RunnerOutput,
};

use super::*;
use crate::run::sandbox::Jail;

/// Every batch claims this many ns: far less than a pipe's round trip to a shell takes, so
/// never implausible.
const BATCH_NS: u64 = 1000;

/// The final record without trials; the script puts its batches in.
fn record_template() -> String {
    let out = RunnerOutput {
        op: "keygen".into(),
        sizes: ApiSizes {
            algname: None,
            pk: 1,
            sk: 1,
            ct: 1,
            ss: 1,
        },
        pinned_cpu: None,
        pin_error: None,
        counter: "monotonic".into(),
        rng: "ctr-drbg".into(),
        core_cycles: CoreCycles::Unavailable {
            reason: "stand-in".into(),
        },
        calibration: Calibration {
            target_trial_ns: 20_000_000,
            batch_iters: 10,
            batch_ns: BATCH_NS,
            batches_ns: Vec::new(),
            iters: 10,
            min_iters: 10,
        },
        warmup_iters: 10,
        layouts: Vec::new(),
        trials: Vec::new(),
        samples: vec![100],
        overhead: Overhead {
            cycles_per_call: 0.0,
            ns_per_call: 0.0,
            single_call_cycles: 0.0,
        },
        memory: Memory {
            baseline_rss_kib: None,
            peak_rss_kib: None,
            stack_bytes: None,
            stack_painted_bytes: 0,
        },
        failure: None,
    };
    serde_json::to_string(&out).unwrap()
}

/// The stand-in runner (its words on stdin, as the engine sends them). Its `--ns` says how
/// it behaves: `steady` (100 cycles per op in
/// every batch), `noisy` (200 and 100 in turn), `dies` (exits with code 3 when asked for
/// its third batch; `one-dies`: only the first of a member's processes to get there),
/// `liar` (claims its batches took 10 s), `zero` (answers a batch of no
/// iterations), `early` (answers a batch with a `done` line), `spins` (leaves a busy loop
/// running after its tenth batch), `forger` (its final record lists no batches), `fails`
/// (its final record names a failure), `states` (the host in two states: odd batches with
/// the yardstick at 200 cycles per call and the KEM at 150 per op, even ones at 100 and
/// 100), `miscount` (given the calls per batch, `--batch-iters`, it says it makes one
/// more). With `--gauge` it says it calibrated the yardstick to 10 calls a block and answers
/// two yardstick blocks per batch (100 cycles per call, unless `states`).
fn stand_in(dir: &Path) -> PathBuf {
    let template = record_template();
    let ready = serde_json::to_string(&Ready {
        calibration: serde_json::from_str::<RunnerOutput>(&template)
            .unwrap()
            .calibration,
        warmup_iters: 10,
        pinned_cpu: None,
        gauge_calls: Some(10),
        batch_calls: 100,
    })
    .unwrap();
    let miscounted = ready.replace("\"batch_calls\":100", "\"batch_calls\":101");
    assert_ne!(miscounted, ready);
    let (pre, post) = template.split_once("\"trials\":[]").unwrap();
    let failed = post.replace(
        "\"failure\":null",
        "\"failure\":\"crypto_kem_keypair returned -1\"",
    );
    assert_ne!(failed, post);
    let script = format!(
        r#"#!/bin/sh
# The engine sends the job's words as a JSON array on the first stdin line (`-`).
if [ "$1" = - ]; then
    read -r job
    set -- $(echo "$job" | tr -d '[]"' | tr ',' ' ')
fi
mode=
gauge=
given=
while [ $# -gt 0 ]; do
    case "$1" in
    --ns) mode=$2; shift ;;
    --lib) lib=$2; shift ;;
    --gauge) gauge=1; shift ;;
    --batch-iters) given=$2; shift ;;
    esac
    shift
done
n=0
trials=
if [ "$mode" = miscount ] && [ -n "$given" ]; then
    echo ready '{miscounted}'
elif [ -n "$gauge" ]; then
    echo ready '{ready}'
else
    echo ready '{{}}'
fi
while read -r cmd; do
    case "$cmd" in
    batch)
        n=$((n + 1))
        word=batch
        iters=10
        cycles=1000
        ns={BATCH_NS}
        case "$mode" in
        noisy) cycles=$((1000 * (1 + n % 2))) ;;
        dies) [ "$n" -eq 3 ] && exit 3 ;;
        one-dies) [ "$n" -eq 3 ] && mkdir "$lib.died" 2>/dev/null && exit 3 ;;
        liar) ns=10000000000 ;;
        zero) iters=0 ;;
        early) word=done ;;
        esac
        blocks=
        if [ -n "$gauge" ]; then
            y=1000
            if [ "$mode" = states ] && [ $((n % 2)) -eq 1 ]; then y=2000; cycles=1500; fi
            blocks=",\"gauge_cycles\":[$y,$y]"
        fi
        trials="$trials${{trials:+,}}{{\"iters\":$iters,\"cycles\":$cycles,\"ns\":$ns,\"core_cycles\":null$blocks}}"
        echo "$word {{\"iters\":$iters,\"cycles\":$cycles,\"ns\":$ns,\"core_cycles\":null,\"own\":{{\"run_ns\":null,\"wait_ns\":null,\"voluntary\":null,\"involuntary\":null}}$blocks}}"
        if [ "$mode" = spins ] && [ "$n" -eq 10 ]; then
            while :; do :; done &
        fi
        ;;
    finish)
        case "$mode" in
        forger) echo 'done {pre}"trials":[]{post}' ;;
        fails) echo 'done {pre}"trials":['"$trials"']{failed}' ;;
        *) echo 'done {pre}"trials":['"$trials"']{post}' ;;
        esac
        exit 0
        ;;
    esac
done
"#
    );
    let path = dir.join("stand-in-runner");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn member(dir: &Path, label: &str, mode: &str, budget_ns: u64) -> Member {
    let scratch = dir.join(label);
    std::fs::create_dir_all(&scratch).unwrap();
    let object = dir.join(format!("{label}.so"));
    let api_h = dir.join("api.h");
    Member {
        label: label.into(),
        object: object.clone(),
        layouts: Vec::new(),
        api_h: api_h.clone(),
        namespace: mode.into(),
        op: "keygen".into(),
        min_iters: 7,
        samples: 3,
        budget_ns,
        log: exec::open_log(&dir.join(format!("{label}.log"))).unwrap(),
        jail: Jail::runner(
            &dir.join("stand-in-runner"),
            &object,
            &api_h,
            &scratch,
            1 << 30,
        ),
        reference: None,
        more: Vec::new(),
    }
}

/// Member `label`'s further runner process `i` (from 2), with its own scratch and log.
fn process(dir: &Path, label: &str, i: usize) -> Process {
    let scratch = dir.join(format!("{label}.p{i}"));
    std::fs::create_dir_all(&scratch).unwrap();
    let object = dir.join(format!("{label}.so"));
    Process {
        log: exec::open_log(&dir.join(format!("{label}.p{i}.log"))).unwrap(),
        jail: Jail::runner(
            &dir.join("stand-in-runner"),
            &object,
            &dir.join("api.h"),
            &scratch,
            1 << 30,
        ),
    }
}

fn settings(dir: &Path) -> Settings {
    Settings {
        runner: stand_in(dir),
        sandbox: Sandbox::unavailable("unit test"),
        bench_cpu: kem_native::sys::thread_affinity().unwrap()[0],
        precision: 0.01,
        batch: DEFAULT_BATCH,
        timeout: Duration::from_secs(60),
        group: 1,
        gauge: None,
    }
}

/// A yardstick the stand-in "loads" (it only answers for it).
fn gauge(dir: &Path) -> Gauge {
    Gauge {
        object: dir.join("yardstick.so"),
        api_h: dir.join("yardstick-api.h"),
        name: "ngcc-yardstick-1".into(),
        object_sha256: "ab".repeat(32),
    }
}

/// What the stop rule saw after each round: (round, widest half-width).
fn session(members: Vec<Member>, s: &Settings) -> (String, u64, Vec<Outcome>, Vec<(usize, f64)>) {
    let seen = Mutex::new(Vec::new());
    let (id, seed, out) = run(members, s, &|r, w| seen.lock().unwrap().push((r, w)));
    (id, seed, out, seen.into_inner().unwrap())
}

fn rounds(o: &Outcome) -> &Rounds {
    match &o.result {
        Ok((_, r)) => r,
        Err(stop) => panic!("failed: {}", stop.reason),
    }
}

fn reason(o: &Outcome) -> &str {
    match &o.result {
        Ok(_) => panic!("did not fail"),
        Err(stop) => &stop.reason,
    }
}

#[test]
fn steady_members_stop_at_the_precision_and_failing_ones_leave_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path());
    let big = u64::MAX / 16;
    let mut with_layout = member(dir.path(), "b", "steady", big);
    with_layout.layouts = vec![dir.path().join("b-shuffled.so")];
    let members = vec![
        member(dir.path(), "a", "steady", big),
        with_layout,
        member(dir.path(), "c", "dies", big),
        member(dir.path(), "d", "liar", big),
        member(dir.path(), "e", "spins", big),
        member(dir.path(), "f", "zero", big),
        member(dir.path(), "g", "forger", big),
        member(dir.path(), "h", "fails", big),
    ];
    let (id, seed, out, seen) = session(members, &s);
    assert_eq!(out.len(), 8);

    // The runner's command line: the member's object, API, namespace and operation, the
    // bench core, batch length, iterations and samples, then each layout.
    let d = dir.path().display().to_string();
    let mut want: Vec<String> = [
        format!("{d}/stand-in-runner"),
        "serve".into(),
        "--lib".into(),
        format!("{d}/b.so"),
        "--api".into(),
        format!("{d}/api.h"),
        "--ns".into(),
        "steady".into(),
        "--op".into(),
        "keygen".into(),
        "--cpu".into(),
        s.bench_cpu.to_string(),
        "--batch-ns".into(),
        "20000000".into(),
        "--min-iters".into(),
        "7".into(),
        "--samples".into(),
        "3".into(),
    ]
    .into();
    want.extend(["--layout".to_string(), format!("{d}/b-shuffled.so")]);
    assert_eq!(out[1].commands, [want]);

    // Steady members: a zero-width interval at the first check, after MIN_ROUNDS rounds;
    // no check before.
    assert_eq!(seen.len(), MIN_ROUNDS, "{seen:?}");
    for (i, &(round, widest)) in seen.iter().enumerate() {
        assert_eq!(round, i + 1);
        if round < MIN_ROUNDS {
            assert!(widest.is_infinite(), "{seen:?}");
        } else {
            assert_eq!(widest, 0.0);
        }
    }
    let busy = "e used CPU outside its batches".to_string();
    for o in &out[..2] {
        let r = rounds(o);
        assert_eq!(r.session, id);
        assert_eq!(r.seed, seed);
        assert_eq!(r.members, 8);
        assert_eq!(r.stopped, Stopped::Precision);
        assert!(r.reached);
        assert_eq!(r.precision, 0.01);
        assert_eq!(
            (r.estimate.median, r.estimate.ci_low, r.estimate.ci_high),
            (100.0, 100.0, 100.0)
        );
        assert_eq!(r.session_rounds, (0..MIN_ROUNDS as u32).collect::<Vec<_>>());
        assert_eq!(o.values, vec![100.0; MIN_ROUNDS]);
        assert_eq!(r.positions.len(), MIN_ROUNDS);
        // Positions in a round's order: eight runners in the first round, five alive from
        // the fourth on.
        assert!(r.positions.iter().all(|&p| p < 8), "{:?}", r.positions);
        assert!(r.positions[3..].iter().all(|&p| p < 5), "{:?}", r.positions);
        assert!(r.yardstick.is_none() && r.host.is_none());
        // Eight clean rounds are too few to leave the two disturbed ones out.
        assert_eq!(r.used.len(), MIN_ROUNDS);
        assert!(!r.clean_only);
        assert!(r.flags.is_empty(), "{:?}", r.flags);
        // The busy loop left running after the last round marks the last two rounds of
        // the others.
        assert_eq!(r.interference.len(), MIN_ROUNDS);
        for why in &r.interference[MIN_ROUNDS - 2..] {
            assert!(why.contains(&busy), "{why:?}");
        }
        let marked: Vec<bool> = r.interference.iter().map(|w| !w.is_empty()).collect();
        assert_eq!(o.interfered, marked);
        let Ok((time, _)) = &o.result else {
            unreachable!("finished above")
        };
        assert_eq!(time.trials.len(), MIN_ROUNDS);
        assert!(o.elapsed > Duration::ZERO);
    }
    // The one that died answered two batches; the liar and the empty batch none.
    assert_eq!(reason(&out[2]), "keygen: kem-runner exit code 3");
    assert_eq!(out[2].values, vec![100.0; 2]);
    assert!(
        reason(&out[3]).starts_with("implausible timing record: batch 1 claims 10000.000 ms"),
        "{}",
        reason(&out[3])
    );
    assert!(out[3].values.is_empty());
    assert!(
        reason(&out[4]).starts_with("keygen: its processes used"),
        "{}",
        reason(&out[4])
    );
    assert!(
        reason(&out[5]).starts_with("keygen: unreadable record from kem-runner"),
        "{}",
        reason(&out[5])
    );
    assert!(out[5].values.is_empty());
    assert_eq!(
        reason(&out[6]),
        "keygen: the runner's record does not list the batches it answered"
    );
    assert_eq!(reason(&out[7]), "keygen: crypto_kem_keypair returned -1");
    assert_eq!(out[7].values, vec![100.0; MIN_ROUNDS]);
}

#[test]
fn the_budget_stops_a_member_that_stays_wide_and_the_yardstick_rides_in_its_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path());
    s.gauge = Some(gauge(dir.path()));
    // 1.2 s of bench time in all, the session's end included (the stand-in answers at
    // once, so its rounds take a few ms each).
    let members = vec![
        member(dir.path(), "a", "steady", 600_000_000),
        member(dir.path(), "b", "noisy", 600_000_000),
    ];
    let (_, _, out, seen) = session(members, &s);
    let n = seen.len();
    assert_eq!(out.len(), 2);
    let d = dir.path().display().to_string();
    let tail = &out[0].commands[0][out[0].commands[0].len() - 4..];
    assert_eq!(
        tail,
        [
            "--gauge".to_string(),
            format!("{d}/yardstick.so"),
            "--gauge-api".into(),
            format!("{d}/yardstick-api.h")
        ]
    );
    assert!(n > MIN_ROUNDS, "{seen:?}");
    assert!(
        seen[MIN_ROUNDS - 1..].iter().all(|&(_, w)| w > 0.1),
        "{seen:?}"
    );
    let (a, b) = (rounds(&out[0]), rounds(&out[1]));
    for (o, r) in [(&out[0], a), (&out[1], b)] {
        assert_eq!(r.stopped, Stopped::Budget);
        assert_eq!(r.members, 2);
        // Timed in every round it was due in.
        let k = r.session_rounds.len();
        assert_eq!(o.values.len(), k);
        let host = r.host.as_ref().expect("the yardstick measured the host");
        assert!(!host.two_states);
        assert_eq!(host.batches, "u".repeat(k));
        assert!((r.budget_s - 1.2).abs() < 1e-12);
        // The stop rule kept room for the session's end: it ends within its budget (a
        // round's jitter allowed).
        let bench = r.bench_s.expect("the session's bench time is kept");
        assert!(bench > 0.3 && bench <= r.budget_s + 0.25, "{bench} s");
        let y = r
            .yardstick
            .as_ref()
            .expect("the yardstick lasted the session");
        assert_eq!(y.name, "ngcc-yardstick-1");
        assert_eq!(y.placement, "in-batch");
        assert_eq!(y.object_sha256, "ab".repeat(32));
        assert_eq!(y.values, vec![100.0; k]);
        assert_eq!(y.estimate.median, 100.0);
    }
    // The steady member, within the precision, is visited less from then on; the budget
    // goes to the noisy one, timed in every round.
    assert!(a.reached);
    assert!(a.visits.iter().any(|v| v.every > 1), "{:?}", a.visits);
    assert!(a.session_rounds.len() < n);
    assert!(b.visits.is_empty(), "{:?}", b.visits);
    assert_eq!(b.session_rounds.len(), n);
    assert_eq!(a.yardstick.as_ref().unwrap().relative.median, 1.0);
    // 200, 100, 200, ...: whichever rounds count (a round the host interfered with is left
    // out), the interval runs from 100 to 200, and the ratio to the yardstick from 1 to 2.
    assert!(!b.reached);
    let noisy: Vec<f64> = (1..=n as u32)
        .map(|k| f64::from(100 * (1 + k % 2)))
        .collect();
    assert_eq!(out[1].values, noisy);
    assert_eq!((b.estimate.ci_low, b.estimate.ci_high), (100.0, 200.0));
    let relative = b.yardstick.as_ref().unwrap().relative;
    assert_eq!((relative.ci_low, relative.ci_high), (1.0, 2.0));
}

#[test]
fn every_session_draws_a_fresh_seed() {
    // Equal by chance once in 2^64.
    assert_ne!(fresh_seed(), fresh_seed());
}

#[test]
fn a_session_ends_when_its_last_member_failed() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path());
    let only = member(dir.path(), "a", "dies", u64::MAX / 16);
    let (_, _, out, seen) = session(vec![only], &s);
    assert_eq!(reason(&out[0]), "keygen: kem-runner exit code 3");
    // It died in the third round: no round follows.
    let rounds: Vec<usize> = seen.iter().map(|r| r.0).collect();
    assert_eq!(rounds, [1, 2, 3]);
}

#[test]
fn a_done_line_is_no_answer_to_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path());
    let early = member(dir.path(), "a", "early", u64::MAX / 16);
    let (_, _, out, seen) = session(vec![early], &s);
    assert!(
        reason(&out[0]).starts_with("keygen: unreadable record from kem-runner"),
        "{}",
        reason(&out[0])
    );
    assert!(out[0].values.is_empty());
    assert_eq!(seen.len(), 1, "{seen:?}");
}

#[test]
fn with_two_host_states_the_figure_rests_on_the_uncontended_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path());
    s.gauge = Some(gauge(dir.path()));
    // The odd batches contended (yardstick 200 per call, the KEM 150 per op), the even ones
    // uncontended (100, 100).
    let members = vec![member(dir.path(), "a", "states", u64::MAX / 16)];
    let (_, _, out, _) = session(members, &s);
    let r = rounds(&out[0]);
    let host = r.host.as_ref().unwrap();
    assert!(host.two_states);
    assert_eq!(host.uncontended_share, Some(0.5));
    assert_eq!(&host.batches[..4], "cucu");
    assert_eq!(r.estimate.median, 100.0);
    // Ten clean uncontended batches of zero spread reach the precision: the session stops.
    // (The bench core's real irq ticks may mark a batch interfered: it is left out.)
    assert_eq!(r.stopped, Stopped::Precision);
    let clean_odd: Vec<u32> = (0..r.interference.len() as u32)
        .filter(|&i| i % 2 == 1 && r.interference[i as usize].is_empty())
        .collect();
    assert_eq!(r.used, clean_odd);
    assert_eq!(r.used.len(), MIN_ROUNDS);
    assert_eq!(host.uncontended.as_ref().unwrap().estimate.median, 100.0);
    assert_eq!(host.contended.as_ref().unwrap().estimate.median, 150.0);
    assert!(r.reached && r.flags.is_empty(), "{:?}", r.flags);
    // The mix of all batches would have said 125.
    let all = crate::measure::stats::median(&out[0].values).unwrap();
    assert_eq!(all, 125.0);
}

#[test]
fn a_member_timed_by_several_processes_pools_them_and_fails_as_a_whole() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path());
    let three = |label: &str, mode: &str| {
        let mut m = member(dir.path(), label, mode, u64::MAX / 16);
        m.more = (2..=3).map(|i| process(dir.path(), label, i)).collect();
        m
    };
    let (_, _, out, seen) = session(vec![three("a", "steady"), three("b", "one-dies")], &s);
    assert_eq!(seen.len(), MIN_ROUNDS, "{seen:?}");
    // a: three processes in every round, their batches pooled in session order.
    let r = rounds(&out[0]);
    assert_eq!(r.members, 6);
    assert_eq!(r.process_count(), 3);
    assert_eq!(r.positions.len(), 3 * MIN_ROUNDS);
    assert_eq!(r.processes.len(), 3 * MIN_ROUNDS);
    for p in 0..3 {
        assert_eq!(r.processes.iter().filter(|&&x| x == p).count(), MIN_ROUNDS);
    }
    assert!(r.session_rounds.windows(2).all(|w| w[0] <= w[1]));
    for round in r.session_rounds.chunks(3) {
        assert!(
            round.iter().all(|&x| x == round[0]),
            "{:?}",
            r.session_rounds
        );
    }
    for (i, w) in r.session_rounds.windows(2).enumerate() {
        if w[0] == w[1] {
            assert!(r.positions[i] < r.positions[i + 1], "{:?}", r.positions);
        }
    }
    assert_eq!(r.estimate.median, 100.0);
    assert_eq!(out[0].commands.len(), 3);
    assert_eq!(out[0].values.len(), 3 * MIN_ROUNDS);
    let Ok((time, _)) = &out[0].result else {
        unreachable!("finished above")
    };
    assert_eq!(time.trials.len(), 3 * MIN_ROUNDS);
    // The member's 3 single-call samples split among its processes (one each), and each
    // process's after the other's.
    for c in &out[0].commands {
        let at = c.iter().position(|w| w == "--samples").expect("--samples");
        assert_eq!(c[at + 1], "1", "{c:?}");
    }
    assert_eq!(time.samples, [100, 100, 100]);
    // b: the first of its processes to die failed it; the other two were stopped with the
    // same reason, each log saying so.
    assert_eq!(reason(&out[1]), "keygen: kem-runner exit code 3");
    let stopped = ["b.log", "b.p2.log", "b.p3.log"]
        .iter()
        .map(|f| std::fs::read_to_string(dir.path().join(f)).unwrap())
        .filter(|log| log.contains("stopped by ngcc-pipe: keygen: kem-runner exit code 3"))
        .count();
    assert_eq!(stopped, 2);
}

#[test]
fn a_members_further_processes_are_given_its_calls_per_batch_and_must_take_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path());
    s.gauge = Some(gauge(dir.path()));
    let three = |label: &str, mode: &str| {
        let mut m = member(dir.path(), label, mode, u64::MAX / 16);
        m.more = (2..=3).map(|i| process(dir.path(), label, i)).collect();
        m
    };
    let (_, _, out, _) = session(vec![three("a", "steady"), three("b", "miscount")], &s);
    assert!(out[0].result.is_ok(), "{}", reason(&out[0]));
    // The first process calibrates (the stand-in's 100 calls) and measures the stack; the
    // others are given its calls and skip the stack.
    let given = |c: &Vec<String>| {
        let at = c.iter().position(|w| w == "--batch-iters")?;
        Some(c[at + 1].clone())
    };
    let skips = |c: &Vec<String>| c.windows(2).any(|w| w == ["--stack", "skip"]);
    let c = &out[0].commands;
    assert_eq!((given(&c[0]), skips(&c[0])), (None, false), "{:?}", c[0]);
    for c in &c[1..] {
        assert_eq!((given(c), skips(c)), (Some("100".into()), true), "{c:?}");
    }
    // b's second process says it makes 101: b fails as a whole with the reason.
    assert_eq!(
        reason(&out[1]),
        "keygen: implausible timing record: kem-runner's ready line says 101 calls per batch, \
         not the 100 it was given"
    );
}
