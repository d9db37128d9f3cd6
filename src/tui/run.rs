//! The terminal loop: crossterm's `EventStream` and the worker's events in one `tokio::select!`,
//! `update` for each, and a draw only when something visible changed (queued events are drained
//! first, then one frame). An idle Warren wakes only for the depth-refresh tick and draws nothing
//! unless the tick changed what is shown.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::time::Duration;

use anyhow::Context;
use futures_util::StreamExt;
use ratatui::DefaultTerminal;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::event::{Event as TermEvent, EventStream, KeyEventKind};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    BeginSynchronizedUpdate, Clear, ClearType, EndSynchronizedUpdate, EnterAlternateScreen,
    enable_raw_mode,
};
use tokio::sync::mpsc;

use super::custom;
use super::event::{Event, Report};
use super::state::State;
use super::update::update;
use super::view::view;
use crate::config::Overrides;
use crate::worker::protocol::Command;

/// How often depths are refreshed (and ages re-evaluated).
pub const TICK: Duration = Duration::from_secs(5);

/// Restores the terminal when dropped, so every return path (errors included) leaves a usable
/// shell; `ratatui::init` already chains a panic hook that does the same on panic. Bounded: after
/// a hangup the terminal may be gone, and a write to it must not keep Warren from settling.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        super::stop::restore_within(super::stop::RESTORE_LIMIT);
    }
}

/// Runs the UI until the operator quits. Sends `Command::LoadQueues` first; sends
/// `Command::Quit` to the worker on the way out.
///
/// `unlock`: the overrides the worker connects with, for a broker. A `:ctx` to a context whose
/// `password_command` has not answered yet runs it first, with the terminal handed back (see
/// `cli::commands::prepare_tui` for why then and not at startup).
///
/// SIGHUP, SIGTERM and SIGINT end it too (`Ending::Signal`): the caller then waits, bounded,
/// for the worker to settle what is running (see `stop::settle`). A failure of the terminal
/// that a signal follows (a hangup: reads and writes fail first) counts as that signal.
pub async fn run(
    events_from_worker: mpsc::Receiver<Report>,
    commands_to_worker: mpsc::Sender<Command>,
    state: State,
    unlock: Option<Overrides>,
) -> anyhow::Result<Ending> {
    let mut stops = super::stop::signals();
    let terminal = ratatui::try_init().context("cannot set up the terminal (is this a TTY?)")?;
    let _restore = Restore;
    let ran = run_loop(
        terminal,
        events_from_worker,
        commands_to_worker,
        state,
        unlock,
        &mut stops,
    )
    .await;
    match ran {
        Err(e) => {
            match super::stop::signalled_within(&mut stops, super::stop::HANGUP_GRACE).await {
                Some(stop) => Ok(Ending::Signal(stop)),
                None => Err(e),
            }
        }
        ok => ok,
    }
}

