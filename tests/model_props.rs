//! Property tests: whatever headers, properties, queue names and bodies a broker hands over,
//! `xdeath::parse`, `explain::explain` and `replay::plan` do not panic, the plan never adds a
//! header starting with `x-`, never keeps a header it strips (unless attempts are kept, when it
//! changes nothing but Warren's own headers and a passed deadline cleared on request), removes a
//! framework deadline only with `clear_expiry`, and the planned headers do not depend on the body.

use proptest::prelude::*;
use warren::domain::explain::{Explanation, explain};
use warren::domain::message::{DeadLetter, Delivery, Properties};
use warren::domain::replay::{self, ReplayOptions, is_stripped};
use warren::domain::value::{HeaderValue, Table};
use warren::domain::verdict::MAX_CHARS;
use warren::domain::xdeath;

/// Header names the model reads, so random tables hit the real code paths.
const NAMES: &[&str] = &[
    "x-death",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-first-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
    "x-last-death-exchange",
    "x-delivery-count",
    "x-acquired-count",
    "x-exception-message",
    "x-exception-stacktrace",
    "x-original-exchange",
    "x-original-routingKey",
    "retry-count",
    "MT-Reason",
    "MT-Fault-ExceptionType",
    "MT-Fault-Message",
    "MT-Fault-StackTrace",
    "MT-Fault-Timestamp",
    "MT-Fault-InputAddress",
    "MT-Fault-ConsumerType",
    "MT-Fault-MessageType",
    "MT-Fault-RetryCount",
    "MT-Redelivery-Count",
    "MT-Host-MachineName",
    "MT-OriginalMessageId",
    "NServiceBus.FailedQ",
    "NServiceBus.ExceptionInfo.ExceptionType",
    "NServiceBus.ExceptionInfo.Message",
    "NServiceBus.TimeOfFailure",
    "NServiceBus.Retries",
    "NServiceBus.Retries.Timestamp",
    "NServiceBus.MessageId",
    "NServiceBus.EnclosedMessageTypes",
    "ServiceControl.Retry.UniqueMessageId",
    "exception-type",
    "exception-message",
    "original-destination",
    "failed-at",
    "attempts",
    "rbs2-error-details",
    "rbs2-source-queue",
    "rbs2-delivery-count",
    "rbs2-msg-id",
    "retry_info",
    "warren-replay-count",
    "warren-replayed-from",
    "warren-replayed-at",
    "count",
    "reason",
    "queue",
    "time",
    "exchange",
    "routing-keys",
    "original-expiration",
    // Celery
    "lang",
    "task",
    "id",
    "retries",
    "expires",
    // rascal
    "rascal",
    "originalQueue",
    "recovery",
    "error",
    "message",
    "redeliveries",
    "immediateNack",
    "forwarded",
    "CC",
];

const WORDS: &[&str] = &[
    "rejected",
    "expired",
    "maxlen",
    "delivery_limit",
    "skip",
    "fault",
    "dead-letter",
    "orders.process",
    "Sales@SALES-01",
    "@",
    "",
    "rabbitmq://rabbitmq/shipping-label",
    "rabbitmq://",
    "Shop.Shipping.CarrierUnavailableException",
    "java.lang.IllegalStateException: no",
    "Caused by: a.B: c",
    "2025-09-28 06:50:15:123456 Z",
    "2025-09-28T06:50:15Z",
    "Not UTF-8, base64 is: gP8=",
    "{\"error_class\":\"E\",\"num_attempts\":\"x\",\"backtrace\":[1,{}]}",
    "99999999999999999999",
    "-5",
    "py",
    "2020-01-01T00:00:00.000000+00:00",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(NAMES).prop_map(str::to_string),
        1 => "[a-zA-Z.\\-_]{0,12}",
        1 => "x-[a-z\\-]{0,10}",
    ]
}

fn text() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => proptest::sample::select(WORDS).prop_map(|w| w.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..40),
        1 => ".{0,60}".prop_map(String::into_bytes),
    ]
}

