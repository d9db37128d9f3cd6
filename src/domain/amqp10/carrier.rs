//! Which protocol a replay reads and publishes with: the one rule.
//!
//! Moving a message through AMQP 0.9.1 changes it for an AMQP 1.0 consumer (a `ulong` id turns
//! into a string, a binary id is lost, `subject`, `to`, `group-sequence`,
//! `reply-to-group-id` and `absolute-expiry-time` are dropped, timestamps lose their
//! milliseconds, and the mover's headers land in the immutable application properties). Moved
//! over AMQP 1.0 it arrives as it was, and an AMQP 0.9.1 consumer sees it as it did before. The
//! other way round, a message an AMQP 0.9.1 client published and a 0.9.1 consumer reads loses
//! its table and array headers when it goes through AMQP 1.0. So a replay goes over AMQP 1.0
//! when the messages show they live in the AMQP 1.0 world, or when the operator says so, and
//! over 0.9.1 otherwise.

use crate::domain::message::DeadLetter;
use crate::domain::value::{HeaderValue, Table};

/// The protocol a replay reads the DLQ and publishes with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Carrier {
    #[default]
    Amqp091,
    Amqp10,
}

impl Carrier {
    /// How the plan names it.
    pub fn name(self) -> &'static str {
        match self {
            Carrier::Amqp091 => "AMQP 0.9.1",
            Carrier::Amqp10 => "AMQP 1.0",
        }
    }
}

/// What the operator asked for (`--protocol`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    /// Decided by the messages (see [`choose`]).
    #[default]
    Auto,
    Amqp091,
    Amqp10,
}

impl std::str::FromStr for Choice {
    type Err = String;
    fn from_str(s: &str) -> Result<Choice, String> {
        match s {
            "auto" => Ok(Choice::Auto),
            "amqp091" | "0.9.1" | "amqp0.9.1" => Ok(Choice::Amqp091),
            "amqp10" | "1.0" | "amqp1.0" => Ok(Choice::Amqp10),
            _ => Err(format!(
                "unknown protocol '{s}': use auto, amqp091 or amqp10"
            )),
        }
    }
}

/// Why a message read over 0.9.1 belongs to the AMQP 1.0 world, if it does: an AMQP 1.0
/// consumer failed it with annotations (`x-opt-…` headers; Warren's own marks aside), or an
/// AMQP 1.0 producer sent it (a body that is not a data section, or an id the 0.9.1 property
/// cannot carry).
pub fn sign(msg: &DeadLetter) -> Option<&'static str> {
    if super::encoded_body(&msg.properties) {
        return Some("an AMQP 1.0 body");
    }
    if msg.headers.contains_key(super::MESSAGE_ID_HEADER)
        || msg.headers.contains_key(CORRELATION_ID_HEADER)
    {
        return Some("an AMQP 1.0 id");
    }
    let failed = msg
        .headers
        .keys()
        .any(|k| k.starts_with("x-opt-") && !k.starts_with(WARREN_PREFIX));
    failed.then_some("annotations of an AMQP 1.0 consumer")
}

/// The header a correlation-id the 0.9.1 property cannot carry is kept in.
pub const CORRELATION_ID_HEADER: &str = "x-correlation-id";

/// Warren's own replay marks on a message replayed over AMQP 1.0 (message annotations, which a
/// 0.9.1 reader sees as headers): `x-opt-warren-replay-id` and its siblings.
pub const WARREN_PREFIX: &str = "x-opt-warren-";

/// Warren's replay mark `name` (`warren-replay-id`, …) as a 0.9.1 reader finds it: the header
/// a replay over 0.9.1 wrote, else the annotation a replay over AMQP 1.0 wrote
/// (`x-opt-warren-replay-id`, a header to a 0.9.1 reader).
pub fn warren_mark<'a>(h: &'a Table, name: &str) -> Option<&'a HeaderValue> {
    h.get(name).or_else(|| {
        let bare = name.strip_prefix("warren-")?;
        h.get(&format!("{WARREN_PREFIX}{bare}"))
    })
}

