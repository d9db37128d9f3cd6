//! `warren watch`, pure: the thresholds a user gives (`--alert 'depth>100'`), what changed
//! between two looks at the dead-letter queues (new dead letters, a new failure group, a
//! threshold crossed, dead letters stuck in an at-least-once quorum queue), and the Prometheus
//! text format of what RabbitMQ's own metrics cannot say (dead letters per failure group, the
//! oldest dead letter's age, stuck dead letters and why).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::discovery::stuck::Stuck;
use super::urgency::{Figures, duration_text};

/// One threshold of `--alert`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    /// More than this many dead letters in a queue.
    Depth(u64),
    /// The oldest dead letter older than this many seconds.
    Age(u64),
    /// More than this many new dead letters per minute.
    Growth(f64),
    /// A failure group none of whose messages Warren had seen before.
    NewGroup,
    /// Dead letters an at-least-once quorum queue holds because no dead-letter queue takes
    /// them. Always in force, whatever `--alert` says: nothing moves them until the broker's
    /// topology is fixed, and they count against the queue's own length limit.
    Stuck,
}

/// What `--alert` accepts, for error messages.
pub const ALERT_FORMS: &str =
    "depth>N, age>DURATION (e.g. 90s, 30m, 1h, 2d), growth>N/min (or /s, /h), new-group";

impl Threshold {
    pub fn parse(text: &str) -> Result<Threshold, String> {
        let t = text.trim();
        if t == "new-group" {
            return Ok(Threshold::NewGroup);
        }
        let bad = |why: &str| format!("--alert '{text}': {why}; use {ALERT_FORMS}");
        let Some((what, value)) = t.split_once('>') else {
            return Err(bad("no '>'"));
        };
        let value = value.trim();
        match what.trim() {
            "depth" => value
                .parse::<u64>()
                .map(Threshold::Depth)
                .map_err(|_| bad("the depth must be a whole number of messages")),
            "age" => parse_duration(value)
                .map(Threshold::Age)
                .ok_or_else(|| bad("the age must be a number with s, m, h or d")),
            "growth" => parse_rate(value)
                .map(Threshold::Growth)
                .ok_or_else(|| bad("the growth must be a number per min, per s or per h")),
            other => Err(bad(&format!("unknown measure '{other}'"))),
        }
    }

    /// The threshold as the user wrote it (normalised).
    pub fn text(&self) -> String {
        match self {
            Threshold::Depth(n) => format!("depth>{n}"),
            Threshold::Age(s) => format!("age>{}", duration_text(*s)),
            Threshold::Growth(g) => format!("growth>{g}/min"),
            Threshold::NewGroup => "new-group".into(),
            Threshold::Stuck => "stuck".into(),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Threshold::Depth(_) => "depth",
            Threshold::Age(_) => "age",
            Threshold::Growth(_) => "growth",
            Threshold::NewGroup => "new-group",
            Threshold::Stuck => "stuck",
        }
    }
}

/// `90s`, `30m`, `1h`, `2d`, or plain seconds.
pub(crate) fn parse_duration(v: &str) -> Option<u64> {
    let (digits, unit) = match v.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => v.split_at(i),
        None => (v, "s"),
    };
    let n: u64 = digits.parse().ok()?;
    let mult = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// `10/min`, `0.5/s`, `100/h` (or a bare number, per minute), in per minute.
fn parse_rate(v: &str) -> Option<f64> {
    let (n, per) = v.split_once('/').unwrap_or((v, "min"));
    let n: f64 = n.trim().parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    let per_min = match per.trim() {
        "s" | "sec" => n * 60.0,
        "m" | "min" => n,
        "h" => n / 60.0,
        _ => return None,
    };
    Some(per_min)
}

