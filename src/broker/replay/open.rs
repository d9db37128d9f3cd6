//! Opening a run: its channels set up, the DLQ's depth and first message read, then the
//! consumer started.

use std::collections::HashMap;
use std::pin::Pin;
use std::time::Duration;

use lapin::options::{
    BasicConsumeOptions, BasicGetOptions, BasicQosOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use lapin::types::{FieldTable, ShortString};

use crate::broker::amqp;

use super::confirms::Confirms;
use super::{
    Job, ReplayError, prefetch_for, shell::Shell, wait::CancelWatch, wait::Cut, wait::Pacer,
    wait::bounded,
};

/// The publishing connection's events (`connection.blocked` and `unblocked`).
pub(super) type Events = Pin<Box<dyn futures_util::Stream<Item = lapin::Event> + Send>>;

/// The channels of a run, open and set up, before the consumer starts.
pub(super) struct Opened<'a> {
    pub(super) job: &'a Job,
    pub(super) consume_conn: &'a lapin::Connection,
    pub(super) publish_conn: &'a lapin::Connection,
    pub(super) consume: lapin::Channel,
    pub(super) publish: lapin::Channel,
    pub(super) events: Events,
    pub(super) dlq_name: ShortString,
    pub(super) prefetch: u16,
    /// The first message, read with `basic.get` before the consumer started (see
    /// [`prefetch_for`]).
    pub(super) first: Option<lapin::message::Delivery>,
    pub(super) step: Duration,
    pub(super) depth_at_start: u64,
}

impl<'a> Opened<'a> {
    pub(super) async fn open(
        consume_conn: &'a lapin::Connection,
        publish_conn: &'a lapin::Connection,
        job: &'a Job,
        step: Duration,
        cancel: &mut CancelWatch,
    ) -> Result<Opened<'a>, ReplayError> {
        // Listen before anything is published: `connection.blocked` comes when the first publish
        // meets an alarm.
        let events: Events = Box::pin(publish_conn.events_listener());
        let chan_err = |e: Cut| ReplayError::Channel(e.text("opening a channel"));
        let consume = bounded(step, cancel, consume_conn.create_channel())
            .await
            .map_err(chan_err)?;
        let publish = bounded(step, cancel, publish_conn.create_channel())
            .await
            .map_err(chan_err)?;
        bounded(
            step,
            cancel,
            publish.confirm_select(ConfirmSelectOptions::default()),
        )
        .await
        .map_err(|e| ReplayError::Channel(e.text("confirm mode")))?;

        let queue_err = |e: Cut| ReplayError::Queue {
            queue: job.dlq.clone(),
            reason: e.text("declare"),
        };
        let dlq_name = amqp::short("the queue name", &job.dlq).map_err(|e| ReplayError::Queue {
            queue: job.dlq.clone(),
            reason: e.to_string(),
        })?;
        let declared = bounded(
            step,
            cancel,
            consume.queue_declare(
                dlq_name.clone(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            ),
        )
        .await
        .map_err(queue_err)?;
        let depth_at_start = u64::from(declared.message_count());

        // The first message is read before the consumer starts, so its size bounds the
        // prefetch even where the broker's average lags behind a fresh fill. A consumer's
        // prefetch is fixed when it starts (RabbitMQ applies a per-consumer `basic.qos` to
        // consumers started after it): what is learnt from its deliveries comes too late. The
        // message stays unacknowledged on this channel, its tag the first of the run's, and is
        // the engine's first delivery like any other. Not while the queue has a consumer: a
        // `basic.get` passes by a single active consumer, so the run would take a message
        // that queue gives to one consumer only (the broker's average bounds it then).
        let first = if depth_at_start > 0 && declared.consumer_count() == 0 {
            bounded(
                step,
                cancel,
                consume.basic_get(dlq_name.clone(), BasicGetOptions { no_ack: false }),
            )
            .await
            .map_err(|e| ReplayError::Queue {
                queue: job.dlq.clone(),
                reason: first_read_failure(consume_conn, &e),
            })?
            .map(|m| m.delivery)
        } else {
            None
        };
        // Held messages stay unacknowledged, so the prefetch must leave room for them.
        let prefetch = prefetch_for(job, first.as_ref().map(|d| d.data.len() as u64));
        bounded(
            step,
            cancel,
            consume.basic_qos(prefetch, BasicQosOptions::default()),
        )
        .await
        .map_err(queue_err)?;
        Ok(Opened {
            job,
            consume_conn,
            publish_conn,
            consume,
            publish,
            events,
            dlq_name,
            prefetch,
            first,
            step,
            depth_at_start,
        })
    }

    /// Starts consuming the dead-letter queue.
    pub(super) async fn start(self, cancel: &mut CancelWatch) -> Result<Shell<'a>, ReplayError> {
        let tag = format!("warren-replay-{}", std::process::id());
        let consumer = bounded(
            self.step,
            cancel,
            self.consume.basic_consume(
                self.dlq_name.clone(),
                tag_name(&tag),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            ),
        )
        .await
        .map_err(|e| ReplayError::Queue {
            queue: self.job.dlq.clone(),
            reason: e.text("declare"),
        })?;
        Ok(Shell {
            job: self.job,
            consume_conn: self.consume_conn,
            publish_conn: self.publish_conn,
            consume: self.consume,
            publish: self.publish.clone(),
            consumer,
            events: self.events,
            events_open: true,
            dlq_name: self.dlq_name,
            tag,
            prefetch: self.prefetch,
            first: self.first,
            step: self.step,
            pacer: Pacer::new(self.job.rate),
            confirms: Confirms::new(self.publish),
            replayed_before: 0,
            outgoing: None,
            check_keys: HashMap::new(),
            checked_redirects: HashMap::new(),
            depth_ch: None,
            unresponsive: false,
            left: None,
        })
    }
}

/// Why the first message could not be read. lapin drops the connection over a frame above the
/// negotiated size (a header that `x-death` pushed past it) and the read then never answers:
/// said as the likely cause, since nothing else names it.
fn first_read_failure(conn: &lapin::Connection, e: &Cut) -> String {
    let text = e.text("reading the first message");
    if conn.status().connected() {
        return text;
    }
    format!(
        "{text}; the connection was closed under it, which a message whose properties exceed the \
         broker's {}-byte frame does (`warren show` says so). Nothing moved",
        conn.configuration().frame_max()
    )
}

pub(super) fn tag_name(tag: &str) -> ShortString {
    amqp::short("the consumer tag", tag).unwrap_or_default()
}