fn leaf() -> impl Strategy<Value = HeaderValue> {
    prop_oneof![
        Just(HeaderValue::Void),
        any::<bool>().prop_map(HeaderValue::Bool),
        any::<i8>().prop_map(HeaderValue::I8),
        any::<u8>().prop_map(HeaderValue::U8),
        any::<i16>().prop_map(HeaderValue::I16),
        any::<u16>().prop_map(HeaderValue::U16),
        any::<i32>().prop_map(HeaderValue::I32),
        any::<u32>().prop_map(HeaderValue::U32),
        any::<i64>().prop_map(HeaderValue::I64),
        any::<f32>().prop_map(HeaderValue::F32),
        any::<f64>().prop_map(HeaderValue::F64),
        (any::<u8>(), any::<u32>())
            .prop_map(|(scale, value)| HeaderValue::Decimal { scale, value }),
        text().prop_map(HeaderValue::ShortString),
        text().prop_map(HeaderValue::LongString),
        any::<u64>().prop_map(HeaderValue::Timestamp),
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(HeaderValue::Bytes),
    ]
}

fn value() -> impl Strategy<Value = HeaderValue> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(HeaderValue::Array),
            proptest::collection::vec((key(), inner), 0..6)
                .prop_map(|pairs| HeaderValue::Table(pairs.into_iter().collect())),
        ]
    })
}

fn random_table() -> impl Strategy<Value = Table> {
    proptest::collection::vec((key(), value()), 0..14).prop_map(|pairs| pairs.into_iter().collect())
}

/// Random headers, some shaped like a Celery task or a rascal failure with random parts, so the
/// readers and plan rules of those frameworks meet hostile values too.
fn table() -> impl Strategy<Value = Table> {
    let celery =
        (random_table(), value(), value(), text()).prop_map(|(mut t, retries, expires, id)| {
            t.insert("lang", HeaderValue::string("py"));
            t.insert("task", HeaderValue::string("app.charge"));
            t.insert("id", HeaderValue::LongString(id));
            t.insert("retries", retries);
            t.insert("expires", expires);
            t
        });
    let rascal = (random_table(), random_table(), value(), value()).prop_map(
        |(mut t, mut r, recovery, error)| {
            r.insert("originalQueue", HeaderValue::string("work"));
            r.insert("recovery", recovery);
            r.insert("error", error);
            t.insert("rascal", HeaderValue::Table(r));
            t
        },
    );
    // A hand-rolled ladder's counter and error text, any type.
    let ladder = (random_table(), value(), value()).prop_map(|(mut t, count, error)| {
        t.insert("x-retry-count", count);
        t.insert("x-last-error", error);
        t
    });
    prop_oneof![4 => random_table(), 1 => celery, 1 => rascal, 1 => ladder]
}

/// A body: random bytes, or JSON shaped like the envelopes the model reads.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let json_text = prop_oneof![
        Just("{\"queue_name\":\"default\",\"actor_name\":\"a\",\"options\":{\"retries\":\"x\",\"traceback\":\"\\n\"}}".to_string()),
        Just("{\"queue_name\":\"q\",\"actor_name\":\"a\",\"args\":[],\"kwargs\":{},\"options\":{\"retries\":9223372036854775807,\"max_retries\":-9223372036854775808},\"message_id\":\"m\"}".to_string()),
        Just("{\"queue_name\":\"q\",\"actor_name\":\"a\",\"options\":{\"retries\":-3,\"max_retries\":null},\"message_id\":\"m\"}".to_string()),
        Just("{\"messageType\":[7],\"message\":{}}".to_string()),
        Just("{\"Exception\":\"System.X.FooException:\",\"Queue\":\"\",\"BasicProperties\":{\"Type\":5}}".to_string()),
        "\\{\"[a-zA-Z_]{1,10}\":\".{0,20}\"\\}",
    ];
    prop_oneof![
        json_text.prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

fn queue() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("orders.dlq".to_string()),
        Just("shipping-label_error".to_string()),
        Just("_skipped".to_string()),
        Just("default.XQ".to_string()),
        Just(".XQ".to_string()),
        Just("EasyNetQ_Default_Error_Queue".to_string()),
        Just("wolverine-dead-letter-queue".to_string()),
        Just("mailer-error".to_string()),
        Just("-error".to_string()),
        Just("orders.group.dlq".to_string()),
        ".{0,20}",
    ]
}

