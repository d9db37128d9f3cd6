//! The background worker behind the TUI. It owns the broker session (or a snapshot file), takes
//! `Command`s from the UI over a bounded channel and answers with `Event`s; the UI never waits
//! on the network. Long work (browse, preview, replay) runs in its own task so a cancel or a
//! depth refresh is handled while it runs.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::broker::config::{self, Overrides};
use crate::broker::management::PermissionState;
use crate::broker::replay::StopReason;
use crate::broker::session::{self, ReadConsent, ReplaySpec, Session, SessionError};
use crate::domain::discovery::{self, Convention, Discovery, DlqInfo, DlqKind, QueueType};
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::snapshot::SnapshotHeader;
use crate::store::Store;
use crate::tui::{
    Command, ConnectionState, Event, Overview, ReplayOutcome, ReplayPreview, ReplayProgress,
};

/// Where the messages come from.
pub enum Source {
    /// A live broker, reached with these overrides (and the configuration file).
    Broker(Overrides),
    /// Snapshot files: one queue each, read-only, no broker.
    Snapshot(Vec<(SnapshotHeader, Vec<DeadLetter>)>),
}

struct Worker {
    source: Source,
    session: Option<Arc<Session>>,
    events: mpsc::Sender<Event>,
    replay: Option<(JoinHandle<()>, watch::Sender<bool>)>,
    refreshing: Option<JoinHandle<()>>,
}

/// Runs until `Command::Quit` or until the UI drops its sender.
pub async fn run(
    source: Source,
    mut commands: mpsc::Receiver<Command>,
    events: mpsc::Sender<Event>,
) {
    let mut w = Worker {
        source,
        session: None,
        events,
        replay: None,
        refreshing: None,
    };
    while let Some(cmd) = commands.recv().await {
        if matches!(cmd, Command::Quit) {
            break;
        }
        w.handle(cmd).await;
    }
    // Quitting mid-replay: cancel and let the engine settle what is in flight before exit.
    if let Some((task, cancel)) = w.replay.take() {
        let _ = cancel.send(true);
        let _ = task.await;
    }
}

impl Worker {
    async fn send(&self, e: Event) {
        let _ = self.events.send(e).await;
    }

    async fn error(&self, e: impl std::fmt::Display) {
        tracing::warn!("{e}");
        self.send(Event::Error(e.to_string())).await;
    }

    /// The session, connecting on first need.
    async fn session(&mut self) -> Option<Arc<Session>> {
        if let Some(s) = &self.session {
            return Some(s.clone());
        }
        let Source::Broker(overrides) = &self.source else {
            return None;
        };
        self.send(Event::Connection(ConnectionState::Connecting))
            .await;
        let target = match config::load(overrides) {
            Ok((_, t)) => t,
            Err(e) => {
                self.send(Event::Connection(ConnectionState::Disconnected(
                    e.to_string(),
                )))
                .await;
                self.error(e).await;
                return None;
            }
        };
        // Connected means both APIs answered for this vhost: the management API (in `open`,
        // which also checks both URLs reach one cluster) and AMQP, which is refused when the
        // vhost does not exist or the user may not use it.
        let opened = match Session::open(target).await {
            Ok(s) => match s.amqp().await {
                Ok(_) => Ok(s),
                Err(e) => Err(session::SessionError::Broker(format!(
                    "no AMQP for vhost '{}': {e}",
                    s.vhost()
                ))),
            },
            Err(e) => Err(e),
        };
        match opened {
            Ok(s) => {
                let s = Arc::new(s);
                self.session = Some(s.clone());
                self.send(Event::Connection(ConnectionState::Connected))
                    .await;
                Some(s)
            }
            Err(e) => {
                self.send(Event::Connection(ConnectionState::Disconnected(
                    e.to_string(),
                )))
                .await;
                self.error(e).await;
                None
            }
        }
    }

