//! The background worker behind the TUI. It owns the broker session (or a snapshot file), takes
//! `Command`s from the UI over a bounded channel and answers with `Report`s; the UI never waits
//! on the network, and neither does the worker's command loop: `plan` decides, and every connect,
//! discovery, refresh, read, protect and replay runs in a task that reports back to the loop.

mod contexts;
mod front;
mod ops;
mod page;
mod plan;
pub mod protocol;
mod redirect;
mod runs;

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::broker::archive as keep;
use crate::broker::session::{ReadConsent, ReplaySpec, Session, SessionError, Sessions};
use crate::config::{self, Overrides};
use crate::domain::discovery::{
    self, Convention, Discovery, DlqInfo, DlqKind, QueueRef, QueueType,
};
use crate::domain::message::DeadLetter;
use crate::domain::packed::Packed;
use crate::domain::sanitize;
use crate::domain::selection::Selection;
use crate::domain::snapshot::SnapshotHeader;
use crate::store::Store;
use ops::Ops;
use plan::{Action, Job, NoteWork, Plan, Retarget, Work};
use protocol::{Command, ConnectionState, Failure, OperationKind, Overview, Report, Ticket};

/// Where the messages come from.
pub enum Source {
    /// A live broker, reached with these overrides (and the configuration file).
    Broker(Overrides),
    /// Snapshot files: one queue each, read-only, no broker.
    Snapshot(Vec<(SnapshotHeader, Vec<DeadLetter>)>),
}

/// What work runs on: the broker sessions of the scope (one per vhost it uses), or the
/// snapshot files.
#[derive(Clone)]
enum Backend {
    Broker(Arc<Sessions>),
    /// Every context at once: each context's sessions (see `contexts`), for looking only.
    Contexts(Arc<contexts::Contexts>),
    Snapshot(Arc<Vec<(SnapshotHeader, Vec<DeadLetter>)>>),
}

/// What a task reports back to the command loop.
enum Done {
    Connected {
        attempt: u64,
        result: Result<Backend, String>,
    },
    Finished {
        ticket: Ticket,
        events: Vec<Report>,
        /// Boxed: a work item is large, and most finish with none.
        then: Option<Box<Work>>,
    },
}

/// The IO around the plan: connects, spawns, sends. Holds nothing the plan decides on.
struct Shell {
    /// For a broker: where the next connect goes (`:ctx`/`:vhost` change it).
    overrides: Option<Overrides>,
    events: mpsc::Sender<Report>,
    done: mpsc::Sender<Done>,
    connecting: Option<JoinHandle<()>>,
    replay: Option<(JoinHandle<()>, watch::Sender<bool>)>,
}

/// Runs until `Command::Quit` or until the UI drops its sender. Every piece of network work runs
/// in a task that reports back here; this loop only decides (see `plan`) and so acts on a
/// cancel or a quit at once. Returns how the run in flight at the quit ended, if one was: the
/// UI is gone by then, so the caller says it.
pub async fn run(
    source: Source,
    mut commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<Report>,
) -> Option<protocol::ReplayOutcome> {
    let (done, mut reports) = mpsc::channel(64);
    let (mut plan, overrides) = match source {
        Source::Broker(o) => (Plan::broker(), Some(o)),
        Source::Snapshot(s) => (Plan::snapshot(Backend::Snapshot(Arc::new(s))), None),
    };
    let mut shell = Shell {
        overrides,
        events,
        done,
        connecting: None,
        replay: None,
    };
    loop {
        let actions = tokio::select! {
            // The operator first: a cancel never waits behind a report.
            biased;
            cmd = commands.recv() => match cmd {
                Some(cmd) => plan.command(cmd),
                None => break,
            },
            Some(report) = reports.recv() => match report {
                Done::Connected { attempt, result } => plan.connected(attempt, result),
                Done::Finished { ticket, events, then } => plan.finished(ticket, events, then.map(|w| *w)),
            },
        };
        if shell.perform(actions).await.is_break() {
            break;
        }
    }
    if let Some(task) = shell.connecting.take() {
        task.abort();
    }
    // Quitting mid-replay: cancel and let the engine settle what is in flight before exit
    // (its audit record is finished in the task). Reports are drained so no task waits on them.
    let (task, cancel) = shell.replay.take()?;
    // One cancel settles; a second would end the run at once, unsettled. A quit that came
    // with its own cancel (Ctrl-C in the UI: CancelReplay, then Quit) has sent it already.
    if !*cancel.borrow() {
        let _ = cancel.send(true);
    }
    tokio::pin!(task);
    let mut cut = None;
    loop {
        tokio::select! {
            _ = &mut task => break,
            Some(done) = reports.recv() => cut = run_end(done).or(cut),
        }
    }
    // The task hands its end over before it finishes.
    while let Ok(done) = reports.try_recv() {
        cut = run_end(done).or(cut);
    }
    cut
}

/// The end of a run among a finished task's reports.
fn run_end(done: Done) -> Option<protocol::ReplayOutcome> {
    match done {
        Done::Finished { events, .. } => events.into_iter().find_map(|e| match e {
            Report::ReplayFinished(o) => Some(o),
            _ => None,
        }),
        Done::Connected { .. } => None,
    }
}

