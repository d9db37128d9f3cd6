use super::*;

pub(super) fn engine(depth: u64, t0: Instant) -> Engine {
    Engine::new(
        Config {
            depth_at_start: depth,
            limit: None,
            window: 50,
            prefetch: 100,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Queue,
        },
        t0,
    )
}

pub(super) fn publish(tag: u64) -> Event {
    Event::Delivery {
        tag,
        decision: Decision::Publish {
            key: format!("k{tag}"),
            target: "work".into(),
        },
        near_limit: None,
    }
}

pub(super) fn confirm(tag: u64, outcome: ConfirmOutcome) -> Event {
    Event::Confirm { tag, outcome }
}

/// Delivers and publishes `tags` (each: delivery, then its slot).
pub(super) fn send(e: &mut Engine, now: Instant, tags: impl IntoIterator<Item = u64>) {
    for t in tags {
        assert!(e.wants().take, "takes delivery {t}");
        e.on(now, publish(t));
        assert!(e.wants().slot);
        assert_eq!(e.on(now, Event::Slot), vec![Effect::Publish(t)]);
    }
}

/// Walks the settling steps with every answer Ok; returns the effects seen.
pub(super) fn settle_ok(e: &mut Engine, now: Instant, mut fx: Vec<Effect>) -> Vec<Effect> {
    let mut seen = Vec::new();
    while let Some(f) = fx.first().cloned() {
        fx.remove(0);
        seen.push(f.clone());
        let next = match f {
            Effect::CancelConsumer => e.on(now, Event::ConsumerCancelled(Ok(()))),
            Effect::Drain => e.on(now, Event::DrainDone),
            Effect::Nack { .. } => e.on(now, Event::HandedBack(Ok(()))),
            Effect::Close => e.on(now, Event::Closed(Ok(()))),
            Effect::Ack(_) => e.on(now, Event::AcksWritten(Ok(()))),
            _ => Vec::new(),
        };
        fx.extend(next);
    }
    seen
}

#[test]
fn a_clean_run_acks_confirmed_publishes_and_settles_in_order() {
    let t0 = Instant::now();
    let mut e = engine(3, t0);
    send(&mut e, t0, 1..=2);
    e.on(t0, publish(3));
    assert!(!e.wants().take, "the start depth is reached");
    assert_eq!(e.on(t0, Event::Slot), vec![Effect::Publish(3)]);
    assert!(
        e.on(t0, confirm(2, ConfirmOutcome::Ack)).is_empty(),
        "2 waits for 1"
    );
    // Acks wait for a batch, for nothing pending, or for `ack_every`.
    let t1 = t0 + Limits::default().ack_every;
    assert_eq!(
        e.on(t1, confirm(1, ConfirmOutcome::Ack)),
        vec![Effect::Ack(vec![AckOp {
            tag: 2,
            multiple: true
        }])]
    );
    let fx = e.on(t0, confirm(3, ConfirmOutcome::Ack));
    let steps = settle_ok(&mut e, t0, fx);
    assert_eq!(
        steps,
        vec![
            Effect::Ack(vec![AckOp {
                tag: 3,
                multiple: true
            }]),
            Effect::CancelConsumer,
            Effect::Drain,
            Effect::Close,
            Effect::Finish
        ]
    );
    assert!(e.is_done());
    let t = e.tally();
    assert_eq!((t.moved, t.failed, t.returned, t.duplicated), (3, 0, 0, 0));
    assert_eq!(e.stop_reason(), Some(&StopReason::ReachedStartDepth));
    assert_eq!(t.moved_ids, vec!["k2", "k1", "k3"]);
}

#[test]
fn blocked_publishing_is_reported_waits_and_then_stops_at_its_deadline() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    send(&mut e, t0, [1]);
    e.on(t0, Event::Blocked("low on memory".into()));
    assert_eq!(e.tally().blocked.as_deref(), Some("low on memory"));
    e.on(t0, publish(2));
    assert!(!e.wants().slot, "nothing is published while blocked");
    // The confirm deadline does not run while blocked; the blocked deadline does.
    let later = t0 + Duration::from_secs(45);
    assert!(e.on(later, Event::Tick).is_empty());
    assert_eq!(e.stop_reason(), None);
    let at = e.deadline().expect("a deadline while blocked");
    assert_eq!(at, t0 + Limits::default().blocked);
    let fx = e.on(at, Event::Tick);
    assert!(matches!(
        e.stop_reason(),
        Some(StopReason::Blocked { secs: 60, reason }) if reason == "low on memory"
    ));
    assert_eq!(fx, vec![Effect::CancelConsumer], "settles at once");
    let steps = settle_ok(&mut e, at, fx);
    assert!(steps.contains(&Effect::Nack { top: 2 }), "{steps:?}");
    let t = e.tally();
    assert_eq!(t.failed, 1, "the unconfirmed publish");
    assert_eq!(t.duplicated, 1, "it may still reach the target");
    assert_eq!(t.duplicate_ids, vec!["k1"]);
}

