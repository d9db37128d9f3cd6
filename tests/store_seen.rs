//! First-seen times in Warren's store: written once, kept across reopen, fast for big queues.

use crate::store_util;

use std::time::Instant;

use jiff::{SignedDuration, Timestamp};
use store_util::TempDir;
use warren::store::Store;

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

#[test]
fn first_seen_is_kept_across_reopen_and_never_overwritten() {
    let dir = TempDir::new("seen-reopen");
    let path = dir.path().join("nested/warren.db");
    let t1 = Timestamp::from_second(1_759_042_215).unwrap();
    let t2 = t1 + SignedDuration::from_hours(3);

    let store = Store::open(&path).unwrap();
    let first = store
        .record_seen("local/orders", "orders.dlq", &keys("id", 3), t1)
        .unwrap();
    assert_eq!(first.len(), 3);
    assert!(first.values().all(|t| *t == t1));
    drop(store);

    let store = Store::open(&path).unwrap();
    let mut later = keys("id", 3);
    later.push("id:new".to_string());
    let second = store
        .record_seen("local/orders", "orders.dlq", &later, t2)
        .unwrap();
    assert_eq!(second.len(), 4);
    for k in keys("id", 3) {
        assert_eq!(second.get(&k), Some(&t1), "{k} was overwritten");
    }
    assert_eq!(second.get("id:new"), Some(&t2));
}

#[test]
fn queues_and_vhosts_are_remembered_apart() {
    let dir = TempDir::new("seen-apart");
    let store = Store::open(&dir.path().join("warren.db")).unwrap();
    let t1 = Timestamp::from_second(1_700_000_000).unwrap();
    let t2 = t1 + SignedDuration::from_mins(5);
    let k = vec!["id:same".to_string()];
    store.record_seen("ctx-a/", "q", &k, t1).unwrap();
    let other_queue = store.record_seen("ctx-a/", "q2", &k, t2).unwrap();
    let other_vhost = store.record_seen("ctx-b/", "q", &k, t2).unwrap();
    let same = store.record_seen("ctx-a/", "q", &k, t2).unwrap();
    assert_eq!(other_queue.get("id:same"), Some(&t2));
    assert_eq!(other_vhost.get("id:same"), Some(&t2));
    assert_eq!(same.get("id:same"), Some(&t1));
}

#[test]
fn duplicate_and_empty_key_lists() {
    let dir = TempDir::new("seen-dups");
    let store = Store::open(&dir.path().join("warren.db")).unwrap();
    let now = Timestamp::from_second(1_700_000_000).unwrap();
    assert!(store.record_seen("v", "q", &[], now).unwrap().is_empty());
    let dup = vec!["hash:1".to_string(), "hash:1".to_string()];
    let seen = store.record_seen("v", "q", &dup, now).unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen.get("hash:1"), Some(&now));
}

#[test]
fn a_hundred_thousand_keys_in_one_call() {
    let dir = TempDir::new("seen-100k");
    let store = Store::open(&dir.path().join("warren.db")).unwrap();
    let t1 = Timestamp::from_second(1_700_000_000).unwrap();
    let all = keys("hash", 100_000);

    let started = Instant::now();
    let seen = store.record_seen("local/", "big.dlq", &all, t1).unwrap();
    let fresh = started.elapsed();
    assert_eq!(seen.len(), 100_000);

    // The second browse of the same queue: every key already known.
    let t2 = t1 + SignedDuration::from_mins(1);
    let started = Instant::now();
    let again = store.record_seen("local/", "big.dlq", &all, t2).unwrap();
    let known = started.elapsed();
    assert_eq!(again.len(), 100_000);
    assert!(again.values().all(|t| *t == t1));
    println!("100,000 keys: {fresh:.2?} new, {known:.2?} already known");
}
