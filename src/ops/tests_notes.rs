//! The guarantees of group notes and of what Warren remembers of messages, against the
//! in-memory broker and store (`ops::fake`): the rights first, the note kept in the store (the
//! memory port) and then put on the broker's audit stream by the one writer; read-only and a
//! context without the stream publish nothing; no stream is created unless the context says
//! so; first-seen times written once. No broker.

use super::fake::{AUDIT_STREAM, FakeBroker};
use super::note::{self, NoteRequest};
use super::rights::ReadOnly;
use super::{Refusal, Stop};
use crate::domain::grouping::{Facets, GroupBy, WaitQueues};

fn request(text: &str) -> NoteRequest {
    NoteRequest {
        queue: "orders.dlq".into(),
        by: GroupBy::Reason,
        key: "rejected".into(),
        text: text.into(),
    }
}

/// A broker whose audit stream exists.
fn with_stream() -> FakeBroker {
    let b = FakeBroker::default();
    b.streams.lock().unwrap().insert(AUDIT_STREAM.into());
    b
}

fn kept(b: &FakeBroker) -> Vec<String> {
    note::list(b, "orders.dlq")
        .expect("listed")
        .into_iter()
        .map(|n| n.text)
        .collect()
}

#[tokio::test]
async fn a_note_is_kept_then_recorded_on_the_broker_by_the_one_writer() {
    let b = with_stream();
    let set = note::set(&b, request("  carrier outage,\nreplay after 10:00 "))
        .await
        .expect("kept");
    assert!(set.kept && set.notes.is_empty(), "{:?}", set.notes);
    assert_eq!(set.note.text, "carrier outage, replay after 10:00");
    assert!(!set.note.author.is_empty(), "the home says who wrote it");
    // The rights first, then the store, then the broker's record.
    assert_eq!(
        b.calls(),
        [
            "read_only",
            "memory open",
            "memory note rejected",
            "audit open",
            "record set note"
        ]
    );
    // Both halves have it.
    assert_eq!(kept(&b), ["carrier outage, replay after 10:00"]);
    assert_eq!(b.audit().len(), 1);
    assert!(b.audit()[0].starts_with("note set "), "{:?}", b.audit());
    let rec = &b.records()[0];
    assert_eq!(rec["text"], "carrier outage, replay after 10:00");
    assert_eq!(rec["queue"], "orders.dlq");
    assert_eq!(rec["by"], "reason");
    assert_eq!(rec["key"], "rejected");
    assert_eq!(rec["broker_user"], "guest");

    // An empty text removes it, in both halves.
    let set = note::set(&b, request("")).await.expect("removed");
    assert!(!set.kept);
    assert!(kept(&b).is_empty());
    assert!(b.audit()[1].starts_with("note forget "), "{:?}", b.audit());
}

#[tokio::test]
async fn read_only_publishes_nothing_and_keeps_the_note_on_this_machine() {
    for why in [
        ReadOnly::Flag,
        ReadOnly::Context("prod".into()),
        ReadOnly::Broker("the broker refuses this user's publishes".into()),
    ] {
        let mut b = with_stream();
        b.read_only = Some(why.clone());
        b.create_streams = Some(true);
        let set = note::set(&b, request("looked at")).await.expect("kept");
        assert!(set.kept && set.notes.is_empty(), "{why:?}: {:?}", set.notes);
        assert_eq!(
            b.calls().first().map(String::as_str),
            Some("read_only"),
            "{why:?}: the rights are asked first"
        );
        assert!(
            !b.calls()
                .iter()
                .any(|c| c.starts_with("audit") || c.starts_with("record")),
            "{why:?}: nothing opened or published: {:?}",
            b.calls()
        );
        assert!(b.audit().is_empty(), "{why:?}");
        assert_eq!(kept(&b), ["looked at"], "{why:?}");
    }
}

