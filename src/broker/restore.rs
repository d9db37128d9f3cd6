//! Restore: archived messages back into the dead-letter queue each came from, or replayed
//! straight to where they failed. One implementation for `warren restore` and the TUI's worker:
//! read the archive, choose what was not restored before (`domain::archive::choose_for_restore`),
//! strip the archive's headers, group by origin and check the targets exist (or go through the
//! replay's plan and preview), publish through the replay engine (confirms, returns, deadlines,
//! cancel) and remember the confirmed messages as the engine acknowledges them. The callers put
//! the run on the record (the CLI's `OnRecord`, the worker's `Recorded`) and say what happened.

use std::collections::{BTreeMap, HashMap};

use tokio::sync::watch;

use super::archive::{self as keep, Place, Publish};
use super::replay::{self, Action, Job};
use super::session::{self, Explained, Preview, ReadConsent, ReplaySpec, Session};
use crate::domain::archive;
use crate::domain::engine::Decision;
use crate::domain::message::DeadLetter;
use crate::domain::sanitize::one_line;
use crate::domain::selection::Selection;
use crate::store::{AuditOutcome, Store};

/// What the archive held as read: each message with its reference (the stream offset or the
/// file's message index, and its content digest: a stream recreated under the same name starts
/// its offsets again), and how many entries of a local archive had expired and were dropped.
#[derive(Debug, Default)]
pub struct ArchiveRead {
    pub messages: Vec<(String, DeadLetter)>,
    pub expired: u64,
    /// The window was filled: later archived messages were not looked at.
    pub window_full: bool,
    /// The broker stopped delivering before the archive's end: what follows was not looked at.
    pub cut_short: bool,
    /// What the read found that the caller must say (a torn line read past), in words.
    pub notes: Vec<String>,
}

/// Every message of the archive at `place` (up to `window`). A local archive's expired entries
/// (older than the context's `archive_max_age`) are dropped from the file first.
pub async fn read_archive(
    s: &Session,
    place: &Place,
    window: usize,
) -> Result<ArchiveRead, String> {
    let mut cut_short = false;
    let mut notes = Vec::new();
    let (messages, expired) = match place {
        Place::Stream(name) => {
            let page = s
                .handle
                .browse_archive(name, window)
                .await
                .map_err(|e| e.to_string())?;
            cut_short = page.stopped == crate::broker::browse::StopReason::Idle;
            (session::into_messages(page), 0)
        }
        Place::Local(path, _) => {
            let read = keep::read_local_all(path, &s.handle.target.archive.max_age)?;
            notes.extend(read.torn);
            let mut messages = read.messages;
            messages.truncate(window);
            (messages, read.expired)
        }
    };
    let messages = references(messages);
    let window_full = messages.len() >= window;
    if !window_full && !cut_short {
        let held = held_keys(&messages).collect();
        notes.extend(missing_from_record(s, place, &held));
    }
    Ok(ArchiveRead {
        window_full,
        cut_short,
        messages,
        expired,
        notes,
    })
}

/// How many runs of this machine's record are looked at for what they archived.
const RECORD_RUNS: usize = 1_000;

/// What this machine's record says was archived into the stream at `place` within the
/// archive's retention (`archive_max_age`) and the stream no longer holds (`held`: the
/// [`archive::archived_key`] of every message in it, read to its end), in words; `None` when
/// it holds all of it. A stream drops only what its retention drops, so what is missing was
/// dropped by a retention other than the one promised, or the stream was deleted.
pub fn missing_from_record(
    s: &Session,
    place: &Place,
    held: &std::collections::HashSet<String>,
) -> Option<String> {
    let Place::Stream(name) = place else {
        return None;
    };
    let secs = archive::max_age_secs(&s.handle.target.archive.max_age)?;
    let since = jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_secs(i64::try_from(secs).ok()?))
        .ok()?;
    let records = Store::open_default()
        .and_then(|st| st.list_audit(RECORD_RUNS))
        .ok()?;
    let label = place.label();
    let runs: Vec<_> = records
        .into_iter()
        .filter(|r| {
            r.operation == crate::domain::run::RunKind::Archive
                && r.context == s.handle.target.context
                && r.vhost == s.vhost()
                && r.targets.contains(&label)
                && r.started_at >= since
        })
        .collect();
    let recorded: std::collections::HashSet<&String> =
        runs.iter().flat_map(|r| &r.message_ids).collect();
    let missing = recorded.iter().filter(|k| !held.contains(**k)).count();
    if missing == 0 {
        return None;
    }
    let latest = runs.iter().map(|r| r.started_at).max()?;
    Some(format!(
        "the record says {} message(s) were archived into stream '{}' from this machine within archive_max_age ({}; {} run(s), the latest at {latest}); {missing} of them are no longer in it: something other than that retention dropped them (a byte limit or a shorter max-age on the stream, by argument or policy, or the stream deleted). They cannot be restored from it",
        recorded.len(),
        one_line(name, 100),
        one_line(&s.handle.target.archive.max_age, 20),
        runs.len()
    ))
}

