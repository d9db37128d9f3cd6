//! The non-interactive commands: `queues`, `show`, `groups`, `replay`, `audit`. Each prints
//! sanitised text for people or one JSON object per line for scripts.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::args::{ConnArgs, ReplayArgs};
use super::front::CliFront;
use super::{Failure, exit};
use crate::broker::audit;
use crate::broker::config::{self, Overrides};
use crate::broker::replay::{Progress, Summary};
use crate::broker::session::{
    self, Explained, Preview, ReadConsent, ReplaySpec, Session, SessionError,
};
use crate::domain::comeback;
use crate::domain::convention::Conventions;
use crate::domain::discovery::Discovery;
use crate::domain::filter::Filter;
use crate::domain::grouping::{self, GroupBy, GroupKey, GroupNote, WaitQueues};
use crate::domain::message::DeadLetter;
use crate::domain::sanitize::one_line;
use crate::domain::selection::{GroupChoice, Selection};
use crate::domain::snapshot::{self, SnapshotHeader};
use crate::ops;
use crate::store::{self, Store};
use crate::worker::Source;

/// Widest cell Warren prints for a broker string in text output.
const CELL: usize = 120;

pub fn overrides(c: &ConnArgs) -> Overrides {
    Overrides {
        config_path: c.config.clone(),
        context: c.context.clone(),
        amqp_url: c.amqp_url.clone(),
        management_url: c.management_url.clone(),
        vhost: c.vhost.clone(),
        read_only: c.read_only,
        unlocked: None,
    }
}

/// `[conventions]` from the config file, for a snapshot read without a broker.
fn file_conventions(c: &ConnArgs) -> Result<Conventions, Failure> {
    let cfg =
        config::Config::read(c.config.as_deref()).map_err(|e| Failure::usage(e.to_string()))?;
    let settings = cfg.settings().map_err(|e| Failure::usage(e.to_string()))?;
    Ok(settings.conventions)
}

pub fn broker_failure(e: SessionError) -> Failure {
    match e {
        SessionError::NeedsConsent { queue, text } => Failure::failed(format!(
            "{text} Nothing was read: pass --read-again to accept the cost, or make the queue free to read with `warren protect {queue}`"
        )),
        e if e.is_broker() => Failure::broker(e.to_string()),
        e => Failure::failed(e.to_string()),
    }
}

/// The consent the command line gives up front.
pub(crate) fn consent(c: &ConnArgs) -> ReadConsent {
    if c.read_again {
        ReadConsent::ReadAgain
    } else {
        ReadConsent::Reuse
    }
}

/// Runs a read; where reading again would cost deliveries, says what it costs and asks on a
/// terminal (elsewhere it refuses, unless --read-again was given).
pub(crate) async fn read_with_consent<T, Fut>(
    c: &ConnArgs,
    read: impl Fn(ReadConsent) -> Fut,
) -> Result<T, Failure>
where
    Fut: std::future::Future<Output = Result<T, SessionError>>,
{
    match read(consent(c)).await {
        Err(SessionError::NeedsConsent { queue, text })
            if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() =>
        {
            crate::err!("{} Read it again? [y/N] ", one_line(&text, 600));
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            let yes = std::io::stdin().lock().read_line(&mut line).is_ok()
                && matches!(line.trim(), "y" | "Y" | "yes");
            if !yes {
                return Err(Failure::failed(format!(
                    "nothing was read from '{}'",
                    one_line(&queue, 80)
                )));
            }
            read(ReadConsent::ReadAgain).await.map_err(broker_failure)
        }
        other => other.map_err(broker_failure),
    }
}

/// Resolves the configuration and connects to the management API.
pub async fn open(c: &ConnArgs) -> Result<Session, Failure> {
    refuse_every_vhost(c)?;
    let target = config::load(&overrides(c)).map_err(|e| Failure::usage(e.to_string()))?;
    Session::open(target.1).await.map_err(broker_failure)
}

/// `--vhost '*'` names every vhost: only `queues`, `watch` and the terminal UI look at several
/// at once.
pub fn refuse_every_vhost(c: &ConnArgs) -> Result<(), Failure> {
    if c.vhost.as_deref() == Some(super::triage::EVERY_VHOST) {
        return Err(Failure::usage(
            "--vhost '*' (every vhost) works with `warren queues`, `warren watch` and the terminal UI; name one vhost for this command",
        ));
    }
    Ok(())
}

/// Warren's store, or `None` with a warning on stderr (browsing works without it).
fn store_or_warn() -> Option<Store> {
    match Store::open_default() {
        Ok(s) => Some(s),
        Err(e) => {
            crate::errln!("warren: {}", one_line(&e.to_string(), 600));
            None
        }
    }
}

pub fn print_line(v: &Value) {
    crate::outln!("{}", json_text(v));
}

/// The text of one `--json` line: every printer goes through here, so DEL, C1, bidi and
/// invisible characters are `\uXXXX` escapes and never raw bytes (see `sanitize::json_line`).
fn json_text(v: &Value) -> String {
    crate::domain::sanitize::json_line(v)
}

/// The ordinary queues of a discovery (`queues --all`), after its dead-letter queues;
/// `vhost` names the vhost on each line when the scope is every vhost.
pub fn print_other_queues(d: &Discovery, json: bool, vhost: Option<&str>) {
    for q in &d.other_queues {
        // A retry loop's wait queue holds messages between tries: never a replay target.
        let kind = if d.retry_loops.iter().any(|l| l.wait_queue == q.name) {
            "wait"
        } else {
            "queue"
        };
        if json {
            let mut v = json!({"name": q.name, "kind": kind, "depth": q.depth, "queue_type": q.queue_type.as_str()});
            if let (Some(vh), Some(o)) = (vhost, v.as_object_mut()) {
                o.insert("vhost".into(), json!(vh));
            }
            print_line(&v);
        } else {
            let name = match vhost {
                Some(vh) => format!("{vh}/{}", q.name),
                None => q.name.clone(),
            };
            crate::outln!(
                "{:<40} {:<8} {:<12} {:>7}",
                one_line(&name, 40),
                kind,
                "",
                q.depth.map_or("?".into(), |d| d.to_string())
            );
        }
    }
}

