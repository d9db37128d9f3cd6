//! What the worker does with each command and each finished task, as data: [`Plan`] takes the
//! UI's commands and the reports of the tasks it started, and returns [`Action`]s, which
//! `super::run` performs (connect, spawn, send) without awaiting any network work itself. So a
//! cancel or a quit is acted on at once, however long a connect or a discovery takes.
//!
//! The rules, each tested below:
//! - A request needs a connection. While there is none it waits, and one connect is started;
//!   a connect that fails answers the requests waiting for it with its reason.
//! - One read of a queue at a time (a browse, a replay plan, a replay): another read of that
//!   queue waits until it ends, and a newer browse (or plan) of the queue replaces an older one
//!   still waiting. A read whose newer twin waits behind it has its answer dropped: the newest
//!   request for a queue wins.
//! - A browse of a queue already being read (or waiting to be), with the same limit, that does
//!   not ask to start again (Enter, the glance) is not a new read: the one under way answers
//!   it, and the UI is told so. One that asks to start again (Ctrl-R, `:limit`) or wants another
//!   limit replaces it, and its page says it was read again from the start.
//! - One discovery at a time (a newer one waits); a depth refresh asked while one is out is
//!   skipped.
//! - A cancel reaches a running replay at once; a replay that has not started yet (waiting for
//!   the connection, or for a read of its queue) ends there, cancelled, having moved nothing.
//! - `:ctx` and `:vhost` are tried before anything changes: a connect to the new place and its
//!   first listing, while the old session goes on serving. Only when both succeeded does the
//!   plan adopt the UI's new generation and the new session (and point later reconnects there);
//!   the listing, tagged with the new generation, tells the UI. A failure is reported and
//!   nothing changes. A newer switch replaces one under way. Answers of the old session still
//!   under way come back tagged with the old generation, and `tui::update` drops them: it is
//!   the one owner of that rule, since only it can see answers already queued to it.
//!
//! Generic over the session so that tests need no broker: the plan never calls it, it only hands
//! it to the work it starts.

use std::collections::HashMap;

use super::protocol::{
    Command, ConnectionState, Failure, ReplayOutcome, ReplayProgress, ReplayRequest, Report, Ticket,
};
use crate::domain::discovery::QueueRef;
use crate::domain::grouping::GroupNote;
use crate::domain::selection::Selection;

/// Something the worker must do.
#[derive(Debug)]
pub enum Action<S> {
    /// Open a session; report it with [`Plan::connected`] and this `attempt`. With `to`, for a
    /// switch being tried: that place, without changing where later connects go.
    Connect { attempt: u64, to: Option<Retarget> },
    /// A switch succeeded: later connects go to this context or vhost. A connect still under
    /// way is for the old place and may be abandoned.
    Retarget(Retarget),
    /// Run `job` on `session`; report it with [`Plan::finished`].
    Start { job: Job, session: S },
    /// Tell the UI.
    Send(Report),
    /// Tell the running replay to stop.
    CancelReplay,
    /// Stop taking commands (a running replay is cancelled and settled first).
    Quit,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Retarget {
    /// A context (`*`: every context at once), and a vhost of it (else its own).
    Context(String, Option<String>),
    Vhost(String),
}

/// One request, with the ticket its answers carry.
#[derive(Clone, Debug)]
pub struct Job {
    pub ticket: Ticket,
    pub work: Work,
}

#[derive(Clone, Debug)]
pub enum Work {
    Discover,
    Refresh,
    Browse {
        vhost: String,
        queue: String,
        limit: usize,
        read_again: bool,
        /// Read again from the start: asked so (Ctrl-R, `:limit`), or replacing a read of the
        /// queue that was under way. Its page says so.
        again: bool,
    },
    Preview {
        vhost: String,
        queue: String,
        selection: Selection,
        keep_attempts: bool,
        strip_failure_stamp: bool,
        /// A restore's plan (the queue is the archive), not a replay's.
        restore: Option<super::protocol::RestoreHow>,
        /// Edit, then replay: the edited document.
        edited: Option<String>,
    },
    Protect {
        vhost: String,
        queue: String,
    },
    Redirect {
        vhost: String,
        change: super::protocol::RedirectChange,
        create_stream: Option<bool>,
    },
    /// Keep or forget notes on groups (the store, and the broker's audit for a kept one).
    Notes(NoteWork),
    Replay(ReplayRequest),
    Replays,
}

#[derive(Clone, Debug)]
pub enum NoteWork {
    Set {
        vhost: String,
        note: GroupNote,
    },
    Forget {
        vhost: String,
        queue: String,
        notes: Vec<GroupNote>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Discover,
    Refresh,
    Browse,
    Preview,
    Protect,
    Redirect,
    Notes,
    Replay,
    Replays,
}

impl Work {
    fn kind(&self) -> Kind {
        match self {
            Work::Discover => Kind::Discover,
            Work::Refresh => Kind::Refresh,
            Work::Browse { .. } => Kind::Browse,
            Work::Preview { .. } => Kind::Preview,
            Work::Protect { .. } => Kind::Protect,
            Work::Redirect { .. } => Kind::Redirect,
            Work::Notes(_) => Kind::Notes,
            Work::Replay(_) => Kind::Replay,
            Work::Replays => Kind::Replays,
        }
    }

