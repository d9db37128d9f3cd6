//! The worker's side of the channel to the UI: the commands it takes ([`Command`]) and the
//! reports it sends back ([`Report`]). Plain data, no terminal types: the TUI wraps reports in
//! its own event type alongside keys and the clock.

use std::collections::HashMap;

use crate::domain::discovery::{Discovery, QueueRef};
use crate::domain::grouping::GroupNote;
use crate::domain::packed::Packed;
use crate::domain::selection::Selection;
use jiff::Timestamp;

#[derive(Clone, Debug)]
pub enum Command {
    /// Discover the vhost's queues (answer: `Report::QueuesLoaded`).
    LoadQueues,
    /// Fetch depths only, without browsing messages (answer: `Report::DepthsRefreshed`).
    RefreshDepths,
    /// Read up to `limit` messages from the head of `queue` of `vhost` without removing them
    /// (answer: `Report::MessagesLoaded`). Every command on a queue names its vhost: with
    /// `:vhost *` the list holds every vhost's.
    Browse {
        vhost: String,
        queue: String,
        limit: usize,
        /// The operator accepted that reading again spends deliveries (a quorum queue with a
        /// limit); otherwise the worker reuses what it already read from such a queue.
        read_again: bool,
        /// The operator asked for the queue to be read again from the start (Ctrl-R, `:limit`):
        /// a read of it under way is replaced. Otherwise (Enter, the glance) a read of it under
        /// way with the same limit answers this one, and is not started again.
        restart: bool,
    },
    /// Work out what replaying `selection` from `queue` would do (answer: `Report::ReplayPreview`).
    PreviewReplay {
        vhost: String,
        queue: String,
        selection: Selection,
        /// The plan differs: with attempts kept nothing is removed.
        keep_attempts: bool,
        /// Edit, then replay: the operator's edited document (`domain::edit`).
        edited: Option<String>,
        /// Symfony's `SentToFailureTransportStamp` removed (`--strip-failure-stamp`).
        strip_failure_stamp: bool,
    },
    /// Work out what restoring `selection` from the archive stream `queue` would do (answer:
    /// `Report::RestorePreview`).
    PreviewRestore {
        vhost: String,
        queue: String,
        selection: Selection,
        how: RestoreHow,
    },
    /// Replay, after the operator accepted the confirmation (answer: `Report::ReplayProgress`…,
    /// then `Report::ReplayFinished`). Never emitted in read-only mode.
    Replay(ReplayRequest),
    /// Stop a running replay after the message in flight; what moved stays moved.
    CancelReplay,
    /// Set the policy that lifts `queue`'s delivery limit (answer: `Report::Notice`, then the
    /// queue list again). Never emitted in read-only mode.
    Protect {
        vhost: String,
        queue: String,
    },
    /// Set, remove or list the redirects of `vhost` (`:redirect`, `:redirects`) through
    /// `ops::redirect` (answer: `Report::Notice` with what it did or what is in force, or
    /// `Report::Error`). A change is refused in read-only mode there.
    Redirect {
        vhost: String,
        change: RedirectChange,
        /// The operator's answer to creating the redirect stream (`Report::Question`), once
        /// asked: `None` until then.
        create_stream: Option<bool>,
    },
    /// The recorded replays, local and on the broker, with what came back after each (answer:
    /// `Report::ReplaysLoaded`).
    LoadReplays,
    /// Another context, or another vhost of this one, tried before anything changes: the answer
    /// is the new place's `Report::QueuesLoaded` tagged with `generation`, or
    /// `Report::SwitchFailed`. Once it succeeded, answers tagged with an older generation are
    /// dropped (see [`Ticket`]).
    /// `name` may be `*` (`config::ContextScope::EveryContext`): every context of the config file at once,
    /// each reached as itself, listed together and read-only. `vhost`: that vhost of the context
    /// (opening a queue from every context), else the context's own.
    SwitchContext {
        name: String,
        vhost: Option<String>,
        generation: u64,
    },
    SwitchVhost {
        name: String,
        generation: u64,
    },
    /// Keep this note on its group (an empty text removes it), in the store and mirrored to the
    /// broker's audit (answer: `Report::GroupNotes` for its queue, and a notice).
    SetGroupNote {
        vhost: String,
        note: GroupNote,
    },
    /// Forget these notes of `queue`: a read of the whole queue found their groups gone.
    ForgetGroupNotes {
        vhost: String,
        queue: String,
        notes: Vec<GroupNote>,
    },
    Quit,
}