#[test]
fn unblocking_restarts_the_confirm_clock() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    send(&mut e, t0, [1]);
    e.on(t0, Event::Blocked("low on disk".into()));
    let u = t0 + Duration::from_secs(50);
    e.on(u, Event::Unblocked);
    assert_eq!(e.tally().blocked, None);
    e.on(u + Duration::from_secs(29), Event::Tick);
    assert!(
        !matches!(e.stop_reason(), Some(StopReason::NoConfirm { .. })),
        "29 s after unblocking is within the confirm deadline"
    );
    e.on(u + Duration::from_secs(30), Event::Tick);
    assert!(matches!(
        e.stop_reason(),
        Some(StopReason::NoConfirm { .. }) | Some(StopReason::Stalled { .. })
    ));
}

#[test]
fn a_confirm_that_never_comes_stops_the_run_with_a_reason() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    send(&mut e, t0, 1..=3);
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    let late = t0 + Duration::from_secs(30);
    let fx = e.on(late, Event::Tick);
    assert_eq!(
        e.stop_reason(),
        Some(&StopReason::NoConfirm {
            secs: 30,
            unconfirmed: 2
        })
    );
    let steps = settle_ok(&mut e, late, fx);
    assert!(steps.contains(&Effect::Nack { top: 3 }), "{steps:?}");
    // A confirm arriving after the deadline changes nothing.
    assert!(e.on(late, confirm(2, ConfirmOutcome::Ack)).is_empty());
    let t = e.tally();
    assert_eq!((t.moved, t.failed, t.duplicated), (1, 2, 2));
    assert!(e.stop_reason().is_some_and(StopReason::is_fault));
}

#[test]
fn silence_asks_the_broker_and_only_zero_ready_is_empty() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    let idle = t0 + Duration::from_secs(2);
    assert_eq!(e.deadline(), Some(idle));
    assert_eq!(e.on(idle, Event::Tick), vec![Effect::AskDepth]);
    assert!(e.deadline().is_none(), "one question at a time");
    e.on(idle, Event::Depth(Ok(7)));
    assert_eq!(e.stop_reason(), None, "not empty, not stalled yet");
    let t = t0 + Duration::from_secs(10);
    assert_eq!(e.on(t, Event::Tick), vec![Effect::AskDepth]);
    e.on(t, Event::Depth(Ok(7)));
    assert_eq!(
        e.stop_reason(),
        Some(&StopReason::Stalled {
            idle_secs: 10,
            ready: 7
        })
    );
    assert!(!e.stop_reason().is_some_and(StopReason::is_finished));

    let mut e = engine(10, t0);
    e.on(idle, Event::Tick);
    e.on(idle, Event::Depth(Ok(0)));
    assert_eq!(e.stop_reason(), Some(&StopReason::QueueEmpty));

    let mut e = engine(10, t0);
    e.on(idle, Event::Tick);
    e.on(idle, Event::Depth(Err("timed out".into())));
    assert!(matches!(e.stop_reason(), Some(StopReason::NoAnswer(_))));
}

#[test]
fn a_full_prefetch_is_not_silence() {
    let t0 = Instant::now();
    let mut e = Engine::new(
        Config {
            depth_at_start: 100,
            limit: None,
            window: 50,
            prefetch: 2,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Queue,
        },
        t0,
    );
    send(&mut e, t0, 1..=2);
    let t = t0 + Duration::from_secs(5);
    assert!(
        e.on(t, Event::Tick).is_empty(),
        "waits for confirms, asks nothing"
    );
}

#[test]
fn cancel_settles_and_a_second_cancel_ends_at_once_counting_duplicates() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    send(&mut e, t0, 1..=3);
    // 2 and 3 confirmed, 1 not: nothing can be acked yet.
    e.on(t0, confirm(2, ConfirmOutcome::Ack));
    e.on(t0, confirm(3, ConfirmOutcome::Ack));
    e.on(t0, publish(4));
    let fx = e.on(t0, Event::Cancel);
    assert!(fx.is_empty(), "waits for the publish in flight: {fx:?}");
    assert!(
        !e.wants().take && !e.wants().slot,
        "the waiting one is not sent"
    );
    assert_eq!(e.stop_reason(), Some(&StopReason::Cancelled));
    assert_eq!(e.on(t0, Event::Cancel), vec![Effect::Finish]);
    assert!(e.is_done());
    let t = e.tally();
    assert!(t.forced.is_some());
    assert_eq!(t.duplicated_certain, 2, "confirmed, never acked");
    assert_eq!(
        t.duplicated, 3,
        "and the unanswered publish may have arrived"
    );
    let mut ids = t.duplicate_ids.clone();
    ids.sort();
    assert_eq!(ids, vec!["k1", "k2", "k3"]);
}

