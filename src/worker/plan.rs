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
        words: vec![crate::domain::sanitize::one_line(why, 600)],
        headline: why.to_string(),
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
