//! Outputs checked while timed (`src/run/session/checked.rs`): the integrity fixtures that
//! do less when timed — `lazy` hands back its last outputs when an operation is called back
//! to back, `caching` hands back the outputs it made last for the same input — fail their
//! time steps with "outputs differ when timed", naming the operation and the batch, while
//! the honest `good` fixture beside them in the same session is timed `ok`. (`caching`'s
//! keygen has no input to cache on: it computes, and is timed.)

use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::Status;

use super::common::*;

#[test]
fn kems_that_do_less_when_timed_fail_and_the_honest_one_is_timed() {
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let pipeline = pipeline_copy(
        "tests/fixtures/hostile/integrity/integrity.kdl",
        &tmp.path().join("integrity.kdl"),
        &[],
    );
    let mut args = vec![
        "run".to_string(),
        pipeline.display().to_string(),
        "--outputs".into(),
        out.display().to_string(),
    ];
    for sub in ["good", "lazy", "caching"] {
        args.extend(["--only".to_string(), format!("{sub}/*/time:*")]);
    }
    let r = run(&args);
    let mut c = Checks::default();
    c.check(r.code == 1, || format!("exit code {} (want 1)", r.code));
    for op in [Op::Keygen, Op::Enc, Op::Dec] {
        let g = rec(&out, StepKind::Time, "good", Some("good"), Some(op));
        c.check(g.status == Status::Ok, || {
            format!("good time:{op} {:?}: {:?}", g.status, g.reason)
        });
        let differ = format!("outputs differ when timed: {op} batch ");
        let mut cheats = vec!["lazy"];
        if op != Op::Keygen {
            cheats.push("caching");
        }
        for sub in cheats {
            let t = rec(&out, StepKind::Time, sub, Some(sub), Some(op));
            c.check(
                t.status == Status::Failed
                    && t.reason.as_deref().is_some_and(|r| r.contains(&differ)),
                || format!("{sub} time:{op} {:?}: {:?}", t.status, t.reason),
            );
        }
    }
    let k = rec(
        &out,
        StepKind::Time,
        "caching",
        Some("caching"),
        Some(Op::Keygen),
    );
    c.check(k.status == Status::Ok, || {
        format!("caching time:keygen {:?}: {:?}", k.status, k.reason)
    });
    c.done(&r.show());
}
