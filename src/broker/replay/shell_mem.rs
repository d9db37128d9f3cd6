//! The engine's shell for a source in memory: a restore's planned publishes
//! (`broker::restore::Plan`) moved with the replay's decisions and guarantees. A delivery is
//! the next planned item; publishing is the 0.9.1 shell's ([`Confirms`]); the engine's ack of a
//! delivery means "confirmed: remember it" (the caller's `remember`, in the engine's ack
//! batches, so a run killed halfway does not forget what it already put back); its hand-back
//! means nothing is taken (the items stay where the list came from, still to do); the depth is
//! the items not yet taken; cancelling, draining and closing the source complete at once.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::ConfirmSelectOptions;
use tokio::sync::watch;

use crate::broker::amqp;
use crate::domain::engine::{Config, Decision, Effect, Engine, Event, Limits, Source, Tally};

use super::confirms::{Confirms, ToSend};
use super::open::Events;
use super::wait::{CancelWatch, bounded, sleep_until_opt};
use super::{AckOp, Driver, PREFETCH_BYTES, StopReason};

/// One planned publish, untouched on its way: exchange, routing key, properties and body.
#[derive(Clone, Debug)]
pub struct Item {
    /// What the caller remembers it by once it is confirmed (an archive reference).
    pub reference: String,
    /// Its name in the audit (the message key).
    pub key: String,
    /// What it is counted under (its queue, or the replay's target).
    pub target: String,
    pub exchange: String,
    pub routing_key: String,
    pub props: lapin::BasicProperties,
    pub body: Vec<u8>,
}

/// How a run of a list ended.
#[derive(Debug)]
pub struct MemoryRun {
    /// The engine's counts: moved (confirmed and remembered), returned, failed, untouched, the
    /// moved keys in order, problems, possible duplicates, `forced`.
    pub tally: Tally,
    pub stop: StopReason,
    /// Why `remember` failed, when it did (the run stopped there).
    pub unrecorded: Option<String>,
}

/// Publishes in flight at most, about. It bounds what a restore killed mid-run (`kill -9`) can
/// put back twice on the next restore — published, perhaps confirmed, not yet remembered — to
/// what the old batches allowed (256). A body sent is copied into lapin's frames until its
/// confirm, so the pipeline is also cut to [`PREFETCH_BYTES`] by the largest body.
const PIPELINE: usize = 256;

fn pipeline_for(items: &[Item]) -> usize {
    let largest = items.iter().map(|i| i.body.len() as u64).max().unwrap_or(0);
    let fits = PREFETCH_BYTES / (largest + 512);
    usize::try_from(fits).unwrap_or(PIPELINE).clamp(1, PIPELINE)
}

/// The engine's configuration for a list of `n` items: all of them, none held back by a window,
/// every written "ack" proven at once (`remember` is durable when it returns).
fn config(n: u64, pipeline: usize, mut limits: Limits) -> Config {
    limits.sync_every = Duration::ZERO;
    // Confirmed items are remembered a quarter of the pipeline at a time, so publishing goes on
    // while a batch is remembered (at the pipeline's size it would drain before each one).
    limits.ack_batch = limits.ack_batch.min(pipeline.div_ceil(4)).max(1);
    Config {
        depth_at_start: n,
        limit: None,
        window: usize::MAX,
        prefetch: pipeline,
        limits,
        settle_lag: Duration::ZERO,
        backlog: None,
        source: Source::Memory,
    }
}

/// The list as the engine sees it: which item each tag is, and which are taken and not settled.
struct Ledger {
    items: std::vec::IntoIter<Item>,
    last_tag: u64,
    /// Taken and not yet settled: each one's reference, by tag.
    open: BTreeMap<u64, String>,
}

impl Ledger {
    fn new(items: Vec<Item>) -> Ledger {
        Ledger {
            items: items.into_iter(),
            last_tag: 0,
            open: BTreeMap::new(),
        }
    }