async fn run_loop(
    mut terminal: DefaultTerminal,
    mut events_from_worker: mpsc::Receiver<Report>,
    commands_to_worker: mpsc::Sender<Command>,
    mut state: State,
    unlock: Option<Overrides>,
    stops: &mut mpsc::UnboundedReceiver<super::stop::Stop>,
) -> anyhow::Result<Ending> {
    let mut input = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The first tick fires at once; the state already has the time.
    tick.tick().await;
    let mut outbox = Outbox::default();
    outbox.send(&commands_to_worker, Command::LoadQueues)?;
    // The size a terminal reports only when it changes: the pager's layout and the help's
    // scrolling need it now.
    if let Ok(size) = terminal.size() {
        update(
            &mut state,
            Event::Resize {
                width: size.width,
                height: size.height,
            },
        );
    }
    draw(&mut terminal, &mut state)?;

    loop {
        let first = tokio::select! {
            // In this order: a key waits for no more than one slice of idle work, the last arm.
            biased;
            Some(stop) = stops.recv() => return Ok(Ending::Signal(stop)),
            term = input.next() => match term {
                Some(Ok(ev)) => from_terminal(ev),
                Some(Err(e)) => return Err(e).context("reading the terminal failed"),
                None => return Ok(quit(&state)),
            },
            worker = events_from_worker.recv() => match worker {
                Some(report) => Some(Event::from(report)),
                None => {
                    // The worker is gone: nothing more can happen but quitting.
                    state.connection = super::event::ConnectionState::Disconnected("the background worker stopped; see the log file".into());
                    state.banner.error = Some("the background worker stopped unexpectedly; press q to quit".into());
                    state.dirty = true;
                    None
                }
            },
            _ = tick.tick() => Some(Event::Tick(jiff::Timestamp::now())),
            // Restarted by every pass of the loop, so it fires only once typing pauses.
            _ = tokio::time::sleep(super::update::FILTER_SETTLE), if state.filtering.pending => Some(Event::FilterSettle),
            _ = tokio::time::sleep(super::update::GLANCE_SETTLE), if state.queues.glance_pending => Some(Event::GlanceSettle),
            // Commands the worker had no room for go as soon as it has, while the loop goes on
            // reading its reports (see `Outbox`).
            permit = commands_to_worker.reserve(), if !outbox.is_empty() => {
                match (permit, outbox.pop()) {
                    (Ok(permit), Some(cmd)) => permit.send(cmd),
                    // The worker is gone (its reports' end says so): nothing will ever fit.
                    _ => outbox.clear(),
                }
                None
            }
            // Ready at once: taken only when nothing above is.
            _ = std::future::ready(()), if state.has_idle_work() => Some(Event::Idle),
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
            let commands = update(&mut state, ev);
            if let Some(work) = state.handover.custom.take() {
                let notice = hand_over(&mut terminal, &mut input, || run_custom(&work))?;
                update(&mut state, Report::Notice(notice));
            }
            if let Some(text) = state.handover.editor.take() {
                let edited = hand_over(&mut terminal, &mut input, || {
                    crate::editor::edit(&text, None)
                })?;
                update(&mut state, super::event::Event::Edited(edited));
            }
            if let Some(text) = state.handover.clipboard.take() {
                execute!(
                    terminal.backend_mut(),
                    ratatui::crossterm::clipboard::CopyToClipboard::to_clipboard_from(text)
                )?;
            }
            // Saves are performed here, where the frame is: the worker has no part in them.
            if let Some(save) = state.handover.save.take() {
                let screen = match save {
                    super::save::Save::Screen { .. } => screen_text(&mut terminal, &state)?,
                    super::save::Save::Snapshot { .. } => String::new(),
                };
                update(&mut state, super::save::perform(&save, &screen));
            }
            for cmd in commands {
                if let (Command::SwitchContext { name, .. }, Some(base)) = (&cmd, &unlock) {
                    unlock_context(&mut terminal, &mut input, base, name)?;
                    state.dirty = true;
                }
                let quit = matches!(cmd, Command::Quit);
                // A worker that is gone cannot be told anything; quitting must still work.
                if let Err(e) = outbox.send(&commands_to_worker, cmd)
                    && !quit
                {
                    state.banner.error = Some(format!("{e:#}"));
                    state.dirty = true;
                }
            }
            if state.quit {
                return Ok(quit(&state));
            }
        }
        if events_from_worker.is_closed() && state.quit {
            return Ok(quit(&state));
        }
        draw(&mut terminal, &mut state)?;
    }
}

/// How the terminal loop ended.
#[derive(Debug)]
pub enum Ending {
    /// The operator quit (or the terminal's input ended); `unreached`: the broker was never
    /// reached, and why (a wrong password, a wrong URL), for the exit.
    Quit { unreached: Option<String> },
    /// A signal asked Warren to stop.
    Signal(super::stop::Stop),
}

/// A quit, with why nothing was ever shown when the first connect failed.
fn quit(state: &State) -> Ending {
    let unreached = match &state.connection {
        super::event::ConnectionState::Disconnected(why) if !state.queues.loaded => {
            Some(why.clone())
        }
        _ => None,
    };
    Ending::Quit { unreached }
}

/// The signal that ended the UI, if one did.
pub fn stopped_by(ended: &anyhow::Result<Ending>) -> Option<super::stop::Stop> {
    match ended {
        Ok(Ending::Signal(stop)) => Some(*stop),
        _ => None,
    }
}

/// Gives the terminal back to the shell (main screen, cooked mode, cursor shown), does `work`,
/// and takes the terminal again with a full redraw. crossterm's input reader is stopped first,
/// or it would take the keys meant for `work`, and started again after.
fn hand_over<T>(
    terminal: &mut DefaultTerminal,
    input: &mut EventStream,
    work: impl FnOnce() -> T,
) -> anyhow::Result<T> {
    drop(std::mem::replace(input, EventStream::new()));
    // Ctrl-C on the shell's terminal interrupts the whole foreground group: it is for the
    // command, not a reason for Warren to die. (tokio's handler stays installed afterwards,
    // which changes nothing: raw mode sends Ctrl-C as a key.)
    #[cfg(unix)]
    let _sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    ratatui::restore();
    let _ = execute!(std::io::stdout(), Show);
    let out = work();
    enable_raw_mode().context("cannot take the terminal back (raw mode)")?;
    execute!(
        std::io::stdout(),
        EnterAlternateScreen,
        Hide,
        Clear(ClearType::All)
    )
    .context("cannot take the terminal back (alternate screen)")?;
    // A new terminal draws the next frame whole. (`Terminal::clear` would ask the terminal
    // where its cursor is, and the answer can be lost to the input reader.)
    *terminal = ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))
        .context("cannot redraw the terminal")?;
    *input = EventStream::new();
    Ok(out)
}

/// A configured command, on the shell's terminal: the message's fields in its environment,
/// then "press Enter" so its output can be read. Returns what the notice line says after.
fn run_custom(work: &custom::Run) -> String {
    crate::outln!("warren: {} — {}\n", work.name, work.command);
    let status = custom::process(work).status();
    let outcome = match &status {
        Ok(s) if s.success() => format!("{}: done", work.name),
        Ok(s) => format!("{}: {s}", work.name),
        Err(e) => format!("{}: could not run sh: {e}", work.name),
    };
    crate::outln!("\nwarren: {outcome}. Press Enter to return to Warren.");
    let _ = std::io::stdin().lock().read_line(&mut String::new());
    outcome
}

