//! The broker's copy of the audit: every recorded operation is also appended to a stream on the
//! broker (`warren.audit` by default, per context), as JSON in the stable shape of
//! [`AuditEnvelope`], published with confirms, so `warren audit` on another machine shows what a
//! colleague did. Creating the stream changes the broker and needs configure permission, so it
//! is done only with consent (asked on a terminal, or `create_audit_stream` / the
//! `--create-audit-stream` flag). When the stream cannot be written the local record still
//! happens and the caller says the broker record was not written. Reading is a stream browse:
//! by offset, nothing consumed.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use jiff::Timestamp;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::ShortString;
use lapin::{BasicProperties, Channel, Confirmation};
use serde::Serialize;

use super::amqp::short;
use super::browse::{self, BrowseRequest};
use super::management::ManagementError;
use super::session::{Session, SessionError};
use crate::domain::features::QueueType;
use crate::domain::quorum::BrowsePolicy;
use crate::store::AuditEnvelope;

/// How long one audit publish may wait for its confirm.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
/// Finding the audit stream's end: how long to wait for its last chunk (an empty stream sends
/// nothing).
const READ_IDLE: Duration = Duration::from_millis(1500);
/// The most moved ids one `outcome-ids` entry (or the outcome entry) of the stream holds.
pub const IDS_PER_ENTRY: usize = 10_000;
/// About the most bytes of ids one such entry holds (ids are up to ~260 bytes): well under
/// the 16 MiB `max_message_size` of RabbitMQ 4.
pub const ID_BYTES_PER_ENTRY: usize = 1024 * 1024;
/// The most entries `warren audit` reads from the stream (retention bounds it too).
pub const MAX_READ: usize = 100_000;

/// A globally unique id for one run: its UTC start to the second and 64 random bits
/// (`20261201T194512Z-3f9a1c2e7b40d615`). Sorts by time; unique across machines.
pub fn new_run_id(now: Timestamp) -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{}-{:016x}", now.strftime("%Y%m%dT%H%M%SZ"), h.finish())
}

/// Whether Warren may create the audit stream when it is missing.
pub enum Consent<'a> {
    /// The flag or the config said yes.
    Create,
    /// The config said no, or there is no one to ask.
    Refuse,
    /// Ask (on a terminal): the closure gets what Warren will create and says yes or no.
    Ask(&'a mut (dyn FnMut(&str) -> bool + Send)),
    /// The operator was asked before the work started (the TUI's modal) and said no: nothing
    /// is created, and the missing broker record is not said again.
    Declined,
}

/// What Warren would create for the broker's record of a run in `s`, when it is missing and
/// the context neither allows nor forbids creating it: the question a front end that cannot
/// stop mid-run (the TUI) asks before the work starts. `None`: nothing to ask.
pub async fn stream_to_ask_about(s: &Session) -> Option<String> {
    let name = s.handle.target.audit.stream.clone()?;
    if s.handle.target.read_only || s.handle.target.audit.create.is_some() {
        return None;
    }
    match s.handle.mgmt.queue(s.vhost(), &name).await {
        Err(ManagementError::NoQueue { .. }) => Some(creation_text(s, &name)),
        _ => None,
    }
}

/// The consent the context and the flag give, before anyone is asked: `Some(true)` create,
/// `Some(false)` never, `None` ask where someone can answer.
pub fn configured_consent(s: &Session, flag: bool) -> Option<bool> {
    if flag {
        Some(true)
    } else {
        s.handle.target.audit.create
    }
}

/// The audit stream, open for appending: a confirm-mode channel of its own.
pub struct AuditStream {
    name: String,
    channel: Channel,
    /// The connection's broker user: each entry's `user_id`, which the broker refuses from
    /// any other user, so a reader can tell Warren's entries from forged ones.
    user: String,
}

/// What Warren says when it will create the stream, for the consent question.
pub fn creation_text(s: &Session, name: &str) -> String {
    format!(
        "Warren keeps the audit on the broker too, so the whole rota sees the same record: it will create the stream '{name}' in vhost '{}' (durable, x-max-age {}; needs configure permission)",
        s.vhost(),
        s.handle.target.audit.max_age
    )
}