    /// The queue this work reads (its vhost and name), when it reads one.
    fn reads(&self) -> Option<(&str, &str)> {
        match self {
            Work::Browse { vhost, queue, .. } | Work::Preview { vhost, queue, .. } => {
                Some((vhost, queue))
            }
            Work::Replay(r) => Some((&r.vhost, &r.queue)),
            _ => None,
        }
    }
}

/// What is known of a started job until it reports.
#[derive(Debug)]
struct Running {
    ticket: Ticket,
    kind: Kind,
    reads: Option<QueueRef>,
    /// A browse's limit.
    limit: Option<usize>,
}

#[derive(Debug)]
enum Link<S> {
    Offline,
    /// A connect is under way; only its report with this attempt counts.
    Connecting(u64),
    Ready(S),
}

/// A `:ctx` or `:vhost` being tried.
#[derive(Debug)]
struct Switch<S> {
    /// The UI's generation for the new place.
    generation: u64,
    to: Retarget,
    stage: Stage<S>,
}

#[derive(Debug)]
enum Stage<S> {
    /// Only this connect attempt's report counts.
    Connecting(u64),
    /// Connected; the first listing (request number) runs on `session`.
    Listing { session: S, request: u64 },
}

#[derive(Debug)]
pub struct Plan<S> {
    generation: u64,
    /// The last request number given out (tickets and connect attempts).
    counter: u64,
    /// Snapshot files: always "connected", read-only, no other contexts.
    snapshot: bool,
    link: Link<S>,
    /// Requests waiting for the connection, in arrival order.
    waiting: Vec<Job>,
    /// Requests held behind a running one (a read of the same queue, a discovery), in order.
    held: Vec<Job>,
    running: HashMap<u64, Running>,
    /// The accepted replay, by request number, from acceptance until it reports.
    replay: Option<u64>,
    /// A switch being tried; the session above serves until it succeeds.
    switching: Option<Switch<S>>,
}

impl<S: Clone> Plan<S> {
    /// A live broker, not connected yet.
    pub fn broker() -> Plan<S> {
        Plan::with_link(Link::Offline, false)
    }

    /// Snapshot files, served by `source`.
    pub fn snapshot(source: S) -> Plan<S> {
        Plan::with_link(Link::Ready(source), true)
    }

    fn with_link(link: Link<S>, snapshot: bool) -> Plan<S> {
        Plan {
            generation: 0,
            counter: 0,
            snapshot,
            link,
            waiting: Vec::new(),
            held: Vec::new(),
            running: HashMap::new(),
            replay: None,
            switching: None,
        }
    }

    pub fn command(&mut self, cmd: Command) -> Vec<Action<S>> {
        match cmd {
            Command::Quit => vec![Action::Quit],
            Command::CancelReplay => self.cancel_replay(),
            Command::SwitchContext {
                name,
                vhost,
                generation,
            } => self.switch(Retarget::Context(name, vhost), generation),
            Command::SwitchVhost { name, generation } => {
                self.switch(Retarget::Vhost(name), generation)
            }
            Command::LoadQueues => self.request(Work::Discover),
            Command::RefreshDepths if self.snapshot => Vec::new(),
            Command::RefreshDepths => self.request(Work::Refresh),
            Command::Browse {
                vhost,
                queue,
                limit,
                read_again,
                restart,
            } => {
                if !restart && !read_again && self.reading(&vhost, &queue, limit) {
                    return vec![Action::Send(Report::Notice(format!(
                        "already reading {}: its messages are arriving (Ctrl-R reads it again from the start)",
                        crate::domain::sanitize::one_line(&queue, 80)
                    )))];
                }
                self.request(Work::Browse {
                    vhost,
                    queue,
                    limit,
                    read_again,
                    again: restart,
                })
            }
            Command::PreviewReplay { .. } if self.snapshot => {
                self.error("replay needs a broker (a snapshot is read-only)")
            }
            Command::PreviewReplay {
                vhost,
                queue,
                selection,
                keep_attempts,
                edited,
                strip_failure_stamp,
            } => self.request(Work::Preview {
                vhost,
                queue,
                selection,
                keep_attempts,
                strip_failure_stamp,
                restore: None,
                edited,
            }),
            Command::PreviewRestore { .. } if self.snapshot => {
                self.error("restore needs a broker (a snapshot is read-only)")
            }
            Command::PreviewRestore {
                vhost,
                queue,
                selection,
                how,
            } => self.request(Work::Preview {
                vhost,
                queue,
                selection,
                keep_attempts: false,
                strip_failure_stamp: false,
                restore: Some(how),
                edited: None,
            }),
            Command::Protect { .. } if self.snapshot => {
                self.error("protect needs a broker (a snapshot is read-only)")
            }
            Command::Protect { vhost, queue } => self.request(Work::Protect { vhost, queue }),
            Command::Redirect { .. } if self.snapshot => {
                self.error("redirects are kept on a broker (a snapshot is read-only)")
            }
            Command::Redirect {
                vhost,
                change,
                create_stream,
            } => {
                self.request(Work::Redirect {
                    vhost,
                    change,
                    create_stream,
                })
            }
            Command::SetGroupNote { .. } if self.snapshot => self.error(
                "a note belongs to a broker's queue: open the broker, not a snapshot, to write one",
            ),
            Command::ForgetGroupNotes { .. } if self.snapshot => Vec::new(),
            Command::SetGroupNote { vhost, note } => {
                self.request(Work::Notes(NoteWork::Set { vhost, note }))
            }
            Command::ForgetGroupNotes {
                vhost,
                queue,
                notes,
            } => self.request(Work::Notes(NoteWork::Forget {
                vhost,
                queue,
                notes,
            })),
            Command::LoadReplays if self.snapshot => {
                self.error("the Replays view needs a broker (`warren audit --local` shows this machine's record)")
            }
            Command::LoadReplays => self.request(Work::Replays),
            Command::Replay(_) if self.replay.is_some() => {
                self.error("a replay is already running")
            }
            // The session it would run on is about to be replaced.
            Command::Replay(req) if self.switching.is_some() => vec![Action::Send(replay_failed(
                &req,
                "a switch of context or vhost is under way: nothing moved; replay when it is done",
            ))],
            Command::Replay(req) if self.snapshot => vec![Action::Send(replay_failed(
                &req,
                "no broker: a snapshot is read-only",
            ))],
            Command::Replay(req) => {
                let job = self.job(Work::Replay(req));
                self.replay = Some(job.ticket.request);
                self.admit(job)
            }
        }
    }

