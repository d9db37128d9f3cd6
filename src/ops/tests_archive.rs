//! The guarantees of archive and discard, each against the in-memory broker and store
//! (`ops::fake`), read off its ordered log of calls: rights first, an auto-delete queue refused
//! before anything is read, nothing created or read again without consent, the typed count, the
//! audit's start (local, then broker) before the run, the record's truth however the run ends,
//! a dry run that writes nothing, a store that cannot open refusing a real run. No broker.

use std::path::PathBuf;

use tokio::sync::watch;

use super::archive::{self, ArchiveRequest, Ready, Way};
use super::fake::{AUDIT_STREAM, Answer, FakeBroker, TestFront, summary};
use super::rights::ReadOnly;
use super::{Front, Questions, Refusal, Stop};
use crate::broker::replay::StopReason;
use crate::broker::session::ReplaySpec;
use crate::domain::confirm::typed_count;
use crate::domain::run::RunKind;

const DLQ: &str = "orders.dlq";

fn spec() -> ReplaySpec {
    ReplaySpec::all_of(DLQ, 100)
}

fn request(way: Way, dry_run: bool) -> ArchiveRequest {
    ArchiveRequest {
        spec: spec(),
        way,
        dry_run,
        filter: None,
        group: None,
    }
}

fn to_archive() -> Way {
    Way::Archive {
        local: false,
        create: false,
        reason: "checked".into(),
    }
}

fn to_discard() -> Way {
    Way::Discard {
        snapshot: Some(PathBuf::from("/nonexistent/warren-fake/orders.dlq.jsonl")),
    }
}

/// A broker with three dead letters in `DLQ`, and the archive stream and audit stream there.
fn three() -> FakeBroker {
    let b = FakeBroker::dlq(DLQ, 3);
    b.streams
        .lock()
        .unwrap()
        .extend([b.dlq.archive.stream.clone(), AUDIT_STREAM.to_string()]);
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

/// Nothing was prepared, put on the record or run: nothing moved.
fn untouched(b: &FakeBroker) {
    for what in [
        "archive_work",
        "discard_work",
        "create_archive",
        "memory start",
        "record start",
        "run",
    ] {
        assert!(!called(b, what), "{what}: {:?}", b.calls());
    }
    assert!(b.rows().is_empty(), "{:?}", b.rows());
    assert!(
        !b.audit().iter().any(|a| a.contains("start")),
        "{:?}",
        b.audit()
    );
}

async fn prepared<'b>(
    b: &'b FakeBroker,
    way: Way,
    front: &mut dyn Front,
) -> Result<Ready<'b, FakeBroker>, Stop> {
    archive::prepare(b, request(way, false), front).await
}

/// Prepares, runs and finishes: the finish's notes.
async fn through(b: &FakeBroker, way: Way) -> Vec<String> {
    let mut front = TestFront::answering(Answer::Yes);
    let mut ready = match prepared(b, way, &mut front).await {
        Ok(r) => r,
        Err(stop) => panic!("{stop:?}"),
    };
    let (_tx, cancel) = watch::channel(false);
    let result = ready.run(cancel, |_| {}).await;
    ready.finish(&result).await
}

#[tokio::test]
async fn read_only_refuses_an_archive_and_a_discard_before_anything_is_read_or_asked() {
    for (way, act, undone) in [
        (to_archive(), super::rights::Act::Archive, "nothing moved"),
        (to_discard(), super::rights::Act::Discard, "nothing deleted"),
    ] {
        let mut b = three();
        b.read_only = Some(ReadOnly::Flag);
        let mut front = TestFront::answering(Answer::Yes);
        let r = prepared(&b, way, &mut front).await;
        assert!(
            matches!(&r, Err(Stop::Refused(w @ Refusal::ReadOnly { act: a, why: ReadOnly::Flag }))
                if *a == act && w.to_string().contains("read-only") && w.to_string().contains(undone)),
            "{:?}",
            r.err()
        );
        assert_eq!(b.calls(), ["read_only"]);
        assert!(front.asked.is_empty(), "{:?}", front.asked);
        untouched(&b);
    }
}

