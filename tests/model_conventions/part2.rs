//! The rest of `model_conventions` (the helpers are in `mod.rs`), in the order written.

use super::*;

#[test]
fn dramatiq_attempts_are_never_called_reset_and_the_plan_says_what_is_left() {
    let body_counter = Attempts::NotReset(vec!["options.retries in the body".into()]);
    // max_retries sent with the message (`send_with_options`): exact.
    let (a, s) = dramatiq_budget(r#"{"max_retries":1,"retries":1}"#);
    assert_eq!(a, body_counter);
    assert_eq!(
        s,
        "dramatiq will not retry it if it fails again: options.retries is 1 of max_retries 1 (in the body, which a replay leaves untouched); attempts are not reset"
    );
    let (_, s) = dramatiq_budget(r#"{"max_retries":5,"retries":2}"#);
    assert!(
        s.starts_with("dramatiq will retry it 3 more times if it fails again: options.retries is 2 of max_retries 5"),
        "{s}"
    );
    let (_, s) = dramatiq_budget(r#"{"max_retries":3,"retries":2}"#);
    assert!(
        s.starts_with("dramatiq will retry it 1 more time if"),
        "{s}"
    );
    // Counted past the limit (the limit was lowered): nothing left, never a negative count.
    let (_, s) = dramatiq_budget(r#"{"max_retries":2,"retries":9}"#);
    assert!(s.starts_with("dramatiq will not retry it"), "{s}");
    // No limit in the message: the actor's, unknown here; dramatiq's default, said as such.
    let (a, s) = dramatiq_budget(r#"{"retries":3}"#);
    assert_eq!(a, body_counter);
    assert_eq!(
        s,
        "dramatiq will retry it up to 20 − 3 = 17 more times if it fails again (dramatiq's default max_retries; the message states none, and its actor may set its own): options.retries is 3 in the body, which a replay leaves untouched"
    );
    // A counter at zero is a whole budget, but still not one Warren reset.
    let (a, s) = dramatiq_budget(r#"{}"#);
    assert_eq!(a, body_counter);
    assert!(s.contains("up to 20 − 0 = 20 more times"), "{s}");
    // `max_retries: null` is dramatiq's "no limit".
    let (_, s) = dramatiq_budget(r#"{"max_retries":null,"retries":4}"#);
    assert_eq!(
        s,
        "dramatiq retries it without limit (max_retries is none): options.retries is 4 in the body, which a replay leaves untouched"
    );
    for options in [r#"{"max_retries":1,"retries":1}"#, r#"{"retries":3}"#, "{}"] {
        let (_, s) = dramatiq_budget(options);
        assert!(!s.contains("attempts reset"), "{s}");
    }
}

#[test]
fn a_dramatiq_body_cut_at_a_browse_cap_is_still_dramatiq_and_its_budget_honest() {
    // Arguments far beyond the preview's cap: the head names the actor and the id, but the
    // options (the retry count) lie past the cut.
    let big = "x".repeat(100_000);
    let whole = format!(
        r#"{{"queue_name":"work","actor_name":"charge","args":["{big}"],"kwargs":{{}},"options":{{"retries":1,"max_retries":1}},"message_id":"m-9","message_timestamp":1}}"#
    );
    let mut dl = letter("work.XQ", Table::new(), whole.as_bytes());
    dl.properties.message_id = None;
    let mut cut = dl.clone();
    cut.body.truncate(64 * 1024);
    assert!(!cut.body_complete());
    assert_eq!(message_key(&cut), message_key(&dl));
    let ex = explain(&cut);
    assert_eq!(ex.convention.as_str(), "dramatiq");
    assert_eq!(ex.message_type.as_deref(), Some("charge"));
    let p = plan_of(&cut, &ex);
    assert_ne!(p.attempts, Attempts::Reset);
    assert!(
        p.warnings.iter().any(|w| w.to_string()
            == "dramatiq keeps its retry count (options.retries) in the body, which a replay leaves untouched, past the part read here: what is left of its max_retries is not known; attempts are not reset"),
        "{:?}",
        p.warnings
    );
    // Read whole (as the replay itself reads it): the exact budget.
    let p = plan_of(&dl, &explain(&dl));
    assert!(
        p.warnings.iter().any(|w| w.to_string().starts_with(
            "dramatiq will not retry it if it fails again: options.retries is 1 of max_retries 1"
        )),
        "{:?}",
        p.warnings
    );
    // Small arguments: a cut after the options still reads them.
    let small = r#"{"queue_name":"work","actor_name":"charge","args":[1],"kwargs":{},"options":{"retries":2,"max_retries":5},"message_id":"m-8","message_timestamp":1}"#;
    let mut dl = letter("work.XQ", Table::new(), small.as_bytes());
    dl.body_size = 1_000_000;
    assert!(!dl.body_complete());
    let ex = explain(&dl);
    assert_eq!(ex.retries, Some(2));
    let p = plan_of(&dl, &ex);
    assert!(
        p.warnings.iter().any(|w| w
            .to_string()
            .starts_with("dramatiq will retry it 3 more times")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn an_audited_replay_counts_when_warrens_headers_were_lost() {
    // dramatiq's own retry republished the replayed message without Warren's headers.
    let body = r#"{"queue_name":"work","actor_name":"charge","args":[0],"kwargs":{},"options":{"retries":3},"message_id":"m-4","message_timestamp":1}"#;
    let mut dl = letter("work.XQ", Table::new(), body.as_bytes());
    dl.properties.message_id = None;
    assert_eq!(explain(&dl).replay_count, 0);
    let ex = warren::domain::explain::explain_with(&dl, &Default::default(), 1);
    assert_eq!(ex.replay_count, 1);
    assert!(
        ex.verdict.ends_with("failed again after 1 replay"),
        "{}",
        ex.verdict
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(p.replay_count, 2, "the next replay is its second");
    assert!(
        p.warnings
            .contains(&ReplayWarning::ReplayedBefore { count: 1 })
    );
    // The larger count wins: the header may know of replays from another store.
    dl.headers
        .insert("warren-replay-count", HeaderValue::I64(3));
    assert_eq!(
        warren::domain::explain::explain_with(&dl, &Default::default(), 1).replay_count,
        3
    );
    assert_eq!(
        warren::domain::explain::explain_with(&dl, &Default::default(), -5).replay_count,
        3
    );
}

#[test]
fn dramatiq_is_keyed_by_its_body_message_id() {
    let body = r#"{"queue_name":"work","actor_name":"charge","args":[0],"kwargs":{},"options":{"retries":1},"message_id":"878bb499-7995-48dd-88c4-3c8139f97820","message_timestamp":1}"#;
    let mut dl = letter("work.XQ", Table::new(), body.as_bytes());
    dl.properties.message_id = None;
    assert_eq!(
        message_key(&dl),
        "body:message_id:878bb499-7995-48dd-88c4-3c8139f97820"
    );
    // The replayed message, failed again: Warren's headers and a new death; the same key.
    let ex = explain(&dl);
    let mut again = dl.clone();
    again.headers = plan_of(&dl, &ex).headers;
    again.headers.insert(
        "x-death",
        HeaderValue::Array(vec![HeaderValue::Table(Table::new())]),
    );
    assert_eq!(message_key(&again), message_key(&dl));
    let ex = explain(&again);
    assert_eq!(ex.replay_count, 1);
    assert!(
        ex.verdict.ends_with("failed again after 1 replay"),
        "{}",
        ex.verdict
    );
}

const TASK_ID: &str = "ab9e6f14-cda2-4e2b-a0f5-f302ebd4825d";

/// A Celery 5.7 task as its real worker left it after `Reject(requeue=False)` (headers as the
/// management API showed them on 3.10; `None` values are voids).
fn celery_task(retries: i32, expires: Option<&str>) -> DeadLetter {
    let void = HeaderValue::Void;
    let mut hd = table(vec![
        ("argsrepr", s("[0]")),
        ("eta", void.clone()),
        ("expires", expires.map_or(void.clone(), s)),
        ("group", void.clone()),
        ("group_index", void.clone()),
        ("id", s(TASK_ID)),
        ("ignore_result", HeaderValue::Bool(false)),
        ("kwargsrepr", s("{}")),
        ("lang", s("py")),
        ("origin", s("gen28323@vm")),
        ("parent_id", void.clone()),
        ("replaced_task_nesting", HeaderValue::I32(0)),
        ("retries", HeaderValue::I32(retries)),
        ("root_id", s(TASK_ID)),
        ("shadow", void.clone()),
        ("stamped_headers", void.clone()),
        ("stamps", HeaderValue::Table(Table::new())),
        ("task", s("app.charge")),
        (
            "timelimit",
            HeaderValue::Array(vec![void.clone(), void.clone()]),
        ),
        ("x-first-death-exchange", s("")),
        ("x-first-death-queue", s("work")),
        ("x-first-death-reason", s("rejected")),
    ]);
    let mut d = match death(1, "rejected", "work", "", &["work"], 1_759_042_215) {
        HeaderValue::Table(t) => t,
        _ => Table::new(),
    };
    d.insert("original-expiration", s("4000"));
    hd.insert("x-death", HeaderValue::Array(vec![HeaderValue::Table(d)]));
    let body = br#"[[0], {}, {"callbacks": null, "errbacks": null, "chain": null, "chord": null}]"#;
    let mut dl = letter("work.dlq", hd, body);
    dl.properties = Properties {
        correlation_id: Some(TASK_ID.into()),
        reply_to: Some("5e59332f-c5c6-39e9-b278-2e8997242c4b".into()),
        content_type: Some("application/json".into()),
        content_encoding: Some("utf-8".into()),
        delivery_mode: Some(2),
        priority: Some(0),
        ..Properties::default()
    };
    dl
}

#[test]
fn celery_task_is_named_with_its_tries_and_grouped_by_task() {
    let dl = celery_task(0, None);
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Celery);
    assert_eq!(ex.message_type.as_deref(), Some("app.charge"));
    assert_eq!(ex.retries, Some(0));
    assert_eq!(ex.source.queue.as_deref(), Some("work"));
    assert_eq!(ex.deadline, None);
    assert_eq!(
        ex.verdict,
        "Celery task app.charge: rejected once by work, on its first try"
    );
    assert_eq!(ex.fingerprint.summary, "app.charge: rejected in work");
    let retried = explain(&celery_task(3, None));
    assert_eq!(
        retried.verdict,
        "Celery task app.charge: rejected once by work, after 3 retries"
    );
    // Same task, same death: one group, whatever the retries; another task is another group.
    assert_eq!(retried.fingerprint, ex.fingerprint);
    let mut other = celery_task(0, None);
    other.headers.insert("task", s("app.refund"));
    assert_ne!(explain(&other).fingerprint.key, ex.fingerprint.key);
    // A plain broker death in the same queue is not grouped with the task.
    let mut plain = dl.clone();
    plain.headers.retain(|k, _| k.starts_with("x-"));
    assert_ne!(explain(&plain).fingerprint.key, ex.fingerprint.key);
}

#[test]
fn celery_task_id_is_its_identity() {
    let dl = celery_task(2, None);
    assert_eq!(message_key(&dl), format!("header:id:{TASK_ID}"));
    // The replayed message, as it comes back after failing again, keeps the key.
    let p = plan_of(&dl, &explain(&dl));
    let mut back = dl.clone();
    back.headers = p.headers.clone();
    assert_eq!(message_key(&back), message_key(&dl));
}

#[test]
fn celery_retries_is_set_to_zero_not_removed() {
    let dl = celery_task(2, None);
    let ex = explain(&dl);
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("work")));
    assert_eq!(p.reset, vec!["retries"]);
    // Celery's own integer type, zero.
    assert_eq!(p.headers.get("retries"), Some(&HeaderValue::I32(0)));
    assert_eq!(p.attempts, Attempts::Reset);
    for kept in [
        "id", "task", "lang", "root_id", "argsrepr", "eta", "expires",
    ] {
        assert!(p.headers.contains_key(kept), "{kept} kept");
    }
    assert!(!p.headers.contains_key("x-death"));
    assert_eq!(
        p.removed,
        vec![
            "x-first-death-exchange",
            "x-first-death-queue",
            "x-first-death-reason",
            "x-death"
        ]
    );
    // Already zero: nothing to reset, and still "reset".
    let p0 = plan_of(&celery_task(0, None), &explain(&celery_task(0, None)));
    assert!(p0.reset.is_empty());
    assert_eq!(p0.attempts, Attempts::Reset);
    // Kept attempts keep the counter, and say so.
    let keep = ReplayOptions {
        keep_attempts: true,
        ..opts()
    };
    let pk = replay::plan(&dl, &ex, &keep);
    assert_eq!(pk.headers.get("retries"), Some(&HeaderValue::I32(2)));
    assert_eq!(pk.attempts, Attempts::Kept);
}

#[test]
fn celery_expires_in_the_past_keeps_the_task_in_the_dlq() {
    // now() is 2025-10-01T12:00:00Z.
    let past = celery_task(0, Some("2025-10-01T11:59:59.999999+00:00"));
    let future = celery_task(0, Some("2025-10-01T12:00:01+00:00"));
    let ex = explain(&past);
    assert_eq!(
        ex.deadline,
        "2025-10-01T11:59:59.999999Z".parse::<Timestamp>().ok()
    );
    let p = plan_of(&past, &ex);
    let why = p.held_back().expect("held back");
    assert!(why.contains("`expires` has passed"), "{why}");
    assert!(why.contains("--clear-expiry"), "{why}");
    assert!(p.headers.contains_key("expires"));
    assert!(p.removed_properties.is_empty());
    // The same task a second later, with its deadline still ahead: it goes, deadline and all.
    let pf = plan_of(&future, &explain(&future));
    assert_eq!(pf.expired, None);
    assert_eq!(pf.held_back(), None);
    assert!(pf.headers.contains_key("expires"));
    // The clock is the one passed in: at 11:00 the first one has not expired yet.
    let earlier = ReplayOptions {
        now: "2025-10-01T11:00:00Z"
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH),
        ..opts()
    };
    assert_eq!(replay::plan(&past, &ex, &earlier).held_back(), None);
}

#[test]
fn clear_expiry_removes_the_deadline_and_the_expiration_property() {
    let mut dl = celery_task(1, Some("2025-10-01T11:00:00+00:00"));
    dl.properties.expiration = Some("4000".into());
    let ex = explain(&dl);
    let clear = ReplayOptions {
        clear_expiry: true,
        strip_failure_stamp: false,
        ..opts()
    };
    let p = replay::plan(&dl, &ex, &clear);
    assert_eq!(p.held_back(), None);
    assert!(p.expired.as_ref().is_some_and(|e| e.cleared));
    assert!(!p.headers.contains_key("expires"));
    assert!(p.removed.iter().any(|r| r == "expires"));
    assert_eq!(p.removed_properties, vec!["expiration"]);
    assert_eq!(p.headers.get("retries"), Some(&HeaderValue::I32(0)));
    // A deadline still ahead is not touched by --clear-expiry.
    let ahead = celery_task(0, Some("2025-10-01T13:00:00+00:00"));
    let pa = replay::plan(&ahead, &explain(&ahead), &clear);
    assert!(pa.headers.contains_key("expires"));
    assert_eq!(pa.expired, None);
}

#[test]
fn expiry_notice_words() {
    assert_eq!(
        replay::expiry_notice("Celery", "expires", 2, 7, false),
        "Celery will discard 2 of 7 on arrival: their `expires` has passed; they stay in the DLQ (--clear-expiry removes the deadline and replays them)"
    );
    assert_eq!(
        replay::expiry_notice("Celery", "expires", 1, 7, false),
        "Celery will discard 1 of 7 on arrival: its `expires` has passed; it stays in the DLQ (--clear-expiry removes the deadline and replays it)"
    );
    assert!(replay::expiry_notice("Celery", "expires", 2, 7, true).contains("so Celery runs them"));
}

#[test]
fn an_id_and_a_task_header_without_lang_py_is_not_celery() {
    let mut dl = celery_task(0, None);
    dl.headers.remove("lang");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Broker);
    assert!(message_key(&dl).starts_with("hash:"));
}

/// rascal 21's table, as its real subscriber left it (see `frameworks.md`).
fn rascal_table(queue: &str, error: &str, recovery: Table) -> HeaderValue {
    HeaderValue::Table(table(vec![
        (
            "error",
            HeaderValue::Table(table(vec![("message", s(error))])),
        ),
        ("originalExchange", s("")),
        ("originalQueue", s(queue)),
        ("originalRoutingKey", s(queue)),
        ("originalVhost", s("shop")),
        (
            "recovery",
            HeaderValue::Table(table(vec![(queue, HeaderValue::Table(recovery))])),
        ),
        ("redeliveries", HeaderValue::I32(0)),
        ("restoreRoutingHeaders", HeaderValue::Bool(true)),
    ]))
}

/// Republished with `immediateNack`, then nacked: the broker dead-lettered it (`x-death`) and
/// rascal's stored copy of x-death is the empty one.
fn rascal_nacked(error: &str) -> DeadLetter {
    let stored = table(vec![
        ("immediateNack", HeaderValue::Bool(true)),
        (
            "xDeath",
            HeaderValue::Table(table(vec![
                ("count", HeaderValue::I32(0)),
                (
                    "time",
                    HeaderValue::Table(table(vec![("value", HeaderValue::I32(0))])),
                ),
            ])),
        ),
    ]);
    let hd = table(vec![
        ("rascal", rascal_table("work", error, stored)),
        (
            "x-death",
            HeaderValue::Array(vec![death(
                1,
                "rejected",
                "work",
                "",
                &["work"],
                1_796_145_549,
            )]),
        ),
        ("x-first-death-exchange", s("")),
        ("x-first-death-queue", s("work")),
        ("x-first-death-reason", s("rejected")),
    ]);
    letter("work.dlq", hd, br#"{"order":0}"#)
}

fn rascal_forwarded() -> DeadLetter {
    let hd = table(vec![
        ("CC", HeaderValue::Array(vec![s("mail.mail")])),
        (
            "rascal",
            rascal_table(
                "mail",
                "smtp refused",
                table(vec![("forwarded", HeaderValue::I32(1))]),
            ),
        ),
    ]);
    letter("mail.dead", hd, br#"{"mail":0}"#)
}

#[test]
fn rascal_nacked_message_reads_the_error_and_groups_by_it() {
    let dl = rascal_nacked("card declined for order 17");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Rascal);
    assert_eq!(ex.source.queue.as_deref(), Some("work"));
    assert_eq!(
        ex.verdict,
        "A failure in work (nacked by rascal): card declined for order 17"
    );
    assert_eq!(ex.fingerprint.summary, "card declined for order #");
    // Same error, another order: one group; another error: another group, although the broker
    // recorded the same death for both.
    let same = explain(&rascal_nacked("card declined for order 18"));
    assert_eq!(same.fingerprint, ex.fingerprint);
    let other = explain(&rascal_nacked("gateway timeout"));
    assert_ne!(other.fingerprint.key, ex.fingerprint.key);
    // rascal's publications set message_id: that is the identity.
    assert_eq!(message_key(&dl), "id:msg-1");
}

#[test]
fn rascal_replay_strips_its_stored_x_death_with_x_death() {
    let dl = rascal_nacked("card declined");
    let p = plan_of(&dl, &explain(&dl));
    assert_eq!(p.target, Some(direct("work")));
    assert!(!p.headers.contains_key("x-death"));
    let t = p
        .headers
        .get("rascal")
        .and_then(HeaderValue::as_table)
        .expect("the rascal table stays");
    // Without the stored copy (and the immediate-nack mark) rascal runs the handler.
    assert!(!t.contains_key("recovery"), "{t:?}");
    assert!(!t.contains_key("error"));
    assert!(!t.contains_key("redeliveries"));
    for kept in [
        "originalQueue",
        "originalExchange",
        "originalRoutingKey",
        "originalVhost",
        "restoreRoutingHeaders",
    ] {
        assert!(t.contains_key(kept), "{kept} kept");
    }
    for removed in [
        "rascal.recovery",
        "rascal.error",
        "rascal.redeliveries",
        "x-death",
    ] {
        assert!(
            p.removed.iter().any(|r| r == removed),
            "{removed}: {:?}",
            p.removed
        );
    }
    assert_eq!(p.attempts, Attempts::Reset);
    // Keeping attempts keeps both x-death and rascal's copy, which then still agree.
    let keep = ReplayOptions {
        keep_attempts: true,
        ..opts()
    };
    let pk = replay::plan(&dl, &explain(&dl), &keep);
    assert_eq!(pk.headers.get("rascal"), dl.headers.get("rascal"));
    assert!(pk.headers.contains_key("x-death"));
    assert_eq!(pk.attempts, Attempts::Kept);
}

#[test]
fn rascal_forwarded_message_is_explained_from_its_table() {
    let dl = rascal_forwarded();
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Rascal);
    assert!(ex.deaths.is_empty());
    assert_eq!(
        ex.verdict,
        "A failure in mail (forwarded here by rascal): smtp refused"
    );
    assert_eq!(ex.retries, Some(1));
    let p = plan_of(&dl, &ex);
    assert_eq!(p.target, Some(direct("mail")));
    // CC would route a copy to a queue named "mail.mail" through the default exchange.
    assert!(!p.headers.contains_key("CC"));
    assert!(p.removed.iter().any(|r| r == "CC"));
    assert_eq!(p.attempts, Attempts::Reset);
}

#[test]
fn a_rascal_header_that_is_not_a_table_is_not_rascal() {
    let dl = letter(
        "q.dlq",
        table(vec![("rascal", s("originalQueue=work"))]),
        b"{}",
    );
    assert_eq!(explain(&dl).convention, Convention::Unknown);
}

#[test]
fn convention_names_are_stable() {
    let names: Vec<&str> = Convention::ALL.iter().map(Convention::as_str).collect();
    assert_eq!(
        names,
        vec![
            "broker",
            "masstransit",
            "spring",
            "nservicebus",
            "wolverine",
            "rebus",
            "sneakers",
            "dramatiq",
            "easynetq",
            "celery",
            "rascal",
            "symfony",
            "ladder",
            "unknown"
        ]
    );
    for c in Convention::ALL {
        assert_eq!(Convention::parse(c.as_str()), Some(c));
    }
}

/// A hand-rolled amqplib ladder's last try, copied into the DLQ by the app: its counter and error
/// text, and the wait queue's expiry as the newest death.
fn ladder_letter(counter: HeaderValue, error: &str) -> DeadLetter {
    letter(
        "orders.dlq",
        table(vec![
            ("x-retry-count", counter),
            ("x-last-error", s(error)),
            (
                "x-death",
                HeaderValue::Array(vec![death(
                    3,
                    "expired",
                    "orders.wait",
                    "wait",
                    &["orders"],
                    1_759_300_000,
                )]),
            ),
            ("x-first-death-queue", s("orders.wait")),
            ("x-first-death-reason", s("expired")),
        ]),
        b"{\"order\":17}",
    )
}

#[test]
fn a_ladder_is_read_by_its_counter_and_error_text() {
    let dl = ladder_letter(HeaderValue::I32(3), "TypeError: card declined for order 17");
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Ladder);
    assert_eq!(ex.retries, Some(3));
    let f = ex.fault.as_ref().expect("the error text is the fault");
    assert_eq!(f.exception_type.as_deref(), Some("TypeError"));
    assert_eq!(f.message.as_deref(), Some("card declined for order 17"));
    assert_eq!(
        ex.verdict,
        "TypeError after 3 retries (x-retry-count): card declined for order 17 (copied here from wait queue orders.wait)"
    );
    // Grouped by the error text, with what varies masked.
    let other_order = explain(&ladder_letter(
        HeaderValue::I32(3),
        "TypeError: card declined for order 912",
    ));
    assert_eq!(ex.fingerprint.key, other_order.fingerprint.key);
    // A JavaScript error's stack: the first line is the error, the rest the trace.
    let stack = explain(&ladder_letter(
        HeaderValue::I32(3),
        "RangeError: amount out of range\n    at charge (/app/pay.js:12:9)\n    at main (/app/index.js:3:1)",
    ));
    let f = stack.fault.expect("fault");
    assert_eq!(f.exception_type.as_deref(), Some("RangeError"));
    assert_eq!(f.message.as_deref(), Some("amount out of range"));
    assert!(f.stack_trace.is_some_and(|t| t.contains("pay.js:12")));
    let other_error = explain(&ladder_letter(
        HeaderValue::I32(3),
        "stock service timed out",
    ));
    assert_ne!(ex.fingerprint.key, other_error.fingerprint.key);
    assert_eq!(
        other_error.fault.and_then(|f| f.message).as_deref(),
        Some("stock service timed out")
    );
}

#[test]
fn a_ladders_replay_resets_its_counter_in_its_own_type_and_drops_its_error_text() {
    for (counter, zero) in [
        (HeaderValue::I32(3), HeaderValue::I32(0)),
        (HeaderValue::I64(3), HeaderValue::I64(0)),
        (HeaderValue::F64(3.0), HeaderValue::F64(0.0)),
        (s("3"), s("0")),
    ] {
        let dl = ladder_letter(counter.clone(), "boom");
        let ex = explain(&dl);
        let p = plan_of(&dl, &ex);
        assert_eq!(p.reset, vec!["x-retry-count"], "{counter:?}");
        assert_eq!(p.headers.get("x-retry-count"), Some(&zero), "{counter:?}");
        assert!(p.removed.iter().any(|r| r == "x-last-error"));
        assert!(!p.headers.contains_key("x-last-error"));
        assert!(p.removed.iter().any(|r| r == "x-death"));
        assert_eq!(p.attempts, Attempts::Reset);
        // The wait queue the death names; the preflight follows it to where it routes back.
        assert_eq!(p.target, Some(direct("orders.wait")));
    }
    // A counter Warren cannot zero goes.
    let dl = ladder_letter(s("many"), "boom");
    let p = plan_of(&dl, &explain(&dl));
    assert!(p.reset.is_empty());
    assert!(p.removed.iter().any(|r| r == "x-retry-count"));
    assert_eq!(p.attempts, Attempts::Reset);
    // Kept attempts keep the counter, and say so.
    let dl = ladder_letter(HeaderValue::I32(3), "boom");
    let keep = ReplayOptions {
        keep_attempts: true,
        ..opts()
    };
    let p = replay::plan(&dl, &explain(&dl), &keep);
    assert_eq!(p.attempts, Attempts::Kept);
    assert_eq!(p.headers.get("x-retry-count"), Some(&HeaderValue::I32(3)));
    assert!(p.warnings.contains(&ReplayWarning::AttemptsKept));
}

#[test]
fn a_teams_own_header_names_are_read_when_configured() {
    use warren::domain::convention::Conventions;
    use warren::domain::explain::explain_with;
    let dl = letter(
        "payments.dlq",
        table(vec![
            ("retry_attempt", HeaderValue::I64(2)),
            ("failure", s("gateway said no")),
        ]),
        b"{}",
    );
    // With the default names nothing marks it.
    assert_eq!(explain(&dl).convention, Convention::Unknown);
    let own = Conventions {
        retry_counter_headers: vec!["retry_attempt".into()],
        error_text_headers: vec!["failure".into()],
    };
    let ex = explain_with(&dl, &own, 0);
    assert_eq!(ex.convention, Convention::Ladder);
    assert_eq!(ex.retries, Some(2));
    assert_eq!(
        ex.verdict,
        "A failure after 2 retries (retry_attempt): gateway said no"
    );
    let p = plan_of(&dl, &ex);
    assert_eq!(p.reset, vec!["retry_attempt"]);
    assert_eq!(p.headers.get("retry_attempt"), Some(&HeaderValue::I64(0)));
    assert!(p.removed.iter().any(|r| r == "failure"));
    assert_eq!(p.attempts, Attempts::Reset);
    // A framework's own record still wins over a ladder header it happens to carry.
    let mut spring = dl.clone();
    spring.headers = table(vec![
        ("x-retry-count", HeaderValue::I64(1)),
        ("x-exception-message", s("boom")),
    ]);
    assert_eq!(explain(&spring).convention, Convention::Spring);
}

#[test]
fn a_ladder_that_nacks_on_its_last_try_failed_in_the_work_queue() {
    let mut dl = ladder_letter(HeaderValue::I64(2), "ValueError: bad sku");
    dl.headers = table(vec![
        ("x-retry-count", HeaderValue::I64(2)),
        ("x-last-error", s("ValueError: bad sku")),
        (
            "x-death",
            HeaderValue::Array(vec![
                death(1, "rejected", "orders", "", &["orders"], 1_759_300_010),
                death(
                    2,
                    "expired",
                    "orders.wait",
                    "wait",
                    &["orders"],
                    1_759_300_000,
                ),
            ]),
        ),
    ]);
    let ex = explain(&dl);
    assert_eq!(
        ex.verdict,
        "ValueError in orders after 2 retries (x-retry-count): bad sku"
    );
    assert_eq!(plan_of(&dl, &ex).target, Some(direct("orders")));
}

#[test]
fn a_configured_counter_on_a_framework_message_is_reset_too() {
    // Spring recorded the failure; the team's own counter rides along and is reset with it.
    let dl = letter(
        "orders.group.dlq",
        table(vec![
            ("x-exception-message", s("boom")),
            ("x-retry-count", HeaderValue::I32(4)),
        ]),
        b"{}",
    );
    let ex = explain(&dl);
    assert_eq!(ex.convention, Convention::Spring);
    let p = plan_of(&dl, &ex);
    assert_eq!(p.reset, vec!["x-retry-count"]);
    assert_eq!(p.headers.get("x-retry-count"), Some(&HeaderValue::I32(0)));
    assert_eq!(p.attempts, Attempts::Reset);
}

// Symfony Messenger 5.4: headers and bodies as Symfony's real Worker wrote them into the failure
// transport (captured from `tests/fixtures/symfony_worker.php` on 3.10.8, shortened).

const SF_STAMP: &str = "X-Message-Stamp-Symfony\\Component\\Messenger\\Stamp\\";

fn sf_letter(headers: Table, body: &[u8]) -> DeadLetter {
    let mut dl = letter("failed_payments", headers, body);
    dl.properties.message_id = None;
    dl.delivery = Delivery {
        exchange: "failed_payments".into(),
        routing_key: "payments".into(),
        ..Delivery::default()
    };
    dl
}

/// The JSON serializer's message after 2 retries (`retried`) or an unrecoverable failure.
fn symfony_json(retried: bool) -> DeadLetter {
    let redeliveries = if retried {
        r#"[{"retryCount":1,"exceptionMessage":"2026-12-03T11:35:28+00:00","flattenException":null,"redeliveredAt":"2026-12-03T11:35:28+00:00"},{"retryCount":2,"exceptionMessage":"2026-12-03T11:35:28+00:00","flattenException":null,"redeliveredAt":"2026-12-03T11:35:28+00:00"},{"retryCount":0,"exceptionMessage":null,"flattenException":null,"redeliveredAt":"2026-12-03T11:35:29+00:00"}]"#
    } else {
        r#"[{"retryCount":0,"exceptionMessage":null,"flattenException":null,"redeliveredAt":"2026-12-03T11:35:29+00:00"}]"#
    };
    let mut h = vec![
        (
            format!("{SF_STAMP}DelayStamp"),
            s(r#"[{"delay":200},{"delay":200},{"delay":0}]"#),
        ),
        (
            format!("{SF_STAMP}ErrorDetailsStamp"),
            s(
                r#"[{"exceptionClass":"App\\CardDeclined","exceptionCode":0,"exceptionMessage":"card declined for order order-0001","flattenException":{"class":"App\\CardDeclined","message":"card declined for order order-0001","asString":"App\\CardDeclined: card declined for order order-0001 in \/app\/worker.php:98\nStack trace:\n#0 {main}"}}]"#,
            ),
        ),
        (format!("{SF_STAMP}RedeliveryStamp"), s(redeliveries)),
        (
            format!("{SF_STAMP}SentToFailureTransportStamp"),
            s(r#"[{"originalReceiverName":"async"}]"#),
        ),
        ("type".to_string(), s("App\\ChargeCard")),
    ];
    if retried {
        h.push((
            "x-death".into(),
            HeaderValue::Array(vec![death(
                2,
                "expired",
                "delay_payments_payments_200_retry",
                "delays",
                &["delay_payments_payments_200_retry"],
                1_796_297_728,
            )]),
        ));
        h.push((
            "x-first-death-queue".into(),
            s("delay_payments_payments_200_retry"),
        ));
        h.push(("x-first-death-reason".into(), s("expired")));
    }
    sf_letter(h.into_iter().collect(), br#"{"orderId":"order-0001"}"#)
}

/// PHP's `serialize` of a string, as `s:N:"…";`.
fn php_s(v: &str) -> String {
    format!("s:{}:\"{v}\";", v.len())
}

/// A private property's name as PHP serializes it: `\0Class\0name`.
fn php_p(class: &str, name: &str) -> String {
    php_s(&format!("\0Symfony\\Component\\{class}\0{name}"))
}

/// The PhpSerializer's body: `addslashes(serialize($envelope))`.
fn symfony_php() -> DeadLetter {
    let stamp = |n: &str| format!("Symfony\\Component\\Messenger\\Stamp\\{n}");
    let redelivery = |n: i64| {
        format!(
            "O:49:\"{}\":2:{{{}i:{n};{}O:17:\"DateTimeImmutable\":3:{{s:4:\"date\";s:26:\"2026-12-03 11:45:4{n}.579671\";s:13:\"timezone_type\";i:3;s:8:\"timezone\";s:3:\"UTC\";}}}}",
            stamp("RedeliveryStamp"),
            php_p("Messenger\\Stamp\\RedeliveryStamp", "retryCount"),
            php_p("Messenger\\Stamp\\RedeliveryStamp", "redeliveredAt"),
        )
    };
    let raw = format!(
        "O:36:\"Symfony\\Component\\Messenger\\Envelope\":2:{{{}a:3:{{{}a:1:{{i:0;O:51:\"{}\":2:{{{}{}{}{}}}}}{}a:3:{{i:0;{}i:1;{}i:2;{}}}{}a:1:{{i:0;O:61:\"{}\":1:{{{}{}}}}}}}{}O:14:\"App\\ChargeCard\":1:{{s:7:\"orderId\";s:10:\"order-0001\";}}}}",
        php_p("Messenger\\Envelope", "stamps"),
        php_s(&stamp("ErrorDetailsStamp")),
        stamp("ErrorDetailsStamp"),
        php_p("Messenger\\Stamp\\ErrorDetailsStamp", "exceptionClass"),
        php_s("App\\CardDeclined"),
        php_p("Messenger\\Stamp\\ErrorDetailsStamp", "exceptionMessage"),
        php_s("card declined for order order-0001"),
        php_s(&stamp("RedeliveryStamp")),
        redelivery(1),
        redelivery(2),
        redelivery(0),
        php_s(&stamp("SentToFailureTransportStamp")),
        stamp("SentToFailureTransportStamp"),
        php_p(
            "Messenger\\Stamp\\SentToFailureTransportStamp",
            "originalReceiverName"
        ),
        php_s("async"),
        php_p("Messenger\\Envelope", "message"),
    );
    let mut body = String::new();
    for c in raw.chars() {
        match c {
            '\0' => body.push_str("\\0"),
            '"' | '\\' | '\'' => {
                body.push('\\');
                body.push(c);
            }
            c => body.push(c),
        }
    }
    sf_letter(Table::new(), body.as_bytes())
}

#[test]
fn symfony_failures_are_read_from_their_stamps_not_the_copied_x_death() {
    for (dl, retries) in [
        (symfony_json(true), 2),
        (symfony_json(false), 0),
        (symfony_php(), 2),
    ] {
        let ex = explain(&dl);
        assert_eq!(ex.convention, Convention::Symfony, "{dl:?}");
        let f = ex.fault.clone().expect("the exception");
        assert_eq!(f.exception_type.as_deref(), Some("App\\CardDeclined"));
        assert_eq!(
            f.message.as_deref(),
            Some("card declined for order order-0001")
        );
        assert_eq!(ex.retries, Some(retries));
        assert_eq!(ex.message_type.as_deref(), Some("App\\ChargeCard"));
        // The queue it failed in is the routing key Symfony sent it with, not the delay queue.
        assert_eq!(ex.source.queue.as_deref(), Some("payments"));
        let after = if retries == 0 {
            "without retries".to_string()
        } else {
            format!("after {retries} retries")
        };
        assert_eq!(
            ex.verdict,
            format!(
                "App\\CardDeclined in payments {after} on transport async: card declined for order order-0001"
            )
        );
        assert!(ex.failed_at.is_some(), "{dl:?}");
        // The delay queue's expiry, carried over: shown, never the arrival or the verdict.
        assert_eq!(ex.deaths.copied, !ex.deaths.is_empty());
        assert_eq!(warren::domain::arrival::exact_death(&ex.deaths), None);
        assert!(
            ex.fingerprint
                .summary
                .starts_with("App\\CardDeclined: card declined")
        );
        let p = plan_of(&dl, &ex);
        assert_eq!(p.target, Some(direct("payments")));
        assert_eq!(p.attempts, Attempts::Reset, "{p:?}");
        let json = dl.headers.keys().any(|k| k.starts_with(SF_STAMP));
        assert!(
            p.warnings
                .contains(&ReplayWarning::SymfonyDropsOnFailure { strippable: json }),
            "{:?}",
            p.warnings
        );
        assert!(!names(&p).iter().any(|n| n.starts_with("x-")), "{p:?}");
    }

    // Without ErrorDetailsStamp (a worker without that listener) the copied expiry is still not
    // the verdict nor the group.
    let mut bare = symfony_json(true);
    bare.headers.remove(&format!("{SF_STAMP}ErrorDetailsStamp"));
    let ex = explain(&bare);
    assert_eq!(
        ex.verdict,
        "Symfony Messenger put it here without recording the failure (from payments)"
    );
    assert!(
        !ex.fingerprint.summary.contains("delay_"),
        "{:?}",
        ex.fingerprint
    );

    // A Symfony worker without a failure transport whose queue dead-letters what it rejects: the
    // broker's x-death is real there and says where it failed; Symfony's stamps say why.
    let mut rejected = symfony_json(true);
    rejected
        .headers
        .remove(&format!("{SF_STAMP}SentToFailureTransportStamp"));
    rejected.headers.insert(
        "x-death",
        HeaderValue::Array(vec![death(
            1,
            "rejected",
            "payments",
            "payments",
            &[""],
            1_796_297_729,
        )]),
    );
    rejected.delivery.routing_key = String::new();
    let ex = explain(&rejected);
    assert_eq!(ex.convention, Convention::Symfony);
    assert!(!ex.deaths.copied);
    assert_eq!(ex.source.queue.as_deref(), Some("payments"));
    assert_eq!(
        ex.verdict,
        "App\\CardDeclined in payments after 2 retries: card declined for order order-0001"
    );
    let p = plan_of(&rejected, &ex);
    assert_eq!(p.target, Some(direct("payments")));
    assert!(
        !p.warnings
            .iter()
            .any(|w| matches!(w, ReplayWarning::SymfonyDropsOnFailure { .. }))
    );

    // JSON: the retry count and the error go; the failure stamp only when asked.
    let dl = symfony_json(true);
    let ex = explain(&dl);
    let kept = plan_of(&dl, &ex);
    let failure = format!("{SF_STAMP}SentToFailureTransportStamp");
    assert!(kept.removed.contains(&format!("{SF_STAMP}RedeliveryStamp")));
    assert!(
        kept.removed
            .contains(&format!("{SF_STAMP}ErrorDetailsStamp"))
    );
    assert!(kept.headers.contains_key(&failure));
    assert!(kept.headers.contains_key(&format!("{SF_STAMP}DelayStamp")));
    assert_eq!(kept.headers.get_str("type"), Some("App\\ChargeCard"));
    let stripped = replay::plan(
        &dl,
        &ex,
        &ReplayOptions {
            strip_failure_stamp: true,
            ..opts()
        },
    );
    assert!(!stripped.headers.contains_key(&failure));
    assert!(stripped.removed.contains(&failure));
    assert!(
        !stripped
            .warnings
            .iter()
            .any(|w| matches!(w, ReplayWarning::SymfonyDropsOnFailure { .. })),
        "{:?}",
        stripped.warnings
    );
    // PhpSerializer: the body is never changed; Symfony reads the last RedeliveryStamp, which
    // its failure transport set to 0, so the budget is fresh; the stamp cannot be stripped.
    let dl = symfony_php();
    let ex = explain(&dl);
    let p = replay::plan(
        &dl,
        &ex,
        &ReplayOptions {
            strip_failure_stamp: true,
            ..opts()
        },
    );
    assert_eq!(p.attempts, Attempts::Reset);
    assert!(
        p.warnings
            .contains(&ReplayWarning::SymfonyDropsOnFailure { strippable: false })
    );
}
