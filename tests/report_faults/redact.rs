//! The one redaction that turns a real run's output folder into committed fixtures
//! ([`redact_outputs`]): what differs from machine to machine or run to run (absolute paths,
//! times, durations, host facts) becomes a placeholder or a fixed value; the structure and
//! the engine's own strings (sandbox description, environment warnings, skip and failure
//! reasons) stay as the engine wrote them. Measured values (cycles, ticks, memory) stay too:
//! they are what the reports render, and the committed copy does not change between test runs.

use std::path::{Path, PathBuf};

use ngcc_pipe::model::StepKind;
use serde_json::{Map, Value};

/// Every time stamp of a record or campaign.
pub const STARTED: &str = "2026-01-01T00:00:00Z";
pub const FINISHED: &str = "2026-01-01T00:01:00Z";
/// Every `duration_s`.
pub const DURATION_S: f64 = 1.0;
/// The load average and the bench core's busy fraction: fixed, on the side of the engine's
/// warning threshold they were on (so a warning about them still agrees with the record).
const LOAD_QUIET: f64 = 0.25;
const LOAD_BUSY: f64 = 2.0;
const BUSY_PERCENT: &str = "50";

/// Host facts of an `environment` object and their fixed values (the CPU model, memory,
/// OS, kernel and compiler say which machine it was; the rest of the environment, such as the
/// governor and turbo, stays: the warnings are about them).
const HOST_FACTS: [(&str, &str); 5] = [
    ("cpu_model", "CPU model (redacted)"),
    ("os", "OS (redacted)"),
    ("kernel", "kernel (redacted)"),
    ("cc_version", "gcc (version redacted)"),
    ("build_tool", "cargo (version redacted)"),
];

/// The committed form of the output folder `out` of a real run: its `campaign.json` and
/// every record below the record folders of the step kinds (`records/`, `profile/`, ...),
/// each redacted; `(path relative to out, bytes)`, sorted by path. `places` are absolute
/// folders and their placeholders (e.g. the outputs folder as `<outputs>`): every string
/// naming one is rewritten, the longest (most specific) first.
pub fn redact_outputs(out: &Path, places: &[(&Path, &str)]) -> Vec<(PathBuf, Vec<u8>)> {
    let mut places: Vec<(String, &str)> = places
        .iter()
        .flat_map(|(p, name)| {
            // as given and as the kernel resolves it (the engine may write either)
            let mut v = vec![(p.display().to_string(), *name)];
            if let Ok(c) = p.canonicalize() {
                v.push((c.display().to_string(), *name));
            }
            v
        })
        .collect();
    places.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    places.dedup();

    let mut files = vec![PathBuf::from("campaign.json")];
    let mut dirs: Vec<&str> = StepKind::ALL.iter().map(|k| k.record_dir()).collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        files.extend(
            crate::walk(&out.join(d))
                .into_iter()
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .map(|f| f.strip_prefix(out).expect("below out").to_path_buf()),
        );
    }
    files.sort();
    files
        .into_iter()
        .map(|rel| {
            let text = std::fs::read_to_string(out.join(&rel))
                .unwrap_or_else(|e| panic!("{}: {e}", out.join(&rel).display()));
            let mut v: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
            redact(&mut v, &places);
            let mut bytes = serde_json::to_vec_pretty(&v).expect("JSON");
            bytes.push(b'\n');
            (rel, bytes)
        })
        .collect()
}

