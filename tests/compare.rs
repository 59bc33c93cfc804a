//! `compare` and `history` on records, end to end: the real binary on record sets made from
//! the x86_1 fixture, whose time records are given synthetic rounds (a host that wobbles and
//! drifts, a yardstick timed in the same rounds, a few slow rounds marked interfered), so
//! that what each estimate must find is known.

mod common;

use std::path::Path;

use common::{run, s, tempdir};
use serde_json::{json, Value};

const FIXTURE: &str = "tests/fixtures/records/x86_1";
const ROUNDS: usize = 60;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (p, dst) = (e.path(), to.join(e.file_name()));
        if p.is_dir() {
            copy_dir(&p, &dst);
        } else {
            std::fs::copy(&p, &dst).unwrap();
        }
    }
}

/// How one synthetic campaign was timed.
struct Host<'a> {
    /// Overall speed: 1.06 = every round 6% slower.
    speed: f64,
    /// Rounds in which the host ran 1.3x slower (marked interfered in the records).
    slow: &'a [usize],
    /// Shifts the round-to-round noise, so two campaigns are not copies.
    phase: usize,
    /// The yardstick object's SHA-256, or no yardstick.
    yardstick: Option<&'a str>,
}

impl Host<'_> {
    /// The host's speed factor in round `i`: ±2% wobble, 1.3x in slow rounds.
    fn at(&self, i: usize) -> f64 {
        let wobble = 1.0 + 0.02 * (((i * 5 + self.phase) % 9) as f64 - 4.0) / 4.0;
        let slow = if self.slow.contains(&i) { 1.3 } else { 1.0 };
        self.speed * wobble * slow
    }
}

/// Copy the fixture to `to` and re-time every ok time record in [`ROUNDS`] rounds on
/// `host`: per round, the record's median per-op cycles x `code(instance, op)` x the host's
/// speed x noise of ±0.3%, and the yardstick 100 000 cycles x the host's speed x ±0.2%.
fn campaign(to: &Path, host: &Host, code: &dyn Fn(&str, &str) -> f64) {
    copy_dir(Path::new(FIXTURE), to);
    for sub in ["ml-kem", "qube"] {
        for f in std::fs::read_dir(to.join("records").join(sub))
            .unwrap()
            .flatten()
        {
            let path = f.path();
            let mut r: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            if r["kind"] != "time" || r["status"] != "ok" {
                continue;
            }
            let (inst, op) = (r["instance"].as_str().unwrap(), r["op"].as_str().unwrap());
            let base = r["data"]["summary"]["median_trial_cycles"]
                .as_f64()
                .unwrap()
                * code(inst, op);
            let noise = |i: usize, m: usize, a: f64| {
                1.0 + a * (((i * 7 + host.phase) % m) as f64 / (m - 1) as f64 * 2.0 - 1.0)
            };
            let cycles: Vec<f64> = (0..ROUNDS)
                .map(|i| base * host.at(i) * noise(i, 11, 0.003))
                .collect();
            let yardstick: Vec<f64> = (0..ROUNDS)
                .map(|i| 100_000.0 * host.at(i) * noise(i, 7, 0.002))
                .collect();
            let est = json!({"median": base, "ci_low": base, "ci_high": base});
            r["data"]["output"]["trials"] = cycles
                .iter()
                .map(|c| json!({"iters": 1000, "cycles": (c * 1000.0).round() as u64, "ns": 20_000_000, "core_cycles": null}))
                .collect();
            r["data"]["rounds"] = json!({
                "session": "synthetic", "seed": 1, "members": 16,
                "positions": vec![0; ROUNDS],
                "interference": (0..ROUNDS).map(|i| if host.slow.contains(&i) { vec!["yardstick 1.30x its median"] } else { vec![] }).collect::<Vec<_>>(),
                "clean_only": true, "estimate": est, "precision": 0.01, "reached": true,
                "stopped": "budget", "budget_s": 5.0,
            });
            if let Some(sha) = host.yardstick {
                r["data"]["rounds"]["yardstick"] = json!({
                    "name": "ngcc-yardstick-1", "object_sha256": sha, "values": yardstick,
                    "estimate": {"median": 100_000.0, "ci_low": 100_000.0, "ci_high": 100_000.0},
                    "relative": est,
                });
            }
            std::fs::write(&path, serde_json::to_vec_pretty(&r).unwrap()).unwrap();
        }
    }
}

/// The same code everywhere, except ML-KEM-768 keygen `slower` times the cycles.
fn code(slower: f64) -> impl Fn(&str, &str) -> f64 {
    move |inst, op| {
        if inst == "ML-KEM-768-clean" && op == "keygen" {
            slower
        } else {
            1.0
        }
    }
}

