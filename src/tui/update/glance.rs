//! The first screen answers: once the cursor rests on a dead-letter queue in the queue list, the
//! queue is read — where a read is free — and shown as its failure groups with their counts, and
//! the detail pane explains the first, all without a key press. Never a read that spends a
//! quorum delivery (that needs Enter twice), never from every context at once (each context has
//! its own rights); an auto-delete queue is read without becoming its consumer, as Enter does.

use super::*;

/// How long the queue-list cursor rests before the queue under it is read.
pub const GLANCE_SETTLE: std::time::Duration = std::time::Duration::from_millis(350);

/// The cursor moved on the queue list, or the list arrived: read the queue under it once the
/// cursor rests (`Event::GlanceSettle`).
pub(super) fn cursor_moved(state: &mut State) {
    state.queues.glance_pending = state.focus == Focus::Queues;
}

/// The cursor rested: the queue under it, read and shown as its groups.
pub(super) fn settle(state: &mut State) -> Vec<Command> {
    state.queues.glance_pending = false;
    if state.focus != Focus::Queues || state.every_context() || state.switching.is_some() {
        return Vec::new();
    }
    let Some(queue) = state.queue_at_cursor() else {
        return Vec::new();
    };
    let shown = state
        .msgs
        .browse
        .as_ref()
        .is_some_and(|b| b.is(&queue.vhost, &queue.name));
    if shown || state.msgs.loading.as_ref() == Some(&queue) {
        return Vec::new();
    }
    let version = crate::domain::features::BrokerVersion::parse(&state.overview.broker_version);
    let Some(dlq) = state.dlq_of(&queue) else {
        return Vec::new();
    };
    if dlq.limit_applies(version) || dlq.depth == Some(0) {
        return Vec::new();
    }
    state.msgs.list_mode = ListMode::Groups;
    browse(state, queue, false, false)
}
