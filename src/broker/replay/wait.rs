//! Waiting on the broker within bounds: deadlines, cancels, the rate pacer and confirms.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use lapin::Confirmation;
use tokio::sync::watch;

use crate::domain::engine::{Effect, Engine, Event};

/// Message-per-second pacing: message `n` may go at `start + n / rate`, where `start` is the
/// first publish (not the start of the run: counting from before the first delivery arrived
/// would let the first few messages out in a burst to catch up).
#[derive(Debug)]
pub(super) struct Pacer {
    pub(super) start: Option<Instant>,
    pub(super) per_msg: Option<Duration>,
    pub(super) sent: u64,
}

impl Pacer {
    pub(super) fn new(rate: Option<f64>) -> Pacer {
        let per_msg = rate
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(|r| Duration::from_secs_f64(1.0 / r));
        Pacer {
            start: None,
            per_msg,
            sent: 0,
        }
    }
    pub(super) fn next_slot(&self) -> Instant {
        match (self.start, self.per_msg) {
            (Some(start), Some(d)) => start + d.mul_f64(self.sent as f64),
            _ => Instant::now(),
        }
    }
    /// The rate counts again from the next publish (after a wait for the target's backlog).
    pub(super) fn restart(&mut self) {
        self.start = None;
        self.sent = 0;
    }
    pub(super) fn published(&mut self) {
        if self.start.is_none() {
            self.start = Some(Instant::now());
        }
        self.sent += 1;
    }
}

/// One publish, from handing its frames to lapin to the broker's confirm, with its DLQ tag.
pub(super) type InFlightFuture =
    Pin<Box<dyn Future<Output = (u64, lapin::Result<Confirmation>)> + Send>>;

/// The next settled publish: one that completed on its first poll, else the next confirm.
pub(super) async fn next_confirm(
    early: &mut VecDeque<(u64, lapin::Result<Confirmation>)>,
    inflight: &mut FuturesUnordered<InFlightFuture>,
) -> Option<(u64, lapin::Result<Confirmation>)> {
    match early.pop_front() {
        Some(done) => Some(done),
        None => inflight.next().await,
    }
}

/// Why an awaited step did not give its answer.
pub(super) enum Cut {
    Timeout(Duration),
    /// A cancel (signal) arrived while waiting.
    Cancel,
    Failed(String),
}

impl Cut {
    pub(super) fn text(&self, what: &str) -> String {
        match self {
            Cut::Timeout(d) => format!("{what}: no answer within {}s", d.as_secs()),
            Cut::Cancel => format!("{what}: interrupted by a signal"),
            Cut::Failed(e) => format!("{what}: {e}"),
        }
    }
}

/// Awaits `fut` for at most `limit`, giving up early when `cancel` changes.
pub(super) async fn bounded<T, E: std::fmt::Display>(
    limit: Duration,
    cancel: &mut CancelWatch,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, Cut> {
    tokio::select! {
        biased;
        () = cancel.next() => Err(Cut::Cancel),
        r = tokio::time::timeout(limit, fut) => match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Cut::Failed(e.to_string())),
            Err(_) => Err(Cut::Timeout(limit)),
        },
    }
}

/// Awaits `fut` for at most `limit` while the engine runs. A cancel meanwhile goes to the engine
/// at once: a first one (a stop) lets the wait go on; one that ends the run (a second) abandons
/// it, and the caller then finds the engine done.
pub(super) async fn guarded<T, E: std::fmt::Display>(
    limit: Duration,
    cancel: &mut CancelWatch,
    engine: &mut Engine,
    fx: &mut VecDeque<Effect>,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, Cut> {
    tokio::pin!(fut);
    let timer = tokio::time::sleep(limit);
    tokio::pin!(timer);
    loop {
        tokio::select! {
            biased;
            () = cancel.next() => {
                fx.extend(engine.on(Instant::now(), Event::Cancel));
                if engine.is_done() {
                    return Err(Cut::Cancel);
                }
            }
            r = &mut fut => return r.map_err(|e| Cut::Failed(e.to_string())),
            () = &mut timer => return Err(Cut::Timeout(limit)),
        }
    }
}

/// The cancel signal: each new `true` sent (or the sender going away) is one cancel.
pub(super) struct CancelWatch {
    pub(super) rx: watch::Receiver<bool>,
    pub(super) open: bool,
}

impl CancelWatch {
    /// Resolves at the next cancel; never when the sender is gone and that was reported.
    pub(super) async fn next(&mut self) {
        loop {
            if !self.open {
                return std::future::pending().await;
            }
            match self.rx.changed().await {
                Ok(()) if *self.rx.borrow_and_update() => return,
                Ok(()) => continue,
                Err(_) => {
                    // The sender is gone: nobody can cancel any more, which is taken as a cancel.
                    self.open = false;
                    return;
                }
            }
        }
    }
}

/// The step went unanswered within its deadline.
pub(super) fn timed_out<T>(r: &Result<T, Cut>) -> bool {
    matches!(r, Err(Cut::Timeout(_)))
}

pub(super) async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => until(at).await,
        None => std::future::pending().await,
    }
}

/// Resolves at `slot`; at once when it has passed. A timer is not used for a slot that has come:
/// tokio rounds timers up to the next millisecond, which would cap an unthrottled replay at about
/// a thousand messages a second.
pub(super) async fn until(slot: Instant) {
    if slot > Instant::now() {
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// What a connection event is to the engine: the broker blocking or unblocking publishing; any
/// other event is nothing, and the end of the stream closes `open` (it is not polled again).
pub(super) fn connection_event(
    e: Option<lapin::Event>,
    open: &mut bool,
) -> Option<crate::domain::engine::Event> {
    use crate::domain::engine::Event;
    match e {
        Some(lapin::Event::ConnectionBlocked(why)) => Some(Event::Blocked(why)),
        Some(lapin::Event::ConnectionUnblocked) => Some(Event::Unblocked),
        Some(_) => None,
        None => {
            *open = false;
            None
        }
    }
}