#[tokio::test]
async fn no_stream_is_created_for_a_note_unless_the_context_says_so() {
    // Missing, and the context neither allows nor forbids: nobody is asked, nothing created,
    // the note kept here and that said.
    let b = FakeBroker::default();
    let set = note::set(&b, request("outage")).await.expect("kept");
    assert!(set.kept);
    assert!(b.streams().is_empty(), "nothing created");
    assert_eq!(set.notes.len(), 1, "{:?}", set.notes);
    assert!(
        set.notes[0].contains("not written") && set.notes[0].contains("kept on this machine only"),
        "{:?}",
        set.notes
    );
    assert_eq!(kept(&b), ["outage"]);
    // `create_audit_stream = true`: created, and the note is on it.
    let b = FakeBroker {
        create_streams: Some(true),
        ..Default::default()
    };
    let set = note::set(&b, request("outage")).await.expect("kept");
    assert!(set.notes.is_empty(), "{:?}", set.notes);
    assert!(b.streams().contains(AUDIT_STREAM));
    assert_eq!(b.audit().len(), 1);
}

#[tokio::test]
async fn a_context_without_the_stream_keeps_the_note_and_says_nothing() {
    let b = FakeBroker {
        audit_off: true,
        create_streams: Some(true),
        ..Default::default()
    };
    let set = note::set(&b, request("outage")).await.expect("kept");
    assert!(set.kept && set.notes.is_empty(), "{:?}", set.notes);
    assert!(b.audit().is_empty() && b.streams().is_empty());
    assert!(!b.calls().iter().any(|c| c.starts_with("audit")));
}

#[tokio::test]
async fn a_note_the_store_cannot_keep_is_refused_and_not_published() {
    let mut b = with_stream();
    b.dlq.store_broken = Some("the store is locked".into());
    let r = note::set(&b, request("outage")).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w @ Refusal::NoteNotKept { .. }))
            if w.to_string().contains("the note was not kept") && w.to_string().contains("the store is locked")),
        "{r:?}"
    );
    assert!(b.audit().is_empty(), "{:?}", b.audit());
}

#[tokio::test]
async fn a_whole_read_forgets_the_notes_of_groups_gone_and_a_partial_one_does_not() {
    let b = with_stream();
    note::set(&b, request("outage")).await.expect("kept");
    // No message left in the group "rejected".
    let none: Vec<Facets> = Vec::new();
    let waits = WaitQueues::default();
    let (notes, said) = note::after_read(&b, "orders.dlq", (&none, false), &waits);
    assert_eq!(notes.len(), 1, "a partial read cannot tell");
    assert!(said.is_empty(), "{said:?}");
    assert_eq!(kept(&b), ["outage"]);
    let (notes, said) = note::after_read(&b, "orders.dlq", (&none, true), &waits);
    assert!(notes.is_empty() && said.is_empty(), "{notes:?} {said:?}");
    assert!(kept(&b).is_empty(), "forgotten in the store");
    // Forgetting is local: the broker's stream keeps the history.
    assert_eq!(b.audit().len(), 1);
}

#[test]
fn first_seen_times_go_through_the_memory_port_and_are_written_once() {
    use super::ports::RecordPort;
    let b = FakeBroker::default();
    let m = b.memory().expect("open");
    let keys = vec!["id:a".to_string(), "id:b".to_string()];
    let t1: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let t2: jiff::Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
    let first = super::recall(&b, &m, "orders.dlq", &keys, t1).expect("recalled");
    assert_eq!(first.first_seen.get("id:a"), Some(&t1));
    let later = vec!["id:a".to_string(), "id:c".to_string()];
    let again = super::recall(&b, &m, "orders.dlq", &later, t2).expect("recalled");
    assert_eq!(
        again.first_seen.get("id:a"),
        Some(&t1),
        "kept, not rewritten"
    );
    assert_eq!(again.first_seen.get("id:c"), Some(&t2));
    assert!(
        b.calls().iter().any(|c| c == "memory seen orders.dlq 2"),
        "{:?}",
        b.calls()
    );
}