/// Browses and explains, recording first-seen times.
async fn read_explained(
    c: &ConnArgs,
    s: &Session,
    queue: &str,
    limit: usize,
) -> Result<(Vec<Explained>, bool), Failure> {
    let page = read_with_consent(c, |consent| s.browse(queue, limit, consent)).await?;
    if let Some(note) = s.cost_note(queue, &page).await {
        crate::errln!("warren: {}", one_line(&note, 400));
    }
    // Every message the queue held when the read began: a look that can say a group is gone.
    let whole = matches!(page.stopped, crate::broker::browse::StopReason::Exhausted);
    let keys: Vec<String> = page
        .messages
        .iter()
        .map(crate::domain::identity::message_key)
        .collect();
    let seen = store_or_warn()
        .and_then(|st| {
            s.remember(&st, queue, &keys, jiff::Timestamp::now())
                .map_err(|e| crate::errln!("warren: {}", one_line(&e.to_string(), 600)))
                .ok()
        })
        .unwrap_or_default();
    match &page.stopped {
        crate::broker::browse::StopReason::QuorumSafety { reason, .. } => {
            crate::errln!("warren: stopped early: {}", one_line(reason, 600));
        }
        crate::broker::browse::StopReason::Idle
            if (page.messages.len() as u64) < page.queue_depth_at_start.min(limit as u64) =>
        {
            crate::errln!(
                "warren: read {} of the {} messages the queue held: the broker sent nothing more for {} s (another consumer may have taken them); run it again to read the rest",
                page.messages.len(),
                page.queue_depth_at_start,
                crate::broker::browse::DEFAULT_IDLE_TIMEOUT.as_secs()
            );
        }
        _ => {}
    }
    let explained = session::explain_all(
        session::into_messages(page),
        &seen,
        &s.target.settings.conventions,
    );
    super::triage::remember_head(s, queue, &explained, jiff::Timestamp::now());
    Ok((explained, whole))
}

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
    let (x, b) = tokio::join!(s.mgmt.exchanges(s.vhost()), s.mgmt.bindings(s.vhost()));
    Ok((
        x.map_err(|e| Failure::broker(e.to_string()))?,
        b.map_err(|e| Failure::broker(e.to_string()))?,
    ))
}

pub async fn show(
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
            &BTreeMap::new(),
            &HashMap::new(),
        );
        return Ok(exit::OK);
    }
    let queue = queue.ok_or_else(|| Failure::usage("name a queue or --snapshot FILE"))?;
    let s = open(c).await?;
    let messages = if queue == s.target.archive.stream {
        // The archive is read to its end, not to the management API's count, which lags behind
        // a stream just written; its messages carry their own headers back (see `archive`).
        let page = s
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
            &s.target.settings.conventions,
        )
    } else {
        read_explained(c, &s, queue, limit).await?.0
    };
    let (exchanges, bindings) = routes(&s).await?;
    let table = crate::domain::discovery::RoutingTable::new(&exchanges, &bindings);
    // Wait queues and the queue each returns messages to: a replay goes on there (the replay's
    // preflight decides per message; this is the preview).
    let waits: BTreeMap<String, String> = s
        .discover()
        .await
        .map_err(broker_failure)?
        .retry_loops
        .into_iter()
        .map(|l| (l.wait_queue, l.work_queue))
        .collect();
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
    );
    Ok(exit::OK)
}

/// Reads a snapshot file, with errors that name the file.
pub fn read_snapshot(file: &Path) -> Result<(SnapshotHeader, Vec<DeadLetter>), Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::usage(format!("cannot read snapshot {}: {e}", file.display())))?;
    snapshot::read(&text).map_err(|e| {
        Failure::usage(format!(
            "{} is not a readable Warren snapshot: {e}",
            file.display()
        ))
    })
}

pub(crate) fn parse_filter(f: Option<&str>) -> Result<Option<Filter>, Failure> {
    f.map(|q| Filter::parse(q).map_err(|e| Failure::usage(format!("--filter: {e}"))))
        .transpose()
}

