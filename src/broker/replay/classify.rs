//! What a run does with one delivery: explained, selected, planned, and ready to publish.

use lapin::types::{FieldTable, ShortString};

use crate::broker::amqp;
use crate::domain::archive::Stamp;
use crate::domain::engine::{Decision, Event};
use crate::domain::explain;
use crate::domain::identity;
use crate::domain::replay::{self as plan, ReplayOptions};

use super::{Action, Job, check_name, shell::Outgoing};

/// Turns one delivery into the engine's event, and the message to publish when it is selected.
pub(super) fn classify(
    job: &Job,
    seen: u64,
    delivery: lapin::message::Delivery,
) -> (Event, Option<Outgoing>) {
    let t = delivery.delivery_tag;
    // An archive publishes the delivery's own properties, not a round trip through the model.
    let archived = match &job.action {
        Action::Archive { .. } => Some(delivery.properties.clone()),
        _ => None,
    };
    // The whole body: replay publishes exactly what it read.
    let msg = amqp::dead_letter_from_delivery(&job.dlq, seen, delivery, usize::MAX);
    decide(job, seen, t, msg, archived)
}

/// [`classify`] of a message already in the model (an AMQP 1.0 delivery reads into it too):
/// `t` is its tag, `archived` the properties an archive publishes.
pub(super) fn decide(
    job: &Job,
    seen: u64,
    t: u64,
    mut msg: crate::domain::message::DeadLetter,
    archived: Option<lapin::BasicProperties>,
) -> (Event, Option<Outgoing>) {
    let key = identity::message_key(&msg);
    // Edit, then replay: the message is planned and published as the operator edited it (its
    // `x-death` and delivery count as the broker has them now).
    if let Some(edit) = job.edits.as_ref().and_then(|e| e.of(&key)) {
        edit.apply(&mut msg);
    }
    let audited = if identity::is_id_key(&key) {
        job.replays.get(&key).copied().unwrap_or(0)
    } else {
        0
    };
    let exp = if job.selection.reads_story() {
        explain::explain_with(&msg, &job.conventions, audited)
    } else {
        explain::explain_for_replay(&msg, &job.conventions, audited)
    };
    let age = crate::domain::arrival::Arrival::of(
        &exp.deaths,
        exp.failed_at,
        job.first_seen.get(&key).copied(),
    )
    .age_secs(jiff::Timestamp::now());
    let delivery_count = msg.delivery.delivery_count;
    let near_limit = delivery_count
        .filter(|&c| !job.quorum.message_safe(c))
        .map(|c| {
            format!(
                "message {} has been delivered {c} times; returning more messages could push them past the queue's delivery limit",
                seen + 1
            )
        });
    let mut out = None;
    let selected = job.selection.selects(&msg, &exp, &key, age);
    let decision = if !selected {
        Decision::Skip
    } else if let Action::Discard { only } = &job.action {
        let in_snapshot = only
            .as_ref()
            .is_none_or(|set| set.lock().unwrap_or_else(|e| e.into_inner()).take(&msg));
        if in_snapshot {
            Decision::Discard { key }
        } else {
            // Not in the snapshot (it came later, or changed): never deleted.
            Decision::Skip
        }
    } else if let (
        Action::Archive {
            stream,
            stamp,
            user_id,
        },
        Some(props),
    ) = (&job.action, archived)
    {
        match (
            archive_properties(props, stamp, user_id),
            amqp::short("the archive stream's name", stream),
        ) {
            (_, Err(e)) => Decision::Refuse(format!("cannot be archived: {e}")),
            (props, Ok(routing_key)) => {
                out = Some(Outgoing {
                    tag: t,
                    target: (ShortString::default(), routing_key),
                    props,
                    body: msg.body,
                    replayed_before: false,
                    death_key: None,
                });
                Decision::Publish {
                    key,
                    target: stream.clone(),
                }
            }
        }
    } else {
        match plan_publish(job, &msg, &exp) {
            Err(keeps) => keeps,
            Ok(planned) => {
                let target = (
                    planned.exchange.to_string(),
                    planned.routing_key.to_string(),
                );
                let mut death_key = None;
                let decision = if job.allowed_targets.contains(&target) {
                    Decision::Publish {
                        key,
                        target: planned.target,
                    }
                } else {
                    if target.0.is_empty() {
                        death_key = exp.deaths.routing_key_in(&target.1).map(String::from);
                    }
                    // Only with `job.checks` (see `refusal`): checked when first met.
                    Decision::Unchecked {
                        key,
                        target: planned.target,
                        check: check_name(&target),
                    }
                };
                out = Some(Outgoing {
                    tag: t,
                    target: (planned.exchange, planned.routing_key),
                    props: planned.props,
                    body: msg.body,
                    replayed_before: planned.replayed_before,
                    death_key,
                });
                decision
            }
        }
    };
    (
        Event::Delivery {
            tag: t,
            decision,
            near_limit,
        },
        out,
    )
}