    /// The next item as a delivery, with what to publish when the engine says so; `None` when
    /// every item was taken. An item whose names AMQP cannot carry is refused, never sent.
    fn take(&mut self) -> Option<(Event, Option<ToSend>)> {
        let item = self.items.next()?;
        self.last_tag += 1;
        let tag = self.last_tag;
        self.open.insert(tag, item.reference);
        let names = amqp::short("the exchange name", &item.exchange)
            .and_then(|x| amqp::short("the routing key", &item.routing_key).map(|k| (x, k)));
        let (decision, send) = match names {
            Ok((exchange, routing_key)) => (
                Decision::Publish {
                    key: item.key,
                    target: item.target,
                },
                Some(ToSend {
                    tag,
                    exchange,
                    routing_key,
                    props: item.props,
                    body: item.body,
                }),
            ),
            Err(e) => (Decision::Refuse(e.to_string()), None),
        };
        let ev = Event::Delivery {
            tag,
            decision,
            near_limit: None,
        };
        Some((ev, send))
    }

    /// The references the engine's ack frames settle, as a channel would read them: a
    /// `multiple` ack settles every open tag up to its own.
    fn acked(&mut self, ops: &[AckOp]) -> Vec<String> {
        let mut refs = Vec::new();
        for op in ops {
            if op.multiple {
                let rest = self.open.split_off(&(op.tag + 1));
                refs.extend(std::mem::replace(&mut self.open, rest).into_values());
            } else if let Some(r) = self.open.remove(&op.tag) {
                refs.push(r);
            }
        }
        refs
    }

    /// Everything open up to `top` is handed back: nothing is taken, so nothing is done.
    fn handed_back(&mut self, top: u64) {
        self.open = self.open.split_off(&(top + 1));
    }

    /// The items not taken yet.
    fn left(&self) -> u64 {
        self.items.len() as u64
    }
}

/// The broker side of a list's run: the ledger, the publishing channel, and `remember`.
struct MemoryShell<R> {
    ledger: Ledger,
    /// The item taken last, published when the engine says so.
    outgoing: Option<ToSend>,
    confirms: Confirms,
    publish: lapin::Channel,
    events: Events,
    events_open: bool,
    remember: R,
    unrecorded: Option<String>,
    step: Duration,
}

impl<R: FnMut(&[String]) -> Result<(), String>> super::drive::Performer for MemoryShell<R> {
    /// Carries out one effect; the event it ends in, if any, is for the engine.
    async fn perform(&mut self, effect: Effect, drv: &mut Driver) -> Option<Event> {
        let ev = match effect {
            Effect::Finish => return None,
            Effect::Publish(t) => {
                if let Some(out) = self.outgoing.take().filter(|o| o.tag == t) {
                    self.confirms.send(out).await;
                }
                return None;
            }
            Effect::Ack(ops) => Event::AcksWritten(self.remember_acked(&ops)),
            Effect::Sync => Event::Synced(Ok(())),
            Effect::AskDepth => Event::Depth(Ok(self.ledger.left())),
            Effect::AskBacklog => Event::Backlog(Ok(Vec::new())),
            Effect::CheckTarget(check) => Event::TargetChecked {
                check,
                result: Err("a list's targets are checked before its run".into()),
            },
            Effect::CancelConsumer => Event::ConsumerCancelled(Ok(())),
            Effect::Drain => Event::DrainDone,
            Effect::Nack { top } => {
                self.ledger.handed_back(top);
                Event::HandedBack(Ok(()))
            }
            Effect::Close => {
                // Every "ack" was remembered when it was written: the close proves them all.
                // The channel's own close is bounded and changes nothing.
                if self.publish.status().connected() {
                    let close = self.publish.close(200, "restore done".into());
                    let _ = drv.guarded(self.step, close).await;
                }
                Event::Closed(Ok(()))
            }
        };
        Some(ev)
    }