    /// A connect reported. Only the latest attempt counts; an abandoned one is dropped (with
    /// the session it may have opened).
    pub fn connected(&mut self, attempt: u64, result: Result<S, String>) -> Vec<Action<S>> {
        if let Some(sw) = &mut self.switching
            && matches!(sw.stage, Stage::Connecting(a) if a == attempt)
        {
            return match result {
                // Connected is not enough: the new place must list its queues too.
                Ok(session) => {
                    self.counter += 1;
                    let ticket = Ticket {
                        generation: sw.generation,
                        request: self.counter,
                    };
                    sw.stage = Stage::Listing {
                        session: session.clone(),
                        request: ticket.request,
                    };
                    self.running.insert(
                        ticket.request,
                        Running {
                            ticket,
                            kind: Kind::Discover,
                            reads: None,
                            limit: None,
                        },
                    );
                    vec![Action::Start {
                        job: Job {
                            ticket,
                            work: Work::Discover,
                        },
                        session,
                    }]
                }
                Err(why) => self.switch_failed(why),
            };
        }
        if !matches!(self.link, Link::Connecting(a) if a == attempt) {
            return Vec::new();
        }
        let waiting = std::mem::take(&mut self.waiting);
        match result {
            Ok(session) => {
                self.link = Link::Ready(session);
                let mut out = vec![Action::Send(Report::Connection(ConnectionState::Connected))];
                for job in waiting {
                    out.extend(self.schedule(job));
                }
                out
            }
            Err(why) => {
                self.link = Link::Offline;
                let mut out = vec![
                    Action::Send(Report::Connection(ConnectionState::Disconnected(
                        why.clone(),
                    ))),
                    Action::Send(Report::Error(Failure::in_generation(
                        why.clone(),
                        self.generation,
                    ))),
                ];
                // The error above answers the rest; a replay's progress window needs its end.
                for job in waiting {
                    if let Work::Replay(req) = &job.work {
                        self.replay = None;
                        out.push(Action::Send(replay_failed(req, &why)));
                    }
                }
                out
            }
        }
    }

    /// A started job reported: its answers (sent unless a newer request replaced it) and, for a
    /// protect, the discovery that shows its effect.
    pub fn finished(
        &mut self,
        ticket: Ticket,
        events: Vec<Report>,
        then: Option<Work>,
    ) -> Vec<Action<S>> {
        let Some(done) = self.running.remove(&ticket.request) else {
            return events.into_iter().map(Action::Send).collect();
        };
        if let Some(sw) = &self.switching
            && matches!(sw.stage, Stage::Listing { request, .. } if request == ticket.request)
        {
            return self.switch_listed(events);
        }
        // The listing of a switch that a newer one replaced: nobody shows that place.
        if done.ticket.generation > self.generation {
            return Vec::new();
        }
        if done.kind == Kind::Replay && self.replay == Some(ticket.request) {
            self.replay = None;
        }
        let fresh = done.ticket.generation == self.generation;
        let superseded = matches!(done.kind, Kind::Browse | Kind::Preview)
            && self.held.iter().any(|j| {
                j.ticket.generation == done.ticket.generation
                    && j.work.kind() == done.kind
                    && j.work.reads()
                        == done
                            .reads
                            .as_ref()
                            .map(|r| (r.vhost.as_str(), r.name.as_str()))
            });
        let mut out: Vec<Action<S>> = Vec::new();
        if !superseded {
            // Connection news of a session that is gone would describe the wrong one, and it
            // carries no generation for `update` to check; everything else does.
            out.extend(
                events
                    .into_iter()
                    .filter(|e| fresh || !matches!(e, Report::Connection(_)))
                    .map(Action::Send),
            );
        }
        out.extend(self.release());
        if fresh && let Some(work) = then {
            out.extend(self.request(work));
        }
        out
    }

    /// A browse of `queue` with `limit` is under way in this place, or waiting to start.
    fn reading(&self, vhost: &str, queue: &str, limit: usize) -> bool {
        let at = QueueRef::new(vhost, queue);
        let running = self.running.values().any(|r| {
            r.ticket.generation == self.generation
                && r.kind == Kind::Browse
                && r.reads.as_ref() == Some(&at)
                && r.limit == Some(limit)
        });
        let queued = self.waiting.iter().chain(&self.held).any(|j| {
            j.ticket.generation == self.generation
                && matches!(&j.work, Work::Browse { vhost: v, queue: q, limit: l, .. }
                    if v == vhost && q == queue && *l == limit)
        });
        running || queued
    }

    fn job(&mut self, work: Work) -> Job {
        self.counter += 1;
        Job {
            ticket: Ticket {
                generation: self.generation,
                request: self.counter,
            },
            work,
        }
    }

    fn request(&mut self, work: Work) -> Vec<Action<S>> {
        let job = self.job(work);
        self.admit(job)
    }

    fn error(&self, text: &str) -> Vec<Action<S>> {
        vec![Action::Send(Report::Error(Failure::in_generation(
            text,
            self.generation,
        )))]
    }

    /// Runs `job` when connected; otherwise it waits, and a connect starts if none is under way.
    fn admit(&mut self, job: Job) -> Vec<Action<S>> {
        match self.link {
            Link::Ready(_) => self.schedule(job),
            Link::Connecting(_) => {
                self.wait(job);
                Vec::new()
            }
            Link::Offline => {
                self.wait(job);
                self.counter += 1;
                self.link = Link::Connecting(self.counter);
                vec![
                    Action::Send(Report::Connection(ConnectionState::Connecting)),
                    Action::Connect {
                        attempt: self.counter,
                        to: None,
                    },
                ]
            }
        }
    }

