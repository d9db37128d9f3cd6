//! dramatiq's record: in the body (its JSON names the actor, the queue and, in `options`, the
//! traceback and the retries), read from the body's head when the body was cut. Its messages
//! wait in `<queue>.XQ`; its retry count stays in the body, which a replay never changes.

use serde_json::Value;

use super::framework::{
    BASE, Counter, Framework, Letter, Named, Replay, Role, Story, Told, after, has_stem,
};
use super::{
    Convention, Fault, HASHED_BODY, IdPlace, Reading, RetryLimit, body_json, python_exception_line,
};
use crate::domain::message::DeadLetter;
use crate::domain::target::{BodyBudget, BudgetLimit, ReplayWarning};

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Dramatiq,
    name: "dramatiq",
    label: "dramatiq",
    // The body is read last of all records: what a replay changes in the headers must not
    // depend on it (see the registry's order).
    detect: |l| {
        l.dl.queue.ends_with(".XQ")
            && dramatiq_body(l.dl).is_some_and(|b| b.get("actor_name").is_some())
    },
    read: |l: &Letter<'_>| dramatiq(l.dl),
    queue_name: |name| {
        has_stem(name, ".XQ").then_some(Named {
            role: Role::DeadLetter,
            specific: true,
        })
    },
    // dramatiq sets no AMQP `message_id`: its own is in the body.
    id: |dl| dramatiq_message_id(&dl.body).map(|id| (IdPlace::Body("message_id"), id)),
    retries_phrase: |_, r| r.retries.map(|n| after(n, "retry", "retries")),
    story: Story {
        by_actor: true,
        ..BASE.story
    },
    replay: Replay {
        counters: &[Counter::Body("options.retries")],
        warn,
        ..BASE.replay
    },
};

/// dramatiq's default `max_retries` (its `Retries` middleware), used when neither the message
/// nor, as far as Warren can know, the actor sets one.
pub(crate) const DRAMATIQ_DEFAULT_MAX_RETRIES: i64 = 20;

/// What is left of its retry budget, which a replay cannot reset.
fn warn(t: &Told<'_>, warnings: &mut Vec<ReplayWarning>) {
    warnings.push(ReplayWarning::RetryBudget(BodyBudget {
        framework: "dramatiq",
        counter: "options.retries",
        limit_name: "max_retries",
        // No count in a whole body is dramatiq's 0; in a cut one it may lie past the cut.
        retries: match t.retries {
            Some(n) => Some(n.max(0)),
            None if t.dl.body_complete() => Some(0),
            None => None,
        },
        limit: match t.retry_limit {
            Some(RetryLimit::At(m)) => BudgetLimit::Stated(m),
            Some(RetryLimit::Unlimited) => BudgetLimit::Unlimited,
            None => BudgetLimit::Default(DRAMATIQ_DEFAULT_MAX_RETRIES),
        },
    }));
}

/// A dramatiq body: the whole JSON when it is complete, else its head, so that a body cut at a
/// browse cap still names the actor and, unless the arguments fill the cap, holds `options`.
fn dramatiq_body(dl: &DeadLetter) -> Option<Value> {
    body_json(dl).or_else(|| dramatiq_head(&dl.body).map(Value::Object))
}