/// The keys of the archived messages of `messages`, for [`missing_from_record`].
fn held_keys<'a>(
    messages: impl IntoIterator<Item = &'a (String, DeadLetter)>,
) -> impl Iterator<Item = String> {
    messages.into_iter().map(|(_, m)| archive::archived_key(m))
}

/// Explains archived messages as `show` explains a DLQ's.
pub fn explain(s: &Session, messages: Vec<(String, DeadLetter)>) -> Vec<(String, Explained)> {
    let (refs, msgs): (Vec<String>, Vec<DeadLetter>) = messages.into_iter().unzip();
    let explained = session::explain_all(
        msgs,
        &session::Remembered::default(),
        &s.handle.target.settings.conventions,
    );
    refs.into_iter().zip(explained).collect()
}

/// Whether `selection` (and `from`, the queue it was archived from) takes an archived message.
pub fn selects<'a>(
    selection: &'a Selection,
    from: Option<&'a str>,
) -> impl Fn(&Explained) -> bool + 'a {
    let now = jiff::Timestamp::now();
    move |e: &Explained| {
        from.is_none_or(|f| archive::restore_target(&e.message).as_deref() == Some(f))
            && selection.selects(
                &e.message,
                &e.explanation,
                &e.key,
                session::age_secs(e, now),
            )
    }
}

/// What a restore is asked to take.
#[derive(Clone, Debug)]
pub struct Ask {
    pub selection: Selection,
    /// Only what was archived from this queue.
    pub from: Option<String>,
    pub limit: Option<u64>,
    /// Restore again what was restored before.
    pub again: bool,
}

/// What a restore takes, and how many matching messages were restored before (left out unless
/// the restore is asked to take them again).
#[derive(Debug, Default)]
pub struct Chosen {
    pub messages: Vec<(String, Explained)>,
    pub restored_before: u64,
}

/// Chooses, among what the archive held, what `ask` takes (see
/// `domain::archive::choose_for_restore`), by what `store` remembers under `key`.
pub fn choose(
    s: &Session,
    st: &Store,
    key: &str,
    messages: Vec<(String, DeadLetter)>,
    ask: &Ask,
) -> Result<Chosen, String> {
    let refs: Vec<String> = messages.iter().map(|(r, _)| r.clone()).collect();
    let before = st.restored_among(key, &refs).map_err(|e| e.to_string())?;
    let (messages, restored_before) = archive::choose_for_restore(
        explain(s, messages),
        &before,
        ask.again,
        ask.limit,
        selects(&ask.selection, ask.from.as_deref()),
    );
    Ok(Chosen {
        messages,
        restored_before,
    })
}

/// What a restore's read of the archive found: what it takes, and what the read saw.
#[derive(Debug, Default)]
pub struct ChosenRead {
    pub chosen: Chosen,
    /// Entries of a local archive that had expired and were dropped first.
    pub expired: u64,
    /// The broker stopped delivering before the archive's end: what follows was not looked at.
    pub cut_short: bool,
    /// The restore took as many as one run takes (`cap`) and more match: a second restore takes
    /// the next ones (those restored are remembered and left out).
    pub capped: bool,
    /// Archived messages looked at.
    pub scanned: u64,
    /// What the read found that the caller must say (a torn line read past), in words.
    pub notes: Vec<String>,
    /// Chosen messages of the archive stream the broker does not vouch for, by why (see
    /// `domain::archive::vouched_by`): refused unless the operator trusts them
    /// ([`unvouched_refusal`]).
    pub unvouched: BTreeMap<String, u64>,
}