/// Before `:ctx NAME`: runs the context's `password_command` with the terminal handed back if
/// it has not answered yet this session. Its answer (or its failure, which the worker reports
/// when it connects) is kept in `base.unlocked`.
fn unlock_context(
    terminal: &mut DefaultTerminal,
    input: &mut EventStream,
    base: &Overrides,
    name: &str,
) -> anyhow::Result<()> {
    let Some(unlocked) = &base.unlocked else {
        return Ok(());
    };
    let target = Overrides {
        context: Some(name.to_string()),
        ..base.clone()
    };
    let Some(context) = unlocked.needs(&target) else {
        return Ok(());
    };
    hand_over(terminal, input, || {
        crate::errln!("warren: context '{context}': running its password_command…");
        let _ = unlocked.unlock(&target);
    })
}

/// Commands on their way to the worker. The UI never waits for room in the worker's bounded
/// inbox: the worker waits for room in the UI's, so a UI blocked on a full inbox while the
/// worker is blocked on a full report channel would be a deadlock (a held-down key with a busy
/// worker could do it). What does not fit waits here, in order, and the loop sends it when the
/// worker takes the next command, reading reports meanwhile. Keys come at human speed, so this
/// stays short; past `OUTBOX_MAX` a key is refused rather than queued without bound.
#[derive(Default)]
struct Outbox(VecDeque<Command>);

const OUTBOX_MAX: usize = 1024;

impl Outbox {
    /// Queues `cmd` and sends what the worker has room for now, in order; never waits.
    fn send(&mut self, tx: &mpsc::Sender<Command>, cmd: Command) -> anyhow::Result<()> {
        // A quit always finds its place (the worker also stops when the UI's sender drops).
        if self.0.len() >= OUTBOX_MAX && !matches!(cmd, Command::Quit) {
            anyhow::bail!(
                "the background worker is not keeping up ({OUTBOX_MAX} commands waiting): that key was not acted on"
            );
        }
        self.0.push_back(cmd);
        while let Some(cmd) = self.0.pop_front() {
            match tx.try_send(cmd) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(cmd)) => {
                    self.0.push_front(cmd);
                    break;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.0.clear();
                    anyhow::bail!("the background worker stopped; see the log file");
                }
            }
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn pop(&mut self) -> Option<Command> {
        self.0.pop_front()
    }

    fn clear(&mut self) {
        self.0.clear();
    }
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

/// What is on screen, as plain text: the frame drawn for the state as it is (the same as the
/// last one drawn but for what the key itself changed, which for a save is nothing).
fn screen_text(terminal: &mut DefaultTerminal, state: &State) -> anyhow::Result<String> {
    let frame = terminal
        .draw(|f| view(state, f))
        .context("drawing the screen failed")?;
    Ok(super::save::screen_text(frame.buffer))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(rx: &mut mpsc::Receiver<Command>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|c| format!("{c:?}"))
            .collect()
    }

    #[test]
    fn a_full_worker_inbox_never_blocks_the_ui_and_keeps_the_order() {
        let (tx, mut rx) = mpsc::channel(1);
        let mut out = Outbox::default();
        out.send(&tx, Command::LoadQueues).unwrap();
        // The inbox is full: these wait in the outbox instead of blocking the loop.
        out.send(&tx, Command::RefreshDepths).unwrap();
        out.send(&tx, Command::CancelReplay).unwrap();
        assert!(!out.is_empty());
        assert_eq!(kinds(&mut rx), ["LoadQueues"]);
        // The loop's `reserve` arm: one goes each time the worker has room.
        out.send(&tx, Command::Quit).unwrap();
        assert_eq!(kinds(&mut rx), ["RefreshDepths"]);
        tx.try_send(out.pop().unwrap()).unwrap();
        assert_eq!(kinds(&mut rx), ["CancelReplay"]);
        assert_eq!(out.pop().map(|c| format!("{c:?}")).as_deref(), Some("Quit"));
        assert!(out.is_empty());
    }

    #[test]
    fn the_outbox_is_bounded_but_a_quit_always_fits() {
        let (tx, _rx) = mpsc::channel(1);
        let mut out = Outbox::default();
        for _ in 0..=OUTBOX_MAX {
            out.send(&tx, Command::RefreshDepths).unwrap();
        }
        let e = out.send(&tx, Command::RefreshDepths).unwrap_err();
        assert!(e.to_string().contains("not keeping up"), "{e}");
        out.send(&tx, Command::Quit).unwrap();
        assert_eq!(out.0.len(), OUTBOX_MAX + 1);
    }

    #[test]
    fn a_stopped_worker_is_said_and_nothing_waits_for_it() {
        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let mut out = Outbox::default();
        let e = out.send(&tx, Command::LoadQueues).unwrap_err();
        assert!(e.to_string().contains("worker stopped"), "{e}");
        assert!(out.is_empty());
    }
}