#[test]
fn a_cancel_while_blocked_does_not_wait_for_confirms() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    send(&mut e, t0, 1..=2);
    e.on(t0, Event::Blocked("low on memory".into()));
    let fx = e.on(t0, Event::Cancel);
    assert_eq!(fx, vec![Effect::CancelConsumer]);
    let steps = settle_ok(&mut e, t0, fx);
    assert!(steps.contains(&Effect::Nack { top: 2 }));
    assert_eq!(e.tally().duplicated, 2);
}

#[test]
fn settling_past_its_deadline_is_forced() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    send(&mut e, t0, [1]);
    assert_eq!(
        e.on(t0, confirm(1, ConfirmOutcome::Ack)),
        vec![Effect::Ack(vec![AckOp {
            tag: 1,
            multiple: true
        }])],
        "nothing else pending: acked at once"
    );
    e.on(t0, Event::AcksWritten(Ok(())));
    assert_eq!(e.on(t0, Event::Cancel), vec![Effect::CancelConsumer]);
    // cancel-ok never comes.
    let late = t0 + Limits::default().settle;
    assert_eq!(e.deadline(), Some(late));
    assert_eq!(e.on(late, Event::Tick), vec![Effect::Finish]);
    let t = e.tally();
    assert!(t.forced.as_deref().is_some_and(|f| f.contains("settling")));
    assert_eq!(t.duplicated, 1, "the ack was written but never proven");
    assert_eq!(t.duplicated_certain, 0);
}

#[test]
fn returned_after_confirm_and_nacked_publishes_are_held_and_handed_back() {
    let t0 = Instant::now();
    let mut e = engine(3, t0);
    send(&mut e, t0, 1..=3);
    e.on(
        t0,
        confirm(1, ConfirmOutcome::Returned("312 NO_ROUTE".into())),
    );
    e.on(t0, confirm(2, ConfirmOutcome::Nack));
    let fx = e.on(t0, confirm(3, ConfirmOutcome::Ack));
    let steps = settle_ok(&mut e, t0, fx);
    assert_eq!(
        steps,
        vec![
            Effect::Ack(vec![AckOp {
                tag: 3,
                multiple: false
            }]),
            Effect::CancelConsumer,
            Effect::Drain,
            Effect::Nack { top: 3 },
            Effect::Close,
            Effect::Finish
        ]
    );
    let t = e.tally();
    assert_eq!((t.moved, t.returned, t.failed), (1, 1, 1));
    assert_eq!(t.problems.len(), 2);
    assert_eq!(e.stop_reason(), Some(&StopReason::ReachedStartDepth));
}

#[test]
fn deliveries_drained_after_cancel_are_handed_back() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    send(&mut e, t0, [1]);
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    e.on(t0, Event::AcksWritten(Ok(())));
    let fx = e.on(t0, Event::Cancel);
    assert!(fx.contains(&Effect::CancelConsumer));
    assert_eq!(
        e.on(t0, Event::ConsumerCancelled(Ok(()))),
        vec![Effect::Drain]
    );
    e.on(t0, Event::Drained(2));
    e.on(t0, Event::Drained(3));
    assert_eq!(e.on(t0, Event::DrainDone), vec![Effect::Nack { top: 3 }]);
}

#[test]
fn channel_loss_counts_confirmed_unacked_and_unproven_acks_as_duplicates() {
    let t0 = Instant::now();
    let mut e = engine(100, t0);
    send(&mut e, t0, 1..=4);
    // 1 and 2 confirmed and acked (written, not yet proven).
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    let t1 = t0 + Limits::default().ack_every;
    let fx = e.on(t1, confirm(2, ConfirmOutcome::Ack));
    assert!(matches!(fx.first(), Some(Effect::Ack(_))), "{fx:?}");
    e.on(t0, Event::AcksWritten(Ok(())));
    // 4 confirmed, waits for 3.
    e.on(t0, confirm(4, ConfirmOutcome::Ack));
    let fx = e.on(t0, Event::ConsumeLost("connection reset".into()));
    assert_eq!(fx, vec![Effect::Close]);
    e.on(t0, Event::Closed(Err("closed".into())));
    assert!(e.is_done());
    let t = e.tally();
    assert_eq!(t.duplicated_certain, 1, "4: confirmed, never acked");
    assert_eq!(t.duplicated, 4, "1, 2 (ack unproven), 3 (unanswered), 4");
    assert!(matches!(
        e.stop_reason(),
        Some(StopReason::ConnectionLost(_))
    ));
}

