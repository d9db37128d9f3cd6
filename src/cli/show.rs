//! `warren show`: the messages of a queue or a snapshot, explained, as text or JSON lines.

use crate::domain::redirect::Redirects;
use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};

use super::args::ConnArgs;
use super::commands::{
    broker_failure, file_conventions, open, parse_filter, print_line, read_explained, read_snapshot,
};
use super::{Failure, exit};
use crate::broker::audit;
use crate::broker::session::{self, Explained, Session};
use crate::domain::comeback;
use crate::domain::filter::Filter;
use crate::domain::message::DeadLetter;
use crate::domain::sanitize::one_line;

/// The routing of each plan's target per the broker's bindings, for `replay_target.queues`.
async fn routes(
    s: &Session,
) -> Result<
    (
        Vec<crate::domain::discovery::ExchangeInfo>,
        Vec<crate::domain::discovery::Binding>,
    ),
    Failure,
> {
    let (x, b) = tokio::join!(
        s.handle.mgmt.exchanges(s.vhost()),
        s.handle.mgmt.bindings(s.vhost())
    );
    Ok((
        x.map_err(|e| Failure::broker(e.to_string()))?,
        b.map_err(|e| Failure::broker(e.to_string()))?,
    ))
}

pub(crate) async fn show(
    c: &ConnArgs,
    queue: Option<&str>,
    snapshot: Option<&Path>,
    limit: usize,
    json: bool,
    filter: Option<&str>,
) -> Result<i32, Failure> {
    let filter = parse_filter(filter)?;
    if let Some(file) = snapshot {
        let (_, messages) = read_snapshot(file)?;
        let messages = session::explain_all(
            messages.into_iter().take(limit).collect(),
            &session::Remembered::default(),
            &file_conventions(c)?,
        );
        // A snapshot has no bindings: the target's queues are what the plan expects.
        print_messages(
            &messages,
            json,
            filter.as_ref(),
            |_, _| Vec::new(),
            &Rests::default(),
            &HashMap::new(),
            &Redirects::default(),
        );
        return Ok(exit::OK);
    }
    let queue = queue.ok_or_else(|| Failure::usage("name a queue or --snapshot FILE"))?;
    let s = open(c).await?;
    let messages = if queue == s.handle.target.archive.stream {
        // The archive is read to its end, not to the management API's count, which lags behind
        // a stream just written; its messages carry their own headers back (see `archive`).
        let page = s
            .handle
            .browse_archive(queue, limit)
            .await
            .map_err(broker_failure)?;
        if page.stopped == crate::broker::browse::StopReason::Idle {
            crate::errln!(
                "warren: the broker stopped delivering the archive before its end ({} read); run it again to read the rest",
                page.messages.len()
            );
        }
        session::explain_all(
            session::into_messages(page),
            &session::Remembered::default(),
            &s.handle.target.settings.conventions,
        )
    } else {
        read_explained(c, &s, queue, limit).await?.0
    };
    let (exchanges, bindings) = routes(&s).await?;
    let table = crate::domain::discovery::RoutingTable::new(&exchanges, &bindings);
    // The redirects in force: the destination shown is the one a replay would use.
    let redirects = crate::ops::redirect::list(&s)
        .await
        .map(|c| c.redirects)
        .unwrap_or_else(|e| {
            if let crate::ops::Stop::Broker(why) = e {
                crate::errln!(
                    "warren: {}; destinations shown without them",
                    one_line(&why, 300)
                );
            }
            Redirects::default()
        });
    // Where each message's replay comes to rest past wait queues, by the replay's own rule.
    let waits = rests(&s, &messages, &table, &redirects)
        .await
        .map_err(broker_failure)?;
    // Who ran the replays that messages came back from.
    let dls: Vec<DeadLetter> = messages.iter().map(|e| e.message.clone()).collect();
    let authors = audit::authors(&s, &dls).await;
    print_messages(
        &messages,
        json,
        filter.as_ref(),
        |ex, rk| table.route(ex, rk).queues,
        &waits,
        &authors,
        &redirects,
    );
    Ok(exit::OK)
}

