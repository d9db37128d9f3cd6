//! A line of the queue list: a dead-letter queue, a queue holding stuck dead letters (an
//! at-least-once quorum queue whose dead letters no DLQ takes), or an ordinary queue; and what
//! the list says of a stuck one, since nothing can be read from it.

use crate::domain::discovery::stuck::Stuck;
use crate::domain::discovery::{DlqInfo, QueueRef, QueueSummary};
use crate::domain::sanitize;

use super::state::{Focus, State};

/// A line of the queue list.
#[derive(Clone, Copy, Debug)]
pub enum QueueRow<'a> {
    Dlq(&'a DlqInfo),
    /// Dead letters held inside the queue they died in: listed after the DLQs, never browsed.
    Stuck(&'a Stuck),
    Other(&'a QueueSummary),
}

impl QueueRow<'_> {
    pub fn name(&self) -> &str {
        match self {
            QueueRow::Dlq(d) => &d.name,
            QueueRow::Stuck(s) => &s.queue,
            QueueRow::Other(q) => &q.name,
        }
    }

    pub fn vhost(&self) -> &str {
        match self {
            QueueRow::Dlq(d) => &d.vhost,
            QueueRow::Stuck(s) => &s.vhost,
            QueueRow::Other(q) => &q.vhost,
        }
    }

    pub fn id(&self) -> QueueRef {
        match self {
            QueueRow::Dlq(d) => d.id(),
            QueueRow::Stuck(s) => QueueRef {
                context: s.context.clone(),
                vhost: s.vhost.clone(),
                name: s.queue.clone(),
            },
            QueueRow::Other(q) => QueueRef::new(&q.vhost, &q.name),
        }
    }

    /// Whether it is the queue `id`, without building its key.
    pub fn is(&self, id: &QueueRef) -> bool {
        self.name() == id.name && self.vhost() == id.vhost && self.context() == id.context
    }

    /// The context it was listed in (every context at once), else empty.
    pub fn context(&self) -> &str {
        match self {
            QueueRow::Dlq(d) => &d.context,
            QueueRow::Stuck(s) => &s.context,
            QueueRow::Other(_) => "",
        }
    }

    /// Messages in it: for a stuck queue, every message it holds (the stuck ones included).
    pub fn depth(&self) -> Option<u64> {
        match self {
            QueueRow::Dlq(d) => d.depth,
            QueueRow::Stuck(s) => s.depth,
            QueueRow::Other(q) => q.depth,
        }
    }
}

impl State {
    /// The queue under the cursor of the queue list when it holds stuck dead letters.
    pub fn stuck_at_cursor(&self) -> Option<&Stuck> {
        match self.queue_rows().get(self.queues.cursor) {
            Some(QueueRow::Stuck(s)) => Some(s),
            _ => None,
        }
    }

    /// With the queue list focused on a queue holding stuck dead letters: what it is and what
    /// to do, in words, for Enter (and for a run asked there) instead of reading it. Names
    /// come from the broker: sanitised and bounded.
    pub(crate) fn stuck_words(&self) -> Option<String> {
        if self.focus != Focus::Queues {
            return None;
        }
        let s = self.stuck_at_cursor()?;
        let queue = super::update::shown(self, &self.queue_rows().get(self.queues.cursor)?.id());
        Some(format!(
            "{queue}: {} dead letter{} stuck inside it (at-least-once), in no DLQ, so nothing \
             here can be browsed or moved: {}. To free them, {}.",
            s.count,
            if s.count == 1 { "" } else { "s" },
            sanitize::one_line(&s.explain(), 400),
            sanitize::one_line(&s.remedy(), 400)
        ))
    }
}
