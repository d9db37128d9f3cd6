//! A team's own retry ladder: its counter and error text in headers named in `[conventions]`
//! (`x-retry-count`, `x-last-error`, …). A replay resets those whatever the convention (see
//! `convention::read`), so this module only reads and words them.

use super::framework::{BASE, Framework, Letter, Story, after};
use super::{Convention, Fault, Reading, is_java_type, qualified_type_prefix, text};

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Ladder,
    name: "ladder",
    label: "retry ladder",
    // Before the broker: a ladder that nacks on its last try leaves `x-death` too, but its
    // headers say more.
    detect: |l| l.own.marks(&l.dl.headers),
    read,
    // The app's own count, under the header it chose.
    retries_phrase: |_, r| {
        r.retries.map(|n| {
            let header = r.counter_headers.first().map_or("", String::as_str);
            format!("{} ({header})", after(n, "retry", "retries"))
        })
    },
    story: Story {
        copies_from_wait: true,
        ..BASE.story
    },
    ..BASE
};

/// The app's error text (its first line may name the type, `TypeError: boom`) and its retry
/// count. Where it failed comes from `x-death` (the work queue, when the app nacked; the wait
/// queue's expiry, when it copied the message into the DLQ itself).
fn read(l: &Letter<'_>) -> Reading {
    let h = &l.dl.headers;
    let mut r = Reading::empty(Convention::Ladder);
    r.counter_headers = l.own.counters_in(h);
    r.error_headers = l.own.error_headers_in(h);
    r.retries = r.counter_headers.iter().find_map(|n| h.get_i64(n));
    if let Some(t) = r.error_headers.iter().find_map(|n| text(h, n)) {
        let first = t.lines().next().unwrap_or_default().trim().to_string();
        // An error's `stack` (first line, then `    at …`) is a trace; its first line the error.
        let stack_trace = (t.lines().count() > 1).then(|| t.clone());
        let (exception_type, message) =
            match qualified_type_prefix(&first).or_else(|| plain_type_prefix(&first)) {
                Some((ty, m)) => (Some(ty), m),
                None => (None, first),
            };
        r.fault = Some(Fault {
            exception_type,
            message: Some(message),
            stack_trace,
            ..Fault::default()
        });
    }
    r
}

/// "TypeError: boom", "ValueError: bad": an unqualified type, only when it ends like one.
fn plain_type_prefix(line: &str) -> Option<(String, String)> {
    let (t, m) = line.split_once(": ")?;
    let t = t.trim();
    let ends_like_exception = ["Exception", "Error"]
        .iter()
        .any(|s| t.ends_with(s) && t != *s);
    (ends_like_exception && is_java_type(t) && !t.contains('.'))
        .then(|| (t.to_string(), m.trim().to_string()))
}
