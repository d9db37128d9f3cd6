//! Celery (protocol 2): the task record is in the headers (`lang`, `task`, `id`); it records no
//! exception in the message (the result backend has it, if there is one), so the broker's death
//! record says what happened. Protocol 1 kept it in the body and has been gone since Celery 4.

use super::framework::{BASE, Counter, Framework, Letter, Replay, Story, after};
use super::{Convention, IdPlace, Reading, parse_time, text};
use crate::domain::value::Table;

pub(crate) const FRAMEWORK: Framework = Framework {
    convention: Convention::Celery,
    name: "celery",
    label: "Celery",
    detect: |l| is_celery(&l.dl.headers),
    read,
    // The task id (header `id`, also the `correlation_id`).
    id: |dl| {
        let h = &dl.headers;
        if !is_celery(h) {
            return None;
        }
        text(h, "id").map(|id| (IdPlace::Header("id"), id))
    },
    retries_phrase: |_, r| r.retries.map(|n| after(n, "retry", "retries")),
    story: Story {
        task_not_fault: true,
        ..BASE.story
    },
    replay: Replay {
        counters: &[Counter::Header("retries")],
        // Its protocol has `retries`: a fresh budget is 0, not none.
        zeroed: &["retries"],
        deadline: Some("expires"),
        ..BASE.replay
    },
    ..BASE
};

fn is_celery(h: &Table) -> bool {
    text(h, "lang").as_deref() == Some("py") && text(h, "task").is_some() && text(h, "id").is_some()
}

/// The task and its retry count, and the deadline after which its worker discards it unrun.
fn read(l: &Letter<'_>) -> Reading {
    let h = &l.dl.headers;
    let mut r = Reading::empty(Convention::Celery);
    r.message_type = text(h, "task");
    r.retries = h.get_i64("retries");
    // An ISO 8601 time; `None` (a void) when the task has no deadline.
    r.deadline = h.get("expires").and_then(parse_time);
    r
}
