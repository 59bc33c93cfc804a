//! Outputs checked while timed: what a member's timed calls return is verified against
//! another process, so a KEM that does less when timed (it caches outputs for repeated
//! inputs, or idles when called back to back) fails its time step with "outputs differ
//! when timed" instead of publishing a figure 100× too fast.
//!
//! Every member has one more runner, its reference: the same `kem-runner serve` command
//! line as its first process (with the same `--setup-seed`, which all the member's
//! processes share, so all make the same key pair), in the same sandbox, with its own
//! scratch folder. Each of the member's batches is made from a fresh seed the engine draws
//! (`batch SEED`: the runner reseeds its CTR_DRBG outside the timed region), so inputs
//! differ call to call and no cache hits; the runner folds the batch's outputs inside the
//! timed loop and answers the fold (`kem_native::checked`).
//!
//! - **keygen, enc**: after the rounds, a few batches of the member's processes chosen at
//!   random then ([`REPLAYS`], at most [`REPLAY_CALLS`] calls and [`REPLAY_TIME`] in all,
//!   at least one batch) are replayed by the reference from their seed (`replay SEED N`:
//!   calls spaced apart, each output checked by the other operations), whose fold must
//!   equal the batch's; the reference also fails a replay in which an output repeats an
//!   earlier one or does not decapsulate to its shared secret.
//! - **dec**: once per round, before the first of the member's batches in it, the reference
//!   makes their ciphertexts (`feed SEED N FILE`: its enc from the seed, each decapsulated
//!   there too), and before each batch the engine copies them from the reference's scratch
//!   folder into the timed process's ([`FED_FILE`]); the batch decapsulates one per call,
//!   and its fold must equal the fold of the shared secrets the reference's enc made:
//!   dec(ct) = ss on every call of every batch, computed in a process that never ran the
//!   enc that made them. The member's processes take the same calls per batch (the first
//!   calibrates, the others are given its count), so one feed serves them all: a process
//!   still sees each ciphertext once, and the processes, each in its own sandbox, cannot
//!   tell each other what they decapsulated. Making ciphertexts costs the reference an enc
//!   and a dec per call, twice a dec batch; fed once per process, they took more of the
//!   bench core than the batches themselves.
//!
//! The limit: the reference runs the same untrusted code. A KEM that computes wrong outputs
//! the same way in both processes is not caught here (the KAT is what checks the outputs
//! are right); what is caught is a timed process that did not compute, for these inputs,
//! what another process computes for them with calls spaced apart.

use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::super::exec::{Log, NoLine, Served};
use super::super::sandbox::disk::{DiskGuard, DISK};
use super::super::sandbox::Jail;
use super::super::stop::Stop;
use super::live::{Feed, Live, MemberKey};
use super::Settings;
use kem_native::serve::{BatchReply, Checked, Ready, DONE, FED, KEYED, READY, REPLAYED};

/// Batches of keygen or enc the references replay per member (over its processes), at
/// most...
pub const REPLAYS: usize = 8;
/// ...and the calls they may hold in all (at least one batch is replayed however long):
/// each replayed call is spaced 20 µs from the next and runs the other operations too.
pub const REPLAY_CALLS: u64 = 50_000;
/// ...and the time they may take (at least one batch is replayed however long): each call
/// runs the other operations between, so where those cost far more than the one replayed
/// (Classic McEliece's dec is 500x its enc: 10 s to replay one 20 ms batch of enc) one
/// batch is all a member's bench time affords.
pub const REPLAY_TIME: Duration = Duration::from_secs(1);
/// The file a dec batch's ciphertexts pass through, in each runner's scratch folder.
pub const FED_FILE: &str = "fed.ct";

/// Where a member's reference runner works (its timed processes read their dec batches'
/// ciphertexts in their own working folders).
pub struct Reference {
    pub scratch: PathBuf,
    pub jail: Jail,
}

/// 48 fresh random bytes (a DRBG seed).
fn draw() -> Result<[u8; 48], Stop> {
    let mut b = [0u8; 48];
    kem_native::drbg::OsRng
        .try_fill(&mut b)
        .map_err(|e| Stop::failed(format!("cannot draw a seed for the batch: {e}")))?;
    Ok(b)
}