/// The protocol a replay uses, and why in the plan's words: `signs` of the `looked_at` messages
/// read for the plan carry an AMQP 1.0 sign ([`sign`]); `speaks_10`: the broker is 4.0 or
/// later. `Err` when the operator asked for AMQP 1.0 and the broker cannot.
pub fn choose(
    choice: Choice,
    speaks_10: bool,
    signs: u64,
    looked_at: u64,
) -> Result<(Carrier, Option<String>), String> {
    match choice {
        Choice::Amqp091 => Ok((Carrier::Amqp091, None)),
        Choice::Amqp10 if !speaks_10 => Err(
            "--protocol amqp10 needs RabbitMQ 4.0 or later, whose AMQP 1.0 is its own; this broker is older: replay over AMQP 0.9.1 (leave --protocol out)".into(),
        ),
        Choice::Amqp10 => Ok((
            Carrier::Amqp10,
            Some("read and published over AMQP 1.0, as asked (--protocol amqp10)".into()),
        )),
        Choice::Auto if speaks_10 && signs > 0 => Ok((
            Carrier::Amqp10,
            Some(format!(
                "read and published over AMQP 1.0: {signs} of {looked_at} looked at came from AMQP 1.0 clients, whose consumers get them unchanged only that way (--protocol amqp091 to move them over 0.9.1)"
            )),
        )),
        Choice::Auto => Ok((Carrier::Amqp091, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(headers: &[(&str, &str)], kind: Option<&str>) -> DeadLetter {
        let mut m = DeadLetter::default();
        for (k, v) in headers {
            m.headers.insert(*k, HeaderValue::string(*v));
        }
        m.properties.kind = kind.map(String::from);
        m
    }

    #[test]
    fn signs_of_the_amqp10_world_and_none_of_warrens_own() {
        assert!(sign(&msg(&[("x-opt-exception", "E")], None)).is_some());
        assert!(sign(&msg(&[("x-message-id", "b")], None)).is_some());
        assert!(sign(&msg(&[("x-correlation-id", "b")], None)).is_some());
        assert!(sign(&msg(&[], Some("amqp-1.0"))).is_some());
        assert_eq!(sign(&msg(&[("x-opt-warren-replay-id", "r")], None)), None);
        assert_eq!(
            sign(&msg(&[("x-death", "d"), ("retry", "1")], Some("t"))),
            None
        );
    }

    #[test]
    fn a_mark_is_read_from_the_header_or_the_amqp10_annotation() {
        let m = msg(&[("x-opt-warren-replay-id", "r-10")], None);
        assert_eq!(
            warren_mark(&m.headers, "warren-replay-id").and_then(|v| v.as_str()),
            Some("r-10")
        );
        let m = msg(
            &[
                ("warren-replay-id", "r-9"),
                ("x-opt-warren-replay-id", "r-10"),
            ],
            None,
        );
        assert_eq!(
            warren_mark(&m.headers, "warren-replay-id").and_then(|v| v.as_str()),
            Some("r-9")
        );
        assert_eq!(warren_mark(&m.headers, "other"), None);
    }

    #[test]
    fn auto_takes_amqp10_only_on_a_sign_and_a_broker_that_speaks_it() {
        assert_eq!(
            choose(Choice::Auto, true, 0, 5).unwrap().0,
            Carrier::Amqp091
        );
        assert_eq!(
            choose(Choice::Auto, false, 5, 5).unwrap().0,
            Carrier::Amqp091
        );
        let (c, why) = choose(Choice::Auto, true, 2, 5).unwrap();
        assert_eq!(c, Carrier::Amqp10);
        assert!(why.unwrap().contains("2 of 5"));
        assert_eq!(
            choose(Choice::Amqp091, true, 5, 5).unwrap().0,
            Carrier::Amqp091
        );
        assert!(choose(Choice::Amqp10, false, 0, 0).is_err());
        assert_eq!(
            choose(Choice::Amqp10, true, 0, 0).unwrap().0,
            Carrier::Amqp10
        );
        assert_eq!("amqp10".parse::<Choice>(), Ok(Choice::Amqp10));
        assert!("smtp".parse::<Choice>().is_err());
    }
}
