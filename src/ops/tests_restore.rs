//! The guarantees of restore, each against the in-memory broker and store (`ops::fake`), read
//! off its one ordered log of calls (the front end's questions too, as "front: …"): rights
//! first, a queue that is not the archive and a target without room refused before any
//! question, the typed count, the audit's start (local, then broker) before the first publish,
//! the record's truth however the publishing ends, a dry run that writes nothing. No broker.

use tokio::sync::watch;

use super::fake::{AUDIT_STREAM, Answer, FakeBroker, TestFront};
use super::fake_runs::Restored;
use super::restore::{self, ArchiveOf, Ready, Replaying, RestoreRequest};
use super::rights::ReadOnly;
use super::{Front, Questions, Stop};
use crate::domain::confirm::typed_count;
use crate::domain::run::RunKind;
use crate::domain::selection::Selection;

fn request(dry_run: bool) -> RestoreRequest {
    RestoreRequest {
        archive: ArchiveOf::Configured { local: true },
        selection: Selection::All,
        from: None,
        limit: None,
        window: None,
        again: false,
        trust_unsigned: false,
        replay: None,
        dry_run,
        filter: None,
        group: None,
    }
}

/// An archive of `n` messages from `orders.dlq`, and the audit stream.
fn with(n: u64) -> FakeBroker {
    let b = FakeBroker::archived(n);
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

/// Nothing was put on the record or published: nothing restored.
fn untouched(b: &FakeBroker) {
    for what in ["memory start", "record start", "publish "] {
        assert!(!called(b, what), "{what}: {:?}", b.calls());
    }
    assert!(b.rows().is_empty(), "{:?}", b.rows());
    assert!(b.audit().is_empty(), "{:?}", b.audit());
}

async fn prepared<'b>(
    b: &'b FakeBroker,
    req: RestoreRequest,
    front: &mut dyn Front,
) -> Result<Ready<'b, FakeBroker>, Stop> {
    restore::prepare(b, req, front).await
}

/// Prepares, publishes and finishes: the finish's notes.
async fn through(b: &FakeBroker, req: RestoreRequest) -> Vec<String> {
    let mut front = TestFront::logging(Answer::Yes, b);
    let mut ready = prepared(b, req, &mut front)
        .await
        .unwrap_or_else(|s| panic!("{s:?}"));
    let (_tx, cancel) = watch::channel(false);
    let out = ready.run(&cancel, |_, _, _| {}).await;
    ready.finish(&out).await
}

fn outcome(b: &FakeBroker) -> String {
    b.rows()[0].outcome.clone().unwrap_or_default()
}

#[tokio::test]
async fn read_only_refuses_a_restore_before_anything_is_read_asked_or_recorded() {
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
}

/// A restore looks through the whole archive for its plan: the front end hears how far the read
/// is after each page, before the plan, so a long read is not a silence.
#[tokio::test]
async fn the_archive_read_is_told_page_by_page_before_the_plan() {
    let b = with(2_500);
    let mut front = TestFront::logging(Answer::No, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(matches!(r, Err(Stop::Declined)), "{:?}", r.err());
    let reads: Vec<u64> = front.reads.iter().map(|(_, n, _)| *n).collect();
    assert_eq!(reads, [1_000, 2_000, 2_500]);
    assert!(
        front
            .reads
            .iter()
            .all(|(what, _, planned)| !planned && !what.is_empty()),
        "{:?}",
        front.reads
    );
    untouched(&b);
}

#[tokio::test]
async fn a_queue_that_is_not_the_archive_is_refused_before_anything_is_read() {
    let b = with(3);
    let mut front = TestFront::logging(Answer::Yes, &b);
    let mut req = request(false);
    req.archive = ArchiveOf::Named("orders.dlq".into());
    let r = prepared(&b, req, &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("is not the archive") && w.to_string().contains("nothing restored")),
        "{:?}",
        r.err()
    );
    assert_eq!(b.calls(), ["read_only"]);
    assert!(front.asked.is_empty(), "{:?}", front.asked);
    untouched(&b);
}

#[tokio::test]
async fn a_target_without_room_is_refused_after_the_plan_and_before_any_question() {
    let mut b = with(3);
    b.runs.no_room = Some("'orders.dlq' is full (max-length 10, overflow drop-head)".into());
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().starts_with("nothing restored") && w.to_string().contains("is full")),
        "{:?}",
        r.err()
    );
    assert_eq!(front.asked, ["plan"]);
    assert!(called(&b, "room orders.dlq 3"), "{:?}", b.calls());
    assert!(!called(&b, "publish_check"), "{:?}", b.calls());
    untouched(&b);
}