/// A fresh setup seed for a member's runners and reference (a fixed one should the system
/// have no randomness to give: the seed is on every command line, it need only be shared).
pub(super) fn setup_seed() -> String {
    hex::encode(draw().unwrap_or([0x5e; 48]))
}

/// A fold as the runner sends it: exactly 16 hex digits.
fn fold_of(s: Option<&str>) -> Option<u64> {
    let s = s?;
    (s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(s, 16).ok())
        .flatten()
}

/// Start the reference of `l` (when it has one) with the member's `args` in its own jail
/// and wait for its `ready`; the member fails when it does not come.
pub(super) fn start(l: &mut Live, s: &Settings, args: &[String], shown: &[String]) {
    let Some(r) = l.m.reference.as_mut() else {
        return;
    };
    // What the member's runner reads besides its own jail's (layouts, the yardstick).
    for p in &l.m.jail.read {
        if !r.jail.read.contains(p) {
            r.jail.read.push(p.clone());
        }
    }
    r.jail.cpu = l.m.jail.cpu;
    let guard = DiskGuard::new(&r.jail.write, DISK);
    match super::served_job(s, args, &r.jail, shown, &mut l.m.log) {
        Ok(mut served) => {
            served.watch(guard);
            let got = served.next_line(&[READY, DONE], Instant::now() + s.timeout, &mut l.m.log);
            l.out.cpu = super::super::outside::Watch::of(served.id());
            l.out.served = Some(served);
            match got {
                Ok((w, _)) if w == READY => {}
                other => reference_failed(l, other, s),
            }
        }
        Err(e) => l.fail(Stop::failed(format!(
            "cannot run kem-runner as the reference: {e}"
        ))),
    }
}

/// The member fails because its reference did not answer as it should.
fn reference_failed(l: &mut Live, got: Result<(String, String), NoLine>, s: &Settings) {
    l.fail_from(got, s.timeout);
    if let Some(f) = l.failed.as_mut() {
        f.reason = format!(
            "its reference runner (for checking the outputs): {}",
            f.reason
        );
    }
}

/// The calls of each batch, from the member's `ready` line.
pub(super) fn ready(l: &mut Live, ready: Option<&Ready>) {
    l.out.calls = ready.map_or(0, |r| r.batch_calls);
}

/// The line that asks `l`'s runner for its next batch: `batch` alone unchecked; else
/// `batch SEED` with a fresh seed, for dec `batch SEED FILE` with the round's seed, its
/// ciphertexts copied in by [`fed`]. `Err` fails the member.
pub(super) fn batch_line(l: &mut Live) -> Result<String, Stop> {
    if !l.out.checked {
        return Ok("batch".into());
    }
    // Between the member's batches its reference waits: any CPU it used shows at the next
    // batch of its first process ([`Live::fail_if_busy_outside`]).
    l.out.cpu.after_batch();
    l.out.keys.push(l.out.key.clone());
    let line = if l.m.op == "dec" {
        let feed = l.out.fed.ok_or_else(|| {
            Stop::failed(format!(
                "dec batch {}: no ciphertexts were fed",
                l.values.len() + 1
            ))
        })?;
        l.out.due = Some(feed.due);
        l.out.seeds.push(feed.seed);
        format!("batch {} {FED_FILE}", hex::encode(feed.seed))
    } else {
        let seed = draw()?;
        l.out.seeds.push(seed);
        format!("batch {}", hex::encode(seed))
    };
    Ok(line)
}

