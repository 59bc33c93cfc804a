//! A timing member that leaves a thread spinning between its batches
//! (`tests/fixtures/hostile/session/`): it takes the bench core from the other members while
//! its own batches look clean. Its time steps fail naming the CPU it used outside its
//! batches, the good fixture beside it is timed, and the rounds it disturbed are marked in
//! good's records.

use ngcc_pipe::model::{Op, StepKind};
use ngcc_pipe::record::{Status, StepData};

use super::common::*;

#[test]
fn a_member_spinning_between_its_batches_fails_and_is_named() {
    let tmp = tempdir();
    let out = tmp.path().join("out");
    let pipeline = repo().join("tests/fixtures/hostile/session/session.kdl");
    let r = run(&[
        "run".as_ref(),
        pipeline.as_os_str(),
        "--outputs".as_ref(),
        out.as_os_str(),
    ]);
    let mut c = Checks::default();
    c.check(r.code == 1, || format!("exit code {} (want 1)", r.code));
    let mut marked = 0;
    for op in [Op::Keygen, Op::Enc, Op::Dec] {
        let t = rec(
            &out,
            StepKind::Time,
            "spin-thread",
            Some("spin-thread"),
            Some(op),
        );
        c.check(
            t.status == Status::Failed
                && t.reason
                    .as_deref()
                    .is_some_and(|r| r.contains("CPU outside its own batches")),
            || format!("spin-thread time:{op} {:?}: {:?}", t.status, t.reason),
        );
        let g = rec(&out, StepKind::Time, "good", Some("good"), Some(op));
        c.check(g.status == Status::Ok, || {
            format!("good time:{op} {:?}: {:?}", g.status, g.reason)
        });
        if let Some(StepData::Time(g)) = g.data {
            marked += g.rounds.as_ref().map_or(0, |r| {
                r.interference
                    .iter()
                    .filter(|w| {
                        w.iter()
                            .any(|x| x.contains("spin-thread") && x.contains("outside its batches"))
                    })
                    .count()
            });
        }
    }
    c.check(marked > 0, || {
        "no round of good is marked as disturbed by spin-thread".to_string()
    });
    c.done(&r.show());
}