/// Why a restore does not go ahead with archived messages the broker does not vouch for
/// (`Err`), or what it says when told to trust them anyway (`trust`, `--trust-unsigned`).
/// Anyone with write access to the archive stream can publish into it a message that names a
/// live queue in `warren-archived-from`; what Warren archives carries, as its `user_id`, the
/// broker user who archived it, which the broker refuses from anyone else.
pub fn unvouched_refusal(
    unvouched: &BTreeMap<String, u64>,
    trust: bool,
) -> Result<Option<String>, String> {
    let n: u64 = unvouched.values().sum();
    if n == 0 {
        return Ok(None);
    }
    let why = unvouched
        .iter()
        .map(|(why, k)| format!("{k} × {why}"))
        .collect::<Vec<_>>()
        .join(", ");
    if trust {
        return Ok(Some(format!(
            "{n} archived message(s) the broker does not vouch for ({why}) are restored as --trust-unsigned asks"
        )));
    }
    Err(format!(
        "{n} of the chosen archived message(s) carry no user id the broker vouched for as their archiver ({why}): anyone with write access to the archive stream could have put them there, or they were archived before Warren signed its archive. Look at them with `warren archive list`; leave them out with --filter, or pass --trust-unsigned to restore them anyway"
    ))
}

/// Counts the chosen messages of the archive stream the broker does not vouch for.
fn count_unvouched(out: &mut ChosenRead) {
    for (_, e) in &out.chosen.messages {
        if let Err(why) = archive::vouched_by(&e.message) {
            *out.unvouched.entry(why.to_string()).or_insert(0) += 1;
        }
    }
}

/// How many archived messages are held at once while a restore looks through the archive.
const RESTORE_PAGE: usize = 1_000;