impl Shell {
    async fn perform(&mut self, actions: Vec<Action<Backend>>) -> ControlFlow<()> {
        for action in actions {
            match action {
                Action::Send(e) => {
                    if let Report::Error(f) = &e {
                        tracing::warn!("{f}");
                    }
                    let _ = self.events.send(e).await;
                }
                Action::Connect { attempt, to } => self.connect(attempt, to),
                Action::Retarget(to) => {
                    // A connect still under way is for the old place; the plan would drop it.
                    if let Some(task) = self.connecting.take() {
                        task.abort();
                    }
                    if let Some(o) = &mut self.overrides {
                        retarget(o, to);
                    }
                }
                Action::Start { job, session } => self.start(job, session),
                Action::CancelReplay => {
                    if let Some((_, cancel)) = &self.replay {
                        let _ = cancel.send(true);
                    }
                }
                Action::Quit => return ControlFlow::Break(()),
            }
        }
        ControlFlow::Continue(())
    }

    fn connect(&mut self, attempt: u64, to: Option<Retarget>) {
        let Some(mut overrides) = self.overrides.clone() else {
            return;
        };
        // A switch being tried: that place, leaving `self.overrides` as they are until it worked.
        if let Some(to) = to {
            retarget(&mut overrides, to);
        }
        let done = self.done.clone();
        let ops = Ops(self.events.clone());
        self.connecting = Some(tokio::spawn(async move {
            let result = if overrides.every_context() {
                contexts::open(&overrides, &ops)
                    .await
                    .map(|cs| Backend::Contexts(Arc::new(cs)))
            } else {
                let result = open(&overrides).await;
                if let Ok(ss) = &result {
                    report_connected(&ops, ss).await;
                }
                result.map(|s| Backend::Broker(Arc::new(s)))
            };
            let _ = done.send(Done::Connected { attempt, result }).await;
        }));
    }

    fn start(&mut self, job: Job, backend: Backend) {
        let done = self.done.clone();
        let ops = Ops(self.events.clone());
        let ticket = job.ticket;
        match (job.work, backend) {
            (Work::Replay(req), Backend::Broker(ss)) => {
                let (cancel, cancelled) = watch::channel(false);
                let events = self.events.clone();
                let task = tokio::spawn(async move {
                    let end = match session_of(&ss, &req.vhost).await {
                        Err(e) => plan::replay_failed(&req, &format!("{e}; nothing moved")),
                        Ok(s) => match req.job {
                            protocol::JobKind::Replay => {
                                runs::replay(s, req, cancelled, events, &ops).await
                            }
                            protocol::JobKind::Restore(how) => {
                                runs::restore(s, req, how, cancelled, events, &ops).await
                            }
                            _ => runs::archive_or_discard(s, req, cancelled, events, &ops).await,
                        },
                    };
                    let _ = done
                        .send(Done::Finished {
                            ticket,
                            events: vec![end],
                            then: None,
                        })
                        .await;
                });
                self.replay = Some((task, cancel));
            }
            (work, backend) => {
                tokio::spawn(async move {
                    let (events, then) = perform(ticket, work, backend, &ops).await;
                    let _ = done
                        .send(Done::Finished {
                            ticket,
                            events,
                            then: then.map(Box::new),
                        })
                        .await;
                });
            }
        }
    }
}

/// Where connects go after a switch. Another context brings its own vhost: a vhost chosen with
/// `:vhost` (or one that failed) belongs to the context it was chosen in.
fn retarget(o: &mut Overrides, to: Retarget) {
    match to {
        Retarget::Context(name, vhost) => {
            o.context = Some(name);
            o.vhost = vhost;
        }
        Retarget::Vhost(name) => o.vhost = Some(name),
    }
}

/// Says in the command log where a session went.
async fn report_connected(ops: &Ops, ss: &Sessions) {
    let s = ss.main();
    let place = if ss.every() {
        "every vhost (one listing; a session per vhost opened when first used)".to_string()
    } else {
        format!("vhost '{}'", s.vhost())
    };
    ops.report(
        OperationKind::Connect,
        format!(
            "context '{}': RabbitMQ {} at {}, {place} as {} (management API, then AMQP)",
            s.target.context,
            s.overview.rabbitmq_version,
            s.mgmt.active_url(),
            s.whoami.name
        ),
    )
    .await;
}

/// Connected means both APIs answered for this vhost: the management API (in `open`, which also
/// checks both URLs reach one cluster) and AMQP, which is refused when the vhost does not exist
/// or the user may not use it. For every vhost (`:vhost *`, `--vhost '*'`) the session is the
/// context's own vhost's, for the listings, and AMQP waits for the first vhost a read or a run
/// needs (each vhost's session answers for itself then).
async fn open(overrides: &Overrides) -> Result<Sessions, String> {
    let every = overrides.every_vhost();
    let mut o = overrides.clone();
    if every {
        o.vhost = None;
    }
    let (_, target) = config::load(&o).map_err(|e| e.to_string())?;
    let s = Session::open(target).await.map_err(|e| e.to_string())?;
    if every {
        return Ok(Sessions::new(s, true));
    }
    match s.amqp().await {
        Ok(_) => Ok(Sessions::new(s, false)),
        Err(e) => Err(format!("no AMQP for vhost '{}': {e}", s.vhost())),
    }
}

