//! The guarantees of replay (with its canary and its edit), each against the in-memory broker
//! and store (`ops::fake`), read off its one ordered log of calls (the test front end's
//! questions are written there too, as "front: …"): rights first, a refused target refused
//! before any question, the read-again cost asked before a costly read, the typed count, the
//! audit's start (local, then broker) before the first move, the record's truth however the
//! run ends (a canary that stops it too), a dry run that moves and writes nothing, and an edit's
//! originals archived after the go-ahead and before the run. No broker.

use std::time::Duration;

use tokio::sync::watch;

use super::fake::{AUDIT_STREAM, Answer, FakeBroker, TestFront, summary};
use super::replay::{self, EditArchive, Ready, ReplayRequest};
use super::rights::ReadOnly;
use super::{Front, Questions, Stop};
use crate::broker::replay::StopReason;
use crate::broker::session::ReplaySpec;
use crate::domain::canary::{CanaryDecision, CanaryRule};
use crate::domain::confirm::typed_count;
use crate::domain::run::RunKind;

const DLQ: &str = "orders.dlq";

fn spec() -> ReplaySpec {
    ReplaySpec::all_of(DLQ, 100)
}

fn request(dry_run: bool) -> ReplayRequest {
    ReplayRequest {
        spec: spec(),
        dry_run,
        look_first: false,
        unaudited: None,
        filter: None,
        group: None,
        canary: None,
        edit: None,
    }
}

/// A broker with `n` dead letters in `DLQ`, planned to go back to their queue, and the audit
/// stream there.
fn with(n: u64) -> FakeBroker {
    let b = FakeBroker::replayable(DLQ, n);
    b.streams.lock().unwrap().insert(AUDIT_STREAM.to_string());
    b
}

fn position(calls: &[String], prefix: &str) -> usize {
    calls
        .iter()
        .position(|c| c.starts_with(prefix))
        .unwrap_or_else(|| panic!("no '{prefix}' in {calls:?}"))
}

fn called(b: &FakeBroker, prefix: &str) -> bool {
    b.calls().iter().any(|c| c.starts_with(prefix))
}

/// Nothing was archived, put on the record or run: nothing moved.
fn untouched(b: &FakeBroker) {
    for what in [
        "keep_copies",
        "memory start",
        "record start",
        "open_tap",
        "run",
    ] {
        assert!(!called(b, what), "{what}: {:?}", b.calls());
    }
    assert!(b.rows().is_empty(), "{:?}", b.rows());
    assert!(b.audit().is_empty(), "{:?}", b.audit());
}

async fn prepared<'b>(
    b: &'b FakeBroker,
    req: ReplayRequest,
    front: &mut dyn Front,
) -> Result<Ready<'b, FakeBroker>, Stop> {
    replay::prepare(b, req, front).await
}

/// Prepares, runs and finishes: the finish's notes.
async fn through(b: &FakeBroker, req: ReplayRequest) -> Vec<String> {
    let mut front = TestFront::logging(Answer::Yes, b);
    let mut ready = prepared(b, req, &mut front)
        .await
        .unwrap_or_else(|s| panic!("{s:?}"));
    let (_tx, cancel) = watch::channel(false);
    let result = ready.run(cancel, |_| {}).await;
    ready.finish(&result).await
}

fn outcome(b: &FakeBroker) -> String {
    b.rows()[0].outcome.clone().unwrap_or_default()
}

#[tokio::test]
async fn read_only_refuses_a_replay_before_anything_is_read_asked_created_or_recorded() {
    let mut b = with(3);
    b.read_only = Some(ReadOnly::Flag);
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("read-only")),
        "{:?}",
        r.err()
    );
    assert_eq!(b.calls(), ["read_only"]);
    assert!(front.asked.is_empty(), "{:?}", front.asked);
    untouched(&b);
    // An edit is refused before any editor opens, a dry run's too.
    let mut b = with(3);
    b.read_only = Some(ReadOnly::Flag);
    let mut front = TestFront::logging(Answer::Yes, &b);
    front.edit = Some(edit_first);
    let mut req = request(true);
    req.edit = Some(EditArchive::default());
    let r = prepared(&b, req, &mut front).await;
    assert!(matches!(&r, Err(Stop::Refused(_))), "{:?}", r.err());
    assert_eq!(b.calls(), ["read_only"]);
}

