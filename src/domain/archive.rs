//! The other way out of a dead-letter queue: archive (kept, with who, when and why), restore, and
//! discard (deleted for good, after a snapshot). What is decided here is pure: the four headers
//! an archived message carries and how they are read back and removed, and which messages a
//! discard may delete (exactly those in the snapshot it wrote first).

use std::collections::{HashMap, HashSet};

use super::message::{DeadLetter, Delivery};
use super::value::{HeaderValue, Table};

/// The queue an archived message was taken from; `warren restore` puts it back there.
pub const FROM: &str = "warren-archived-from";
/// When it was archived (RFC 3339).
pub const AT: &str = "warren-archived-at";
/// Who archived it: the OS user and the broker user, `os@broker`.
pub const BY: &str = "warren-archived-by";
/// Why (`--reason`; empty when none was given).
pub const REASON: &str = "warren-archive-reason";

/// The message's own headers, as their exact AMQP field-table encoding (a long string of
/// bytes). A stream fed over AMQP 0.9.1 drops table and array headers (`x-death` among them),
/// turns byte arrays into strings and fails the connection on a decimal (measured on 3.10, 4.0
/// and 4.3), so the archive stream carries the headers in this one header instead, and reading
/// the archive puts them back as they were.
pub const ORIGINAL_HEADERS: &str = "warren-archived-headers";

/// The message's own `user_id` property ("" when it had none): the archive stream's copy
/// carries, as its `user_id`, the broker user who archived it, which the broker checks against
/// the connection's user (so it vouches for who wrote the archive), and a restore puts this
/// one back.
pub const ORIGINAL_USER_ID: &str = "warren-archived-user-id";

/// The headers Warren adds when it archives, in the order it adds them.
pub const HEADERS: [&str; 4] = [FROM, AT, BY, REASON];

/// Headers a broker adds to a delivery rather than to the message: they say how this read went,
/// not what the message is, so they are not part of its content (a quorum queue raises
/// `x-delivery-count` between the discard's snapshot and the run; a stream adds its offset).
pub const DELIVERY_HEADERS: [&str; 3] = ["x-delivery-count", "x-acquired-count", "x-stream-offset"];

/// The default archive stream's name and retention.
pub const DEFAULT_STREAM: &str = "warren.archive";
pub const DEFAULT_MAX_AGE: &str = "30D";

// Named where the queue list adds the local archive, so that discovery does not import this
// module, which imports discovery.
pub use super::discovery::classify::{LOCAL_QUEUE, LOCAL_TYPE};

/// How a queue is named on screen: the local archive file has no queue name of its own.
pub fn shown_name(name: &str) -> &str {
    if name == LOCAL_QUEUE {
        "archive (local file)"
    } else {
        name
    }
}

/// Who archives what from where, and why: the same for every message of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub from: String,
    pub by: String,
    pub reason: String,
}

impl Stamp {
    /// The four headers, with `at` as the time.
    pub fn headers(&self, at: jiff::Timestamp) -> [(&'static str, String); 4] {
        [
            (FROM, self.from.clone()),
            (AT, at.to_string()),
            (BY, self.by.clone()),
            (REASON, self.reason.clone()),
        ]
    }

    /// Adds the four headers to `headers` (replacing any earlier ones: a message archived,
    /// restored and archived again says where it was taken from the last time).
    pub fn apply(&self, headers: &mut Table, at: jiff::Timestamp) {
        for (k, v) in self.headers(at) {
            headers.insert(k, HeaderValue::string(v));
        }
    }
}

/// What an archived message says about its archiving.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Archived {
    pub from: Option<String>,
    pub at: Option<String>,
    pub by: Option<String>,
    pub reason: Option<String>,
}