/// Prints messages as `show` does; `route` says which queues a publish reaches.
pub fn print_messages(
    messages: &[Explained],
    json: bool,
    filter: Option<&Filter>,
    route: impl Fn(&str, &str) -> Vec<String>,
    waits: &BTreeMap<String, String>,
    authors: &HashMap<String, String>,
) {
    let now = jiff::Timestamp::now();
    let opts = crate::domain::replay::ReplayOptions {
        keep_attempts: false,
        clear_expiry: false,
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
        let plan = crate::domain::replay::plan(&e.message, x, &opts);
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
                let back = t.expected_queue.as_ref().and_then(|q| waits.get(q));
                crate::outln!(
                    "  replay → {} (exchange '{}', key '{}'){}",
                    one_line(t.expected_queue.as_deref().unwrap_or("?"), 80),
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
    waits: &BTreeMap<String, String>,
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
            "rests_in": t.expected_queue.as_ref().map(|q| waits.get(q).unwrap_or(q)),
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

/// Who the broker vouches archived a message of the archive stream (one read with its offset):
/// `None` for a local archive's, which is Warren's own file.
fn archive_vouch(m: &crate::domain::message::DeadLetter) -> Option<Result<String, &'static str>> {
    m.delivery
        .stream_offset
        .map(|_| crate::domain::archive::vouched_by(m))
}

/// How `warren groups` prints.
#[derive(Clone, Copy, Debug)]
pub struct GroupsOutput {
    pub json: bool,
    pub by: GroupBy,
}

pub async fn groups(
    c: &ConnArgs,
    queue: Option<&str>,
    snapshot: Option<&Path>,
    limit: usize,
    out: GroupsOutput,
    note: Option<(&str, &str)>,
) -> Result<i32, Failure> {
    let Some(file) = snapshot else {
        let queue = queue.ok_or_else(|| Failure::usage("name a queue or --snapshot FILE"))?;
        return groups_live(c, queue, limit, out, note).await;
    };
    let (_, messages) = read_snapshot(file)?;
    let messages = session::explain_all(
        messages.into_iter().take(limit).collect(),
        &session::Remembered::default(),
        &file_conventions(c)?,
    );
    print_groups(&messages, out, &WaitQueues::default(), &[]);
    Ok(exit::OK)
}

/// `warren groups QUEUE` on a broker: the groups with their notes; `--note` attaches one first.
/// A read of the whole queue forgets the notes of groups that are gone.
async fn groups_live(
    c: &ConnArgs,
    queue: &str,
    limit: usize,
    out: GroupsOutput,
    note: Option<(&str, &str)>,
) -> Result<i32, Failure> {
    let s = open(c).await?;
    // The endpoint is past a wait queue: the vhost's retry loops say which queues are.
    let waits = if out.by == GroupBy::Endpoint {
        WaitQueues::from_discovery(&s.discover().await.map_err(broker_failure)?)
    } else {
        WaitQueues::default()
    };
    let (messages, whole) = read_explained(c, &s, queue, limit).await?;
    if let Some((name, text)) = note {
        let key = messages
            .iter()
            .map(|e| grouping::group_key(out.by, &e.message, &e.explanation, &waits))
            .find(|k| k.named(name))
            .ok_or_else(|| {
                Failure::failed(format!(
                    "'{queue}' has no group '{}' by {} among the {} messages read; `warren groups {queue} --by {}` lists them",
                    one_line(name, 80),
                    out.by,
                    messages.len(),
                    out.by
                ))
            })?;
        let note = GroupNote {
            queue: queue.to_string(),
            by: out.by,
            key: key.key.clone(),
            text: grouping::note_text(text),
            author: store::current_os_user(),
            at: jiff::Timestamp::now(),
        };
        let (kept, warning) = s
            .set_group_note(&note)
            .await
            .map_err(|e| Failure::failed(e.to_string()))?;
        if let Some(w) = warning {
            crate::errln!("warren: {}", one_line(&w, 600));
        }
        crate::errln!(
            "warren: {} the note on group {} ({})",
            if kept { "kept" } else { "removed" },
            key.key,
            one_line(&key.summary, 120)
        );
    }
    let store = store_or_warn();
    let notes = match &store {
        Some(st) => {
            let notes = s.group_notes(st, queue).unwrap_or_else(|e| {
                crate::errln!("warren: {}", one_line(&e.to_string(), 600));
                Vec::new()
            });
            // Only a look at every message can say a group is gone.
            if whole && !notes.is_empty() {
                let pairs: Vec<grouping::Facets> = messages
                    .iter()
                    .map(|e| grouping::Facets::of(&e.message, &e.explanation))
                    .collect();
                let gone = grouping::notes_gone(&notes, &pairs, &waits);
                if !gone.is_empty()
                    && let Err(e) = s.forget_group_notes(st, &gone)
                {
                    crate::errln!("warren: {}", one_line(&e.to_string(), 600));
                }
                let gone: Vec<GroupNote> = gone.into_iter().cloned().collect();
                notes.into_iter().filter(|n| !gone.contains(n)).collect()
            } else {
                notes
            }
        }
        None => Vec::new(),
    };
    print_groups(&messages, out, &waits, &notes);
    Ok(exit::OK)
}

/// `warren protect QUEUE`: shows the policy that lifts the queue's delivery limit, asks, sets it.
pub async fn protect(c: &ConnArgs, queue: &str, dry_run: bool, yes: bool) -> Result<i32, Failure> {
    let s = open(c).await?;
    let plan = ops::protect::look(&s, queue).await.or_else(stopped_err)?;
    let def = serde_json::to_string(&plan.policy.definition).unwrap_or_default();
    crate::errln!(
        "{} policy '{}' on vhost '{}': pattern {} priority {} definition {}",
        if dry_run { "Would set" } else { "Set" },
        one_line(&plan.policy.name, 120),
        one_line(s.vhost(), 80),
        one_line(&plan.policy.pattern, 120),
        plan.policy.priority,
        one_line(&def, 400)
    );
    crate::errln!(
        "  delivery limit {} → unlimited{}",
        plan.limit_before.map_or("none".into(), |l| l.to_string()),
        plan.replaces.as_ref().map_or(String::new(), |p| format!(
            "; carries every key of policy '{}', which it outranks",
            one_line(p, 80)
        ))
    );
    if dry_run {
        return Ok(exit::OK);
    }
    ops::protect::admit(&s).await.or_else(stopped_err)?;
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(
                "not a terminal: pass --yes to set the policy without confirmation (or --dry-run to look)",
            ));
        }
        crate::err!("Set it? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err()
            || !matches!(line.trim(), "y" | "Y" | "yes")
        {
            crate::errln!("nothing changed");
            return Ok(exit::FAILED);
        }
    }
    let mut front = CliFront::new(c, yes, false);
    let (_, notes) = ops::protect::apply(&s, queue, &mut front)
        .await
        .or_else(stopped_err)?;
    crate::errln!(
        "protected: reading '{}' no longer spends deliveries",
        one_line(queue, 80)
    );
    for note in notes {
        crate::errln!("warren: {}", one_line(&note, 600));
    }
    Ok(exit::OK)
}

/// A stop as the command's failure (for steps that return a value when they go on).
fn stopped_err<T>(stop: ops::Stop) -> Result<T, Failure> {
    match stopped(stop) {
        Ok(code) => Err(Failure {
            code,
            message: "nothing changed".into(),
        }),
        Err(f) => Err(f),
    }
}