    fn wait(&mut self, job: Job) {
        // A refresh already waiting answers this one too.
        if job.work.kind() == Kind::Refresh
            && self.waiting.iter().any(|j| j.work.kind() == Kind::Refresh)
        {
            return;
        }
        self.waiting.push(job);
    }

    /// Connected: start `job`, hold it behind what it must not overlap, or skip it.
    fn schedule(&mut self, mut job: Job) -> Vec<Action<S>> {
        let Link::Ready(session) = &self.link else {
            self.wait(job);
            return Vec::new();
        };
        let generation = job.ticket.generation;
        let kind = job.work.kind();
        let reads = job.work.reads().map(|(v, q)| QueueRef::new(v, q));
        let same_session = |r: &Running| r.ticket.generation == generation;
        let blocked = match kind {
            Kind::Refresh => {
                // Skip a refresh while the previous one is still out (slow link, busy broker).
                if self
                    .running
                    .values()
                    .any(|r| same_session(r) && r.kind == Kind::Refresh)
                {
                    return Vec::new();
                }
                false
            }
            Kind::Discover => self
                .running
                .values()
                .any(|r| same_session(r) && r.kind == Kind::Discover),
            Kind::Browse | Kind::Preview | Kind::Replay => self
                .running
                .values()
                .any(|r| same_session(r) && r.reads.is_some() && r.reads == reads),
            Kind::Protect | Kind::Redirect | Kind::Notes | Kind::Replays => false,
        };
        let mut out = Vec::new();
        if blocked {
            // A browse behind a browse of its queue replaces it: read again from the start.
            let replacing = kind == Kind::Browse
                && self.running.values().any(|r| {
                    same_session(r)
                        && r.kind == Kind::Browse
                        && r.reads.is_some()
                        && r.reads == reads
                });
            if let (true, Work::Browse { again, queue, .. }) = (replacing, &mut job.work) {
                if !*again {
                    out.push(Action::Send(Report::Notice(format!(
                        "{} will be read again from the start once the read under way has handed its messages back",
                        crate::domain::sanitize::one_line(queue, 80)
                    ))));
                }
                *again = true;
            }
            // The newest browse, plan or discovery replaces an older one waiting here.
            if kind != Kind::Replay {
                self.held.retain(|j| {
                    !(j.ticket.generation == generation
                        && j.work.kind() == kind
                        && j.work.reads()
                            == reads.as_ref().map(|r| (r.vhost.as_str(), r.name.as_str())))
                });
            }
            self.held.push(job);
            return out;
        }
        let session = session.clone();
        let limit = match &job.work {
            Work::Browse { limit, .. } => Some(*limit),
            _ => None,
        };
        self.running.insert(
            job.ticket.request,
            Running {
                ticket: job.ticket,
                kind,
                reads,
                limit,
            },
        );
        out.push(Action::Start { job, session });
        out
    }

    /// Starts what was held and may run now.
    fn release(&mut self) -> Vec<Action<S>> {
        let held = std::mem::take(&mut self.held);
        let mut out = Vec::new();
        for job in held {
            out.extend(self.schedule(job));
        }
        out
    }

    fn cancel_replay(&mut self) -> Vec<Action<S>> {
        let Some(request) = self.replay else {
            return Vec::new();
        };
        if self.running.contains_key(&request) {
            return vec![Action::CancelReplay];
        }
        // Not started: waiting for the connection or for a read of its queue. It ends here.
        let taken =
            take_where(&mut self.waiting, request).or_else(|| take_where(&mut self.held, request));
        self.replay = None;
        match taken.map(|j| j.work) {
            Some(Work::Replay(req)) => vec![Action::Send(Report::ReplayFinished(ReplayOutcome {
                progress: ReplayProgress {
                    total: req.expected,
                    ..Default::default()
                },
                dry_run: req.dry_run,
                cancelled: true,
                error: None,
                summary: Vec::new(),
                words: vec!["cancelled before it started: nothing moved".into()],
                headline: "cancelled before it started: nothing moved".into(),
            }))],
            _ => Vec::new(),
        }
    }

    /// Tries `to`; the session in use goes on serving until it succeeded.
    fn switch(&mut self, to: Retarget, generation: u64) -> Vec<Action<S>> {
        let refused = |text: &str| {
            vec![Action::Send(Report::SwitchFailed {
                generation,
                text: text.to_string(),
            })]
        };
        if self.replay.is_some() {
            return refused("a replay is running: wait for it or cancel it (Esc) before switching");
        }
        if self.snapshot {
            return refused(
                "a snapshot has no other contexts or vhosts (run `warren` without files to browse a broker)",
            );
        }
        // A switch under way is replaced: its connect or listing is dropped when it reports.
        self.counter += 1;
        self.switching = Some(Switch {
            generation,
            to: to.clone(),
            stage: Stage::Connecting(self.counter),
        });
        vec![Action::Connect {
            attempt: self.counter,
            to: Some(to),
        }]
    }

    fn switch_failed(&mut self, why: String) -> Vec<Action<S>> {
        match self.switching.take() {
            Some(sw) => vec![Action::Send(Report::SwitchFailed {
                generation: sw.generation,
                text: why,
            })],
            None => Vec::new(),
        }
    }

