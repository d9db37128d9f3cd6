//! The plan's policy without a broker: the count confirmed, what was looked at and said, where
//! messages go when it is known without looking.

use std::collections::HashSet;
use std::sync::Arc;

use super::*;
use crate::domain::message::{DeadLetter, Properties};
use crate::domain::value::{HeaderValue, Table};

fn rejected_by(queue: &str, id: &str) -> DeadLetter {
    let death: Table = [
        ("count", HeaderValue::I64(1)),
        ("reason", HeaderValue::string("rejected")),
        ("queue", HeaderValue::string(queue)),
        ("time", HeaderValue::Timestamp(1_700_000_000)),
        ("exchange", HeaderValue::string("")),
        (
            "routing-keys",
            HeaderValue::Array(vec![HeaderValue::string(queue)]),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut headers = Table::default();
    headers.insert(
        "x-death",
        HeaderValue::Array(vec![HeaderValue::Table(death)]),
    );
    DeadLetter {
        queue: "orders.dlq".into(),
        properties: Properties {
            message_id: Some(id.into()),
            ..Properties::default()
        },
        headers,
        body: b"{}".to_vec(),
        body_size: 2,
        ..DeadLetter::default()
    }
}

fn spec(selection: Selection, limit: Option<u64>) -> ReplaySpec {
    ReplaySpec {
        selection,
        limit,
        ..ReplaySpec::all_of("orders.dlq", 100)
    }
}

fn look(spec: &ReplaySpec, depth: u64) -> Looked {
    let head = vec![
        rejected_by("orders", "a"),
        rejected_by("orders", "b"),
        rejected_by("orders", "c"),
    ];
    look_at(
        &Conventions::default(),
        spec,
        head,
        depth,
        &Arc::new(Redirects::default()),
        |_| Remembered::default(),
    )
}

#[test]
fn all_of_a_deeper_queue_confirms_the_depth_and_says_only_the_head_was_looked_at() {
    let l = look(&spec(Selection::All, None), 10);
    assert_eq!((l.p.examined, l.p.matched, l.p.selected), (3, 3, 10));
    assert_eq!(l.p.targets.get("orders").map(|t| t.count), Some(3));
    assert!(
        l.p.warnings
            .keys()
            .any(|w| w.starts_with("only the first 3 of 10 were looked at")),
        "{:?}",
        l.p.warnings
    );
    // A limit caps the count confirmed: the run stops there.
    assert_eq!(look(&spec(Selection::All, Some(5)), 10).p.selected, 5);
}

#[test]
fn a_selection_confirms_what_matched_and_says_later_matches_stay() {
    let keys: HashSet<String> = look(&spec(Selection::All, None), 3).p.keys[..1]
        .iter()
        .cloned()
        .collect();
    let l = look(&spec(Selection::Keys(keys), None), 10);
    assert_eq!((l.p.matched, l.p.selected), (1, 1));
    assert!(
        l.p.warnings
            .keys()
            .any(|w| w.starts_with("the selection was matched against the first 3 of 10")),
        "{:?}",
        l.p.warnings
    );
}

#[test]
fn the_target_is_known_without_looking_only_for_all_of_the_queue() {
    let mut to = spec(Selection::All, None);
    to.to = Some("orders".into());
    let ((target, redirected), why) =
        known_target(&to, &Redirects::default(), None).expect("--to names it");
    assert_eq!(target.expected_queue.as_deref(), Some("orders"));
    assert!(redirected.is_none());
    assert!(why.contains("--to names 'orders'"), "{why}");
    to.selection = Selection::Keys(HashSet::new());
    assert!(known_target(&to, &Redirects::default(), None).is_none());
    // Nothing known of the DLQ's feeders: the plan must look.
    assert!(known_target(&spec(Selection::All, None), &Redirects::default(), None).is_none());
}

#[test]
fn a_plan_reads_nothing_first_only_for_all_of_a_queue_that_is_not_a_skipped_queue() {
    assert!(checks_as_met(&spec(Selection::All, None)));
    let mut skipped = spec(Selection::All, None);
    skipped.queue = "orders_skipped".into();
    assert!(!checks_as_met(&skipped));
    let mut to = spec(Selection::All, None);
    to.to = Some("orders".into());
    assert!(!checks_as_met(&to));
    assert!(!checks_as_met(&spec(Selection::Keys(HashSet::new()), None)));
}