#[tokio::test]
async fn a_refused_target_is_refused_after_the_plan_and_before_any_question() {
    let mut b = with(3);
    b.runs.preview.refusals = vec!["target queue 'orders' does not exist".into()];
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().starts_with("nothing moved") && w.to_string().contains("does not exist")),
        "{:?}",
        r.err()
    );
    // The plan is shown (with its refusal); nothing is asked.
    assert_eq!(front.asked, ["plan"]);
    assert!(!called(&b, "publish_check"), "{:?}", b.calls());
    untouched(&b);
    // A target this user may not publish to: refused before the go-ahead.
    let mut b = with(3);
    b.runs.publish_refused = Some("no write permission on 'orders'".into());
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("no write permission") && w.to_string().contains("nothing moved")),
        "{:?}",
        r.err()
    );
    assert_eq!(front.asked, ["plan"]);
    untouched(&b);
}

#[tokio::test]
async fn a_read_that_spends_deliveries_again_is_asked_first_and_a_no_reads_nothing() {
    let mut b = with(3);
    b.dlq.read_costs = true;
    let mut front = TestFront::logging(Answer::No, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("nothing was read")),
        "{:?}",
        r.err()
    );
    assert_eq!(front.asked, [format!("read again {DLQ}")]);
    assert_eq!(
        b.calls().iter().filter(|c| c.starts_with("plan")).count(),
        1,
        "{:?}",
        b.calls()
    );
    untouched(&b);
    // Yes: read again, with the consent, and the replay goes on.
    let mut b = with(3);
    b.dlq.read_costs = true;
    let mut front = TestFront::logging(Answer::Yes, &b);
    assert!(prepared(&b, request(false), &mut front).await.is_ok());
    let calls = b.calls();
    assert!(
        position(&calls, "front: read again")
            < position(&calls, "plan orders.dlq look=false ReadAgain"),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_read_cost_nobody_can_be_asked_about_comes_back_as_the_question() {
    let mut b = with(3);
    b.dlq.read_costs = true;
    let mut front = TestFront::logging(Answer::Yes, &b);
    front.cannot_ask = true;
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::ReadCost { queue, text }) if queue == DLQ && text.contains("spends")),
        "{:?}",
        r.err()
    );
    untouched(&b);
}

#[tokio::test]
async fn more_than_100_asks_for_the_typed_count_and_a_no_moves_and_records_nothing() {
    for (n, typed) in [(101, true), (100, false), (3, false)] {
        assert_eq!(typed_count(RunKind::Replay, n), typed, "the rule at {n}");
        let b = with(n);
        let mut front = TestFront::logging(Answer::No, &b);
        let r = prepared(&b, request(false), &mut front).await;
        assert!(matches!(r, Err(Stop::Declined)), "{n}: {:?}", r.err());
        assert_eq!(
            front.asked,
            [
                "plan".to_string(),
                format!("go ahead: replay {n} typed={typed}")
            ]
        );
        // The plan carried the question first: the TUI's modal shows it from there.
        assert_eq!(front.plan_asks, [Questions { typed_count: typed }]);
        untouched(&b);
    }
}

#[tokio::test]
async fn the_audit_starts_locally_then_on_the_broker_before_the_first_move_and_finishes_completed()
{
    let b = with(3);
    let mut front = TestFront::logging(Answer::Yes, &b);
    let mut ready = prepared(&b, request(false), &mut front)
        .await
        .unwrap_or_else(|s| panic!("{s:?}"));
    assert_eq!(ready.count(), 3);
    assert!(!called(&b, "run"), "prepare moves nothing");
    let (_tx, cancel) = watch::channel(false);
    let result = ready.run(cancel, |_| {}).await;
    let notes = ready.finish(&result).await;
    assert!(notes.is_empty(), "{notes:?}");
    let calls = b.calls();
    let order: Vec<usize> = [
        "read_only",
        "memory open",
        "plan orders.dlq look=false",
        "front: plan",
        "publish_check",
        "front: go ahead: replay 3 typed=false",
        "memory start replay",
        "front: stream",
        "record start replay",
        "front: started on_broker=true",
        "run orders.dlq",
        "memory finish",
        "record finish replay completed",
    ]
    .iter()
    .map(|p| position(&calls, p))
    .collect();
    assert!(order.is_sorted(), "{order:?} in {calls:?}");
    let rows = b.rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].op, RunKind::Replay);
    assert_eq!(rows[0].outcome.as_deref(), Some("completed"));
    assert_eq!((rows[0].moved, rows[0].moved_ids), (3, 3));
    assert_eq!(
        b.audit(),
        [
            format!("replay start {}", rows[0].run_id),
            "replay outcome completed moved 3 ids 3".to_string(),
        ]
    );
}