/// One dead-letter queue as a watch sees it on one look.
#[derive(Clone, Debug, PartialEq)]
pub struct Look {
    /// The context, when a watch follows every context (`--context '*'`); else empty.
    pub context: String,
    pub vhost: String,
    pub queue: String,
    pub figures: Figures,
    /// Age of the oldest dead letter in seconds, when known.
    pub age_secs: Option<u64>,
    /// Failure groups read this look: fingerprint → (summary, count, new: no message of it
    /// seen before). `None`: not read (see `not_read`).
    pub groups: Option<Vec<GroupLook>>,
    /// Why the queue was not read for groups, when it was not.
    pub not_read: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GroupLook {
    pub fingerprint: String,
    pub summary: String,
    pub count: u64,
    pub new: bool,
}

/// Something a watch prints.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// As [`Look::context`]: empty unless every context is watched.
    pub context: String,
    pub vhost: String,
    pub queue: String,
    pub what: ChangeKind,
    /// The threshold this change crosses, when it is an alert.
    pub alert: Option<Threshold>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ChangeKind {
    NewDeadLetters {
        count: u64,
        depth: u64,
    },
    NewGroup {
        fingerprint: String,
        summary: String,
        count: u64,
    },
    Depth {
        depth: u64,
    },
    Age {
        secs: u64,
    },
    Growth {
        per_min: f64,
    },
    /// Dead letters held in the queue they died in (at-least-once), `why` as
    /// [`crate::domain::discovery::stuck::Why::code`], `why_text` and `remedy` in words.
    Stuck {
        count: u64,
        dead_letter_exchange: String,
        why: &'static str,
        why_text: String,
        remedy: String,
    },
}

impl Change {
    /// One line for people.
    pub fn text(&self) -> String {
        let what = match &self.what {
            ChangeKind::NewDeadLetters { count, depth } => {
                format!("{count} new dead letter(s), {depth} in the queue")
            }
            ChangeKind::NewGroup {
                fingerprint,
                summary,
                count,
            } => format!("new failure group {fingerprint} ({count}): {summary}"),
            ChangeKind::Depth { depth } => format!("{depth} dead letters"),
            ChangeKind::Age { secs } => {
                format!("oldest dead letter is {} old", duration_text(*secs))
            }
            ChangeKind::Growth { per_min } => format!("growing {per_min:.1} dead letters/min"),
            ChangeKind::Stuck {
                count, why_text, ..
            } => format!(
                "{count} dead letter{} stuck in the queue, in no DLQ (at-least-once): {why_text}",
                if *count == 1 { "" } else { "s" }
            ),
        };
        let queue = if self.context.is_empty() {
            self.queue.clone()
        } else {
            format!("{}: {}", self.context, self.queue)
        };
        match &self.alert {
            Some(t) => format!("ALERT {}: {queue} {what}", t.text()),
            None => format!("{queue} {what}"),
        }
    }

    /// The JSON object for `--json` and `--exec`'s standard input.
    pub fn json(&self) -> Value {
        let mut v = json!({
            "vhost": self.vhost,
            "queue": self.queue,
            "alert": self.alert.map(|t| t.text()),
            "text": self.text(),
        });
        let (event, extra) = match &self.what {
            ChangeKind::NewDeadLetters { count, depth } => {
                ("new-dead-letters", json!({"count": count, "depth": depth}))
            }
            ChangeKind::NewGroup {
                fingerprint,
                summary,
                count,
            } => (
                "new-group",
                json!({"fingerprint": fingerprint, "summary": summary, "count": count}),
            ),
            ChangeKind::Depth { depth } => ("depth", json!({"depth": depth})),
            ChangeKind::Age { secs } => ("age", json!({"age_secs": secs})),
            ChangeKind::Growth { per_min } => ("growth", json!({"growth_per_min": per_min})),
            ChangeKind::Stuck {
                count,
                dead_letter_exchange,
                why,
                why_text,
                remedy,
            } => (
                "stuck",
                json!({
                    "count": count,
                    "dead_letter_exchange": dead_letter_exchange,
                    "why": why,
                    "why_text": why_text,
                    "remedy": remedy,
                }),
            ),
        };
        if let (Some(o), Value::Object(extra)) = (v.as_object_mut(), extra) {
            if !self.context.is_empty() {
                o.insert("context".into(), json!(self.context));
            }
            o.insert("event".into(), json!(event));
            o.extend(extra);
        }
        v
    }
}

/// A queue's identity across looks.
type Key = (String, String, String);

/// What a watch remembers between looks: each queue's depth and which thresholds were
/// crossed, so a crossing is told once (and again after it cleared).
#[derive(Clone, Debug, Default)]
pub struct Watcher {
    depths: BTreeMap<Key, u64>,
    crossed: BTreeMap<(Key, &'static str), bool>,
    /// The queues holding stuck dead letters at the last look.
    stuck: std::collections::BTreeSet<Key>,
    first: bool,
}

impl Watcher {
    pub fn new() -> Watcher {
        Watcher {
            first: true,
            ..Watcher::default()
        }
    }