    /// The new place listed its queues (or failed to): the switch is done, one way or the other.
    fn switch_listed(&mut self, events: Vec<Report>) -> Vec<Action<S>> {
        if !events
            .iter()
            .any(|e| matches!(e, Report::QueuesLoaded { .. }))
        {
            let why = events
                .into_iter()
                .find_map(|e| match e {
                    Report::Error(f) => Some(f.text),
                    _ => None,
                })
                .unwrap_or_else(|| "the new place did not list its queues".into());
            return self.switch_failed(why);
        }
        let Some(Switch {
            generation,
            to,
            stage: Stage::Listing { session, .. },
        }) = self.switching.take()
        else {
            return Vec::new();
        };
        // From here on the new place is the one shown: what waited for the old one is dropped,
        // and tasks still running on it end with answers of the old generation.
        self.generation = generation;
        self.link = Link::Ready(session);
        self.waiting.clear();
        self.held.clear();
        let mut out = vec![Action::Retarget(to)];
        out.extend(events.into_iter().map(Action::Send));
        out
    }
}

fn take_where(jobs: &mut Vec<Job>, request: u64) -> Option<Job> {
    let i = jobs.iter().position(|j| j.ticket.request == request)?;
    Some(jobs.remove(i))
}

/// How a replay that could not start ends in the progress window.
pub fn replay_failed(req: &ReplayRequest, why: &str) -> Report {
    Report::ReplayFinished(ReplayOutcome {
        progress: ReplayProgress::default(),
        dry_run: req.dry_run,
        cancelled: false,
        error: Some(why.to_string()),
        summary: Vec::new(),
        words: vec![why.to_string()],
        headline: why.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The session is a name: the plan only hands it on.
    type P = Plan<&'static str>;

    fn browse(queue: &str) -> Command {
        Command::Browse {
            vhost: "/".into(),
            queue: queue.into(),
            limit: 500,
            read_again: false,
            restart: false,
        }
    }

    /// Ctrl-R: read it again from the start.
    fn reread(queue: &str) -> Command {
        Command::Browse {
            vhost: "/".into(),
            queue: queue.into(),
            limit: 500,
            read_again: false,
            restart: true,
        }
    }

    fn preview(queue: &str) -> Command {
        Command::PreviewReplay {
            vhost: "/".into(),
            queue: queue.into(),
            selection: Selection::All,
            keep_attempts: false,
            edited: None,
            strip_failure_stamp: false,
        }
    }

    fn replay(queue: &str) -> Command {
        Command::Replay(ReplayRequest {
            vhost: "/".into(),
            queue: queue.into(),
            selection: Selection::All,
            expected: 3,
            rate: 10,
            keep_attempts: false,
            dry_run: false,
            job: Default::default(),
            ..Default::default()
        })
    }

    fn attempt(actions: &[Action<&str>]) -> Option<u64> {
        actions.iter().find_map(|a| match a {
            Action::Connect { attempt, .. } => Some(*attempt),
            _ => None,
        })
    }

    fn started(actions: &[Action<&'static str>]) -> Vec<(Ticket, Work, &'static str)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Start { job, session } => Some((job.ticket, job.work.clone(), *session)),
                _ => None,
            })
            .collect()
    }

    fn sent<'a>(actions: &'a [Action<&str>]) -> Vec<&'a Report> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Send(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    fn page(queue: &str, ticket: Ticket) -> Report {
        Report::MessagesLoaded {
            vhost: "/".into(),
            queue: queue.into(),
            messages: Vec::new(),
            first_seen: Vec::new(),
            replays: Vec::new(),
            authors: Default::default(),
            stop: "all 0 messages".into(),
            ticket,
        }
    }

    /// A plan connected to session "s1".
    fn connected() -> P {
        let mut p = P::broker();
        let a = p.command(Command::LoadQueues);
        let n = attempt(&a).expect("connects");
        let a = p.connected(n, Ok("s1"));
        let [(t, Work::Discover, "s1")] = started(&a)[..] else {
            panic!("{a:?}")
        };
        p.finished(t, Vec::new(), None);
        p
    }

    #[test]
    fn the_first_request_connects_and_waits_then_runs_on_the_session() {
        let mut p = P::broker();
        let a = p.command(Command::LoadQueues);
        assert!(matches!(
            sent(&a)[..],
            [Report::Connection(ConnectionState::Connecting)]
        ));
        let n = attempt(&a).expect("a connect");
        assert!(started(&a).is_empty(), "nothing runs before the session");
        // More requests while connecting: no second connect.
        let b = p.command(browse("q"));
        assert!(attempt(&b).is_none() && started(&b).is_empty(), "{b:?}");
        let c = p.connected(n, Ok("s1"));
        assert!(matches!(
            sent(&c)[..],
            [Report::Connection(ConnectionState::Connected)]
        ));
        let s = started(&c);
        assert_eq!(s.len(), 2, "both waiting requests start: {c:?}");
        assert!(matches!(s[0].1, Work::Discover) && s[0].2 == "s1");
        assert!(matches!(&s[1].1, Work::Browse { queue, .. } if queue == "q"));
        assert!(s[0].0.request < s[1].0.request, "numbered in arrival order");
    }

    #[test]
    fn cancel_and_quit_act_while_a_connect_is_pending() {
        let mut p = P::broker();
        let a = p.command(replay("q"));
        assert!(attempt(&a).is_some());
        // Today's connect may take its full timeout; the cancel does not wait for it.
        let c = p.command(Command::CancelReplay);
        assert!(
            matches!(
                sent(&c)[..],
                [Report::ReplayFinished(ReplayOutcome {
                    cancelled: true,
                    error: None,
                    progress: ReplayProgress {
                        moved: 0,
                        total: 3,
                        ..
                    },
                    ..
                })]
            ),
            "{c:?}"
        );
        assert!(matches!(p.command(Command::Quit)[..], [Action::Quit]));
        // The cancelled replay never starts once the connect lands.
        let done = p.connected(attempt(&a).expect("a connect"), Ok("s1"));
        assert!(started(&done).is_empty(), "{done:?}");
        // And another replay may be accepted.
        assert!(!started(&p.command(replay("q"))).is_empty());
    }

    #[test]
    fn cancel_reaches_a_running_replay_at_once() {
        let mut p = connected();
        let a = p.command(replay("q"));
        assert_eq!(started(&a).len(), 1);
        assert!(matches!(
            p.command(Command::CancelReplay)[..],
            [Action::CancelReplay]
        ));
        let again = p.command(replay("q"));
        assert!(
            matches!(sent(&again)[..], [Report::Error(f)] if f.text.contains("already running")),
            "{again:?}"
        );
    }