    /// Waits for what happens next: a cancel, the broker blocking or unblocking, a confirm,
    /// or the engine's next deadline; a slot and the next item are there at once. Confirms come
    /// first so acks keep up; the cancel before everything, or a list that is always ready
    /// would never hear it.
    async fn next_event(&mut self, drv: &mut Driver) -> Option<Event> {
        let wants = drv.engine.wants();
        drv.engine.compact();
        let deadline = drv.engine.deadline();
        let ev = tokio::select! {
            biased;
            () = drv.cancel.next() => Event::Cancel,
            e = self.events.next(), if self.events_open => {
                super::wait::connection_event(e, &mut self.events_open)?
            }
            confirm = self.confirms.next(), if wants.confirms && self.confirms.waiting() => {
                let ev = confirm?;
                drv.engine.compact();
                ev
            }
            () = std::future::ready(()), if wants.slot => Event::Slot,
            () = std::future::ready(()), if wants.take => match self.ledger.take() {
                Some((ev, out)) => {
                    self.outgoing = out;
                    ev
                }
                // Cannot happen (the engine stops at the list's length): said as a list
                // that is empty.
                None => Event::Depth(Ok(0)),
            },
            () = sleep_until_opt(deadline) => Event::Tick,
        };
        Some(ev)
    }
}

impl<R: FnMut(&[String]) -> Result<(), String>> MemoryShell<R> {
    /// The engine's acks, remembered; a failure stops the run like a lost channel (nothing
    /// more can be remembered, so nothing more is put back).
    fn remember_acked(&mut self, ops: &[AckOp]) -> Result<(), String> {
        let refs = self.ledger.acked(ops);
        if refs.is_empty() {
            return Ok(());
        }
        (self.remember)(&refs).map_err(|e| {
            self.unrecorded.get_or_insert(e.clone());
            format!("Warren's store could not remember restored messages: {e}")
        })
    }
}

/// Publishes `items` on a confirm channel of `conn` with the replay engine's decisions:
/// each confirmed and not returned item is handed to `remember` (by its reference) in the
/// engine's ack batches; returned, refused and unanswered ones are not, and a cancel settles
/// what is in flight and takes nothing more (a second ends the run at once). `on_progress` is
/// told the counts a few times a second. `Err`: the channel could not be opened.
pub async fn run_memory(
    conn: &lapin::Connection,
    items: Vec<Item>,
    limits: Limits,
    cancel: watch::Receiver<bool>,
    remember: impl FnMut(&[String]) -> Result<(), String>,
    mut on_progress: impl FnMut(&Tally),
) -> Result<MemoryRun, String> {
    let step = limits.step;
    let mut cancel = CancelWatch {
        rx: cancel,
        open: true,
    };
    // A cancel sent before the run is its first event; marked seen so it is not heard twice.
    let cancelled_before = *cancel.rx.borrow_and_update();
    let events: Events = Box::pin(conn.events_listener());
    let publish = bounded(step, &mut cancel, conn.create_channel())
        .await
        .map_err(|e| e.text("opening a channel"))?;
    bounded(
        step,
        &mut cancel,
        publish.confirm_select(ConfirmSelectOptions::default()),
    )
    .await
    .map_err(|e| e.text("confirm mode"))?;
    let n = items.len() as u64;
    let pipeline = pipeline_for(&items);
    let mut drv = Driver {
        engine: Engine::new(config(n, pipeline, limits), Instant::now()),
        fx: VecDeque::new(),
        cancel,
    };
    let mut shell = MemoryShell {
        ledger: Ledger::new(items),
        outgoing: None,
        confirms: Confirms::new(publish.clone()),
        publish,
        events,
        events_open: true,
        remember,
        unrecorded: None,
        step,
    };
    if cancelled_before {
        let fx = drv.engine.on(Instant::now(), Event::Cancel);
        drv.fx.extend(fx);
    }
    if conn.status().blocked() {
        let blocked = Event::Blocked("blocked before the run started".into());
        let fx = drv.engine.on(Instant::now(), blocked);
        drv.fx.extend(fx);
    }
    drive(&mut shell, &mut drv, &mut on_progress).await;
    on_progress(drv.engine.tally());
    Ok(MemoryRun {
        tally: drv.engine.tally().clone(),
        stop: drv
            .engine
            .stop_reason()
            .cloned()
            .unwrap_or(StopReason::ReachedStartDepth),
        unrecorded: shell.unrecorded,
    })
}