/// The session of `vhost` in the scope, opened on first need; what failed, in words.
async fn session_of(ss: &Sessions, vhost: &str) -> Result<Arc<Session>, String> {
    ss.of(vhost)
        .await
        .map_err(|e| format!("cannot open vhost '{}': {e}", sanitize::one_line(vhost, 60)))
}

/// What one piece of work answers: its reports, and what to ask next.
type Answer = (Vec<Report>, Option<Work>);

/// One request's work: its answers, and what to ask next. Each kind of work has its helper,
/// which answers for each backend.
async fn perform(ticket: Ticket, work: Work, backend: Backend, ops: &Ops) -> Answer {
    match work {
        Work::Discover => (discover_on(&backend, ticket, ops).await, None),
        Work::Refresh => (refresh_on(&backend, ticket).await, None),
        Work::Browse {
            vhost,
            queue,
            limit,
            read_again,
            again,
        } => {
            let consent = if read_again {
                ReadConsent::ReadAgain
            } else {
                ReadConsent::Reuse
            };
            let at = QueueRef::new(&vhost, &queue);
            (
                browse(&backend, (at, again), limit, consent, ticket, ops).await,
                None,
            )
        }
        Work::Notes(w) => (notes_on(&backend, w, ticket).await, None),
        Work::Preview {
            vhost,
            queue,
            selection,
            restore: Some(how),
            ..
        } => {
            let plan = (queue, selection, how);
            let answer = restore_preview_on(&backend, &vhost, plan, ticket, ops).await;
            (answer, None)
        }
        Work::Preview {
            vhost,
            queue,
            selection,
            keep_attempts,
            strip_failure_stamp,
            restore: None,
            edited,
        } => {
            let plan = (queue, selection, edited);
            let stamps = (keep_attempts, strip_failure_stamp);
            let answer = preview_on(&backend, &vhost, plan, stamps, ticket, ops).await;
            (answer, None)
        }
        Work::Protect { vhost, queue } => protect_on(&backend, &vhost, &queue, ticket, ops).await,
        Work::Redirect {
            vhost,
            change,
            create_stream,
        } => {
            let to = (change, create_stream);
            (redirect_on(&backend, &vhost, to, ticket, ops).await, None)
        }
        Work::Replays => (replays_on(&backend, ticket).await, None),
        Work::Replay(req) => (vec![replay_refused(&req, &backend)], None),
    }
}

/// A failure of this request's generation, in words.
fn failed(ticket: Ticket, e: &dyn std::fmt::Display) -> Report {
    Report::Error(Failure::in_generation(e.to_string(), ticket.generation))
}

/// The session of `vhost` for work only a broker does; or what the backend answers instead.
async fn broker_session(
    backend: &Backend,
    vhost: &str,
    ticket: Ticket,
) -> Result<Arc<Session>, Vec<Report>> {
    match backend {
        Backend::Broker(ss) => session_of(ss, vhost)
            .await
            .map_err(|e| vec![failed(ticket, &e)]),
        // Every context at once is for looking (the UI refuses these before they are asked).
        Backend::Contexts(_) => Err(vec![failed(ticket, &contexts::LOOK_ONLY)]),
        // The plan refuses these for a snapshot before they start.
        Backend::Snapshot(_) => Err(Vec::new()),
    }
}

/// The place's queues: from the snapshot files, every context's, or the broker's with the
/// depths the store remembers.
async fn discover_on(backend: &Backend, ticket: Ticket, ops: &Ops) -> Vec<Report> {
    match backend {
        Backend::Snapshot(snapshots) => vec![
            Report::QueuesLoaded {
                overview: snapshot_overview(snapshots),
                discovery: snapshot_discovery(snapshots),
                ticket,
            },
            // The snapshot holds every message: each queue is dated from them at once,
            // as a read would date it, without one.
            Report::DepthHistory {
                samples: HashMap::new(),
                heads: snapshot_heads(snapshots),
                ticket,
            },
        ],
        Backend::Broker(ss) => {
            let loaded = discover(ss, ticket, ops).await;
            let mut reports = Vec::new();
            if let Report::QueuesLoaded { discovery, .. } = &loaded {
                let history = depth_history(ss.main(), discovery, ticket);
                reports.push(loaded);
                reports.extend(history);
            } else {
                reports.push(loaded);
            }
            reports
        }
        Backend::Contexts(cs) => contexts::discover(cs, ticket, ops).await,
    }
}

/// The queues' depths again (a snapshot's do not change).
async fn refresh_on(backend: &Backend, ticket: Ticket) -> Vec<Report> {
    match backend {
        Backend::Broker(ss) => match listing(ss).await {
            Ok(qs) => {
                record_depths(ss.main(), &qs);
                let depths = qs
                    .into_iter()
                    .map(|(vhost, q)| (QueueRef::new(&vhost, &q.name), q.messages))
                    .collect();
                vec![Report::DepthsRefreshed { depths, ticket }]
            }
            Err(e) => vec![Report::Connection(ConnectionState::Disconnected(
                e.to_string(),
            ))],
        },
        Backend::Contexts(cs) => vec![contexts::refresh(cs, ticket).await],
        // The plan refuses these for a snapshot before they start.
        Backend::Snapshot(_) => Vec::new(),
    }
}