/// The archive headers of `msg`, `None` when it carries none of them (not archived by Warren).
pub fn archived(msg: &DeadLetter) -> Option<Archived> {
    let get = |k: &str| msg.headers.get_str(k).map(str::to_string);
    let a = Archived {
        from: get(FROM),
        at: get(AT),
        by: get(BY),
        reason: get(REASON),
    };
    (a != Archived::default()).then_some(a)
}

/// The headers a restored message goes back with: the archive's four removed, and what the
/// archive's own delivery added (the stream offset). Everything else stays exactly as it was.
pub fn restored_headers(headers: &Table) -> Table {
    let mut h = headers.clone();
    h.retain(|k, _| {
        !HEADERS.contains(&k)
            && k != "x-stream-offset"
            && k != ORIGINAL_HEADERS
            && k != ORIGINAL_USER_ID
    });
    h
}

/// The properties a restored message goes back with: as archived, with its own `user_id` in
/// place of the archiver's (an archive written before Warren signed it, or a local one, keeps
/// what it holds).
pub fn restored_properties(msg: &DeadLetter) -> super::message::Properties {
    let mut p = msg.properties.clone();
    if let Some(own) = msg.headers.get_str(ORIGINAL_USER_ID) {
        p.user_id = (!own.is_empty()).then(|| own.to_string());
    }
    p
}

/// Who the broker says archived `msg`: its `user_id`, which the broker refuses on a publish by
/// any other user, when it is the broker user `warren-archived-by` names (`os@broker`). `Err`
/// says why it is not vouched for: no user id (archived before Warren signed what it archives,
/// or written by someone else), or one that is not who it claims archived it.
pub fn vouched_by(msg: &DeadLetter) -> Result<String, &'static str> {
    let Some(user) = msg.properties.user_id.as_deref().filter(|u| !u.is_empty()) else {
        return Err("no user id the broker vouched for");
    };
    let claimed = msg.headers.get_str(BY).unwrap_or_default();
    // `ends_with`: an OS user or a broker user (an e-mail address) may hold an '@' itself.
    if claimed.ends_with(&format!("@{user}")) {
        Ok(user.to_string())
    } else {
        Err("its user id is not the broker user it says archived it")
    }
}

/// The key (`identity::message_key`) an archived message had in the queue it was archived
/// from, as the record of its archive names it: that of the message a restore puts back.
pub fn archived_key(msg: &DeadLetter) -> String {
    let mut m = DeadLetter {
        properties: restored_properties(msg),
        headers: restored_headers(&msg.headers),
        ..msg.clone()
    };
    m.delivery = Delivery::default();
    super::identity::message_key(&m)
}

/// A digest of what a message *is*: every property, every header but those a delivery adds
/// ([`DELIVERY_HEADERS`]), and the body — not where or how it was read. Two reads of one message
/// give the same digest; two messages that differ in any byte give different ones.
pub fn content_digest(msg: &DeadLetter) -> u64 {
    use std::hash::Hasher;
    let mut m = DeadLetter {
        queue: String::new(),
        position: 0,
        properties: msg.properties.clone(),
        headers: msg.headers.clone(),
        body: msg.body.clone(),
        body_size: msg.body_size,
        delivery: Delivery::default(),
    };
    m.headers.retain(|k, _| !DELIVERY_HEADERS.contains(&k));
    let mut h = fnv::FnvHasher::default();
    h.write(super::snapshot::message_line(&m).as_bytes());
    h.finish()
}

/// The messages a discard may delete: those in its snapshot, each as many times as it is there.
/// A message that came into the queue after the snapshot, or one the snapshot does not hold,
/// is never taken, whatever the selection says.
#[derive(Clone, Debug, Default)]
pub struct ContentSet {
    counts: HashMap<u64, u32>,
    len: u64,
}