#[test]
fn a_sync_round_trip_proves_the_acks_before_it() {
    let t0 = Instant::now();
    let mut e = engine(100, t0);
    send(&mut e, t0, 1..=2);
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    e.on(t0, Event::AcksWritten(Ok(())));
    let t1 = t0 + Duration::from_secs(1);
    let fx = e.on(t1, confirm(2, ConfirmOutcome::Ack));
    assert_eq!(
        fx,
        vec![
            Effect::Ack(vec![AckOp {
                tag: 2,
                multiple: true
            }]),
            Effect::Sync
        ]
    );
    e.on(t1, Event::AcksWritten(Ok(())));
    e.on(t1, Event::Synced(Ok(())));
    e.on(t1, Event::ConsumeLost("gone".into()));
    e.on(t1, Event::Closed(Err("gone".into())));
    assert_eq!(e.tally().duplicated, 0, "both acks were proven");
}

/// A quorum DLQ settles through Raft after the channel processed the ack: a round trip
/// proves an ack only once it has been processed for `settle_lag`, so a node loss in
/// between counts it as a possible duplicate (a real run lost 3 such settles).
#[test]
fn a_quorum_ack_is_proven_only_after_the_settle_lag() {
    let t0 = Instant::now();
    let lag = Duration::from_secs(2);
    let run = |lost_at: Duration| {
        let mut e = Engine::new(
            Config {
                depth_at_start: 100,
                limit: None,
                window: 50,
                prefetch: 100,
                limits: Limits::default(),
                settle_lag: lag,
                backlog: None,
                source: Source::Queue,
            },
            t0,
        );
        send(&mut e, t0, 1..=2);
        e.on(t0, confirm(1, ConfirmOutcome::Ack));
        e.on(t0, Event::AcksWritten(Ok(())));
        let t1 = t0 + Duration::from_secs(1);
        let fx = e.on(t1, confirm(2, ConfirmOutcome::Ack));
        assert!(fx.contains(&Effect::Sync), "{fx:?}");
        e.on(t1, Event::AcksWritten(Ok(())));
        e.on(t1, Event::Synced(Ok(())));
        // Syncs go on while acks wait for the lag.
        let mut t = t1;
        while t < t0 + lost_at {
            t += Duration::from_millis(500);
            for f in e.on(t, Event::Tick) {
                if f == Effect::Sync {
                    e.on(t, Event::Synced(Ok(())));
                }
            }
        }
        e.on(t0 + lost_at, Event::ConsumeLost("node down".into()));
        e.on(t0 + lost_at, Event::Closed(Err("node down".into())));
        e.tally().duplicated
    };
    assert_eq!(run(Duration::from_secs(1)), 2, "processed, not yet settled");
    assert_eq!(run(Duration::from_millis(2500)), 2, "processed 1.5 s ago");
    assert_eq!(run(Duration::from_secs(4)), 0, "settled for good");
}

#[test]
fn refused_and_unselected_messages_fill_the_window() {
    let t0 = Instant::now();
    let mut e = Engine::new(
        Config {
            depth_at_start: 100,
            limit: None,
            window: 2,
            prefetch: 100,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Queue,
        },
        t0,
    );
    e.on(
        t0,
        Event::Delivery {
            tag: 1,
            decision: Decision::Skip,
            near_limit: None,
        },
    );
    let fx = e.on(
        t0,
        Event::Delivery {
            tag: 2,
            decision: Decision::Refuse("not in the preview".into()),
            near_limit: None,
        },
    );
    assert_eq!(e.stop_reason(), Some(&StopReason::WindowFull { window: 2 }));
    assert_eq!(fx, vec![Effect::CancelConsumer]);
    assert_eq!((e.tally().held_back, e.tally().failed), (1, 1));
}

#[test]
fn kept_messages_are_held_back_with_why_and_do_not_count_against_the_limit() {
    let t0 = Instant::now();
    let mut e = Engine::new(
        Config {
            depth_at_start: 10,
            limit: Some(1),
            window: 100,
            prefetch: 100,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Queue,
        },
        t0,
    );
    let why = "its `expires` has passed".to_string();
    for tag in [1, 2] {
        e.on(
            t0,
            Event::Delivery {
                tag,
                decision: Decision::Keep(why.clone()),
                near_limit: None,
            },
        );
    }
    assert_eq!(e.stop_reason(), None, "kept messages are not the limit");
    e.on(
        t0,
        Event::Delivery {
            tag: 3,
            decision: Decision::Publish {
                key: "k".into(),
                target: "work".into(),
            },
            near_limit: None,
        },
    );
    let fx = e.on(t0, Event::Slot);
    assert!(fx.contains(&Effect::Publish(3)), "{fx:?}");
    assert_eq!(e.stop_reason(), Some(&StopReason::LimitReached));
    let t = e.tally();
    assert_eq!((t.held_back, t.failed), (2, 0));
    assert_eq!(t.kept.get(&why), Some(&2));
}