/// `warren export QUEUE -o FILE`: every message of the head of the queue, whole bodies.
pub async fn export(
    c: &ConnArgs,
    queue: &str,
    output: &Path,
    limit: usize,
) -> Result<i32, Failure> {
    let s = open(c).await?;
    let page = read_with_consent(c, |consent| {
        s.browse_with_cap(queue, limit, usize::MAX, consent)
    })
    .await?;
    let header = SnapshotHeader {
        queue: queue.to_string(),
        vhost: s.vhost().to_string(),
        exported_at: jiff::Timestamp::now().to_string(),
        source: format!("RabbitMQ {}", s.overview.rabbitmq_version),
    };
    let text = snapshot::write(&header, &page.messages);
    std::fs::write(output, text)
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", output.display())))?;
    crate::errln!(
        "exported {} message(s) from {} to {}",
        page.messages.len(),
        one_line(queue, 80),
        output.display()
    );
    if page.messages.len() as u64 > 0
        && (page.messages.len() as u64) < page.queue_depth_at_start
        && page.messages.len() < limit
    {
        crate::errln!(
            "warren: the queue held {} at the start; the rest could not be read safely",
            page.queue_depth_at_start
        );
        return Ok(exit::FAILED);
    }
    Ok(exit::OK)
}

/// `warren` with no command: the terminal UI on the configured broker.
pub async fn tui(c: &ConnArgs) -> Result<i32, Failure> {
    // Before any password command runs for a UI that cannot start.
    need_terminal()?;
    let prepared = prepare_tui(c)?;
    let unlock = prepared.overrides.clone();
    run_tui(
        Source::Broker(prepared.overrides),
        c.read_only,
        prepared.settings,
        prepared.commands,
        Some(unlock),
    )
    .await
}

/// What the terminal UI settles while the terminal is still the shell's.
#[derive(Debug)]
pub struct Prepared {
    /// What the worker connects with: it takes `password_command` answers from
    /// `overrides.unlocked` and never runs one itself.
    pub overrides: Overrides,
    pub settings: Option<config::Settings>,
    pub commands: Vec<crate::tui::custom::CustomCommand>,
}

/// Everything the terminal UI needs before it takes the terminal. The starting context's
/// `password_command` runs here: a password manager that prompts needs a normal terminal, and
/// the UI's raw mode and alternate screen would swallow its prompt and its keys. A context
/// first opened later with `:ctx` runs its command then, with the terminal handed back for it
/// (`tui::run`), rather than every context's at startup: an operator expects one prompt for the
/// context he opens, and a vault records each read of a production secret he did not ask for
/// (`--context '*'` asks for every one: each runs here, one after the other).
/// A configuration that does not load, or a password command that fails, is the worker's to
/// report on screen; a custom command's key that Warren already uses is refused here.
pub fn prepare_tui(c: &ConnArgs) -> Result<Prepared, Failure> {
    let mut o = overrides(c);
    let cfg = config::Config::read(o.config_path.as_deref()).ok();
    let commands = custom_commands(cfg.as_ref())?;
    let unlocked = config::Unlocked::default();
    match (o.context.as_deref(), &cfg) {
        // Every context at once, asked for on the command line: each context's command runs
        // here, in the file's order (the worker never runs one: a context left locked is shown
        // unreached, with how to open it).
        (Some(config::EVERY_CONTEXT), Some(cfg)) => {
            for name in cfg.every_context().unwrap_or_default() {
                let one = Overrides {
                    context: Some(name),
                    ..o.clone()
                };
                let _ = unlocked.unlock(&one);
            }
        }
        _ => {
            let _ = unlocked.unlock(&o);
        }
    }
    o.unlocked = Some(unlocked);
    Ok(Prepared {
        overrides: o,
        settings: cfg.and_then(|c| c.settings().ok()),
        commands,
    })
}

/// The config's `[[commands]]`, checked against the key table.
fn custom_commands(
    cfg: Option<&config::Config>,
) -> Result<Vec<crate::tui::custom::CustomCommand>, Failure> {
    let Some(cfg) = cfg else {
        return Ok(Vec::new());
    };
    crate::tui::custom::from_config(&cfg.commands).map_err(|e| {
        let path = cfg
            .path
            .as_ref()
            .map_or_else(|| "the config".to_string(), |p| p.display().to_string());
        Failure::usage(format!("{path}: {e}"))
    })
}

/// `warren open FILE`: the terminal UI on a snapshot, read-only.
pub async fn open_snapshot(c: &ConnArgs, files: &[std::path::PathBuf]) -> Result<i32, Failure> {
    let snapshots = files
        .iter()
        .map(|f| read_snapshot(f))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = config::Config::read(c.config.as_deref()).ok();
    let commands = custom_commands(cfg.as_ref())?;
    run_tui(Source::Snapshot(snapshots), true, None, commands, None).await
}

fn need_terminal() -> Result<(), Failure> {
    if std::io::stdout().is_terminal() {
        return Ok(());
    }
    Err(Failure::usage(
        "the terminal UI needs a terminal; for scripts use `warren queues`, `show` or `groups`",
    ))
}

async fn run_tui(
    source: Source,
    read_only: bool,
    settings: Option<config::Settings>,
    commands: Vec<crate::tui::custom::CustomCommand>,
    unlock: Option<Overrides>,
) -> Result<i32, Failure> {
    need_terminal()?;
    let (cmd_tx, cmd_rx) = tokio::sync::mpsc::channel(64);
    let (ev_tx, ev_rx) = tokio::sync::mpsc::channel(256);
    let worker = tokio::spawn(crate::worker::run(source, cmd_rx, ev_tx));
    let mut state = crate::tui::State::new(
        jiff::Timestamp::now(),
        read_only,
        crate::tui::Theme::from_env(),
    );
    state.custom_commands = commands;
    // [browse] and [replay] are the configuration file's, whichever context is open.
    if let Some(settings) = settings {
        state.browse_limit = settings.browse.page_size;
        state.conventions = settings.conventions;
        if let Some(rate) = settings.replay.rate {
            state.replay_rate = rate;
        }
    }
    let result = crate::tui::run::run(ev_rx, cmd_tx, state, unlock).await;
    // The UI dropped its sender: the worker settles any replay in flight and ends.
    let code =
        crate::tui::stop::settle(worker, crate::tui::run::stopped_by(&result), exit::OK).await;
    result
        .map(|_| code)
        .map_err(|e| Failure::failed(format!("{e:#}")))
}