/// Prints messages as `show` does; `route` says which queues a publish reaches.
pub(crate) fn print_messages(
    messages: &[Explained],
    json: bool,
    filter: Option<&Filter>,
    route: impl Fn(&str, &str) -> Vec<String>,
    waits: &Rests,
    authors: &HashMap<String, String>,
    redirects: &Redirects,
) {
    let now = jiff::Timestamp::now();
    let opts = crate::domain::replay::ReplayOptions {
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
        target_queue: None,
        now,
        run_id: None,
    };
    for e in messages {
        if let Some(f) = filter
            && !f.matches(&crate::domain::selection::subject(
                &e.message,
                &e.explanation,
                session::age_secs(e, now),
            ))
        {
            continue;
        }
        let x = &e.explanation;
        let plan = crate::domain::replay::plan_with(&e.message, x, &opts, redirects);
        let again = comeback::failed_again(&e.message, x);
        if json {
            let mut v = show_json(e, &plan, &route, waits);
            v["failed_again"] = again.as_ref().map_or(Value::Null, |f| {
                let by = authors.get(&f.run_id);
                json!({
                    "run_id": f.run_id,
                    "replayed_at": f.replayed_at.map(|t| t.to_string()),
                    "died_at": f.died_at.map(|t| t.to_string()),
                    "nth_replay": f.nth,
                    "by": by,
                    "text": f.describe(by.map(String::as_str)),
                })
            });
            print_line(&v);
            continue;
        }
        // The id a person knows it by (the producer's, else the framework's), else the key.
        let id = crate::domain::identity::shown_id(&e.message).unwrap_or_else(|| e.key.clone());
        let id = id.as_str();
        crate::outln!(
            "#{} {}  [{}] {}",
            e.message.position + 1,
            one_line(id, 60),
            x.convention.as_str(),
            one_line(&x.fingerprint.key, 40)
        );
        crate::outln!("  {}", one_line(&x.verdict, 240));
        if let Some(a) = crate::domain::archive::archived(&e.message) {
            let or_q = |v: &Option<String>| one_line(v.as_deref().unwrap_or("?"), 80);
            crate::outln!(
                "  archived from {} at {} by {}{}{}",
                or_q(&a.from),
                or_q(&a.at),
                or_q(&a.by),
                a.reason
                    .as_deref()
                    .filter(|r| !r.is_empty())
                    .map_or(String::new(), |r| format!(": {}", one_line(r, 200))),
                match archive_vouch(&e.message) {
                    Some(Err(why)) => format!("  [UNVOUCHED: {why}]"),
                    _ => String::new(),
                }
            );
        }
        if let Some(f) = &again {
            let by = authors.get(&f.run_id).map(String::as_str);
            crate::outln!("  {}", one_line(&f.describe(by), 240));
        }
        if x.deaths.copied {
            crate::outln!(
                "  x-death: a copy Symfony carried over from the delivery that failed (its delay queue), not why it failed"
            );
        }
        for d in &x.deaths.entries {
            crate::outln!(
                "    {:<10} {:<30} x{:<4} {}  via {} {}",
                one_line(d.reason.as_ref().map_or("?", |r| r.as_str()), 30),
                one_line(d.queue.as_deref().unwrap_or("?"), 30),
                d.count.unwrap_or(0),
                d.time.map(|t| t.to_string()).unwrap_or_default(),
                one_line(d.exchange.as_deref().unwrap_or(""), 40),
                one_line(&d.routing_keys.join(","), 60),
            );
        }
        if let Some(f) = &x.fault {
            crate::outln!(
                "  exception: {}: {}",
                one_line(f.exception_type.as_deref().unwrap_or("?"), 100),
                one_line(f.message.as_deref().unwrap_or(""), 200)
            );
        }
        if let Some(n) = x.retries {
            crate::outln!("  retries: {n}");
        }
        match &plan.target {
            Some(t) => {
                let back = waits.past_wait(t, x);
                crate::outln!(
                    "  replay → {}{} (exchange '{}', key '{}'){}",
                    one_line(t.expected_queue.as_deref().unwrap_or("?"), 80),
                    plan.redirected
                        .as_ref()
                        .map_or(String::new(), |r| format!(" ({})", r.describe())),
                    one_line(&t.exchange, 60),
                    one_line(&t.routing_key, 60),
                    back.map_or(String::new(), |b| format!(
                        ", a wait queue: the replay goes on to {}, where it returns messages",
                        one_line(b, 80)
                    ))
                )
            }
            None => crate::outln!("  replay → no known origin"),
        }
        if let Some(why) = plan.held_back() {
            crate::outln!("  ! {}", one_line(&why, 300));
        }
        if let Some(line) = arrival_line(e, now) {
            crate::outln!("  {line}");
        }
        crate::outln!(
            "  body {} bytes{}",
            e.message.body_size,
            if e.message.delivery.redelivered {
                ", redelivered"
            } else {
                ""
            }
        );
    }
}