#[tokio::test]
async fn a_cancelled_run_is_recorded_cancelled_with_what_it_moved() {
    let mut b = with(5);
    let mut sum = summary(StopReason::Cancelled, 2);
    sum.progress.remaining = 3;
    b.dlq.ending = Some(sum);
    let notes = through(&b, request(false)).await;
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(outcome(&b), "cancelled");
    assert_eq!((b.rows()[0].moved, b.rows()[0].moved_ids), (2, 2));
    assert_eq!(
        b.audit().last().map(String::as_str),
        Some("replay outcome cancelled moved 2 ids 2")
    );
}

#[tokio::test]
async fn a_failed_run_is_recorded_failed_whether_it_stopped_or_broke() {
    let mut b = with(3);
    b.dlq.ending = Some(summary(StopReason::ConnectionLost("node down".into()), 1));
    through(&b, request(false)).await;
    let o = outcome(&b);
    assert!(o.starts_with("failed") && o.contains("node down"), "{o}");
    assert_eq!(b.rows()[0].moved, 1);
    assert!(
        b.audit()
            .last()
            .is_some_and(|a| a.contains("outcome failed")),
        "{:?}",
        b.audit()
    );

    let mut b = with(3);
    b.dlq.run_error = Some("the channel closed".into());
    through(&b, request(false)).await;
    let o = outcome(&b);
    assert!(
        o.starts_with("failed") && o.contains("the channel closed"),
        "{o}"
    );
    assert_eq!(b.rows()[0].moved, 0);
}

fn with_canary(size: u64) -> ReplayRequest {
    let mut req = request(false);
    req.canary = Some(CanaryRule {
        size,
        wait: Duration::from_secs(30),
        tolerance: 0,
    });
    req
}

#[tokio::test]
async fn a_canary_that_stops_the_run_is_recorded_as_such_and_the_rest_stays() {
    for decision in [CanaryDecision::CameBack, CanaryDecision::NotConsumed] {
        let mut b = with(5);
        b.runs.canary = Some(decision);
        through(&b, with_canary(2)).await;
        let calls = b.calls();
        // The watch queue is set up after the record's start and before the first move; the
        // rest never runs.
        let order: Vec<usize> = [
            "plan orders.dlq look=true",
            "canary_plan 2",
            "record start replay",
            "open_tap",
            "run orders.dlq limit=Some(2)",
            "canary_wait moved=2 tap=true",
            "close_tap",
            "left_in orders.dlq",
            "memory finish",
        ]
        .iter()
        .map(|p| position(&calls, p))
        .collect();
        assert!(order.is_sorted(), "{decision:?}: {order:?} in {calls:?}");
        let runs = calls.iter().filter(|c| c.starts_with("run ")).count();
        assert_eq!(runs, 1, "{calls:?}");
        let o = outcome(&b);
        assert!(o.starts_with("partial") && o.contains("canary"), "{o}");
        assert_eq!(b.rows()[0].moved, 2);
        assert!(
            b.audit().last().is_some_and(|a| a.contains("moved 2 ")),
            "{:?}",
            b.audit()
        );
    }
}

#[tokio::test]
async fn a_canary_that_goes_ahead_runs_the_rest_in_the_same_run() {
    let b = with(5);
    through(&b, with_canary(2)).await;
    let calls = b.calls();
    let first = position(&calls, "run orders.dlq limit=Some(2)");
    let rest = position(&calls, "run orders.dlq limit=Some(3)");
    assert!(first < position(&calls, "canary_wait") && position(&calls, "canary_wait") < rest);
    assert_eq!(outcome(&b), "completed");
    assert_eq!(b.rows()[0].moved, 5);
    assert_eq!(b.rows().len(), 1, "one run, one record");
}

#[tokio::test]
async fn a_canary_without_its_watch_queue_estimates_and_says_so() {
    let mut b = with(5);
    b.runs.tap_refused = Some("no configure permission".into());
    let mut front = TestFront::logging(Answer::Yes, &b);
    let mut ready = prepared(&b, with_canary(2), &mut front)
        .await
        .unwrap_or_else(|s| panic!("{s:?}"));
    assert!(
        front
            .said
            .iter()
            .any(|s| s.contains("no configure permission") && s.contains("estimates")),
        "{:?}",
        front.said
    );
    let (_tx, cancel) = watch::channel(false);
    let result = ready.run(cancel, |_| {}).await;
    ready.finish(&result).await;
    assert!(
        called(&b, "canary_wait moved=2 tap=false"),
        "{:?}",
        b.calls()
    );
}

