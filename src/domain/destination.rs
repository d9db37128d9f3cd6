//! Where a replayed message comes to rest, and whether it survives arriving there.
//!
//! A confirm proves only that the first queue took the message. Two cases turn a confirmed
//! replay into a loss, both seen on real brokers:
//! - a *wait queue* (a message TTL and a dead-letter exchange, no consumer): the message expires
//!   and is dead-lettered on, through the wait queue's dead-letter route — which, without a
//!   dead-letter routing key, uses the key it was published with (for a replay through the
//!   default exchange, the wait queue's own name) and may reach no queue at all;
//! - a *length limit*: with the default overflow `drop-head` the broker confirms the publish and
//!   drops the oldest message; `reject-publish-dlx` nacks it and dead-letters a copy.
//!
//! So the preflight follows each target hop by hop ([`step`], pure; the broker layer fetches
//! each queue's settings) to the queue that will really be consumed, and then checks the room
//! there ([`check_room`]). A wait queue is never a replay target: the consuming queue is.

// Lives with the settings it reads, so that discovery (which finds ladders by it) does not
// import this module, which imports discovery.
pub use super::discovery::is_wait_queue;
use super::discovery::{EffectiveSettings, QueueInfo, RoutingTable};

/// At most this many wait queues between a target and its resting place (a real ladder has one
/// or two; more is a loop).
pub const MAX_HOPS: usize = 8;

/// What a publish into `queue` with `routing_key` does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The message stays here: `queue` is consumed (or at least not a wait queue).
    Rest,
    /// A wait queue: the message expires after `ttl_ms` and is dead-lettered on to `next` with
    /// `routing_key`.
    Wait {
        ttl_ms: u64,
        next: String,
        routing_key: String,
    },
    /// A wait queue whose dead-letter route reaches no queue: the message would be dropped.
    Dropped { why: String },
    /// A wait queue whose dead-letter route reaches several queues (a fan-out).
    Ambiguous { queues: Vec<String> },
}

/// The next hop of a message published into `q` with `routing_key`.
pub fn step(
    q: &QueueInfo,
    s: &EffectiveSettings,
    routing_key: &str,
    routes: &RoutingTable,
) -> Step {
    if !is_wait_queue(q, s) {
        return Step::Rest;
    }
    let (Some(ttl_ms), Some(dlx)) = (s.message_ttl_ms, s.dead_letter_exchange.as_deref()) else {
        return Step::Rest;
    };
    // Without a dead-letter routing key the broker keeps the key the message was published with.
    let key = s
        .dead_letter_routing_key
        .clone()
        .unwrap_or_else(|| routing_key.to_string());
    let reached = routes.route(dlx, &key).queues;
    match reached.as_slice() {
        [] => Step::Dropped {
            why: format!(
                "'{}' is a wait queue (TTL {ttl_ms} ms): after it expires there, its dead-letter route (exchange '{}', key '{key}') reaches no queue, so the broker drops the message",
                q.name,
                if dlx.is_empty() { "(default)" } else { dlx }
            ),
        },
        [one] => Step::Wait {
            ttl_ms,
            next: one.clone(),
            routing_key: key,
        },
        many => Step::Ambiguous {
            queues: many.to_vec(),
        },
    }
}

/// How the resting queue takes more messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Room {
    /// No length limit.
    Unlimited,
    /// Everything fits.
    Fits,
    /// Only `fits` of the messages fit; what happens to the rest is in `overflow`.
    Partial {
        fits: u64,
        limit: String,
        overflow: Overflow,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// Confirmed, then the oldest message is dropped (or dead-lettered): a silent loss.
    DropHead,
    /// Nacked: the replayed message stays in the DLQ.
    RejectPublish,
    /// Nacked and dead-lettered: the DLQ keeps it and a copy goes to the dead-letter exchange.
    RejectPublishDlx,
}