/// `warren demo`.
pub async fn demo(c: &ConnArgs) -> Result<i32, Failure> {
    let mut o = overrides(c);
    let vhost = o.vhost.take().unwrap_or_else(|| "warren-demo".to_string());
    let (_, target) = config::load(&o).map_err(|e| Failure::usage(e.to_string()))?;
    // The demo builds through management and checks through AMQP: both must be one broker.
    if target.amqp_urls.is_empty() {
        return Err(Failure::usage(target.no_amqp_url()));
    }
    let mgmt = crate::broker::management::Management::new(&target)
        .map_err(|e| Failure::broker(e.to_string()))?;
    let overview = mgmt
        .overview()
        .await
        .map_err(|e| Failure::broker(e.to_string()))?;
    crate::broker::cluster::verify(&target.amqp_urls, &overview, mgmt.active_url())
        .await
        .map_err(Failure::broker)?;
    let report = crate::demo::build(&target, &vhost)
        .await
        .map_err(|e| Failure::broker(e.to_string()))?;
    crate::outln!("{report}");
    Ok(exit::OK)
}

/// One group of `warren groups`.
#[derive(Debug)]
pub struct Group<'a> {
    pub key: GroupKey,
    pub first: &'a Explained,
    pub count: u64,
    pub first_seen: Option<jiff::Timestamp>,
    pub last_seen: Option<jiff::Timestamp>,
}

/// Groups by `by`, largest first (ties by first appearance in the queue).
pub fn group<'a>(messages: &'a [Explained], by: GroupBy, waits: &WaitQueues) -> Vec<Group<'a>> {
    let keys = messages
        .iter()
        .map(|e| grouping::key_of(by, &e.message, &e.explanation, waits));
    let mut out: Vec<Group> = grouping::partition(keys)
        .into_iter()
        .filter_map(|(_, members)| {
            let first = messages.get(*members.first()?)?;
            let key = grouping::group_key(by, &first.message, &first.explanation, waits);
            let seen: Vec<jiff::Timestamp> = members
                .iter()
                .filter_map(|&i| messages.get(i)?.first_seen)
                .collect();
            Some(Group {
                key,
                first,
                count: members.len() as u64,
                first_seen: seen.iter().min().copied(),
                last_seen: seen.iter().max().copied(),
            })
        })
        .collect();
    // Stable: equal counts keep their first appearance.
    out.sort_by_key(|g| std::cmp::Reverse(g.count));
    out
}

pub fn print_groups(
    messages: &[Explained],
    out: GroupsOutput,
    waits: &WaitQueues,
    notes: &[GroupNote],
) {
    for g in group(messages, out.by, waits) {
        let x = &g.first.explanation;
        let note = notes.iter().find(|n| n.by == out.by && n.key == g.key.key);
        if out.json {
            print_line(&json!({
                "by": out.by.as_str(),
                "key": g.key.key,
                "value": g.key.value,
                // The fingerprint of the group's first message (the whole group's, by fingerprint).
                "fingerprint": x.fingerprint.key,
                "convention": x.convention.as_str(),
                "summary": g.key.summary,
                "count": g.count,
                "source_queue": x.source.queue,
                "first_seen": g.first_seen.map(|t| t.to_string()),
                "last_seen": g.last_seen.map(|t| t.to_string()),
                "note": note.map(|n| json!({
                    "text": n.text,
                    "author": n.author,
                    "at": n.at.to_string(),
                })),
            }));
        } else {
            crate::outln!(
                "{:>6}  {}  {:<12} {}  (from {})",
                g.count,
                one_line(&g.key.key, 40),
                x.convention.as_str(),
                one_line(&g.key.summary, CELL),
                one_line(x.source.queue.as_deref().unwrap_or("?"), 60)
            );
            if let Some(n) = note {
                crate::outln!(
                    "        note: {}  ({}, {})",
                    one_line(&n.text, CELL * 2),
                    one_line(&n.author, 40),
                    n.at.strftime("%Y-%m-%d %H:%M UTC")
                );
            }
        }
    }
}