#[test]
fn held_messages_filling_the_prefetch_stop_the_run_instead_of_waiting() {
    let t0 = Instant::now();
    let mut e = Engine::new(
        Config {
            depth_at_start: 100,
            limit: None,
            window: 5000,
            prefetch: 3,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Queue,
        },
        t0,
    );
    send(&mut e, t0, 1..=3);
    e.on(t0, confirm(1, ConfirmOutcome::Nack));
    e.on(t0, confirm(2, ConfirmOutcome::Nack));
    assert_eq!(e.stop_reason(), None);
    let fx = e.on(t0, confirm(3, ConfirmOutcome::Nack));
    assert_eq!(
        e.stop_reason(),
        Some(&StopReason::RefusedFillPrefetch {
            held: 3,
            refused: 3
        })
    );
    assert_eq!(fx, vec![Effect::CancelConsumer]);
}

#[test]
fn returns_filling_the_prefetch_stop_the_run_and_say_why() {
    let t0 = Instant::now();
    let mut e = Engine::new(
        Config {
            depth_at_start: 100,
            limit: None,
            window: 5000,
            prefetch: 2,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Queue,
        },
        t0,
    );
    send(&mut e, t0, 1..=2);
    e.on(
        t0,
        confirm(1, ConfirmOutcome::Returned("312 NO_ROUTE".into())),
    );
    assert_eq!(e.stop_reason(), None);
    e.on(
        t0,
        confirm(2, ConfirmOutcome::Returned("312 NO_ROUTE".into())),
    );
    let why = e.stop_reason().expect("stopped").to_string();
    assert!(
        why.starts_with("2 published message(s) came back returned"),
        "{why}"
    );
    assert!(why.contains("prefetch (2)"), "{why}");
    assert!(!why.contains("no delivery"), "{why}");
}

#[test]
fn the_limit_stops_after_the_last_publish_and_it_is_still_confirmed() {
    let t0 = Instant::now();
    let mut e = Engine::new(
        Config {
            depth_at_start: 100,
            limit: Some(2),
            window: 50,
            prefetch: 100,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Queue,
        },
        t0,
    );
    send(&mut e, t0, 1..=2);
    assert_eq!(e.stop_reason(), Some(&StopReason::LimitReached));
    assert!(e.wants().confirms);
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    let fx = e.on(t0, confirm(2, ConfirmOutcome::Ack));
    assert!(fx.contains(&Effect::CancelConsumer));
    assert_eq!(e.tally().moved, 2);
}

fn discard(tag: u64) -> Event {
    Event::Delivery {
        tag,
        decision: Decision::Discard {
            key: format!("k{tag}"),
        },
        near_limit: None,
    }
}

#[test]
fn a_discard_is_acknowledged_without_a_publish_and_settles_like_a_move() {
    let t0 = Instant::now();
    let mut e = engine(3, t0);
    let fx = e.on(t0, discard(1));
    assert_eq!(
        fx,
        vec![Effect::Ack(vec![AckOp {
            tag: 1,
            multiple: true
        }])],
        "no publish, no confirm to wait for: acknowledged at once"
    );
    assert!(!e.wants().slot && !e.wants().confirms);
    e.on(
        t0,
        Event::Delivery {
            tag: 2,
            decision: Decision::Skip,
            near_limit: None,
        },
    );
    let fx = e.on(t0, discard(3));
    let steps = settle_ok(&mut e, t0, fx);
    assert_eq!(
        steps,
        vec![
            // 3 is above the held 2: acknowledged alone, never with a multiple ack.
            Effect::Ack(vec![AckOp {
                tag: 3,
                multiple: false
            }]),
            Effect::CancelConsumer,
            Effect::Drain,
            Effect::Nack { top: 3 },
            Effect::Close,
            Effect::Finish
        ]
    );
    let t = e.tally();
    assert_eq!((t.moved, t.discarded, t.published), (2, 2, 0));
    assert_eq!((t.held_back, t.duplicated), (1, 0));
    assert_eq!(t.moved_ids, vec!["k1", "k3"]);
}

#[test]
fn discards_count_against_the_limit() {
    let t0 = Instant::now();
    let mut e = Engine::new(
        Config {
            depth_at_start: 100,
            limit: Some(2),
            window: 50,
            prefetch: 100,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Queue,
        },
        t0,
    );
    e.on(t0, discard(1));
    assert_eq!(e.stop_reason(), None);
    e.on(t0, discard(2));
    assert_eq!(e.stop_reason(), Some(&StopReason::LimitReached));
    assert!(!e.wants().take, "nothing more is taken");
}

#[test]
fn a_discard_whose_ack_was_never_proven_may_still_be_in_the_dlq() {
    let t0 = Instant::now();
    let mut e = engine(10, t0);
    let fx = e.on(t0, discard(1));
    assert!(matches!(fx.as_slice(), [Effect::Ack(_)]));
    // The channel dies before any round trip proved the ack.
    e.on(t0, Event::AcksWritten(Ok(())));
    let fx = e.on(t0, Event::ConsumeLost("connection reset".into()));
    assert_eq!(fx, vec![Effect::Close]);
    e.on(t0, Event::Closed(Err("closed".into())));
    let t = e.tally();
    assert_eq!((t.discarded, t.duplicated, t.duplicated_certain), (1, 1, 0));
    assert_eq!(t.duplicate_ids, vec!["k1"]);
}