    async fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::LoadQueues => self.load_queues().await,
            Command::RefreshDepths => self.refresh_depths().await,
            Command::Browse {
                queue,
                limit,
                read_again,
            } => self.browse(queue, limit, read_again).await,
            Command::PreviewReplay {
                queue,
                selection,
                keep_attempts,
            } => self.preview(queue, selection, keep_attempts).await,
            Command::Replay(req) => self.replay(req).await,
            Command::CancelReplay => {
                if let Some((_, cancel)) = &self.replay {
                    let _ = cancel.send(true);
                }
            }
            Command::Protect(queue) => self.protect(queue).await,
            Command::SwitchContext(name) => self.switch(|o| o.context = Some(name)).await,
            Command::SwitchVhost(name) => self.switch(|o| o.vhost = Some(name)).await,
            Command::Quit => {}
        }
    }

    async fn switch(&mut self, change: impl FnOnce(&mut Overrides)) {
        if self.replay.as_ref().is_some_and(|(t, _)| !t.is_finished()) {
            self.error("a replay is running: wait for it or cancel it (Esc) before switching")
                .await;
            return;
        }
        match &mut self.source {
            Source::Broker(o) => change(o),
            Source::Snapshot(_) => {
                self.error("a snapshot has no other contexts or vhosts")
                    .await;
                return;
            }
        }
        self.session = None;
        self.load_queues().await;
    }

    async fn protect(&mut self, queue: String) {
        let Some(s) = self.session().await else {
            self.error("protect needs a broker (a snapshot is read-only)")
                .await;
            return;
        };
        match s.protect(&queue, true).await {
            Ok(plan) => {
                self.send(Event::Notice(format!(
                    "protected {queue}: policy {} set; reading it no longer spends deliveries",
                    plan.policy.name
                )))
                .await;
                self.load_queues().await;
            }
            Err(e) => self.error(e).await,
        }
    }

    async fn load_queues(&mut self) {
        if let Source::Snapshot(snapshots) = &self.source {
            let e = Event::QueuesLoaded {
                overview: snapshot_overview(snapshots),
                discovery: snapshot_discovery(snapshots),
            };
            self.send(e).await;
            return;
        }
        let Some(s) = self.session().await else {
            return;
        };
        match s.discover().await {
            Ok(discovery) => {
                let read_only = s.target.read_only || !may_write(&s).await;
                let overview = Overview {
                    context: s.target.context.clone(),
                    broker_version: s.overview.rabbitmq_version.clone(),
                    user: s.whoami.name.clone(),
                    tags: s.whoami.tags.clone(),
                    vhost: s.vhost().to_string(),
                    read_only,
                };
                self.send(Event::QueuesLoaded {
                    overview,
                    discovery,
                })
                .await;
            }
            Err(e) => self.error(e).await,
        }
    }

    async fn refresh_depths(&mut self) {
        if matches!(self.source, Source::Snapshot(_)) {
            return;
        }
        // Skip a refresh while the previous one is still out (slow link, busy broker).
        if self.refreshing.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let Some(s) = self.session().await else {
            return;
        };
        let events = self.events.clone();
        self.refreshing = Some(tokio::spawn(async move {
            match s.mgmt.queues(s.vhost()).await {
                Ok(qs) => {
                    let depths = qs.into_iter().map(|q| (q.name, q.messages)).collect();
                    let _ = events.send(Event::DepthsRefreshed(depths)).await;
                }
                Err(e) => {
                    let _ = events
                        .send(Event::Connection(ConnectionState::Disconnected(
                            e.to_string(),
                        )))
                        .await;
                }
            }
        }));
    }

    async fn browse(&mut self, queue: String, limit: usize, read_again: bool) {
        if let Source::Snapshot(snapshots) = &self.source {
            let messages: Vec<DeadLetter> = snapshots
                .iter()
                .filter(|(h, _)| h.queue == queue)
                .flat_map(|(_, m)| m.iter())
                .take(limit)
                .cloned()
                .collect();
            let n = messages.len();
            let first_seen = vec![None; n];
            self.send(Event::MessagesLoaded {
                queue,
                messages,
                first_seen,
                stop: format!("{n} messages from the snapshot"),
            })
            .await;
            return;
        }
        let Some(s) = self.session().await else {
            return;
        };
        let events = self.events.clone();
        let consent = if read_again {
            ReadConsent::ReadAgain
        } else {
            ReadConsent::Reuse
        };
        tokio::spawn(async move {
            match s.browse(&queue, limit, consent).await {
                Ok(page) => {
                    let keys: Vec<String> =
                        page.messages.iter().map(identity::message_key).collect();
                    let seen = remember(&s, &queue, &keys);
                    let first_seen = keys.iter().map(|k| seen.get(k).copied()).collect();
                    let mut stop = describe_stop(&page.stopped, page.messages.len());
                    // What the read spent on a quorum queue, in this broker's own terms.
                    if page.reused {
                        stop = format!(
                            "{stop}, as read earlier this session (reading this quorum queue again costs deliveries: Ctrl-R twice)"
                        );
                    } else if let Some(note) = s.cost_note(&queue, &page).await {
                        stop = format!("{stop}; {note}");
                    }
                    let _ = events
                        .send(Event::MessagesLoaded {
                            queue,
                            messages: session::into_messages(page),
                            first_seen,
                            stop,
                        })
                        .await;
                }
                Err(e) => {
                    let _ = events.send(read_failure(queue, e)).await;
                }
            }
        });
    }

    async fn preview(
        &mut self,
        queue: String,
        selection: crate::domain::selection::Selection,
        keep_attempts: bool,
    ) {
        let Some(s) = self.session().await else {
            self.error("replay needs a broker (a snapshot is read-only)")
                .await;
            return;
        };
        let events = self.events.clone();
        tokio::spawn(async move {
            let spec = spec_for(&s, queue.clone(), selection, None, keep_attempts);
            match s.preview(&spec, |keys| remember(&s, &queue, keys)).await {
                Ok(p) => {
                    let mut warnings: Vec<String> =
                        p.refusals.iter().map(|r| format!("refused: {r}")).collect();
                    warnings.extend(p.warnings.iter().map(|(w, n)| format!("{n} × {w}")));
                    let preview = ReplayPreview {
                        queue,
                        count: p.selected,
                        targets: p
                            .targets
                            .iter()
                            .map(|(label, t)| {
                                format!(
                                    "{label} (exchange '{}', routing key '{}') × {}",
                                    t.exchange, t.routing_key, t.count
                                )
                            })
                            .collect(),
                        reaches: p
                            .targets
                            .values()
                            .flat_map(|t| t.reaches.iter().cloned())
                            .collect(),
                        removes: p.removed.into_iter().collect(),
                        adds: p.added.into_iter().collect(),
                        replayed_before: p.replayed_before,
                        keep_attempts,
                        warnings,
                    };
                    let _ = events.send(Event::ReplayPreview(preview)).await;
                }
                Err(e) => {
                    let _ = events.send(read_failure(queue, e)).await;
                }
            }
        });
    }

    async fn replay(&mut self, req: crate::tui::ReplayRequest) {
        if self.replay.as_ref().is_some_and(|(t, _)| !t.is_finished()) {
            self.error("a replay is already running").await;
            return;
        }
        let dry_run = req.dry_run;
        let finish = move |error: String| {
            Event::ReplayFinished(ReplayOutcome {
                progress: ReplayProgress::default(),
                dry_run,
                cancelled: false,
                error: Some(error),
            })
        };
        let Some(s) = self.session().await else {
            self.send(finish("no broker: a snapshot is read-only".into()))
                .await;
            return;
        };
        // The UI never sends a replay in read-only mode; the worker refuses anyway.
        if s.target.read_only {
            self.send(finish(
                "read-only: replay is disabled for this context".into(),
            ))
            .await;
            return;
        }
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let events = self.events.clone();
        let task = tokio::spawn(async move {
            let rate = (req.rate > 0).then_some(f64::from(req.rate));
            let mut spec = spec_for(
                &s,
                req.queue.clone(),
                req.selection.clone(),
                rate,
                req.keep_attempts,
            );
            spec.limit = Some(req.expected);
            let preview = match s
                .preview(&spec, |keys| remember(&s, &req.queue, keys))
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    let _ = events.send(finish(e.to_string())).await;
                    return;
                }
            };
            if !preview.refusals.is_empty() {
                let _ = events
                    .send(finish(format!(
                        "nothing moved: {}",
                        preview.refusals.join("; ")
                    )))
                    .await;
                return;
            }
            let total = preview.selected;
            if req.dry_run {
                let progress = ReplayProgress {
                    total,
                    ..Default::default()
                };
                let _ = events
                    .send(Event::ReplayFinished(ReplayOutcome {
                        progress,
                        dry_run: true,
                        cancelled: false,
                        error: None,
                    }))
                    .await;
                return;
            }
            // The same check as `warren replay`, on the same targets.
            if let session::WriteCheck::Refused(why) =
                s.write_refusal(&preview.publish_targets()).await
            {
                let _ = events.send(finish(format!("{why}; nothing moved"))).await;
                return;
            }
            let store = Store::open_default().ok();
            let audit_id = store.as_ref().and_then(|st| {
                st.begin_replay(&crate::store::AuditStart {
                    at: jiff::Timestamp::now(),
                    os_user: crate::store::current_os_user(),
                    broker_user: s.whoami.name.clone(),
                    context: s.target.context.clone(),
                    vhost: s.vhost().to_string(),
                    from_queue: req.queue.clone(),
                    targets: preview.targets.keys().cloned().collect(),
                    filter: Some(req.selection.describe()),
                    group: match &req.selection {
                        crate::domain::selection::Selection::Group(g) => Some(g.clone()),
                        _ => None,
                    },
                    requested_limit: Some(req.expected),
                    dry_run: false,
                    keep_attempts: req.keep_attempts,
                })
                .ok()
            });
            if audit_id.is_none() {
                let _ = events.send(finish("Warren's store cannot be opened, so the replay cannot be recorded; nothing moved (use `warren replay --no-audit` from the command line)".into())).await;
                return;
            }
            let progress_events = events.clone();
            let result = s
                .replay(&spec, &preview, HashMap::new(), cancel_rx, |p| {
                    let _ = progress_events.try_send(Event::ReplayProgress(ReplayProgress {
                        total,
                        moved: p.moved,
                        returned: p.returned,
                        failed: p.failed,
                        rate: p.rate,
                        blocked: p.blocked.clone(),
                    }));
                })
                .await;
            let outcome = match &result {
                // The engine's own verdict, as the CLI and the audit use it: anything short of
                // "completed" says why, with the problems behind it.
                Ok(sum) => ReplayOutcome {
                    progress: ReplayProgress {
                        total,
                        moved: sum.progress.moved,
                        returned: sum.progress.returned,
                        failed: sum.progress.failed,
                        rate: sum.progress.rate,
                        blocked: None,
                    },
                    dry_run: false,
                    cancelled: sum.stop == StopReason::Cancelled && sum.forced.is_none(),
                    error: (!sum.completed() && sum.stop != StopReason::Cancelled
                        || sum.forced.is_some())
                    .then(|| {
                        let problems: Vec<String> = sum
                            .problems
                            .iter()
                            .map(|(w, n)| format!("{n} × {w}"))
                            .collect();
                        if problems.is_empty() {
                            sum.outcome()
                        } else {
                            format!("{}; {}", sum.outcome(), problems.join("; "))
                        }
                    }),
                },
                Err(e) => ReplayOutcome {
                    progress: ReplayProgress {
                        total,
                        ..Default::default()
                    },
                    dry_run: false,
                    cancelled: false,
                    error: Some(e.to_string()),
                },
            };
            if let (Some(st), Some(id)) = (&store, audit_id) {
                let (ids, remaining) = result
                    .as_ref()
                    .map(|s| (s.moved_ids.clone(), s.progress.remaining))
                    .unwrap_or_default();
                let text = match &result {
                    Ok(sum) => sum.outcome(),
                    Err(e) => format!("failed: {e}"),
                };
                let _ = st.finish_replay(
                    id,
                    &crate::store::AuditOutcome {
                        at: jiff::Timestamp::now(),
                        moved: outcome.progress.moved,
                        returned: outcome.progress.returned,
                        failed: outcome.progress.failed,
                        remaining,
                        message_ids: ids,
                        duplicated: result.as_ref().map_or(0, |s| s.duplicated),
                        duplicate_ids: result
                            .as_ref()
                            .map(|s| s.duplicate_ids.clone())
                            .unwrap_or_default(),
                        outcome: text,
                    },
                );
            }
            let _ = events.send(Event::ReplayFinished(outcome)).await;
        });
        self.replay = Some((task, cancel_tx));
    }
}