    /// The changes between the last look and this one, and the alerts in force. On the first
    /// look nothing is "new" by depth (there is no before); thresholds and new groups are told.
    pub fn look(&mut self, looks: &[Look], alerts: &[Threshold]) -> Vec<Change> {
        let mut out = Vec::new();
        for l in looks {
            let key = (l.context.clone(), l.vhost.clone(), l.queue.clone());
            let depth = l.figures.depth.unwrap_or(0);
            let before = self.depths.insert(key.clone(), depth);
            let change = |what: ChangeKind, alert: Option<Threshold>| Change {
                context: l.context.clone(),
                vhost: l.vhost.clone(),
                queue: l.queue.clone(),
                what,
                alert,
            };
            if !self.first
                && let Some(b) = before
                && depth > b
            {
                out.push(change(
                    ChangeKind::NewDeadLetters {
                        count: depth - b,
                        depth,
                    },
                    None,
                ));
            }
            let new_group_alert = alerts.iter().find(|a| **a == Threshold::NewGroup).copied();
            for g in l.groups.iter().flatten().filter(|g| g.new) {
                out.push(change(
                    ChangeKind::NewGroup {
                        fingerprint: g.fingerprint.clone(),
                        summary: g.summary.clone(),
                        count: g.count,
                    },
                    new_group_alert,
                ));
            }
            for a in alerts {
                let crossing = match *a {
                    Threshold::Depth(n) => (depth > n).then_some(ChangeKind::Depth { depth }),
                    Threshold::Age(s) => l
                        .age_secs
                        .filter(|&age| age > s)
                        .map(|secs| ChangeKind::Age { secs }),
                    Threshold::Growth(g) => l
                        .figures
                        .growth_per_min
                        .filter(|&r| r > g)
                        .map(|per_min| ChangeKind::Growth { per_min }),
                    Threshold::NewGroup | Threshold::Stuck => continue,
                };
                let was = self
                    .crossed
                    .insert((key.clone(), a.kind()), crossing.is_some())
                    .unwrap_or(false);
                if let Some(what) = crossing
                    && !was
                {
                    out.push(change(what, Some(*a)));
                }
            }
        }
        self.first = false;
        out
    }

    /// The queues holding stuck dead letters on this look (see [`Threshold::Stuck`]), each an
    /// alert when it starts holding them: told once, and again after it held none.
    pub fn look_stuck(&mut self, stuck: &[Stuck]) -> Vec<Change> {
        let mut now = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for s in stuck.iter().filter(|s| s.count > 0) {
            let key = (s.context.clone(), s.vhost.clone(), s.queue.clone());
            if !self.stuck.contains(&key) {
                out.push(Change {
                    context: s.context.clone(),
                    vhost: s.vhost.clone(),
                    queue: s.queue.clone(),
                    what: ChangeKind::Stuck {
                        count: s.count,
                        dead_letter_exchange: s.dead_letter_exchange.clone(),
                        why: s.why.code(),
                        why_text: s.explain(),
                        remedy: s.remedy(),
                    },
                    alert: Some(Threshold::Stuck),
                });
            }
            now.insert(key);
        }
        self.stuck = now;
        out
    }

