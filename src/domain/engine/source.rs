//! Where a run's deliveries come from: a queue's consumer, or a list in memory (a restore's
//! planned publishes). The engine's decisions are the same for both; what differs is what the
//! source's silence means and what bounds the deliveries taken at once.

use super::Engine;

/// Where deliveries come from ([`super::Config::source`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Source {
    /// A queue's consumer: the broker sends at most `prefetch` unsettled deliveries, held ones
    /// included (so held ones filling it stop the run), and its silence is asked about (the
    /// queue's depth).
    #[default]
    Queue,
    /// A list in memory: the next item is there whenever one is taken, so silence means
    /// nothing and is never asked about. `prefetch` bounds the items taken and not yet settled
    /// (the publishes in the pipeline); a held item takes no room, since nothing is handed back
    /// to a broker (it simply stays where the list came from).
    Memory,
}

impl Engine {
    /// Room for one more delivery. A queue's broker keeps to the prefetch itself; a list in
    /// memory is kept to it here.
    pub(super) fn room_to_take(&self) -> bool {
        match self.cfg.source {
            Source::Queue => true,
            Source::Memory => self.acks.unsettled() - self.acks.held() < self.cfg.prefetch.max(1),
        }
    }

    /// Whether held deliveries take room in the prefetch (a queue's: they stay unacknowledged
    /// on its channel until handed back).
    pub(super) fn held_take_room(&self) -> bool {
        self.cfg.source == Source::Queue
    }

    /// Whether the source's silence says something (a queue drained, or a consumer starved).
    pub(super) fn silence_counts(&self) -> bool {
        self.cfg.source == Source::Queue
    }
}
