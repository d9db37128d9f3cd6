//! One connected broker: the management client, the AMQP connection (opened on first need), and
//! the operations the CLI and the TUI worker share — discover, browse safely, plan and run a
//! replay. Everything that decides uses the pure domain; this layer only fetches and moves.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use regex::Regex;
use tokio::sync::{OnceCell, watch};

use crate::broker::browse::{self, BrowsePage, BrowseRequest};
use crate::broker::config::Target;
use crate::broker::discover;
use crate::broker::management::{Management, ManagementError, Overview, PermissionState, WhoAmI};
use crate::broker::replay::{self, Job, Progress, Summary, TargetKey};
use crate::broker::{amqp, cluster, config};
use crate::domain::convention::Conventions;
use crate::domain::destination;
use crate::domain::discovery::{self, Discovery, ExchangeInfo, RoutingTable};
use crate::domain::explain::{self, Explanation};
use crate::domain::features::{BrokerVersion, QueueType};
use crate::domain::grouping::GroupNote;
use crate::domain::identity;
use crate::domain::ledger::{self, ReadDecision, ReadOutcome, ReadRecord};
use crate::domain::message::DeadLetter;
use crate::domain::quorum::BrowsePolicy;
use crate::domain::replay::{self as plan, ReplayOptions, ReplayPlan};
use crate::domain::sanitize;
use crate::domain::selection::Selection;
use crate::store::Store;