impl Overflow {
    pub fn parse(s: Option<&str>) -> Overflow {
        match s.map(str::trim) {
            Some("reject-publish") => Overflow::RejectPublish,
            Some("reject-publish-dlx") => Overflow::RejectPublishDlx,
            _ => Overflow::DropHead,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Overflow::DropHead => "drop-head",
            Overflow::RejectPublish => "reject-publish",
            Overflow::RejectPublishDlx => "reject-publish-dlx",
        }
    }
}

/// Whether `count` messages of `bytes` body bytes in all fit into `q` now.
pub fn check_room(q: &QueueInfo, s: &EffectiveSettings, count: u64, bytes: u64) -> Room {
    if s.max_length.is_none() && s.max_length_bytes.is_none() {
        return Room::Unlimited;
    }
    let overflow = Overflow::parse(s.overflow.as_deref());
    let mut fits = count;
    let mut limit = String::new();
    if let Some(max) = s.max_length {
        // Unknown depth: assume full, the cautious answer.
        let free = q.messages.map_or(0, |d| max.saturating_sub(d));
        if free < fits {
            fits = free;
            limit = format!(
                "holds at most {max} messages and has {} (room for {free})",
                q.messages
                    .map_or("an unknown number".to_string(), |d| d.to_string())
            );
        }
    }
    if let Some(max) = s.max_length_bytes {
        let free = q.message_bytes.map_or(0, |b| max.saturating_sub(b));
        if bytes > free {
            // Scale by the average size: the order of arrival decides which ones fit.
            let per = bytes.checked_div(count.max(1)).unwrap_or(0).max(1);
            let by_bytes = free / per;
            if by_bytes < fits {
                fits = by_bytes;
                limit = format!(
                    "holds at most {max} body bytes and has {} (room for about {by_bytes} of these)",
                    q.message_bytes
                        .map_or("an unknown amount".to_string(), |b| b.to_string())
                );
            }
        }
    }
    if fits >= count {
        Room::Fits
    } else {
        Room::Partial {
            fits,
            limit,
            overflow,
        }
    }
}