fn spec_for(
    s: &Session,
    queue: String,
    selection: crate::domain::selection::Selection,
    rate: Option<f64>,
    keep_attempts: bool,
) -> ReplaySpec {
    ReplaySpec {
        queue,
        selection,
        limit: None,
        rate,
        to: None,
        allow_fan_out: false,
        keep_attempts,
        window: s.target.settings.replay.window,
        // The TUI plans from what it already read: a quorum queue is not read again for a plan.
        consent: ReadConsent::Reuse,
    }
}

/// A failed read as the UI event that says what to do: a cost to confirm, or an error.
fn read_failure(queue: String, e: SessionError) -> Event {
    match e {
        SessionError::NeedsConsent { text, .. } => Event::ReadCost { queue, text },
        other => Event::Error(other.to_string()),
    }
}

/// Records first-seen times (best effort: without the store, "dead since" is unknown).
fn remember(s: &Session, queue: &str, keys: &[String]) -> HashMap<String, jiff::Timestamp> {
    match Store::open_default() {
        Ok(st) => st
            .record_seen(&s.memory_key(), queue, keys, jiff::Timestamp::now())
            .unwrap_or_else(|e| {
                tracing::warn!("recording first-seen times failed: {e}");
                HashMap::new()
            }),
        Err(e) => {
            tracing::warn!("{e}");
            HashMap::new()
        }
    }
}

