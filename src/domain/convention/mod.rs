//! Who put a message in its dead-letter queue, and what they wrote about it.
//!
//! Each convention (broker dead-lettering, or a framework that republishes failures itself) is
//! one module behind one interface, [`framework::Framework`]: how its messages are recognised
//! (headers, the dead-letter queue's name, for the few that keep their record in the body —
//! EasyNetQ, dramatiq, Symfony's PhpSerializer — the body), read into a [`Reading`], replayed
//! and worded. [`FRAMEWORKS`] lists them all, in the order detection asks them; nothing else
//! names every one. Adding a framework is a module here, its `Convention` variant and a line in
//! the registry. Header names are spelled exactly as the frameworks write them (see
//! `frameworks.md`). Reading never fails: a missing or malformed field is simply absent from the
//! result.

use jiff::Timestamp;

use super::message::DeadLetter;
use super::value::Table;
use super::xdeath::DeathHistory;

mod annotations;
mod broker;
mod celery;
mod dramatiq;
mod easynetq;
pub(crate) mod framework;
mod ladder;
mod masstransit;
mod nservicebus;
mod parse;
mod rascal;
mod rebus;
mod sneakers;
mod spring;
pub mod symfony;
mod wolverine;

pub use dramatiq::dramatiq_message_id;
use framework::{Framework, Letter, Named};
pub(crate) use parse::{
    body_json, find_exception, is_java_type, java_trace_types, last_path_segment,
    python_exception_line, qualified_type_prefix, text, text_keep_empty,
};
pub use parse::{parse_time, short_type};

/// Every convention, in the order detection asks them: the first that claims a message has it.
/// Framework headers win over `x-death`: a framework record carries the exception, and a
/// framework message can have passed through the broker's dead-lettering before. Header
/// records come before the body-read ones (EasyNetQ, dramatiq): what a replay changes in the
/// headers must not depend on the body. A team's own ladder comes before the broker: a ladder
/// that nacks on its last try leaves `x-death` too, but its headers say more.
pub(crate) const FRAMEWORKS: [&Framework; 14] = [
    &masstransit::FRAMEWORK,
    &nservicebus::FRAMEWORK,
    &spring::FRAMEWORK,
    &wolverine::FRAMEWORK,
    &rebus::FRAMEWORK,
    &sneakers::FRAMEWORK,
    // Symfony's stamps: in headers (JSON serializer) or the body's envelope (PhpSerializer).
    &symfony::FRAMEWORK,
    &celery::FRAMEWORK,
    &rascal::FRAMEWORK,
    &easynetq::FRAMEWORK,
    &dramatiq::FRAMEWORK,
    &ladder::FRAMEWORK,
    &broker::BROKER,
    &broker::UNKNOWN,
];

/// The registry by `Convention` (its discriminant). Checked when compiled: every convention
/// has exactly one entry.
const BY_CONVENTION: [&Framework; FRAMEWORKS.len()] = {
    let mut out = [&broker::UNKNOWN; FRAMEWORKS.len()];
    let mut seen = [false; FRAMEWORKS.len()];
    let mut i = 0;
    while i < FRAMEWORKS.len() {
        let at = FRAMEWORKS[i].convention as usize;
        assert!(!seen[at], "a convention registered twice");
        seen[at] = true;
        out[at] = FRAMEWORKS[i];
        i += 1;
    }
    assert!(
        Convention::Unknown as usize + 1 == FRAMEWORKS.len(),
        "every convention registered, Unknown last"
    );
    out
};

/// The convention a dead letter follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Convention {
    /// RabbitMQ dead-lettered it (`x-death`), whatever the client.
    Broker,
    MassTransit,
    /// Spring AMQP `RepublishMessageRecoverer` or the Spring Cloud Stream binder.
    Spring,
    NServiceBus,
    Wolverine,
    Rebus,
    /// Sneakers' Maxretry handler.
    Sneakers,
    Dramatiq,
    EasyNetQ,
    /// Celery (protocol 2): the task record is in the headers; the broker dead-lettered it.
    Celery,
    /// rascal (Node): one `rascal` table header; republished and nacked (`x-death`) or forwarded.
    Rascal,
    /// Symfony Messenger (5.4+): its failure transport's messages, read by their stamps.
    Symfony,
    /// A team's own retry ladder: its counter and error text in headers named in
    /// `[conventions]` (`x-retry-count`, `x-last-error`, …).
    Ladder,
    /// Nothing recognisable: no death record, no framework headers. Keep it last.
    Unknown,
}