/// `warren audit`: this machine's records and the broker stream's, merged (one line per run),
/// with what came back after each replay; says which records it could not reach.
pub async fn audit(
    c: &ConnArgs,
    json: bool,
    local_only: bool,
    limit: usize,
) -> Result<i32, Failure> {
    if local_only && let Err(e) = Store::open_default() {
        return Err(Failure::failed(e.to_string()));
    }
    let session = if local_only {
        Err("not asked (--local)".to_string())
    } else {
        open(c).await.map_err(|f| f.message)
    };
    let (merged, mut unreached) = audit::load(session.as_ref().map_err(Clone::clone), limit).await;
    if local_only {
        unreached.retain(|u| !u.starts_with("broker audit stream unreachable"));
    }
    let came_back = match &session {
        Ok(s) => {
            let (m, why) = audit::came_back(s, &merged.replays, consent(c)).await;
            unreached.extend(why);
            Some(m)
        }
        Err(_) => None,
    };

    for (r, seen) in &merged.replays {
        // Only runs of the vhost that was looked at have a count.
        let back = match (&session, &came_back) {
            (Ok(s), Some(m)) if audit::is_here(s, r) => r
                .run_id
                .as_ref()
                .map(|id| m.get(id).cloned().unwrap_or_default()),
            _ => None,
        };
        if json {
            let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
            v["kind"] = json!(r.operation.as_str());
            v["seen"] = json!(seen);
            v["came_back"] = json!(back.as_ref().map(|b| b.came_back));
            v["top_failure"] = json!(back.as_ref().and_then(|b| b.top_failure.clone()));
            v["top_failure_count"] = json!(back.as_ref().map(|b| b.top_failure_count));
            print_line(&v);
        } else {
            crate::outln!(
                "{} {} {} {}@{} {} {} → {}  moved {} returned {} failed {}  {}{}{}  [{}]",
                r.id.map_or("-".to_string(), |n| format!("#{n}")),
                r.operation.as_str(),
                r.started_at,
                one_line(&r.os_user, 30),
                one_line(&r.broker_user, 30),
                one_line(&r.vhost, 30),
                one_line(&r.from_queue, 60),
                one_line(&r.targets.join(", "), 80),
                r.moved.map_or("-".into(), |n| n.to_string()),
                r.returned.map_or("-".into(), |n| n.to_string()),
                r.failed.map_or("-".into(), |n| n.to_string()),
                one_line(&r.outcome, 80),
                if r.clear_expiry {
                    "  (--clear-expiry: passed deadlines removed)"
                } else {
                    ""
                },
                match &back {
                    Some(b) if b.came_back > 0 => format!(
                        "  came back {}{}",
                        b.came_back,
                        b.top_failure.as_ref().map_or(String::new(), |t| format!(
                            " (most: {} ×{})",
                            one_line(t, 80),
                            b.top_failure_count
                        ))
                    ),
                    Some(_) => "  came back 0".to_string(),
                    None => String::new(),
                },
                seen_text(*seen),
            );
            if let Some(id) = &r.run_id {
                crate::outln!("    run {}", one_line(id, 64));
            }
        }
    }
    for (p, seen) in &merged.protects {
        if json {
            let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
            v["kind"] = json!("protect");
            v["seen"] = json!(seen);
            print_line(&v);
        } else {
            crate::outln!(
                "protect {} {}@{} {} {}  policy {}  delivery limit {} → {}  [{}]",
                p.at,
                one_line(&p.os_user, 30),
                one_line(&p.broker_user, 30),
                one_line(&p.vhost, 30),
                one_line(&p.queue, 60),
                one_line(&p.policy, 80),
                p.limit_before.map_or("none".into(), |l| l.to_string()),
                p.limit_after.map_or("unlimited".into(), |l| l.to_string()),
                seen_text(*seen),
            );
        }
    }
    for n in &merged.notes {
        let note = &n.note;
        if json {
            let mut v = serde_json::to_value(note).unwrap_or(Value::Null);
            v["kind"] = json!("note");
            v["event"] = json!(n.event);
            v["seen"] = json!({"local": false, "broker": true});
            print_line(&v);
        } else {
            crate::outln!(
                "note {} {} {}@{} {} {}  {} {}: {}  [broker]",
                n.event,
                note.at,
                one_line(&note.author, 30),
                one_line(&note.broker_user, 30),
                one_line(&note.vhost, 30),
                one_line(&note.queue, 60),
                one_line(&note.by, 20),
                one_line(&note.key, 80),
                if note.text.is_empty() {
                    "(removed)".to_string()
                } else {
                    one_line(&note.text, 200)
                },
            );
        }
    }
    for v in &merged.other {
        if json {
            let mut v = v.clone();
            v["seen"] = json!({"local": false, "broker": true});
            print_line(&v);
        } else {
            crate::outln!(
                "{} {} {} (an operation this warren does not know)",
                one_line(v["kind"].as_str().unwrap_or("?"), 30),
                one_line(v["at"].as_str().unwrap_or("?"), 40),
                one_line(v["run_id"].as_str().unwrap_or("?"), 64),
            );
        }
    }
    if merged.replays.is_empty()
        && merged.protects.is_empty()
        && merged.notes.is_empty()
        && merged.other.is_empty()
        && !json
    {
        crate::outln!("nothing recorded");
    }
    for why in &unreached {
        crate::errln!("warren: {}", one_line(why, 600));
        if json {
            print_line(&json!({"kind": "unreached", "text": why}));
        }
    }
    Ok(exit::OK)
}

fn seen_text(seen: store::Seen) -> &'static str {
    match (seen.local, seen.broker, seen.unvouched) {
        (false, _, true) => "broker, UNVOUCHED: not signed by the broker user it names",
        (true, true, _) => "local+broker",
        (true, false, _) => "local",
        (false, true, _) => "broker",
        (false, false, _) => "?",
    }
}