/// False when the broker says this user cannot write in the vhost at all.
async fn may_write(s: &Session) -> bool {
    match s.mgmt.permissions(s.vhost()).await {
        Ok(PermissionState::NoneGranted) => false,
        // An empty write pattern and `^$` both match no exchange name.
        Ok(PermissionState::Known(p)) => !p.write.is_empty() && p.write != "^$",
        _ => true,
    }
}

fn describe_stop(stop: &crate::broker::browse::StopReason, n: usize) -> String {
    use crate::broker::browse::StopReason as S;
    match stop {
        S::Limit => format!("first {n} messages (limit reached)"),
        S::Exhausted => format!("all {n} messages"),
        S::QuorumSafety { reason, .. } => format!("stopped after {n}: {reason}"),
        S::Idle => format!("{n} messages (the rest are held by another consumer or arrived late)"),
    }
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
    }
}

/// Each snapshot holds one queue: present them as the dead-letter queues of one vhost.
pub fn snapshot_discovery(snapshots: &[(SnapshotHeader, Vec<DeadLetter>)]) -> Discovery {
    let mut dead_letter_queues: Vec<DlqInfo> = snapshots
        .iter()
        .map(|(h, messages)| {
            let named = discovery::classify_name(&h.queue, &[]);
            DlqInfo {
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
                delivery_limit: None,
                dead_letter_exchange: None,
            }
        })
        .collect();
    dead_letter_queues.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.name.cmp(&b.name)));
    Discovery {
        dead_letter_queues,
        retry_loops: Vec::new(),
        other_queues: Vec::new(),
    }
}

/// For callers that already explained messages (the CLI's `show` on a snapshot).
pub fn explain_snapshot(messages: Vec<DeadLetter>) -> Vec<session::Explained> {
    session::explain_all(messages, &HashMap::new())
}