/// The CSV's lines as maps from column name to cell.
fn csv_rows(path: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            head.iter()
                .map(|h| h.to_string())
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

fn num(row: &std::collections::BTreeMap<String, String>, col: &str) -> f64 {
    row[col]
        .parse()
        .unwrap_or_else(|_| panic!("{col}: {row:?}"))
}

#[test]
fn compare_on_records_finds_a_5_percent_change_only_where_raw_and_adjusted_agree() {
    let tmp = tempdir();
    let (a, a2, b) = (
        tmp.path().join("a"),
        tmp.path().join("a 2"),
        tmp.path().join("b"),
    );
    let y = Some("ab12");
    campaign(
        &a,
        &Host {
            speed: 1.0,
            slow: &[7, 21, 33, 50],
            phase: 0,
            yardstick: y,
        },
        &code(1.0),
    );
    campaign(
        &a2,
        &Host {
            speed: 1.01,
            slow: &[],
            phase: 3,
            yardstick: y,
        },
        &code(1.0),
    );
    // B: the host 1% faster, ML-KEM-768 keygen 5% slower: raw 1.04, adjusted 1.05.
    campaign(
        &b,
        &Host {
            speed: 0.99,
            slow: &[],
            phase: 5,
            yardstick: y,
        },
        &code(1.05),
    );
    // C: the host 6% faster, the same 5% change: raw 0.987, adjusted 1.05.
    let c = tmp.path().join("c");
    campaign(
        &c,
        &Host {
            speed: 0.94,
            slow: &[],
            phase: 5,
            yardstick: y,
        },
        &code(1.05),
    );

    // A against A again, minutes later on a host 1% slower: nothing differs.
    let same = run(&["compare", &s(&a), &s(&a2)]);
    assert_eq!(same.code, 0, "{}", same.show());
    assert!(same.stdout.contains("0 of 15 compared operations differ beyond ±2.0%: 0 slower, 0 faster; 15 the same within ±2.0%"), "{}", same.stdout);

    let csv = tmp.path().join("ab.csv");
    let ab = run(&["compare", &s(&a), &s(&b), "--csv", &s(&csv)]);
    assert_eq!(ab.code, 0, "{}", ab.show());
    assert!(
        ab.stdout
            .contains("1 of 15 compared operations differ beyond ±2.0%: 1 slower, 0 faster"),
        "{}",
        ab.stdout
    );
    assert!(
        ab.stdout
            .contains("Both runs timed the same yardstick object in their rounds"),
        "{}",
        ab.stdout
    );
    // A's four slow rounds are left out: 60 rounds, 4 of them interfered.
    assert!(
        ab.stdout.contains("| keygen | 60 (4) | 60 |"),
        "{}",
        ab.stdout
    );
    let rows = csv_rows(&csv);
    assert_eq!(rows.len(), 15);
    for r in &rows {
        assert!((num(r, "host_ratio") - 0.99).abs() < 0.01, "{r:?}");
        assert_eq!(r["verdict_from"], "raw and adjusted");
        if r["instance"] == "ML-KEM-768-clean" && r["op"] == "keygen" {
            assert!((num(r, "adjusted_ratio") - 1.05).abs() < 0.005, "{r:?}");
            assert!(num(r, "adjusted_ci_low") > 1.02, "{r:?}");
            assert!((num(r, "ratio") - 1.04).abs() < 0.01, "{r:?}");
            assert!(num(r, "ci_low") > 1.02, "{r:?}");
            assert_eq!(r["verdict"], "slower");
        } else {
            assert!((num(r, "adjusted_ratio") - 1.0).abs() < 0.005, "{r:?}");
            assert_eq!(r["verdict"], "same");
        }
    }
    // On a host 6% faster the raw ratio does not see the change beyond the band and the
    // adjusted one does: how much of the host's change reached the KEM is not known (on this
    // kind of host each KEM takes its own share of it), so the row is undecided and says why,
    // and the others, raw 0.94 against adjusted 1.00, are undecided too — never `faster`.
    let csv_c = tmp.path().join("ac.csv");
    let ac = run(&["compare", &s(&a), &s(&c), "--csv", &s(&csv_c)]);
    assert_eq!(ac.code, 0, "{}", ac.show());
    assert!(
        ac.stdout
            .contains("0 of 15 compared operations differ beyond ±2.0%: 0 slower, 0 faster; 0 the same within ±2.0%, 15 undecided"),
        "{}",
        ac.stdout
    );
    assert!(ac.stdout.contains(", adjusted slower) |"), "{}", ac.stdout);
    assert!(
        ac.stdout
            .contains("| undecided (raw faster, adjusted same) |"),
        "{}",
        ac.stdout
    );
    for r in &csv_rows(&csv_c) {
        assert!((num(r, "host_ratio") - 0.94).abs() < 0.01, "{r:?}");
        assert_eq!(r["verdict"], "undecided", "{r:?}");
    }
    // A band of 10% swallows the 5% change.
    let wide = run(&["compare", &s(&a), &s(&b), "--band", "10%"]);
    assert!(
        wide.stdout
            .contains("0 of 15 compared operations differ beyond ±10%"),
        "{}",
        wide.stdout
    );
    let bad = run(&["compare", &s(&a), &s(&b), "--band", "0"]);
    assert_eq!(bad.code, 2, "{}", bad.show());
}

#[test]
fn compare_falls_back_to_raw_ratios_and_says_why() {
    let tmp = tempdir();
    let (a, c) = (tmp.path().join("a"), tmp.path().join("c"));
    campaign(
        &a,
        &Host {
            speed: 1.0,
            slow: &[],
            phase: 0,
            yardstick: Some("ab12"),
        },
        &code(1.0),
    );
    campaign(
        &c,
        &Host {
            speed: 1.0,
            slow: &[],
            phase: 2,
            yardstick: Some("cd34"),
        },
        &code(1.0),
    );
    // Records from before timing sessions: trials in one block, no yardstick.
    let old = run(&["compare", FIXTURE, &s(&a)]);
    assert_eq!(old.code, 0, "{}", old.show());
    assert!(
        old.stdout
            .contains("Verdicts use the raw ratio: A's records have no yardstick (15)"),
        "{}",
        old.stdout
    );
    assert!(
        old.stdout
            .contains("- A: 15 operations were timed in one block of trials"),
        "{}",
        old.stdout
    );
    assert!(old.stdout.contains("| 5 trials | 60 |"), "{}", old.stdout);
    // Another yardstick object: never divided by.
    let other = run(&["compare", &s(&a), &s(&c)]);
    assert!(
        other
            .stdout
            .contains("the runs timed different yardstick objects (15)"),
        "{}",
        other.stdout
    );
    assert!(other.stdout.contains("| same (raw) |"), "{}", other.stdout);
}

#[test]
fn history_shows_each_campaign_and_marks_the_significant_step() {
    let tmp = tempdir();
    let dirs: Vec<_> = ["march", "april", "may"]
        .iter()
        .map(|n| tmp.path().join(n))
        .collect();
    let y = Some("ab12");
    campaign(
        &dirs[0],
        &Host {
            speed: 1.0,
            slow: &[],
            phase: 0,
            yardstick: y,
        },
        &code(1.0),
    );
    campaign(
        &dirs[1],
        &Host {
            speed: 1.08,
            slow: &[3],
            phase: 4,
            yardstick: y,
        },
        &code(1.0),
    );
    campaign(
        &dirs[2],
        &Host {
            speed: 1.07,
            slow: &[],
            phase: 1,
            yardstick: y,
        },
        &code(1.05),
    );
    let csv = tmp.path().join("history.csv");
    let h = run(&[
        "history",
        &s(&dirs[0]),
        &s(&dirs[1]),
        &s(&dirs[2]),
        "--csv",
        &s(&csv),
    ]);
    assert_eq!(h.code, 0, "{}", h.show());
    assert!(
        h.stdout.contains("# History of 3 campaigns"),
        "{}",
        h.stdout
    );
    assert!(
        h.stdout.contains("1 significant step over 15 rows."),
        "{}",
        h.stdout
    );
    let line = h
        .stdout
        .lines()
        .find(|l| l.contains("`ML-KEM-768-clean` | keygen"))
        .expect("the row");
    // The step into May (5% slower code) is marked, the one into April (the host only) not.
    assert_eq!(line.matches(" ▲)").count(), 1, "{line}");
    assert!(line.ends_with("slower |"), "{line}");
    let last: f64 = line.rsplit("| ").next().unwrap()[..5].parse().unwrap();
    assert!((last - 1.05).abs() < 0.005, "{line}");
    assert!(line.contains("| raw and adjusted |"), "{line}");
    let rows = csv_rows(&csv);
    assert_eq!(rows.len(), 45);
    // Adjusted medians stay put where only the host moved; the step into April (host 8%
    // slower: raw 1.08, adjusted 1.00) is undecided, as no one knows how much of the host's
    // change reached the KEM; the step into May (host 1% faster) is the same on both.
    for r in rows
        .iter()
        .filter(|r| r["instance"] == "ML-KEM-512-clean" && r["op"] == "dec")
    {
        assert_eq!(r["basis"], "raw and adjusted");
        match r["campaign"].as_str() {
            "2" => assert_eq!(r["step_verdict"], "undecided", "{r:?}"),
            "3" => assert_eq!(r["step_verdict"], "same", "{r:?}"),
            _ => {}
        }
    }
    let one = run(&["history", &s(&dirs[0])]);
    assert_eq!(one.code, 2, "{}", one.show());
}