#[tokio::test]
async fn an_auto_delete_queue_is_refused_before_anything_is_read_created_or_recorded() {
    for way in [to_archive(), to_discard()] {
        // The archive is missing too: refusing the queue must not create it first.
        let mut b = FakeBroker::dlq(DLQ, 3);
        b.dlq.auto_delete.insert(DLQ.into());
        let mut front = TestFront::answering(Answer::Yes);
        let r = prepared(&b, way, &mut front).await;
        assert!(
            matches!(&r, Err(Stop::Refused(w @ Refusal::AutoDelete { queue, .. }))
                if queue == DLQ && w.to_string().contains("auto-delete") && w.to_string().contains("Nothing moved")),
            "{:?}",
            r.err()
        );
        assert_eq!(b.calls(), ["read_only", format!("queue {DLQ}").as_str()]);
        assert!(front.asked.is_empty(), "{:?}", front.asked);
        assert!(b.streams().is_empty(), "nothing created");
        untouched(&b);
    }
}

#[tokio::test]
async fn a_missing_archive_stream_is_created_only_with_consent() {
    for answer in [Answer::No, Answer::NobodyToAsk] {
        let b = FakeBroker::dlq(DLQ, 3);
        let mut front = TestFront::answering(answer);
        let r = prepared(&b, to_archive(), &mut front).await;
        assert!(
            matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("nothing moved") && w.to_string().contains("not created")),
            "{answer:?}: {:?}",
            r.err()
        );
        assert!(
            front.asked.iter().any(|q| q.starts_with("create archive")),
            "{:?}",
            front.asked
        );
        assert!(b.streams().is_empty(), "{answer:?}: nothing created");
        assert!(!called(&b, "select"), "{answer:?}: nothing read");
        untouched(&b);
    }
    // Yes: the stream is created, then the archive goes on.
    let b = FakeBroker::dlq(DLQ, 3);
    let mut front = TestFront::answering(Answer::Yes);
    let ready = prepared(&b, to_archive(), &mut front).await;
    assert!(ready.is_ok(), "{:?}", ready.err());
    assert!(b.streams().contains(&b.dlq.archive.stream));
    assert!(position(&b.calls(), "create_archive") < position(&b.calls(), "select"));
    // Consent given up front (`--create-archive`): created without a question.
    let b = FakeBroker::dlq(DLQ, 3);
    let mut front = TestFront::answering(Answer::Yes);
    let way = Way::Archive {
        local: false,
        create: true,
        reason: String::new(),
    };
    assert!(prepared(&b, way, &mut front).await.is_ok());
    assert!(
        !front.asked.iter().any(|q| q.starts_with("create archive")),
        "{:?}",
        front.asked
    );
    assert!(b.streams().contains(&b.dlq.archive.stream));
}

#[tokio::test]
async fn a_stream_the_broker_will_not_create_becomes_the_local_file_and_says_so() {
    let mut b = FakeBroker::dlq(DLQ, 2);
    b.dlq.create_refused = true;
    let mut front = TestFront::answering(Answer::Yes);
    let ready = prepared(&b, to_archive(), &mut front)
        .await
        .unwrap_or_else(|s| panic!("{s:?}"));
    assert!(ready.place().contains("local file"), "{}", ready.place());
    assert!(
        front.said.iter().any(|s| s.contains("cannot create")),
        "{:?}",
        front.said
    );
    assert!(called(&b, "archive_work local file"), "{:?}", b.calls());
}

