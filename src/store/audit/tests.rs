use super::merged::{record_of, with_outcome};
use super::*;
use crate::domain::outcome::RunOutcome;
use crate::domain::run::RunKind;

/// A run's start, for tests (also `store::pending`'s).
pub(crate) fn start(run: &str, secs: i64) -> AuditStart {
    AuditStart {
        run_id: run.into(),
        at: Timestamp::from_second(secs).unwrap(),
        os_user: "alice".into(),
        broker_user: "guest".into(),
        context: "local".into(),
        vhost: "/".into(),
        from_queue: "q.dlq".into(),
        targets: vec!["q".into()],
        filter: None,
        group: None,
        requested_limit: None,
        dry_run: false,
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
    }
}

/// A "completed" outcome at second 200 that moved `moved`, with these ids.
pub(crate) fn completed(moved: u64, ids: &[&str]) -> AuditOutcome {
    AuditOutcome {
        canary: None,
        edits: Vec::new(),
        at: Timestamp::from_second(200).unwrap(),
        moved,
        returned: 0,
        failed: 0,
        remaining: 0,
        message_ids: ids.iter().map(|s| s.to_string()).collect(),
        duplicated: 0,
        duplicate_ids: vec![],
        outcome: RunOutcome::Completed,
        targets: Vec::new(),
    }
}

fn entry<T: Serialize>(kind: &str, event: &str, run: &str, rec: T) -> Vec<u8> {
    let e = AuditEnvelope::new(kind, event, run, Timestamp::UNIX_EPOCH, rec);
    serde_json::to_vec(&e).unwrap()
}

#[test]
fn a_run_is_vouched_for_only_when_each_entry_is_signed_by_the_user_its_start_names() {
    let signed = |b: Vec<u8>, u: Option<&str>| (b, u.map(str::to_string));
    let stream = vec![
        signed(
            entry("replay", "start", "real", start("real", 1)),
            Some("guest"),
        ),
        signed(
            entry("replay", "outcome", "real", outcome(&["a"])),
            Some("guest"),
        ),
        signed(entry("replay", "start", "forged", start("forged", 2)), None),
        signed(entry("replay", "outcome", "forged", outcome(&["b"])), None),
        // Signed, but by another user than the one its start names.
        signed(
            entry("archive", "start", "other", start("other", 3)),
            Some("mallory"),
        ),
        // A real start, a forged outcome.
        signed(
            entry("replay", "start", "half", start("half", 4)),
            Some("guest"),
        ),
        signed(entry("replay", "outcome", "half", outcome(&["c"])), None),
    ];
    let mut got: Vec<String> = unvouched_runs(&stream).into_iter().collect();
    got.sort();
    assert_eq!(got, ["forged", "half", "other"]);
}

fn note(text: &str, secs: i64) -> NoteRecord {
    NoteRecord {
        at: Timestamp::from_second(secs).unwrap(),
        author: "alice".into(),
        broker_user: "guest".into(),
        context: "local".into(),
        vhost: "/".into(),
        queue: "q.dlq".into(),
        by: "exception".into(),
        key: "TimeoutError".into(),
        text: text.into(),
    }
}

#[test]
fn notes_are_typed_newest_first_and_a_bad_one_is_skipped() {
    let stream = vec![
        entry("note", "set", "n1", note("carrier outage", 10)),
        entry("note", "forget", "n2", note("", 20)),
        entry("note", "set", "n3", serde_json::json!({"text": 5})),
        entry("note", "edited", "n4", note("later kind", 30)),
    ];
    let m = merge(vec![], vec![], &stream);
    assert_eq!(m.notes.len(), 2);
    assert_eq!(m.notes[0].event, "forget");
    assert_eq!(m.notes[1].event, "set");
    assert_eq!(m.notes[1].note, note("carrier outage", 10));
    assert_eq!(m.skipped.len(), 1, "{:?}", m.skipped);
    // An event this warren does not know is shown raw, not lost.
    assert_eq!(m.other.len(), 1);
    assert!(m.replays.is_empty() && m.protects.is_empty());
}

fn outcome(ids: &[&str]) -> AuditOutcome {
    completed(5, ids)
}

#[test]
fn moved_ids_split_over_entries_are_merged_back_in_order_and_a_lost_part_is_said() {
    let part = |run: &str, n: u32, ids: &[&str]| {
        entry(
            "replay",
            IDS_EVENT,
            run,
            IdsPart {
                part: n,
                message_ids: ids.iter().map(|s| s.to_string()).collect(),
            },
        )
    };
    let whole = outcome(&["e"]);
    let split = |parts| OutcomeEntry {
        outcome: &whole,
        id_parts: parts,
    };
    let stream = vec![
        entry("replay", "start", "r1", start("r1", 100)),
        // Parts out of order, one repeated (the first counts), the outcome last.
        part("r1", 2, &["c", "d"]),
        part("r1", 1, &["a", "b"]),
        part("r1", 1, &["x"]),
        entry("replay", "outcome", "r1", split(2)),
        // One part lost (past retention): what is there is shown, and the loss said.
        entry("replay", "start", "r2", start("r2", 200)),
        part("r2", 2, &["c", "d"]),
        entry("replay", "outcome", "r2", split(2)),
        // Written before ids were split: the outcome alone, read as before.
        entry("replay", "start", "r3", start("r3", 300)),
        entry("replay", "outcome", "r3", outcome(&["a", "b"])),
        // Parts of a run that never wrote its outcome: interrupted, the parts not shown.
        entry("replay", "start", "r4", start("r4", 400)),
        part("r4", 1, &["a"]),
    ];
    let m = merge(vec![], vec![], &stream);
    let ids = |run: &str| {
        let r = m
            .replays
            .iter()
            .find(|(r, _)| r.run_id.as_deref() == Some(run))
            .unwrap();
        (r.0.message_ids.clone(), r.0.outcome.clone())
    };
    assert_eq!(ids("r1").0, vec!["a", "b", "c", "d", "e"]);
    assert_eq!(ids("r2").0, vec!["c", "d", "e"]);
    assert_eq!(ids("r3").0, vec!["a", "b"]);
    assert_eq!(ids("r4"), (vec![], RunOutcome::Interrupted(None)));
    assert_eq!(m.skipped.len(), 1, "{:?}", m.skipped);
    assert!(
        m.skipped[0].contains("run r2: 1 of the 2 entries"),
        "{:?}",
        m.skipped
    );
    // Nothing is listed as an unknown operation.
    assert!(m.other.is_empty(), "{:?}", m.other);
    // A split outcome's record is the old shape plus `id_parts`; one not split has none.
    let v = serde_json::to_value(split(2)).unwrap();
    assert_eq!(v["id_parts"], 2);
    assert_eq!(v["moved"], 5);
    assert!(
        serde_json::to_value(split(0))
            .unwrap()
            .get("id_parts")
            .is_none()
    );
}

