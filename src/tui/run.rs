//! The terminal loop: crossterm's `EventStream` and the worker's events in one `tokio::select!`,
//! `update` for each, and a draw only when something visible changed (queued events are drained
//! first, then one frame). An idle Warren wakes only for the depth-refresh tick and draws nothing
//! unless the tick changed what is shown.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use ratatui::DefaultTerminal;
use ratatui::crossterm::event::{Event as TermEvent, EventStream, KeyEventKind};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use tokio::sync::mpsc;

use super::event::{Event, Report};
use super::state::State;
use super::update::update;
use super::view::view;
use crate::worker::protocol::Command;

/// How often depths are refreshed (and ages re-evaluated).
pub const TICK: Duration = Duration::from_secs(5);

/// Restores the terminal when dropped, so every return path (errors included) leaves a usable
/// shell; `ratatui::init` already chains a panic hook that does the same on panic.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// Runs the UI until the operator quits. Sends `Command::LoadQueues` first; sends
/// `Command::Quit` to the worker on the way out.
pub async fn run(
    mut events_from_worker: mpsc::Receiver<Report>,
    commands_to_worker: mpsc::Sender<Command>,
    mut state: State,
) -> anyhow::Result<()> {
    let mut terminal =
        ratatui::try_init().context("cannot set up the terminal (is this a TTY?)")?;
    let _restore = Restore;
    let mut input = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The first tick fires at once; the state already has the time.
    tick.tick().await;
    send(&commands_to_worker, Command::LoadQueues).await?;
    draw(&mut terminal, &mut state)?;

    loop {
        let first = tokio::select! {
            term = input.next() => match term {
                Some(Ok(ev)) => from_terminal(ev),
                Some(Err(e)) => return Err(e).context("reading the terminal failed"),
                None => return Ok(()),
            },
            worker = events_from_worker.recv() => match worker {
                Some(report) => Some(Event::from(report)),
                None => {
                    // The worker is gone: nothing more can happen but quitting.
                    state.connection = super::event::ConnectionState::Disconnected("the background worker stopped; see the log file".into());
                    state.error = Some("the background worker stopped unexpectedly; press q to quit".into());
                    state.dirty = true;
                    None
                }
            },
            _ = tick.tick() => Some(Event::Tick(jiff::Timestamp::now())),
            // Restarted by every pass of the loop, so it fires only once typing pauses.
            _ = tokio::time::sleep(super::update::FILTER_SETTLE), if state.filter_pending => Some(Event::FilterSettle),
        };
        let mut queue: Vec<Event> = first.into_iter().collect();
        // Drain whatever else is ready before drawing once.
        while let Ok(ev) = events_from_worker.try_recv() {
            queue.push(Event::from(ev));
        }
        // Terminal input is not drained the same way: polling crossterm's EventStream with
        // `now_or_never` registers a no-op waker, after which the stream never wakes the loop
        // again and keys sit unread until the next tick (seen in tmux: presses drawn seconds
        // late). Each key is one pass of the loop; drawing is cheap enough for that.
        for ev in queue {
            for cmd in update(&mut state, ev) {
                let quit = matches!(cmd, Command::Quit);
                // A worker that is gone cannot be told anything; quitting must still work.
                if let Err(e) = send(&commands_to_worker, cmd).await
                    && !quit
                {
                    state.error = Some(format!("{e:#}"));
                    state.dirty = true;
                }
            }
            if state.quit {
                return Ok(());
            }
        }
        if events_from_worker.is_closed() && state.quit {
            return Ok(());
        }
        draw(&mut terminal, &mut state)?;
    }
}

async fn send(tx: &mpsc::Sender<Command>, cmd: Command) -> anyhow::Result<()> {
    tx.send(cmd)
        .await
        .map_err(|_| anyhow::anyhow!("the background worker stopped; see the log file"))
}

/// Terminal input as UI events: key presses (not releases or repeats, which some terminals
/// send and which would double every key) and resizes.
fn from_terminal(ev: TermEvent) -> Option<Event> {
    match ev {
        TermEvent::Key(k) if k.kind == KeyEventKind::Press => Some(Event::Key(k)),
        TermEvent::Resize(width, height) => Some(Event::Resize { width, height }),
        _ => None,
    }
}

/// Draws one frame if anything changed, inside a synchronized update so that slow links and
/// tmux never show half a frame.
fn draw(terminal: &mut DefaultTerminal, state: &mut State) -> anyhow::Result<()> {
    if !state.take_dirty() {
        return Ok(());
    }
    execute!(terminal.backend_mut(), BeginSynchronizedUpdate)?;
    let drawn = terminal.draw(|f| view(state, f)).map(|_| ());
    execute!(terminal.backend_mut(), EndSynchronizedUpdate)?;
    terminal.backend_mut().flush()?;
    drawn.context("drawing the screen failed")?;
    Ok(())
}
