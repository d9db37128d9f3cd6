//! The dead letter the replay benches move: what RabbitMQ writes when a consumer of `work`
//! rejects a message (one `x-death` entry and the three summary headers), and one header of the
//! app's. Shared by `bench_replay` (published to the broker) and `bench_classify` (handed to
//! the pipeline as a delivery), so both measure the same message.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};

/// The headers of a message rejected in `work` and dead-lettered.
pub fn headers() -> FieldTable {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s));
    let mut death = FieldTable::default();
    death.insert("count".into(), AMQPValue::LongLongInt(1));
    death.insert("reason".into(), text("rejected"));
    death.insert("queue".into(), text("work"));
    death.insert("exchange".into(), text(""));
    death.insert(
        "routing-keys".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![text("work")])),
    );
    death.insert("time".into(), AMQPValue::Timestamp(1_700_000_000));
    let mut h = FieldTable::default();
    h.insert(
        "x-death".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)])),
    );
    h.insert("x-first-death-queue".into(), text("work"));
    h.insert("x-first-death-reason".into(), text("rejected"));
    h.insert("x-first-death-exchange".into(), text(""));
    h.insert("tenant".into(), text("acme"));
    h
}