/// What a [`Room::Partial`] means for a replay of `count` messages into `queue`: a refusal
/// (nothing may go there, it would be lost or duplicated) or a warning (the broker refuses what
/// does not fit, and it stays in the DLQ).
pub fn room_verdict(queue: &str, count: u64, room: &Room) -> Option<Result<String, String>> {
    let Room::Partial {
        fits,
        limit,
        overflow,
    } = room
    else {
        return None;
    };
    let over = count.saturating_sub(*fits);
    let fix = if *fits == 0 {
        "Make room first (it is full)".to_string()
    } else {
        format!("Make room first, or move at most {fits} with --limit {fits}")
    };
    Some(match overflow {
        Overflow::DropHead => Err(format!(
            "'{queue}' {limit}; with overflow drop-head the broker would confirm all {count} and then drop {over} of its oldest messages. {fix}"
        )),
        Overflow::RejectPublishDlx => Err(format!(
            "'{queue}' {limit}; with overflow reject-publish-dlx the broker would refuse {over} and dead-letter a copy of each while the original stays in the DLQ. {fix}"
        )),
        Overflow::RejectPublish => Ok(format!(
            "'{queue}' {limit}; with overflow reject-publish the broker refuses the {over} that do not fit, and they stay in the DLQ"
        )),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::discovery::{Binding, ExchangeInfo, ExchangeKind, effective_settings};

    fn settings(q: &QueueInfo) -> EffectiveSettings {
        effective_settings(q, q.effective_policy.as_ref())
    }

    fn exchanges() -> Vec<ExchangeInfo> {
        vec![ExchangeInfo {
            name: "retry".into(),
            kind: ExchangeKind::Direct,
        }]
    }

    /// The hand-rolled ladder: the wait queue dead-letters through `retry` with no routing key,
    /// so a replay through the default exchange (key = the wait queue's name) reaches nothing.
    #[test]
    fn a_wait_queue_without_a_route_back_drops_the_replay() {
        let wait = QueueInfo::named("orders.wait")
            .with_arg("x-message-ttl", json!(5000))
            .with_arg("x-dead-letter-exchange", json!("retry"));
        let x = exchanges();
        let b = vec![Binding::to_queue("retry", "orders", "orders")];
        let t = RoutingTable::new(&x, &b);
        let st = step(&wait, &settings(&wait), "orders.wait", &t);
        assert!(matches!(st, Step::Dropped { .. }), "{st:?}");
        // Published with the work queue's key, the same wait queue routes back to it.
        assert_eq!(
            step(&wait, &settings(&wait), "orders", &t),
            Step::Wait {
                ttl_ms: 5000,
                next: "orders".into(),
                routing_key: "orders".into()
            }
        );
    }

    #[test]
    fn a_dead_letter_routing_key_decides_the_way_back() {
        let wait = QueueInfo::named("w")
            .with_arg("x-message-ttl", json!(100))
            .with_arg("x-dead-letter-exchange", json!(""))
            .with_arg("x-dead-letter-routing-key", json!("work"));
        let t = RoutingTable::new(&[], &[]);
        assert!(matches!(
            step(&wait, &settings(&wait), "w", &t),
            Step::Wait { next, .. } if next == "work"
        ));
        // A consumer on it: it is a work queue with a TTL, not a wait queue.
        let mut consumed = wait.clone();
        consumed.consumers = Some(2);
        assert_eq!(step(&consumed, &settings(&consumed), "w", &t), Step::Rest);
        let plain = QueueInfo::named("work");
        assert_eq!(step(&plain, &settings(&plain), "work", &t), Step::Rest);
    }

    #[test]
    fn capped_targets_refuse_or_warn_by_overflow() {
        let q = QueueInfo::named("capped")
            .with_arg("x-max-length", json!(3000))
            .with_messages(0);
        let s = settings(&q);
        let room = check_room(&q, &s, 10_000, 10_000 * 1024);
        assert!(
            matches!(
                room,
                Room::Partial {
                    fits: 3000,
                    overflow: Overflow::DropHead,
                    ..
                }
            ),
            "{room:?}"
        );
        let v = room_verdict("capped", 10_000, &room);
        assert!(
            matches!(&v, Some(Err(t)) if t.contains("drop 7000") && t.contains("--limit 3000")),
            "{v:?}"
        );
        assert_eq!(check_room(&q, &s, 3000, 0), Room::Fits);

        let rp = q.clone().with_arg("x-overflow", json!("reject-publish"));
        let room = check_room(&rp, &settings(&rp), 5000, 0);
        assert!(matches!(room_verdict("capped", 5000, &room), Some(Ok(_))));
        let dlx = q
            .clone()
            .with_arg("x-overflow", json!("reject-publish-dlx"));
        let room = check_room(&dlx, &settings(&dlx), 5000, 0);
        assert!(matches!(room_verdict("capped", 5000, &room), Some(Err(_))));
        let free = QueueInfo::named("free");
        assert_eq!(check_room(&free, &settings(&free), 1, 1), Room::Unlimited);
    }

    #[test]
    fn policies_cap_too_and_the_lower_limit_wins() {
        let mut q = QueueInfo::named("p")
            .with_arg("x-max-length", json!(50))
            .with_messages(45);
        q.effective_policy = json!({"max-length": 10, "overflow": "reject-publish"})
            .as_object()
            .cloned();
        let s = settings(&q);
        assert_eq!(s.max_length, Some(10));
        assert!(matches!(
            check_room(&q, &s, 1, 1),
            Room::Partial {
                fits: 0,
                overflow: Overflow::RejectPublish,
                ..
            }
        ));
        let bytes = QueueInfo::named("b").with_arg("x-max-length-bytes", json!(1000));
        let mut bytes = bytes;
        bytes.message_bytes = Some(900);
        assert!(matches!(
            check_room(&bytes, &settings(&bytes), 10, 1000),
            Room::Partial { fits: 1, .. }
        ));
    }
}
