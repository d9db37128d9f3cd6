//! Restore: archived messages back into the dead-letter queue each came from, or replayed
//! straight to where they failed. One implementation for `warren restore` and the TUI's worker:
//! read the archive, choose what was not restored before (`domain::archive::choose_for_restore`),
//! strip the archive's headers, group by origin and check the targets exist (or go through the
//! replay's plan and preview), publish with confirms in batches and remember each batch's
//! confirmed messages before the next goes. The callers put the run on the record (the CLI's
//! `OnRecord`, the worker's `Recorded`) and say what happened.

use std::collections::{BTreeMap, HashMap};

use tokio::sync::watch;

use super::archive::{self as keep, Place, Publish, Published};
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
/// the chosen messages and one page are held.
pub async fn read_and_choose(
    s: &Session,
    // `&mut`: a store is not `Sync`, and this future must be `Send` (the worker spawns it).
    st: &mut Store,
    key: &str,
    place: &Place,
    ask: &Ask,
    cap: usize,
) -> Result<ChosenRead, String> {
    let cap = cap.max(1) as u64;
    let mut out = ChosenRead::default();
    let take = |st: &Store, out: &mut ChosenRead, page| take_page(s, st, key, ask, cap, out, page);
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
        queue: archive_name.clone(),
        selection: Selection::All,
        limit: None,
        rate: None,
        to: way.to.clone(),
        allow_fan_out: way.allow_fan_out,
        keep_attempts: way.keep_attempts,
        clear_expiry: false,
        strip_failure_stamp: false,
        window: messages.len().max(1),
        consent: way.consent,
        // Shown, not published: the id goes into the job's messages.
        run_id: None,
        max_backlog: None,
        edits: None,
        protocol: Default::default(),
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
                *plan.targets.entry(to).or_insert(0) += 1;
                plan.keys_of.insert(r.clone(), k);
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
    /// Stopped by the operator between batches: what was confirmed stays restored.
    pub cancelled: bool,
    /// Publishing could not start or broke off: why.
    pub error: Option<String>,
}

impl Outcome {
    pub fn restored(&self) -> u64 {
        self.audit.moved
    }

    pub fn failed(&self) -> u64 {
        self.audit.failed
    }

    pub fn completed(&self) -> bool {
        crate::domain::outcome::RunOutcome::parse(&self.audit.outcome).is_completed()
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
            out.push(one_line(&self.audit.outcome, 600));
        }
        out
    }
}

/// Publishes the plan's messages with confirms, a batch at a time, and has `remember` keep each
/// batch's confirmed ones (see `store::remember_restored`) before the next batch goes: a restore stopped or
/// killed halfway does not forget what it already put back. `cancel` stops it between batches.
/// `on_batch` is told (restored, failed, total) as each batch is settled.
pub async fn publish(
    s: &Session,
    plan: Plan,
    cancel: &watch::Receiver<bool>,
    mut remember: impl FnMut(&[String]) -> Result<(), String>,
    mut on_batch: impl FnMut(u64, u64, u64),
) -> Outcome {
    let total = plan.count();
    // Where the restored messages go (the DLQs they came from, or a replay's targets), for the
    // record and the summary's line.
    let targets: Vec<String> = plan.targets.keys().cloned().collect();
    let keys_of = plan.keys_of;
    let failed_outcome = |e: String| Outcome {
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
            outcome: format!("failed: {e}"),
        },
        problems: BTreeMap::new(),
        unrecorded: None,
        cancelled: false,
        error: Some(format!("{e}; nothing restored")),
    };
    let conn = match s.handle.connect_amqp("warren-restore").await {
        Ok(c) => c,
        Err(e) => return failed_outcome(e.to_string()),
    };
    let mut unrecorded: Option<String> = None;
    let result = keep::publish_confirmed(
        &conn,
        plan.items,
        || *cancel.borrow(),
        |batch, done, failed| {
            let confirmed: Vec<String> = batch
                .iter()
                .filter(|(_, p)| *p == Published::Confirmed)
                .map(|(r, _)| r.clone())
                .collect();
            if let Err(e) = remember(&confirmed) {
                unrecorded.get_or_insert(e);
            }
            on_batch(done, failed, total);
        },
    )
    .await;
    let _ = conn.close(200, "restore done".into()).await;
    let results = match result {
        Ok(r) => r,
        Err(e) => return failed_outcome(e),
    };
    let name = |r: &String| keys_of.get(r).cloned().unwrap_or_else(|| r.clone());
    let mut confirmed = Vec::new();
    let mut problems: BTreeMap<String, u64> = BTreeMap::new();
    let mut maybe: Vec<String> = Vec::new();
    let mut not_sent = 0u64;
    for (r, p) in &results {
        match p {
            Published::Confirmed => confirmed.push(name(r)),
            Published::Failed { why, .. } if why == keep::STOPPED => not_sent += 1,
            Published::Failed { why, maybe_arrived } => {
                *problems.entry(why.clone()).or_insert(0) += 1;
                if *maybe_arrived {
                    maybe.push(name(r));
                }
            }
        }
    }
    let restored = confirmed.len() as u64;
    let failed = total - restored - not_sent;
    let cancelled = not_sent > 0;
    use crate::domain::outcome::RunOutcome;
    let outcome = if failed == 0 && !cancelled {
        RunOutcome::Completed
    } else if cancelled {
        RunOutcome::Cancelled(Some(format!("{restored} restored, {not_sent} not sent")))
    } else if restored == 0 {
        RunOutcome::Failed(problems.keys().cloned().collect::<Vec<_>>().join("; "))
    } else {
        RunOutcome::Partial(format!("{failed} failed"))
    }
    .to_string();
    Outcome {
        audit: AuditOutcome {
            canary: None,
            edits: Vec::new(),
            targets: if restored > 0 { targets } else { Vec::new() },
            at: jiff::Timestamp::now(),
            moved: restored,
            returned: 0,
            failed,
            remaining: not_sent,
            message_ids: confirmed,
            duplicated: maybe.len() as u64,
            duplicate_ids: maybe,
            outcome,
        },
        problems,
        unrecorded,
        cancelled,
        error: None,
    }
}

/// The message `warren restore` and the TUI give when the store could not remember restored
/// messages.
pub fn unrecorded_text(restored: u64, why: &str) -> String {
    format!(
        "the {restored} restored message(s) could not be remembered ({why}): a second restore would not know them"
    )
}