/// Looks through the whole archive at `place`, a page at a time from its oldest message to where
/// it ends now, and chooses what `ask` takes (as [`choose`] does), at most `cap` in one run: a
/// busy archive holds more than a window, and what was archived last must be reachable too. Only
/// the chosen messages and one page are held. `on_page` hears how many were read so far.
pub async fn read_and_choose(
    s: &Session,
    // `&mut`: a store is not `Sync`, and this future must be `Send` (the worker spawns it).
    st: &mut Store,
    key: &str,
    place: &Place,
    ask: &Ask,
    cap: usize,
    on_page: &mut (dyn FnMut(u64) + Send),
) -> Result<ChosenRead, String> {
    let cap = cap.max(1) as u64;
    let mut out = ChosenRead::default();
    let mut take = |st: &Store, out: &mut ChosenRead, page| {
        let done = take_page(s, st, key, ask, cap, out, page);
        on_page(out.scanned);
        done
    };
    match place {
        Place::Stream(name) => {
            let tail = s
                .handle
                .archive_tail(name)
                .await
                .map_err(|e| e.to_string())?;
            let mut from = None;
            // Every message's key, while the read goes through the whole stream.
            let mut held = Some(std::collections::HashSet::new());
            loop {
                let page = s
                    .handle
                    .browse_archive_range(name, from, tail, RESTORE_PAGE)
                    .await
                    .map_err(|e| e.to_string())?;
                let idle = page.stopped == crate::broker::browse::StopReason::Idle;
                let last = page
                    .messages
                    .iter()
                    .filter_map(|m| m.delivery.stream_offset)
                    .max();
                let messages = references(session::into_messages(page));
                if messages.is_empty() {
                    out.cut_short = idle;
                    break;
                }
                if let Some(h) = held.as_mut() {
                    h.extend(held_keys(&messages));
                }
                if take(st, &mut out, messages)? {
                    held = None;
                    break;
                }
                if idle {
                    out.cut_short = true;
                    break;
                }
                match (last, tail) {
                    (Some(l), Some(t)) if l < t => from = Some(l + 1),
                    _ => break,
                }
            }
            if let Some(held) = held.filter(|_| !out.cut_short) {
                out.notes.extend(missing_from_record(s, place, &held));
            }
            // A local archive is Warren's own file; a stream takes publishes from anyone
            // allowed to write to it.
            count_unvouched(&mut out);
        }
        Place::Local(path, _) => {
            let read = keep::read_local_all(path, &s.handle.target.archive.max_age)?;
            out.expired = read.expired;
            out.notes.extend(read.torn);
            for page in local_pages(read.messages) {
                if take(st, &mut out, page)? {
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// Chooses among one page of the archive (one more than is taken, so a full run knows whether
/// more match); true once the restore has what it takes.
fn take_page(
    s: &Session,
    st: &Store,
    key: &str,
    ask: &Ask,
    cap: u64,
    out: &mut ChosenRead,
    page: Vec<(String, DeadLetter)>,
) -> Result<bool, String> {
    let wanted = ask.limit.unwrap_or(u64::MAX);
    out.scanned += page.len() as u64;
    let taken = out.chosen.messages.len() as u64;
    let room = wanted.min(cap).saturating_sub(taken);
    let probe = if wanted > cap { room + 1 } else { room };
    let ask = Ask {
        limit: Some(probe),
        ..ask.clone()
    };
    let part = choose(s, st, key, page, &ask)?;
    out.chosen.restored_before += part.restored_before;
    out.chosen.messages.extend(part.messages);
    if out.chosen.messages.len() as u64 > cap {
        out.chosen.messages.truncate(cap as usize);
        out.capped = true;
    }
    Ok(out.capped || out.chosen.messages.len() as u64 >= wanted)
}

/// A local archive's messages (numbered by their place in the file), a page at a time.
fn local_pages(messages: Vec<DeadLetter>) -> Vec<Vec<(String, DeadLetter)>> {
    let mut pages = Vec::new();
    let mut it = messages.into_iter().peekable();
    while it.peek().is_some() {
        pages.push(references(it.by_ref().take(RESTORE_PAGE).collect()));
    }
    pages
}

/// Each archived message with its reference: the stream offset (or the file's message index)
/// and its content digest, since a stream recreated under the same name starts its offsets
/// again.
fn references(messages: Vec<DeadLetter>) -> Vec<(String, DeadLetter)> {
    messages
        .into_iter()
        .map(|m| {
            let at = m.delivery.stream_offset.unwrap_or(m.position);
            (format!("{at}:{:016x}", archive::content_digest(&m)), m)
        })
        .collect()
}

/// Why nothing is restored when nothing was chosen.
pub fn nothing_chosen(place: &Place, restored_before: u64) -> String {
    if restored_before > 0 {
        format!(
            "every matching message was restored before ({restored_before}); --again restores them again"
        )
    } else {
        format!("no archived message in the {} matches", place.label())
    }
}

/// A restore worked out: what is published where. Nothing is published while `refused` holds
/// anything.
#[derive(Debug, Default)]
pub struct Plan {
    pub items: Vec<Publish>,
    /// Where they go, with how many each: the DLQs (back), or the replay's targets.
    pub targets: BTreeMap<String, u64>,
    /// Why the restore cannot go ahead.
    pub refused: Vec<String>,
    /// Messages the replay's plan keeps in the archive, by why.
    pub kept: BTreeMap<String, u64>,
    /// The message key of each reference (the audit's message ids).
    pub keys_of: HashMap<String, String>,
    /// The target each reference is counted under (a key of `targets`).
    pub target_of: HashMap<String, String>,
    /// What the write check looks at: (exchange, routing key) of each target.
    pub publish_targets: Vec<(String, String)>,
    /// The replay's preview (`--replay` only), for the caller to show.
    pub preview: Option<Preview>,
}

impl Plan {
    pub fn count(&self) -> u64 {
        self.items.len() as u64
    }

    /// The targets as the modal and the log say them: "orders.dlq × 3".
    pub fn target_lines(&self) -> Vec<String> {
        self.targets
            .iter()
            .map(|(q, n)| format!("{} × {n}", one_line(q, 120)))
            .collect()
    }
}

/// Back into the queue each came from, as archived, without the archive's headers. A message
/// without `warren-archived-from`, or whose queue is gone, is refused (`--replay` can send it).
pub async fn plan_back(s: &Session, chosen: &[(String, Explained)]) -> Result<Plan, String> {
    let mut plan = Plan::default();
    for (r, e) in chosen {
        let Some(from) = archive::restore_target(&e.message) else {
            plan.refused.push(format!(
                "archive message {} has no {} header: restore it with --replay",
                one_line(r, 40),
                archive::FROM
            ));
            continue;
        };
        match super::amqp::properties_to_amqp(
            &archive::restored_properties(&e.message),
            &archive::restored_headers(&e.message.headers),
        ) {
            Ok(props) => {
                *plan.targets.entry(from.clone()).or_insert(0) += 1;
                plan.keys_of.insert(r.clone(), e.key.clone());
                plan.target_of.insert(r.clone(), from.clone());
                plan.items.push(Publish {
                    reference: r.clone(),
                    exchange: String::new(),
                    routing_key: from,
                    props,
                    body: e.message.body.clone(),
                });
            }
            Err(err) => plan
                .refused
                .push(format!("archive message {}: {err}", one_line(r, 40))),
        }
    }
    for q in plan.targets.keys() {
        if !s.handle.queue_exists(q).await.map_err(|e| e.to_string())? {
            plan.refused.push(format!(
                "queue '{}' does not exist in vhost '{}' any more: restore its messages with --replay, or create it",
                one_line(q, 80),
                one_line(s.vhost(), 80)
            ));
        }
    }
    plan.publish_targets = plan
        .targets
        .keys()
        .map(|q| (String::new(), q.clone()))
        .collect();
    Ok(plan)
}

/// How a restore that replays goes (`--replay`): as `warren replay` would.
#[derive(Clone, Debug)]
pub struct ReplayWay {
    pub to: Option<String>,
    pub allow_fan_out: bool,
    pub keep_attempts: bool,
    pub consent: ReadConsent,
    /// The run's id, written into each message as `warren-replay-id`.
    pub run_id: Option<String>,
}

/// Straight to where they failed: the archived messages (without the archive's headers) go
/// through the replay's plan, preview and checks (retry budget reset, `--to`, fan-out), and each
/// is planned as `warren replay` plans it.
/// `remember` is given the archive's name and the messages' keys (first-seen times, earlier
/// replays: `Session::remember` on the caller's store).
pub async fn plan_replay(
    s: &Session,
    place: &Place,
    chosen: Vec<(String, Explained)>,
    way: &ReplayWay,
    remember: impl FnOnce(&str, &[String]) -> session::Remembered,
) -> Result<Plan, String> {
    let archive_name = match place {
        Place::Stream(n) => n.clone(),
        Place::Local(..) => "warren archive (local)".to_string(),
    };
    let (refs, messages): (Vec<String>, Vec<DeadLetter>) = chosen
        .into_iter()
        .map(|(r, e)| {
            let mut m = e.message;
            m.properties = archive::restored_properties(&m);
            m.headers = archive::restored_headers(&m.headers);
            (r, m)
        })
        .unzip();
    let spec = ReplaySpec {
        to: way.to.clone(),
        allow_fan_out: way.allow_fan_out,
        keep_attempts: way.keep_attempts,
        consent: way.consent,
        // Shown, not published: the id goes into the job's messages.
        ..ReplaySpec::all_of(&archive_name, messages.len().max(1))
    };
    let depth = messages.len() as u64;
    let preview = s
        .preview_of(&spec, messages.clone(), depth, |keys| {
            remember(&archive_name, keys)
        })
        .await
        .map_err(|e| e.to_string())?;
    let job = Job {
        run_id: way.run_id.clone(),
        message_bytes: None,
        action: Action::Replay,
        dlq: archive_name,
        selection: Selection::All,
        limit: None,
        rate: None,
        window: spec.window,
        keep_attempts: way.keep_attempts,
        clear_expiry: false,
        strip_failure_stamp: false,
        to: way.to.clone(),
        allowed_targets: preview.allowed.clone(),
        redirects: preview.redirects.clone(),
        endpoint_redirects: preview.endpoint_redirects.clone(),
        replays: preview.replays.clone(),
        first_seen: Default::default(),
        quorum: crate::domain::quorum::BrowsePolicy::unrestricted(),
        settle_lag: std::time::Duration::ZERO,
        conventions: s.handle.target.settings.conventions.clone(),
        checks: None,
        backlog: None,
        edits: None,
        amqp10: None,
    };
    let mut plan = Plan {
        refused: preview.refusals.clone(),
        publish_targets: preview.publish_targets(),
        ..Plan::default()
    };
    for (r, m) in refs.into_iter().zip(messages) {
        let k = crate::domain::identity::message_key(&m);
        let exp = crate::domain::explain::explain_with(
            &m,
            &s.handle.target.settings.conventions,
            preview.replays.get(&k).copied().unwrap_or(0),
        );
        match replay::plan_publish(&job, &m, &exp) {
            Ok(p) => {
                let to = if p.exchange.as_str().is_empty() {
                    format!("queue '{}'", p.routing_key.as_str())
                } else {
                    format!(
                        "exchange '{}' key '{}'",
                        p.exchange.as_str(),
                        p.routing_key.as_str()
                    )
                };
                *plan.targets.entry(to.clone()).or_insert(0) += 1;
                plan.keys_of.insert(r.clone(), k);
                plan.target_of.insert(r.clone(), to);
                plan.items.push(Publish {
                    reference: r,
                    exchange: p.exchange.as_str().to_string(),
                    routing_key: p.routing_key.as_str().to_string(),
                    props: p.props,
                    body: m.body,
                });
            }
            Err(Decision::Keep(why) | Decision::Refuse(why)) => {
                *plan.kept.entry(why).or_insert(0) += 1;
            }
            Err(_) => {}
        }
    }
    plan.preview = Some(preview);
    Ok(plan)
}

/// How a restore's publishing ended.
#[derive(Debug, Default)]
pub struct Outcome {
    /// For the record (both places), and the counts the caller says.
    pub audit: AuditOutcome,
    /// Why messages failed, with how many each.
    pub problems: BTreeMap<String, u64>,
    /// The store could not remember some restored messages (a second restore would not know).
    pub unrecorded: Option<String>,
    /// Stopped by the operator and settled: what was confirmed is remembered as restored.
    pub cancelled: bool,
    /// Publishing could not start or broke off: why.
    pub error: Option<String>,
}

impl Outcome {
    pub fn restored(&self) -> u64 {
        self.audit.moved
    }

    /// Not restored for a problem: refused, unanswered, or returned unroutable.
    pub fn failed(&self) -> u64 {
        self.audit.failed + self.audit.returned
    }

    pub fn completed(&self) -> bool {
        self.audit.outcome.is_completed()
    }

    /// The summary's lines, as `warren restore` prints them (and the TUI on its way out).
    pub fn lines(&self) -> Vec<String> {
        use crate::domain::sanitize::one_line;
        // Where they went, as the run found its targets (the DLQs they came from, or the
        // queues a replaying restore sent them to).
        let to = match self.audit.targets.as_slice() {
            [] => String::new(),
            targets => {
                let named: Vec<String> = targets.iter().take(3).map(|t| one_line(t, 80)).collect();
                let more = targets.len().saturating_sub(3);
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                format!(" to {}{more}", named.join(", "))
            }
        };
        let mut out = vec![format!(
            "restored {}{to}, failed {}",
            self.restored(),
            self.failed()
        )];
        for (why, n) in &self.problems {
            out.push(format!("  ! {n} × {}", one_line(why, 300)));
        }
        if !self.completed() {
            out.push(one_line(&self.audit.outcome.to_string(), 600));
        }
        out
    }
}

/// Publishes the plan's messages through the replay engine (`broker::replay::run_memory`):
/// each with a confirm, `mandatory`, and `remember` told the confirmed ones (see
/// `store::remember_restored`) in the engine's ack batches, so a restore stopped or killed
/// halfway does not forget what it already put back. `cancel` stops it: what is in flight is
/// settled and remembered, nothing more is sent; a second cancel ends it at once. `on_batch`
/// is told (restored, failed, total) a few times a second.
pub async fn publish(
    s: &Session,
    plan: Plan,
    cancel: &watch::Receiver<bool>,
    remember: impl FnMut(&[String]) -> Result<(), String>,
    on_batch: impl FnMut(u64, u64, u64),
) -> Outcome {
    let conn = match s.handle.connect_amqp("warren-restore").await {
        Ok(c) => c,
        Err(e) => return failed_outcome(plan.count(), e.to_string()),
    };
    let out = publish_on(&conn, plan, cancel, remember, on_batch).await;
    let closing = conn.close(200, "restore done".into());
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), closing).await;
    out
}

/// [`publish`] on a connection of the caller's.
pub async fn publish_on(
    conn: &lapin::Connection,
    plan: Plan,
    cancel: &watch::Receiver<bool>,
    remember: impl FnMut(&[String]) -> Result<(), String>,
    mut on_batch: impl FnMut(u64, u64, u64),
) -> Outcome {
    let total = plan.count();
    let items = items_of(plan);
    let ran = replay::run_memory(
        conn,
        items,
        crate::domain::engine::Limits::default(),
        cancel.clone(),
        remember,
        |t| on_batch(t.moved, t.failed + t.returned, total),
    )
    .await;
    match ran {
        Ok(run) => outcome_of(&run, total),
        Err(e) => failed_outcome(total, e),
    }
}

/// The plan's publishes as the engine's list: each named by its message key in the audit, and
/// counted under the target the plan counts it under.
fn items_of(plan: Plan) -> Vec<replay::Item> {
    let (keys_of, target_of) = (plan.keys_of, plan.target_of);
    plan.items
        .into_iter()
        .map(|p| replay::Item {
            key: keys_of
                .get(&p.reference)
                .cloned()
                .unwrap_or_else(|| p.reference.clone()),
            target: target_of
                .get(&p.reference)
                .cloned()
                .unwrap_or_else(|| p.routing_key.clone()),
            reference: p.reference,
            exchange: p.exchange,
            routing_key: p.routing_key,
            props: p.props,
            body: p.body,
        })
        .collect()
}

/// Publishing that could not start: nothing restored.
fn failed_outcome(total: u64, e: String) -> Outcome {
    Outcome {
        audit: AuditOutcome {
            canary: None,
            edits: Vec::new(),
            targets: Vec::new(),
            at: jiff::Timestamp::now(),
            moved: 0,
            returned: 0,
            failed: 0,
            remaining: total,
            message_ids: Vec::new(),
            duplicated: 0,
            duplicate_ids: Vec::new(),
            outcome: crate::domain::outcome::RunOutcome::Failed(e.clone()),
        },
        problems: BTreeMap::new(),
        unrecorded: None,
        cancelled: false,
        error: Some(format!("{e}; nothing restored")),
    }
}

/// The outcome of a restore's run of `total` publishes, from the engine's tally and stop.
fn outcome_of(run: &replay::MemoryRun, total: u64) -> Outcome {
    let t = &run.tally;
    let targets = t
        .targets
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(q, _)| q.clone())
        .collect();
    Outcome {
        audit: AuditOutcome {
            canary: None,
            edits: Vec::new(),
            targets,
            at: jiff::Timestamp::now(),
            moved: t.moved,
            returned: t.returned,
            failed: t.failed,
            remaining: not_done(t, total),
            message_ids: t.moved_ids.clone(),
            duplicated: t.duplicated,
            duplicate_ids: t.duplicate_ids.clone(),
            outcome: run_outcome(run, total),
        },
        problems: t.problems.clone(),
        unrecorded: run.unrecorded.clone(),
        cancelled: run.stop == replay::StopReason::Cancelled && t.forced.is_none(),
        error: None,
    }
}

/// Publishes the run did not make or that did not arrive for sure: still in the archive, not
/// remembered, restorable again. Failed ones are counted apart.
fn not_done(t: &crate::domain::engine::Tally, total: u64) -> u64 {
    total.saturating_sub(t.moved + t.failed + t.returned)
}

/// How a restore's run ended, in the audit's words: the engine's tally and stop, said of a
/// restore ("3 restored, 2 not sent").
fn run_outcome(run: &replay::MemoryRun, total: u64) -> crate::domain::outcome::RunOutcome {
    use crate::domain::outcome::RunOutcome;
    use replay::StopReason;
    let t = &run.tally;
    let left = not_done(t, total);
    let mut done = format!("{} restored, {left} not sent", t.moved);
    if t.failed + t.returned > 0 {
        done.push_str(&format!(", {} failed", t.failed + t.returned));
    }
    // Why the run stopped, when it was not its own end or the operator's cancel.
    let why = match (&run.unrecorded, &run.stop) {
        (Some(e), _) => Some(unrecorded_text(t.moved, e)),
        (None, s) if s.is_finished() || *s == StopReason::Cancelled => None,
        (None, StopReason::Blocked { secs, reason }) => Some(format!(
            "the broker blocked publishing for {secs}s ({reason}); stopped — clear the alarm and restore again"
        )),
        (None, s) => Some(s.to_string()),
    };
    if let Some(forced) = &t.forced {
        return RunOutcome::Interrupted(Some(format!("{forced}; {done}")));
    }
    if run.stop == StopReason::Cancelled && why.is_none() {
        return RunOutcome::Cancelled(Some(done));
    }
    let refused = t.failed + t.returned;
    if refused == 0 && left == 0 && t.duplicated == 0 && why.is_none() {
        return RunOutcome::Completed;
    }
    if t.moved == 0 {
        let mut causes: Vec<String> = t.problems.keys().cloned().collect();
        causes.extend(why);
        if causes.is_empty() {
            causes.push(done);
        }
        return RunOutcome::Failed(causes.join("; "));
    }
    let mut parts = Vec::new();
    if t.failed > 0 {
        parts.push(format!("{} failed", t.failed));
    }
    if t.returned > 0 {
        parts.push(format!("{} returned unroutable", t.returned));
    }
    if left > 0 {
        parts.push(format!("{left} not sent"));
    }
    if t.duplicated > 0 {
        parts.push(format!("{} may have arrived unconfirmed", t.duplicated));
    }
    let mut text = parts.join(", ");
    if let Some(why) = why {
        text = if text.is_empty() {
            why
        } else {
            format!("{text}; {why}")
        };
    }
    RunOutcome::Partial(text)
}

/// The message `warren restore` and the TUI give when the store could not remember restored
/// messages.
pub fn unrecorded_text(restored: u64, why: &str) -> String {
    format!(
        "the {restored} restored message(s) could not be remembered ({why}): a second restore would not know them"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::engine::Tally;
    use replay::StopReason;

    fn run(stop: StopReason, moved: u64, failed: u64, returned: u64) -> replay::MemoryRun {
        replay::MemoryRun {
            tally: Tally {
                moved,
                failed,
                returned,
                targets: [("orders.dlq".to_string(), moved)].into(),
                ..Tally::default()
            },
            stop,
            unrecorded: None,
        }
    }

    #[test]
    fn a_restore_says_what_the_engine_counted_in_its_own_words() {
        let done = outcome_of(&run(StopReason::ReachedStartDepth, 5, 0, 0), 5);
        assert_eq!(done.audit.outcome.to_string(), "completed");
        assert_eq!(done.lines(), vec!["restored 5 to orders.dlq, failed 0"]);

        let cancelled = outcome_of(&run(StopReason::Cancelled, 3, 0, 0), 5);
        assert!(cancelled.cancelled);
        assert_eq!(
            cancelled.audit.outcome.to_string(),
            "cancelled: 3 restored, 2 not sent"
        );
        assert_eq!(cancelled.audit.remaining, 2);

        let returned = outcome_of(&run(StopReason::ReachedStartDepth, 3, 0, 2), 5);
        assert_eq!(
            returned.audit.outcome.to_string(),
            "partial: 2 returned unroutable"
        );
        assert_eq!((returned.failed(), returned.audit.returned), (2, 2));
        assert_eq!(returned.audit.remaining, 0);

        let none = outcome_of(&run(StopReason::ReachedStartDepth, 0, 0, 0), 0);
        assert!(none.audit.targets.is_empty() && none.completed());
    }

    #[test]
    fn a_fault_a_forced_end_and_a_forgetful_store_are_never_completed() {
        let mut nothing = run(
            StopReason::NoConfirm {
                secs: 30,
                unconfirmed: 4,
            },
            0,
            4,
            0,
        );
        nothing
            .tally
            .problems
            .insert("publish unanswered: not confirmed in time".into(), 4);
        let out = outcome_of(&nothing, 10);
        assert!(
            out.audit
                .outcome
                .to_string()
                .starts_with("failed: publish unanswered: not confirmed in time; 4 publish(es)"),
            "{}",
            out.audit.outcome
        );
        assert_eq!(out.audit.remaining, 6);

        let blocked = run(
            StopReason::Blocked {
                secs: 60,
                reason: "low on memory".into(),
            },
            3,
            0,
            0,
        );
        assert_eq!(
            outcome_of(&blocked, 5).audit.outcome.to_string(),
            "partial: 2 not sent; the broker blocked publishing for 60s (low on memory); stopped — clear the alarm and restore again"
        );

        let mut forced = run(StopReason::Cancelled, 2, 0, 0);
        forced.tally.forced = Some("stopped at once by a second signal".into());
        let out = outcome_of(&forced, 5);
        assert!(!out.cancelled);
        assert_eq!(
            out.audit.outcome.to_string(),
            "interrupted: stopped at once by a second signal; 2 restored, 3 not sent"
        );

        let mut forgot = run(
            StopReason::ConnectionLost("Warren's store could not remember …".into()),
            4,
            0,
            0,
        );
        forgot.unrecorded = Some("disk full".into());
        let out = outcome_of(&forgot, 6);
        assert_eq!(
            out.audit.outcome.to_string(),
            format!("partial: 2 not sent; {}", unrecorded_text(4, "disk full"))
        );
    }
}