/// Before process `i`'s dec batch in `round`: the ciphertexts of the member's batches in
/// this round (its reference, in its `first` process's live, feeds them at the first of
/// them), copied into the process's working folder. Nothing for other operations or an
/// unchecked member. `Err` fails the process.
pub(super) fn fed(
    live: &mut [Live],
    (first, i): (usize, usize),
    round: usize,
    s: &Settings,
) -> Result<(), Stop> {
    if live[i].m.op != "dec" || !live[i].out.checked {
        return Ok(());
    }
    let n = live[i].values.len() + 1;
    let feed = match live[first].out.fed.filter(|f| f.round == round) {
        Some(f) => f,
        None => {
            let f = feed(&mut live[first], round, s).map_err(|why| why.stop("dec", n))?;
            live[first].out.fed = Some(f);
            f
        }
    };
    let from = live[first]
        .m
        .reference
        .as_ref()
        .map(|r| r.scratch.join(FED_FILE));
    let from = from.ok_or_else(|| Stop::failed(format!("dec batch {n}: no reference")))?;
    let cap = kem_native::checked::MAX_FED_BYTES;
    let l = &mut live[i];
    crate::safe_fs::keep(&from, &l.m.jail.cwd.join(FED_FILE), cap)
        .map_err(|e| Stop::failed(format!("dec batch {n}: the reference's ciphertexts: {e}")))?;
    l.out.fed = Some(feed);
    Ok(())
}

/// The reference of `l` (a member's first process) makes one round's dec ciphertexts:
/// `l`'s calls per batch of them, from a fresh seed, under the member's key pair. What it
/// used before counts as outside its commands, what it uses feeding as inside.
fn feed(l: &mut Live, round: usize, s: &Settings) -> Result<Feed, NoFold> {
    if let Some(why) = l.out.cpu.before_batch() {
        return Err(NoFold::Silent(format!(
            "was busy between its commands: {why}"
        )));
    }
    let seed = draw().map_err(|stop| NoFold::Silent(stop.reason))?;
    let sent = Instant::now();
    let key = l.out.member.seed.clone();
    let keyed = reference_key(l, &key, s);
    let line = format!("feed {} {} {FED_FILE}", hex::encode(seed), l.out.calls);
    let due = keyed.and_then(|()| ask(l, &line, FED, s));
    l.out.cpu.add_wall(sent.elapsed());
    l.out.cpu.after_batch();
    Ok(Feed {
        round,
        seed,
        due: due?,
    })
}

/// A key pair is renewed every round unless making one takes more than a batch divided by
/// this; then every so many rounds that it takes no more on average.
const KEY_SHARE: u32 = 20;

/// Before process `i`'s batch of enc or dec in `round` (checked members only): the member's
/// key pair, drawn anew at the first of its processes timed in a round once
/// [`renewed_every`] rounds have passed, made in the process by `key SEED` unless it has it
/// already; its fold must be the member's. The key command counts as the process's own CPU
/// (not outside its batches). `Err` fails the process.
pub(super) fn keyed(
    live: &mut [Live],
    (first, i): (usize, usize),
    round: usize,
    s: &Settings,
) -> Result<(), Stop> {
    if live[i].m.op == "keygen" || !live[i].out.checked {
        return Ok(());
    }
    let n = live[i].values.len() + 1;
    let m = &mut live[first].out.member;
    let every = renewed_every(m.key_ns, s.batch);
    if m.round.is_none_or(|r| r != round && round - r >= every) {
        *m = MemberKey {
            seed: hex::encode(draw()?),
            round: Some(round),
            fold: None,
            key_ns: m.key_ns,
        };
    }
    let (seed, want) = (m.seed.clone(), m.fold);
    let l = &mut live[i];
    if l.out.key == seed {
        return Ok(());
    }
    let sent = Instant::now();
    let line = format!("key {seed}");
    let made = ask_on(l.served.as_mut(), &mut l.m.log, &line, KEYED, s);
    let wall = sent.elapsed();
    l.cpu.add_wall(wall);
    l.cpu.after_batch();
    let op = l.m.op.clone();
    let fold = made.map_err(|why| match why {
        NoFold::Said(why) => differ(&op, n, &format!("its key pair: {why}")),
        NoFold::Silent(why) => Stop::failed(crate::text::clean(&format!(
            "implausible timing record: {op} batch {n}: its runner {why}"
        ))),
    })?;
    if let Some(why) = l.cpu.before_batch() {
        return Err(Stop::failed(why));
    }
    if let Some(w) = want.filter(|&w| w != fold) {
        let why = format!("its key pair folds to {fold:016x}, the member's to {w:016x}");
        return Err(differ(&op, n, &why));
    }
    l.out.key = seed;
    let m = &mut live[first].out.member;
    m.fold = Some(fold);
    m.key_ns.get_or_insert(wall.as_nanos() as u64);
    Ok(())
}