pub(crate) fn print_preview(p: &Preview, spec: &ReplaySpec, dry_run: bool) {
    for line in p.describe(spec, dry_run) {
        crate::errln!("{line}");
    }
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

/// `--group` and `--filter` as a selection (both must hold); neither: all.
/// The selection `--group` (under `--by`) and `--filter` name, as replay, archive, restore and
/// discard take it.
pub(crate) async fn selection_of(
    s: &Session,
    group: Option<&str>,
    by: GroupBy,
    filter: Option<Filter>,
) -> Result<Selection, Failure> {
    let mut parts = Vec::new();
    if let Some(g) = group {
        // The endpoint is past a wait queue: the vhost's retry loops say which queues are.
        let waits = if by == GroupBy::Endpoint {
            WaitQueues::from_discovery(&s.discover().await.map_err(broker_failure)?)
        } else {
            WaitQueues::default()
        };
        parts.push(Selection::Group(GroupChoice {
            by,
            name: g.to_string(),
            waits,
        }));
    }
    if let Some(f) = filter {
        parts.push(Selection::Filter(f));
    }
    Ok(match parts.len() {
        0 => Selection::All,
        1 => parts.remove(0),
        _ => Selection::AllOf(parts),
    })
}

/// Asks on the terminal whether to `verb` them: typing the count when `typed`, else y/N.
pub(crate) fn confirm_to(count: u64, verb: &str, typed: bool) -> bool {
    let prompt = if typed {
        format!("Type {count} to {verb} them: ")
    } else {
        let mut v = verb.to_string();
        if let Some(first) = v.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        format!("{v} them? [y/N] ")
    };
    crate::err!("{prompt}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    let answer = line.trim();
    if typed {
        answer == count.to_string()
    } else {
        matches!(answer, "y" | "Y" | "yes")
    }
}

pub async fn replay(c: &ConnArgs, a: &ReplayArgs) -> Result<i32, Failure> {
    let filter = parse_filter(a.pick.filter.as_deref())?;
    if let Some(r) = a.rate
        && !(r.is_finite() && r > 0.0)
    {
        return Err(Failure::usage(
            "--rate must be a positive number of messages per second",
        ));
    }
    let s = open(c).await?;
    let selection = selection_of(&s, a.pick.group.as_deref(), a.pick.by, filter.clone()).await?;
    let spec = ReplaySpec {
        queue: a.queue.clone(),
        selection,
        limit: a.pick.limit,
        rate: a.rate.or(s.target.settings.replay.rate.map(f64::from)),
        to: a.to.clone(),
        allow_fan_out: a.allow_fan_out,
        keep_attempts: a.keep_attempts,
        clear_expiry: a.clear_expiry,
        window: a.pick.window.unwrap_or(s.target.settings.replay.window),
        consent: consent(c),
        run_id: None,
    };
    let req = ops::replay::ReplayRequest {
        spec,
        dry_run: a.dry_run,
        look_first: false,
        unaudited: a.no_audit.then(|| "--no-audit".to_string()),
        filter: filter.as_ref().map(|f| f.to_string()),
        group: a.pick.group.as_ref().map(|g| {
            GroupChoice {
                by: a.pick.by,
                name: g.clone(),
                waits: WaitQueues::default(),
            }
            .audit_label()
        }),
    };
    let mut front = CliFront::new(c, a.yes, a.json).of(&s);
    let mut ready = match ops::replay::prepare(&s, req, &mut front).await {
        Ok(r) => r,
        Err(stop) => return stopped(stop),
    };
    let result = drive(a.json, |cancel_rx, on_progress| {
        ready.run(cancel_rx, on_progress)
    })
    .await;
    let notes = ready.finish(&result).await;
    report_run(result, notes, a.json)
}

/// An operation that stopped before anything moved, as the command's exit.
pub(crate) fn stopped(stop: ops::Stop) -> Result<i32, Failure> {
    match stop {
        ops::Stop::DryRun => Ok(exit::OK),
        // The front end said "nothing moved" when the operator said no.
        ops::Stop::Declined => Ok(exit::FAILED),
        ops::Stop::Refused(why) => Err(Failure::failed(why)),
        ops::Stop::Usage(why) => Err(Failure::usage(why)),
        ops::Stop::Broker(why) => Err(Failure::broker(why)),
        ops::Stop::ReadCost { queue, text } => {
            Err(broker_failure(SessionError::NeedsConsent { queue, text }))
        }
    }
}

/// Runs one engine job (`start` is given the cancel signal and the progress reporter) with
/// progress on stderr, or as JSON lines: the first signal settles (the engine bounds that); a
/// second one ends the run at once; if even that does not return soon, the run is reported
/// from what the progress knew, marked as forced.
pub(crate) async fn drive<F, Fut>(json: bool, start: F) -> Result<Summary, SessionError>
where
    F: FnOnce(tokio::sync::watch::Receiver<bool>, Box<dyn FnMut(&Progress) + Send>) -> Fut,
    Fut: std::future::Future<Output = Result<Summary, SessionError>>,
{
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let mut signals = signals();
    let last = std::sync::Arc::new(std::sync::Mutex::new(Progress::default()));
    let seen = last.clone();
    let run = start(
        cancel_rx,
        Box::new(move |p: &Progress| {
            let was = seen
                .lock()
                .map(|mut l| std::mem::replace(&mut *l, p.clone()).blocked)
                .unwrap_or_default();
            if was != p.blocked {
                match (&p.blocked, json) {
                    (Some(why), true) => print_line(&json!({"event": "blocked", "reason": why})),
                    (None, true) => print_line(&json!({"event": "unblocked"})),
                    (Some(why), false) => crate::errln!(
                        "\n  broker blocked publishing ({}): waiting; Ctrl-C to stop",
                        one_line(why, 200)
                    ),
                    (None, false) => crate::errln!("\n  broker unblocked publishing: going on"),
                }
            }
            if json {
                print_line(
                    &json!({"event": "progress", "moved": p.moved, "returned": p.returned, "failed": p.failed, "remaining": p.remaining, "rate": p.rate, "eta_secs": p.eta.map(|d| d.as_secs()), "blocked": p.blocked}),
                );
            } else {
                crate::err!(
                    "\r  moved {}  returned {}  failed {}  remaining {}  {:.0}/s  ETA {}   ",
                    p.moved,
                    p.returned,
                    p.failed,
                    p.remaining,
                    p.rate,
                    p.eta.map_or("-".into(), |d| format!("{}s", d.as_secs()))
                );
            }
        }),
    );
    tokio::pin!(run);
    let mut count = 0;
    let mut backstop: Option<tokio::time::Instant> = None;
    let result = loop {
        tokio::select! {
            r = &mut run => break Some(r),
            Some(name) = signals.recv() => {
                count += 1;
                if count == 1 {
                    crate::errln!("\nstopping ({name}): settling what is in flight (at most a few seconds); {name} again stops at once");
                } else {
                    crate::errln!("\nstopping now ({name}): unacknowledged messages go back to the dead-letter queue when the connection closes");
                    backstop.get_or_insert(tokio::time::Instant::now() + FORCE_GRACE);
                }
                let _ = cancel_tx.send(true);
            }
            () = async { match backstop { Some(b) => tokio::time::sleep_until(b).await, None => std::future::pending().await } } => break None,
        }
    };
    if !json {
        crate::errln!();
    }
    result.unwrap_or_else(|| {
        let p = last.lock().map(|p| p.clone()).unwrap_or_default();
        Ok(unreported_run(p))
    })
}

/// Says what the record could not keep, prints the summary and gives the exit code of an
/// engine run (replay, archive, discard).
pub(crate) fn report_run(
    result: Result<Summary, SessionError>,
    notes: Vec<String>,
    json: bool,
) -> Result<i32, Failure> {
    for note in notes {
        crate::errln!("warren: {}", one_line(&note, 600));
    }
    match result {
        Ok(sum) => {
            let (outcome, code) = replay_outcome(&sum);
            print_summary(&sum, json, &outcome);
            if sum.counts.forced.is_some() {
                // Nothing waits on a broker that may not answer: the connections drop here and
                // the broker returns their unacknowledged deliveries to the queue.
                std::process::exit(code);
            }
            Ok(code)
        }
        Err(e) => Err(broker_failure(e)),
    }
}

/// A run that did not report back after the second signal, from its last progress: every
/// moved message may also still be in the DLQ, and which ones moved is not known.
fn unreported_run(p: crate::broker::replay::Progress) -> crate::broker::replay::Summary {
    crate::broker::replay::Summary {
        counts: crate::domain::engine::Tally {
            moved: p.moved,
            returned: p.returned,
            failed: p.failed,
            duplicated: p.moved,
            forced: Some(
                "stopped at once by a second signal; message ids unknown (the run did not report them in time)"
                    .into(),
            ),
            ..Default::default()
        },
        moved_ids: Default::default(),
        progress: p,
        depth_at_start: 0,
        replayed_before: 0,
        planned_unread: false,
        left_in_dlq: None,
        held_elsewhere: 0,
        stop: crate::broker::replay::StopReason::Cancelled,
        reconnected: Vec::new(),
    }
}

/// How long after a second signal the run may take to return before the process ends anyway.
const FORCE_GRACE: Duration = Duration::from_secs(3);

/// Ctrl-C, SIGTERM and SIGHUP, each as its name, for as long as the receiver lives.
pub(crate) fn signals() -> tokio::sync::mpsc::UnboundedReceiver<&'static str> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                while tokio::signal::ctrl_c().await.is_ok() {
                    if tx.send("Ctrl-C").is_err() {
                        return;
                    }
                }
                return;
            };
            loop {
                let name = tokio::select! {
                    r = tokio::signal::ctrl_c() => match r { Ok(()) => "Ctrl-C", Err(_) => return },
                    _ = term.recv() => "SIGTERM",
                    _ = hup.recv() => "SIGHUP",
                };
                if tx.send(name).is_err() {
                    return;
                }
            }
        }
        #[cfg(not(unix))]
        while tokio::signal::ctrl_c().await.is_ok() {
            if tx.send("Ctrl-C").is_err() {
                return;
            }
        }
    });
    rx
}

