//! The one plain sentence that says why a message is dead: "Rejected 3 times by orders.process
//! after cycling through orders.retry.wait twice", "CarrierUnavailableException in
//! CreateShippingLabelConsumer after 3 retries: Carrier DHL unavailable". Built from the
//! explanation; one line, bounded length, never panics whatever the headers hold.

use super::convention::{Convention, Reading, short_type};
use super::message::DeadLetter;
use super::xdeath::{Death, DeathHistory, DeathReason};

/// Longest verdict, in characters; longer ones end in "…".
pub const MAX_CHARS: usize = 240;
/// Longest part of an exception message quoted in a verdict.
const MESSAGE_CHARS: usize = 140;

/// The verdict for `dl`, from what its convention recorded, its death history and how often
/// Warren replayed it before.
pub fn verdict(dl: &DeadLetter, ex: &Reading, deaths: &DeathHistory, replay_count: i64) -> String {
    let mut s = if ex.skipped {
        skipped(dl, ex)
    } else if let Some(f) = fault(dl, ex, waited_in(ex, deaths)) {
        f
    } else if ex.convention.framework().story.task_not_fault {
        celery(dl, ex, deaths)
    } else if let Some(b) = broker(deaths).filter(|_| !deaths.copied) {
        b
    } else if ex.convention == Convention::Unknown {
        format!(
            "Nothing records why it is in {}: no x-death and no framework headers",
            dl.queue
        )
    } else {
        let mut s = format!(
            "{} put it here without recording the failure",
            ex.convention.label()
        );
        if let Some(q) = &ex.source.queue {
            s.push_str(&format!(" (from {q})"));
        }
        s
    };
    if replay_count > 0 {
        s.push_str(&format!(
            "; failed again after {} replay{}",
            replay_count,
            if replay_count == 1 { "" } else { "s" }
        ));
    }
    bound(&s, MAX_CHARS)
}

fn skipped(dl: &DeadLetter, ex: &Reading) -> String {
    let endpoint = ex.source.queue.as_deref().unwrap_or(&dl.queue);
    match &ex.message_type {
        Some(t) => format!("No consumer on {endpoint} handles {t}"),
        None => format!("No consumer on {endpoint} handles its message type"),
    }
}

/// A ladder whose app copied the message into the DLQ itself: the newest death is the wait
/// queue's expiry, so that queue is where it waited, not where it failed.
fn waited_in<'a>(ex: &'a Reading, deaths: &DeathHistory) -> Option<&'a str> {
    let failed_there = deaths
        .origin_entry()
        .and_then(|d| d.reason.as_ref())
        .is_some_and(DeathReason::is_consumer_failure);
    (ex.convention.framework().story.copies_from_wait && !failed_there)
        .then_some(ex.source.queue.as_deref())
        .flatten()
}

/// A framework's fault sentence: "Type in where after N retries: message".
fn fault(dl: &DeadLetter, ex: &Reading, waited: Option<&str>) -> Option<String> {
    let f = ex.fault.as_ref()?;
    let message = f
        .message
        .as_deref()
        .map(first_line)
        .filter(|m| !m.is_empty());
    if f.exception_type.is_none() && message.is_none() {
        return None;
    }
    let t = f.exception_type.as_deref().map_or("A failure", short_type);
    let story = ex.convention.framework().story;
    let poison = story.poison_without_source && ex.source.queue.is_none();
    let mut s = String::new();
    if poison {
        s.push_str("Poison message, no source queue recorded: ");
    }
    s.push_str(t);
    // MassTransit names the consumer class; other frameworks name an endpoint or actor, which may
    // contain dots that are part of the name.
    let place = f
        .consumer
        .as_deref()
        .map(|c| {
            if story.consumer_is_type {
                short_type(c)
            } else {
                c
            }
        })
        .map(str::to_string)
        .or_else(|| ex.source.queue.clone().filter(|_| waited.is_none()));
    match (place, &ex.source.exchange) {
        (Some(p), _) => s.push_str(&format!(" in {p}")),
        (None, Some(e)) if !e.is_empty() => {
            s.push_str(&format!(" (from exchange {e}"));
            if let Some(k) = ex.source.routing_key.as_deref().filter(|k| !k.is_empty()) {
                s.push_str(&format!(", key {k}"));
            }
            s.push(')');
        }
        _ => {}
    }
    if let Some(after) = retries_phrase(dl, ex) {
        s.push(' ');
        s.push_str(&after);
    }
    if let Some(m) = message {
        s.push_str(": ");
        s.push_str(&m);
    }
    if let Some(w) = waited {
        s.push_str(&format!(" (copied here from wait queue {w})"));
    }
    Some(s)
}

fn retries_phrase(dl: &DeadLetter, ex: &Reading) -> Option<String> {
    (ex.convention.framework().retries_phrase)(dl, ex)
}

/// Celery records the task and its retry count, never the exception: the task, the broker's
/// story, and how many tries Celery made.
fn celery(dl: &DeadLetter, ex: &Reading, deaths: &DeathHistory) -> String {
    let task = ex.message_type.as_deref().unwrap_or("without a name");
    let mut s = format!("Celery task {task}");
    match broker(deaths) {
        Some(story) => {
            s.push_str(": ");
            let mut chars = story.chars();
            if let Some(first) = chars.next() {
                s.extend(first.to_lowercase());
                s.push_str(chars.as_str());
            }
        }
        None => s.push_str(&format!(" in {} with no failure recorded", dl.queue)),
    }
    match ex.retries {
        Some(0) => s.push_str(", on its first try"),
        Some(1) => s.push_str(", after 1 retry"),
        Some(n) if n > 1 => s.push_str(&format!(", after {n} retries")),
        _ => {}
    }
    s
}