#[tokio::test]
async fn a_discard_asks_for_the_typed_count_and_a_no_moves_and_records_nothing() {
    assert!(typed_count(RunKind::Discard, 3), "the rule: always typed");
    let b = three();
    let mut front = TestFront::answering(Answer::No);
    let r = prepared(&b, to_discard(), &mut front).await;
    assert!(matches!(r, Err(Stop::Declined)), "{:?}", r.err());
    assert!(
        front
            .asked
            .contains(&"go ahead: delete 3 typed=true".to_string()),
        "{:?}",
        front.asked
    );
    assert_eq!(front.plan_asks, [Questions { typed_count: true }]);
    untouched(&b);
    // An archive is asked with the rule's answer for it (no typing).
    let b = three();
    let mut front = TestFront::answering(Answer::No);
    let r = prepared(&b, to_archive(), &mut front).await;
    assert!(matches!(r, Err(Stop::Declined)), "{:?}", r.err());
    let expected = format!(
        "go ahead: archive 3 typed={}",
        typed_count(RunKind::Archive, 3)
    );
    assert!(front.asked.contains(&expected), "{:?}", front.asked);
    assert_eq!(front.plan_asks, [Questions::before(RunKind::Archive, 3)]);
    untouched(&b);
}

#[tokio::test]
async fn the_audit_starts_locally_then_on_the_broker_before_the_run_and_finishes_completed() {
    for (way, op, work) in [
        (to_archive(), RunKind::Archive, "archive_work"),
        (to_discard(), RunKind::Discard, "discard_work"),
    ] {
        let b = three();
        let mut front = TestFront::answering(Answer::Yes);
        let mut ready = prepared(&b, way, &mut front)
            .await
            .unwrap_or_else(|s| panic!("{s:?}"));
        assert_eq!(ready.count(), 3);
        assert!(!called(&b, "run"), "prepare runs nothing");
        let started = front
            .asked
            .iter()
            .position(|q| q == "started on_broker=true");
        let asked = front.asked.iter().position(|q| q.starts_with("go ahead"));
        assert!(asked < started && asked.is_some(), "{:?}", front.asked);
        let (_tx, cancel) = watch::channel(false);
        let result = ready.run(cancel, |_| {}).await;
        let notes = ready.finish(&result).await;
        assert!(notes.is_empty(), "{notes:?}");
        let calls = b.calls();
        let order: Vec<usize> = [
            "read_only",
            "select",
            work,
            "memory start",
            "record start",
            "run",
            "memory finish",
            "record finish",
        ]
        .iter()
        .map(|p| position(&calls, p))
        .collect();
        assert!(order.is_sorted(), "{order:?} in {calls:?}");
        let rows = b.rows();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].op, op);
        assert_eq!(rows[0].outcome.as_deref(), Some("completed"));
        assert_eq!((rows[0].moved, rows[0].moved_ids), (3, 3));
        let audit = b.audit();
        assert_eq!(
            audit,
            [
                format!("{} start {}", op.as_str(), rows[0].run_id),
                format!("{} outcome completed moved 3 ids 3", op.as_str()),
            ]
        );
    }
}

#[tokio::test]
async fn a_cancelled_run_is_recorded_cancelled_with_what_it_moved() {
    let mut b = three();
    b.dlq.ending = Some(summary(StopReason::Cancelled, 2));
    let notes = through(&b, to_archive()).await;
    assert!(notes.is_empty(), "{notes:?}");
    let rows = b.rows();
    assert_eq!(rows[0].outcome.as_deref(), Some("cancelled"));
    assert_eq!((rows[0].moved, rows[0].moved_ids), (2, 2));
    assert_eq!(
        b.audit().last().map(String::as_str),
        Some("archive outcome cancelled moved 2 ids 2")
    );
}

#[tokio::test]
async fn a_failed_run_is_recorded_failed_whether_it_stopped_or_broke() {
    let mut b = three();
    b.dlq.ending = Some(summary(StopReason::ConnectionLost("node down".into()), 1));
    through(&b, to_discard()).await;
    let outcome = b.rows()[0].outcome.clone().unwrap_or_default();
    assert!(
        outcome.starts_with("failed") && outcome.contains("node down"),
        "{outcome}"
    );
    assert_eq!(b.rows()[0].moved, 1);
    assert!(
        b.audit()
            .last()
            .is_some_and(|a| a.contains("outcome failed")),
        "{:?}",
        b.audit()
    );

    let mut b = three();
    b.dlq.run_error = Some("the channel closed".into());
    through(&b, to_archive()).await;
    let outcome = b.rows()[0].outcome.clone().unwrap_or_default();
    assert!(
        outcome.starts_with("failed") && outcome.contains("the channel closed"),
        "{outcome}"
    );
    assert_eq!(b.rows()[0].moved, 0);
}

