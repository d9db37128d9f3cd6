use super::*;

fn plan(sight: Sight, ladder: bool) -> CanaryPlan {
    CanaryPlan {
        rule: CanaryRule {
            size: 10,
            wait: Duration::from_secs(30),
            tolerance: 0,
        },
        sight,
        targets: vec!["orders".into()],
        through_wait_queues: ladder,
    }
}

fn exact() -> Sight {
    Sight::Exact {
        exchanges: vec!["dlx".into()],
    }
}

fn at(t0: Instant, ms: u64) -> Instant {
    t0 + Duration::from_millis(ms)
}

#[test]
fn a_canary_applies_only_to_more_than_it_takes() {
    let r = plan(exact(), false).rule;
    assert!(!r.applies(10));
    assert!(r.applies(11));
    assert!(!CanaryRule { size: 0, ..r }.applies(200));
}

#[test]
fn all_coming_back_stops_at_once_with_the_top_failure() {
    let t0 = Instant::now();
    let mut w = Watch::new(&plan(exact(), false), 10, t0);
    for i in 0..9 {
        w.on(
            at(t0, 100 + i),
            Seen::CameBack {
                failure: "CardDeclined: card declined".into(),
            },
        );
        assert_eq!(
            w.decide(at(t0, 100 + i)),
            None,
            "within the grace it counts on"
        );
    }
    w.on(
        at(t0, 120),
        Seen::CameBack {
            failure: "Timeout".into(),
        },
    );
    assert_eq!(w.decide(at(t0, 120)), Some(CanaryDecision::CameBack));
    let r = w.record("orders.dlq", at(t0, 120), CanaryDecision::CameBack, 190);
    assert_eq!(r.came_back, 10);
    assert_eq!(
        r.top_failure,
        Some(("CardDeclined: card declined".into(), 9))
    );
    assert_eq!(r.left_untouched, 190);
    let words = r.words();
    assert!(
        words.contains("10 of 10 came back within 1 s, 9 × CardDeclined"),
        "{words}"
    );
    assert!(
        words.contains("190 left in orders.dlq untouched"),
        "{words}"
    );
}

#[test]
fn some_coming_back_stop_after_the_grace() {
    let t0 = Instant::now();
    let mut w = Watch::new(&plan(exact(), false), 10, t0);
    w.on(
        at(t0, 500),
        Seen::CameBack {
            failure: "X".into(),
        },
    );
    assert_eq!(w.decide(at(t0, 1_400)), None);
    assert_eq!(w.decide(at(t0, 1_500)), Some(CanaryDecision::CameBack));
}

#[test]
fn within_tolerance_it_goes_ahead_once_consumed_and_settled() {
    let t0 = Instant::now();
    let mut p = plan(exact(), false);
    p.rule.tolerance = 1;
    let mut w = Watch::new(&p, 10, t0);
    w.on(
        at(t0, 100),
        Seen::CameBack {
            failure: "X".into(),
        },
    );
    w.on(at(t0, 200), Seen::TargetsReady(3));
    w.on(at(t0, 400), Seen::TargetsReady(0));
    assert!(
        !w.wants_unacked(at(t0, 5_000)),
        "the statistics may still predate delivery"
    );
    // A reading of 0 before the statistics could show the delivery proves nothing.
    w.on(at(t0, 5_000), Seen::TargetsUnacked(0));
    assert_eq!(w.decide(at(t0, 5_000)), None);
    assert!(w.wants_unacked(at(t0, 5_900)));
    w.on(at(t0, 5_900), Seen::TargetsUnacked(2));
    assert_eq!(w.decide(at(t0, 5_900)), None, "still being handled");
    w.on(at(t0, 6_500), Seen::TargetsUnacked(0));
    assert_eq!(w.decide(at(t0, 6_500)), Some(CanaryDecision::WentAhead));
    let r = w.record("orders.dlq", at(t0, 6_500), CanaryDecision::WentAhead, 190);
    assert_eq!(r.left_untouched, 0);
    assert!(r.words().contains("went ahead"));
}

#[test]
fn never_taken_by_a_consumer_is_not_consumed_when_the_time_is_up() {
    let t0 = Instant::now();
    let mut w = Watch::new(&plan(exact(), false), 10, t0);
    w.on(at(t0, 100), Seen::TargetsReady(10));
    assert_eq!(w.decide(at(t0, 29_999)), None);
    assert_eq!(w.decide(at(t0, 30_000)), Some(CanaryDecision::NotConsumed));
}

#[test]
fn taken_and_quiet_goes_ahead_when_the_time_is_up_even_under_live_load() {
    let t0 = Instant::now();
    let mut w = Watch::new(&plan(exact(), false), 10, t0);
    w.on(at(t0, 100), Seen::TargetsReady(0));
    // Live traffic keeps the consumer busy: never 0 unacknowledged.
    w.on(at(t0, 10_000), Seen::TargetsUnacked(5));
    assert_eq!(w.decide(at(t0, 20_000)), None);
    assert_eq!(w.decide(at(t0, 30_000)), Some(CanaryDecision::WentAhead));
}

#[test]
fn through_a_retry_ladder_it_waits_its_whole_time() {
    let t0 = Instant::now();
    let mut w = Watch::new(&plan(exact(), true), 10, t0);
    w.on(at(t0, 100), Seen::TargetsReady(0));
    assert!(!w.wants_unacked(at(t0, 9_000)));
    w.on(at(t0, 9_000), Seen::TargetsUnacked(0));
    assert_eq!(w.decide(at(t0, 9_000)), None);
    assert_eq!(w.decide(at(t0, 30_000)), Some(CanaryDecision::WentAhead));
}

#[test]
fn an_estimate_counts_the_dlq_s_growth_from_its_first_reading() {
    let t0 = Instant::now();
    let p = plan(
        Sight::Estimate {
            why: "default exchange".into(),
        },
        false,
    );
    let mut w = Watch::new(&p, 10, t0);
    w.on(at(t0, 0), Seen::DlqReady(190));
    assert_eq!(w.came_back(), 0);
    w.on(at(t0, 300), Seen::DlqReady(193));
    assert_eq!(w.came_back(), 3);
    assert_eq!(w.decide(at(t0, 1_300)), Some(CanaryDecision::CameBack));
    let words = w
        .record("orders.dlq", at(t0, 1_300), CanaryDecision::CameBack, 190)
        .words();
    assert!(words.contains("about 3 of 10"), "{words}");
    assert!(
        p.describe()
            .contains("estimated from the DLQ's growth (default exchange)")
    );
}

#[test]
fn the_record_reads_back_as_json() {
    let t0 = Instant::now();
    let w = Watch::new(&plan(exact(), false), 10, t0);
    let r = w.record("orders.dlq", at(t0, 2_000), CanaryDecision::NotConsumed, 5);
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"decision\":\"not_consumed\""), "{json}");
    assert_eq!(serde_json::from_str::<CanaryRecord>(&json).unwrap(), r);
}

#[test]
fn a_canary_that_lost_sight_says_so_and_leaves_the_rest() {
    let t0 = Instant::now();
    let w = Watch::new(&plan(exact(), false), 10, t0);
    let r = w.record("orders.dlq", at(t0, 4_000), CanaryDecision::Blind, 190);
    assert!(!r.decision.went_ahead());
    let words = r.words();
    assert!(words.contains("watch queue closed after 4 s"), "{words}");
    assert!(
        words.contains("190 left in orders.dlq untouched"),
        "{words}"
    );
}