/// What `Command::Redirect` asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedirectChange {
    /// Replays bound for `from` go to `to`.
    Add {
        from: String,
        to: String,
        reason: String,
    },
    /// `from`'s replays go to their plain target again.
    Remove { from: String },
    /// The redirects in force.
    List,
}

/// One recorded replay as the Replays view lists it: who moved what, how it ended, and what
/// came back so far (`None`: not looked at, e.g. another vhost's run).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunSummary {
    pub run_id: Option<String>,
    /// Which operation the run was: the Replays view lists archives, restores and discards too.
    pub operation: crate::domain::run::RunKind,
    pub started_at: Timestamp,
    pub os_user: String,
    pub broker_user: String,
    pub vhost: String,
    pub from_queue: String,
    pub outcome: crate::domain::outcome::RunOutcome,
    pub moved: Option<u64>,
    pub came_back: Option<crate::domain::comeback::CameBack>,
    /// What the run's canary did, when it had one.
    pub canary: Option<crate::domain::canary::CanaryRecord>,
    /// Found in the local store / on the broker's audit stream.
    pub local: bool,
    pub broker: bool,
    /// Only on the broker's stream, and not signed by the broker user it names
    /// (`store::Seen::unvouched`): not to be shown as a real run.
    pub unvouched: bool,
}

/// An accepted replay.
#[derive(Clone, Debug, Default)]
pub struct ReplayRequest {
    pub vhost: String,
    pub queue: String,
    pub selection: Selection,
    /// The count the operator confirmed; the worker stops if the selection grew past it.
    pub expected: u64,
    /// The operator typed `expected` in the modal (where `domain::confirm::typed_count` asks
    /// for it): the home's go-ahead is refused without it.
    pub typed: bool,
    /// Messages per second.
    pub rate: u32,
    /// Keep the retry counters instead of resetting them.
    pub keep_attempts: bool,
    /// Remove Symfony's `SentToFailureTransportStamp` (`--strip-failure-stamp`).
    pub strip_failure_stamp: bool,
    pub dry_run: bool,
    /// What the run does with the selection: a replay, or the other ways out of a DLQ.
    pub job: JobKind,
    /// A replay's canary, when the operator kept it on (see `domain::canary`).
    pub canary: Option<crate::domain::canary::CanaryRule>,
    /// A replay's backlog cap (`--max-backlog`): publishing waits while the target holds this
    /// many ready messages; `None`: no cap.
    pub max_backlog: Option<u64>,
    /// The operator's answer, in the modal, to creating the missing audit stream; `None`: not
    /// asked (the context decides).
    pub create_audit: Option<bool>,
    /// Edit, then replay: the operator's edited document (`domain::edit`); the home reads the
    /// messages again and replays what it changed, the originals archived first.
    pub edited: Option<String>,
}

/// What an accepted run does: the engine's actions (`replay::Action`) as the UI asks for them.
/// Archive and discard take no plan first: the worker reads the selection at the run's start and
/// never moves more than `expected`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum JobKind {
    #[default]
    Replay,
    /// Into the vhost's archive (the stream, or the local file), with the operator's reason.
    Archive { reason: String, place: ArchivePlace },
    /// Deleted for good, after a snapshot of exactly what goes is written.
    Discard,
    /// Out of the archive (the request's queue is the archive stream): back into the DLQ each
    /// came from, or replayed to where it failed (`broker::restore`, as `warren restore`).
    Restore(RestoreHow),
}