    #[test]
    fn a_failed_connect_answers_what_waited_and_the_next_request_connects_again() {
        let mut p = P::broker();
        let n = attempt(&p.command(browse("q"))).unwrap();
        p.command(replay("r"));
        let a = p.connected(n, Err("connection refused".into()));
        let events = sent(&a);
        assert!(
            matches!(events[0], Report::Connection(ConnectionState::Disconnected(w)) if w == "connection refused")
        );
        assert!(matches!(events[1], Report::Error(f) if f.text == "connection refused"));
        assert!(
            matches!(events[2], Report::ReplayFinished(o) if o.error.as_deref() == Some("connection refused")),
            "the progress window gets its end: {a:?}"
        );
        assert!(started(&a).is_empty());
        let b = p.command(browse("q"));
        let m = attempt(&b).expect("connects again");
        assert_ne!(m, n);
        // The old attempt's late report is not this one's.
        assert!(p.connected(n, Ok("stale")).is_empty());
        assert_eq!(started(&p.connected(m, Ok("s2")))[0].2, "s2");
    }

    #[test]
    fn one_read_of_a_queue_at_a_time_and_the_newest_reread_wins() {
        let mut p = connected();
        let first = started(&p.command(browse("q")));
        assert_eq!(first.len(), 1);
        // Another queue is read at the same time; the same queue is not.
        assert_eq!(started(&p.command(browse("other"))).len(), 1);
        assert!(started(&p.command(reread("q"))).is_empty(), "held");
        assert!(
            started(&p.command(reread("q"))).is_empty(),
            "held, replacing the one held"
        );
        // The first read ends: its page is dropped (a newer browse of q waits), the newest starts.
        let t1 = first[0].0;
        let a = p.finished(t1, vec![page("q", t1)], None);
        assert!(sent(&a).is_empty(), "{a:?}");
        let next = started(&a);
        assert_eq!(next.len(), 1, "only the newest of the two held: {a:?}");
        assert_eq!(next[0].0.request, t1.request + 3);
        assert!(
            matches!(&next[0].1, Work::Browse { again: true, .. }),
            "its page says it was read again: {a:?}"
        );
        let a = p.finished(next[0].0, vec![page("q", next[0].0)], None);
        assert_eq!(sent(&a).len(), 1, "the newest answers");
    }

    /// The report: Enter on a queue whose read of a million was under way started it again.
    #[test]
    fn a_second_open_of_a_queue_being_read_does_not_start_it_again() {
        let mut p = connected();
        let first = started(&p.command(browse("q")));
        assert_eq!(first.len(), 1);
        assert!(matches!(&first[0].1, Work::Browse { again: false, .. }));
        for _ in 0..2 {
            let a = p.command(browse("q"));
            assert!(started(&a).is_empty(), "{a:?}");
            assert!(
                matches!(sent(&a)[..], [Report::Notice(n)] if n.starts_with("already reading q")),
                "{a:?}"
            );
        }
        // The read under way answers, and nothing starts after it.
        let t1 = first[0].0;
        let a = p.finished(t1, vec![page("q", t1)], None);
        assert_eq!(sent(&a).len(), 1, "the first read answers: {a:?}");
        assert!(started(&a).is_empty(), "not read again: {a:?}");
        // Once it ended, Enter reads the queue again, as a new read.
        let b = started(&p.command(browse("q")));
        assert!(matches!(
            &b[..],
            [(_, Work::Browse { again: false, .. }, _)]
        ));
    }

    #[test]
    fn a_browse_waiting_for_the_connection_answers_a_second_open_too() {
        let mut p = P::broker();
        let n = attempt(&p.command(browse("q"))).unwrap();
        let a = p.command(browse("q"));
        assert!(matches!(sent(&a)[..], [Report::Notice(_)]), "{a:?}");
        let c = p.connected(n, Ok("s1"));
        assert_eq!(started(&c).len(), 1, "one read: {c:?}");
    }

    #[test]
    fn another_limit_or_a_reread_replaces_the_read_under_way_and_says_so() {
        let mut p = connected();
        let first = started(&p.command(browse("q")));
        let bigger = Command::Browse {
            vhost: "/".into(),
            queue: "q".into(),
            limit: 1_000_000,
            read_again: false,
            restart: false,
        };
        let a = p.command(bigger);
        assert!(started(&a).is_empty(), "held: {a:?}");
        assert!(
            matches!(sent(&a)[..], [Report::Notice(n)] if n.contains("read again from the start")),
            "{a:?}"
        );
        let a = p.finished(first[0].0, vec![page("q", first[0].0)], None);
        assert!(
            sent(&a).is_empty(),
            "the replaced read's page is dropped: {a:?}"
        );
        assert!(
            matches!(
                &started(&a)[..],
                [(
                    _,
                    Work::Browse {
                        limit: 1_000_000,
                        again: true,
                        ..
                    },
                    _
                )]
            ),
            "{a:?}"
        );
    }

    #[test]
    fn queues_of_one_name_in_two_vhosts_are_two_queues() {
        let mut p = connected();
        let in_vhost = |vhost: &str| Command::Browse {
            vhost: vhost.into(),
            queue: "q".into(),
            limit: 500,
            read_again: false,
            restart: false,
        };
        let a = started(&p.command(in_vhost("/")));
        let b = started(&p.command(in_vhost("billing")));
        assert_eq!(
            (a.len(), b.len()),
            (1, 1),
            "read side by side: not one queue"
        );
        assert!(
            matches!(&b[0].1, Work::Browse { vhost, queue, .. } if vhost == "billing" && queue == "q")
        );
        // The same queue of the same vhost still waits its turn.
        assert!(started(&p.command(in_vhost("billing"))).is_empty());
    }