/// Every how many rounds a member's key pair is renewed, `key_ns` being how long its first
/// took to make (`None`: not made yet): every round, unless making one takes more than a
/// `batch` divided by [`KEY_SHARE`].
fn renewed_every(key_ns: Option<u64>, batch: Duration) -> usize {
    let per = (batch / KEY_SHARE).max(Duration::from_micros(1)).as_nanos() as u64;
    key_ns.map_or(1, |ns| (ns / per) as usize + 1)
}

/// The reference of `l` (a member's first process) makes the key pair of `seed` unless it
/// holds it; for the member's current key its fold must be the timed runners'.
fn reference_key(l: &mut Live, seed: &str, s: &Settings) -> Result<(), NoFold> {
    if l.out.reference_key == seed {
        return Ok(());
    }
    let fold = ask(l, &format!("key {seed}"), KEYED, s)?;
    let m = &l.out.member;
    if let Some(w) = m.fold.filter(|&w| m.seed == seed && w != fold) {
        return Err(NoFold::Said(format!(
            "its key pair folds to {fold:016x}, the timed runners' to {w:016x}"
        )));
    }
    l.out.reference_key = seed.to_string();
    Ok(())
}

/// The member's failure for batch `n`'s outputs, `why` the detail.
fn differ(op: &str, n: usize, why: &str) -> Stop {
    Stop::failed(crate::text::clean(&format!(
        "outputs differ when timed: {op} batch {n} ({why})"
    )))
}

/// Why a reference gave no fold.
enum NoFold {
    /// It said why: the outputs it made do not hold up (a repeated output, a round trip
    /// that fails).
    Said(String),
    /// It did not answer as kem-runner does (it ended, or its answer is not one).
    Silent(String),
}

impl NoFold {
    /// The member's failure for batch `n`.
    fn stop(self, op: &str, n: usize) -> Stop {
        match self {
            NoFold::Said(why) => differ(op, n, &format!("the reference: {why}")),
            NoFold::Silent(why) => Stop::failed(crate::text::clean(&format!(
                "implausible timing record: {op} batch {n}: its reference runner {why}"
            ))),
        }
    }
}

/// Send `line` to the reference and read its answer `word`: the fold, or why there is
/// none.
fn ask(l: &mut Live, line: &str, word: &str, s: &Settings) -> Result<u64, NoFold> {
    ask_on(l.out.served.as_mut(), &mut l.m.log, line, word, s)
}

/// [`ask`] of `served`, logging in `log`: a reference, or (for `key`) a timed runner.
fn ask_on(
    served: Option<&mut Served>,
    log: &mut Log,
    line: &str,
    word: &str,
    s: &Settings,
) -> Result<u64, NoFold> {
    let verb = line.split(' ').next().unwrap_or_default();
    let silent = |why: String| NoFold::Silent(format!("did not answer `{verb}` ({why})"));
    let served = served.ok_or_else(|| silent("it is gone".into()))?;
    let got = match served.send(line) {
        Ok(()) => served.next_line(&[word, DONE], Instant::now() + s.timeout, log),
        Err(_) => Err(NoLine::Ended(served.wait(log))),
    };
    let json = match got {
        Ok((w, json)) if w == word => json,
        Ok(_) => return Err(silent("it stopped".into())),
        Err(NoLine::Killed(e)) | Err(NoLine::Ended(e)) => return Err(silent(e.describe())),
    };
    let c: Checked = serde_json::from_str(&json)
        .map_err(|e| silent(format!("its answer is unreadable: {e}")))?;
    match (fold_of(c.fold.as_deref()), c.failure) {
        (_, Some(why)) => Err(NoFold::Said(why)),
        (Some(f), None) => Ok(f),
        (None, None) => Err(silent("its answer has no fold".into())),
    }
}

