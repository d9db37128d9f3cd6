//! Waiting for an event, not for time: the one poll loop every test uses. A check is tried at
//! once, then again after a short pause that grows (5 ms, doubling, at most 100 ms) until it
//! holds or the bound passes; a wait that fails names what it waited for and how long. A plain
//! sleep is left in the tests only where time itself is what a test exercises (a rate, an age, a
//! consumer's pace, keys typed apart), with a comment saying so.
#![allow(dead_code)]

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// The first pause between two tries of a check.
const FIRST: Duration = Duration::from_millis(5);
/// The longest pause: a check notices its event at most this late.
const LONGEST: Duration = Duration::from_millis(100);

/// The pauses between tries: [`FIRST`], doubling, at most [`LONGEST`], never past the bound.
struct Backoff {
    start: Instant,
    within: Duration,
    pause: Duration,
}

impl Backoff {
    fn new(within: Duration) -> Backoff {
        Backoff {
            start: Instant::now(),
            within,
            pause: FIRST,
        }
    }

    /// The next pause, or `None` once the bound has passed.
    fn next(&mut self) -> Option<Duration> {
        let left = self.within.saturating_sub(self.start.elapsed());
        if left.is_zero() {
            return None;
        }
        let now = self.pause.min(left);
        self.pause = (self.pause * 2).min(LONGEST);
        Some(now)
    }
}

/// Tries `check` until it gives `Ok`, within `within` (at least once): its `Ok`, or its last
/// `Err` (what it saw) once the time is up.
pub async fn poll<T, E, Fut>(within: Duration, mut check: impl FnMut() -> Fut) -> Result<T, E>
where
    Fut: Future<Output = Result<T, E>>,
{
    let mut backoff = Backoff::new(within);
    loop {
        let last = check().await;
        if last.is_ok() {
            return last;
        }
        match backoff.next() {
            Some(pause) => tokio::time::sleep(pause).await,
            None => return last,
        }
    }
}

/// `check`'s `Ok` within `within`; fails the test naming `what`, how long and what `check` saw
/// last (its `Err`) otherwise.
pub async fn until_ok<T, E, Fut>(what: &str, within: Duration, check: impl FnMut() -> Fut) -> T
where
    E: Display,
    Fut: Future<Output = Result<T, E>>,
{
    poll(within, check)
        .await
        .unwrap_or_else(|last| panic!("waited {within:?} for {what}; last seen: {last}"))
}

/// Returns once `check` holds, within `within`; fails the test naming `what` and how long
/// otherwise.
pub async fn until<Fut>(what: &str, within: Duration, check: impl FnMut() -> Fut)
where
    Fut: Future<Output = bool>,
{
    if !holds(within, check).await {
        panic!("waited {within:?} for {what}; it never came");
    }
}

/// Whether `check` holds within `within`, for a caller that asserts in words of its own (or that
/// expects it not to).
pub async fn holds<Fut>(within: Duration, mut check: impl FnMut() -> Fut) -> bool
where
    Fut: Future<Output = bool>,
{
    poll(within, || {
        let held = check();
        async move { if held.await { Ok(()) } else { Err(()) } }
    })
    .await
    .is_ok()
}

/// The pauses of a poll loop that keeps state from one try to the next (what it saw, since
/// when), where a closure will not do: `next` pauses before the next try, and fails the test
/// naming what was awaited, how long and `seen` once the bound has passed.
pub struct Tries {
    what: String,
    backoff: Backoff,
}

impl Tries {
    pub fn new(what: impl Into<String>, within: Duration) -> Tries {
        Tries {
            what: what.into(),
            backoff: Backoff::new(within),
        }
    }

    /// Pauses before the next try; fails the test (with `seen`) once the time is up.
    pub async fn next(&mut self, seen: impl Display) {
        match self.backoff.next() {
            Some(pause) => tokio::time::sleep(pause).await,
            None => self.fail(seen),
        }
    }

    /// [`Tries::next`] for a synchronous loop.
    pub fn next_blocking(&mut self, seen: impl Display) {
        match self.backoff.next() {
            Some(pause) => std::thread::sleep(pause),
            None => self.fail(seen),
        }
    }

    fn fail(&self, seen: impl Display) -> ! {
        panic!(
            "waited {:?} for {}; last seen: {seen}",
            self.backoff.within, self.what
        )
    }
}

/// [`poll`] for a synchronous check (a tmux screen, a process, a file).
pub fn poll_blocking<T, E>(
    within: Duration,
    mut check: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let mut backoff = Backoff::new(within);
    loop {
        let last = check();
        if last.is_ok() {
            return last;
        }
        match backoff.next() {
            Some(pause) => std::thread::sleep(pause),
            None => return last,
        }
    }
}

/// [`until_ok`] for a synchronous check.
pub fn until_ok_blocking<T, E: Display>(
    what: &str,
    within: Duration,
    check: impl FnMut() -> Result<T, E>,
) -> T {
    poll_blocking(within, check)
        .unwrap_or_else(|last| panic!("waited {within:?} for {what}; last seen: {last}"))
}

/// [`until`] for a synchronous check.
pub fn until_blocking(what: &str, within: Duration, check: impl FnMut() -> bool) {
    if !holds_blocking(within, check) {
        panic!("waited {within:?} for {what}; it never came");
    }
}

/// [`holds`] for a synchronous check.
pub fn holds_blocking(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    poll_blocking(within, || if check() { Ok(()) } else { Err(()) }).is_ok()
}