    #[test]
    fn a_plan_waits_for_a_browse_of_its_queue_and_does_not_replace_it() {
        let mut p = connected();
        let b = started(&p.command(browse("q")));
        assert!(started(&p.command(preview("q"))).is_empty(), "held");
        let a = p.finished(b[0].0, vec![page("q", b[0].0)], None);
        assert_eq!(sent(&a).len(), 1, "a plan does not supersede a browse");
        assert!(matches!(started(&a)[..], [(_, Work::Preview { .. }, _)]));
    }

    #[test]
    fn a_replay_waits_for_a_read_of_its_queue_and_cancels_there() {
        let mut p = connected();
        let b = started(&p.command(browse("q")));
        assert!(started(&p.command(replay("q"))).is_empty(), "held");
        let c = p.command(Command::CancelReplay);
        assert!(matches!(sent(&c)[..], [Report::ReplayFinished(o)] if o.cancelled));
        let a = p.finished(b[0].0, Vec::new(), None);
        assert!(started(&a).is_empty(), "the cancelled replay never starts");
    }

    #[test]
    fn one_discovery_at_a_time_and_a_refresh_out_skips_the_next() {
        let mut p = connected();
        let d = started(&p.command(Command::LoadQueues));
        assert_eq!(d.len(), 1);
        assert!(started(&p.command(Command::LoadQueues)).is_empty());
        let a = p.finished(d[0].0, vec![Report::Notice("first".into())], None);
        assert_eq!(sent(&a).len(), 1, "the first discovery still answers");
        assert!(matches!(started(&a)[..], [(_, Work::Discover, _)]));

        let r = started(&p.command(Command::RefreshDepths));
        assert_eq!(r.len(), 1);
        assert!(started(&p.command(Command::RefreshDepths)).is_empty());
        p.finished(r[0].0, Vec::new(), None);
        assert_eq!(started(&p.command(Command::RefreshDepths)).len(), 1);
    }

    #[test]
    fn a_protect_is_followed_by_a_discovery() {
        let mut p = connected();
        let s = started(&p.command(Command::Protect {
            vhost: "/".into(),
            queue: "q".into(),
        }));
        let a = p.finished(
            s[0].0,
            vec![Report::Notice("protected".into())],
            Some(Work::Discover),
        );
        assert_eq!(sent(&a).len(), 1);
        assert!(matches!(started(&a)[..], [(_, Work::Discover, _)]));
    }

    fn listing(generation: u64) -> Report {
        Report::QueuesLoaded {
            overview: Default::default(),
            discovery: Default::default(),
            ticket: Ticket {
                generation,
                request: 0,
            },
        }
    }