/// A message planned for a replay, ready to publish.
pub struct Planned {
    pub exchange: ShortString,
    pub routing_key: ShortString,
    pub props: lapin::BasicProperties,
    /// The target as the counts name it (the queue, else the exchange).
    pub target: String,
    /// Warren replayed it before (its plan writes a replay count above 1).
    pub replayed_before: bool,
}

/// Plans one message as `job` says (`domain::replay`, wait-queue redirects, the checked
/// targets); `Err` is the decision that keeps it in the DLQ ([`Decision::Keep`] or
/// [`Decision::Refuse`]). The run decides with it per delivery, and `warren restore --replay`
/// per archived message.
pub fn plan_publish(
    job: &Job,
    msg: &crate::domain::message::DeadLetter,
    exp: &explain::Explanation,
) -> Result<Planned, Decision> {
    let mut p = plan::plan_with(
        msg,
        exp,
        &ReplayOptions {
            keep_attempts: job.keep_attempts,
            clear_expiry: job.clear_expiry,
            strip_failure_stamp: job.strip_failure_stamp,
            target_queue: job.to.clone(),
            // Decided per message at the moment it is taken: a deadline may pass mid-run.
            now: jiff::Timestamp::now(),
            run_id: job.run_id.clone(),
        },
        &job.endpoint_redirects,
    );
    plan::apply_redirect(&mut p, &job.redirects);
    let mut properties = msg.properties.clone();
    if p.removed_properties.contains(&"expiration") {
        properties.expiration = None;
    }
    match (refusal(job, &p), p.target.as_ref()) {
        _ if let Some(why) = p.held_back() => Err(Decision::Keep(why)),
        (Some(why), _) => Err(Decision::Refuse(why)),
        (None, None) => Err(Decision::Refuse(
            "no known origin to send it back to".into(),
        )),
        (None, Some(tg)) => match (
            amqp::properties_to_amqp(&properties, &p.headers),
            amqp::short("the exchange name", &tg.exchange),
            amqp::short("the routing key", &tg.routing_key),
        ) {
            (Err(e), _, _) => Err(Decision::Refuse(format!(
                "cannot be re-encoded for publishing: {e}"
            ))),
            // Names from headers and bodies: one too long for AMQP holds this message.
            (_, Err(e), _) | (_, _, Err(e)) => {
                Err(Decision::Refuse(format!("cannot be published: {e}")))
            }
            (Ok(props), Ok(exchange), Ok(routing_key)) => Ok(Planned {
                exchange,
                routing_key,
                props,
                target: tg
                    .expected_queue
                    .clone()
                    .unwrap_or_else(|| format!("exchange {}", tg.exchange)),
                replayed_before: p.replay_count > 1,
            }),
        },
    }
}

/// The delivery's own properties for the archive stream: every property as the broker
/// delivered it but `user_id`, which is the archiver's (the message's own kept in
/// [`ORIGINAL_USER_ID`](crate::domain::archive::ORIGINAL_USER_ID)); the headers as their exact encoding in one header (a stream would drop
/// `x-death`, see [`ORIGINAL_HEADERS`](crate::domain::archive::ORIGINAL_HEADERS)) beside the
/// archive's four. Reading the archive puts them back (`amqp::dead_letter_from_delivery`).
pub(crate) fn archive_properties(
    props: lapin::BasicProperties,
    stamp: &Stamp,
    user_id: &str,
) -> lapin::BasicProperties {
    use lapin::types::{AMQPValue, LongString};
    let mut headers = FieldTable::default();
    if let Some(own) = props.headers() {
        headers.insert(
            ShortString::from(crate::domain::archive::ORIGINAL_HEADERS),
            AMQPValue::LongString(LongString::from(amqp::encode_value(
                &AMQPValue::FieldTable(own.clone()),
            ))),
        );
    }
    for (k, v) in stamp.headers(jiff::Timestamp::now()) {
        headers.insert(
            ShortString::from(k),
            AMQPValue::LongString(LongString::from(v.into_bytes())),
        );
    }
    let own = props.user_id().as_ref().map(|u| u.to_string());
    headers.insert(
        ShortString::from(crate::domain::archive::ORIGINAL_USER_ID),
        AMQPValue::LongString(LongString::from(own.unwrap_or_default().into_bytes())),
    );
    props
        .with_headers(headers)
        .with_user_id(ShortString::from(user_id.to_string()))
}

/// Why a planned message must not be published in this run, if it must not.
fn refusal(job: &Job, p: &plan::ReplayPlan) -> Option<String> {
    let Some(target) = p.target.as_ref() else {
        return Some("no known origin to send it back to; name one with --to".into());
    };
    if target.expected_queue.as_deref() == Some(job.dlq.as_str()) {
        return Some("its target is the dead-letter queue itself".into());
    }
    if job.checks.is_none()
        && !job
            .allowed_targets
            .contains(&(target.exchange.clone(), target.routing_key.clone()))
    {
        return Some(format!(
            "target exchange '{}' key '{}' was not checked before the run (not in the preview)",
            target.exchange, target.routing_key
        ));
    }
    None
}
