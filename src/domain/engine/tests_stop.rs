//! What a run's reason to stop says after a cancel or a fault that came once the run had
//! reached its own end: it never says "every message" when a selected one was left behind.

use super::tests::{confirm, engine, publish, send, settle_ok};
use super::*;

/// Four messages at the start, three published and confirmed, the fourth delivered last and
/// waiting for its rate slot: the run has reached the start depth and stops taking.
fn last_waits_for_its_slot(t0: Instant) -> Engine {
    let mut e = engine(4, t0);
    send(&mut e, t0, 1..=3);
    for t in 1..=3 {
        e.on(t0, confirm(t, ConfirmOutcome::Ack));
    }
    e.on(t0, publish(4));
    assert_eq!(e.stop_reason(), Some(&StopReason::ReachedStartDepth));
    assert!(e.wants().slot, "the fourth waits for its slot");
    e
}

#[test]
fn a_cancel_that_hands_back_the_waiting_message_is_a_cancel() {
    let t0 = Instant::now();
    let mut e = last_waits_for_its_slot(t0);
    let fx = e.on(t0, Event::Cancel);
    assert!(!e.wants().slot, "the waiting one is not sent");
    assert_eq!(e.stop_reason(), Some(&StopReason::Cancelled));
    let steps = settle_ok(&mut e, t0, fx);
    assert!(steps.contains(&Effect::Nack { top: 4 }), "{steps:?}");
    let t = e.tally();
    assert_eq!((t.seen, t.moved, t.untouched, t.published), (4, 3, 1, 3));
    assert!(!e.stop_reason().is_some_and(StopReason::is_finished));
}

#[test]
fn a_cancel_after_the_last_publish_leaves_the_run_finished() {
    let t0 = Instant::now();
    let mut e = last_waits_for_its_slot(t0);
    assert_eq!(e.on(t0, Event::Slot), vec![Effect::Publish(4)]);
    // Nothing selected is left undone: the cancel only waits for the last confirm.
    assert!(e.on(t0, Event::Cancel).is_empty());
    let fx = e.on(t0, confirm(4, ConfirmOutcome::Ack));
    settle_ok(&mut e, t0, fx);
    assert_eq!(e.stop_reason(), Some(&StopReason::ReachedStartDepth));
    let t = e.tally();
    assert_eq!((t.moved, t.untouched, t.duplicated), (4, 0, 0));
}

#[test]
fn a_second_cancel_after_the_start_depth_ends_the_run_as_cancelled() {
    let t0 = Instant::now();
    let mut e = engine(2, t0);
    send(&mut e, t0, 1..=2);
    assert_eq!(e.stop_reason(), Some(&StopReason::ReachedStartDepth));
    e.on(t0, Event::Cancel);
    assert_eq!(e.on(t0, Event::Cancel), vec![Effect::Finish]);
    assert_eq!(e.stop_reason(), Some(&StopReason::Cancelled));
    assert_eq!(e.tally().duplicated, 2, "both publishes were unanswered");
}

#[test]
fn a_lost_channel_after_the_start_depth_names_the_fault() {
    let t0 = Instant::now();
    let mut e = last_waits_for_its_slot(t0);
    e.on(t0, Event::ConsumeLost("channel closed".into()));
    assert!(
        matches!(e.stop_reason(), Some(StopReason::ConnectionLost(_))),
        "{:?}",
        e.stop_reason()
    );
    assert_eq!(e.tally().untouched, 1);
}

#[test]
fn a_limit_reached_then_cancelled_with_nothing_waiting_stays_reached() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    e.cfg.limit = Some(1);
    send(&mut e, t0, [1]);
    assert_eq!(e.stop_reason(), Some(&StopReason::LimitReached));
    e.on(t0, Event::Cancel);
    let fx = e.on(t0, confirm(1, ConfirmOutcome::Ack));
    settle_ok(&mut e, t0, fx);
    assert_eq!(e.stop_reason(), Some(&StopReason::LimitReached));
    assert_eq!(e.tally().untouched, 0);
}
