//! The background worker behind the TUI. It owns the broker session (or a snapshot file), takes
//! `Command`s from the UI over a bounded channel and answers with `Report`s; the UI never waits
//! on the network, and neither does the worker's command loop: `plan` decides, and every connect,
//! discovery, refresh, read, protect and replay runs in a task that reports back to the loop.

mod contexts;
mod front;
mod listing;
mod notes;
mod ops;
mod page;
mod plan;
pub mod protocol;
mod read;
mod redirect;
mod runs;
mod snapshot;

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
use listing::{discover_on, refresh_on};
use notes::notes_on;
use ops::Ops;
use plan::{Action, Job, NoteWork, Plan, Retarget, Work};
use protocol::{Command, ConnectionState, Failure, OperationKind, Overview, Report, Ticket};
use read::browse;
pub use snapshot::snapshot_discovery;

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
            s.handle.target.context,
            s.handle.overview.rabbitmq_version,
            s.handle.mgmt.active_url(),
            s.handle.whoami.name
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
    match s.handle.amqp().await {
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
            .filter(|r| r.context == main.handle.target.context)
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
    let Some(name) = s.handle.target.audit.stream.as_deref() else {
        return Vec::new();
    };
    match s.handle.mgmt.queues_all().await {
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

/// Why nothing may leave a queue in this session's place, if so: the one decision of
/// `ops::rights` (the flag, the context, the broker's word that this user may read but not
/// publish). A scope of every vhost asks only the flag and the context; each run there is
/// admitted by its own vhost's session.
async fn read_only_reason(s: &Session, vhost_check: bool) -> Option<String> {
    let r = if vhost_check {
        crate::ops::rights::read_only(&s.handle).await
    } else {
        crate::ops::rights::configured(&s.handle)
    };
    r.map(|r| r.reason())
}
