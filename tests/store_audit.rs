//! The replay audit in Warren's store: append-only, an unfinished replay reads "interrupted",
//! an outcome is recorded exactly once, and a store that cannot be opened says so plainly.

use crate::store_util;

use jiff::{SignedDuration, Timestamp};
use store_util::TempDir;
use warren::store::{AuditOutcome, AuditStart, Store, StoreError};

fn start(at: Timestamp, from: &str) -> AuditStart {
    AuditStart {
        run_id: format!("run-{}-{from}", at.as_second()),
        at,
        os_user: "alice".into(),
        broker_user: "guest".into(),
        context: "local".into(),
        vhost: "/".into(),
        from_queue: from.into(),
        targets: vec!["orders.process".into()],
        filter: Some("exception:\"carrier down\"".into()),
        group: None,
        requested_limit: Some(50),
        dry_run: false,
        keep_attempts: true,
        clear_expiry: false,
        strip_failure_stamp: false,
    }
}

fn outcome(at: Timestamp) -> AuditOutcome {
    AuditOutcome {
        canary: None,
        edits: Vec::new(),
        targets: Vec::new(),
        at,
        moved: 2,
        returned: 1,
        failed: 0,
        remaining: 7,
        message_ids: vec!["id:a".into(), "hash:00ff".into()],
        duplicated: 0,
        duplicate_ids: Vec::new(),
        outcome: warren::domain::outcome::RunOutcome::Completed,
    }
}

#[test]
fn begin_without_finish_reads_interrupted_and_finish_fills_the_outcome() {
    let dir = TempDir::new("audit-basic");
    let path = dir.path().join("warren.db");
    let t = Timestamp::from_second(1_759_042_215).unwrap();
    let store = Store::open(&path).unwrap();
    let first = store.begin_replay(&start(t, "orders.dlq")).unwrap();
    let second = store
        .begin_replay(&AuditStart {
            clear_expiry: true,
            strip_failure_stamp: true,
            ..start(t + SignedDuration::from_mins(1), "billing.dlq")
        })
        .unwrap();
    assert!(second > first);
    store
        .finish_replay(second, &outcome(t + SignedDuration::from_mins(2)))
        .unwrap();
    drop(store);

    // Reopened, as a later `warren audit` would.
    let store = Store::open(&path).unwrap();
    let records = store.list_audit(10).unwrap();
    assert_eq!(records.len(), 2);
    let (newest, oldest) = (&records[0], &records[1]);

    assert_eq!(newest.id, Some(second));
    assert_eq!(newest.from_queue, "billing.dlq");
    assert_eq!(newest.outcome.to_string(), "completed");
    assert_eq!(newest.moved, Some(2));
    assert_eq!(newest.returned, Some(1));
    assert_eq!(newest.failed, Some(0));
    assert_eq!(newest.remaining, Some(7));
    assert_eq!(newest.message_ids, vec!["id:a", "hash:00ff"]);
    assert_eq!(newest.finished_at, Some(t + SignedDuration::from_mins(2)));

    assert_eq!(oldest.id, Some(first));
    assert_eq!(oldest.outcome.to_string(), "interrupted");
    assert_eq!(oldest.finished_at, None);
    assert_eq!(oldest.moved, None);
    assert_eq!(oldest.started_at, t);
    assert_eq!(oldest.os_user, "alice");
    assert_eq!(oldest.targets, vec!["orders.process"]);
    assert_eq!(oldest.filter.as_deref(), Some("exception:\"carrier down\""));
    assert_eq!(oldest.requested_limit, Some(50));
    assert!(oldest.keep_attempts);
    assert!(!oldest.dry_run);
    assert!(!oldest.clear_expiry);
    assert!(newest.clear_expiry, "--clear-expiry is on the record");
    assert!(newest.strip_failure_stamp && !oldest.strip_failure_stamp);

    assert_eq!(store.list_audit(1).unwrap().len(), 1);

    let json = serde_json::to_value(oldest).unwrap();
    assert_eq!(json["outcome"], "interrupted");
    assert_eq!(json["started_at"], "2025-09-28T06:50:15Z");
}