/// A stream Warren keeps on the broker and appends to with [`AuditStream`]: the audit stream,
/// or another kept beside it (the redirects, see `broker::redirects`).
pub(crate) struct Kept {
    pub(crate) name: String,
    /// What it is, in words ("audit stream").
    pub(crate) what: &'static str,
    /// What Warren says when it would create it (the consent question).
    pub(crate) creation: String,
    /// Its `x-max-age` (`None`: kept until removed).
    pub(crate) max_age: Option<String>,
}

impl AuditStream {
    /// Opens the context's audit stream for writing, creating it with consent. `Err` says why
    /// the broker record will not be written (turned off, declined, no permission, no streams).
    pub async fn open(s: &Session, consent: Consent<'_>) -> Result<AuditStream, String> {
        let Some(name) = s.handle.target.audit.stream.clone() else {
            return Err(format!(
                "the broker audit stream is turned off for context '{}' (audit_stream = \"\")",
                s.handle.target.context
            ));
        };
        let kept = Kept {
            creation: creation_text(s, &name),
            name,
            what: "audit stream",
            max_age: Some(s.handle.target.audit.max_age.clone()),
        };
        Self::open_kept(s, kept, consent).await
    }

    /// Opens `kept` for writing, creating it with consent (see [`AuditStream::open`]).
    pub(crate) async fn open_kept(
        s: &Session,
        kept: Kept,
        consent: Consent<'_>,
    ) -> Result<AuditStream, String> {
        let Kept {
            name,
            what,
            creation,
            max_age,
        } = kept;
        if s.handle.target.read_only {
            return Err("read-only: Warren publishes nothing".into());
        }
        match s.handle.mgmt.queue(s.vhost(), &name).await {
            Ok(q) if q.queue_type == QueueType::Stream => {}
            Ok(q) => {
                return Err(format!(
                    "'{name}' in vhost '{}' is a {} queue, not a stream; name another with audit_stream in the context",
                    s.vhost(),
                    q.queue_type.as_str()
                ));
            }
            Err(ManagementError::NoQueue { .. }) => {
                let yes = match consent {
                    Consent::Create => true,
                    Consent::Refuse | Consent::Declined => false,
                    Consent::Ask(ask) => ask(&creation),
                };
                if !yes {
                    return Err(format!(
                        "the {what} '{name}' does not exist and Warren was not allowed to create it (answer yes, pass --create-audit-stream, or set create_audit_stream = true)"
                    ));
                }
                declare(s, &name, what, max_age.as_deref()).await?;
            }
            Err(e) => return Err(format!("cannot look up the {what} '{name}': {e}")),
        }
        let conn = s.handle.amqp().await.map_err(|e| e.to_string())?;
        let channel = conn
            .create_channel()
            .await
            .map_err(|e| format!("cannot open a channel for the {what}: {e}"))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| format!("cannot put the {what}'s channel in confirm mode: {e}"))?;
        Ok(AuditStream {
            name,
            channel,
            user: s.handle.target.credentials.username.clone(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Appends one entry and waits for the broker's confirm. Generic over the record, so every
    /// kind of operation is mirrored with this one call.
    pub async fn append<T: Serialize>(
        &self,
        kind: &str,
        event: &str,
        run_id: &str,
        record: &T,
    ) -> Result<(), String> {
        self.append_as(kind, event, &format!("{run_id}/{event}"), run_id, record)
            .await
    }

    /// [`append`](Self::append) with the entry's `message_id` given.
    async fn append_as<T: Serialize>(
        &self,
        kind: &str,
        event: &str,
        message_id: &str,
        run_id: &str,
        record: &T,
    ) -> Result<(), String> {
        let at = Timestamp::now();
        let entry = AuditEnvelope::new(kind, event, run_id, at, record);
        let body = serde_json::to_vec(&entry).map_err(|e| format!("cannot encode: {e}"))?;
        let prop = |s: String| ShortString::try_new(s).unwrap_or_default();
        let props = BasicProperties::default()
            .with_content_type(prop("application/json".into()))
            .with_delivery_mode(2)
            .with_app_id(prop("warren".into()))
            .with_user_id(prop(self.user.clone()))
            .with_message_id(prop(message_id.to_string()))
            .with_type(prop(format!("warren.audit.{kind}.{event}")))
            .with_timestamp(u64::try_from(at.as_second()).unwrap_or(0));
        let queue = short("the audit stream name", &self.name).map_err(|e| e.to_string())?;
        let publish = async {
            self.channel
                .basic_publish(
                    "".into(),
                    queue,
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    &body,
                    props,
                )
                .await?
                .await
        };
        match tokio::time::timeout(CONFIRM_TIMEOUT, publish).await {
            Err(_) => Err(format!(
                "the broker did not confirm the audit entry within {} s",
                CONFIRM_TIMEOUT.as_secs()
            )),
            Ok(Err(e)) => Err(format!("publishing to '{}' failed: {e}", self.name)),
            Ok(Ok(Confirmation::Ack(None))) => Ok(()),
            Ok(Ok(Confirmation::Ack(Some(_)))) => Err(format!(
                "the broker returned the audit entry: '{}' is gone",
                self.name
            )),
            Ok(Ok(_)) => Err(format!(
                "the broker refused the audit entry for '{}'",
                self.name
            )),
        }
    }
}

/// The broker's side of one run's record: the stream when it could be opened, else why not.
/// Every append after a failure is skipped; the first failure is said once.
pub struct BrokerRecord {
    stream: Result<AuditStream, String>,
    said: bool,
}

impl BrokerRecord {
    pub async fn open(s: &Session, consent: Consent<'_>) -> BrokerRecord {
        let declined = matches!(consent, Consent::Declined);
        BrokerRecord {
            stream: AuditStream::open(s, consent).await,
            said: declined,
        }
    }

    /// A record that writes nothing on the broker, for the reason given.
    pub fn off(reason: impl Into<String>) -> BrokerRecord {
        BrokerRecord {
            stream: Err(reason.into()),
            said: false,
        }
    }

    /// Appends one entry (see [`AuditStream::append`]). Returns why the broker record could not
    /// be written, the first time it could not (`None` otherwise, and after the operator
    /// declined the stream): `ops::record` says it in the operator's words.
    pub async fn append<T: Serialize>(
        &mut self,
        kind: &str,
        event: &str,
        run_id: &str,
        record: &T,
    ) -> Option<String> {
        if let Ok(stream) = &self.stream
            && let Err(why) = stream.append(kind, event, run_id, record).await
        {
            self.stream = Err(why);
        }
        match &self.stream {
            Ok(_) => None,
            Err(_) if self.said => None,
            Err(why) => {
                self.said = true;
                Some(why.clone())
            }
        }
    }

    /// Writes how a run ended on the broker: its moved ids — `out.message_ids`, then every key
    /// of `moved` — in `outcome-ids` entries of at most [`IDS_PER_ENTRY`] ids and about
    /// [`ID_BYTES_PER_ENTRY`] bytes each, read from the spool a chunk at a time (never all in
    /// memory, never one message over the broker's `max_message_size`), then the outcome entry
    /// with the last ids and how many `outcome-ids` entries came before it (`id_parts`). A run
    /// whose ids fit one entry writes only the outcome, as before. The local record comes first
    /// ([`record_outcome`]). Returns why the broker record could not be written, the first time
    /// (see [`BrokerRecord::append`]).
    pub async fn finish(
        &mut self,
        op: &str,
        run_id: &str,
        mut out: crate::store::AuditOutcome,
        moved: &crate::local::spool::Spool,
    ) -> Option<String> {
        if !self.is_written() {
            return self.append(op, "outcome", run_id, &out).await;
        }
        let mut reader = moved.reader();
        let mut pending: std::collections::VecDeque<String> =
            std::mem::take(&mut out.message_ids).into();
        let mut parts: u32 = 0;
        loop {
            // Fill the chunk from what is pending, then from the spool.
            let mut chunk = Vec::new();
            let mut bytes = 0usize;
            while chunk.len() < IDS_PER_ENTRY && bytes < ID_BYTES_PER_ENTRY {
                let next = match pending.pop_front() {
                    Some(k) => k,
                    None => match reader.next_key() {
                        Some(k) => k,
                        None => break,
                    },
                };
                bytes = bytes.saturating_add(next.len() + 3);
                chunk.push(next);
            }
            if pending.is_empty() && reader.is_done() {
                out.message_ids = chunk;
                break;
            }
            parts += 1;
            let part = crate::store::IdsPart {
                part: parts,
                message_ids: chunk,
            };
            let stream = self.stream.as_ref().ok()?;
            let message_id = format!("{run_id}/outcome-ids/{parts}");
            if let Err(why) = stream
                .append_as(op, crate::store::IDS_EVENT, &message_id, run_id, &part)
                .await
            {
                self.stream = Err(why);
                return self.append(op, "outcome", run_id, &out).await;
            }
        }
        let entry = crate::store::OutcomeEntry {
            outcome: &out,
            id_parts: parts,
        };
        self.append(op, "outcome", run_id, &entry).await
    }

    /// True while entries reach the broker.
    pub fn is_written(&self) -> bool {
        self.stream.is_ok()
    }
}

async fn declare(s: &Session, name: &str, what: &str, max_age: Option<&str>) -> Result<(), String> {
    let conn = s.handle.amqp().await.map_err(|e| e.to_string())?;
    super::amqp::declare_stream(conn, name, max_age)
        .await
        .map_err(|e| match e {
            super::amqp::DeclareError::NoPermission(text) => format!(
                "RabbitMQ refused to create the {what} '{name}': {text} (creating it needs configure permission on the vhost; an administrator can create it once)"
            ),
            super::amqp::DeclareError::Other(text) => format!(
                "could not create the {what} '{name}': {text}; the broker may not support streams"
            ),
        })
}

/// Every entry of the context's audit stream (message bodies, oldest first), read by offset:
/// nothing is consumed. `Err` says why it could not be read; a stream that does not exist yet
/// holds no entries.
pub async fn read(s: &Session) -> Result<Vec<Vec<u8>>, String> {
    read_signed(s)
        .await
        .map(|e| e.into_iter().map(|(body, _)| body).collect())
}

/// As [`read`], each entry with its `user_id` (the broker user the broker vouches wrote it).
pub async fn read_signed(s: &Session) -> Result<Vec<(Vec<u8>, Option<String>)>, String> {
    let Some(name) = s.handle.target.audit.stream.clone() else {
        return Err(format!(
            "the broker audit stream is turned off for context '{}'",
            s.handle.target.context
        ));
    };
    read_stream_signed(s, name).await
}

/// Every entry of the stream `name` with its `user_id`, oldest first (see [`read_signed`]): a
/// stream that does not exist holds none.
pub(crate) async fn read_stream_signed(
    s: &Session,
    name: String,
) -> Result<Vec<(Vec<u8>, Option<String>)>, String> {
    match s.handle.mgmt.queue(s.vhost(), &name).await {
        Ok(q) if q.queue_type == QueueType::Stream => {}
        Ok(q) => {
            return Err(format!(
                "'{name}' is a {} queue, not a stream",
                q.queue_type.as_str()
            ));
        }
        Err(ManagementError::NoQueue { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    }
    let conn = s
        .handle
        .amqp()
        .await
        .map_err(|e: SessionError| e.to_string())?;
    // Where the stream ends now, so that a pause on a loaded broker does not pass for the end.
    let Some(tail) = browse::stream_tail(conn, &name, READ_IDLE)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(Vec::new());
    };
    let mut req = BrowseRequest::new(
        name.clone(),
        QueueType::Stream,
        BrowsePolicy::unrestricted(),
    );
    req.limit = MAX_READ;
    req.end_offset = Some(tail);
    // An entry holds up to about 1 MiB of moved ids (older outcomes hold all of a run's): whole
    // bodies, not the browse cap.
    req.body_cap = 16 * 1024 * 1024;
    let page = browse::browse(conn, &req)
        .await
        .map_err(|e| e.to_string())?;
    if page.stopped == browse::StopReason::Idle {
        return Err(format!(
            "the stream '{name}' stopped delivering before its end (offset {tail}) for {} s; {} entries read",
            req.idle_timeout.as_secs(),
            page.messages.len()
        ));
    }
    Ok(page
        .messages
        .into_iter()
        .map(|m| (m.body, m.properties.user_id))
        .collect())
}

/// Messages of a DLQ that the audit looks through for what came back, at most.
pub const CAME_BACK_READ: usize = 10_000;
/// Queues the audit looks in for what came back, at most.
pub const CAME_BACK_QUEUES: usize = 20;

/// The audit as `warren audit` and the terminal UI's Replays view show it: the local records
/// (when the store opens) and the broker stream's (when `s` is a session), merged, newest
/// `limit` of each kind, with what could not be reached in words.
pub async fn load(
    s: Result<&Session, String>,
    limit: usize,
) -> (crate::store::Merged, Vec<String>) {
    match s {
        Ok(s) => load_all(&[s], limit).await,
        Err(why) => {
            let (merged, mut unreached) = load_all(&[], limit).await;
            unreached.push(format!(
                "broker audit stream unreachable: {why}; showing local records only"
            ));
            (merged, unreached)
        }
    }
}

/// As [`load`], with the broker audit stream of each of `sessions` (one per vhost of a scope
/// of every vhost): run ids are unique across vhosts, so their entries merge as one stream's.
pub async fn load_all(sessions: &[&Session], limit: usize) -> (crate::store::Merged, Vec<String>) {
    let mut unreached = Vec::new();
    // The store is not `Sync`: read and dropped before the first await.
    let local = crate::store::Store::open_default()
        .and_then(|st| Ok((st.list_audit(limit)?, st.list_protects(limit)?)));
    let (local, protects) = match local {
        Ok(both) => both,
        Err(e) => {
            unreached.push(format!(
                "local audit unreadable: {e}; showing the broker's records only"
            ));
            (Vec::new(), Vec::new())
        }
    };
    let mut entries = Vec::new();
    let mut signed = Vec::new();
    for s in sessions {
        match read_signed(s).await {
            Ok(e) => {
                let unvouched = crate::store::unvouched_runs(&e);
                signed.push(unvouched);
                entries.extend(e.into_iter().map(|(body, _)| body));
            }
            Err(e) if sessions.len() == 1 => unreached.push(format!(
                "broker audit stream unreachable: {e}; showing local records only"
            )),
            Err(e) => unreached.push(format!(
                "broker audit stream of vhost '{}' unreachable: {e}",
                crate::domain::sanitize::one_line(s.vhost(), 80)
            )),
        }
    }
    let mut merged = crate::store::merge(local, protects, &entries);
    // A run only the broker's stream holds is marked when an entry of it is not vouched for.
    let unvouched: std::collections::HashSet<String> = signed.into_iter().flatten().collect();
    for (r, seen) in &mut merged.replays {
        seen.unvouched = !seen.local && r.run_id.as_ref().is_some_and(|id| unvouched.contains(id));
    }
    merged.replays.truncate(limit);
    merged.protects.truncate(limit);
    for why in &merged.skipped {
        unreached.push(format!("broker audit entry skipped: {why}"));
    }
    (merged, unreached)
}

/// What came back after each run of this session's context and vhost, by run id: the DLQs the
/// runs replayed from are read (a browse: nothing moves; a quorum queue's reads are decided as
/// for any read, by `consent` and its ledger) and each dead letter carrying a run's
/// `warren-replay-id` counted for it, with its failure group's summary. Queues that could not
/// be read are said in the second part.
pub async fn came_back(
    s: &Session,
    runs: &[(crate::store::AuditRecord, crate::store::Seen)],
    consent: super::session::ReadConsent,
) -> (
    std::collections::HashMap<String, crate::domain::comeback::CameBack>,
    Vec<String>,
) {
    let mut unreached = Vec::new();
    let mut queues: Vec<&str> = Vec::new();
    for (r, _) in runs {
        // Only a replay out of a queue: what an archive or a discard took does not come back
        // there, and a replay from the archive (`restore --replay`, whose source is named
        // "stream '…'" or "local file …") sends failures to DLQs its record does not name.
        let from_queue = r.operation == crate::domain::run::RunKind::Replay
            && !r.from_queue.starts_with("stream '")
            && !r.from_queue.starts_with("local file ");
        if from_queue
            && is_here(s, r)
            && r.moved.unwrap_or(0) > 0
            && !queues.contains(&r.from_queue.as_str())
        {
            queues.push(&r.from_queue);
        }
    }
    if queues.len() > CAME_BACK_QUEUES {
        unreached.push(format!(
            "what came back: looked in the {CAME_BACK_QUEUES} most recently replayed queues only"
        ));
        queues.truncate(CAME_BACK_QUEUES);
    }
    let mut keys = std::collections::HashSet::new();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for q in queues {
        // Counting comebacks is not worth a delivery of a quorum message's limit: such a queue
        // is read only when the operator accepted the cost.
        if consent == super::session::ReadConsent::Reuse
            && let Ok((_, policy, _)) = s.handle.browse_policy(q).await
            && policy.cost_per_browse > 0
            && policy.limit.is_some()
        {
            unreached.push(format!(
                "did not look in '{}' for what came back: reading it spends deliveries of its quorum delivery limit (pass --read-again to accept, or `warren protect {}`)",
                crate::domain::sanitize::one_line(q, 80),
                crate::domain::sanitize::one_line(q, 80)
            ));
            continue;
        }
        match s.browse(q, CAME_BACK_READ, consent).await {
            Ok(page) => {
                let explained = super::session::explain_all(
                    super::session::into_messages(page),
                    &super::session::Remembered::default(),
                    &s.handle.target.settings.conventions,
                );
                for e in explained {
                    if let Some(f) =
                        crate::domain::comeback::failed_again(&e.message, &e.explanation)
                        && keys.insert(e.key.clone())
                    {
                        pairs.push((f.run_id, e.explanation.fingerprint.summary.clone()));
                    }
                }
            }
            Err(e) => unreached.push(format!(
                "could not look in '{}' for what came back: {e}",
                crate::domain::sanitize::one_line(q, 80)
            )),
        }
    }
    let tally = crate::domain::comeback::tally(pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())));
    (tally, unreached)
}

/// True when `r` is a real run of this session's context and vhost, with a run id: the runs
/// whose comebacks `came_back` counts.
pub fn is_here(s: &Session, r: &crate::store::AuditRecord) -> bool {
    r.context == s.handle.target.context && r.vhost == s.vhost() && r.run_id.is_some() && !r.dry_run
}

/// Who ran each run that `messages` came back from ("… after replay R by alice"): from the
/// local audit, and from the broker's stream for runs this machine did not record (a
/// colleague's). Best effort: a run found in neither is simply not named.
pub async fn authors(
    s: &Session,
    messages: &[crate::domain::message::DeadLetter],
) -> std::collections::HashMap<String, String> {
    let ids: Vec<String> = messages
        .iter()
        .filter_map(crate::domain::comeback::run_id_of)
        .collect();
    authors_of(s, ids).await
}

/// Who ran each of the runs `ids`, from the local audit, else the broker's audit stream.
pub async fn authors_of(
    s: &Session,
    mut ids: Vec<String>,
) -> std::collections::HashMap<String, String> {
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        return std::collections::HashMap::new();
    }
    let mut out: std::collections::HashMap<String, String> = crate::store::Store::open_default()
        .and_then(|st| st.run_authors(&ids))
        .unwrap_or_default()
        .into_iter()
        .map(|(id, (user, _))| (id, user))
        .collect();
    if ids.iter().all(|id| out.contains_key(id)) {
        return out;
    }
    if let Ok(entries) = read(s).await {
        let merged = crate::store::merge(Vec::new(), Vec::new(), &entries);
        for (r, _) in merged.replays {
            if let Some(id) = r.run_id
                && ids.contains(&id)
            {
                out.entry(id).or_insert(r.os_user);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_unique_and_name_their_time() {
        let t: Timestamp = "2026-12-01T19:45:12.345Z".parse().unwrap();
        let a = new_run_id(t);
        let b = new_run_id(t);
        assert_ne!(a, b);
        assert!(a.starts_with("20261201T194512Z-"), "{a}");
        assert_eq!(a.len(), "20261201T194512Z-".len() + 16);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }
}