#[tokio::test]
async fn a_run_the_broker_cannot_record_starts_on_the_local_record_and_says_so() {
    // The audit stream is missing and nobody can be asked to create it.
    let b = FakeBroker::dlq(DLQ, 2);
    b.streams
        .lock()
        .unwrap()
        .insert(b.dlq.archive.stream.clone());
    let mut front = TestFront::answering(Answer::NobodyToAsk);
    // The go-ahead is given; the audit stream's question has nobody to answer it.
    let mut front = YesToGo(&mut front);
    let mut ready = prepared(&b, to_archive(), &mut front)
        .await
        .unwrap_or_else(|s| panic!("{s:?}"));
    let (_tx, cancel) = watch::channel(false);
    let result = ready.run(cancel, |_| {}).await;
    let notes = ready.finish(&result).await;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("broker audit record was not written")),
        "{notes:?}"
    );
    assert!(!b.streams().contains(AUDIT_STREAM), "not created");
    assert_eq!(b.rows()[0].outcome.as_deref(), Some("completed"));
    assert!(b.audit().is_empty(), "{:?}", b.audit());
    assert!(position(&b.calls(), "record start") < position(&b.calls(), "run"));
}

/// A front end that says yes to the go-ahead and passes every other question on.
struct YesToGo<'f>(&'f mut TestFront);

impl Front for YesToGo<'_> {
    fn plan(&mut self, plan: super::Plan<'_>) {
        self.0.plan(plan)
    }
    fn go_ahead(&mut self, count: u64, kind: RunKind, typed: bool) -> Result<bool, String> {
        let _ = self.0.go_ahead(count, kind, typed);
        Ok(true)
    }
    fn audit_consent(&mut self, configured: Option<bool>) -> crate::broker::audit::Consent<'_> {
        self.0.audit_consent(configured)
    }
    fn read_again(&mut self, queue: &str, cost: &str) -> Result<bool, String> {
        self.0.read_again(queue, cost)
    }
    fn create_archive(&mut self, what: &str) -> Result<bool, String> {
        self.0.create_archive(what)
    }
    fn say(&mut self, text: &str) {
        self.0.say(text)
    }
    fn started(&mut self, run_id: &str, on_broker: bool) {
        self.0.started(run_id, on_broker)
    }
}

#[tokio::test]
async fn a_dry_run_reads_but_writes_nothing_and_records_nothing() {
    for way in [to_archive(), to_discard()] {
        // The archive is missing, the session read-only and the store broken: a dry run
        // still shows its plan, and creates, asks, writes and records nothing.
        let mut b = FakeBroker::dlq(DLQ, 3);
        b.read_only = Some(ReadOnly::Flag);
        b.dlq.store_broken = Some("disk full".into());
        let mut front = TestFront::answering(Answer::Yes);
        let r = archive::prepare(&b, request(way, true), &mut front).await;
        assert!(matches!(r, Err(Stop::DryRun)), "{:?}", r.err());
        assert!(called(&b, "select"), "{:?}", b.calls());
        assert!(!called(&b, "read_only"), "a dry run moves nothing");
        assert_eq!(front.asked, ["plan"]);
        assert!(b.streams().is_empty(), "nothing created");
        untouched(&b);
    }
}

#[tokio::test]
async fn a_store_that_cannot_open_refuses_a_real_run_before_anything_is_read() {
    for (way, undone) in [
        (to_archive(), "nothing moved"),
        (to_discard(), "nothing deleted"),
    ] {
        let mut b = three();
        b.dlq.store_broken = Some("the store is locked".into());
        let mut front = TestFront::answering(Answer::Yes);
        let r = prepared(&b, way, &mut front).await;
        assert!(
            matches!(&r, Err(Stop::Refused(w @ Refusal::Store { .. }))
                if w.to_string().contains("the store is locked") && w.to_string().contains(undone)),
            "{:?}",
            r.err()
        );
        assert!(!called(&b, "select"), "{:?}", b.calls());
        assert!(front.asked.is_empty(), "{:?}", front.asked);
        untouched(&b);
    }
}

