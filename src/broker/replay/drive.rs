//! The engine's loop, the one every run goes through, whichever way it reaches the broker
//! (0.9.1's `Shell`, AMQP 1.0's `Shell10`, a restore's list in memory): carry out the effects the
//! engine asks for, feed it what happens, until it is done.

use std::time::Instant;

use crate::domain::engine::{Effect, Event};

use super::Driver;

/// What carries out a run's effects and waits for what happens next.
pub(super) trait Performer {
    /// Carries out `effect`; the event it led to at once, if any.
    async fn perform(&mut self, effect: Effect, drv: &mut Driver) -> Option<Event>;
    /// Waits for what happens next (a delivery, a confirm, a cancel, a deadline passing).
    async fn next_event(&mut self, drv: &mut Driver) -> Option<Event>;
}

/// Runs the engine through `shell` until it finishes; `after` sees the driver after each event
/// the shell waited for (progress, moved ids spooled).
pub(super) async fn drive(
    shell: &mut impl Performer,
    drv: &mut Driver,
    mut after: impl FnMut(&mut Driver),
) {
    'run: loop {
        while let Some(effect) = drv.fx.pop_front() {
            if matches!(effect, Effect::Finish) {
                break 'run;
            }
            let Some(ev) = shell.perform(effect, drv).await else {
                continue;
            };
            if drv.engine.is_done() {
                // A second cancel came while waiting: the run ends now.
                break 'run;
            }
            let fx = drv.engine.on(Instant::now(), ev);
            drv.fx.extend(fx);
        }
        if drv.engine.is_done() {
            break;
        }
        let Some(ev) = shell.next_event(drv).await else {
            continue;
        };
        let fx = drv.engine.on(Instant::now(), ev);
        drv.fx.extend(fx);
        after(drv);
    }
}