fn unchecked(tag: u64, target: &str) -> Event {
    Event::Delivery {
        tag,
        decision: Decision::Unchecked {
            key: format!("k{tag}"),
            target: target.into(),
            check: format!("check {target}"),
        },
        near_limit: None,
    }
}

fn checked(target: &str, result: Result<Option<String>, String>) -> Event {
    Event::TargetChecked {
        check: format!("check {target}"),
        result,
    }
}

#[test]
fn a_message_whose_target_is_not_checked_waits_for_the_check_and_nothing_more_is_taken() {
    let t0 = Instant::now();
    let mut e = engine(3, t0);
    assert_eq!(
        e.on(t0, unchecked(1, "a")),
        vec![Effect::CheckTarget("check a".into())]
    );
    let w = e.wants();
    assert!(!w.take, "nothing more is taken while the check runs");
    assert!(!w.slot, "and the message is not published before it");
    // A stop by its own measure does not settle before the check answered.
    assert!(e.on(t0, Event::Tick).is_empty());
    assert!(e.on(t0, checked("a", Ok(None))).is_empty());
    assert!(e.wants().slot, "checked: it goes to its slot");
    assert_eq!(e.on(t0, Event::Slot), vec![Effect::Publish(1)]);
    // The next message of that target is not checked again.
    assert!(e.wants().take);
    assert!(e.on(t0, unchecked(2, "a")).is_empty());
    assert_eq!(e.on(t0, Event::Slot), vec![Effect::Publish(2)]);
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    e.on(t0, confirm(2, ConfirmOutcome::Ack));
    assert_eq!(e.tally().targets.get("a"), Some(&2));
}

#[test]
fn a_failed_check_holds_its_messages_back_with_why_and_the_others_go_on() {
    let t0 = Instant::now();
    let mut e = engine(5, t0);
    assert_eq!(
        e.on(t0, unchecked(1, "gone")),
        vec![Effect::CheckTarget("check gone".into())]
    );
    let why = "target queue 'gone' does not exist; its messages stay in the DLQ";
    assert!(e.on(t0, checked("gone", Err(why.into()))).is_empty());
    assert!(!e.wants().slot, "never published");
    assert!(e.wants().take, "the run goes on");
    assert_eq!(
        e.on(t0, unchecked(2, "work")),
        vec![Effect::CheckTarget("check work".into())]
    );
    // A wait queue passes its check with the queue its messages are counted under.
    e.on(
        t0,
        checked("work", Ok(Some("work (after work.wait)".into()))),
    );
    assert_eq!(e.on(t0, Event::Slot), vec![Effect::Publish(2)]);
    // Later messages of the failed target are held at once, without another check.
    assert!(e.on(t0, unchecked(3, "gone")).is_empty());
    assert!(!e.wants().slot);
    e.on(t0, unchecked(4, "work"));
    assert_eq!(e.on(t0, Event::Slot), vec![Effect::Publish(4)]);
    e.on(t0, confirm(2, ConfirmOutcome::Ack));
    e.on(t0, confirm(4, ConfirmOutcome::Ack));
    let fx = e.on(t0, publish(5));
    assert!(fx.is_empty());
    e.on(t0, Event::Slot);
    let fx = e.on(t0, confirm(5, ConfirmOutcome::Ack));
    let steps = settle_ok(&mut e, t0, fx);
    assert!(
        steps.contains(&Effect::Nack { top: 5 }),
        "the failed target's messages are handed back: {steps:?}"
    );
    let t = e.tally();
    assert_eq!((t.moved, t.failed), (3, 2));
    assert_eq!(t.problems.get(why), Some(&2));
    assert_eq!(t.targets.get("work (after work.wait)"), Some(&2));
    assert_eq!(t.moved_ids, vec!["k2", "k4", "k5"]);
    assert!(e.is_done());
}

#[test]
fn a_cancel_while_a_target_is_checked_hands_its_message_back_untouched() {
    let t0 = Instant::now();
    let mut e = engine(5, t0);
    e.on(t0, unchecked(1, "a"));
    let fx = e.on(t0, Event::Cancel);
    // The check's answer after the cancel publishes nothing.
    let mut fx2 = e.on(t0, checked("a", Ok(None)));
    assert!(!fx2.contains(&Effect::Publish(1)));
    fx2.splice(0..0, fx);
    let steps = settle_ok(&mut e, t0, fx2);
    assert!(steps.contains(&Effect::Nack { top: 1 }), "{steps:?}");
    assert_eq!((e.tally().moved, e.tally().failed), (0, 0));
}