impl ContentSet {
    pub fn new<'a>(messages: impl IntoIterator<Item = &'a DeadLetter>) -> ContentSet {
        let mut s = ContentSet::default();
        for m in messages {
            *s.counts.entry(content_digest(m)).or_insert(0) += 1;
            s.len += 1;
        }
        s
    }

    /// Takes `msg` out of the set: true when it was there (it may be deleted), false when not.
    pub fn take(&mut self, msg: &DeadLetter) -> bool {
        let d = content_digest(msg);
        match self.counts.get_mut(&d) {
            Some(n) if *n > 0 => {
                *n -= 1;
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    /// Messages of the snapshot not taken yet.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Which archived messages a restore takes, in archive order: those `selects` takes that were
/// not restored before (every one with `again`), at most `limit`; and how many matching ones
/// were restored before (left out unless `again`: a stream never forgets them). Items are named
/// by their reference (see `broker::restore`), which is what `restored` holds.
pub fn choose_for_restore<T>(
    items: Vec<(String, T)>,
    restored: &HashSet<String>,
    again: bool,
    limit: Option<u64>,
    selects: impl Fn(&T) -> bool,
) -> (Vec<(String, T)>, u64) {
    let limit = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let mut before = 0u64;
    let mut chosen = Vec::new();
    for (r, item) in items {
        if !selects(&item) {
            continue;
        }
        let was = restored.contains(&r);
        before += u64::from(was);
        if (again || !was) && chosen.len() < limit {
            chosen.push((r, item));
        }
    }
    (chosen, before)
}

/// The queue a restore puts `msg` back into: the one it was archived from.
pub fn restore_target(msg: &DeadLetter) -> Option<String> {
    archived(msg).and_then(|a| a.from).filter(|q| !q.is_empty())
}

/// A stream's retention as RabbitMQ reads `x-max-age` ("30D", "12h", "1Y"), in seconds: a
/// positive number and one unit of Y (365 days), M (30 days), D, h, m, s. `None` for anything else.
pub fn max_age_secs(text: &str) -> Option<u64> {
    let unit = text.chars().last()?;
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok().filter(|&n| n > 0)?;
    let per = match unit {
        'Y' => 365 * 86_400,
        'M' => 30 * 86_400,
        'D' => 86_400,
        'h' => 3_600,
        'm' => 60,
        's' => 1,
        _ => return None,
    };
    n.checked_mul(per)
}

/// Why the archive stream `name` (`q`, with `policy` the definition in force) would not keep
/// what is archived into it for `wanted` (the context's `archive_max_age`, which the plan
/// promises), in words; `None` when it would. RabbitMQ takes one of argument and policy; which
/// one wins has changed between versions, so the shorter of the two is taken. A byte or count
/// limit refuses outright: past it the broker drops the oldest archived messages whatever their
/// age, and confirms every publish all the same.
pub fn retention_refusal(
    name: &str,
    q: &super::discovery::QueueInfo,
    policy: Option<&super::discovery::JsonMap>,
    wanted: &str,
) -> Option<String> {
    let name = super::sanitize::one_line(name, 100);
    let text = |v: Option<&serde_json::Value>| -> Option<String> {
        match v? {
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    };
    let ages = [
        (text(q.arguments.get("x-max-age")), "x-max-age argument"),
        (
            text(policy.and_then(|p| p.get("max-age"))),
            "max-age policy key",
        ),
    ];
    let want = max_age_secs(wanted);
    for (age, source) in ages {
        let Some(age) = age else { continue };
        let shown = super::sanitize::one_line(&age, 20);
        let shorter = match (max_age_secs(&age), want) {
            (Some(a), Some(w)) => a < w,
            // What cannot be read cannot be promised.
            _ => true,
        };
        if shorter {
            return Some(format!(
                "the archive stream '{name}' keeps messages only {shown} ({source}), less than archive_max_age ({}) that the archive promises: the broker would drop them sooner; nothing moved. Set archive_max_age to {shown} to accept that, remove the shorter retention, name another stream with archive_stream, or keep the archive in a file with --local",
                super::sanitize::one_line(wanted, 20)
            ));
        }
    }
    let settings = super::discovery::effective_settings(q, policy);
    let limits = [
        (settings.max_length_bytes, "bytes", "max-length-bytes"),
        (settings.max_length, "messages", "max-length"),
    ];
    for (limit, unit, key) in limits {
        if let Some(n) = limit {
            return Some(format!(
                "the archive stream '{name}' holds at most {n} {unit} (x-{key} argument or {key} policy key): past that the broker drops the oldest archived messages whatever their age, and confirms every publish all the same; nothing moved. Remove the limit (a policy of higher priority without {key} for this stream), name another stream with archive_stream, or keep the archive in a file with --local"
            ));
        }
    }
    None
}

/// Whether an archived message has outlived the archive's retention: archived (its
/// `warren-archived-at`) more than `max_age_secs` before `now`. One whose time cannot be read is
/// never expired: what cannot be dated is kept.
pub fn expired(msg: &DeadLetter, now: jiff::Timestamp, max_age_secs: u64) -> bool {
    let Some(at) = msg
        .headers
        .get_str(AT)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    else {
        return false;
    };
    now.as_second().saturating_sub(at.as_second()) > i64::try_from(max_age_secs).unwrap_or(i64::MAX)
}

/// A last line a write did not finish (a full disk, a crash): where it is and how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Torn {
    /// Its line number, from 1.
    pub line: usize,
    /// Where it starts in the text, and its length in bytes.
    pub at: usize,
    pub bytes: usize,
}

/// The text of a local archive up to a torn last line, and that line (`None`: there is none).
/// Warren writes whole lines, each ending with a newline: what follows the last newline and is
/// not JSON is a write that did not finish. Nothing else is taken for torn.
pub fn torn_tail(text: &str) -> (&str, Option<Torn>) {
    let at = text.rfind('\n').map_or(0, |i| i + 1);
    let tail = &text[at..];
    if tail.trim().is_empty() || serde_json::from_str::<serde_json::Value>(tail).is_ok() {
        return (text, None);
    }
    let torn = Torn {
        line: text[..at].lines().count() + 1,
        at,
        bytes: tail.len(),
    };
    (&text[..at], Some(torn))
}

/// A local archive's text after its retention: the header line and every message line that has
/// not expired, byte for byte as they were, and how many were dropped. The text must be a
/// readable snapshot (nothing is dropped from one that is not).
pub fn retain(
    whole: &str,
    now: jiff::Timestamp,
    max_age_secs: u64,
) -> Result<(String, u64), super::snapshot::SnapshotError> {
    // A torn last line is kept as it is, after the kept ones: the next append moves it aside.
    let (text, torn) = torn_tail(whole);
    let tail = torn.map_or("", |_| &whole[text.len()..]);
    let (_, messages) = super::snapshot::read(text)?;
    // The same lines `snapshot::read` read: the first non-empty is the header.
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let mut out = String::with_capacity(text.len());
    if let Some(head) = lines.next() {
        out.push_str(head);
        out.push('\n');
    }
    let mut dropped = 0u64;
    for (line, m) in lines.zip(&messages) {
        if expired(m, now, max_age_secs) {
            dropped += 1;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str(tail);
    Ok((out, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restore_takes_what_was_not_restored_and_counts_what_it_left_out() {
        let items: Vec<(String, u32)> = (0..6).map(|i| (format!("r{i}"), i)).collect();
        let before: HashSet<String> = ["r0".to_string(), "r1".to_string(), "r4".to_string()].into();
        let even = |n: &u32| n.is_multiple_of(2);
        let (chosen, left) = choose_for_restore(items.clone(), &before, false, None, even);
        assert_eq!(chosen.iter().map(|(_, n)| *n).collect::<Vec<_>>(), [2]);
        assert_eq!(left, 2, "r0 and r4 match and were restored before");
        let (chosen, left) = choose_for_restore(items.clone(), &before, true, None, even);
        assert_eq!(
            chosen.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
            [0, 2, 4]
        );
        assert_eq!(
            left, 2,
            "again takes them, still counted as restored before"
        );
        // The limit counts only what is taken, not what was left out.
        let (chosen, left) = choose_for_restore(items, &before, false, Some(2), |_| true);
        assert_eq!(chosen.iter().map(|(_, n)| *n).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(left, 3);
    }

    #[test]
    fn max_ages_read_as_rabbitmq_reads_them() {
        assert_eq!(max_age_secs("30D"), Some(30 * 86_400));
        assert_eq!(max_age_secs("7D"), Some(7 * 86_400));
        assert_eq!(max_age_secs("12h"), Some(12 * 3_600));
        assert_eq!(max_age_secs("1Y"), Some(365 * 86_400));
        assert_eq!(max_age_secs("2M"), Some(60 * 86_400));
        assert_eq!(max_age_secs("90m"), Some(5_400));
        assert_eq!(max_age_secs("45s"), Some(45));
        for bad in [
            "", "D", "0D", "30", "30d", "-1D", "1.5D", "30 D", "a month", "٣D",
        ] {
            assert_eq!(max_age_secs(bad), None, "{bad}");
        }
    }

    fn archived_at(body: &str, at: Option<&str>) -> DeadLetter {
        let mut m = msg(body, None);
        if let Some(at) = at {
            m.headers.insert(AT, HeaderValue::string(at));
        }
        m
    }

    #[test]
    fn only_what_is_older_than_the_max_age_expires() {
        let now: jiff::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let day = 86_400;
        assert!(expired(
            &archived_at("a", Some("2026-11-20T23:59:59Z")),
            now,
            10 * day
        ));
        assert!(
            !expired(
                &archived_at("a", Some("2026-11-21T00:00:00Z")),
                now,
                10 * day
            ),
            "exactly the max age is kept"
        );
        assert!(!expired(
            &archived_at("a", Some("2026-11-30T00:00:00Z")),
            now,
            10 * day
        ));
        assert!(!expired(&archived_at("a", None), now, 1), "undated: kept");
        assert!(
            !expired(&archived_at("a", Some("last week")), now, 1),
            "unreadable: kept"
        );
        assert!(
            !expired(&archived_at("a", Some("2027-01-01T00:00:00Z")), now, 1),
            "from the future: kept"
        );
    }

    #[test]
    fn retention_drops_old_lines_and_keeps_the_header_and_young_ones_byte_for_byte() {
        let now: jiff::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let header = super::super::snapshot::SnapshotHeader {
            queue: "warren archive (local)".into(),
            vhost: "/".into(),
            exported_at: "2026-10-01T00:00:00Z".into(),
            source: "RabbitMQ 3.10.8".into(),
        };
        let ms = [
            archived_at("old", Some("2026-10-01T00:00:00Z")),
            archived_at("young", Some("2026-11-30T00:00:00Z")),
            archived_at("undated", None),
            archived_at("older", Some("2026-09-01T00:00:00Z")),
        ];
        let text = super::super::snapshot::write(&header, &ms);
        let (kept, dropped) = retain(&text, now, 30 * 86_400).unwrap();
        assert_eq!(dropped, 2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(kept, format!("{}\n{}\n{}\n", lines[0], lines[2], lines[3]));
        let (_, back) = super::super::snapshot::read(&kept).unwrap();
        assert_eq!(
            back.iter().map(|m| m.body.clone()).collect::<Vec<_>>(),
            [b"young".to_vec(), b"undated".to_vec()]
        );
        // Nothing old: the same text back.
        let (same, none) = retain(&kept, now, 30 * 86_400).unwrap();
        assert_eq!((same.as_str(), none), (kept.as_str(), 0));
        assert!(retain("not a snapshot", now, 1).is_err());
    }

    #[test]
    fn only_a_user_id_that_is_the_archiver_is_vouched_for_and_a_restore_puts_the_own_back() {
        let stamp = Stamp {
            from: "payments".into(),
            by: "ana@ops".into(),
            reason: String::new(),
        };
        let mut m = msg("a", None);
        stamp.apply(&mut m.headers, jiff::Timestamp::now());
        assert!(vouched_by(&m).is_err(), "unsigned");
        m.properties.user_id = Some("mallory".into());
        assert!(vouched_by(&m).is_err(), "not who it claims");
        m.properties.user_id = Some("ops".into());
        assert_eq!(vouched_by(&m), Ok("ops".to_string()));
        m.properties.user_id = Some("p".into());
        assert!(
            vouched_by(&m).is_err(),
            "a suffix of the name is not the name"
        );
        let mut mail = m.clone();
        mail.headers
            .insert(BY, HeaderValue::string("ana@laptop@ana@corp.example"));
        mail.properties.user_id = Some("ana@corp.example".into());
        assert_eq!(vouched_by(&mail), Ok("ana@corp.example".to_string()));
        m.properties.user_id = Some("ops".into());
        // Its own user id goes back; none when it had none; untouched when not recorded.
        assert_eq!(restored_properties(&m).user_id.as_deref(), Some("ops"));
        m.headers.insert(ORIGINAL_USER_ID, HeaderValue::string(""));
        assert_eq!(restored_properties(&m).user_id, None);
        m.headers
            .insert(ORIGINAL_USER_ID, HeaderValue::string("shop"));
        assert_eq!(restored_properties(&m).user_id.as_deref(), Some("shop"));
        assert!(!restored_headers(&m.headers).contains_key(ORIGINAL_USER_ID));
    }

    #[test]
    fn a_stream_that_keeps_less_than_promised_is_refused_with_its_source() {
        use super::super::discovery::{JsonMap, QueueInfo};
        let stream = |args: serde_json::Value| {
            let mut q = QueueInfo::named("warren.archive");
            q.arguments = serde_json::from_value(args).unwrap();
            q
        };
        let policy = |v: serde_json::Value| -> JsonMap { serde_json::from_value(v).unwrap() };
        let ok = stream(serde_json::json!({"x-queue-type": "stream", "x-max-age": "30D"}));
        assert_eq!(retention_refusal("warren.archive", &ok, None, "30D"), None);
        assert_eq!(retention_refusal("warren.archive", &ok, None, "7D"), None);
        let why = retention_refusal("warren.archive", &ok, None, "1Y").unwrap();
        assert!(why.contains("only 30D (x-max-age argument)"), "{why}");
        let short = stream(serde_json::json!({"x-max-age": "5s"}));
        let why = retention_refusal("warren.archive", &short, None, "30D").unwrap();
        assert!(
            why.contains("only 5s") && why.contains("nothing moved"),
            "{why}"
        );
        let p = policy(serde_json::json!({"max-age": "1h"}));
        let why = retention_refusal("warren.archive", &ok, Some(&p), "30D").unwrap();
        assert!(why.contains("only 1h (max-age policy key)"), "{why}");
        let bytes = stream(serde_json::json!({"x-max-length-bytes": 300000}));
        let why = retention_refusal("warren.archive", &bytes, None, "30D").unwrap();
        assert!(why.contains("at most 300000 bytes"), "{why}");
        let p = policy(serde_json::json!({"max-length-bytes": 1000000}));
        let why = retention_refusal("warren.archive", &ok, Some(&p), "30D").unwrap();
        assert!(why.contains("at most 1000000 bytes"), "{why}");
    }

    #[test]
    fn an_archived_copy_has_the_key_its_original_had_in_the_queue() {
        let original = msg("no id: keyed by content", None);
        let mut copy = original.clone();
        Stamp {
            from: "orders.dlq".into(),
            by: "ana@ops".into(),
            reason: "gone".into(),
        }
        .apply(&mut copy.headers, jiff::Timestamp::now());
        copy.headers
            .insert(ORIGINAL_USER_ID, HeaderValue::string(""));
        copy.headers.insert("x-stream-offset", HeaderValue::I64(7));
        copy.properties.user_id = Some("ops".into());
        copy.delivery.stream_offset = Some(7);
        let key = crate::domain::identity::message_key(&original);
        assert!(key.starts_with("hash:"), "{key}");
        assert_ne!(crate::domain::identity::message_key(&copy), key);
        assert_eq!(archived_key(&copy), key);
    }

    #[test]
    fn only_an_unfinished_last_line_is_torn() {
        let whole = "{\"warren_snapshot\":1}\n{\"a\":1}\n";
        assert_eq!(torn_tail(whole), (whole, None));
        assert_eq!(torn_tail(""), ("", None));
        let t = format!("{whole}{{\"a\":2,\"bo");
        let (kept, torn) = torn_tail(&t);
        assert_eq!(kept, whole);
        assert_eq!(
            torn,
            Some(Torn {
                line: 3,
                at: whole.len(),
                bytes: 10
            })
        );
        // A whole last line without its newline is not torn.
        let t = format!("{whole}{{\"a\":2}}");
        assert_eq!(torn_tail(&t), (t.as_str(), None));
    }

    fn msg(body: &str, count: Option<i64>) -> DeadLetter {
        let mut headers = Table::new();
        headers.insert("x-first-death-queue", HeaderValue::string("orders"));
        if let Some(c) = count {
            headers.insert("x-delivery-count", HeaderValue::I64(c));
        }
        DeadLetter {
            queue: "orders.dlq".into(),
            body: body.as_bytes().to_vec(),
            body_size: body.len() as u64,
            headers,
            ..Default::default()
        }
    }

    #[test]
    fn the_digest_ignores_how_the_message_was_read() {
        let a = msg("x", Some(1));
        let mut b = msg("x", Some(7));
        b.position = 40;
        b.delivery.redelivered = true;
        b.queue = "elsewhere".into();
        assert_eq!(content_digest(&a), content_digest(&b));
        assert_ne!(content_digest(&a), content_digest(&msg("y", Some(1))));
        let mut c = msg("x", None);
        c.headers.insert("x-extra", HeaderValue::Bool(true));
        assert_ne!(content_digest(&a), content_digest(&c));
    }

    #[test]
    fn a_content_set_lets_each_snapshotted_message_go_once() {
        let snap = [msg("a", None), msg("a", None), msg("b", None)];
        let mut s = ContentSet::new(&snap);
        assert_eq!(s.len(), 3);
        assert!(s.take(&msg("a", Some(2))));
        assert!(s.take(&msg("a", Some(3))));
        assert!(!s.take(&msg("a", None)), "only two copies were snapshotted");
        assert!(!s.take(&msg("c", None)), "never in the snapshot");
        assert!(s.take(&msg("b", None)));
        assert!(s.is_empty());
    }

    #[test]
    fn stamped_headers_read_back_and_restore_removes_only_them() {
        let mut m = msg("a", None);
        m.headers.insert("x-stream-offset", HeaderValue::I64(12));
        let before = m.headers.clone();
        let stamp = Stamp {
            from: "orders.dlq".into(),
            by: "ana@ops".into(),
            reason: "customer deleted".into(),
        };
        let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        stamp.apply(&mut m.headers, at);
        let a = archived(&m).unwrap();
        assert_eq!(a.from.as_deref(), Some("orders.dlq"));
        assert_eq!(a.by.as_deref(), Some("ana@ops"));
        assert_eq!(a.reason.as_deref(), Some("customer deleted"));
        assert_eq!(a.at.as_deref(), Some("2027-01-15T08:00:00Z"));
        let back = restored_headers(&m.headers);
        let mut want = before;
        want.remove("x-stream-offset");
        assert_eq!(back, want);
        assert_eq!(archived(&msg("a", None)), None);
    }
}