/// Keep batch `b`'s fold (the batch number is the member's next value): dec's is checked
/// at once against what the reference's enc made. `Err` fails the member.
pub(super) fn after_batch(l: &mut Live, b: &BatchReply) -> Result<(), Stop> {
    if !l.out.checked {
        return Ok(());
    }
    let n = l.values.len() + 1;
    let fold = fold_of(b.fold.as_deref()).ok_or_else(|| {
        Stop::failed(format!(
            "implausible timing record: {} batch {n} came without the fold of its outputs",
            l.m.op
        ))
    })?;
    l.out.folds.push(fold);
    match l.out.due.take() {
        Some(due) if due != fold => Err(differ(
            &l.m.op,
            n,
            &format!(
                "its shared secrets fold to {fold:016x}, those the reference's enc made for \
                 its ciphertexts to {due:016x}: dec(ct) is not ss"
            ),
        )),
        _ => Ok(()),
    }
}

/// After the rounds: every alive member's keygen or enc batches chosen now at random
/// replayed by its reference and compared; then every reference ends.
pub(super) fn replay_all(live: &mut [Live], spans: &[Range<usize>], s: &Settings) {
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(super::fresh_seed());
    for span in spans {
        let lives = &mut live[span.clone()];
        let checked = lives.iter().all(|l| l.alive() && l.out.checked);
        if checked && lives[0].m.op != "dec" {
            if let Err((p, stop)) = replay(lives, s, &mut rng) {
                lives[p].fail(stop);
            }
        }
        for l in lives {
            l.end_reference("outputs checked");
        }
    }
}

/// Replay a few of the batches of a member's processes `lives` ([`REPLAYS`],
/// [`REPLAY_CALLS`]) on its reference (the first process's). `Err` names the process that
/// fails.
fn replay(
    lives: &mut [Live],
    s: &Settings,
    rng: &mut rand::rngs::ChaCha8Rng,
) -> Result<(), (usize, Stop)> {
    let op = lives[0].m.op.clone();
    if let Some(why) = lives[0].out.cpu.before_batch() {
        let why = format!("{op}: its reference runner: {why}");
        return Err((0, Stop::failed(why)));
    }
    let mut order: Vec<(usize, usize)> = lives
        .iter()
        .enumerate()
        .flat_map(|(p, l)| (0..l.out.folds.len().min(l.batches.len())).map(move |i| (p, i)))
        .collect();
    order.shuffle(rng);
    let mut calls = 0u64;
    let began = Instant::now();
    for (k, (p, i)) in order.into_iter().enumerate() {
        let n = lives[p].batches[i].0;
        let spent = began.elapsed() >= REPLAY_TIME;
        if k == REPLAYS || (k > 0 && (spent || calls + n > REPLAY_CALLS)) {
            break;
        }
        calls += n;
        let key = lives[p].out.keys[i].clone();
        let line = format!("replay {} {n}", hex::encode(lives[p].out.seeds[i]));
        let theirs = reference_key(&mut lives[0], &key, s)
            .and_then(|()| ask(&mut lives[0], &line, REPLAYED, s));
        let theirs = theirs.map_err(|why| (p, why.stop(&op, i + 1)))?;
        let mine = lives[p].out.folds[i];
        if theirs != mine {
            let why = format!(
                "its outputs fold to {mine:016x}, the same {n} calls replayed from its seed \
                 in another process, spaced apart, to {theirs:016x}"
            );
            return Err((p, differ(&op, i + 1, &why)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fold_is_exactly_sixteen_hex_digits() {
        assert_eq!(fold_of(Some("00000000000000ab")), Some(0xab));
        assert_eq!(fold_of(Some("FFFFFFFFFFFFFFFF")), Some(u64::MAX));
        assert_eq!(fold_of(Some("ab")), None);
        assert_eq!(fold_of(Some("+000000000000000")), None);
        assert_eq!(fold_of(Some("00000000000000ag")), None);
        assert_eq!(fold_of(None), None);
    }
}