#[test]
fn finish_twice_is_refused_and_the_first_outcome_stays() {
    let dir = TempDir::new("audit-twice");
    let store = Store::open(&dir.path().join("warren.db")).unwrap();
    let t = Timestamp::from_second(1_700_000_000).unwrap();
    let id = store.begin_replay(&start(t, "q.dlq")).unwrap();
    store.finish_replay(id, &outcome(t)).unwrap();

    let mut again = outcome(t);
    again.outcome = warren::domain::outcome::RunOutcome::Failed("connection lost".into());
    let err = store.finish_replay(id, &again).unwrap_err();
    assert!(
        matches!(err, StoreError::AlreadyFinished(i) if i == id),
        "{err}"
    );
    assert!(err.to_string().contains("append-only"), "{err}");
    assert_eq!(
        store.list_audit(5).unwrap()[0].outcome.to_string(),
        "completed"
    );

    let err = store.finish_replay(id + 100, &outcome(t)).unwrap_err();
    assert!(matches!(err, StoreError::NoSuchReplay(_)), "{err}");
}

#[test]
fn the_database_itself_refuses_updates_and_deletes_of_the_audit() {
    let dir = TempDir::new("audit-triggers");
    let path = dir.path().join("warren.db");
    let store = Store::open(&path).unwrap();
    let t = Timestamp::from_second(1_700_000_000).unwrap();
    let id = store.begin_replay(&start(t, "q.dlq")).unwrap();
    store.finish_replay(id, &outcome(t)).unwrap();

    let raw = rusqlite::Connection::open(&path).unwrap();
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    for sql in [
        "UPDATE replays SET os_user = 'mallory'",
        "DELETE FROM replays",
        "UPDATE replay_outcomes SET outcome = 'completed'",
        "DELETE FROM replay_outcomes",
    ] {
        let err = raw.execute(sql, []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    assert_eq!(store.list_audit(5).unwrap()[0].os_user, "alice");
}

#[test]
fn an_unwritable_path_gives_a_clear_error() {
    let dir = TempDir::new("audit-unwritable");
    // A regular file where the store's directory should be: fails even for root.
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, b"x").unwrap();
    let path = blocker.join("warren.db");
    let err = Store::open(&path).err().expect("open should fail");
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{text}");
    assert!(text.starts_with("cannot open Warren's store at "), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(
        text.ends_with("replay needs --no-audit without it"),
        "{text}"
    );

    // A file that is not a database.
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![0x55u8; 4096]).unwrap();
    let err = Store::open(&junk).err().expect("open should fail");
    assert!(matches!(err, StoreError::Open { .. }), "{err}");

    // A directory where the file should be.
    let err = Store::open(dir.path()).err().expect("open should fail");
    assert!(matches!(err, StoreError::Open { .. }), "{err}");
}

#[test]
fn a_store_from_a_newer_warren_is_refused() {
    let dir = TempDir::new("audit-newer");
    let path = dir.path().join("warren.db");
    drop(Store::open(&path).unwrap());
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute("INSERT INTO schema_version (version) VALUES (99)", [])
        .unwrap();
    drop(raw);
    let err = Store::open(&path).err().expect("open should fail");
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("upgrade warren"), "{err}");
}

