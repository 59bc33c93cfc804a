use super::*;
use crate::graph::tests::campaign;
use crate::model::StepKind;
use crate::run::test_ctx::{ctx, ix};

#[test]
fn core_isolation_runs_both_lanes_side_by_side() {
    for waits in [false, true] {
        // Parallel steps up to the workers, whatever the bench lane does.
        assert!(may_start(false, false, 0, 1, 2, waits));
        assert!(may_start(false, false, 1, 1, 2, waits));
        assert!(!may_start(false, false, 2, 0, 2, waits));
        // One exclusive step at a time, beside parallel ones.
        assert!(may_start(false, true, 2, 0, 2, waits));
        assert!(!may_start(false, true, 0, 1, 2, waits));
    }
}

#[test]
fn machine_isolation_keeps_exclusive_steps_alone() {
    // An exclusive step: only on an idle machine.
    assert!(may_start(true, true, 0, 0, 2, true));
    assert!(!may_start(true, true, 1, 0, 2, true));
    assert!(!may_start(true, true, 0, 1, 2, true));
    // A parallel step: not beside an exclusive one, not while one waits, not beyond
    // the workers.
    assert!(may_start(true, false, 0, 0, 2, false));
    assert!(may_start(true, false, 1, 0, 2, false));
    assert!(!may_start(true, false, 2, 0, 2, false));
    assert!(!may_start(true, false, 0, 1, 2, false));
    assert!(!may_start(true, false, 0, 0, 2, true));
}

fn outcome(status: Status, soft: bool, reason: &str) -> Outcome {
    Outcome {
        status,
        reason: Some(reason.to_string()),
        ran: true,
        soft,
        log: None,
    }
}

#[test]
fn a_dependency_that_did_not_succeed_blocks_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let c = ctx(campaign(1), tmp.path());
    let kat = ix(&c, "s/K-0/kat");
    let build = ix(&c, "s/K-0/build");
    let blocked = |status, soft, reason: &str, kind| {
        let outcomes = BTreeMap::from([
            (build, outcome(Status::Ok, false, "")),
            (kat, outcome(status, soft, reason)),
        ]);
        blocked_by(&c, &[build, kat], &outcomes, kind)
    };
    assert_eq!(blocked(Status::Ok, false, "", StepKind::Time), None);
    // Hash mismatches only: dependents still run ("timed anyway").
    assert_eq!(
        blocked(Status::Failed, true, "MISMATCH", StepKind::Time),
        None
    );
    assert_eq!(
        blocked(
            Status::Failed,
            false,
            "FAIL: SIGSEGV in keygen\nlog tail",
            StepKind::Time
        ),
        Some((
            Status::Skipped,
            "`s/K-0/kat` failed: FAIL: SIGSEGV in keygen".to_string()
        ))
    );
    assert_eq!(
        blocked(
            Status::TimedOut,
            false,
            "timed out after 8 s",
            StepKind::Time
        ),
        Some((
            Status::Skipped,
            "`s/K-0/kat` failed: timed out after 8 s".to_string()
        ))
    );
    assert_eq!(
        blocked(Status::Skipped, false, "x", StepKind::Time),
        Some((Status::Skipped, "`s/K-0/kat` was skipped".to_string()))
    );
    assert_eq!(
        blocked(Status::Unsupported, false, "lacks avx2", StepKind::Time),
        Some((Status::Unsupported, "lacks avx2".to_string()))
    );
    // A report renders whatever exists, failures included.
    assert_eq!(
        blocked(Status::Failed, false, "FAIL", StepKind::Report),
        None
    );
}

#[test]
fn the_first_dependency_that_blocks_decides() {
    let tmp = tempfile::tempdir().unwrap();
    let c = ctx(campaign(1), tmp.path());
    let (build, kat) = (ix(&c, "s/K-0/build"), ix(&c, "s/K-0/kat"));
    let outcomes = BTreeMap::from([
        (build, outcome(Status::Unsupported, false, "lacks avx2")),
        (kat, outcome(Status::Failed, false, "FAIL")),
    ]);
    assert_eq!(
        blocked_by(&c, &[build, kat], &outcomes, StepKind::Time),
        Some((Status::Unsupported, "lacks avx2".to_string()))
    );
}