fn show_json(
    e: &Explained,
    plan: &crate::domain::replay::ReplayPlan,
    route: &impl Fn(&str, &str) -> Vec<String>,
    waits: &Rests,
) -> Value {
    let x = &e.explanation;
    let deaths: Vec<Value> = x
        .deaths
        .entries
        .iter()
        .map(|d| {
            json!({
                "queue": d.queue,
                "reason": d.reason.as_ref().map(|r| r.as_str()),
                "count": d.count,
                "time": d.time.map(|t| t.to_string()),
                "exchange": d.exchange,
                "routing_keys": d.routing_keys,
            })
        })
        .collect();
    let exception = x
        .fault
        .as_ref()
        .filter(|f| f.exception_type.is_some() || f.message.is_some())
        .map(|f| json!({"type": f.exception_type, "message": f.message}));
    let target = plan.target.as_ref().map(|t| {
        json!({
            "exchange": t.exchange,
            "routing_key": t.routing_key,
            "expected_queue": t.expected_queue,
            "queues": route(&t.exchange, &t.routing_key),
            // Past a wait queue: where the message would come to rest.
            "rests_in": waits.past_wait(t, x).or(t.expected_queue.as_deref()),
            "redirected_from": plan.redirected.as_ref().map(|r| json!({"queue": r.from, "reason": r.reason})),
        })
    });
    json!({
        "position": e.message.position,
        "message_id": e.message.properties.message_id,
        // The producer's id, else the framework's own (Celery's task id, dramatiq's body
        // `message_id`, …); null when the key is a content hash.
        "id": crate::domain::identity::shown_id(&e.message),
        "key": e.key,
        "fingerprint": x.fingerprint.key,
        "group": x.fingerprint.summary,
        "convention": x.convention.as_str(),
        "verdict": x.verdict,
        "deaths": deaths,
        // Symfony publishes to its failure transport with the failed delivery's headers: its
        // `x-death` is its delay queue's, copied, not a verdict.
        "deaths_copied": x.deaths.copied,
        "exception": exception,
        "source_queue": x.source.queue,
        "replay_target": target,
        "message_type": x.message_type,
        "retries": x.retries,
        "deadline": x.deadline.map(|t| t.to_string()),
        "deadline_passed": plan.expired.is_some(),
        "replay_count": x.replay_count,
        "delivery_count": e.message.delivery.delivery_count,
        "redelivered": e.message.delivery.redelivered,
        "body_bytes": e.message.body_size,
        "body": body_json(&e.message),
        "dead_since": session::arrival(e).since().map(|t| t.to_string()),
        "dead_since_exact": session::arrival(e).is_exact(),
        "arrived_after": session::arrival(e).earliest().map(|t| t.to_string()),
        "first_seen": e.first_seen.map(|t| t.to_string()),
        "stream_offset": e.message.delivery.stream_offset,
        "archived": crate::domain::archive::archived(&e.message).map(|a| {
            let vouch = archive_vouch(&e.message);
            json!({"from": a.from, "at": a.at, "by": a.by, "reason": a.reason,
                "vouched_by": vouch.as_ref().and_then(|v| v.clone().ok()),
                "unvouched": vouch.and_then(Result::err)})
        }),
    })
}

/// Most characters of a body `show --json` gives as text (the TUI and `export` have all of it).
const SHOW_BODY_CHARS: usize = 4096;