/// An engine whose publishing waits while the target holds `max` ready messages or more.
fn capped(depth: u64, max: u64, t0: Instant) -> Engine {
    Engine::new(
        Config {
            depth_at_start: depth,
            limit: None,
            window: 50,
            prefetch: 100,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: Some(max),
            source: Source::Queue,
        },
        t0,
    )
}

fn ready(n: u64) -> Event {
    Event::Backlog(Ok(vec![("work".into(), n), ("audit".into(), 0)]))
}

#[test]
fn over_the_backlog_cap_nothing_is_published_until_the_target_drains() {
    let t0 = Instant::now();
    let poll = Limits::default().backlog_poll;
    let mut e = capped(10, 3, t0);
    assert_eq!(
        e.on(t0, publish(1)),
        vec![Effect::AskBacklog],
        "nothing goes before the first count"
    );
    assert!(!e.wants().slot && e.wants().backlog);
    assert_eq!(e.backlog_wait(), None, "no count yet: nothing to say");
    assert!(e.on(t0, ready(5)).is_empty());
    assert!(!e.wants().slot, "5 ready, cap 3: waits");
    assert_eq!(
        e.backlog_wait(),
        Some(BacklogWait {
            queue: "work".into(),
            ready: 5,
            max: 3
        })
    );
    // Asked again at most every `poll`, on the engine's own deadline.
    assert_eq!(e.deadline(), Some(t0 + poll));
    assert!(e.on(t0 + poll / 2, Event::Tick).is_empty());
    let t1 = t0 + poll;
    assert_eq!(e.on(t1, Event::Tick), vec![Effect::AskBacklog]);
    e.on(t1, ready(1));
    assert!(e.wants().slot, "drained to 1: goes on");
    assert_eq!(e.backlog_wait(), None);
    assert_eq!(e.on(t1, Event::Slot), vec![Effect::Publish(1)]);
    // Estimated 2 (< 3) and the last count is fresh: no question before the next publish.
    assert!(e.on(t1, publish(2)).is_empty());
    assert_eq!(e.on(t1, Event::Slot), vec![Effect::Publish(2)]);
    // Estimated 3: at the cap, so 3 waits for a count, due `poll` after the last.
    assert!(e.on(t1, publish(3)).is_empty());
    assert!(!e.wants().slot);
    assert_eq!(e.deadline(), Some(t1 + poll));
    let t2 = t1 + poll;
    assert_eq!(e.on(t2, Event::Tick), vec![Effect::AskBacklog]);
    // 1 and 2 are still in flight: counted as perhaps not in the answer yet.
    e.on(t2, ready(1));
    assert!(!e.wants().slot, "1 ready + 2 in flight: at the cap");
    e.on(t2, confirm(1, ConfirmOutcome::Ack));
    e.on(t2, confirm(2, ConfirmOutcome::Ack));
    let t3 = t2 + poll;
    assert!(e.on(t3, Event::Tick).contains(&Effect::AskBacklog));
    e.on(t3, ready(1));
    assert_eq!(e.on(t3, Event::Slot), vec![Effect::Publish(3)]);
    assert_eq!(e.tally().published, 3);
}

#[test]
fn a_cancel_while_waiting_for_the_backlog_ends_the_run_with_the_message_handed_back() {
    let t0 = Instant::now();
    let mut e = capped(10, 3, t0);
    e.on(t0, publish(1));
    e.on(t0, ready(50));
    assert!(e.backlog_wait().is_some());
    let fx = e.on(t0, Event::Cancel);
    assert_eq!(fx, vec![Effect::CancelConsumer], "settles at once");
    assert_eq!(e.backlog_wait(), None, "no longer waiting");
    let steps = settle_ok(&mut e, t0, fx);
    assert!(steps.contains(&Effect::Nack { top: 1 }), "{steps:?}");
    assert_eq!(steps.last(), Some(&Effect::Finish));
    assert_eq!(e.stop_reason(), Some(&StopReason::Cancelled));
    let t = e.tally();
    assert_eq!((t.published, t.moved, t.duplicated), (0, 0, 0));
    assert!(t.forced.is_none());
    // An answer that comes after the cancel changes nothing.
    let mut e = capped(10, 3, t0);
    e.on(t0, publish(1));
    let fx = e.on(t0, Event::Cancel);
    assert!(e.on(t0, ready(0)).is_empty());
    settle_ok(&mut e, t0, fx);
    assert_eq!(e.tally().published, 0);
}