impl Convention {
    /// Its module's interface.
    pub(crate) fn framework(self) -> &'static Framework {
        BY_CONVENTION
            .get(self as usize)
            .copied()
            .unwrap_or(&broker::UNKNOWN)
    }

    pub fn as_str(&self) -> &'static str {
        self.framework().name
    }

    /// A name for people ("MassTransit", "Spring AMQP").
    pub fn label(&self) -> &'static str {
        self.framework().label
    }

    /// Every convention, for filters and help text, in the order of the enum.
    pub const ALL: [Convention; FRAMEWORKS.len()] = {
        let mut out = [Convention::Unknown; FRAMEWORKS.len()];
        let mut i = 0;
        while i < out.len() {
            out[i] = BY_CONVENTION[i].convention;
            i += 1;
        }
        out
    };

    pub fn parse(s: &str) -> Option<Convention> {
        Convention::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
    }
}

impl std::fmt::Display for Convention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Header names a team's own retry ladder writes, from `[conventions]` in the config; passed in
/// so reading stays pure. Names are exact (AMQP header names are case-sensitive); the first one
/// a message carries is the one read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conventions {
    /// Headers holding the app's retry count.
    pub retry_counter_headers: Vec<String>,
    /// Headers holding the app's error text for the last failure.
    pub error_text_headers: Vec<String>,
}

pub const DEFAULT_RETRY_COUNTER_HEADERS: &[&str] = &["x-retry-count", "x-retries"];
pub const DEFAULT_ERROR_TEXT_HEADERS: &[&str] = &["x-last-error", "x-error", "x-exception"];

impl Default for Conventions {
    fn default() -> Conventions {
        let own = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        Conventions {
            retry_counter_headers: own(DEFAULT_RETRY_COUNTER_HEADERS),
            error_text_headers: own(DEFAULT_ERROR_TEXT_HEADERS),
        }
    }
}

impl Conventions {
    /// The configured retry-counter headers `h` carries, in configured order.
    pub fn counters_in(&self, h: &Table) -> Vec<String> {
        present(&self.retry_counter_headers, h)
    }

    /// The configured error-text headers `h` carries, in configured order.
    pub fn error_headers_in(&self, h: &Table) -> Vec<String> {
        present(&self.error_text_headers, h)
    }

    /// Whether `h` carries any of the configured headers: the message follows a ladder.
    pub(crate) fn marks(&self, h: &Table) -> bool {
        self.retry_counter_headers
            .iter()
            .chain(&self.error_text_headers)
            .any(|n| h.contains_key(n))
    }
}

fn present(names: &[String], h: &Table) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if h.contains_key(n) && !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

/// The exception a framework recorded. Every field is what the framework wrote (trimmed), or absent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fault {
    pub exception_type: Option<String>,
    pub message: Option<String>,
    pub stack_trace: Option<String>,
    /// The consumer, handler, endpoint or actor that failed.
    pub consumer: Option<String>,
    pub message_type: Option<String>,
    /// NServiceBus's inner exception; for Spring, the wrapping exception when the root cause differs.
    pub inner_exception_type: Option<String>,
    pub host: Option<String>,
}

/// Where the message was being processed when it failed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Source {
    pub queue: Option<String>,
    /// The exchange it had been published to, when recorded (`Some("")` is the default exchange).
    pub exchange: Option<String>,
    pub routing_key: Option<String>,
}

/// What a convention says about one dead letter.
#[derive(Clone, Debug, PartialEq)]
pub struct Reading {
    pub convention: Convention,
    pub fault: Option<Fault>,
    pub source: Source,
    pub retries: Option<i64>,
    pub failed_at: Option<Timestamp>,
    /// MassTransit `_skipped`: no consumer on the endpoint handles the type.
    pub skipped: bool,
    /// What the message asks for: the message type, or the task or actor name.
    pub message_type: Option<String>,
    /// The framework's own deadline: its worker discards the message unrun after it (Celery
    /// `expires`).
    pub deadline: Option<Timestamp>,
    /// The configured retry-counter headers on this message (see [`Conventions`]), which a
    /// replay resets, whatever the convention.
    pub counter_headers: Vec<String>,
    /// The configured error-text headers on this message, which a replay removes whatever the
    /// convention (a framework's own fault headers have their own rules besides).
    pub error_headers: Vec<String>,
    /// The retry limit the message itself states (dramatiq's `options.max_retries`); `None` when
    /// it states none and the worker's setting decides.
    pub retry_limit: Option<RetryLimit>,
    /// The framework published the message here with the headers of the delivery that failed
    /// (Symfony's failure transport): its `x-death` is a copy, not how it came here.
    pub deaths_copied: bool,
}