/// The broker's story from x-death.
fn broker(d: &DeathHistory) -> Option<String> {
    let Some(origin) = d.origin_entry() else {
        let q = d.origin_queue()?;
        let reason = d
            .last
            .as_ref()
            .or(d.first.as_ref())
            .and_then(|s| s.reason.as_ref())
            .map_or("no reason recorded", DeathReason::as_str);
        return Some(format!("Dead-lettered from {q} ({reason})"));
    };
    let p = origin.queue.as_deref().unwrap_or("?");
    let n = origin.times();
    let mut s = match &origin.reason {
        Some(DeathReason::Rejected) => format!("Rejected {} by {p}", times(n)),
        Some(DeathReason::DeliveryLimit) => {
            let mut s = format!("Gave up after the delivery limit of {p}");
            if n > 1 {
                s.push_str(&format!(" ({} reached)", times(n)));
            }
            s
        }
        Some(DeathReason::Expired) => {
            let mut s = match &origin.original_expiration {
                Some(ms) => format!("Expired in {p} after its per-message TTL of {ms} ms"),
                None => format!("Expired in {p} after the queue's message TTL"),
            };
            if n > 1 {
                s.push_str(&format!(" ({})", times(n)));
            }
            s
        }
        Some(DeathReason::MaxLen) => {
            let mut s = format!("Dropped from {p} by its max-length");
            if n > 1 {
                s.push_str(&format!(" ({})", times(n)));
            }
            s
        }
        Some(DeathReason::Other(r)) => {
            format!("Dead-lettered from {p} {} (reason \"{r}\")", times(n))
        }
        None => format!("Dead-lettered from {p} {} (no reason recorded)", times(n)),
    };

    // A retry ladder: the consumer's failures alternate with expiries in a wait queue.
    let is_wait = |e: &&Death| {
        !std::ptr::eq(*e, origin)
            && e.reason == Some(DeathReason::Expired)
            && e.queue.as_deref() != Some(p)
    };
    let consumer_failed = origin
        .reason
        .as_ref()
        .is_some_and(DeathReason::is_consumer_failure);
    // Wait-queue expiries only belong to the ladder when a consumer failed; otherwise they are
    // separate events, listed below.
    let waits: Vec<&Death> = if consumer_failed {
        d.entries.iter().filter(is_wait).collect()
    } else {
        Vec::new()
    };
    if !waits.is_empty() {
        let names = join_limited(waits.iter().filter_map(|w| w.queue.as_deref()));
        s.push_str(&format!(" after cycling through {names}"));
        if let [w] = waits.as_slice() {
            s.push(' ');
            s.push_str(&times(w.times()));
        }
        // Newest event an expiry in the wait queue: the message went back to the work queue once
        // more and was moved here from there without a broker rejection.
        if d.entries.first().is_some_and(|first| is_wait(&first)) {
            s.push_str(&format!(
                ", then sent here on attempt {}",
                n.saturating_add(1)
            ));
        }
    }
    let others: Vec<String> = d
        .entries
        .iter()
        .filter(|e| !std::ptr::eq(*e, origin) && !waits.iter().any(|w| std::ptr::eq(*w, *e)))
        .map(|e| {
            format!(
                "{} in {}",
                e.reason.as_ref().map_or("?", DeathReason::as_str),
                e.queue.as_deref().unwrap_or("?")
            )
        })
        .collect();
    if !others.is_empty() {
        s.push_str("; also ");
        s.push_str(&join_limited(others.iter().map(String::as_str)));
    }
    if !d.problems.is_empty() {
        s.push_str(" (x-death partly unreadable)");
    }
    Some(s)
}

fn times(n: i64) -> String {
    match n {
        1 => "once".to_string(),
        2 => "twice".to_string(),
        n => format!("{n} times"),
    }
}

/// "a, b and c", at most three names then "and N more".
fn join_limited<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = items.collect();
    let shown: Vec<&str> = all.iter().take(3).copied().collect();
    let rest = all.len().saturating_sub(shown.len());
    let mut s = match shown.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    if rest > 0 {
        s = format!("{} and {rest} more", shown.join(", "));
    }
    s
}

fn first_line(s: &str) -> String {
    let line = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim();
    bound(line, MESSAGE_CHARS)
}

/// One line of at most `max` chars, by the one terminal-safe policy (`sanitize::summary`):
/// whitespace runs become one space, control, bidi and invisible characters visible escapes.
pub fn bound(s: &str, max: usize) -> String {
    super::sanitize::summary(s, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_single_line() {
        let long = "x\n\u{1b}[31m".repeat(500);
        let b = bound(&long, 50);
        assert!(b.chars().count() <= 50);
        assert!(!b.chars().any(char::is_control));
    }

    #[test]
    fn lists() {
        assert_eq!(join_limited(["a"].into_iter()), "a");
        assert_eq!(join_limited(["a", "b", "c"].into_iter()), "a, b and c");
        assert_eq!(
            join_limited(["a", "b", "c", "d", "e"].into_iter()),
            "a, b, c and 2 more"
        );
        assert_eq!(times(1), "once");
        assert_eq!(times(7), "7 times");
    }
}