    /// Whether any threshold is crossed now, or a queue holds stuck dead letters (for
    /// `--once`: exit 1).
    pub fn alerting(&self) -> bool {
        self.crossed.values().any(|&c| c) || !self.stuck.is_empty()
    }
}

/// A Prometheus label value: backslash, double quote and newline escaped, as the text format
/// requires (and the value bounded and on one line).
pub fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars().take(512) {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The Prometheus text exposition of a look: per queue its depth, the oldest dead letter's age
/// and whether it was read for groups; per failure group its count; per queue holding stuck
/// dead letters (`stuck`), how many and why.
pub fn prometheus(looks: &[Look], stuck: &[Stuck]) -> String {
    let mut s = String::new();
    let q = |l: &Look| {
        let context = if l.context.is_empty() {
            String::new()
        } else {
            format!("context=\"{}\",", label_value(&l.context))
        };
        format!(
            "{context}vhost=\"{}\",queue=\"{}\"",
            label_value(&l.vhost),
            label_value(&l.queue)
        )
    };
    s.push_str("# HELP warren_dead_letters Dead letters in the queue.\n");
    s.push_str("# TYPE warren_dead_letters gauge\n");
    for l in looks {
        let _ = writeln!(
            s,
            "warren_dead_letters{{{}}} {}",
            q(l),
            l.figures.depth.unwrap_or(0)
        );
    }
    s.push_str(
        "# HELP warren_oldest_dead_letter_age_seconds Age of the oldest dead letter (Warren's first-seen time, else its oldest x-death).\n",
    );
    s.push_str("# TYPE warren_oldest_dead_letter_age_seconds gauge\n");
    for l in looks {
        if let Some(a) = l.age_secs {
            let _ = writeln!(s, "warren_oldest_dead_letter_age_seconds{{{}}} {a}", q(l));
        }
    }
    s.push_str(
        "# HELP warren_dead_letter_growth_per_minute New dead letters per minute over the last minutes.\n",
    );
    s.push_str("# TYPE warren_dead_letter_growth_per_minute gauge\n");
    for l in looks {
        if let Some(g) = l.figures.growth_per_min {
            let _ = writeln!(s, "warren_dead_letter_growth_per_minute{{{}}} {g}", q(l));
        }
    }
    s.push_str(
        "# HELP warren_failure_group_dead_letters Dead letters per failure group (of those read).\n",
    );
    s.push_str("# TYPE warren_failure_group_dead_letters gauge\n");
    for l in looks {
        for g in l.groups.iter().flatten() {
            let _ = writeln!(
                s,
                "warren_failure_group_dead_letters{{{},fingerprint=\"{}\",summary=\"{}\"}} {}",
                q(l),
                label_value(&g.fingerprint),
                label_value(&g.summary),
                g.count
            );
        }
    }
    s.push_str(
        "# HELP warren_queue_read_for_groups 1 when Warren could read the queue for failure groups, 0 when reading would cost (a quorum queue's delivery limit).\n",
    );
    s.push_str("# TYPE warren_queue_read_for_groups gauge\n");
    for l in looks {
        let _ = writeln!(
            s,
            "warren_queue_read_for_groups{{{}}} {}",
            q(l),
            u8::from(l.groups.is_some())
        );
    }
    prometheus_stuck(&mut s, stuck);
    s
}

/// The stuck dead letters of each queue holding some, labelled with why (`no_exchange`,
/// `no_route`, `dlq_full`, `unclear`).
fn prometheus_stuck(s: &mut String, stuck: &[Stuck]) {
    s.push_str(
        "# HELP warren_stuck_dead_letters Dead letters an at-least-once quorum queue holds because no dead-letter queue takes them (messages_dlx).\n",
    );
    s.push_str("# TYPE warren_stuck_dead_letters gauge\n");
    for q in stuck.iter().filter(|q| q.count > 0) {
        let context = if q.context.is_empty() {
            String::new()
        } else {
            format!("context=\"{}\",", label_value(&q.context))
        };
        let _ = writeln!(
            s,
            "warren_stuck_dead_letters{{{context}vhost=\"{}\",queue=\"{}\",why=\"{}\"}} {}",
            label_value(&q.vhost),
            label_value(&q.queue),
            q.why.code(),
            q.count
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_parse_with_clear_errors() {
        assert_eq!(Threshold::parse("depth>100"), Ok(Threshold::Depth(100)));
        assert_eq!(Threshold::parse("age>1h"), Ok(Threshold::Age(3_600)));
        assert_eq!(Threshold::parse("age > 90s"), Ok(Threshold::Age(90)));
        assert_eq!(Threshold::parse("age>2d"), Ok(Threshold::Age(172_800)));
        assert_eq!(
            Threshold::parse("growth>10/min"),
            Ok(Threshold::Growth(10.0))
        );
        assert_eq!(Threshold::parse("growth>1/s"), Ok(Threshold::Growth(60.0)));
        assert_eq!(Threshold::parse("new-group"), Ok(Threshold::NewGroup));
        let e = Threshold::parse("depth>lots").unwrap_err();
        assert!(e.contains("whole number") && e.contains("depth>N"), "{e}");
        assert!(
            Threshold::parse("age>1w")
                .unwrap_err()
                .contains("s, m, h or d")
        );
        assert!(
            Threshold::parse("size>3")
                .unwrap_err()
                .contains("unknown measure 'size'")
        );
        assert!(Threshold::parse("depth=3").unwrap_err().contains("no '>'"));
        assert!(Threshold::parse("growth>-1/min").is_err());
        assert!(Threshold::parse("age>99999999999999999d").is_err());
    }

    fn look(queue: &str, depth: u64, growth: Option<f64>, age: Option<u64>) -> Look {
        Look {
            context: String::new(),
            vhost: "/".into(),
            queue: queue.into(),
            figures: Figures {
                depth: Some(depth),
                growth_per_min: growth,
                ..Figures::default()
            },
            age_secs: age,
            groups: None,
            not_read: None,
        }
    }

    #[test]
    fn a_crossing_is_told_once_and_again_after_it_cleared() {
        let alerts = [Threshold::Depth(10)];
        let mut w = Watcher::new();
        assert!(w.look(&[look("q", 5, None, None)], &alerts).is_empty());
        assert!(!w.alerting());
        let c = w.look(&[look("q", 12, None, None)], &alerts);
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(
            c[0].what,
            ChangeKind::NewDeadLetters {
                count: 7,
                depth: 12
            }
        );
        assert_eq!(c[1].alert, Some(Threshold::Depth(10)));
        assert!(w.alerting());
        assert!(w.look(&[look("q", 12, None, None)], &alerts).is_empty());
        assert!(w.look(&[look("q", 3, None, None)], &alerts).is_empty());
        assert!(!w.alerting());
        assert_eq!(w.look(&[look("q", 11, None, None)], &alerts).len(), 2);
    }

    #[test]
    fn age_growth_and_new_groups_alert() {
        let alerts = [
            Threshold::Age(60),
            Threshold::Growth(5.0),
            Threshold::NewGroup,
        ];
        let mut w = Watcher::new();
        let mut l = look("q", 1, Some(6.0), Some(61));
        l.groups = Some(vec![GroupLook {
            fingerprint: "ab12".into(),
            summary: "boom".into(),
            count: 1,
            new: true,
        }]);
        let c = w.look(&[l], &alerts);
        let kinds: Vec<_> = c.iter().filter_map(|c| c.alert.map(|a| a.kind())).collect();
        assert_eq!(kinds, ["new-group", "age", "growth"]);
        let j = c[0].json();
        assert_eq!(j["event"], "new-group");
        assert_eq!(j["fingerprint"], "ab12");
        assert_eq!(j["alert"], "new-group");
        assert!(w.alerting());
    }

    fn stuck(queue: &str, count: u64) -> Stuck {
        Stuck {
            context: String::new(),
            vhost: "/".into(),
            queue: queue.into(),
            count,
            depth: Some(count + 2),
            dead_letter_exchange: "dlx".into(),
            why: crate::domain::discovery::stuck::Why::NoRoute { routing_key: None },
        }
    }

    #[test]
    fn stuck_dead_letters_alert_without_being_asked_once_until_they_clear() {
        let mut w = Watcher::new();
        // No `--alert`: stuck dead letters are an alert anyway.
        assert!(w.look(&[look("q", 0, None, None)], &[]).is_empty());
        let c = w.look_stuck(&[stuck("payments", 3)]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].alert, Some(Threshold::Stuck));
        assert_eq!(
            c[0].text(),
            "ALERT stuck: payments 3 dead letters stuck in the queue, in no DLQ (at-least-once): dead-letter exchange 'dlx' has no binding to any queue"
        );
        let j = c[0].json();
        assert_eq!(j["event"], "stuck");
        assert_eq!(j["alert"], "stuck");
        assert_eq!(j["count"], 3);
        assert_eq!(j["why"], "no_route");
        assert_eq!(j["dead_letter_exchange"], "dlx");
        assert!(
            j["remedy"]
                .as_str()
                .is_some_and(|r| r.starts_with("bind a dead-letter queue to 'dlx'")),
            "{j}"
        );
        assert!(j.get("context").is_none());
        assert!(w.alerting());
        // Still stuck (more now): said once; the alert stays in force.
        assert!(w.look_stuck(&[stuck("payments", 5)]).is_empty());
        assert!(w.alerting());
        // A queue holding none is no alert.
        assert!(w.look_stuck(&[stuck("payments", 0)]).is_empty());
        assert!(!w.alerting());
        // Stuck again after it cleared: said again, one dead letter in the singular.
        let c = w.look_stuck(&[stuck("payments", 1)]);
        assert_eq!(c.len(), 1);
        assert!(
            c[0].text().contains(": payments 1 dead letter stuck"),
            "{c:?}"
        );
    }

    #[test]
    fn prometheus_has_a_gauge_of_stuck_dead_letters_per_queue() {
        let mut other = stuck("a\"b", 7);
        other.context = "prod".into();
        other.why = crate::domain::discovery::stuck::Why::Full {
            queues: vec!["a.dlq".into()],
        };
        let text = prometheus(&[], &[stuck("payments", 3), other, stuck("clear", 0)]);
        assert!(
            text.contains("# TYPE warren_stuck_dead_letters gauge"),
            "{text}"
        );
        assert!(
            text.contains(
                r#"warren_stuck_dead_letters{vhost="/",queue="payments",why="no_route"} 3"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"warren_stuck_dead_letters{context="prod",vhost="/",queue="a\"b",why="dlq_full"} 7"#
            ),
            "{text}"
        );
        assert!(!text.contains("queue=\"clear\""), "{text}");
    }

    #[test]
    fn prometheus_escapes_label_values() {
        let mut l = look("a\"b\\c\nd", 4, Some(1.5), Some(30));
        l.groups = Some(vec![GroupLook {
            fingerprint: "f1".into(),
            summary: "say \"hi\"\u{1b}[31m".into(),
            count: 4,
            new: false,
        }]);
        let text = prometheus(&[l], &[]);
        assert!(
            text.contains(r#"warren_dead_letters{vhost="/",queue="a\"b\\c\nd"} 4"#),
            "{text}"
        );
        assert!(text.contains(r#"summary="say \"hi\" [31m"} 4"#), "{text}");
        assert!(text.contains("warren_oldest_dead_letter_age_seconds{"));
        assert!(
            text.contains("warren_queue_read_for_groups{vhost=\"/\",queue=\"a\\\"b\\\\c\\nd\"} 1")
        );
        // Every sample line is one line.
        assert!(
            text.lines()
                .all(|l| l.starts_with('#') || l.starts_with("warren_"))
        );
    }
}