fn dramatiq(dl: &DeadLetter) -> Reading {
    let mut r = Reading::empty(Convention::Dramatiq);
    let body = dramatiq_body(dl);
    let options = body.as_ref().and_then(|b| b.get("options"));
    let traceback = options
        .and_then(|o| o.get("traceback"))
        .and_then(Value::as_str)
        .map(str::to_string);
    // A Python traceback ends with "Type: message".
    let last = traceback
        .as_deref()
        .and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty()))
        .and_then(python_exception_line);
    let actor = body
        .as_ref()
        .and_then(|b| b.get("actor_name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if traceback.is_some() || actor.is_some() {
        r.fault = Some(Fault {
            exception_type: last.as_ref().map(|(t, _)| t.clone()),
            message: last.and_then(|(_, m)| m),
            stack_trace: traceback,
            consumer: actor.clone(),
            message_type: None,
            inner_exception_type: None,
            host: None,
        });
    }
    r.source.queue = body
        .as_ref()
        .and_then(|b| b.get("queue_name"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| dl.queue.strip_suffix(".XQ").map(str::to_string))
        .filter(|q| !q.is_empty());
    r.retries = options
        .and_then(|o| o.get("retries"))
        .and_then(Value::as_i64);
    // Set per message by `send_with_options(max_retries=…)`; the actor's own setting is not in
    // the message. `null` is dramatiq's "no limit".
    r.retry_limit = match options.and_then(|o| o.get("max_retries")) {
        Some(Value::Null) => Some(RetryLimit::Unlimited),
        Some(v) => v.as_i64().map(RetryLimit::At),
        None => None,
    };
    r.message_type = actor;
    r
}

/// Longer than any id a framework makes (dramatiq's is a UUID): a longer one is not taken as one.
pub(super) const MAX_ID: usize = 256;

/// dramatiq's `message_id`, from the body's head (see [`dramatiq_head`]); `None` unless
/// `queue_name`, `actor_name` and `message_id` are all strings there, the id neither blank nor
/// absurdly long.
pub fn dramatiq_message_id(body: &[u8]) -> Option<String> {
    let head = dramatiq_head(body)?;
    let field = |k: &str| head.get(k).and_then(Value::as_str);
    field("queue_name")?;
    field("actor_name")?;
    let id = field("message_id")?;
    (!id.trim().is_empty() && id.len() <= MAX_ID).then(|| id.to_string())
}

/// The head of a body as dramatiq's JSON encoder writes it: one object with the keys
/// `queue_name`, `actor_name`, `args`, `kwargs`, `options`, `message_id`, `message_timestamp`,
/// in that order. Only the first [`HASHED_BODY`] bytes are read, so the result is the
/// same whether the body was read whole or cut at any browse cap; the fields up to
/// `message_id` are kept (`args` and `kwargs` are skipped, whatever their size), and a field
/// cut off is absent. `None` at the first key dramatiq does not write (so another JSON body
/// costs a few bytes), or when the body is no JSON object.
pub fn dramatiq_head(body: &[u8]) -> Option<serde_json::Map<String, Value>> {
    use serde::de::{DeserializeSeed, Error, IgnoredAny, MapAccess, Visitor};

    #[derive(Default)]
    struct Head {
        fields: serde_json::Map<String, Value>,
        foreign: bool,
    }
    struct Reader<'a>(&'a mut Head);
    impl<'de> Visitor<'de> for Reader<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a dramatiq message")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "queue_name" | "actor_name" | "options" | "message_id" => {
                        let v = map.next_value::<Value>()?;
                        self.0.fields.insert(key.clone(), v);
                        if key == "message_id" {
                            // Everything needed: the rest may be cut off.
                            return Ok(());
                        }
                    }
                    "args" | "kwargs" | "message_timestamp" => {
                        map.next_value::<IgnoredAny>()?;
                    }
                    _ => {
                        self.0.foreign = true;
                        return Err(A::Error::custom("not a dramatiq message"));
                    }
                }
            }
            Ok(())
        }
    }
    impl<'de> DeserializeSeed<'de> for Reader<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    let prefix = body.get(..HASHED_BODY).unwrap_or(body);
    if prefix.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    let mut head = Head::default();
    // A cut-off body ends in an error once the fields are read; what was read before counts.
    let _ = Reader(&mut head).deserialize(&mut serde_json::Deserializer::from_slice(prefix));
    (!head.foreign && !head.fields.is_empty()).then_some(head.fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dramatiq_message_id_only_from_dramatiqs_shape() {
        let id = |b: &str| dramatiq_message_id(b.as_bytes());
        let full = r#"{"queue_name":"work","actor_name":"charge","args":[1,{"message_id":"inner"}],"kwargs":{},"options":{"retries":1},"message_id":"m-1","message_timestamp":1}"#;
        assert_eq!(
            id(full).as_deref(),
            Some("m-1"),
            "the top-level id, not one in the args"
        );
        assert_eq!(id(&format!("  \n{full}")).as_deref(), Some("m-1"));
        // Cut anywhere after the id: still read.
        assert_eq!(id(&full[..full.len() - 5]).as_deref(), Some("m-1"));
        // Cut before it: none.
        assert_eq!(id(&full[..60]), None);
        // Not dramatiq's: another key, a missing actor or queue, an id that is not a string,
        // blank or absurdly long, no object at all.
        assert_eq!(
            id(r#"{"queue_name":"q","actor_name":"a","tenant":"t","message_id":"m"}"#),
            None
        );
        assert_eq!(id(r#"{"message_id":"m","queue_name":"q"}"#), None);
        assert_eq!(
            id(r#"{"queue_name":"q","actor_name":1,"message_id":"m"}"#),
            None
        );
        assert_eq!(
            id(r#"{"queue_name":"q","actor_name":"a","message_id":7}"#),
            None
        );
        assert_eq!(
            id(r#"{"queue_name":"q","actor_name":"a","message_id":"  "}"#),
            None
        );
        let long = format!(
            r#"{{"queue_name":"q","actor_name":"a","message_id":"{}"}}"#,
            "i".repeat(MAX_ID + 1)
        );
        assert_eq!(id(&long), None);
        for junk in [
            "",
            "[]",
            "null",
            "{",
            "{\"queue_name\":",
            "\u{0}\u{ff}",
            "{{{{",
        ] {
            assert_eq!(id(junk), None, "{junk:?}");
        }
        assert_eq!(dramatiq_message_id(&[0xff, b'{', 0xfe]), None);
    }
}