#[test]
fn replay_counts_link_keys_to_the_replays_that_moved_them_in_this_vhost() {
    let dir = TempDir::new("audit-counts");
    let store = Store::open(&dir.path().join("warren.db")).unwrap();
    let t = Timestamp::from_second(1_759_042_215).unwrap();
    let finish = |id: i64, ids: &[&str]| {
        store
            .finish_replay(
                id,
                &AuditOutcome {
                    targets: Vec::new(),
                    message_ids: ids.iter().map(|s| s.to_string()).collect(),
                    ..outcome(t)
                },
            )
            .unwrap()
    };
    let a = store.begin_replay(&start(t, "work.XQ")).unwrap();
    finish(a, &["body:message_id:m1", "body:message_id:m2"]);
    let b = store.begin_replay(&start(t, "work.XQ")).unwrap();
    finish(b, &["body:message_id:m1", "body:message_id:m1"]);
    // Another vhost, a dry run and an unfinished replay do not count.
    let other = store
        .begin_replay(&AuditStart {
            vhost: "other".into(),
            ..start(t, "work.XQ")
        })
        .unwrap();
    finish(other, &["body:message_id:m2"]);
    let dry = store
        .begin_replay(&AuditStart {
            dry_run: true,
            ..start(t, "work.XQ")
        })
        .unwrap();
    finish(dry, &["body:message_id:m2"]);
    store.begin_replay(&start(t, "work.XQ")).unwrap();
    let keys: Vec<String> = ["body:message_id:m1", "body:message_id:m2", "id:never"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let counts = store.replay_counts("local", "/", &keys).unwrap();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert_eq!(counts["body:message_id:m1"], 2, "once per replay");
    assert_eq!(counts["body:message_id:m2"], 1);
    assert!(store.replay_counts("local", "/", &[]).unwrap().is_empty());
}

#[test]
fn protects_and_run_authors_are_kept_and_the_protect_record_is_append_only() {
    use warren::store::ProtectRecord;
    let dir = TempDir::new("audit-protect");
    let path = dir.path().join("warren.db");
    let t = Timestamp::from_second(1_759_042_215).unwrap();
    let store = Store::open(&path).unwrap();
    let p = ProtectRecord {
        run_id: "p-1".into(),
        at: t,
        os_user: "alice".into(),
        broker_user: "ops".into(),
        context: "local".into(),
        vhost: "/".into(),
        queue: "orders.dlq".into(),
        policy: "warren-protect-orders.dlq".into(),
        replaces: Some("ops".into()),
        limit_before: Some(20),
        limit_after: None,
    };
    store.record_protect(&p).unwrap();
    assert_eq!(store.list_protects(10).unwrap(), vec![p]);
    let start = start(t, "orders.dlq");
    store.begin_replay(&start).unwrap();
    let authors = store
        .run_authors(&[start.run_id.clone(), "unknown".into()])
        .unwrap();
    assert_eq!(authors.len(), 1);
    assert_eq!(authors[&start.run_id], ("alice".to_string(), t));
    assert_eq!(
        store.list_audit(1).unwrap()[0].run_id.as_deref(),
        Some(start.run_id.as_str())
    );
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert!(conn.execute("DELETE FROM protects", []).is_err());
    assert!(conn.execute("UPDATE protects SET queue = 'x'", []).is_err());
}

#[test]
fn a_run_of_more_ids_than_one_insert_chunk_keeps_their_order_and_each_is_found_by_key() {
    // The moved ids go in sorted a chunk at a time (65,536 ids or 4 MiB): 70,000 random-looking
    // ids, and the same id twice, span two chunks and must come back as the run moved them.
    let dir = TempDir::new("audit-chunks");
    let store = Store::open(&dir.path().join("warren.db")).unwrap();
    let t = Timestamp::from_second(1_759_042_215).unwrap();
    let mut ids: Vec<String> = (0..70_000u64)
        .map(|i| format!("id:{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
        .collect();
    ids.push(ids[3].clone());
    let id = store.begin_replay(&start(t, "orders.dlq")).unwrap();
    let out = AuditOutcome {
        moved: ids.len() as u64,
        message_ids: vec!["id:first".into()],
        ..outcome(t)
    };
    store
        .finish_replay_with(id, &out, |put| {
            for k in &ids {
                put(k.clone());
            }
        })
        .unwrap();
    let rec = &store.list_audit(1).unwrap()[0];
    assert_eq!(rec.message_ids.len(), ids.len() + 1);
    assert_eq!(rec.message_ids[0], "id:first");
    assert!(rec.message_ids[1..] == ids[..], "in the order they moved");
    let wanted = vec![ids[0].clone(), ids[3].clone(), ids[69_999].clone()];
    let counts = store.replay_counts("local", "/", &wanted).unwrap();
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(
        counts.values().all(|&n| n == 1),
        "once per replay: {counts:?}"
    );
}