/// How a restore goes: back into the dead-letter queue each message came from (the default) or
/// replayed straight to where it failed (`replay`: the replay's plan, retry budget reset); and
/// whether what was restored before is taken again (`again`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreHow {
    pub replay: bool,
    pub again: bool,
}

impl JobKind {
    /// The run it is (`domain::run::RunKind`), without the details the UI asked for it with.
    pub fn run(&self) -> crate::domain::run::RunKind {
        use crate::domain::run::RunKind;
        match self {
            JobKind::Replay => RunKind::Replay,
            JobKind::Archive { .. } => RunKind::Archive,
            JobKind::Discard => RunKind::Discard,
            JobKind::Restore(_) => RunKind::Restore,
        }
    }

    /// The verb, as the progress and the outcome say it.
    pub fn verb(&self) -> &'static str {
        self.run().as_str()
    }
}

/// One message of a page sent in chunks: what the list, the filter and the groups need of it,
/// and where the message itself lies in the page's spill file (`local::spill`).
#[derive(Clone, Debug)]
pub struct Listed {
    pub letter: crate::local::spill::Letter,
    pub brief: crate::domain::brief::Brief,
    /// `identity::message_key`, inline when short (most are: see `tui::state::Row`).
    pub key: compact_str::CompactString,
    /// When Warren first saw it (from its store).
    pub first_seen: Option<Timestamp>,
    /// How many audited replays moved it (see `Store::replay_counts`).
    pub replays: i64,
}

/// What the worker tells the UI. It never touches UI state; it only sends these.
#[derive(Clone, Debug)]
pub enum Report {
    /// A question an operation could not ask while working (`ops::Stop::Unanswered`): nothing
    /// changed; the UI asks it, and on yes sends `yes` (the same command with the answer).
    Question {
        text: String,
        yes: Box<Command>,
        ticket: Ticket,
    },
    /// The vhost's queues, with who we are and what we talk to.
    QueuesLoaded {
        overview: Overview,
        discovery: Discovery,
        ticket: Ticket,
    },
    /// Fresh depths for known queues, by vhost and name (`None`: the broker has no stats yet).
    DepthsRefreshed {
        depths: Vec<(QueueRef, Option<u64>)>,
        ticket: Ticket,
    },
    /// What Warren's store remembers of the place's dead-letter queues, sent after its
    /// `QueuesLoaded`: depth samples of the last hour and what the last read of each found
    /// (by vhost and queue name).
    DepthHistory {
        samples: HashMap<QueueRef, Vec<crate::domain::urgency::Sample>>,
        heads: HashMap<QueueRef, crate::domain::urgency::ReadHead>,
        ticket: Ticket,
    },
    /// A browse finished. `first_seen[i]` is when Warren first saw `messages[i]` (from the store),
    /// aligned by index; shorter than `messages` means unknown for the rest. `replays[i]` is
    /// how many audited replays moved it (by its key; see `Store::replay_counts`), aligned
    /// likewise; shorter means none known. The messages come packed: a page of 100,000 weighs
    /// about half what it would decoded (see `domain::packed`).
    MessagesLoaded {
        vhost: String,
        queue: String,
        messages: Vec<Packed>,
        first_seen: Vec<Option<Timestamp>>,
        replays: Vec<i64>,
        /// Who ran each run that a message came back from, by run id (`warren-replay-id`),
        /// from the local audit and the broker's audit stream.
        authors: HashMap<String, String>,
        /// Why the browse stopped, in words ("end of queue", "limit of 500 reached", …).
        stop: String,
        ticket: Ticket,
    },
    /// Part of a page read from a broker, in queue order: a live read sends its page in chunks
    /// as the messages arrive (each message decoded once, then kept in the page's spill file),
    /// and its last part in the [`Report::MessagesLoaded`] that ends the page (see
    /// `worker::page`). Chunks of a page that never ends are dropped.
    MessagesChunk {
        vhost: String,
        queue: String,
        rows: Vec<Listed>,
        ticket: Ticket,
    },
    /// The read whose [`Report::MessagesChunk`]s were sent failed (its failure is reported on
    /// its own): its chunks are dropped.
    MessagesDropped {
        ticket: Ticket,
    },
    /// The redirects in force in `vhost` (`domain::redirect`), after a browse and after a
    /// change: the detail pane's "a replay would" uses them, as the replay's plan does.
    Redirects {
        vhost: String,
        redirects: crate::domain::redirect::Redirects,
        ticket: Ticket,
    },
    /// The notes on `queue`'s groups, every grouping, as the store keeps them: after a browse
    /// (with its ticket; `whole` when the browse read every message the queue held, so the UI
    /// may tell which groups are gone) and after a note was set (`whole` false).
    GroupNotes {
        vhost: String,
        queue: String,
        notes: Vec<GroupNote>,
        whole: bool,
        ticket: Ticket,
    },
    /// Reading `queue` again would spend deliveries Warren spent on it before (from its read
    /// ledger): nothing was read; `text` says what it costs. The operator confirms or not.
    ReadCost {
        vhost: String,
        queue: String,
        text: String,
        ticket: Ticket,
    },
    ReplayPreview(ReplayPreview),
    RestorePreview(RestorePreview),
    /// The restore plan for `how` is still reading the archive: `read` messages so far (its
    /// modal says so while it waits; a large archive is a long read).
    RestoreReading {
        vhost: String,
        queue: String,
        how: RestoreHow,
        read: u64,
        ticket: Ticket,
    },
    ReplayProgress(ReplayProgress),
    /// The Replays view's runs, newest first, and what could not be reached, in words.
    ReplaysLoaded {
        runs: Vec<RunSummary>,
        unreached: Vec<String>,
        ticket: Ticket,
    },
    ReplayFinished(ReplayOutcome),
    /// A `:ctx` or `:vhost` failed (or was refused): the worker keeps the session it had, and
    /// the UI keeps showing it. (Success is the new place's `QueuesLoaded`, with `generation`.)
    SwitchFailed {
        generation: u64,
        text: String,
    },
    /// Something done that the operator should read (shown in the notice line).
    Notice(String),
    /// A failure that is not fatal: shown in the banner (the full chain goes to the log file).
    Error(Failure),
    Connection(ConnectionState),
    /// A broker operation the worker performed, sent as it happens (the command log, `@`).
    Operation(Operation),
}