#[test]
fn a_step_is_ready_when_its_last_selected_dependency_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let c = ctx(campaign(1), tmp.path());
    let all: BTreeSet<NodeIndex> = c.plan.graph.node_indices().collect();
    let mut waiting: BTreeMap<NodeIndex, usize> = all
        .iter()
        .map(|&ix| (ix, c.plan.deps(ix).count()))
        .filter(|(_, n)| *n > 0)
        .collect();
    let mut ready = BTreeSet::new();
    let report = ix(&c, "s/report");
    let mut order = vec![];
    // Finish steps in execution order; each release may make others ready.
    let mut todo: VecDeque<NodeIndex> = all
        .iter()
        .copied()
        .filter(|ix| !waiting.contains_key(ix))
        .collect();
    while let Some(ix) = todo.pop_front() {
        order.push(c.node(ix).id.clone());
        assert!(
            c.plan.deps(ix).all(|d| order.contains(&c.node(d).id)),
            "{} ready before its dependencies: {order:?}",
            c.node(ix).id
        );
        release(&c, ix, &all, &mut waiting, &mut ready);
        todo.extend(std::mem::take(&mut ready));
    }
    assert!(waiting.is_empty(), "never ready: {waiting:?}");
    assert_eq!(order.len(), all.len());
    assert_eq!(order.last(), Some(&c.node(report).id));
    // A dependent outside the selection is not counted down.
    let build = ix(&c, "s/K-0/build");
    let only_build: BTreeSet<NodeIndex> = [build].into();
    let mut waiting = BTreeMap::from([(ix(&c, "s/K-0/kat"), 1)]);
    release(&c, build, &only_build, &mut waiting, &mut ready);
    assert!(ready.is_empty());
    assert_eq!(waiting.len(), 1);
}

#[test]
fn only_exclusive_time_steps_join_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let c = ctx(campaign(1), tmp.path());
    assert!(in_session(&c, ix(&c, "s/K-0/time:keygen")));
    assert!(!in_session(&c, ix(&c, "s/K-0/kat")));
    let mut shared = campaign(1);
    for s in &mut shared.steps {
        s.exclusive = false;
    }
    let c = ctx(shared, tmp.path());
    assert!(!in_session(&c, ix(&c, "s/K-0/time:keygen")));
}

/// Issue #39 item 4: `time cells="best"` — one implementation built by two compilers, the
/// time steps wait for both cells' counts, and only the cell with fewer counted
/// instructions for enc + dec is timed; a sibling's failed count orders but never blocks.
#[test]
fn only_the_cell_with_fewest_counted_instructions_is_timed() {
    use crate::model::{Op, StepSpec, COMPILER_VAR};
    use crate::record::{Status, StepData};
    let mut camp = campaign(1);
    let cell = |c: &str| {
        let mut i = camp.submissions[0].instances[0].clone();
        i.id = format!("K-0@{c}");
        i.vars.insert(COMPILER_VAR.into(), c.into());
        i
    };
    camp.submissions[0].instances = vec![cell("gcc"), cell("clang-16")];
    let mut count: StepSpec = camp.steps[3].clone();
    count.kind = StepKind::Count;
    count.exclusive = false;
    count.params.ops = vec![Op::Enc, Op::Dec];
    camp.steps.insert(3, count);
    let time = camp.steps.iter_mut().find(|s| s.kind == StepKind::Time);
    let time = time.unwrap();
    time.params.ops = vec![Op::Enc, Op::Dec];
    time.params.best_cell = true;
    let tmp = tempfile::tempdir().unwrap();
    let c = ctx(camp, tmp.path());
    let gcc_time = ix(&c, "s/K-0@gcc/time:enc");
    let clang_count = ix(&c, "s/K-0@clang-16/count:dec");
    assert!(c.plan.deps(gcc_time).any(|d| d == clang_count));
    assert!(!best_cell::blocks(&c, gcc_time, clang_count));
    assert!(best_cell::blocks(&c, gcc_time, ix(&c, "s/K-0@gcc/kat")));

    let counted = |id: &str, n: f64| {
        let data = serde_json::json!({
            "output": {"op": "enc", "iters": 3, "rng": "nist", "seed": ""},
            "valgrind": "valgrind-3.19.0", "tool_options": [], "object": "x.so",
            "flags": [], "excluded": [], "per_call": [],
            "instructions_mean": n, "instructions_min": 0, "instructions_max": 0,
            "hash_share": 0.0, "drng_share": 0.0, "family_shares": [], "calls_per_op": [],
            "profiles": [],
        });
        let data = StepData::Count(Box::new(serde_json::from_value(data).unwrap()));
        crate::run::test_ctx::write(&c, id, Status::Ok, Some(data));
    };
    // No count yet: both are timed (nothing to compare).
    assert_eq!(best_cell::not_best(&c, gcc_time), None);
    counted("s/K-0@gcc/count:enc", 100_000.0);
    counted("s/K-0@gcc/count:dec", 120_000.0);
    counted("s/K-0@clang-16/count:enc", 90_000.0);
    // clang's dec not counted: gcc has nothing to lose against, both are timed.
    assert_eq!(best_cell::not_best(&c, gcc_time), None);
    counted("s/K-0@clang-16/count:dec", 110_000.0);
    let why = best_cell::not_best(&c, gcc_time).expect("gcc is not the best cell");
    assert_eq!(
        why,
        "not the best cell (`cells=\"best\"`): `K-0@clang-16` counted fewer instructions \
         for enc + dec, 200000 against 220000 here"
    );
    assert_eq!(
        best_cell::not_best(&c, ix(&c, "s/K-0@clang-16/time:dec")),
        None
    );
}