#[tokio::test]
async fn more_than_100_asks_for_the_typed_count_and_a_no_restores_and_records_nothing() {
    for (n, typed) in [(101, true), (100, false)] {
        assert_eq!(typed_count(RunKind::Restore, n), typed, "the rule at {n}");
        let b = with(n);
        let mut front = TestFront::logging(Answer::No, &b);
        let r = prepared(&b, request(false), &mut front).await;
        assert!(matches!(r, Err(Stop::Declined)), "{n}: {:?}", r.err());
        assert_eq!(
            front.asked,
            [
                "plan".to_string(),
                format!("go ahead: restore {n} typed={typed}")
            ]
        );
        assert_eq!(front.plan_asks, [Questions { typed_count: typed }]);
        untouched(&b);
    }
    // Through the replay's plan: asked as a replay, typed by the restore's rule.
    let b = with(101);
    let mut front = TestFront::logging(Answer::No, &b);
    let mut req = request(false);
    req.replay = Some(Replaying::default());
    let r = prepared(&b, req, &mut front).await;
    assert!(matches!(r, Err(Stop::Declined)), "{:?}", r.err());
    assert!(called(&b, "plan_replay 101"), "{:?}", b.calls());
    assert_eq!(front.asked[1], "go ahead: replay 101 typed=true");
    assert_eq!(front.plan_asks, [Questions { typed_count: true }]);
    untouched(&b);
}

#[tokio::test]
async fn the_audit_starts_locally_then_on_the_broker_before_the_first_publish_and_finishes() {
    let b = with(3);
    let notes = through(&b, request(false)).await;
    assert!(notes.is_empty(), "{notes:?}");
    let calls = b.calls();
    let order: Vec<usize> = [
        "read_only",
        "memory open",
        "read_archive fake:local file",
        "plan_back 3",
        "room orders.dlq 3",
        "front: plan",
        "publish_check 1",
        "front: go ahead: restore 3 typed=false",
        "memory start restore",
        "front: stream",
        "record start restore",
        "front: started on_broker=true",
        "publish 3",
        "memory restored 3 fake:local file",
        "memory finish",
        "record finish restore completed",
    ]
    .iter()
    .map(|p| position(&calls, p))
    .collect();
    assert!(order.is_sorted(), "{order:?} in {calls:?}");
    let rows = b.rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].op, RunKind::Restore);
    assert_eq!((outcome(&b).as_str(), rows[0].moved), ("completed", 3));
    assert_eq!(
        b.audit(),
        [
            format!("restore start {}", rows[0].run_id),
            "restore outcome completed moved 3 ids 0".to_string(),
        ]
    );
    // The restored messages are remembered under the run's own record.
    assert!(
        called(
            &b,
            &format!(
                "memory restored 3 fake:local file /fake/archive.jsonl #Some({})",
                rows[0].id
            )
        ),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_cancelled_restore_is_recorded_cancelled_with_what_it_restored() {
    let mut b = with(5);
    b.runs.restored = Some(Restored::Cancelled(2));
    through(&b, request(false)).await;
    assert_eq!(outcome(&b), "cancelled: 2 restored, 3 not sent");
    assert_eq!(b.rows()[0].moved, 2);
    assert_eq!(
        b.audit().last().map(String::as_str),
        Some("restore outcome cancelled: 2 restored, 3 not sent moved 2 ids 0")
    );
}

#[tokio::test]
async fn a_failed_restore_is_recorded_failed() {
    let mut b = with(3);
    b.runs.restored = Some(Restored::Failed("cannot open a channel".into()));
    through(&b, request(false)).await;
    assert_eq!(outcome(&b), "failed: cannot open a channel");
    assert_eq!(b.rows()[0].moved, 0);
    assert!(
        b.audit()
            .last()
            .is_some_and(|a| a.contains("outcome failed")),
        "{:?}",
        b.audit()
    );
}

#[tokio::test]
async fn a_dry_run_reads_the_archive_and_writes_nothing() {
    let mut b = with(3);
    b.read_only = Some(ReadOnly::Flag);
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(true), &mut front).await;
    assert!(matches!(r, Err(Stop::DryRun)), "{:?}", r.err());
    assert!(!called(&b, "read_only"), "a dry run restores nothing");
    assert!(called(&b, "read_archive"), "{:?}", b.calls());
    assert_eq!(front.asked, ["plan"]);
    assert!(!called(&b, "publish_check"), "{:?}", b.calls());
    untouched(&b);
}

#[tokio::test]
async fn a_store_that_cannot_open_refuses_before_the_archive_is_read() {
    let mut b = with(3);
    b.dlq.store_broken = Some("the store is locked".into());
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("the store is locked") && w.to_string().contains("nothing restored")),
        "{:?}",
        r.err()
    );
    assert_eq!(b.calls(), ["read_only", "memory open"]);
    untouched(&b);
}

#[tokio::test]
async fn an_empty_archive_restores_nothing_and_asks_nothing() {
    let b = with(0);
    let mut front = TestFront::logging(Answer::Yes, &b);
    let r = prepared(&b, request(false), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w)) if w.to_string().starts_with("nothing restored")),
        "{:?}",
        r.err()
    );
    assert_eq!(front.asked, ["plan"]);
    untouched(&b);
}