/// One broker operation, with what it cost: a read and the deliveries it spent, a replay's
/// publishes and acks, a policy set, a listing, a connect. Text from the broker in it is shown
/// sanitised.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    /// When the worker finished it.
    pub at: Timestamp,
    pub kind: OperationKind,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperationKind {
    Connect,
    /// Listing queues, bindings, policies (not the depth refresh every tick).
    List,
    /// Reading messages (browse, or a replay's plan).
    Read,
    /// A replay: publishes, confirms, acks.
    Replay,
    /// A policy set on the broker.
    Policy,
    /// A redirect set or removed (kept on the broker's redirect stream).
    Redirect,
}

impl OperationKind {
    pub fn label(self) -> &'static str {
        match self {
            OperationKind::Connect => "connect",
            OperationKind::List => "list",
            OperationKind::Read => "read",
            OperationKind::Replay => "replay",
            OperationKind::Policy => "policy",
            OperationKind::Redirect => "redirect",
        }
    }
}

/// Which request an answer belongs to. `generation` is the session it was asked under: the UI
/// names a new one with each `:ctx` or `:vhost` (`Command::SwitchContext`/`SwitchVhost` carry
/// it), the worker answers in it once the switch succeeded, and `update` then drops answers
/// from an older one, which may still be queued when the switch lands. `request` numbers requests in the order the worker received them, so of two pages
/// the one asked for later wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket {
    pub generation: u64,
    pub request: u64,
}

/// A failure to show in the banner, with the session generation it happened in (`None`: not
/// tied to one, always shown).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Failure {
    pub text: String,
    pub generation: Option<u64>,
}