fn dead_letter() -> impl Strategy<Value = DeadLetter> {
    (
        queue(),
        table(),
        body(),
        any::<u64>(),
        proptest::option::of(prop_oneof![
            Just("EasyNetQ.SystemMessages.Error, EasyNetQ".to_string()),
            ".{0,12}"
        ]),
        ".{0,12}",
    )
        .prop_map(|(queue, headers, body, size, kind, rk)| {
            // Either the whole body or a cut one, as browsing with a body cap gives.
            let body_size = if size % 2 == 0 {
                body.len() as u64
            } else {
                size
            };
            DeadLetter {
                queue,
                position: 0,
                properties: Properties {
                    kind,
                    ..Properties::default()
                },
                headers,
                body,
                body_size,
                delivery: Delivery {
                    routing_key: rk,
                    ..Delivery::default()
                },
            }
        })
}

fn options() -> impl Strategy<Value = ReplayOptions> {
    (
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(".{0,12}"),
        0i64..4_000_000_000,
    )
        .prop_map(|(keep, clear, to, secs)| ReplayOptions {
            keep_attempts: keep,
            clear_expiry: clear,
            strip_failure_stamp: false,
            target_queue: to,
            now: jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
            run_id: None,
        })
}

const WARREN: [&str; 3] = [
    "warren-replayed-from",
    "warren-replayed-at",
    "warren-replay-count",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn xdeath_parse_never_panics(headers in table()) {
        let history = xdeath::parse(&headers);
        // Whatever it kept came from the header; it never invents entries.
        let n = headers.get("x-death").map_or(0, |v| match v {
            HeaderValue::Array(a) => a.len(),
            HeaderValue::Table(_) => 1,
            _ => 0,
        });
        prop_assert!(history.entries.len() <= n);
    }

    #[test]
    fn dramatiqs_id_never_panics_and_is_the_same_however_the_body_is_cut(
        id in "[a-f0-9-]{1,40}",
        args in ".{0,200}",
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        cut in 0usize..400,
    ) {
        prop_assert!(warren::domain::convention::dramatiq_message_id(&bytes).is_none_or(|i| !i.trim().is_empty()));
        let body = format!(
            r#"{{"queue_name":"work","actor_name":"charge","args":[{}],"kwargs":{{}},"options":{{"retries":1}},"message_id":"{id}","message_timestamp":1}}"#,
            serde_json::Value::String(args)
        );
        let whole = warren::domain::convention::dramatiq_message_id(body.as_bytes());
        prop_assert_eq!(whole.as_deref(), Some(id.as_str()));
        let cut = cut.min(body.len());
        let part = warren::domain::convention::dramatiq_message_id(&body.as_bytes()[..cut]);
        // Cut before the id's end: none; after it: the same id.
        let end = body.rfind(&format!("\"{id}\"")).map_or(0, |i| i + id.len() + 2);
        if cut >= end {
            prop_assert_eq!(part, whole);
        } else {
            prop_assert_eq!(part, None);
        }
    }

    #[test]
    fn explain_and_plan_hold_their_promises(dl in dead_letter(), opts in options()) {
        let ex = explain(&dl);
        prop_assert!(!ex.verdict.is_empty());
        prop_assert!(ex.verdict.chars().count() <= MAX_CHARS);
        prop_assert!(!ex.verdict.chars().any(char::is_control));
        prop_assert_eq!(ex.fingerprint.key.len(), 16);
        prop_assert!(ex.fingerprint.key.bytes().all(|b| b.is_ascii_hexdigit()));
        prop_assert!(ex.replay_count >= 0);

        let plan = replay::plan(&dl, &ex, &opts);
        // Never an x- header of Warren's making.
        for (k, _) in &plan.added {
            prop_assert!(!k.starts_with("x-"), "added {}", k);
        }
        for k in plan.headers.keys() {
            prop_assert!(!k.starts_with("x-") || dl.headers.contains_key(k), "new header {}", k);
        }
        prop_assert_eq!(plan.replay_count, ex.replay_count + 1);
        prop_assert_eq!(plan.headers.get("warren-replay-count"), Some(&HeaderValue::I64(plan.replay_count)));
        prop_assert_eq!(plan.headers.get_str("warren-replayed-from"), Some(dl.queue.as_str()));

        let others = |t: &Table| -> Table {
            t.iter()
                .filter(|(k, _)| !WARREN.contains(k))
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect()
        };
        // A passed deadline goes only when asked, and only then does a kept-attempts plan remove
        // anything.
        if plan.removed.iter().any(|r| r == "expires") {
            prop_assert!(opts.clear_expiry && plan.expired.is_some());
        }
        if plan.held_back().is_some() {
            prop_assert!(!opts.clear_expiry);
        }
        if opts.keep_attempts {
            let deadline: Vec<String> = plan.expired.iter().filter(|e| e.cleared).map(|e| e.header.to_string()).collect();
            prop_assert!(plan.removed.iter().all(|r| deadline.contains(r)), "removed {:?}", plan.removed);
            let mut before = others(&dl.headers);
            before.retain(|k, _| !plan.removed.iter().any(|r| r == k));
            prop_assert_eq!(others(&plan.headers), before);
        } else {
            // A ladder's counter goes out as 0 or not at all; its error text never.
            for n in &ex.counter_headers {
                prop_assert!(plan.headers.get(n).is_none_or(|v| v.as_i64() == Some(0)), "counter {} survives", n);
            }
            for n in &ex.error_headers {
                prop_assert!(!plan.headers.contains_key(n), "error text {} survives", n);
            }
            for k in plan.headers.keys() {
                prop_assert!(!is_stripped(ex.convention, k), "kept stripped header {}", k);
                prop_assert!(
                    k != "x-death" && !k.starts_with("x-first-death-") && !k.starts_with("x-last-death-")
                        && k != "x-delivery-count" && k != "x-acquired-count",
                    "kept broker header {}", k
                );
            }
            // Removed is exactly what went: nothing else disappears.
            for k in dl.headers.keys() {
                prop_assert_eq!(plan.headers.contains_key(k), !plan.removed.iter().any(|r| r == k) || WARREN.contains(&k));
            }
        }

        match opts.target_queue.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
            Some(q) => {
                let t = plan.target.clone();
                prop_assert_eq!(t.as_ref().map(|t| t.exchange.as_str()), Some(""));
                prop_assert_eq!(t.as_ref().map(|t| t.routing_key.as_str()), Some(q));
            }
            None => {
                if plan.target.is_none() {
                    prop_assert!(!plan.warnings.is_empty(), "an unpublishable plan says why");
                }
            }
        }
        for w in &plan.warnings {
            prop_assert!(!w.to_string().is_empty());
        }
    }

    #[test]
    fn planned_headers_do_not_depend_on_the_body(dl in dead_letter(), opts in options()) {
        let mut without = dl.clone();
        without.body = Vec::new();
        without.body_size = 0;
        let a = replay::plan(&dl, &explain(&dl), &opts);
        let b = replay::plan(&without, &explain(&without), &opts);
        prop_assert_eq!(a.headers, b.headers);
        prop_assert_eq!(a.removed, b.removed);
    }

    /// The replay's lighter explanation (no verdict, no fingerprint) plans every message
    /// exactly as the whole one does.
    #[test]
    fn the_replay_explanation_plans_as_the_whole_one(dl in dead_letter(), opts in options()) {
        let own = warren::domain::convention::Conventions::default();
        let whole = warren::domain::explain::explain_with(&dl, &own, 1);
        let light = warren::domain::explain::explain_for_replay(&dl, &own, 1);
        prop_assert_eq!(
            Explanation { verdict: String::new(), fingerprint: Default::default(), ..whole.clone() },
            light.clone()
        );
        let a = replay::plan(&dl, &whole, &opts);
        let b = replay::plan(&dl, &light, &opts);
        prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
}