/// Keeps or forgets notes on groups, in the vhost's session.
async fn notes_on(backend: &Backend, w: NoteWork, ticket: Ticket) -> Vec<Report> {
    let vhost = match &w {
        NoteWork::Set { vhost, .. } | NoteWork::Forget { vhost, .. } => vhost.clone(),
    };
    match broker_session(backend, &vhost, ticket).await {
        Ok(s) => notes(&s, w, ticket).await,
        Err(no) => no,
    }
}

/// A restore's plan: what would go back where.
async fn restore_preview_on(
    backend: &Backend,
    vhost: &str,
    (queue, selection, how): (String, Selection, protocol::RestoreHow),
    ticket: Ticket,
    ops: &Ops,
) -> Vec<Report> {
    match broker_session(backend, vhost, ticket).await {
        Ok(s) => vec![runs::restore_preview(&s, queue, selection, how, ticket, ops).await],
        Err(no) => no,
    }
}

/// A replay's plan: what would go where, and as what.
async fn preview_on(
    backend: &Backend,
    vhost: &str,
    plan: (String, Selection, Option<String>),
    stamps: (bool, bool),
    ticket: Ticket,
    ops: &Ops,
) -> Vec<Report> {
    match broker_session(backend, vhost, ticket).await {
        Ok(s) => vec![runs::preview(&s, plan, stamps, ticket, ops).await],
        Err(no) => no,
    }
}

/// Protects a queue (its answers, and what to ask next).
async fn protect_on(
    backend: &Backend,
    vhost: &str,
    queue: &str,
    ticket: Ticket,
    ops: &Ops,
) -> Answer {
    match broker_session(backend, vhost, ticket).await {
        Ok(s) => runs::protect(&s, queue, ticket, ops).await,
        Err(no) => (no, None),
    }
}

/// Changes where a queue's dead letters go.
async fn redirect_on(
    backend: &Backend,
    vhost: &str,
    to: (protocol::RedirectChange, Option<bool>),
    ticket: Ticket,
    ops: &Ops,
) -> Vec<Report> {
    match broker_session(backend, vhost, ticket).await {
        Ok(s) => redirect::run(&s, to, ticket, ops).await,
        Err(no) => no,
    }
}

/// The runs the broker's audit remembers.
async fn replays_on(backend: &Backend, ticket: Ticket) -> Vec<Report> {
    match backend {
        Backend::Broker(ss) => vec![replays(ss, ticket).await],
        Backend::Contexts(_) => vec![failed(ticket, &contexts::LOOK_ONLY)],
        // The plan refuses these for a snapshot before they start.
        Backend::Snapshot(_) => Vec::new(),
    }
}

/// A run that cannot start here (on a broker, runs start in their own task, see `Shell::start`).
fn replay_refused(req: &protocol::ReplayRequest, backend: &Backend) -> Report {
    match backend {
        Backend::Contexts(_) => plan::replay_failed(req, contexts::LOOK_ONLY),
        _ => plan::replay_failed(req, "no broker: a snapshot is read-only"),
    }
}

/// What the store remembers of the place's dead-letter queues (the last hour of depths, the
/// last reads), with this listing's depths recorded, each vhost under its own key; nothing
/// without a store.
fn depth_history(s: &Session, d: &Discovery, ticket: Ticket) -> Option<Report> {
    let st = Store::open_default().ok()?;
    let now = jiff::Timestamp::now();
    let mut samples = HashMap::new();
    let mut heads = HashMap::new();
    for (vhost, depths) in by_vhost(
        d.dead_letter_queues
            .iter()
            .map(|q| (&q.vhost, (q.name.clone(), q.depth))),
    ) {
        let depths: Vec<(String, u64)> = depths
            .into_iter()
            .filter_map(|(name, depth)| Some((name, depth?)))
            .collect();
        let key = s.memory_key_of(vhost);
        let of_vhost = |name: String| QueueRef::new(vhost, &name);
        for (name, kept) in st.depth_history(&key, &depths, now).ok()? {
            samples.insert(of_vhost(name), kept);
        }
        for (name, head) in st.read_heads(&key).unwrap_or_default() {
            heads.insert(of_vhost(name), head);
        }
    }
    s.depths_recorded(now);
    Some(Report::DepthHistory {
        samples,
        heads,
        ticket,
    })
}