impl Failure {
    pub fn in_generation(text: impl Into<String>, generation: u64) -> Failure {
        Failure {
            text: text.into(),
            generation: Some(generation),
        }
    }
}

impl From<String> for Failure {
    fn from(text: String) -> Failure {
        Failure {
            text,
            generation: None,
        }
    }
}

impl From<&str> for Failure {
    fn from(text: &str) -> Failure {
        Failure::from(text.to_string())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Who and where: the status bar.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overview {
    pub context: String,
    pub broker_version: String,
    pub user: String,
    pub tags: Vec<String>,
    pub vhost: String,
    /// Replay is disabled in this place: `--read-only`, the context's `read_only`, or no write
    /// permission in the vhost. Decided per place, never carried over from another.
    pub read_only: bool,
    /// Why, in words, when `read_only`.
    pub read_only_reason: String,
    /// The context's colour and label from the config: the header bar shows them.
    pub color: Option<crate::config::ContextColor>,
    pub label: Option<String>,
    /// Every context at once (`context` is `*`): each context of the config file, as it was
    /// reached, in the file's order. Empty in any other scope.
    pub contexts: Vec<Reach>,
    /// Snapshot files, no broker (`warren open`).
    pub snapshot: bool,
    /// The archive stream that an archive would have to create, in words, when the vhost has
    /// none and the context neither allows creating it nor keeps the archive locally: the
    /// archive modal asks first (`None`: nothing to ask).
    pub archive_question: Option<String>,
}

impl Overview {
    /// The vhosts listed: `vhost` is the scope as the operator types it (`*`: every vhost).
    pub fn vhost_scope(&self) -> crate::config::VhostScope {
        crate::config::VhostScope::parse(&self.vhost)
    }

    /// The contexts listed: `context` is the scope as typed (`*`: every context at once).
    pub fn context_scope(&self) -> crate::config::ContextScope {
        crate::config::ContextScope::parse(&self.context)
    }
}

/// Where an archive from the TUI goes while the vhost has no archive stream: as the context
/// says (`archive_create`, `archive_local`: a missing stream is then not created), into a stream
/// the operator allowed Warren to create in the modal, or the local archive file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ArchivePlace {
    #[default]
    AsConfigured,
    Create,
    Local,
}

/// One context of every context at once: what it is, or why it is not listed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reach {
    pub context: String,
    /// The context's `label` from the config, which its rows show instead of its name.
    pub label: Option<String>,
    /// The vhost listed in it: its own, or `*` (every vhost of it).
    pub vhost: String,
    pub broker_version: String,
    /// Replay would be disabled in it (the context's `read_only`, `--read-only`, or no write
    /// permission): what opening one of its queues leads to.
    pub read_only: bool,
    /// Why it is not listed, when it could not be reached or listed; the others are shown.
    pub unreached: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub enum ConnectionState {
    #[default]
    Connecting,
    Connected,
    /// Snapshot files, no broker: nothing is live.
    Snapshot,
    /// Lost or refused, with the reason.
    Disconnected(String),
}

/// What a replay would do, computed by the worker (it needs the vhost's bindings to resolve
/// fan-out). All strings are shown sanitised.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayPreview {
    /// The queue the messages are read from, and its vhost.
    pub vhost: String,
    pub queue: String,
    /// How many messages the selection holds right now.
    pub count: u64,
    /// Where they go, in words: "orders.process (default exchange, routing key orders.process)".
    pub targets: Vec<String>,
    /// Every queue the publish reaches; more than one is a fan-out.
    pub reaches: Vec<String>,
    /// Headers the replay removes and adds.
    pub removes: Vec<String>,
    pub adds: Vec<String>,
    /// Messages in the selection that Warren replayed before and that failed again.
    pub replayed_before: u64,
    /// Whether this plan keeps attempts (a plan for the other setting is stale).
    pub keep_attempts: bool,
    /// Whether this plan strips Symfony's failure stamp (likewise).
    pub strip_failure_stamp: bool,
    /// Some message carries Symfony's `SentToFailureTransportStamp` as a header, which the
    /// replay may strip (the modal offers the key only then).
    pub failure_stamp_strippable: bool,
    /// Anything the operator must read before accepting (skipped endpoint, unroutable, …).
    pub warnings: Vec<String>,
    /// The operator types the count to go ahead: the home's question with its plan
    /// (`ops::Questions`), which the modal shows and never decides.
    pub typed_count: bool,
    /// The broker's shared record (the audit stream) is missing and the context does not say
    /// whether to create it: what Warren would create, asked in the modal (once per context).
    pub create_audit: Option<String>,
    /// The request this plan answers (see [`Ticket`]).
    pub ticket: Ticket,
}