    fn switch_vhost(p: &mut P, name: &str, generation: u64) -> Vec<Action<&'static str>> {
        p.command(Command::SwitchVhost {
            name: name.into(),
            generation,
        })
    }

    fn retargets(actions: &[Action<&str>]) -> Vec<Retarget> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Retarget(r) => Some(r.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_switch_is_tried_while_the_old_session_serves_and_adopted_after_its_listing() {
        let mut p = connected();
        let old = started(&p.command(browse("q")));
        let a = switch_vhost(&mut p, "/b", 1);
        assert!(
            matches!(&a[..], [Action::Connect { to: Some(Retarget::Vhost(v)), .. }] if v == "/b"),
            "a connect to the new place, nothing else: {a:?}"
        );
        let n = attempt(&a).unwrap();
        // The old session goes on serving, in the old generation.
        let during = started(&p.command(browse("other")));
        assert!(matches!(during[..], [(t, _, "s1")] if t.generation == 0));
        let e = p.finished(old[0].0, vec![page("q", old[0].0)], None);
        assert_eq!(sent(&e).len(), 1, "the old place's answer is still news");
        // Connected is not enough: the new place lists its queues first, on the new session.
        let c = p.connected(n, Ok("s2"));
        assert!(sent(&c).is_empty(), "{c:?}");
        let [(t, Work::Discover, "s2")] = started(&c)[..] else {
            panic!("{c:?}")
        };
        assert_eq!(t.generation, 1);
        let done = p.finished(t, vec![listing(1)], None);
        assert_eq!(retargets(&done), [Retarget::Vhost("/b".into())]);
        assert!(
            matches!(sent(&done)[..], [Report::QueuesLoaded { ticket, .. }] if ticket.generation == 1)
        );
        // From now on: the new session, the new generation.
        let next = started(&p.command(browse("q")));
        assert!(matches!(next[..], [(t, _, "s2")] if t.generation == 1));
        // A read of the old place ending late keeps its old tag (the UI drops it).
        let late = p.finished(during[0].0, vec![page("other", during[0].0)], None);
        assert!(
            matches!(sent(&late)[..], [Report::MessagesLoaded { ticket, .. }] if ticket.generation == 0)
        );
    }

    #[test]
    fn a_failed_switch_changes_nothing_but_says_why() {
        // The connect fails (`:vhost nope`).
        let mut p = connected();
        let n = attempt(&switch_vhost(&mut p, "nope", 1)).unwrap();
        let a = p.connected(n, Err("vhost 'nope' does not exist".into()));
        assert!(
            matches!(&sent(&a)[..], [Report::SwitchFailed { generation: 1, text }] if text.contains("nope")),
            "{a:?}"
        );
        assert!(
            retargets(&a).is_empty(),
            "later connects still go to the old place"
        );
        assert!(
            !sent(&a).iter().any(|e| matches!(e, Report::Connection(_))),
            "the old session's connection is not in question"
        );
        assert!(
            matches!(started(&p.command(browse("q")))[..], [(t, _, "s1")] if t.generation == 0)
        );

        // It connects but cannot list (no permission to see the vhost's queues).
        let n = attempt(&switch_vhost(&mut p, "/locked", 2)).unwrap();
        let c = p.connected(n, Ok("s2"));
        let [(t, Work::Discover, "s2")] = started(&c)[..] else {
            panic!("{c:?}")
        };
        let err = Report::Error(Failure::in_generation("403 access refused", 2));
        let d = p.finished(t, vec![err], None);
        assert!(
            matches!(&sent(&d)[..], [Report::SwitchFailed { generation: 2, text }] if text == "403 access refused"),
            "{d:?}"
        );
        assert!(retargets(&d).is_empty());
        assert!(
            matches!(started(&p.command(browse("r")))[..], [(t, _, "s1")] if t.generation == 0)
        );
    }

    #[test]
    fn a_newer_switch_replaces_one_under_way() {
        let mut p = connected();
        let first = attempt(&switch_vhost(&mut p, "/a", 1)).unwrap();
        let second = attempt(&switch_vhost(&mut p, "/b", 2)).unwrap();
        assert!(
            p.connected(first, Ok("sa")).is_empty(),
            "the replaced one is dropped"
        );
        let c = p.connected(second, Ok("sb"));
        let [(t, Work::Discover, "sb")] = started(&c)[..] else {
            panic!("{c:?}")
        };
        // A third switch while the second one lists: the second's listing is not news.
        let third = attempt(&switch_vhost(&mut p, "/c", 3)).unwrap();
        assert!(p.finished(t, vec![listing(2)], None).is_empty());
        let c = p.connected(third, Ok("sc"));
        let [(t, Work::Discover, "sc")] = started(&c)[..] else {
            panic!("{c:?}")
        };
        let done = p.finished(t, vec![listing(3)], None);
        assert_eq!(retargets(&done), [Retarget::Vhost("/c".into())]);
        assert!(
            matches!(started(&p.command(browse("q")))[..], [(t, _, "sc")] if t.generation == 3)
        );
    }

    #[test]
    fn a_switch_is_refused_during_a_replay_and_in_a_snapshot_and_a_replay_during_a_switch() {
        let mut p = connected();
        started(&p.command(replay("q")));
        let a = p.command(Command::SwitchContext {
            name: "staging".into(),
            vhost: None,
            generation: 1,
        });
        assert!(
            matches!(&sent(&a)[..], [Report::SwitchFailed { generation: 1, text }] if text.contains("replay is running"))
        );
        assert!(attempt(&a).is_none(), "the session stays");
        assert_eq!(started(&p.command(browse("x")))[0].0.generation, 0);

        let mut s = P::snapshot("file");
        let a = switch_vhost(&mut s, "/b", 1);
        assert!(
            matches!(&sent(&a)[..], [Report::SwitchFailed { text, .. }] if text.contains("snapshot"))
        );
        assert_eq!(started(&s.command(browse("x")))[0].0.generation, 0);

        // The session a replay would run on is about to go: refused, nothing started.
        let mut p = connected();
        switch_vhost(&mut p, "/b", 1);
        let r = p.command(replay("q"));
        assert!(started(&r).is_empty());
        assert!(
            matches!(sent(&r)[..], [Report::ReplayFinished(o)] if o.error.as_deref().is_some_and(|e| e.contains("switch")))
        );
    }

    #[test]
    fn a_snapshot_needs_no_connect_and_refuses_what_needs_a_broker() {
        let mut p = P::snapshot("file");
        let a = p.command(Command::LoadQueues);
        assert!(attempt(&a).is_none());
        assert!(matches!(started(&a)[..], [(_, Work::Discover, "file")]));
        assert!(p.command(Command::RefreshDepths).is_empty());
        for cmd in [
            preview("q"),
            Command::Protect {
                vhost: "/".into(),
                queue: "q".into(),
            },
            Command::Redirect {
                vhost: "/".into(),
                change: crate::worker::protocol::RedirectChange::List,
                create_stream: None,
            },
        ] {
            let a = p.command(cmd);
            assert!(matches!(sent(&a)[..], [Report::Error(f)] if f.text.contains("snapshot")));
        }
        let a = p.command(replay("q"));
        assert!(
            matches!(sent(&a)[..], [Report::ReplayFinished(o)] if o.error.as_deref().is_some_and(|e| e.contains("snapshot")))
        );
        // A note belongs to a broker's queue; forgetting none is nothing to do.
        let note = crate::domain::grouping::GroupNote {
            queue: "q".into(),
            by: crate::domain::grouping::GroupBy::Reason,
            key: "0123456789abcdef".into(),
            text: "later".into(),
            author: String::new(),
            at: jiff::Timestamp::UNIX_EPOCH,
        };
        let a = p.command(Command::SetGroupNote {
            vhost: "/".into(),
            note: note.clone(),
        });
        assert!(matches!(sent(&a)[..], [Report::Error(f)] if f.text.contains("snapshot")));
        let a = p.command(Command::ForgetGroupNotes {
            vhost: "/".into(),
            queue: "q".into(),
            notes: vec![note],
        });
        assert!(a.is_empty());
    }

    #[test]
    fn notes_are_kept_on_the_session_without_waiting_for_a_read() {
        let mut p = connected();
        // A browse of the queue is running; the note does not wait behind it.
        started(&p.command(browse("q")));
        let note = crate::domain::grouping::GroupNote {
            queue: "q".into(),
            by: crate::domain::grouping::GroupBy::Origin,
            key: "0123456789abcdef".into(),
            text: "carrier outage".into(),
            author: String::new(),
            at: jiff::Timestamp::UNIX_EPOCH,
        };
        let a = p.command(Command::SetGroupNote {
            vhost: "/".into(),
            note,
        });
        assert!(matches!(
            started(&a)[..],
            [(_, Work::Notes(NoteWork::Set { .. }), _)]
        ));
    }
}