/// The body as a person reads it: decoded (gzip, an AMQP 1.0 amqp-value or amqp-sequence), its
/// format, what it was decoded from and the terminal-safe text, cut at [`SHOW_BODY_CHARS`].
fn body_json(m: &crate::domain::message::DeadLetter) -> Value {
    use crate::domain::body;
    let b = body::decode_message(m, body::DECODE_CAP);
    json!({
        "format": b.format.label(),
        "decoded_from": b.decoded_label(),
        "note": b.note(),
        "text": body::text(&b, SHOW_BODY_CHARS),
    })
}

/// Who the broker vouches archived a message of the archive stream (one read with its offset):
/// `None` for a local archive's, which is Warren's own file.
fn archive_vouch(m: &crate::domain::message::DeadLetter) -> Option<Result<String, &'static str>> {
    m.delivery
        .stream_offset
        .map(|_| crate::domain::archive::vouched_by(m))
}

/// When the message reached its DLQ, in words, by the one rule (`domain::arrival`): exact
/// where its history makes it so, else a bound with the range's other end.
fn arrival_line(e: &Explained, now: jiff::Timestamp) -> Option<String> {
    use crate::domain::arrival::Arrival;
    let a = session::arrival(e);
    let age = a.age(now)?;
    let ago = crate::tui::format::age(age.secs);
    Some(match a {
        Arrival::At(t) => format!("in the DLQ since {t} ({ago} ago; it died once, then)"),
        Arrival::Between { from, to: Some(t) } => format!(
            "in the DLQ since {t} at the latest (≥ {ago}: Warren first saw it then){}",
            from.map(|f| format!("; it first died there at or after {f}"))
                .unwrap_or_default()
        ),
        Arrival::Between { from: Some(f), .. } => {
            format!("in the DLQ since {f} at the earliest (≤ {ago})")
        }
        Arrival::Between { .. } => return None,
    })
}

/// Where a replay of each planned target comes to rest past wait queues, by (queue, key):
/// found by the preview's own rule (`Session::rest_of`, following the key each message had
/// when it died there), so `show`, the plan and the run name the same queue. Only targets that
/// pass a wait queue are kept.
#[derive(Default)]
pub(crate) struct Rests(HashMap<(String, String), String>);

impl Rests {
    fn key(
        t: &crate::domain::replay::ReplayTarget,
        x: &crate::domain::explain::Explanation,
    ) -> Option<(String, String)> {
        let queue = t.expected_queue.clone()?;
        let key = if t.exchange.is_empty() {
            x.deaths
                .routing_key_in(&t.routing_key)
                .unwrap_or(&t.routing_key)
                .to_string()
        } else {
            t.routing_key.clone()
        };
        Some((queue, key))
    }

    /// The queue past the wait queue(s) that `t` names, when it names one.
    pub(crate) fn past_wait(
        &self,
        t: &crate::domain::replay::ReplayTarget,
        x: &crate::domain::explain::Explanation,
    ) -> Option<&str> {
        self.0.get(&Self::key(t, x)?).map(String::as_str)
    }
}

/// [`Rests`] for the messages shown, each (queue, key) asked once.
async fn rests(
    s: &Session,
    messages: &[Explained],
    table: &crate::domain::discovery::RoutingTable<'_>,
    redirects: &Redirects,
) -> Result<Rests, crate::broker::session::SessionError> {
    use crate::broker::session::Rest;
    let opts = crate::domain::replay::ReplayOptions {
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
        target_queue: None,
        now: jiff::Timestamp::now(),
        run_id: None,
    };
    let mut asked = std::collections::HashSet::new();
    let mut out = Rests::default();
    for e in messages {
        let plan = crate::domain::replay::plan_with(&e.message, &e.explanation, &opts, redirects);
        let Some(key) = plan
            .target
            .as_ref()
            .and_then(|t| Rests::key(t, &e.explanation))
        else {
            continue;
        };
        if !asked.insert(key.clone()) {
            continue;
        }
        // A queue that is gone says so in the plan; here it only has no resting place.
        if let Ok(Rest::Queue { queue, via }) = s.handle.rest_of(&key.0, &key.1, table).await
            && !via.is_empty()
        {
            out.0.insert(key, queue);
        }
    }
    Ok(out)
}
