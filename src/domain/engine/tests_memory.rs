//! A source in memory (a restore's plan): the pipeline bound is the engine's, held items take
//! no room and stop nothing, and silence is never asked about.

use super::tests::{confirm, publish, send, settle_ok};
use super::*;

fn memory(depth: u64, pipeline: usize, t0: Instant) -> Engine {
    Engine::new(
        Config {
            depth_at_start: depth,
            limit: None,
            window: usize::MAX,
            prefetch: pipeline,
            limits: Limits::default(),
            settle_lag: Duration::ZERO,
            backlog: None,
            source: Source::Memory,
        },
        t0,
    )
}

#[test]
fn a_memory_source_takes_no_more_than_its_pipeline_and_held_items_take_no_room() {
    let t0 = Instant::now();
    let mut e = memory(10, 2, t0);
    send(&mut e, t0, 1..=2);
    assert!(!e.wants().take, "two in the pipeline: no third");
    e.on(
        t0,
        confirm(1, ConfirmOutcome::Returned("312 NO_ROUTE".into())),
    );
    assert!(e.wants().take, "a returned one is held, and takes no room");
    send(&mut e, t0, [3]);
    assert!(!e.wants().take);
    e.on(t0, confirm(2, ConfirmOutcome::Ack));
    assert!(
        !e.wants().take,
        "confirmed but not yet acknowledged: still in the pipeline"
    );
    let later = t0 + Limits::default().ack_every;
    let fx = e.on(later, Event::Tick);
    assert_eq!(
        fx,
        vec![Effect::Ack(vec![AckOp {
            tag: 2,
            multiple: false
        }])]
    );
    assert!(e.wants().take, "acknowledged: room again");
    // More returns than the pipeline holds stop nothing: nothing is handed back to a broker.
    send(&mut e, later, [4]);
    e.on(
        later,
        confirm(3, ConfirmOutcome::Returned("312 NO_ROUTE".into())),
    );
    e.on(
        later,
        confirm(4, ConfirmOutcome::Returned("312 NO_ROUTE".into())),
    );
    assert_eq!(e.held_count(), 3);
    assert_eq!(
        e.stop_reason(),
        None,
        "a queue's consumer would have stopped"
    );
    assert!(e.wants().take);
}

#[test]
fn a_memory_source_is_never_asked_for_its_depth_nor_stalls() {
    let t0 = Instant::now();
    let mut e = memory(10, 4, t0);
    send(&mut e, t0, [1]);
    let fx = e.on(t0, confirm(1, ConfirmOutcome::Ack));
    assert!(matches!(fx.as_slice(), [Effect::Ack(_)]), "{fx:?}");
    e.on(t0, Event::AcksWritten(Ok(())));
    // A minute without a delivery: a queue would be asked for its depth, then called stalled.
    for secs in [3, 15, 60] {
        let fx = e.on(t0 + Duration::from_secs(secs), Event::Tick);
        assert!(!fx.contains(&Effect::AskDepth), "{fx:?}");
    }
    assert_eq!(e.stop_reason(), None);
    assert!(e.wants().take);
}

#[test]
fn a_memory_run_cancelled_midway_settles_what_is_in_flight_and_takes_nothing_more() {
    let t0 = Instant::now();
    let mut e = memory(10, 4, t0);
    send(&mut e, t0, 1..=3);
    e.on(t0, publish(4));
    e.on(t0, confirm(1, ConfirmOutcome::Ack));
    assert!(e.on(t0, Event::Cancel).is_empty(), "2 and 3 are awaited");
    assert!(!e.wants().take);
    e.on(t0, confirm(2, ConfirmOutcome::Ack));
    let fx = e.on(t0, confirm(3, ConfirmOutcome::Nack));
    let steps = settle_ok(&mut e, t0, fx);
    assert_eq!(
        steps,
        vec![
            Effect::Ack(vec![AckOp {
                tag: 2,
                multiple: true
            }]),
            Effect::CancelConsumer,
            Effect::Drain,
            Effect::Nack { top: 4 },
            Effect::Close,
            Effect::Finish
        ]
    );
    let t = e.tally();
    assert_eq!(
        (t.moved, t.failed, t.untouched, t.duplicated),
        (2, 1, 1, 0),
        "4 was waiting for its slot: untouched"
    );
    assert_eq!(e.stop_reason(), Some(&StopReason::Cancelled));
}