/// Items grouped by their vhost, in the order first seen.
fn by_vhost<'a, T>(items: impl Iterator<Item = (&'a String, T)>) -> Vec<(&'a str, Vec<T>)> {
    let mut groups: Vec<(&'a str, Vec<T>)> = Vec::new();
    let mut at: HashMap<&'a str, usize> = HashMap::new();
    for (vhost, item) in items {
        let i = *at.entry(vhost.as_str()).or_insert_with(|| {
            groups.push((vhost.as_str(), Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(item);
    }
    groups
}

/// The depth refresh's listing: the vhost's queues, or with every vhost one listing of all.
async fn listing(
    ss: &Sessions,
) -> Result<Vec<(String, discovery::QueueInfo)>, crate::broker::management::ManagementError> {
    let s = ss.main();
    if ss.every() {
        return s.mgmt.queues_all().await;
    }
    let qs = s.mgmt.queues(s.vhost()).await?;
    Ok(qs.into_iter().map(|q| (s.vhost().to_string(), q)).collect())
}

/// Records a refresh's depths in the store, at most once per sample gap (the store keeps one
/// sample per gap anyway; this spares it the lookups every tick).
fn record_depths(s: &Session, qs: &[(String, discovery::QueueInfo)]) {
    let now = jiff::Timestamp::now();
    if !s.depths_due(now) {
        return;
    }
    let Ok(st) = Store::open_default() else {
        return;
    };
    let dlqs = qs.iter().filter(|(v, q)| s.is_dlq(v, &q.name));
    for (vhost, depths) in by_vhost(dlqs.map(|(v, q)| (v, q))) {
        let depths: Vec<(String, u64)> = depths
            .into_iter()
            .filter_map(|q| Some((q.name.clone(), q.messages?)))
            .collect();
        let _ = st.record_depths(&s.memory_key_of(vhost), &depths, now);
    }
    s.depths_recorded(now);
}

/// The scope's queues: the vhost's, or every vhost's from one listing of each kind (each queue
/// named with its vhost), the archive marked in each vhost that has it.
async fn discover(ss: &Sessions, ticket: Ticket, ops: &Ops) -> Report {
    let s = ss.main();
    let stream = &s.target.archive.stream;
    let found = if ss.every() {
        s.discover_all().await.map(|parts| {
            let n = parts.len();
            let parts = parts.into_iter().map(|(vhost, mut d)| {
                d.mark_archive(stream);
                list_local_archive(s, &vhost, &mut d);
                d
            });
            (
                Discovery::merged(parts.collect()),
                format!("every vhost ({n} with queues)"),
            )
        })
    } else {
        s.discover().await.map(|mut d| {
            // The archive is listed with the DLQs, marked, when the vhost has its stream, and
            // so is its local file when something was archived there.
            d.mark_archive(stream);
            list_local_archive(s, s.vhost(), &mut d);
            (d, format!("vhost '{}'", s.vhost()))
        })
    };
    match found {
        Ok((discovery, place)) => {
            let d = &discovery;
            ops.report(
                OperationKind::List,
                format!(
                    "listed {place}: {} queues ({} dead-letter queues, {} retry loops), with bindings and policies",
                    d.dead_letter_queues.len() + d.retry_loops.len() + d.other_queues.len(),
                    d.dead_letter_queues.len(),
                    d.retry_loops.len()
                ),
            )
            .await;
            let read_only_reason = read_only_reason(s, !ss.every()).await.unwrap_or_default();
            let overview = Overview {
                context: s.target.context.clone(),
                broker_version: s.overview.rabbitmq_version.clone(),
                user: s.whoami.name.clone(),
                tags: s.whoami.tags.clone(),
                vhost: if ss.every() {
                    config::VhostScope::EveryVhost.to_string()
                } else {
                    s.vhost().to_string()
                },
                read_only: !read_only_reason.is_empty(),
                read_only_reason,
                color: s.target.color,
                label: s.target.label.clone(),
                contexts: Vec::new(),
                snapshot: false,
                archive_question: (!ss.every())
                    .then(|| archive_question(s, &discovery))
                    .flatten(),
            };
            Report::QueuesLoaded {
                overview,
                discovery,
                ticket,
            }
        }
        Err(e) => Report::Error(Failure::in_generation(e.to_string(), ticket.generation)),
    }
}

/// What an archive here would create and must ask about first: the vhost has no archive
/// stream, the broker has streams, and the context neither allows creating it nor keeps the
/// archive locally.
fn archive_question(s: &Session, d: &Discovery) -> Option<String> {
    let a = &s.target.archive;
    let present = d
        .dead_letter_queues
        .iter()
        .any(|q| q.kind == crate::domain::discovery::DlqKind::Archive && q.name == a.stream);
    if present || a.local || a.create || !s.streams_supported() {
        return None;
    }
    Some(format!(
        "the archive stream '{}' does not exist yet in vhost '{}': Warren would create it (durable, x-queue-type = stream, x-max-age = {}) for the whole rota",
        crate::domain::sanitize::one_line(&a.stream, 100),
        crate::domain::sanitize::one_line(s.vhost(), 100),
        crate::domain::sanitize::one_line(&a.max_age, 20)
    ))
}

/// Lists `vhost`'s local archive file with its DLQs when it holds anything.
fn list_local_archive(s: &Session, vhost: &str, d: &mut Discovery) {
    let Some(store) = Store::default_path() else {
        return;
    };
    let path = keep::local_path(&store, &s.target.context, vhost);
    if let Some(n) = keep::local_entries(&path) {
        d.add_local_archive(vhost, n);
    }
}

/// The session's vhost's local archive file.
fn local_archive_path(s: &Session) -> Result<std::path::PathBuf, String> {
    match keep::local_place(s, "the vhost's local archive")? {
        keep::Place::Local(path, _) => Ok(path),
        keep::Place::Stream(name) => Err(format!("'{name}' is a stream, not a local archive")),
    }
}

/// Reads `at`'s queue for the message list; `again`: read again from the start, which its status
/// line says.
async fn browse(
    backend: &Backend,
    (at, again): (QueueRef, bool),
    limit: usize,
    consent: ReadConsent,
    ticket: Ticket,
    ops: &Ops,
) -> Vec<Report> {
    let QueueRef {
        vhost, name: queue, ..
    } = at;
    let s = match backend {
        Backend::Snapshot(snapshots) => {
            let messages: Vec<Packed> = snapshots
                .iter()
                .filter(|(h, _)| h.queue == queue && h.vhost == vhost)
                .flat_map(|(_, m)| m.iter())
                .take(limit)
                .map(|m| Packed::pack(m.clone()))
                .collect();
            let n = messages.len();
            return vec![Report::MessagesLoaded {
                vhost,
                queue,
                messages,
                first_seen: vec![None; n],
                replays: Vec::new(),
                authors: HashMap::new(),
                stop: format!("{n} messages from the snapshot"),
                ticket,
            }];
        }
        Backend::Contexts(_) => {
            return vec![Report::Error(Failure::in_generation(
                contexts::LOOK_ONLY,
                ticket.generation,
            ))];
        }
        Backend::Broker(ss) => match session_of(ss, &vhost).await {
            Ok(s) => s,
            Err(e) => {
                return vec![Report::Error(Failure::in_generation(e, ticket.generation))];
            }
        },
    };
    let s = &s;
    if queue == crate::domain::archive::LOCAL_QUEUE {
        return vec![browse_local_archive(s, vhost, limit, ticket)];
    }
    // The read and the listing run side by side: each message is listed as it arrives.
    let (to, from) = tokio::sync::mpsc::channel(page::CHUNK);
    let (read, listing) = tokio::join!(
        s.browse_to(&queue, limit, consent, to),
        page::list(s, (&vhost, &queue), ticket, &ops.0, from)
    );
    match read {
        Ok(page) => {
            let n = page.len();
            let end = page.end();
            let mut stop = end.text();
            if again {
                stop = format!("read again from the start: {stop}");
            }
            // What the read spent on a quorum queue, in this broker's own terms.
            let cost = if page.reused {
                None
            } else {
                s.cost_note(&queue, &page).await
            };
            if page.reused {
                stop = format!(
                    "{stop}, as read earlier this session (reading this quorum queue again costs deliveries: Ctrl-R twice)"
                );
            } else if let Some(note) = &cost {
                stop = format!("{stop}; {note}");
            }
            if let Some(problem) = &listing.problem {
                stop = format!("{stop}; {problem}");
            }
            if !page.reused {
                ops.report(
                    OperationKind::Read,
                    format!(
                        "browsed {queue}: {n} of {} messages, all left in place; {}",
                        page.queue_depth_at_start,
                        cost.as_deref().unwrap_or("cost no deliveries")
                    ),
                )
                .await;
            }
            // Every message the queue held when the read began (not a page kept from earlier,
            // which may be out of date): only such a look can say a group is gone.
            let whole = !page.reused && end.whole();
            let notes = Report::GroupNotes {
                vhost: vhost.clone(),
                queue: queue.clone(),
                notes: group_notes(s, &queue),
                whole,
                ticket,
            };
            let authors = crate::broker::audit::authors_of(s, listing.runs).await;
            let redirects = redirect::in_force(s, ticket).await;
            let mut out = vec![
                Report::MessagesLoaded {
                    vhost,
                    queue,
                    messages: listing.tail.into_iter().map(Packed::pack).collect(),
                    first_seen: listing.first_seen,
                    replays: listing.replays,
                    authors,
                    stop,
                    ticket,
                },
                notes,
            ];
            out.extend(redirects);
            out
        }
        Err(e) => {
            let failed = read_failure(QueueRef::new(&vhost, &queue), e, ticket);
            if listing.chunked {
                // The chunks already sent are of a page that will not be: the UI drops them.
                vec![Report::MessagesDropped { ticket }, failed]
            } else {
                vec![failed]
            }
        }
    }
}

/// The vhost's local archive file read as a queue: its expired entries dropped first (the
/// context's `archive_max_age`), then up to `limit` messages, oldest first.
fn browse_local_archive(s: &Session, vhost: String, limit: usize, ticket: Ticket) -> Report {
    let queue = crate::domain::archive::LOCAL_QUEUE.to_string();
    let read = (|| {
        let path = local_archive_path(s)?;
        let r = keep::read_local_all(&path, &s.target.archive.max_age)?;
        Ok::<_, String>((path, r.expired, r.messages, r.torn))
    })();
    let (path, expired, mut messages, torn) = match read {
        Ok(r) => r,
        Err(e) => return Report::Error(Failure::in_generation(e, ticket.generation)),
    };
    let held = messages.len();
    messages.truncate(limit);
    for m in &mut messages {
        m.queue = queue.clone();
    }
    let n = messages.len();
    let mut stop = format!(
        "{n} of {held} messages from the local archive {}",
        sanitize::one_line(&path.display().to_string(), 200)
    );
    if expired > 0 {
        stop.push_str(&format!(
            "; {expired} expired, dropped (archived longer ago than archive_max_age)"
        ));
    }
    stop.extend(torn.map(|t| format!("; {t}")));
    Report::MessagesLoaded {
        vhost,
        queue,
        messages: messages.into_iter().map(Packed::pack).collect(),
        first_seen: vec![None; n],
        replays: Vec::new(),
        authors: HashMap::new(),
        stop,
        ticket,
    }
}

/// The notes on `queue`'s groups (none, said in the log, without a store).
fn group_notes(s: &Session, queue: &str) -> Vec<crate::domain::grouping::GroupNote> {
    crate::ops::note::list(s, queue).unwrap_or_else(|e| {
        tracing::warn!("reading group notes failed: {e}");
        Vec::new()
    })
}

/// Keeps or forgets notes through their home (`ops::note`); answers with the queue's notes as
/// the store now has them.
async fn notes(s: &Session, work: NoteWork, ticket: Ticket) -> Vec<Report> {
    let fail = |e: String| Report::Error(Failure::in_generation(e, ticket.generation));
    let (queue, notice) = match work {
        NoteWork::Set { note, .. } => {
            let req = crate::ops::note::NoteRequest {
                queue: note.queue,
                by: note.by,
                key: note.key,
                text: note.text,
            };
            match crate::ops::note::set(s, req).await {
                Ok(set) => {
                    let said = if set.kept {
                        "note kept on the group (until the group is gone)"
                    } else {
                        "note removed"
                    };
                    let notice = std::iter::once(said.to_string())
                        .chain(set.notes)
                        .collect::<Vec<_>>()
                        .join("; ");
                    (set.note.queue, Some(notice))
                }
                Err(stop) => return vec![fail(runs::stop_text(stop))],
            }
        }
        NoteWork::Forget { queue, notes, .. } => {
            let gone: Vec<&crate::domain::grouping::GroupNote> = notes.iter().collect();
            if let Err(e) = crate::ops::note::forget(s, &gone) {
                return vec![fail(e)];
            }
            (queue, None)
        }
    };
    let mut out = vec![Report::GroupNotes {
        vhost: s.vhost().to_string(),
        notes: group_notes(s, &queue),
        queue,
        whole: false,
        ticket,
    }];
    out.extend(notice.map(Report::Notice));
    out
}

/// How many runs the Replays view lists.
const REPLAYS_SHOWN: usize = 100;

/// The Replays view: the merged audit (local and the broker's stream) with what came back
/// after each run of the scope's vhost, or, for every vhost, of each vhost: every vhost's audit
/// stream is read (found in one listing) and each vhost's DLQs through its own session. Reads
/// that would spend quorum deliveries are not made.
async fn replays(ss: &Sessions, ticket: Ticket) -> Report {
    let main = ss.main();
    let mut sessions: Vec<Arc<Session>> = vec![main.clone()];
    let mut unreached = Vec::new();
    if ss.every() {
        for vhost in audit_vhosts(main, &mut unreached).await {
            match session_of(ss, &vhost).await {
                Ok(s) if s.vhost() != main.vhost() => sessions.push(s),
                Ok(_) => {}
                Err(e) => unreached.push(e),
            }
        }
    }
    let refs: Vec<&Session> = sessions.iter().map(|s| s.as_ref()).collect();
    let (merged, why) = crate::broker::audit::load_all(&refs, REPLAYS_SHOWN).await;
    unreached.extend(why);
    if ss.every() {
        // Runs recorded on this machine in a vhost without an audit stream.
        let mut more: Vec<String> = merged
            .replays
            .iter()
            .map(|(r, _)| r)
            .filter(|r| r.context == main.target.context)
            .filter(|r| !sessions.iter().any(|s| s.vhost() == r.vhost))
            .map(|r| r.vhost.clone())
            .collect();
        more.sort();
        more.dedup();
        for vhost in more {
            match session_of(ss, &vhost).await {
                Ok(s) => sessions.push(s),
                Err(e) => unreached.push(e),
            }
        }
    }
    let mut back = HashMap::new();
    for s in &sessions {
        let (b, why) =
            crate::broker::audit::came_back(s, &merged.replays, ReadConsent::Reuse).await;
        back.extend(b);
        unreached.extend(why);
    }
    let runs = merged
        .replays
        .into_iter()
        .map(|(r, seen)| {
            let here = sessions
                .iter()
                .any(|s| crate::broker::audit::is_here(s, &r));
            let came_back = here
                .then(|| {
                    r.run_id
                        .as_ref()
                        .map(|id| back.get(id).cloned().unwrap_or_default())
                })
                .flatten();
            protocol::RunSummary {
                run_id: r.run_id,
                operation: r.operation,
                started_at: r.started_at,
                os_user: r.os_user,
                broker_user: r.broker_user,
                vhost: r.vhost,
                from_queue: r.from_queue,
                outcome: r.outcome,
                moved: r.moved,
                came_back,
                canary: r.canary,
                local: seen.local,
                broker: seen.broker,
                unvouched: seen.unvouched,
            }
        })
        .collect();
    Report::ReplaysLoaded {
        runs,
        unreached,
        ticket,
    }
}

/// The vhosts holding the context's audit stream, from one listing of every vhost's queues.
async fn audit_vhosts(s: &Session, unreached: &mut Vec<String>) -> Vec<String> {
    let Some(name) = s.target.audit.stream.as_deref() else {
        return Vec::new();
    };
    match s.mgmt.queues_all().await {
        Ok(qs) => qs
            .into_iter()
            .filter(|(_, q)| q.name == name && q.queue_type == QueueType::Stream)
            .map(|(v, _)| v)
            .collect(),
        Err(e) => {
            unreached.push(format!(
                "could not list the vhosts' audit streams: {e}; this vhost's only"
            ));
            Vec::new()
        }
    }
}

fn spec_for(
    s: &Session,
    queue: String,
    selection: Selection,
    rate: Option<f64>,
    (keep_attempts, strip_failure_stamp): (bool, bool),
) -> ReplaySpec {
    ReplaySpec {
        queue,
        selection,
        limit: None,
        rate,
        to: None,
        allow_fan_out: false,
        keep_attempts,
        clear_expiry: false,
        strip_failure_stamp,
        window: s.target.settings.replay.window,
        // The TUI plans from what it already read: a quorum queue is not read again for a plan.
        consent: ReadConsent::Reuse,
        run_id: None,
        max_backlog: None,
        edits: None,
        protocol: Default::default(),
    }
}

/// A failed read as the UI event that says what to do: a cost to confirm, or an error.
fn read_failure(at: QueueRef, e: SessionError, ticket: Ticket) -> Report {
    match e {
        SessionError::NeedsConsent { text, .. } => Report::ReadCost {
            vhost: at.vhost,
            queue: at.name,
            text,
            ticket,
        },
        other => Report::Error(Failure::in_generation(other.to_string(), ticket.generation)),
    }
}

/// Why nothing may leave a queue in this session's place, if so: the one decision of
/// `ops::rights` (the flag, the context, the broker's word that this user may read but not
/// publish). A scope of every vhost asks only the flag and the context; each run there is
/// admitted by its own vhost's session.
async fn read_only_reason(s: &Session, vhost_check: bool) -> Option<String> {
    let r = if vhost_check {
        crate::ops::rights::read_only(s).await
    } else {
        crate::ops::rights::configured(s)
    };
    r.map(|r| r.reason())
}

fn snapshot_overview(snapshots: &[(SnapshotHeader, Vec<DeadLetter>)]) -> Overview {
    let first = snapshots.first().map(|(h, _)| h);
    Overview {
        context: "snapshot".into(),
        broker_version: first
            .map(|h| h.source.trim_start_matches("RabbitMQ ").to_string())
            .unwrap_or_default(),
        user: String::new(),
        tags: Vec::new(),
        vhost: first.map(|h| h.vhost.clone()).unwrap_or_default(),
        read_only: true,
        read_only_reason: "replay is disabled: a snapshot is read-only (no broker)".into(),
        color: None,
        label: None,
        contexts: Vec::new(),
        snapshot: true,
        archive_question: None,
    }
}

/// Each snapshot's queue dated as a read of it at its export would be: its oldest and newest
/// arrival, from its messages.
fn snapshot_heads(
    snapshots: &[(SnapshotHeader, Vec<DeadLetter>)],
) -> HashMap<QueueRef, crate::domain::urgency::ReadHead> {
    snapshots
        .iter()
        .filter_map(|(h, messages)| {
            let at: jiff::Timestamp = h.exported_at.parse().ok()?;
            let arrivals = messages.iter().map(|m| {
                let e = crate::domain::explain::explain(m);
                crate::domain::arrival::Arrival::of(&e.deaths, e.failed_at, None)
            });
            let head = crate::domain::urgency::ReadHead::of(at, arrivals);
            Some((QueueRef::new(&h.vhost, &h.queue), head))
        })
        .collect()
}

/// Each snapshot holds one queue: present them as the dead-letter queues of one vhost.
pub fn snapshot_discovery(snapshots: &[(SnapshotHeader, Vec<DeadLetter>)]) -> Discovery {
    let mut dead_letter_queues: Vec<DlqInfo> = snapshots
        .iter()
        .map(|(h, messages)| {
            let named = discovery::classify_name(&h.queue, &[]);
            DlqInfo {
                context: String::new(),
                vhost: h.vhost.clone(),
                name: h.queue.clone(),
                kind: named.map_or(DlqKind::DeadLetter, |m| m.kind),
                convention: named.map_or(Convention::Broker, |m| m.convention),
                depth: Some(messages.len() as u64),
                messages_ready: Some(messages.len() as u64),
                messages_unacknowledged: Some(0),
                consumers: Some(0),
                queue_type: QueueType::Classic,
                feeders: Vec::new(),
                feeders_uncertain: false,
                by_topology: false,
                by_name: named.is_some(),
                guessed: false,
                delivery_limit: None,
                delivery_limit_arg: None,
                dead_letter_exchange: None,
            }
        })
        .collect();
    dead_letter_queues.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.name.cmp(&b.name)));
    Discovery {
        dead_letter_queues,
        retry_loops: Vec::new(),
        other_queues: Vec::new(),
        stuck: Vec::new(),
    }
}