#[test]
fn the_same_run_seen_locally_and_on_the_broker_is_one_record() {
    let local = record_of("r1".into(), RunKind::Replay, start("r1", 100), None);
    let local = AuditRecord {
        id: Some(7),
        ..local
    };
    let out = AuditOutcome {
        canary: None,
        edits: Vec::new(),
        targets: Vec::new(),
        at: Timestamp::from_second(200).unwrap(),
        moved: 3,
        returned: 0,
        failed: 0,
        remaining: 0,
        message_ids: vec!["id:a".into()],
        duplicated: 0,
        duplicate_ids: vec![],
        outcome: RunOutcome::Completed,
    };
    let stream = vec![
        entry("replay", "start", "r1", start("r1", 100)),
        entry("replay", "start", "r2", start("r2", 300)),
        entry("replay", "start", "r3", start("r3", 50)),
        entry("replay", "outcome", "r3", out),
        b"not json".to_vec(),
        entry(
            "quarantine",
            "start",
            "r4",
            serde_json::json!({"queue": "q"}),
        ),
    ];
    let m = merge(vec![local], vec![], &stream);
    let ids: Vec<_> = m
        .replays
        .iter()
        .map(|(r, s)| (r.run_id.clone().unwrap(), r.id, s.local, s.broker))
        .collect();
    assert_eq!(
        ids,
        [
            ("r2".to_string(), None, false, true),
            ("r1".to_string(), Some(7), true, true),
            ("r3".to_string(), None, false, true),
        ]
    );
    // A start without an outcome on the broker reads interrupted; with one, its outcome.
    assert_eq!(m.replays[0].0.outcome, RunOutcome::Interrupted(None));
    assert_eq!(m.replays[2].0.outcome, RunOutcome::Completed);
    assert_eq!(m.replays[2].0.moved, Some(3));
    assert_eq!(m.skipped.len(), 1);
    assert_eq!(m.other.len(), 1);
}

#[test]
fn a_local_record_without_its_outcome_takes_the_brokers() {
    let local = AuditRecord {
        id: Some(7),
        ..record_of("r1".into(), RunKind::Replay, start("r1", 100), None)
    };
    assert_eq!(local.outcome, RunOutcome::Interrupted(None));
    let out = completed(2, &["id:b"]);
    let stream = vec![
        entry("replay", "start", "r1", start("r1", 100)),
        entry(
            "replay",
            IDS_EVENT,
            "r1",
            IdsPart {
                part: 1,
                message_ids: vec!["id:a".into()],
            },
        ),
        entry(
            "replay",
            "outcome",
            "r1",
            OutcomeEntry {
                outcome: &out,
                id_parts: 1,
            },
        ),
    ];
    let m = merge(vec![local], vec![], &stream);
    assert_eq!(m.replays.len(), 1);
    let (r, seen) = &m.replays[0];
    assert_eq!((r.id, seen.local, seen.broker), (Some(7), true, true));
    assert_eq!(r.outcome, RunOutcome::Completed);
    assert_eq!(r.moved, Some(2));
    assert_eq!(r.message_ids, ["id:a", "id:b"]);
    // A local outcome is kept as it is, whatever the broker's says.
    let finished = with_outcome(
        record_of("r2".into(), RunKind::Replay, start("r2", 100), None),
        AuditOutcome {
            outcome: RunOutcome::Cancelled(None),
            ..out.clone()
        },
    );
    let stream = vec![
        entry("replay", "start", "r2", start("r2", 100)),
        entry("replay", "outcome", "r2", out),
    ];
    let m = merge(vec![finished], vec![], &stream);
    assert_eq!(m.replays[0].0.outcome, RunOutcome::Cancelled(None));
}

#[test]
fn a_newer_schema_is_skipped_and_said() {
    let mut e: serde_json::Value =
        serde_json::from_slice(&entry("replay", "start", "r1", start("r1", 1))).unwrap();
    e["warren_audit"] = serde_json::json!(99);
    let m = merge(vec![], vec![], &[serde_json::to_vec(&e).unwrap()]);
    assert!(m.replays.is_empty());
    assert!(m.skipped[0].contains("schema 99"), "{:?}", m.skipped);
}