/// Redact one JSON value in place (see the module doc).
fn redact(v: &mut Value, places: &[(String, &str)]) {
    match v {
        Value::String(s) => *s = redact_str(s, places),
        Value::Array(a) => a.iter_mut().for_each(|x| redact(x, places)),
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match k.as_str() {
                    "started" if x.is_string() => *x = STARTED.into(),
                    "finished" if x.is_string() => *x = FINISHED.into(),
                    "duration_s" if x.is_number() => *x = DURATION_S.into(),
                    _ => {
                        if let ("environment", Value::Object(env)) = (k.as_str(), &mut *x) {
                            host_facts(env);
                        }
                        redact(x, places);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The host facts of one `environment` object (see [`HOST_FACTS`]), its memory, clock and
/// load, and the figures the load and busy warnings quote.
fn host_facts(env: &mut Map<String, Value>) {
    for (key, fixed) in HOST_FACTS {
        if env.get(key).is_some_and(|v| !v.is_null()) {
            env.insert(key.into(), fixed.into());
        }
    }
    for (key, fixed) in [
        ("mem_total_mib", Value::from(16384)),
        ("max_mhz", 3000.0.into()),
    ] {
        if env.get(key).is_some_and(|v| !v.is_null()) {
            env.insert(key.into(), fixed);
        }
    }
    let load = env.get("loadavg").and_then(Value::as_f64).map(|l| {
        if l >= ngcc_pipe::measure::env::LOAD_WARN {
            LOAD_BUSY
        } else {
            LOAD_QUIET
        }
    });
    if let Some(l) = load {
        env.insert("loadavg".into(), l.into());
    }
    if let Some(Value::Array(ws)) = env.get_mut("warnings") {
        for w in ws {
            if let Some(Value::String(what)) = w.get_mut("what") {
                if let Some(l) = load {
                    *what = replace_number_after(what, "load average ", &format!("{l:.2}"));
                }
                *what = replace_number_after(what, " was ", BUSY_PERCENT);
            }
        }
    }
}

/// `text` with the number right after `marker` (digits and a dot) replaced by `with`.
fn replace_number_after(text: &str, marker: &str, with: &str) -> String {
    let Some(at) = text.find(marker) else {
        return text.to_string();
    };
    let start = at + marker.len();
    let len = text[start..]
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len() - start);
    if len == 0 {
        return text.to_string();
    }
    format!("{}{with}{}", &text[..start], &text[start + len..])
}

/// `s` with every place replaced by its placeholder.
fn redact_str(s: &str, places: &[(String, &str)]) -> String {
    let mut s = s.to_string();
    for (p, name) in places {
        if !p.is_empty() && s.contains(p.as_str()) {
            s = s.replace(p.as_str(), name);
        }
    }
    s
}

#[test]
fn faults_redaction_rewrites_places_times_and_host_facts_only() {
    let places = [
        ("/tmp/x y/out".to_string(), "<outputs>"),
        ("/tmp/x y".to_string(), "<tmp>"),
    ];
    let mut v = serde_json::json!({
        "started": "2026-12-01T21:00:00Z",
        "duration_s": 12.5,
        "reason": "skipped: dependency `good/good/kat` failed",
        "logs": ["/tmp/x y/out/logs/a.log", "/tmp/x y/work"],
        "environment": {
            "cpu_model": "Intel Xeon", "loadavg": 3.21, "governor": "powersave",
            "kernel": null,
            "warnings": [
                {"what": "the machine is loaded: 1-minute load average 3.21 at capture time", "fix": "f"},
                {"what": "bench core 1 was 73% busy while sampled", "fix": "g"},
            ],
        },
    });
    redact(&mut v, &places);
    assert_eq!(v["started"], STARTED);
    assert_eq!(v["duration_s"], DURATION_S);
    assert_eq!(v["reason"], "skipped: dependency `good/good/kat` failed");
    assert_eq!(v["logs"][0], "<outputs>/logs/a.log");
    assert_eq!(v["logs"][1], "<tmp>/work");
    let env = &v["environment"];
    assert_eq!(env["cpu_model"], "CPU model (redacted)");
    assert_eq!(env["kernel"], Value::Null);
    assert_eq!(env["governor"], "powersave");
    assert_eq!(env["loadavg"], LOAD_BUSY);
    assert_eq!(
        env["warnings"][0]["what"],
        "the machine is loaded: 1-minute load average 2.00 at capture time"
    );
    assert_eq!(
        env["warnings"][1]["what"],
        "bench core 1 was 50% busy while sampled"
    );
}