/// A retry limit a message states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryLimit {
    /// At most this many retries.
    At(i64),
    /// Retried without limit (dramatiq's `max_retries: null`).
    Unlimited,
}

/// Which convention the message follows: the first in [`FRAMEWORKS`] that claims it.
pub fn detect(dl: &DeadLetter, deaths: &DeathHistory, own: &Conventions) -> Convention {
    detect_in(&Letter { dl, deaths, own }).convention
}

fn detect_in(l: &Letter<'_>) -> &'static Framework {
    FRAMEWORKS
        .into_iter()
        .find(|f| (f.detect)(l))
        .unwrap_or(&broker::UNKNOWN)
}

/// Reads the message according to its convention.
pub fn read(dl: &DeadLetter, deaths: &DeathHistory, own: &Conventions) -> Reading {
    let letter = Letter { dl, deaths, own };
    let framework = detect_in(&letter);
    let mut r = (framework.read)(&letter);
    // Whatever its reading says: the broker and the unknown read nothing of their own.
    r.convention = framework.convention;
    // A configured counter is one Warren knows of whoever wrote the rest: a replay resets it
    // and "attempts reset" waits for it, whatever the convention.
    if r.counter_headers.is_empty() {
        r.counter_headers = own.counters_in(&dl.headers);
    }
    // Likewise a configured error-text header describes the failure before the replay, and
    // goes with it, whatever the convention: which convention a `.XQ` message reads as depends
    // on its body (dramatiq's record), and the plan's headers must not (the preview reads a cut
    // body, the run the whole one).
    if r.error_headers.is_empty() {
        r.error_headers = own.error_headers_in(&dl.headers);
    }
    // An AMQP 1.0 consumer's `x-opt-` annotations say why, whatever else put it here.
    if r.fault.is_none()
        && let Some((fault, keys)) = annotations::failure(&dl.headers)
    {
        r.fault = Some(fault);
        r.error_headers.extend(
            keys.into_iter()
                .filter(|k| !own.error_text_headers.contains(k)),
        );
    }
    // The broker's record fills what the framework did not say. Symfony's `x-death` is a copy
    // of its delay queue's: not where the message failed.
    if !r.deaths_copied {
        fill_from_deaths(&mut r, deaths);
    }
    if r.failed_at.is_none() {
        r.failed_at = deaths.latest_time();
    }
    if r.message_type.is_none() {
        r.message_type = r.fault.as_ref().and_then(|f| f.message_type.clone());
    }
    if r.message_type.is_none() {
        r.message_type = super::amqp10::message_type(&dl.properties).map(|t| t.trim().to_string());
    }
    r
}

fn fill_from_deaths(r: &mut Reading, deaths: &DeathHistory) {
    if let Some(origin) = deaths.origin_entry() {
        if r.source.queue.is_none() {
            r.source.queue = origin.queue.clone();
        }
        if r.convention == Convention::Broker {
            r.source.exchange = origin.exchange.clone();
            r.source.routing_key = origin.routing_keys.first().cloned();
            r.retries = origin.count;
        }
    } else if r.source.queue.is_none() {
        r.source.queue = deaths.origin_queue().map(str::to_string);
    }
}

impl Reading {
    pub(crate) fn empty(convention: Convention) -> Reading {
        Reading {
            convention,
            fault: None,
            source: Source::default(),
            retries: None,
            failed_at: None,
            skipped: false,
            message_type: None,
            deadline: None,
            counter_headers: Vec::new(),
            error_headers: Vec::new(),
            retry_limit: None,
            deaths_copied: false,
        }
    }
}

/// Where a framework keeps its own id for a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdPlace {
    /// A header of this name.
    Header(&'static str),
    /// A top-level field of the JSON body.
    Body(&'static str),
}

/// The id a framework gives the message itself, which stays with it through retries and replays,
/// as (where it is kept, the id): Celery's task id (header `id`, also the `correlation_id`), or
/// dramatiq's `message_id` in the body (dramatiq sets no AMQP `message_id`).
pub fn framework_id(dl: &DeadLetter) -> Option<(IdPlace, String)> {
    FRAMEWORKS.into_iter().find_map(|f| (f.id)(dl))
}

/// What a queue's name alone says, by the first framework whose naming it follows.
pub(crate) fn by_queue_name(name: &str) -> Option<(Convention, Named)> {
    FRAMEWORKS
        .into_iter()
        .find_map(|f| (f.queue_name)(name).map(|n| (f.convention, n)))
}

/// Body bytes that go into a content key; every browse keeps at least this many.
pub const HASHED_BODY: usize = 64 * 1024;