/// The engine's loop: carry out its effects, feed it what happens, until it is done.
async fn drive<R: FnMut(&[String]) -> Result<(), String>>(
    shell: &mut MemoryShell<R>,
    drv: &mut Driver,
    on_progress: &mut impl FnMut(&Tally),
) {
    let mut last_progress = Instant::now();
    let mut blocked_shown: Option<String> = None;
    super::drive::drive(shell, drv, |drv| {
        let blocked = &drv.engine.tally().blocked;
        if *blocked != blocked_shown || last_progress.elapsed() >= Duration::from_millis(200) {
            blocked_shown.clone_from(blocked);
            last_progress = Instant::now();
            on_progress(drv.engine.tally());
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(i: u32) -> Item {
        Item {
            reference: format!("r{i}"),
            key: format!("k{i}"),
            target: "orders.dlq".into(),
            exchange: String::new(),
            routing_key: "orders.dlq".into(),
            props: lapin::BasicProperties::default().with_message_id(format!("m{i}").into()),
            body: format!("body {i}").into_bytes(),
        }
    }

    #[test]
    fn an_item_is_delivered_as_a_publish_to_its_own_route_untouched() {
        let mut l = Ledger::new(vec![item(1), item(2)]);
        assert_eq!(l.left(), 2);
        let Some((ev, Some(out))) = l.take() else {
            panic!("a publish")
        };
        assert_eq!(
            ev,
            Event::Delivery {
                tag: 1,
                decision: Decision::Publish {
                    key: "k1".into(),
                    target: "orders.dlq".into()
                },
                near_limit: None
            }
        );
        assert_eq!(
            (out.tag, out.exchange.as_str(), out.routing_key.as_str()),
            (1, "", "orders.dlq")
        );
        assert_eq!(out.body, b"body 1");
        assert_eq!(
            out.props.message_id().as_ref().map(|m| m.as_str()),
            Some("m1")
        );
        assert_eq!(l.left(), 1);
        assert!(matches!(
            l.take(),
            Some((Event::Delivery { tag: 2, .. }, Some(_)))
        ));
        assert!(l.take().is_none(), "the list is done");
    }

    #[test]
    fn an_item_amqp_cannot_carry_is_refused_and_never_sent() {
        let mut long = item(1);
        long.routing_key = "q".repeat(300);
        let mut l = Ledger::new(vec![long]);
        let Some((Event::Delivery { decision, .. }, None)) = l.take() else {
            panic!("refused without a publish")
        };
        assert!(
            matches!(&decision, Decision::Refuse(why) if why.contains("routing key")),
            "{decision:?}"
        );
    }

    #[test]
    fn acks_remember_what_they_settle_and_a_hand_back_remembers_nothing() {
        let mut l = Ledger::new((1..=6).map(item).collect());
        for _ in 1..=6 {
            l.take();
        }
        // The engine never covers a held tag with a multiple ack: 3 is held here.
        let got = l.acked(&[
            AckOp {
                tag: 2,
                multiple: true,
            },
            AckOp {
                tag: 4,
                multiple: false,
            },
        ]);
        assert_eq!(got, vec!["r1", "r2", "r4"]);
        assert!(
            l.acked(&[AckOp {
                tag: 2,
                multiple: true
            }])
            .is_empty(),
            "nothing is remembered twice"
        );
        l.handed_back(5);
        assert_eq!(
            l.acked(&[AckOp {
                tag: 6,
                multiple: true
            }]),
            vec!["r6"],
            "3 and 5 went back untouched"
        );
    }

    #[test]
    fn the_pipeline_is_cut_by_the_largest_body() {
        assert_eq!(pipeline_for(&[item(1)]), PIPELINE);
        let mut big = item(2);
        big.body = vec![0; 4 * 1024 * 1024];
        assert_eq!(pipeline_for(&[item(1), big]), 3);
        let c = config(7, 3, Limits::default());
        assert_eq!(
            (c.depth_at_start, c.prefetch, c.source, c.limits.sync_every),
            (7, 3, Source::Memory, Duration::ZERO)
        );
    }
}