/// The audit outcome and the exit code of a finished run: 0 only for "completed" (see
/// [`Summary::outcome`](crate::broker::replay::Summary::outcome)); every other ending left
/// selected messages behind and exits 1.
pub fn replay_outcome(sum: &crate::broker::replay::Summary) -> (String, i32) {
    let text = sum.outcome();
    let code = if sum.completed() {
        exit::OK
    } else {
        exit::FAILED
    };
    (text, code)
}

pub(crate) fn preview_json(p: &Preview, spec: &ReplaySpec) -> Value {
    let targets: BTreeMap<&String, Value> = p
        .targets
        .iter()
        .map(|(k, t)| (k, json!({"exchange": t.exchange, "routing_key": t.routing_key, "count": t.count, "queues": t.reaches, "exact": t.exact, "rests_in": t.rests_in, "via_wait_queues": t.via})))
        .collect();
    json!({
        "event": "plan",
        "queue": p.queue,
        "selected": p.selected,
        "matched": p.matched,
        "examined": p.examined,
        "unread": p.unread,
        "checked_as_met": p.checked_as_met,
        "depth": p.depth,
        "targets": targets,
        "removes": p.removed,
        "resets": p.reset,
        "adds": p.added,
        "attempts_not_reset": p.attempts_not_reset,
        "surviving_counters": p.surviving_counters,
        "expired": p.expired.values().sum::<u64>(),
        "expired_stay": if spec.clear_expiry { 0 } else { p.expired.values().sum::<u64>() },
        "clear_expiry": spec.clear_expiry,
        "notices": p.notices,
        "replayed_before": p.replayed_before,
        "warnings": p.warnings,
        "refusals": p.refusals,
    })
}

fn print_summary(sum: &crate::broker::replay::Summary, json: bool, outcome: &str) {
    let p = &sum.progress;
    if json {
        print_line(&json!({
            "event": "summary",
            "moved": p.moved,
            "returned": p.returned,
            "failed": p.failed,
            "remaining": p.remaining,
            "left_in_dlq": sum.left_in_dlq,
            "held_elsewhere": sum.held_elsewhere,
            "held_back": sum.counts.held_back,
            "kept": sum.counts.kept,
            "targets": sum.counts.targets,
            "problems": sum.counts.problems,
            "duplicated": sum.counts.duplicated,
            "duplicated_certain": sum.counts.duplicated_certain,
            "duplicate_ids": sum.counts.duplicate_ids,
            "stop": sum.stop.to_string(),
            "forced": sum.counts.forced,
            "reconnected": sum.reconnected,
            "replayed_before": sum.replayed_before,
            "outcome": outcome,
        }));
        return;
    }
    crate::errln!(
        "moved {}, returned {}, failed {}, remaining {}",
        p.moved,
        p.returned,
        p.failed,
        p.remaining
    );
    for (t, n) in &sum.counts.targets {
        crate::errln!("  {n:>6} → {}", one_line(t, 120));
    }
    for (why, n) in &sum.counts.problems {
        crate::errln!("  ! {n} × {}", one_line(why, 300));
    }
    for (why, n) in &sum.counts.kept {
        crate::errln!("  kept {n} × {}", one_line(why, 300));
    }
    if sum.replayed_before > 0 {
        crate::errln!(
            "  ! {} of them were replayed before and failed again",
            sum.replayed_before
        );
    }
    if sum.counts.duplicated > 0 {
        if sum.counts.duplicated == sum.counts.duplicated_certain {
            crate::errln!(
                "  ! {} message(s) reached their target but were not acknowledged in the DLQ: they are in both places now",
                sum.counts.duplicated
            );
        } else {
            crate::errln!(
                "  ! up to {} message(s) may be in both the target and the DLQ ({} certainly): they reached the target or may have, and their removal from the DLQ was not confirmed",
                sum.counts.duplicated,
                sum.counts.duplicated_certain
            );
        }
    }
    for why in &sum.reconnected {
        crate::errln!(
            "  ! reconnected to the next node after: {}",
            one_line(why, 300)
        );
    }
    if let Some(why) = &sum.counts.forced {
        crate::errln!(
            "  ! {}: unacknowledged messages go back to the dead-letter queue when the connection closes",
            one_line(why, 300)
        );
    }
    crate::errln!("{}", one_line(&sum.stop.to_string(), 600));
    if !crate::domain::outcome::RunOutcome::parse(outcome).is_completed() {
        crate::errln!("{}", one_line(outcome, 600));
    }
}