/// Why something could not be done, sorted by what the user should do about it
/// ([`SessionError::is_broker`]). Failures of the layers below keep their typed cause, so callers
/// can match on it and `source()` walks the chain; the text shown is the cause's own.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The management API could not be reached or refused us.
    #[error(transparent)]
    Management(#[from] ManagementError),
    /// AMQP could not be reached or refused us.
    #[error(transparent)]
    Amqp(#[from] amqp::AmqpError),
    /// A read failed: a lost connection is the broker's doing, the rest are refusals.
    #[error(transparent)]
    Browse(#[from] browse::BrowseError),
    /// A replay could not start or broke off.
    #[error(transparent)]
    Replay(#[from] replay::ReplayError),
    /// One AMQP operation on a channel failed (`what` says which).
    #[error("{what}: {source}")]
    Channel {
        what: String,
        #[source]
        source: lapin::Error,
    },
    /// The broker (or the way to it) is not as it must be, found by Warren's own checks: the
    /// two URLs reach different clusters, no AMQP URL is known.
    #[error("{0}")]
    Broker(String),
    /// The request cannot be carried out as asked (e.g. a refused replay).
    #[error("{0}")]
    Refused(String),
    /// Reading `queue` again would cost its messages deliveries: the user must say yes first
    /// (`text` says what it costs), then ask again with [`ReadConsent::ReadAgain`].
    #[error("{text}")]
    NeedsConsent { queue: String, text: String },
}

impl SessionError {
    /// Whether the broker, or the way to it, is what failed (exit code 3) rather than the request
    /// (exit code 1).
    pub fn is_broker(&self) -> bool {
        match self {
            SessionError::Management(_)
            | SessionError::Amqp(_)
            | SessionError::Replay(_)
            | SessionError::Channel { .. }
            | SessionError::Broker(_) => true,
            SessionError::Browse(e) => matches!(e, browse::BrowseError::Connection { .. }),
            SessionError::Refused(_) | SessionError::NeedsConsent { .. } => false,
        }
    }

    fn channel(what: &str) -> impl FnOnce(lapin::Error) -> SessionError + '_ {
        move |source| SessionError::Channel {
            what: what.to_string(),
            source,
        }
    }
}

/// Whether a read may spend deliveries that Warren has spent on the queue before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadConsent {
    /// Use what this session already read from a queue whose reads cost deliveries; read only
    /// where reading is free or Warren has never read the queue.
    Reuse,
    /// The user was told what reading again costs and said yes.
    ReadAgain,
}

/// What this session read from one queue whose reads cost deliveries: the one copy the plan,
/// the dry run, the replay modal and the list after a replay are computed from.
#[derive(Clone, Debug)]
struct KeptRead {
    page: std::sync::Arc<BrowsePage>,
    body_cap: usize,
}

/// A message with its explanation and what Warren remembers of it.
#[derive(Clone, Debug)]
pub struct Explained {
    pub message: DeadLetter,
    pub explanation: Explanation,
    pub key: String,
    pub first_seen: Option<jiff::Timestamp>,
}

pub struct Session {
    pub target: Target,
    pub mgmt: Management,
    pub overview: Overview,
    pub whoami: WhoAmI,
    amqp: OnceCell<lapin::Connection>,
    /// Whether the broker lets this user publish at all in the vhost: asked once per session
    /// (see `broker::rights`).
    pub(crate) publishing: OnceCell<crate::broker::rights::Publishing>,
    /// Where in the context's AMQP URLs the next connection starts: a reconnect after a node
    /// loss starts one further, so it does not wait out the lost node's timeout first.
    amqp_start: std::sync::atomic::AtomicUsize,
    /// Reads of queues whose reads cost deliveries, by queue (see [`KeptRead`]).
    reads: std::sync::Mutex<HashMap<String, KeptRead>>,
    /// One lock per queue: two reads of one queue never overlap (they would split it between
    /// two consumers, and both could spend deliveries before either is kept).
    read_locks: std::sync::Mutex<HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    /// Warren's store for the read ledger, opened on first need; `Err` once it failed.
    ledger: std::sync::Mutex<Option<Result<Store, String>>>,
    /// When depths were last written to the store (seconds; see [`Session::depths_due`]).
    depths_written: std::sync::atomic::AtomicI64,
    /// The dead-letter queues the last discovery found (by vhost and name: a discovery of
    /// every vhost names several): a depth refresh records only theirs.
    dlq_names: std::sync::Mutex<HashSet<(String, String)>>,
}

/// How long the archive's last chunk may take to come when its end is looked for: an empty
/// archive costs this much.
const ARCHIVE_TAIL_IDLE: std::time::Duration = std::time::Duration::from_secs(3);

impl Session {
    /// Connects to the management API (overview and whoami) and checks that the AMQP URLs reach
    /// the same cluster (see `broker::cluster`): a command with two URLs to two brokers would
    /// answer for the wrong one. The AMQP connection itself waits until needed.
    pub async fn open(target: Target) -> Result<Session, SessionError> {
        let mgmt = Management::new(&target)?;
        let (overview, whoami) = tokio::join!(mgmt.overview(), mgmt.whoami());
        let overview = overview?;
        cluster::verify(&target.amqp_urls, &overview, mgmt.active_url())
            .await
            .map_err(SessionError::Broker)?;
        Ok(Session {
            overview,
            whoami: whoami?,
            mgmt,
            target,
            amqp: OnceCell::new(),
            publishing: OnceCell::new(),
            amqp_start: std::sync::atomic::AtomicUsize::new(0),
            reads: std::sync::Mutex::new(HashMap::new()),
            read_locks: std::sync::Mutex::new(HashMap::new()),
            ledger: std::sync::Mutex::new(None),
            depths_written: std::sync::atomic::AtomicI64::new(i64::MIN),
            dlq_names: std::sync::Mutex::new(HashSet::new()),
        })
    }

    pub fn vhost(&self) -> &str {
        &self.target.vhost
    }

    /// "context/vhost", the key under which Warren remembers first-seen times.
    pub fn memory_key(&self) -> String {
        self.memory_key_of(&self.target.vhost)
    }

    /// The broker's version for the quorum rules; an unknown version gets 4.0's cautious rules.
    pub fn version(&self) -> BrokerVersion {
        self.overview.features.rules_version()
    }

    /// The AMQP connection, opened on first use (cluster URLs tried in order).
    pub async fn amqp(&self) -> Result<&lapin::Connection, SessionError> {
        self.amqp
            .get_or_try_init(|| self.connect_amqp("warren"))
            .await
    }

    /// A new AMQP connection (cluster URLs tried in order).
    pub(crate) async fn connect_amqp(&self, name: &str) -> Result<lapin::Connection, SessionError> {
        if self.target.amqp_urls.is_empty() {
            return Err(SessionError::Broker(self.target.no_amqp_url()));
        }
        let n = self.target.amqp_urls.len();
        let start = self.amqp_start.load(std::sync::atomic::Ordering::Relaxed) % n;
        let urls: Vec<String> = (0..n)
            .filter_map(|k| self.target.amqp_urls.get((start + k) % n))
            .map(|u| u.to_string())
            .collect();
        amqp::connect_named(
            &urls,
            &self.target.vhost,
            &self.target.credentials.username,
            self.target.credentials.password.expose(),
            self.target.ca_file.as_deref(),
            name,
        )
        .await
        .map_err(SessionError::from)
    }

    pub async fn discover(&self) -> Result<Discovery, SessionError> {
        let patterns: &[Regex] = &self.target.settings.discovery_patterns;
        let d =
            discover::discover_with(&self.mgmt, self.vhost(), patterns, &self.overview.features)
                .await?;
        self.found_dlqs(std::slice::from_ref(&d));
        Ok(d)
    }

    /// Keeps which queues the discoveries found to be dead-letter queues.
    fn found_dlqs(&self, found: &[Discovery]) {
        let names = found
            .iter()
            .flat_map(|d| &d.dead_letter_queues)
            .map(|q| (q.vhost.clone(), q.name.clone()))
            .collect();
        *self.dlq_names.lock().unwrap_or_else(|e| e.into_inner()) = names;
    }

    /// Whether the last discovery found `queue` of `vhost` to be a dead-letter queue.
    pub fn is_dlq(&self, vhost: &str, queue: &str) -> bool {
        self.dlq_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(vhost.to_string(), queue.to_string()))
    }

    /// The discovery of every vhost the user may see (`--vhost '*'`), from one listing of each
    /// kind (see `discover::discover_all`).
    pub async fn discover_all(&self) -> Result<Vec<(String, Discovery)>, SessionError> {
        let patterns: &[Regex] = &self.target.settings.discovery_patterns;
        let found = discover::discover_all(&self.mgmt, patterns, &self.overview.features).await?;
        let parts: Vec<Discovery> = found.iter().map(|(_, d)| d.clone()).collect();
        self.found_dlqs(&parts);
        Ok(found)
    }

    /// A session of this context in another vhost: the same URLs and credentials (a password
    /// command is not run again), its own AMQP connection and read ledger.
    pub async fn open_in(&self, vhost: &str) -> Result<Session, SessionError> {
        let mut target = self.target.clone();
        target.vhost = vhost.to_string();
        Session::open(target).await
    }

    /// Whether a depth refresh at `now` should be written to the store: one per sample gap.
    pub fn depths_due(&self, now: jiff::Timestamp) -> bool {
        let last = self
            .depths_written
            .load(std::sync::atomic::Ordering::Relaxed);
        now.as_second().saturating_sub(last) >= crate::domain::urgency::SAMPLE_GAP_SECS
    }

    pub fn depths_recorded(&self, now: jiff::Timestamp) {
        self.depths_written
            .store(now.as_second(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The key Warren remembers `vhost` of this context under (see [`Session::memory_key`]).
    pub fn memory_key_of(&self, vhost: &str) -> String {
        format!("{}{}", self.target.context, vhost)
    }

    /// How browsing `queue` must behave: its type and effective delivery limit decide what one
    /// browse costs on this broker version.
    pub async fn browse_policy(
        &self,
        queue: &str,
    ) -> Result<(QueueType, BrowsePolicy, Option<u64>), SessionError> {
        let (info, policy) = self.queue_policy(queue).await?;
        Ok((info.queue_type, policy, info.messages))
    }

    /// [`Session::browse_policy`] with the queue as the management API reports it.
    async fn queue_policy(
        &self,
        queue: &str,
    ) -> Result<(discovery::QueueInfo, BrowsePolicy), SessionError> {
        let info = self.mgmt.queue(self.vhost(), queue).await?;
        let settings = self.settings_of(&info).await?;
        let limit = discovery::effective_delivery_limit(&info, &settings, &self.overview.features);
        let policy = BrowsePolicy::decide_with_margin(
            self.version(),
            &info.queue_type,
            limit,
            self.target.settings.browse.quorum_safety_margin,
        );
        Ok((info, policy))
    }

    /// A queue's effective settings. Where the broker did not report the queue's policy (its
    /// stats lag a few seconds behind a declare or a policy change, measured on 4.3), the
    /// vhost's policies are matched by pattern, as the broker does: a limit must never be
    /// missed because a column was late.
    async fn settings_of(
        &self,
        info: &discovery::QueueInfo,
    ) -> Result<discovery::EffectiveSettings, SessionError> {
        if info.effective_policy.is_some() {
            return Ok(discovery::effective_settings(
                info,
                info.effective_policy.as_ref(),
            ));
        }
        let policies = self.mgmt.policies(self.vhost()).await?;
        Ok(discovery::effective_settings(
            info,
            discovery::policy_definition(info, &policies),
        ))
    }

    /// Reads up to `limit` messages from the head of `queue` and leaves every one of them where
    /// it was (see `broker::browse`).
    pub async fn browse(
        &self,
        queue: &str,
        limit: usize,
        consent: ReadConsent,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        // Never below what message keys hash, so a key means the same message everywhere.
        let cap = self
            .target
            .settings
            .browse
            .body_cap_bytes
            .max(identity::HASHED_BODY);
        self.browse_with_cap(queue, limit, cap, consent).await
    }

    /// [`Session::browse`] keeping up to `body_cap` bytes of each body (`usize::MAX` for an
    /// export, which must be lossless).
    ///
    /// On a queue whose reads cost deliveries the decision is made before anything is consumed:
    /// from what this session already read (reused, never read twice without consent) and from
    /// the read ledger in Warren's store (refused when the next read would bring a message
    /// within the safety margin of its limit; [`SessionError::NeedsConsent`] when Warren has
    /// read the queue before and the caller has not said yes to reading again).
    pub async fn browse_with_cap(
        &self,
        queue: &str,
        limit: usize,
        body_cap: usize,
        consent: ReadConsent,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        let lock = self.read_lock(queue);
        let _reading = wait_for_turn(&lock, queue).await?;
        let (info, policy) = self.queue_policy(queue).await?;
        let (qt, depth) = (info.queue_type.clone(), info.messages);
        let costly = policy.cost_per_browse > 0 && policy.limit.is_some();
        // Where returns are free (4.3+) a lost connection's close still counts: the ledger keeps
        // every quorum queue with a limit, so failed reads are charged there too.
        let ledgered = policy.limit.is_some();
        if costly && consent == ReadConsent::Reuse {
            let kept = self.kept(queue);
            if let Some(k) = kept.filter(|k| k.body_cap >= body_cap) {
                // One copy, which the caller would make anyway to own the messages.
                return Ok(std::sync::Arc::new(BrowsePage {
                    reused: true,
                    ..(*k.page).clone()
                }));
            }
        }
        let record = if ledgered {
            match self.remembered(queue, &info).await {
                Ok(r) => r,
                // Without the ledger nothing remembers earlier reads: treat the queue as read
                // before, so reading asks first.
                Err(_) => Some(ReadRecord {
                    unfinished: true,
                    reads: 1,
                    ..ReadRecord::default()
                }),
            }
        } else {
            None
        };
        let decision = ledger::decide(&policy, record.as_ref());
        match &decision {
            ReadDecision::Refuse(why) => return Err(SessionError::Refused(why.clone())),
            ReadDecision::Again { .. } if consent == ReadConsent::Reuse => {
                return Err(SessionError::NeedsConsent {
                    queue: queue.to_string(),
                    text: decision.cost_text(queue).unwrap_or_default(),
                });
            }
            _ => {}
        }
        let conn = self.amqp().await?;
        let mut req = BrowseRequest::new(queue, qt, policy.clone());
        req.limit = limit;
        req.body_cap = body_cap;
        req.known_depth = depth;
        req.auto_delete = info.auto_delete;
        let version = self.overview.rabbitmq_version.clone();
        let now_ms = || jiff::Timestamp::now().as_millisecond();
        let begun = ledgered.then(|| ledger::begin(&policy, &version, record.as_ref(), now_ms()));
        if let Some(b) = &begun
            && let Err(e) = self.write_record(queue, Some(b))
            && costly
        {
            return Err(e);
        }
        let page = browse::browse(conn, &req).await.map_err(SessionError::from);
        // A failed read leaves the begun record: the worst case, which is what it may have cost.
        let page = std::sync::Arc::new(page?);
        if let Some(b) = &begun {
            let outcome = ReadOutcome {
                delivered: page.delivered,
                max_delivery_count: page.max_delivery_count,
                max_acquired_count: page.max_acquired_count,
                returned_explicitly: page.returned_explicitly,
                stopped: match &page.stopped {
                    browse::StopReason::QuorumSafety { reason, .. } => Some(reason.clone()),
                    _ => None,
                },
            };
            let settled =
                self.write_record(queue, Some(&ledger::finish(&policy, b, &outcome, now_ms())));
            if costly {
                settled?;
                self.keep(
                    queue,
                    KeptRead {
                        page: page.clone(),
                        body_cap,
                    },
                );
            }
        }
        Ok(page)
    }

    /// The policy that makes `queue` free to read (see `domain::protect`); applied unless
    /// `apply` is false. Refused in read-only mode.
    pub async fn protect(
        &self,
        queue: &str,
        apply: bool,
    ) -> Result<crate::domain::protect::ProtectPlan, SessionError> {
        let (info, policies) = tokio::join!(
            self.mgmt.queue(self.vhost(), queue),
            self.mgmt.policies(self.vhost())
        );
        let (info, policies) = (info?, policies?);
        // By name when the broker reported it, else by pattern (the column lags on 4.3).
        let in_force = discovery::policy_in_force(&info, &policies);
        let plan = crate::domain::protect::plan(self.version(), &info, in_force)
            .map_err(SessionError::Refused)?;
        if apply {
            if self.target.read_only {
                return Err(SessionError::Refused(format!(
                    "read-only: context '{}' is opened read-only; protect changes a policy and is disabled",
                    self.target.context
                )));
            }
            self.mgmt.put_policy(self.vhost(), &plan.policy).await?;
        }
        Ok(plan)
    }

    /// What the read that made `page` spent on this broker, in its own terms (`None` where
    /// nothing counts, or the page was reused rather than read). Decided by the queue's policy,
    /// not by the counters seen: 3.x adds `x-delivery-count` only on a redelivery, so a first
    /// read sees none and still spends one delivery of each message.
    pub async fn cost_note(&self, queue: &str, page: &BrowsePage) -> Option<String> {
        if page.reused || page.delivered == 0 {
            return None;
        }
        let (_, policy, _) = self.browse_policy(queue).await.ok()?;
        ledger::cost_note(
            &policy,
            &self.overview.rabbitmq_version,
            page.delivered,
            page.max_delivery_count,
            page.max_acquired_count,
        )
    }

    /// What reading `queue` would cost now, decided without touching it.
    pub async fn read_decision(&self, queue: &str) -> Result<ReadDecision, SessionError> {
        let (info, policy) = self.queue_policy(queue).await?;
        if policy.limit.is_none() {
            return Ok(ledger::decide(&policy, None));
        }
        let record = self.remembered(queue, &info).await.unwrap_or(None);
        Ok(ledger::decide(&policy, record.as_ref()))
    }

    /// Messages that left the queue (replayed) are dropped from what this session read, so the
    /// list after a replay is computed from the read already made rather than by reading again.
    pub fn forget_moved(&self, queue: &str, moved_keys: &crate::broker::spool::Spool) {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(k) = reads.get_mut(queue) {
            // Only where a read is kept, and the set is of the page's keys, read against the
            // moved ones one at a time: a set of a million moved ids is tens of MiB.
            let on_page: HashSet<String> =
                k.page.messages.iter().map(identity::message_key).collect();
            let mut moved: HashSet<String> = HashSet::new();
            let _ = moved_keys.for_each(|key| {
                if on_page.contains(&key) {
                    moved.insert(key);
                }
            });
            let mut page = (*k.page).clone();
            page.messages
                .retain(|m| !moved.contains(&identity::message_key(m)));
            page.queue_depth_at_start = page.queue_depth_at_start.saturating_sub(moved_keys.len());
            k.page = std::sync::Arc::new(page);
        }
    }

    /// A replay's own two connections, consuming and publishing. (One connection with two
    /// channels was measured too: the same CPU per message, no faster: see the README's
    /// Benchmarks.)
    async fn replay_connections(&self) -> Result<(lapin::Connection, lapin::Connection), String> {
        let consume = self
            .connect_amqp("warren-replay-consume")
            .await
            .map_err(|e| e.to_string())?;
        let publish = self
            .connect_amqp("warren-replay-publish")
            .await
            .map_err(|e| e.to_string())?;
        Ok((consume, publish))
    }

    fn read_lock(&self, queue: &str) -> std::sync::Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.read_locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(queue.to_string()).or_default().clone()
    }

    fn kept(&self, queue: &str) -> Option<KeptRead> {
        let reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        reads.get(queue).cloned()
    }

    fn keep(&self, queue: &str, read: KeptRead) {
        let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
        reads.insert(queue.to_string(), read);
    }

    /// Runs `f` on the ledger's store, opening it on first use.
    fn with_ledger<T>(
        &self,
        f: impl FnOnce(&Store) -> crate::store::Result<T>,
    ) -> Result<T, String> {
        let mut slot = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(Store::open_default().map_err(|e| e.to_string()));
        }
        match slot.as_ref() {
            Some(Ok(store)) => f(store).map_err(|e| e.to_string()),
            Some(Err(e)) => Err(e.clone()),
            None => Err("Warren's store is not open".to_string()),
        }
    }

    /// Records `now` as the first-seen time of the messages with `keys` in `queue` not seen
    /// before, and reads what the store remembers of them: first-seen times and how many
    /// audited replays in this context and vhost moved each.
    pub fn remember(
        &self,
        st: &Store,
        queue: &str,
        keys: &[String],
        now: jiff::Timestamp,
    ) -> crate::store::Result<Remembered> {
        // Only an id links a message to its replays: a queue of content hashes costs no scan.
        let ids: Vec<String> = keys
            .iter()
            .filter(|k| identity::is_id_key(k))
            .cloned()
            .collect();
        Ok(Remembered {
            first_seen: st.record_seen(&self.memory_key(), queue, keys, now)?,
            replays: st.replay_counts(&self.target.context, self.vhost(), &ids)?,
        })
    }

    /// Keeps `note` as the note of its group (an empty text removes it) in Warren's store and
    /// mirrors it to the broker's audit stream: the one way a note is set, from `warren groups
    /// --note` and the TUI alike. Returns whether a note is now kept and, when the broker's copy
    /// could not be written, what to tell the operator (the note is then only local).
    pub async fn set_group_note(
        &self,
        note: &GroupNote,
    ) -> Result<(bool, Option<String>), SessionError> {
        // The store is opened and closed before anything is awaited (it is not `Sync`).
        let kept = Store::open_default()
            .and_then(|st| st.set_group_note(&self.memory_key(), note))
            .map_err(|e| SessionError::Refused(format!("the note was not kept: {e}")))?;
        let warning = self
            .mirror_group_note(note)
            .await
            .err()
            .map(|e| e.to_string());
        Ok((kept, warning))
    }

    /// The notes on `queue`'s groups in this context and vhost.
    pub fn group_notes(&self, st: &Store, queue: &str) -> crate::store::Result<Vec<GroupNote>> {
        st.group_notes(&self.memory_key(), queue)
    }

    /// Forgets the notes whose group a look at the whole queue found gone.
    pub fn forget_group_notes(
        &self,
        st: &Store,
        gone: &[&GroupNote],
    ) -> crate::store::Result<usize> {
        st.forget_group_notes(&self.memory_key(), gone)
    }

    /// Appends a group note to the broker's audit stream (kind `note`, event `set`, or
    /// `forget` for an empty text), so the rota sees it in `warren audit`. The config decides,
    /// as for every audit entry, and no one is asked (the TUI cannot): the stream is created
    /// only with `create_audit_stream = true`. A read-only session, or a context with the
    /// stream turned off, publishes nothing: the note stays local and that is no failure.
    /// `Err` says why the broker's copy was not written.
    pub async fn mirror_group_note(&self, note: &GroupNote) -> Result<(), SessionError> {
        use crate::broker::audit::{BrokerRecord, Consent, configured_consent, new_run_id};
        if self.target.read_only || self.target.audit.stream.is_none() {
            return Ok(());
        }
        let consent = match configured_consent(self, false) {
            Some(true) => Consent::Create,
            _ => Consent::Refuse,
        };
        let record = crate::store::NoteRecord {
            at: note.at,
            author: note.author.clone(),
            broker_user: self.whoami.name.clone(),
            context: self.target.context.clone(),
            vhost: self.vhost().to_string(),
            queue: note.queue.clone(),
            by: note.by.as_str().to_string(),
            key: note.key.clone(),
            text: note.text.clone(),
        };
        let event = if note.text.is_empty() {
            "forget"
        } else {
            "set"
        };
        let mut broker = BrokerRecord::open(self, consent).await;
        match broker
            .append("note", event, &new_run_id(note.at), &record)
            .await
        {
            None => Ok(()),
            Some(why) => Err(SessionError::Refused(format!(
                "{why}; the note is kept on this machine only"
            ))),
        }
    }

    /// The queue's ledger record, unless the queue is seen empty by both the management API
    /// and a declare now (see `ledger::forget_when_empty`).
    async fn remembered(
        &self,
        queue: &str,
        info: &discovery::QueueInfo,
    ) -> Result<Option<ReadRecord>, String> {
        let record = self.read_record(queue)?;
        let reported = ledger::Emptiness::reported(
            info.messages,
            info.messages_unacknowledged,
            info.consumers,
        );
        let looked = reported && record.is_some();
        let declared = if looked {
            match self.amqp().await {
                Ok(conn) => browse::declared_empty(conn, queue).await,
                Err(_) => false,
            }
        } else {
            false
        };
        let kept =
            ledger::forget_when_empty(record.clone(), ledger::Emptiness { reported, declared });
        if kept != record {
            // Written back, so that the next look sees the change (a refusal writes nothing).
            let _ = self.write_record(queue, kept.as_ref());
        }
        Ok(kept)
    }

    fn read_record(&self, queue: &str) -> Result<Option<ReadRecord>, String> {
        let key = self.memory_key();
        self.with_ledger(|st| st.read_record(&key, queue))
    }

    /// Writes the ledger. A costly read that cannot be recorded does not happen: nothing would
    /// remember what it cost.
    fn write_record(&self, queue: &str, r: Option<&ReadRecord>) -> Result<(), SessionError> {
        let key = self.memory_key();
        self.with_ledger(|st| st.put_read_record(&key, queue, r))
            .map_err(|e| {
                SessionError::Refused(format!(
                    "reading '{queue}' costs deliveries and Warren cannot record what it spends: {e}. \
                     Set {} to a writable file, or make the queue free to read with `warren protect {queue}`",
                    crate::store::STORE_ENV
                ))
            })
    }

    /// Whether this session may publish a replay's messages, and if not, why — in the words the
    /// user sees. `targets` are the (exchange, routing key) pairs a replay publishes to (`""` is
    /// the default exchange): the broker checks write permission on the exchange of a publish
    /// (and topic permissions on its routing key), not on the queues it reaches.
    ///
    /// Reading permissions through the management API needs the administrator tag. Without it,
    /// each target is tried over AMQP inside a transaction that is rolled back: the broker
    /// checks permission when the publish arrives and refuses it with 403 (closing that
    /// channel), while a permitted message waits for a commit that never comes and is dropped
    /// by the rollback. Nothing is delivered either way.
    pub async fn write_refusal(&self, targets: &[(String, String)]) -> WriteCheck {
        if self.target.read_only {
            return WriteCheck::Refused(format!(
                "read-only: context '{}' {} — replay is disabled",
                self.target.context, "is opened read-only (--read-only or read_only = true)"
            ));
        }
        let user = sanitize::one_line(&self.whoami.name, 100);
        let vhost = sanitize::one_line(self.vhost(), 100);
        // The default exchange's resource name is `amq.default`.
        let resource = |x: &str| {
            if x.is_empty() {
                "amq.default".to_string()
            } else {
                x.to_string()
            }
        };
        let listed = |names: &[String]| {
            names
                .iter()
                .map(|t| format!("'{}'", sanitize::one_line(t, 100)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let why_unreadable = match self.mgmt.permissions(self.vhost()).await {
            Ok(PermissionState::NoneGranted) => {
                return WriteCheck::Refused(format!(
                    "read-only: broker user '{user}' has no permissions on vhost '{vhost}'"
                ));
            }
            Ok(PermissionState::Known(p)) => {
                // RabbitMQ matches permission regexes unanchored, and an empty one means '^$'
                // (nothing). An unparsable one blocks: the broker would decide, Warren refuses.
                let write = (!p.write.is_empty())
                    .then(|| Regex::new(&p.write).ok())
                    .flatten();
                let mut blocked: Vec<String> = targets
                    .iter()
                    .map(|(x, _)| resource(x))
                    .filter(|t| !write.as_ref().is_some_and(|re| re.is_match(t)))
                    .collect();
                blocked.sort();
                blocked.dedup();
                if blocked.is_empty() {
                    return WriteCheck::Allowed;
                }
                return WriteCheck::Refused(format!(
                    "read-only: broker user '{user}' may not publish to exchange {} on vhost '{vhost}' (write permission '{}')",
                    listed(&blocked),
                    sanitize::one_line(&p.write, 100)
                ));
            }
            Ok(PermissionState::Unknown) => {
                "the management API shows permissions only to administrators".to_string()
            }
            Err(e) => format!("the permissions could not be read: {e}"),
        };

        // Ask the broker itself, target by target, on a connection of its own: lapin may give up
        // a connection on which the broker closed a channel, and the replay needs its own.
        let conn = match self.connect_amqp("warren-permission-check").await {
            Ok(c) => c,
            Err(e) => {
                return WriteCheck::Unknown(format!(
                    "{why_unreadable}, and AMQP could not be reached to try: {e}"
                ));
            }
        };
        let mut tried: BTreeSet<(String, String)> = BTreeSet::new();
        let mut blocked: Vec<String> = Vec::new();
        let mut broker_says = String::new();
        let mut unknown: Option<String> = None;
        for (x, rk) in targets {
            if !tried.insert((x.clone(), rk.clone())) {
                continue;
            }
            let shown = sanitize::one_line(&resource(x), 100);
            match trial_publish(&conn, x, rk).await {
                Trial::Accepted => {}
                Trial::Refused(text) => {
                    blocked.push(resource(x));
                    broker_says = sanitize::one_line(&text, 300);
                }
                Trial::Failed(why) => {
                    unknown = Some(format!(
                        "{why_unreadable}, and a trial publish to exchange '{shown}' inside a rolled-back transaction failed: {}",
                        sanitize::one_line(&why, 300)
                    ));
                    break;
                }
            }
        }
        let _ = conn.close(200, "write permission checked".into()).await;
        if let Some(why) = unknown.filter(|_| blocked.is_empty()) {
            return WriteCheck::Unknown(why);
        }
        if blocked.is_empty() {
            return WriteCheck::Allowed;
        }
        blocked.sort();
        blocked.dedup();
        WriteCheck::Refused(format!(
            "read-only: broker user '{user}' may not publish to exchange {} on vhost '{vhost}' (the broker refused a trial publish: {broker_says})",
            listed(&blocked),
        ))
    }
}

/// What [`Session::write_refusal`] found out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteCheck {
    /// Every target may be published to.
    Allowed,
    /// Publishing is refused: nothing may move. The text says why, for the user.
    Refused(String),
    /// Warren could not tell (the text says why). A replay may start, but must stop at the
    /// first publish the broker refuses and report that, not carry on.
    Unknown(String),
}

impl WriteCheck {
    /// The refusal, when there is one.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            WriteCheck::Refused(why) => Some(why),
            _ => None,
        }
    }
}

/// The messages of a page, without a copy unless the session keeps the page too.
pub fn into_messages(page: std::sync::Arc<BrowsePage>) -> Vec<DeadLetter> {
    std::sync::Arc::try_unwrap(page).map_or_else(|shared| shared.messages.clone(), |p| p.messages)
}

/// What the broker did with one trial publish.
pub(crate) enum Trial {
    /// Accepted (and dropped by the rollback).
    Accepted,
    /// Refused: the broker closed the channel over it. The broker's words when Warren saw them.
    Refused(String),
    /// Something else went wrong; nothing can be said about permissions.
    Failed(String),
}

/// Publishes an empty message to `exchange` with `routing_key` inside a transaction and rolls
/// it back. The broker checks write (and topic) permission when the publish arrives and closes
/// the channel with 403 if it is not allowed; a permitted message waits for a commit that never
/// comes and is dropped. The rollback's answer therefore tells: `tx.rollback-ok` means the
/// publish was accepted. When the broker's close arrives before the rollback is sent, lapin
/// fails the rollback locally, without the reason: that is tried again, and if it keeps
/// happening on a live connection, the publish was refused all the same.
pub(crate) async fn trial_publish(
    conn: &lapin::Connection,
    exchange: &str,
    routing_key: &str,
) -> Trial {
    for _ in 0..3 {
        let ch = match conn.create_channel().await {
            Ok(ch) => ch,
            Err(e) => return Trial::Failed(e.to_string()),
        };
        if let Err(e) = ch.tx_select().await {
            return Trial::Failed(e.to_string());
        }
        let result = async {
            ch.basic_publish(
                exchange.into(),
                routing_key.into(),
                lapin::options::BasicPublishOptions::default(),
                b"",
                lapin::BasicProperties::default(),
            )
            .await?;
            ch.tx_rollback().await
        }
        .await;
        match result {
            Ok(()) => {
                let _ = ch.close(200, "write permission checked".into()).await;
                return Trial::Accepted;
            }
            Err(e) => match amqp::soft_error_code(&e) {
                Some((403, text)) => return Trial::Refused(text),
                Some((code, text)) => return Trial::Failed(format!("{text} ({code})")),
                // Closed by the broker before the rollback went out: try again for its words.
                None if conn.status().connected() && !ch.status().connected() => {}
                None => return Trial::Failed(e.to_string()),
            },
        }
    }
    Trial::Refused(
        "the broker closed the channel over the trial publish, without Warren seeing its reason"
            .to_string(),
    )
}

/// Explains messages and records when Warren first saw them.
pub fn explain_all(
    messages: Vec<DeadLetter>,
    memory: &Remembered,
    own: &Conventions,
) -> Vec<Explained> {
    messages
        .into_iter()
        .map(|m| {
            let key = identity::message_key(&m);
            let explanation = explain::explain_with(&m, own, memory.replays_of(&key));
            let first_seen = memory.first_seen.get(&key).copied();
            Explained {
                message: m,
                explanation,
                key,
                first_seen,
            }
        })
        .collect()
}

/// What Warren's store remembers about messages, by key.
#[derive(Clone, Debug, Default)]
pub struct Remembered {
    /// When Warren first saw each message in its queue ("dead since").
    pub first_seen: HashMap<String, jiff::Timestamp>,
    /// How many audited replays moved each message (see `Store::replay_counts`).
    pub replays: HashMap<String, i64>,
}

impl Remembered {
    /// The audited replays of the message with `key`: only an id key links (two messages with
    /// the same content hash may be two messages).
    pub fn replays_of(&self, key: &str) -> i64 {
        if identity::is_id_key(key) {
            self.replays.get(key).copied().unwrap_or(0)
        } else {
            0
        }
    }
}

/// When the message reached its DLQ, by the one rule (`domain::arrival`).
pub fn arrival(e: &Explained) -> crate::domain::arrival::Arrival {
    crate::domain::arrival::Arrival::of(
        &e.explanation.deaths,
        e.explanation.failed_at,
        e.first_seen,
    )
}

/// Age for the filter language and the sort (see [`arrival`]).
pub fn age_secs(e: &Explained, now: jiff::Timestamp) -> Option<u64> {
    arrival(e).age_secs(now)
}

/// The time a message is dated by (see [`arrival`]).
pub fn dead_since(e: &Explained) -> Option<jiff::Timestamp> {
    arrival(e).since()
}

/// What a replay would do, decided before anything moves.
#[derive(Clone, Debug, Default)]
pub struct Preview {
    pub queue: String,
    /// The count the run moves at most: the count the user confirms. For "all" the queue's depth
    /// (capped by `--limit`), else the matches among the messages looked at (capped likewise):
    /// the run stops there, so it never moves more than was confirmed.
    pub selected: u64,
    /// Messages that matched the selection among those looked at.
    pub matched: u64,
    /// Messages looked at (the head of the queue, up to the window).
    pub examined: u64,
    /// They were what this session read before (a queue whose reads cost deliveries is not
    /// read again for a plan): nothing was read now.
    pub reused: bool,
    /// Nothing was read for the plan, and why not (where every message goes was known without
    /// looking: `--to`, or the one queue that dead-letters into the DLQ). Each message is then
    /// planned as the run takes it, and one whose plan points elsewhere stays, reported.
    pub unread: Option<String>,
    /// Nothing was read and the run has several targets, none known without looking: each
    /// target is checked the first time the run meets a message for it (see
    /// [`Session::preview_to_run`]).
    pub checked_as_met: bool,
    /// What the read spent of a delivery limit, in words (`None`: nothing, or reused).
    pub cost: Option<String>,
    pub depth: Option<u64>,
    /// Per target: description → (count, queues it reaches).
    pub targets: BTreeMap<String, TargetPreview>,
    /// Headers removed, and AMQP properties removed as "property expiration".
    pub removed: BTreeSet<String>,
    /// Counter headers set to zero (where the framework or the app reads the header).
    pub reset: BTreeSet<String>,
    pub added: BTreeSet<String>,
    /// Selected messages some of whose retry counters survive the replay (see `Attempts`), and
    /// which counters.
    pub attempts_not_reset: u64,
    pub surviving_counters: BTreeSet<String>,
    /// Selected messages whose framework deadline has passed, per (framework, deadline header).
    /// Without `--clear-expiry` they stay in the DLQ and are not in `selected`.
    pub expired: BTreeMap<(&'static str, &'static str), u64>,
    /// What the plan says about them (`replay::expiry_notice`), one line per framework.
    pub notices: Vec<String>,
    /// Messages that were replayed before and failed again.
    pub replayed_before: u64,
    /// Warnings with counts.
    pub warnings: BTreeMap<String, u64>,
    /// Reasons nothing may move; empty when the replay may go ahead.
    pub refusals: Vec<String>,
    /// Targets checked to exist and allowed.
    pub allowed: HashSet<TargetKey>,
    /// Targets that are wait queues, and the consuming queue each routes back to: a wait queue
    /// is never a replay target (see `domain::destination`).
    pub redirects: BTreeMap<TargetKey, plan::ReplayTarget>,
    /// Selected message keys, for the audit and for a TUI replay of exactly these.
    pub keys: Vec<String>,
    /// Message ids (or keys) per target, for `--dry-run` output.
    pub plans: Vec<(String, ReplayPlan)>,
    /// Audited replays per message key, as remembered for the plan: the run writes the replay
    /// count from them too (a framework's own retry drops `warren-replay-count`).
    pub replays: HashMap<String, i64>,
}

impl Preview {
    /// What the replay would do, in words: the CLI prints these lines before it asks (and for
    /// `--dry-run`), and the TUI's dry run shows the same ones. Terminal-safe and bounded.
    pub fn describe(&self, spec: &ReplaySpec, dry_run: bool) -> Vec<String> {
        use sanitize::one_line;
        const CELL: usize = 120;
        let verb = if dry_run { "Would replay" } else { "Replay" };
        let depth = self
            .depth
            .map(|d| format!(" (queue holds {d})"))
            .unwrap_or_default();
        let looked = if let Some(why) = &self.unread {
            format!(" — nothing read first: {}", one_line(why, 200))
        } else if self.examined < self.depth.unwrap_or(0) {
            format!(" — matched among the first {} looked at", self.examined)
        } else {
            String::new()
        };
        let mut out = vec![format!(
            "{verb} {} message(s) from {}{depth}{looked}; selection: {}",
            self.selected,
            one_line(&self.queue, 80),
            one_line(&spec.selection.describe(), 200)
        )];
        for (label, t) in &self.targets {
            out.push(format!(
                "  {:>6} → {} via exchange '{}' key '{}' — reaches {}{}",
                t.count,
                one_line(label, 80),
                one_line(&t.exchange, 60),
                one_line(&t.routing_key, 60),
                if t.reaches.is_empty() {
                    "no queue".to_string()
                } else {
                    one_line(&t.reaches.join(", "), CELL)
                },
                if t.exact { "" } else { " (possibly)" }
            ));
        }
        if self.unread.is_some() && !spec.keep_attempts {
            out.push(
                "  removes  the death records and retry counters each message carries".to_string(),
            );
        } else if !self.removed.is_empty() {
            out.push(format!(
                "  removes  {}",
                one_line(
                    &self.removed.iter().cloned().collect::<Vec<_>>().join(", "),
                    400
                )
            ));
        }
        out.push(format!(
            "  adds     {}",
            one_line(
                &self.added.iter().cloned().collect::<Vec<_>>().join(", "),
                400
            )
        ));
        if !self.reset.is_empty() {
            out.push(format!(
                "  resets   {} (to 0: its reader expects the header)",
                one_line(
                    &self.reset.iter().cloned().collect::<Vec<_>>().join(", "),
                    400
                )
            ));
        }
        // "Reset" only when every counter Warren knows of was.
        let attempts = if spec.keep_attempts {
            "kept".to_string()
        } else if self.unread.is_some() {
            "decided per message as the run takes it (--dry-run reads the head and shows them)"
                .to_string()
        } else if self.attempts_not_reset == 0 {
            "reset".to_string()
        } else {
            format!(
                "not reset for {} of them: {} survive{}",
                self.attempts_not_reset,
                one_line(
                    &self
                        .surviving_counters
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    200
                ),
                if self.surviving_counters.len() == 1 {
                    "s"
                } else {
                    ""
                }
            )
        };
        out.push(format!("  body     untouched; attempts {attempts}"));
        for n in &self.notices {
            out.push(format!("  ! {}", one_line(n, 400)));
        }
        if self.replayed_before > 0 {
            out.push(format!(
                "  ! {} of them were replayed before and failed again",
                self.replayed_before
            ));
        }
        for (w, n) in &self.warnings {
            out.push(format!("  ! {n} × {}", one_line(w, 300)));
        }
        for r in &self.refusals {
            out.push(format!("  ✗ {}", one_line(r, 400)));
        }
        out
    }

    /// Where the run publishes: the checked targets, after wait queues were replaced by the
    /// queue they lead back to. Write permission is checked on exactly these.
    pub fn publish_targets(&self) -> Vec<TargetKey> {
        let mut t: Vec<TargetKey> = self.allowed.iter().cloned().collect();
        t.sort();
        t
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetPreview {
    pub exchange: String,
    pub routing_key: String,
    pub count: u64,
    /// Body bytes of the messages going there (for byte limits).
    pub bytes: u64,
    pub reaches: Vec<String>,
    /// False when the bindings could not decide exactly (headers exchanges).
    pub exact: bool,
    /// Where the messages come to rest when that is not the queue first reached (through wait
    /// queues), with the wait queues passed on the way.
    pub rests_in: Option<String>,
    pub via: Vec<String>,
    /// The routing keys these messages had when they died in the target queue (from x-death):
    /// the keys a wait queue dead-letters them on with, when it has no routing key of its own.
    pub death_keys: BTreeSet<String>,
}

/// How to replay, as the user asked.
#[derive(Clone, Debug)]
pub struct ReplaySpec {
    pub queue: String,
    pub selection: Selection,
    pub limit: Option<u64>,
    pub rate: Option<f64>,
    pub to: Option<String>,
    pub allow_fan_out: bool,
    pub keep_attempts: bool,
    /// Replay messages whose framework deadline has passed, without the deadline.
    pub clear_expiry: bool,
    pub window: usize,
    /// Whether looking at the queue may spend deliveries Warren has spent before.
    pub consent: ReadConsent,
    /// The run's globally unique id (see `broker::audit::new_run_id`), written into each
    /// replayed message as `warren-replay-id` and recorded in the audit.
    pub run_id: Option<String>,
}

/// A plan before its targets are checked (see [`Session::check_targets`]).
struct Looked {
    p: Preview,
    /// The DLQ's depth when the plan was made.
    depth: u64,
    /// Selected messages that stay because their framework would discard them.
    staying: u64,
    /// Selected messages from a MassTransit `_skipped` queue.
    skipped: usize,
}

/// What the plan says when several targets are checked as the run meets them.
pub const CHECKED_AS_MET: &str = "targets are checked as they are first met";

/// Whether a plan that cannot know its one target without looking may still read nothing
/// first, checking each target as the run first meets it: all of the queue is replayed (the
/// count then comes from the queue; a filter or group is counted among messages looked at),
/// and it is not a MassTransit `_skipped` queue (refused by what its messages say).
fn checks_as_met(spec: &ReplaySpec) -> bool {
    matches!(spec.selection, Selection::All)
        && spec.to.is_none()
        && !spec.queue.ends_with("_skipped")
}

impl Session {
    /// Looks at the head of the DLQ (as a browse: nothing moves; on a queue whose reads cost
    /// deliveries, what this session already read), plans each selected message, follows every
    /// target to where it comes to rest and checks it can take the messages, and says what would
    /// happen and whether it is allowed.
    pub async fn preview(
        &self,
        spec: &ReplaySpec,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Preview, SessionError> {
        let looked = self.look(spec, remember).await?;
        self.checked_targets(spec, looked).await
    }

    /// [`Session::check_targets`], refused up front on an auto-delete DLQ (see
    /// [`browse::auto_delete_refusal`]), so the plan says so before anything is confirmed.
    async fn checked_targets(
        &self,
        spec: &ReplaySpec,
        looked: Looked,
    ) -> Result<Preview, SessionError> {
        let info = self.mgmt.queue(self.vhost(), &spec.queue).await?;
        let mut p = self.check_targets(spec, looked).await?;
        if info.auto_delete {
            p.refusals
                .push(browse::auto_delete_refusal(&spec.queue, "replay"));
        }
        Ok(p)
    }

    /// The plan for a run about to start: as [`Session::preview`], but nothing is read first
    /// when where every message goes is known without looking (see [`Session::known_target`]).
    /// The count confirmed is then the queue's depth (a passive declare), each message is
    /// planned as the run takes it, and a message whose own plan points somewhere that was not
    /// checked here stays in the DLQ and is reported — never published unchecked.
    pub async fn preview_to_run(
        &self,
        spec: &ReplaySpec,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Preview, SessionError> {
        let looked = match self.known_target(spec).await? {
            Some((target, why)) => self.unread(spec, Some(target), why).await?,
            None if checks_as_met(spec) => {
                let mut looked = self.unread(spec, None, CHECKED_AS_MET.to_string()).await?;
                looked.p.checked_as_met = true;
                looked
            }
            None => self.look(spec, remember).await?,
        };
        self.checked_targets(spec, looked).await
    }

    /// The check of one target a run met first (see [`Preview::checked_as_met`]): the plan's
    /// checks, as if every message of the run (`count`, `bytes`) went there. `Ok`: where a
    /// wait queue sends them instead, if it is one; `Err`: why its messages stay in the DLQ.
    async fn check_met(
        &self,
        spec: &ReplaySpec,
        req: &replay::CheckRequest,
        count: u64,
        bytes: u64,
    ) -> Result<Option<plan::ReplayTarget>, String> {
        let target = &req.target;
        let label = replay::check_name(target);
        let failed =
            |e: SessionError| format!("checking {label} failed: {e}; its messages stay in the DLQ");
        let (exchanges, bindings) = tokio::join!(
            self.mgmt.exchanges(self.vhost()),
            self.mgmt.bindings(self.vhost())
        );
        let exchanges: Vec<ExchangeInfo> = exchanges.map_err(|e| failed(e.into()))?;
        let bindings = bindings.map_err(|e| failed(e.into()))?;
        let table = RoutingTable::new(&exchanges, &bindings);
        let conn = self.amqp().await.map_err(failed)?;
        let mut t = TargetPreview {
            exchange: target.0.clone(),
            routing_key: target.1.clone(),
            count,
            bytes,
            death_keys: req.death_key.iter().cloned().collect(),
            ..Default::default()
        };
        let mut p = Preview::default();
        self.check_target(spec, &label, &mut t, &table, conn, &mut p)
            .await
            .map_err(failed)?;
        if p.allowed.is_empty() {
            return Err(format!(
                "{}; its messages stay in the DLQ",
                p.refusals.join("; ")
            ));
        }
        Ok(p.redirects.get(target).cloned())
    }

    /// Where every message of the replay goes, when that is known without reading the queue,
    /// and how it is known: all of the queue is replayed and `--to` names the target, or the
    /// DLQ is fed by the dead-lettering of exactly one queue (discovery), where broker
    /// dead-lettered messages go back. `None`: the plan must look at the messages.
    async fn known_target(
        &self,
        spec: &ReplaySpec,
    ) -> Result<Option<(plan::ReplayTarget, String)>, SessionError> {
        if !matches!(spec.selection, Selection::All) {
            return Ok(None);
        }
        let direct = |q: &str| plan::ReplayTarget {
            exchange: String::new(),
            routing_key: q.to_string(),
            expected_queue: Some(q.to_string()),
        };
        if let Some(to) = &spec.to {
            return Ok(Some((
                direct(to),
                format!("--to names '{}'", sanitize::one_line(to, 100)),
            )));
        }
        // A MassTransit _skipped queue is refused by what its messages say: look at them.
        if spec.queue.ends_with("_skipped") {
            return Ok(None);
        }
        let d = self.discover().await?;
        let Some(dlq) = d.dlq(&spec.queue) else {
            return Ok(None);
        };
        match dlq.feeders.as_slice() {
            [one] if !dlq.feeders_uncertain => Ok(Some((
                direct(one),
                format!(
                    "only '{}' dead-letters into it",
                    sanitize::one_line(one, 100)
                ),
            ))),
            _ => Ok(None),
        }
    }

    /// A plan made without reading the queue: every message to `target`, the count from the
    /// queue itself.
    async fn unread(
        &self,
        spec: &ReplaySpec,
        target: Option<plan::ReplayTarget>,
        why: String,
    ) -> Result<Looked, SessionError> {
        // The queue's own figure, over AMQP (the management one is a sample).
        let info = self.mgmt.queue(self.vhost(), &spec.queue).await?;
        let conn = self.amqp().await?;
        let depth = queue_depth(conn, &spec.queue).await?.ok_or_else(|| {
            SessionError::Refused(format!(
                "queue '{}' does not exist in vhost '{}'",
                sanitize::one_line(&spec.queue, 100),
                sanitize::one_line(self.vhost(), 100)
            ))
        })?;
        let selected = spec.limit.map_or(depth, |l| l.min(depth));
        // Bytes for a byte limit at the target: the sampled average, scaled to the count.
        let bytes = match (info.message_bytes, info.messages) {
            (Some(b), Some(m)) if m > 0 => b.saturating_mul(selected) / m,
            (Some(b), _) => b,
            _ => 0,
        };
        let mut p = Preview {
            queue: spec.queue.clone(),
            selected,
            depth: Some(depth),
            unread: Some(why),
            added: plan::ADDED_HEADERS.iter().map(|h| h.to_string()).collect(),
            ..Default::default()
        };
        if let Some(target) = target {
            let label = target.expected_queue.clone().unwrap_or_else(|| {
                format!(
                    "exchange '{}' key '{}'",
                    target.exchange, target.routing_key
                )
            });
            p.targets.insert(
                label,
                TargetPreview {
                    exchange: target.exchange,
                    routing_key: target.routing_key,
                    count: selected,
                    bytes,
                    ..Default::default()
                },
            );
        }
        Ok(Looked {
            p,
            depth,
            staying: 0,
            skipped: 0,
        })
    }

    /// The first half of a plan: reads the head of the queue and plans each selected message.
    async fn look(
        &self,
        spec: &ReplaySpec,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Looked, SessionError> {
        let window = spec.window.max(1);
        // Up to 10,000 messages are looked at: keep bodies short (the engine re-reads each
        // message whole and decides on the whole body).
        let page = self
            .browse_with_cap(&spec.queue, window, identity::HASHED_BODY, spec.consent)
            .await?;
        let cost = self.cost_note(&spec.queue, &page).await;
        let (reused, depth) = (page.reused, page.queue_depth_at_start);
        let mut looked = self.look_at(spec, into_messages(page), depth, remember);
        looked.p.reused = reused;
        looked.p.cost = cost;
        Ok(looked)
    }

    /// [`preview`](Self::preview) of messages already read: the head of `spec.queue`, which held
    /// `depth` (or messages taken from the archive, for `warren restore --replay`).
    pub async fn preview_of(
        &self,
        spec: &ReplaySpec,
        messages: Vec<DeadLetter>,
        depth: u64,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Preview, SessionError> {
        let looked = self.look_at(spec, messages, depth, remember);
        self.check_targets(spec, looked).await
    }

    /// Plans each selected message of `messages`, the head of a queue that held `depth`.
    fn look_at(
        &self,
        spec: &ReplaySpec,
        messages: Vec<DeadLetter>,
        depth: u64,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Looked {
        let keys: Vec<String> = messages.iter().map(identity::message_key).collect();
        let memory = remember(&keys);
        let now = jiff::Timestamp::now();
        let mut p = Preview {
            queue: spec.queue.clone(),
            examined: messages.len() as u64,
            depth: Some(depth),
            ..Default::default()
        };
        let explained = explain_all(messages, &memory, &self.target.settings.conventions);
        p.replays = memory.replays.clone();
        let opts = ReplayOptions {
            keep_attempts: spec.keep_attempts,
            clear_expiry: spec.clear_expiry,
            target_queue: spec.to.clone(),
            now,
            run_id: None,
        };
        // Selected messages that stay in the DLQ because their framework would discard them.
        let mut staying = 0u64;
        for e in &explained {
            if spec.limit.is_some_and(|l| p.matched - staying >= l) {
                break;
            }
            if !spec
                .selection
                .selects(&e.message, &e.explanation, &e.key, age_secs(e, now))
            {
                continue;
            }
            p.matched += 1;
            p.keys.push(e.key.clone());
            let rp = plan::plan(&e.message, &e.explanation, &opts);
            if let Some(x) = &rp.expired {
                *p.expired.entry((x.framework, x.header)).or_insert(0) += 1;
                if !x.cleared {
                    // It stays in the DLQ: nothing of its plan happens.
                    staying += 1;
                    continue;
                }
            }
            p.removed.extend(rp.removed.iter().cloned());
            p.reset.extend(rp.reset.iter().cloned());
            p.removed.extend(
                rp.removed_properties
                    .iter()
                    .map(|n| format!("property {n}")),
            );
            if let plan::Attempts::NotReset(c) = &rp.attempts {
                p.attempts_not_reset += 1;
                p.surviving_counters.extend(c.iter().cloned());
            }
            p.added.extend(rp.added.iter().map(|(k, _)| k.clone()));
            if rp.replay_count > 1 {
                p.replayed_before += 1;
            }
            for w in &rp.warnings {
                *p.warnings.entry(w.to_string()).or_insert(0) += 1;
            }
            match &rp.target {
                Some(t) => {
                    let label = t.expected_queue.clone().unwrap_or_else(|| {
                        format!("exchange '{}' key '{}'", t.exchange, t.routing_key)
                    });
                    let entry = p.targets.entry(label).or_insert_with(|| TargetPreview {
                        exchange: t.exchange.clone(),
                        routing_key: t.routing_key.clone(),
                        ..Default::default()
                    });
                    entry.count += 1;
                    entry.bytes += e.message.body_size;
                    if let Some(k) = e.explanation.deaths.routing_key_in(&t.routing_key)
                        && t.exchange.is_empty()
                    {
                        entry.death_keys.insert(k.to_string());
                    }
                }
                None => {
                    *p.warnings
                        .entry("no known origin: these stay unless --to names a queue".into())
                        .or_insert(0) += 1;
                }
            }
            p.plans.push((
                e.message
                    .properties
                    .message_id
                    .clone()
                    .unwrap_or_else(|| e.key.clone()),
                rp,
            ));
        }
        // The count confirmed is the count that moves: "all" is the queue as it stands (the run
        // stops at the depth it started with), a selection is what matched here. Messages whose
        // framework would discard them stay (unless their deadline is cleared).
        let all = matches!(spec.selection, Selection::All);
        p.selected = if all && p.examined < depth {
            spec.limit.map_or(depth, |l| l.min(depth))
        } else {
            p.matched
        };
        p.selected = p.selected.saturating_sub(staying);
        p.notices = p
            .expired
            .iter()
            .map(|((framework, header), n)| {
                plan::expiry_notice(framework, header, *n, p.matched, spec.clear_expiry)
            })
            .collect();
        if p.selected > p.matched {
            *p.warnings
                .entry(format!(
                    "only the first {} of {} were looked at: the rest go where their own plan says, and one whose target was not checked here stays in the DLQ and is reported",
                    p.examined, depth
                ))
                .or_insert(0) += 1;
        } else if !all && p.examined < depth {
            *p.warnings
                .entry(format!(
                    "the selection was matched against the first {} of {} messages: the run moves these {} and leaves later matches for another replay",
                    p.examined, depth, p.matched
                ))
                .or_insert(0) += 1;
        }
        let skipped = explained
            .iter()
            .filter(|e| {
                e.explanation.skipped
                    && spec
                        .selection
                        .selects(&e.message, &e.explanation, &e.key, age_secs(e, now))
            })
            .count();
        Looked {
            p,
            depth,
            staying,
            skipped,
        }
    }

    /// The second half of a plan: follows every target to where it comes to rest and checks it
    /// can take the messages (see [`Session::preview`]).
    async fn check_targets(
        &self,
        spec: &ReplaySpec,
        looked: Looked,
    ) -> Result<Preview, SessionError> {
        let Looked {
            mut p,
            depth,
            staying,
            skipped,
        } = looked;
        // Where each target routes, per the broker's bindings, and where it comes to rest.
        let (exchanges, bindings) = tokio::join!(
            self.mgmt.exchanges(self.vhost()),
            self.mgmt.bindings(self.vhost())
        );
        let exchanges: Vec<ExchangeInfo> = exchanges?;
        let bindings = bindings?;
        let table = RoutingTable::new(&exchanges, &bindings);
        let conn = self.amqp().await?;
        let mut targets = std::mem::take(&mut p.targets);
        for (label, t) in targets.iter_mut() {
            self.check_target(spec, label, t, &table, conn, &mut p)
                .await?;
        }
        p.targets = targets;
        for (_, rp) in p.plans.iter_mut() {
            plan::apply_redirect(rp, &p.redirects);
        }
        if skipped > 0 && spec.to.is_none() {
            p.refusals.push(format!(
                "{skipped} message(s) come from a MassTransit _skipped queue: no consumer on that endpoint handles their type, so replaying them there skips them again. Deploy the consumer first, or send them to the endpoint that has it with --to"
            ));
        }
        // The run reads the queue too: what it does not move is handed back, which costs a
        // quorum message a delivery where returns count. Say so where a person confirms.
        let (_, quorum, _) = self.browse_policy(&spec.queue).await?;
        if let Some(limit) = quorum.limit.filter(|_| quorum.cost_per_browse > 0)
            && p.selected < depth
        {
            *p.warnings
                .entry(format!(
                    "the replay reads past what it moves: each message it hands back costs {} deliver{} of the queue's limit of {limit}",
                    quorum.cost_per_browse,
                    if quorum.cost_per_browse == 1 { "y" } else { "ies" }
                ))
                .or_insert(0) += depth - p.selected;
        }
        if spec.queue.contains("parking") {
            *p.warnings
                .entry("this is a parking lot: messages that could not be decoded fail identically until the reading code changes; replaying before that deploy is churn".into())
                .or_insert(0) += 1;
        }
        if p.selected == 0 && staying > 0 {
            p.refusals.push(format!(
                "every selected message has passed its framework's deadline, which would discard it unrun; replay with --clear-expiry to remove the deadline ({})",
                p.notices.join("; ")
            ));
        } else if p.selected == 0 {
            p.refusals
                .push("no message matches the selection at the head of the queue".into());
        }
        Ok(p)
    }

    /// Checks one target of a plan: it can be published to, exists, reaches exactly one queue
    /// (or fan-out is allowed), is not the DLQ itself; a wait queue is followed to where it
    /// leads (a redirect), and the queue where the messages rest must have room for `t.count`.
    /// What is wrong goes into `p.refusals`, what to know into `p.warnings`; a target that
    /// passes goes into `p.allowed` (after its redirect).
    async fn check_target(
        &self,
        spec: &ReplaySpec,
        label: &str,
        t: &mut TargetPreview,
        table: &RoutingTable<'_>,
        conn: &lapin::Connection,
        p: &mut Preview,
    ) -> Result<(), SessionError> {
        let routing = table.route(&t.exchange, &t.routing_key);
        t.reaches = routing.queues;
        t.exact = routing.exact;
        let mut ok = true;
        // Targets come from headers and bodies (a Spring routing key, a Sneakers queue):
        // a name AMQP cannot carry holds that target's messages, with the reason.
        let too_long = amqp::short("the exchange name", &t.exchange)
            .and(amqp::short("the routing key", &t.routing_key))
            .err();
        if let Some(e) = too_long {
            let mut shown: String = label.chars().take(60).collect();
            if shown.len() < label.len() {
                shown.push('…');
            }
            p.refusals.push(format!(
                "{shown} cannot be published to: {e}; its messages stay in the DLQ"
            ));
            ok = false;
        } else if t.exchange.is_empty() {
            if !queue_exists(conn, &t.routing_key).await? {
                p.refusals.push(format!(
                    "target queue '{}' does not exist in vhost '{}'",
                    t.routing_key,
                    self.vhost()
                ));
                ok = false;
            }
        } else if !exchange_exists(conn, &t.exchange).await? {
            p.refusals.push(format!(
                "target exchange '{}' does not exist in vhost '{}'",
                t.exchange,
                self.vhost()
            ));
            ok = false;
        }
        if ok && t.reaches.len() == 1 {
            let first = t.reaches[0].clone();
            // A wait queue without a dead-letter routing key sends each message on with the
            // key it had when it entered: follow every such key; they must agree.
            let keys: Vec<String> = if t.death_keys.is_empty() {
                vec![t.routing_key.clone()]
            } else {
                t.death_keys.iter().cloned().collect()
            };
            let mut rests: BTreeMap<String, Vec<String>> = BTreeMap::new();
            let mut lost = None;
            for k in &keys {
                match self.rest_of(&first, k, table).await? {
                    Rest::Queue { queue, via } => {
                        rests.insert(queue, via);
                    }
                    Rest::Lost(why) => lost = Some(why),
                }
            }
            let rest = match (lost, rests.len()) {
                (Some(why), _) => Rest::Lost(why),
                (None, 1) => rests
                    .into_iter()
                    .next()
                    .map_or(Rest::Lost("no resting place".into()), |(queue, via)| {
                        Rest::Queue { queue, via }
                    }),
                (None, _) => Rest::Lost(format!(
                    "the wait queue '{first}' sends these back to {} different queues ({}); replay each group with --to",
                    rests.len(),
                    rests.keys().cloned().collect::<Vec<_>>().join(", ")
                )),
            };
            match rest {
                Rest::Queue { queue, via } => {
                    if !via.is_empty() {
                        // A wait queue is never the target: the consuming queue is, through
                        // the default exchange (which reaches exactly that queue).
                        p.redirects.insert(
                            (t.exchange.clone(), t.routing_key.clone()),
                            plan::ReplayTarget {
                                exchange: String::new(),
                                routing_key: queue.clone(),
                                expected_queue: Some(queue.clone()),
                            },
                        );
                        *p.warnings
                            .entry(format!(
                                "{label} is a wait queue ({}): these go straight to '{queue}', where it sends them back",
                                via.join(" → ")
                            ))
                            .or_insert(0) += t.count;
                        t.reaches = vec![queue.clone()];
                        t.rests_in = Some(queue.clone());
                        t.via = via;
                    }
                    match self.room_in(conn, &queue, t.count, t.bytes).await? {
                        Some(Err(why)) => {
                            p.refusals.push(why);
                            ok = false;
                        }
                        Some(Ok(warning)) => {
                            *p.warnings.entry(warning).or_insert(0) += t.count;
                        }
                        None => {}
                    }
                }
                Rest::Lost(why) => {
                    p.refusals.push(format!("{label}: {why}"));
                    ok = false;
                }
            }
        }
        if t.reaches.contains(&spec.queue) {
            p.refusals.push(format!(
                "{label} leads back into '{}' itself: replaying a DLQ into itself is refused",
                spec.queue
            ));
            ok = false;
        }
        if t.reaches.is_empty() && ok {
            p.refusals.push(format!(
                "{label} reaches no queue: the broker would return every message"
            ));
            ok = false;
        }
        if t.reaches.len() > 1 && !spec.allow_fan_out && spec.to.is_none() {
            p.refusals.push(format!(
                "{label} would reach {} queues ({}): name one with --to, or allow it with --allow-fan-out",
                t.reaches.len(),
                t.reaches.join(", ")
            ));
            ok = false;
        }
        if ok {
            let key = (t.exchange.clone(), t.routing_key.clone());
            let key = p
                .redirects
                .get(&key)
                .map_or(key, |r| (r.exchange.clone(), r.routing_key.clone()));
            p.allowed.insert(key);
        }
        Ok(())
    }

    /// Whether `queue` has room for `count` more messages of `bytes` in all (see
    /// `domain::destination::room_verdict`): `Some(Err)` refuses (the broker would drop or
    /// dead-letter others), `Some(Ok)` warns, `None` fits. Every operation that publishes into a
    /// queue asks this before it starts.
    pub async fn room_in(
        &self,
        conn: &lapin::Connection,
        queue: &str,
        count: u64,
        bytes: u64,
    ) -> Result<Option<Result<String, String>>, SessionError> {
        let mut info = self.mgmt.queue(self.vhost(), queue).await?;
        let settings = self.settings_of(&info).await?;
        // The room check counts on the broker's own figure, over AMQP: the management one is a
        // sample up to a stats interval old (3.10 said 67 in a queue capped at 30), and a stale
        // low figure would let drop-head discard messages. The passive count is the ready
        // messages, which is what max-length limits. Bytes have no live source; they stay
        // sampled.
        if let Some(depth) = queue_depth(conn, queue).await? {
            info.messages = Some(depth);
        }
        let room = destination::check_room(&info, &settings, count.max(1), bytes);
        Ok(destination::room_verdict(queue, count, &room))
    }

    /// Follows a publish into `queue` with `routing_key` through wait queues to the queue where
    /// it comes to rest (see `domain::destination`).
    async fn rest_of(
        &self,
        queue: &str,
        routing_key: &str,
        table: &RoutingTable<'_>,
    ) -> Result<Rest, SessionError> {
        let mut current = queue.to_string();
        let mut key = routing_key.to_string();
        let mut via = Vec::new();
        for _ in 0..destination::MAX_HOPS {
            let info = match self.mgmt.queue(self.vhost(), &current).await {
                Ok(i) => i,
                Err(e) if via.is_empty() => return Err(e.into()),
                Err(_) => {
                    return Ok(Rest::Lost(format!(
                        "after the wait queue(s) {} it would go to '{current}', which does not exist",
                        via.join(" → ")
                    )));
                }
            };
            let settings = self.settings_of(&info).await?;
            match destination::step(&info, &settings, &key, table) {
                destination::Step::Rest => {
                    return Ok(Rest::Queue {
                        queue: current,
                        via,
                    });
                }
                destination::Step::Wait {
                    next, routing_key, ..
                } => {
                    via.push(current);
                    if via.contains(&next) {
                        return Ok(Rest::Lost(format!(
                            "the wait queues {} send it round in a loop",
                            via.join(" → ")
                        )));
                    }
                    current = next;
                    key = routing_key;
                }
                destination::Step::Dropped { why } => return Ok(Rest::Lost(why)),
                destination::Step::Ambiguous { queues } => {
                    return Ok(Rest::Lost(format!(
                        "the wait queue '{current}' sends it on to {} queues ({}); name the one that consumes it with --to",
                        queues.len(),
                        queues.join(", ")
                    )));
                }
            }
        }
        Ok(Rest::Lost(format!(
            "more than {} wait queues in a row ({}): Warren does not follow further",
            destination::MAX_HOPS,
            via.join(" → ")
        )))
    }

    /// Runs a replay that `preview` allowed. The caller checked read-only and wrote the audit.
    pub async fn replay(
        &self,
        spec: &ReplaySpec,
        preview: &Preview,
        first_seen: HashMap<String, jiff::Timestamp>,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress),
    ) -> Result<Summary, SessionError> {
        let work = Work {
            action: replay::Action::Replay,
            // Never more than the count the user confirmed.
            limit: spec
                .limit
                .map_or(preview.selected, |l| l.min(preview.selected)),
            allowed_targets: preview.allowed.clone(),
            redirects: preview.redirects.clone(),
            replays: preview.replays.clone(),
            first_seen,
            planned_unread: preview.unread.is_some(),
            check_as_met: preview.checked_as_met,
            bytes: preview.targets.values().map(|t| t.bytes).sum(),
        };
        self.run_job(spec, work, cancel, on_progress).await
    }

    /// Runs the engine on `spec.queue` with `work`'s action: a replay, an archive or a discard,
    /// with the same guarantees (acknowledged only after the confirm, or for a discard only
    /// what its snapshot holds; everything else handed back). The caller checked read-only and
    /// wrote the audit.
    pub async fn run_job(
        &self,
        spec: &ReplaySpec,
        work: Work,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress),
    ) -> Result<Summary, SessionError> {
        if self.target.read_only {
            return Err(SessionError::Refused(format!(
                "read-only: context '{}' is opened read-only (--read-only or read_only = true); nothing may leave a queue",
                self.target.context
            )));
        }
        // The last line behind `ops::rights`: a user the broker lets read but not publish takes
        // nothing off a queue, whoever calls.
        if let crate::broker::rights::Publishing::Refused(why) = self.publishing().await {
            return Err(SessionError::Refused(format!(
                "read-only: {why}; nothing may leave a queue"
            )));
        }
        let lock = self.read_lock(&spec.queue);
        let _reading = wait_for_turn(&lock, &spec.queue).await?;
        let (info, quorum) = self.queue_policy(&spec.queue).await?;
        if info.auto_delete {
            let verb = work.action.verb();
            return Err(SessionError::Refused(browse::auto_delete_refusal(
                &spec.queue,
                verb,
            )));
        }
        let queue_type = info.queue_type.clone();
        let planned_unread = work.planned_unread;
        let job = Job {
            action: work.action,
            dlq: spec.queue.clone(),
            selection: spec.selection.clone(),
            limit: Some(work.limit),
            rate: spec.rate,
            window: spec.window,
            keep_attempts: spec.keep_attempts,
            clear_expiry: spec.clear_expiry,
            to: spec.to.clone(),
            allowed_targets: work.allowed_targets,
            redirects: work.redirects,
            replays: work.replays,
            first_seen: work.first_seen,
            quorum: quorum.clone(),
            settle_lag: crate::domain::features::settle_lag(&queue_type),
            conventions: self.target.settings.conventions.clone(),
            run_id: spec.run_id.clone(),
            message_bytes: match (info.message_bytes, info.messages) {
                (Some(b), Some(m)) if m > 0 => Some(b / m),
                _ => None,
            },
            checks: None,
        };
        let (checks_tx, mut checks_rx) = tokio::sync::mpsc::channel::<replay::CheckRequest>(1);
        let mut job = job;
        if work.check_as_met {
            job.checks = Some(checks_tx);
        } else {
            drop(checks_tx);
        }
        // The engine hands back what it does not move: on a queue whose reads cost deliveries
        // that is a read too, recorded in the ledger like one (the worst case first).
        let costly = quorum.cost_per_browse > 0 && quorum.limit.is_some();
        let version = self.overview.rabbitmq_version.clone();
        let now_ms = || jiff::Timestamp::now().as_millisecond();
        let prior = if costly {
            self.remembered(&spec.queue, &info).await.ok().flatten()
        } else {
            None
        };
        let begun = costly.then(|| ledger::begin(&quorum, &version, prior.as_ref(), now_ms()));
        if let Some(b) = &begun {
            self.write_record(&spec.queue, Some(b))?;
        }
        // Consuming and publishing get connections of their own for the run (see
        // `replay::run_split`); after a node loss the next URL of the context is tried and the
        // run carries on from the queue as it is then.
        let mut stretch = 0u32;
        let connect = move || {
            stretch += 1;
            if stretch > 1 {
                // After a node loss: begin with the next node.
                self.amqp_start
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            self.replay_connections()
        };
        let reconnects = if self.target.amqp_urls.len() > 1 {
            // Carrying on needs another node to carry on with.
            MAX_RECONNECTS
        } else {
            0
        };
        let run = async move {
            let r = replay::run_failover(
                connect,
                &job,
                crate::domain::engine::Limits::default(),
                cancel,
                on_progress,
                reconnects,
            )
            .await;
            // The job holds the sender of target checks: gone with it, the checks end too.
            drop(job);
            r
        };
        // Targets met first during the run are checked here, beside it (see `check_met`).
        let serve = async {
            while let Some(req) = checks_rx.recv().await {
                let r = self.check_met(spec, &req, work.limit, work.bytes).await;
                let _ = req.reply.send(r);
            }
        };
        let (result, ()) = tokio::join!(run, serve);
        let mut summary = result?;
        summary.planned_unread = planned_unread;
        self.forget_moved(&spec.queue, &summary.moved_ids);
        if let Some(b) = &begun {
            let handed_back =
                summary.counts.held_back + summary.progress.failed + summary.progress.returned;
            let outcome = ReadOutcome {
                delivered: handed_back,
                // What the engine handed back had at most the count the ledger knew of.
                max_delivery_count: b.before_read,
                max_acquired_count: None,
                returned_explicitly: !matches!(summary.stop, replay::StopReason::ConnectionLost(_)),
                stopped: None,
            };
            let _ = self.write_record(
                &spec.queue,
                Some(&ledger::finish(&quorum, b, &outcome, now_ms())),
            );
        }
        Ok(summary)
    }
}

/// What one engine run does, beside the user's [`ReplaySpec`]: decided by the preview (or, for
/// an archive or a discard, by the selection the user confirmed).
#[derive(Clone, Debug)]
pub struct Work {
    pub action: replay::Action,
    /// The count confirmed: the run never moves more.
    pub limit: u64,
    pub allowed_targets: HashSet<TargetKey>,
    pub redirects: BTreeMap<TargetKey, plan::ReplayTarget>,
    pub replays: HashMap<String, i64>,
    /// When Warren first saw each message, by key (for `age:`).
    pub first_seen: HashMap<String, jiff::Timestamp>,
    /// The plan read nothing first (see [`Session::preview_to_run`]): its summary says so.
    pub planned_unread: bool,
    /// Targets not checked by the plan are checked as the run first meets them
    /// ([`Preview::checked_as_met`]), each as if `limit` messages of `bytes` went there.
    pub check_as_met: bool,
    pub bytes: u64,
}

/// The selected messages at the head of a queue, for an archive, a discard or a restore.
#[derive(Clone, Debug, Default)]
pub struct Selected {
    pub messages: Vec<Explained>,
    /// Messages looked at.
    pub examined: u64,
    /// The queue's depth when it was read.
    pub depth: u64,
    /// Messages that matched the selection (before `--limit`).
    pub matched: u64,
    /// When Warren first saw each message looked at, by key (for `age:`).
    pub first_seen: HashMap<String, jiff::Timestamp>,
}

impl Session {
    /// Reads the head of `spec.queue` (up to the window; as a browse, nothing moves; a queue
    /// whose reads cost deliveries is read as `browse_with_cap` decides), keeping `body_cap`
    /// bytes of each body, and returns the messages `spec.selection` picks, at most `spec.limit`.
    pub async fn select(
        &self,
        spec: &ReplaySpec,
        body_cap: usize,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Selected, SessionError> {
        let page = self
            .browse_with_cap(&spec.queue, spec.window.max(1), body_cap, spec.consent)
            .await?;
        let examined = page.messages.len() as u64;
        let depth = page.queue_depth_at_start.max(examined);
        let keys: Vec<String> = page.messages.iter().map(identity::message_key).collect();
        let memory = remember(&keys);
        let explained = explain_all(
            into_messages(page),
            &memory,
            &self.target.settings.conventions,
        );
        let now = jiff::Timestamp::now();
        let mut out = Selected {
            examined,
            depth,
            ..Default::default()
        };
        for e in explained {
            let age = age_secs(&e, now);
            if let Some(t) = e.first_seen {
                out.first_seen.insert(e.key.clone(), t);
            }
            if !spec
                .selection
                .selects(&e.message, &e.explanation, &e.key, age)
            {
                continue;
            }
            out.matched += 1;
            if spec.limit.is_none_or(|l| (out.messages.len() as u64) < l) {
                out.messages.push(e);
            }
        }
        Ok(out)
    }

    /// Whether the broker can hold the archive in a stream (RabbitMQ 3.9 and later).
    pub fn streams_supported(&self) -> bool {
        self.overview
            .features
            .version
            .is_none_or(|v| v.at_least(3, 9))
    }

    /// What holds the archive stream's name in the vhost.
    pub async fn archive_state(&self) -> Result<crate::broker::archive::StreamState, SessionError> {
        use crate::broker::archive::StreamState;
        let name = self.target.archive.stream.clone();
        let conn = self.amqp().await?;
        if !queue_exists(conn, &name).await? {
            return Ok(StreamState::Missing);
        }
        let info = self.mgmt.queue(self.vhost(), &name).await?;
        Ok(match info.queue_type {
            QueueType::Stream => StreamState::Stream,
            other => StreamState::NotAStream(other.as_str().to_string()),
        })
    }

    /// Declares the archive stream (the caller asked first). Refused in read-only mode.
    pub async fn create_archive(&self) -> Result<(), crate::broker::archive::DeclareError> {
        use crate::broker::archive::DeclareError;
        if self.target.read_only {
            return Err(DeclareError::Other(format!(
                "read-only: context '{}' is opened read-only; creating the archive is disabled",
                self.target.context
            )));
        }
        let conn = self
            .amqp()
            .await
            .map_err(|e| DeclareError::Other(e.to_string()))?;
        crate::broker::archive::declare_stream(
            conn,
            &self.target.archive.stream,
            &self.target.archive.max_age,
        )
        .await
    }

    /// Reads the archive stream from its first message, up to `limit`, to the offset where it
    /// ends now (the page says `Idle` if the broker stopped delivering before it), whole bodies.
    /// Not bounded by the management API's count, which lags seconds behind a stream just
    /// written. Reading a stream costs nothing and deletes nothing.
    pub async fn browse_archive(
        &self,
        name: &str,
        limit: usize,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        let tail = self.archive_tail(name).await?;
        self.browse_archive_range(name, None, tail, limit).await
    }

    /// The offset of the archive stream's last message now (`None`: it is empty). Without it, half
    /// a second's pause of a loaded broker passed for the end (an archive of 20,000 listed 6,505
    /// and said nothing).
    pub async fn archive_tail(&self, name: &str) -> Result<Option<u64>, SessionError> {
        Ok(browse::stream_tail(self.amqp().await?, name, ARCHIVE_TAIL_IDLE).await?)
    }

    /// Up to `limit` messages of the archive stream from offset `from` (its first message when
    /// `None`) to `tail` (as [`Session::archive_tail`] found it; `None`: nothing to read), whole
    /// bodies: one page of a read that goes through the whole archive a page at a time.
    pub async fn browse_archive_range(
        &self,
        name: &str,
        from: Option<u64>,
        tail: Option<u64>,
        limit: usize,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        let conn = self.amqp().await?;
        let mut req = BrowseRequest::new(name, QueueType::Stream, BrowsePolicy::unrestricted());
        req.limit = limit;
        req.body_cap = usize::MAX;
        req.stream_offset = from;
        match tail {
            Some(tail) if from.is_none_or(|f| f <= tail) => req.end_offset = Some(tail),
            _ => return Ok(std::sync::Arc::new(BrowsePage::default())),
        }
        Ok(std::sync::Arc::new(browse::browse(conn, &req).await?))
    }

    /// The header of a snapshot Warren writes from this place (a discard's, a local archive's).
    pub fn snapshot_header(&self, queue: &str) -> crate::domain::snapshot::SnapshotHeader {
        crate::domain::snapshot::SnapshotHeader {
            queue: queue.to_string(),
            vhost: self.vhost().to_string(),
            exported_at: jiff::Timestamp::now().to_string(),
            source: format!("RabbitMQ {}", self.overview.rabbitmq_version),
        }
    }

    /// Whether `queue` exists in the vhost (a passive declare).
    pub async fn queue_exists(&self, queue: &str) -> Result<bool, SessionError> {
        queue_exists(self.amqp().await?, queue).await
    }

    /// A fresh AMQP connection of its own (a restore's publishing).
    pub async fn connection(&self, name: &str) -> Result<lapin::Connection, SessionError> {
        self.connect_amqp(name).await
    }
}

/// The sessions of a scope: the one opened for it, and for a scope of every vhost one per other
/// vhost, opened on first need ([`Session::open_in`]) and kept, so each vhost has its own AMQP
/// connection and its own record of what was read (the quorum rules are per session). A
/// session that fails to open is not kept: the next need tries again.
pub struct Sessions {
    main: std::sync::Arc<Session>,
    /// The scope is every vhost of the context (`--vhost '*'`), listed through `main`.
    every: bool,
    others: tokio::sync::Mutex<HashMap<String, std::sync::Arc<Session>>>,
}

impl Sessions {
    pub fn new(main: Session, every: bool) -> Sessions {
        Sessions {
            main: std::sync::Arc::new(main),
            every,
            others: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    pub fn every(&self) -> bool {
        self.every
    }

    /// The session the scope was opened with (listings go through it).
    pub fn main(&self) -> &std::sync::Arc<Session> {
        &self.main
    }

    /// The session of `vhost`.
    pub async fn of(&self, vhost: &str) -> Result<std::sync::Arc<Session>, SessionError> {
        if vhost == self.main.vhost() {
            return Ok(self.main.clone());
        }
        let mut others = self.others.lock().await;
        if let Some(s) = others.get(vhost) {
            return Ok(s.clone());
        }
        let s = std::sync::Arc::new(self.main.open_in(vhost).await?);
        others.insert(vhost.to_string(), s.clone());
        Ok(s)
    }
}

/// How long a read waits for another read or a replay of the same queue to finish.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The queue's read lock, or a clear refusal when another read or a replay holds it too long.
async fn wait_for_turn<'a>(
    lock: &'a tokio::sync::Mutex<()>,
    queue: &str,
) -> Result<tokio::sync::MutexGuard<'a, ()>, SessionError> {
    tokio::time::timeout(TURN_WAIT, lock.lock())
        .await
        .map_err(|_| {
            SessionError::Refused(format!(
                "another read or a replay of '{queue}' is still running in this session; try again when it has finished"
            ))
        })
}

/// Node losses a replay carries on after, when the context has several AMQP URLs (each time it
/// reconnects to the first URL that answers).
const MAX_RECONNECTS: u32 = 3;

/// Passive declare on a throwaway channel: a missing queue closes the channel it was asked on.
async fn queue_exists(conn: &lapin::Connection, name: &str) -> Result<bool, SessionError> {
    queue_depth(conn, name).await.map(|d| d.is_some())
}

/// The queue's message count from a passive declare (`None` when it does not exist).
async fn queue_depth(conn: &lapin::Connection, name: &str) -> Result<Option<u64>, SessionError> {
    let name =
        amqp::short("the queue name", name).map_err(|e| SessionError::Refused(e.to_string()))?;
    let ch = conn.create_channel().await.map_err(SessionError::channel(
        "opening a channel to read a queue's depth",
    ))?;
    let r = ch
        .queue_declare(
            name,
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await;
    let _ = ch.close(200, "checked".into()).await;
    match r {
        Ok(q) => Ok(Some(u64::from(q.message_count()))),
        Err(e) => settle_check(Err(e)).map(|_| None),
    }
}

async fn exchange_exists(conn: &lapin::Connection, name: &str) -> Result<bool, SessionError> {
    let ch = conn.create_channel().await.map_err(SessionError::channel(
        "opening a channel to check an exchange",
    ))?;
    let r = ch
        .exchange_declare(
            amqp::short("the exchange name", name)
                .map_err(|e| SessionError::Refused(e.to_string()))?,
            lapin::ExchangeKind::Direct,
            lapin::options::ExchangeDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await;
    let _ = ch.close(200, "checked".into()).await;
    settle_check(r)
}

fn settle_check(r: lapin::Result<()>) -> Result<bool, SessionError> {
    match r {
        Ok(()) => Ok(true),
        Err(e) => match amqp::soft_error_code(&e) {
            Some((404, _)) => Ok(false),
            Some((code, text)) => Err(SessionError::Broker(format!(
                "checking the replay target failed: {text} ({code})"
            ))),
            None => Err(SessionError::Channel {
                what: "lost the connection while checking the replay target".into(),
                source: e,
            }),
        },
    }
}

/// Resolves the command-line overrides and configuration into a target.
pub fn target(overrides: &config::Overrides) -> Result<Target, config::ConfigError> {
    config::load(overrides).map(|(_, t)| t)
}

/// Where a replayed message ends up.
enum Rest {
    /// In `queue`, after passing the wait queues `via`.
    Queue { queue: String, via: Vec<String> },
    /// Nowhere: it would be dropped (the reason says where and why).
    Lost(String),
}