/// What a restore would do, computed by the worker with `broker::restore` (the archive read,
/// what was restored before, the targets checked). All strings are shown sanitised.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RestorePreview {
    /// The archive stream, and its vhost.
    pub vhost: String,
    pub queue: String,
    /// The plan is for this way (a plan for another is stale).
    pub how: RestoreHow,
    /// How many messages the restore publishes.
    pub count: u64,
    /// Where they go, with how many each: "orders.dlq × 3".
    pub targets: Vec<String>,
    /// Matching messages restored before and left out (unless `how.again`).
    pub restored_before: u64,
    /// Headers removed and added.
    pub removes: Vec<String>,
    pub adds: Vec<String>,
    /// Why nothing may be restored (nothing is while there is one).
    pub refusals: Vec<String>,
    /// What the operator should read: messages the replay's plan keeps in the archive, …
    pub warnings: Vec<String>,
    /// The operator types the count to go ahead (`ops::Questions`, with the plan).
    pub typed_count: bool,
    pub ticket: Ticket,
}

/// Progress of a running replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayProgress {
    pub total: u64,
    /// Published, confirmed and removed from the dead-letter queue.
    pub moved: u64,
    /// Returned by the broker as unroutable and left in the dead-letter queue.
    pub returned: u64,
    /// Failed (nacked, error) and left in the dead-letter queue.
    pub failed: u64,
    /// Current rate, messages per second.
    pub rate: f64,
    /// Set while the broker blocks publishing (a memory or disk alarm), with its reason.
    pub blocked: Option<String>,
    /// Set while a canary waits for its messages.
    pub canary: Option<crate::domain::canary::CanaryWait>,
    /// Set while publishing waits for the target's backlog (the replay's cap): which queue
    /// holds how many ready messages, and the cap.
    pub backlog: Option<crate::domain::engine::BacklogWait>,
}

impl ReplayProgress {
    pub fn done(&self) -> u64 {
        self.moved + self.returned + self.failed
    }

    pub fn remaining(&self) -> u64 {
        self.total.saturating_sub(self.done())
    }

    /// Seconds left at the current rate, when there is a rate.
    pub fn eta_secs(&self) -> Option<u64> {
        (self.rate > 0.0 && self.rate.is_finite())
            .then(|| (self.remaining() as f64 / self.rate).ceil() as u64)
    }
}

/// How a replay ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReplayOutcome {
    pub progress: ReplayProgress,
    pub dry_run: bool,
    pub cancelled: bool,
    /// Why it stopped early, when it did.
    pub error: Option<String>,
    /// A dry run's answer: what the replay would do, in the words of `warren replay --dry-run`
    /// (`broker::session::Preview::describe`).
    pub summary: Vec<String>,
    /// A run's summary in the command line's words (`Summary::lines`): what Warren prints on its
    /// way out when the operator quit while the run went on.
    pub words: Vec<String>,
    /// The one line the run ends with, in its operation's verb and with where things went
    /// (`Summary::headline`): the progress window's last line, then the notice line.
    pub headline: String,
}

impl ReplayOutcome {
    /// Every selected message was dealt with: nothing cancelled, failed or left.
    pub fn completed(&self) -> bool {
        !self.cancelled && self.error.is_none()
    }
}