#[tokio::test]
async fn a_read_that_spends_deliveries_again_is_asked_and_a_no_reads_nothing() {
    let mut b = three();
    b.dlq.read_costs = true;
    let mut front = TestFront::answering(Answer::No);
    let r = prepared(&b, to_archive(), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w @ Refusal::NotReadAgain { .. })) if w.to_string().contains("nothing was read")),
        "{:?}",
        r.err()
    );
    assert_eq!(front.asked, [format!("read again {DLQ}")]);
    assert_eq!(
        b.calls().iter().filter(|c| c.starts_with("select")).count(),
        1
    );
    untouched(&b);

    let mut b = three();
    b.dlq.read_costs = true;
    let mut front = TestFront::answering(Answer::Yes);
    assert!(prepared(&b, to_archive(), &mut front).await.is_ok());
    assert!(
        called(&b, &format!("select {DLQ} ReadAgain")),
        "{:?}",
        b.calls()
    );
}

#[tokio::test]
async fn a_refused_write_or_retention_stops_before_the_go_ahead() {
    let mut b = three();
    b.dlq.write_refused = Some("no write permission on the archive".into());
    let mut front = TestFront::answering(Answer::Yes);
    let r = prepared(&b, to_archive(), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w @ Refusal::Target { .. }))
            if w.to_string().contains("no write permission") && w.to_string().contains("nothing moved")),
        "{:?}",
        r.err()
    );
    assert!(!front.asked.iter().any(|q| q.starts_with("go ahead")));
    untouched(&b);

    let mut b = three();
    b.dlq.retention_refused = Some("the stream keeps 1 minute".into());
    let mut front = TestFront::answering(Answer::Yes);
    let r = prepared(&b, to_archive(), &mut front).await;
    assert!(matches!(&r, Err(Stop::Refused(w)) if w.to_string().contains("1 minute")));
    assert!(!called(&b, "select"), "refused before the read");
    untouched(&b);
}

#[tokio::test]
async fn an_empty_selection_moves_nothing_and_asks_nothing() {
    let b = FakeBroker::dlq(DLQ, 0);
    b.streams
        .lock()
        .unwrap()
        .insert(b.dlq.archive.stream.clone());
    let mut front = TestFront::answering(Answer::Yes);
    let r = prepared(&b, to_discard(), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w @ Refusal::NothingSelected { .. })) if w.to_string().starts_with("nothing deleted")),
        "{:?}",
        r.err()
    );
    assert_eq!(front.asked, ["plan"]);
    untouched(&b);
}

/// One rule for whether an archive asks before it creates its stream: the CLI's question and
/// the TUI's modal both follow it.
#[test]
fn an_archive_asks_to_create_its_stream_only_where_nothing_else_decides() {
    use crate::ops::archive::{asks_to_create, stream_question};
    let mut a = crate::config::ArchiveSettings::default();
    assert!(asks_to_create(&a, false, false, true, true));
    assert!(!asks_to_create(&a, false, false, true, false), "present");
    assert!(!asks_to_create(&a, true, false, true, true), "--local");
    assert!(!asks_to_create(&a, false, true, true, true), "--create");
    assert!(!asks_to_create(&a, false, false, false, true), "no streams");
    a.create = true;
    assert!(
        !asks_to_create(&a, false, false, true, true),
        "the context creates"
    );
    a.create = false;
    a.local = true;
    assert!(
        !asks_to_create(&a, false, false, true, true),
        "the context keeps it locally"
    );
    let q = stream_question(&a, "/orders");
    assert!(
        q.contains(&format!("'{}'", a.stream)) && q.contains("'/orders'"),
        "{q}"
    );
}