#[tokio::test]
async fn a_dry_run_moves_nothing_and_writes_nothing() {
    // Read-only and a broken store: a dry run still shows its plan, and asks, writes and
    // records nothing.
    let mut b = with(3);
    b.read_only = Some(ReadOnly::Flag);
    b.dlq.store_broken = Some("disk full".into());
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(true), &mut front).await;
    assert!(matches!(r, Err(Stop::DryRun)), "{:?}", r.err());
    assert!(!called(&b, "read_only"), "a dry run moves nothing");
    assert!(called(&b, "plan orders.dlq look=true"), "it looks");
    assert_eq!(front.asked, ["plan"]);
    assert!(!called(&b, "publish_check"), "{:?}", b.calls());
    untouched(&b);
}

#[tokio::test]
async fn a_store_that_cannot_open_refuses_a_real_run_before_anything_is_read() {
    let mut b = with(3);
    b.dlq.store_broken = Some("the store is locked".into());
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("the store is locked") && w.to_string().contains("nothing moved")),
        "{:?}",
        r.err()
    );
    assert_eq!(b.calls(), ["read_only", "memory open"]);
    untouched(&b);
}

#[tokio::test]
async fn a_run_kept_off_the_record_moves_without_a_record() {
    let b = with(3);
    let mut req = request(false);
    req.unaudited = Some("--no-audit".into());
    let notes = through(&b, req).await;
    assert!(notes.is_empty(), "{notes:?}");
    assert!(called(&b, "run orders.dlq"));
    assert!(!called(&b, "memory start") && !called(&b, "record "));
    assert!(b.rows().is_empty() && b.audit().is_empty());
}

/// The operator's edit: the first message's body becomes `{"fixed":true}`.
fn edit_first(document: &str) -> Option<String> {
    let at = document.find("--- body:")?;
    let end = at + document[at..].find('\n')? + 1;
    Some(format!(
        "{}{{\"fixed\":true}}\n{}",
        &document[..end],
        &document[end..]
    ))
}

fn edit_request() -> ReplayRequest {
    let mut req = request(false);
    req.edit = Some(EditArchive {
        local: true,
        create: false,
    });
    req
}

#[tokio::test]
async fn an_edit_archives_the_originals_after_the_go_ahead_and_before_the_run() {
    let b = with(3);
    let mut front = TestFront::logging(Answer::Yes, &b);
    front.edit = Some(edit_first);
    let mut ready = prepared(&b, edit_request(), &mut front)
        .await
        .unwrap_or_else(|s| panic!("{s:?}"));
    let (_tx, cancel) = watch::channel(false);
    let result = ready.run(cancel, |_| {}).await;
    ready.finish(&result).await;
    let calls = b.calls();
    let order: Vec<usize> = [
        "read_only",
        "select orders.dlq",
        "front: edit problem=false",
        "retention local file",
        "plan orders.dlq",
        "front: go ahead",
        "keep_copies local file",
        "memory start replay",
        "record start replay",
        "run orders.dlq",
    ]
    .iter()
    .map(|p| position(&calls, p))
    .collect();
    assert!(order.is_sorted(), "{order:?} in {calls:?}");
    // Only the edited message's original is kept.
    assert!(
        called(&b, "keep_copies local file /fake/archive.jsonl 1"),
        "{calls:?}"
    );
}

#[tokio::test]
async fn an_edit_declined_or_not_archived_moves_and_archives_nothing() {
    let b = with(3);
    let mut front = TestFront::logging(Answer::No, &b);
    front.edit = Some(edit_first);
    let r = prepared(&b, edit_request(), &mut front).await;
    assert!(matches!(r, Err(Stop::Declined)), "{:?}", r.err());
    untouched(&b);

    let mut b = with(3);
    b.runs.keep_refused = Some("the archive file is read-only".into());
    let mut front = TestFront::logging(Answer::Yes, &b);
    front.edit = Some(edit_first);
    let r = prepared(&b, edit_request(), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("originals could not be archived") && w.to_string().contains("nothing moved")),
        "{:?}",
        r.err()
    );
    assert!(called(&b, "keep_copies"));
    for what in ["memory start", "record start", "run"] {
        assert!(!called(&b, what), "{what}: {:?}", b.calls());
    }

    // An unchanged document: declined before anything else is read or asked.
    let b = with(3);
    let mut front = TestFront::logging(Answer::Yes, &b);
    front.edit = Some(|d: &str| Some(d.to_string()));
    let r = prepared(&b, edit_request(), &mut front).await;
    assert!(matches!(r, Err(Stop::Declined)), "{:?}", r.err());
    assert!(!called(&b, "plan"), "{:?}", b.calls());
    untouched(&b);
}
