//! Grouping dead letters that failed the same way. A framework fault groups by exception type and
//! message with the varying parts (numbers, GUIDs, hex ids) masked; a broker death by reason and the
//! queue it happened in. The key is a stable hash (FNV-1a 64) so it can be stored and compared
//! across runs and machines; `std`'s `DefaultHasher` is not stable across releases.

use std::hash::Hasher;
use std::sync::LazyLock;

use fnv::FnvHasher;

use regex::{Captures, Regex};

use super::convention::{Reading, short_type};
use super::message::DeadLetter;
use super::xdeath::DeathHistory;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Fingerprint {
    /// 16 lowercase hex digits.
    pub key: String,
    /// For people: "CarrierUnavailableException: Carrier # unavailable", "rejected in orders.process".
    pub summary: String,
}

/// How much of a message takes part in the fingerprint: the first line, this many chars.
const MESSAGE_CHARS: usize = 200;

static GUID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b").ok()
});
static HEX: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\b(?:0[xX][0-9a-fA-F]+|[0-9a-fA-F]{8,})\b").ok());
static NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\d+(?:[.,]\d+)*").ok());

/// The message with what varies between occurrences replaced by `#`: GUIDs, hex ids (0x…, or 8+
/// hex digits with at least one digit) and numbers. Whitespace runs collapse to one space.
pub fn mask(s: &str) -> String {
    let mut out = s.to_string();
    if let Some(re) = GUID.as_ref() {
        out = re.replace_all(&out, "#").into_owned();
    }
    if let Some(re) = HEX.as_ref() {
        out = re
            .replace_all(&out, |c: &Captures| {
                let m = c.get(0).map_or("", |m| m.as_str());
                // "deadbeef" could be a word; an id has a digit in it.
                if m.starts_with("0x")
                    || m.starts_with("0X")
                    || m.bytes().any(|b| b.is_ascii_digit())
                {
                    "#".to_string()
                } else {
                    m.to_string()
                }
            })
            .into_owned();
    }
    if let Some(re) = NUMBER.as_ref() {
        out = re.replace_all(&out, "#").into_owned();
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// FNV-1a, 64 bits (the `fnv` crate, fed raw bytes): stable across Rust versions and platforms,
/// unlike `DefaultHasher`, so keys can be stored; good enough to tell failure groups apart.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FnvHasher::default();
    h.write(bytes);
    h.finish()
}

fn make(parts: &[&str], summary: String) -> Fingerprint {
    // NUL separators so ("ab", "c") and ("a", "bc") differ.
    let joined = parts.join("\0");
    Fingerprint {
        key: format!("{:016x}", fnv1a64(joined.as_bytes())),
        summary,
    }
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .chars()
        .take(MESSAGE_CHARS)
        .collect()
}

/// The fingerprint of an explained message.
pub fn fingerprint(dl: &DeadLetter, ex: &Reading, deaths: &DeathHistory) -> Fingerprint {
    if ex.skipped {
        let endpoint = ex.source.queue.as_deref().unwrap_or(&dl.queue);
        let t = ex.message_type.as_deref().unwrap_or("?");
        return make(
            &["skipped", endpoint, t],
            format!("skipped on {endpoint}: {t}"),
        );
    }
    // A record that names the actor that failed (dramatiq's): two actors failing with the same
    // error are two failures (and two fixes).
    let story = ex.convention.framework().story;
    let actor = story
        .by_actor
        .then_some(ex.message_type.as_deref())
        .flatten();
    let with_actor = |summary: String| match actor {
        Some(a) => format!("{a}: {summary}"),
        None => summary,
    };
    if let Some(f) = &ex.fault {
        let masked = f
            .message
            .as_deref()
            .map(|m| mask(&first_line(m)))
            .unwrap_or_default();
        if let Some(t) = f.exception_type.as_deref() {
            let summary = if masked.is_empty() {
                short_type(t).to_string()
            } else {
                format!("{}: {masked}", short_type(t))
            };
            return match actor {
                Some(a) => make(&["fault", t, &masked, a], with_actor(summary)),
                None => make(&["fault", t, &masked], summary),
            };
        }
        if !masked.is_empty() {
            return match actor {
                Some(a) => make(&["fault", "", &masked, a], with_actor(masked.clone())),
                None => make(&["fault", "", &masked], masked.clone()),
            };
        }
        if let Some(a) = actor {
            return make(&["actor", a], format!("{a}: no traceback recorded"));
        }
    }
    // A history a framework carried over (Symfony's) is not how the message came here.
    let origin = deaths.origin_entry().filter(|_| !deaths.copied);
    // A convention that records the task and no exception (Celery): tasks group by name and
    // what the broker saw.
    if story.task_not_fault
        && let Some(task) = ex.message_type.as_deref()
    {
        let reason = origin
            .and_then(|o| o.reason.as_ref())
            .map_or("?", |r| r.as_str());
        let queue = origin
            .and_then(|o| o.queue.as_deref())
            .or(ex.source.queue.as_deref())
            .unwrap_or(&dl.queue);
        return make(
            &["task", ex.convention.as_str(), task, reason, queue],
            format!("{task}: {reason} in {queue}"),
        );
    }
    if let Some(origin) = origin {
        let reason = origin.reason.as_ref().map_or("?", |r| r.as_str());
        let queue = origin.queue.as_deref().unwrap_or("?");
        return make(&["death", reason, queue], format!("{reason} in {queue}"));
    }
    if let Some(q) = deaths.origin_queue().filter(|_| !deaths.copied) {
        return make(&["death", "?", q], format!("dead-lettered from {q}"));
    }
    make(
        &["unknown", ex.convention.as_str(), &dl.queue],
        format!("no failure record ({})", ex.convention.as_str()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_what_varies() {
        assert_eq!(mask("Carrier 42 unavailable"), "Carrier # unavailable");
        assert_eq!(
            mask("Order 3f2504e0-4f89-11d3-9a0c-0305e82c3301 failed after 1.5s"),
            "Order # failed after #s"
        );
        assert_eq!(
            mask("ptr 0xDEAD at  deadbeef a1b2c3d4e5"),
            "ptr # at deadbeef #"
        );
        assert_eq!(mask("order-1000 for sku A-0"), "order-# for sku A-#");
        assert_eq!(mask("Carrier DHL unavailable"), "Carrier DHL unavailable");
    }

    #[test]
    fn fnv_is_the_published_function() {
        // Reference values of FNV-1a 64.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