#[test]
fn waiting_for_the_backlog_counts_against_neither_the_confirm_deadline_nor_the_silence() {
    let t0 = Instant::now();
    let l = Limits::default();
    let mut e = capped(10, 3, t0);
    e.on(t0, publish(1));
    e.on(t0, ready(2));
    e.on(t0, Event::Slot);
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    e.on(t0, publish(2));
    assert!(e.wants().backlog, "estimated 3: waits");
    // The consumer drains slowly: 100 ready, one fewer a second, for a minute — twice the
    // confirm deadline and six times the stall limit.
    let mut n = 100;
    let mut now = t0;
    while now < t0 + Duration::from_secs(60) {
        now = e.deadline().expect("a deadline while waiting");
        let fx = e.on(now, Event::Tick);
        if fx.contains(&Effect::AskBacklog) {
            n = 100 - (now - t0).as_secs();
            e.on(now, ready(n));
        }
        assert!(
            !fx.contains(&Effect::AskDepth),
            "the DLQ's silence is not asked about while a message waits"
        );
        assert_eq!(e.stop_reason(), None, "at {:?}", now - t0);
    }
    assert!(n > 3 && !e.wants().slot);
    assert!(now >= t0 + l.confirm + l.stall);
    e.on(now, ready(0));
    assert_eq!(e.on(now, Event::Slot), vec![Effect::Publish(2)]);
    // The run took nothing while it waited: its silence counts from now.
    assert!(e.deadline().is_some_and(|d| d > now));
    e.on(now, confirm(2, ConfirmOutcome::Ack));
    let idle = now + l.idle;
    assert_eq!(e.on(idle, Event::Tick), vec![Effect::AskDepth]);
    e.on(idle, Event::Depth(Ok(8)));
    assert_eq!(e.stop_reason(), None, "2 s of silence is not a stall");
}

#[test]
fn a_backlog_that_never_goes_down_stops_the_run_and_hands_the_message_back() {
    let t0 = Instant::now();
    let l = Limits::default();
    let mut e = capped(10, 3, t0);
    e.on(t0, publish(1));
    e.on(t0, ready(40));
    let mut now = t0;
    while e.stop_reason().is_none() {
        now = e.deadline().expect("a deadline while waiting");
        assert!(now <= t0 + l.backlog_stall, "bounded");
        if e.on(now, Event::Tick).contains(&Effect::AskBacklog) {
            e.on(now, ready(40));
        }
    }
    assert_eq!(now, t0 + l.backlog_stall);
    assert_eq!(
        e.stop_reason(),
        Some(&StopReason::BacklogStalled {
            queue: "work".into(),
            ready: 40,
            max: 3,
            secs: l.backlog_stall.as_secs()
        })
    );
    let stop = e.stop_reason().cloned().expect("stopped");
    assert!(!stop.is_finished() && !stop.is_fault());
    assert!(stop.to_string().contains("work"), "{stop}");
    let steps = settle_ok(&mut e, now, vec![Effect::CancelConsumer]);
    assert!(steps.contains(&Effect::Nack { top: 1 }), "{steps:?}");
    assert_eq!(e.tally().published, 0);
}

#[test]
fn the_last_message_waiting_for_the_backlog_is_not_cut_off_by_the_settle_deadline() {
    let t0 = Instant::now();
    let mut e = capped(2, 3, t0);
    e.on(t0, publish(1));
    e.on(t0, ready(0));
    e.on(t0, Event::Slot);
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    e.on(t0, Event::AcksWritten(Ok(())));
    e.on(t0, publish(2));
    assert_eq!(e.stop_reason(), Some(&StopReason::ReachedStartDepth));
    // The cap holds it back for longer than settling may take.
    let mut now = t0;
    let mut fx = e.on(t0, ready(9));
    while now < t0 + Duration::from_secs(30) {
        now = e.deadline().expect("a deadline while waiting");
        fx = e.on(now, Event::Tick);
        if fx.contains(&Effect::AskBacklog) {
            fx = e.on(now, ready(9 - (now - t0).as_secs().min(8) / 4));
        }
        assert!(!e.is_done(), "not forced at {:?}", now - t0);
    }
    assert!(fx.is_empty() || !fx.contains(&Effect::Finish));
    e.on(now, ready(0));
    assert_eq!(e.on(now, Event::Slot), vec![Effect::Publish(2)]);
    let fx = e.on(now, confirm(2, ConfirmOutcome::Ack));
    let steps = settle_ok(&mut e, now, fx);
    assert_eq!(steps.last(), Some(&Effect::Finish));
    let t = e.tally();
    assert_eq!((t.moved, t.duplicated), (2, 0));
    assert!(t.forced.is_none(), "{:?}", t.forced);
}

#[test]
fn a_count_that_fails_stops_the_run_and_the_waiting_message_stays() {
    let t0 = Instant::now();
    let mut e = capped(10, 3, t0);
    e.on(t0, publish(1));
    let fx = e.on(
        t0,
        Event::Backlog(Err("NOT_FOUND - no queue 'work'".into())),
    );
    assert_eq!(fx, vec![Effect::CancelConsumer]);
    assert!(
        matches!(e.stop_reason(), Some(StopReason::NoAnswer(why)) if why.contains("NOT_FOUND"))
    );
    let steps = settle_ok(&mut e, t0, fx);
    assert!(steps.contains(&Effect::Nack { top: 1 }));
    assert_eq!(e.tally().published, 0);
}
