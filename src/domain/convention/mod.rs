//! Who put a message in its dead-letter queue, and what they wrote about it.
//!
//! Each convention (broker dead-lettering, or a framework that republishes failures itself) is
//! recognised from its headers, the dead-letter queue's name and, for the few frameworks that keep
//! their record in the body (EasyNetQ, dramatiq), the JSON body. Header names are spelled exactly
//! as the frameworks write them (see `frameworks.md`). Reading never fails: a missing or malformed
//! field is simply absent from the result.

use std::sync::LazyLock;

use jiff::Timestamp;
use regex::Regex;
use serde_json::Value;

use super::json::table_from_json;
use super::message::DeadLetter;
use super::value::{HeaderValue, Table};
use super::xdeath::{DeathHistory, timestamp_from_value, value_text};

mod annotations;
mod dramatiq;
mod rascal;
pub mod symfony;

use dramatiq::{dramatiq, dramatiq_body};
pub use dramatiq::{dramatiq_head, dramatiq_message_id};
use rascal::rascal;
pub use rascal::{RascalRecovery, rascal_recovery, rascal_table};

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
    /// Nothing recognisable: no death record, no framework headers.
    Unknown,
}

impl Convention {
    pub fn as_str(&self) -> &'static str {
        match self {
            Convention::Broker => "broker",
            Convention::MassTransit => "masstransit",
            Convention::Spring => "spring",
            Convention::NServiceBus => "nservicebus",
            Convention::Wolverine => "wolverine",
            Convention::Rebus => "rebus",
            Convention::Sneakers => "sneakers",
            Convention::Dramatiq => "dramatiq",
            Convention::EasyNetQ => "easynetq",
            Convention::Celery => "celery",
            Convention::Rascal => "rascal",
            Convention::Symfony => "symfony",
            Convention::Ladder => "ladder",
            Convention::Unknown => "unknown",
        }
    }

    /// A name for people ("MassTransit", "Spring AMQP").
    pub fn label(&self) -> &'static str {
        match self {
            Convention::Broker => "RabbitMQ dead-lettering",
            Convention::MassTransit => "MassTransit",
            Convention::Spring => "Spring AMQP",
            Convention::NServiceBus => "NServiceBus",
            Convention::Wolverine => "Wolverine",
            Convention::Rebus => "Rebus",
            Convention::Sneakers => "Sneakers",
            Convention::Dramatiq => "dramatiq",
            Convention::EasyNetQ => "EasyNetQ",
            Convention::Celery => "Celery",
            Convention::Rascal => "rascal",
            Convention::Symfony => "Symfony Messenger",
            Convention::Ladder => "retry ladder",
            Convention::Unknown => "unknown",
        }
    }

    /// Every convention, for filters and help text.
    pub const ALL: [Convention; 14] = [
        Convention::Broker,
        Convention::MassTransit,
        Convention::Spring,
        Convention::NServiceBus,
        Convention::Wolverine,
        Convention::Rebus,
        Convention::Sneakers,
        Convention::Dramatiq,
        Convention::EasyNetQ,
        Convention::Celery,
        Convention::Rascal,
        Convention::Symfony,
        Convention::Ladder,
        Convention::Unknown,
    ];

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

    fn marks(&self, h: &Table) -> bool {
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

/// Which convention the message follows. Framework headers win over `x-death`: a framework
/// record carries the exception, and a framework message can have passed through the broker's
/// dead-lettering before.
pub fn detect(dl: &DeadLetter, deaths: &DeathHistory, own: &Conventions) -> Convention {
    let h = &dl.headers;
    let has_prefix = |p: &str| h.keys().any(|k| k.starts_with(p));
    let queue = dl.queue.as_str();
    if has_prefix("MT-Fault-")
        || h.contains_key("MT-Reason")
        || ((queue.ends_with("_error") || queue.ends_with("_skipped")) && has_prefix("MT-"))
    {
        return Convention::MassTransit;
    }
    if has_prefix("NServiceBus.ExceptionInfo.") || h.contains_key("NServiceBus.FailedQ") {
        return Convention::NServiceBus;
    }
    if h.contains_key("x-exception-message")
        || h.contains_key("x-exception-stacktrace")
        || h.contains_key("x-original-exchange")
        || h.contains_key("x-original-routingKey")
    {
        return Convention::Spring;
    }
    if h.contains_key("exception-type") || queue == "wolverine-dead-letter-queue" {
        return Convention::Wolverine;
    }
    if h.contains_key("rbs2-error-details") {
        return Convention::Rebus;
    }
    if h.contains_key("retry_info") {
        return Convention::Sneakers;
    }
    // Symfony's stamps: in headers (JSON serializer) or the body's envelope (PhpSerializer).
    if symfony::serializer(dl).is_some() {
        return Convention::Symfony;
    }
    // Header records before the body-read ones: what a replay changes in the headers must not
    // depend on the body.
    if is_celery(h) {
        return Convention::Celery;
    }
    if rascal_table(h).is_some() {
        return Convention::Rascal;
    }
    if queue == "EasyNetQ_Default_Error_Queue"
        || dl
            .properties
            .kind
            .as_deref()
            .is_some_and(|k| k.starts_with("EasyNetQ.SystemMessages.Error"))
    {
        return Convention::EasyNetQ;
    }
    if queue.ends_with(".XQ") && dramatiq_body(dl).is_some_and(|b| b.get("actor_name").is_some()) {
        return Convention::Dramatiq;
    }
    // A team's own ladder before the broker: a ladder that nacks on its last try leaves `x-death`
    // too, but its headers say more.
    if own.marks(h) {
        return Convention::Ladder;
    }
    if !deaths.is_empty() {
        return Convention::Broker;
    }
    Convention::Unknown
}

/// Reads the message according to its convention.
pub fn read(dl: &DeadLetter, deaths: &DeathHistory, own: &Conventions) -> Reading {
    let convention = detect(dl, deaths, own);
    let mut r = match convention {
        Convention::Broker | Convention::Unknown => Reading::empty(convention),
        Convention::MassTransit => masstransit(dl),
        Convention::Spring => spring(dl, deaths),
        Convention::NServiceBus => nservicebus(dl),
        Convention::Wolverine => wolverine(dl),
        Convention::Rebus => rebus(dl),
        Convention::Sneakers => sneakers(dl),
        Convention::Dramatiq => dramatiq(dl),
        Convention::EasyNetQ => easynetq(dl),
        Convention::Celery => celery(dl),
        Convention::Rascal => rascal(dl),
        Convention::Symfony => symfony::read(dl, Reading::empty(convention)),
        Convention::Ladder => ladder(dl, own),
    };
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
    fn empty(convention: Convention) -> Reading {
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

/// A hand-rolled ladder: the app's error text (its first line may name the type, `TypeError:
/// boom`) and its retry count. Where it failed comes from `x-death` (the work queue, when the
/// app nacked; the wait queue's expiry, when it copied the message into the DLQ itself).
fn ladder(dl: &DeadLetter, own: &Conventions) -> Reading {
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::Ladder);
    r.counter_headers = own.counters_in(h);
    r.error_headers = own.error_headers_in(h);
    r.retries = r.counter_headers.iter().find_map(|n| h.get_i64(n));
    if let Some(t) = r.error_headers.iter().find_map(|n| text(h, n)) {
        let first = t.lines().next().unwrap_or_default().trim().to_string();
        // An error's `stack` (first line, then `    at …`) is a trace; its first line the error.
        let stack_trace = (t.lines().count() > 1).then(|| t.clone());
        let (exception_type, message) =
            match qualified_type_prefix(&first).or_else(|| plain_type_prefix(&first)) {
                Some((ty, m)) => (Some(ty), m),
                None => (None, first),
            };
        r.fault = Some(Fault {
            exception_type,
            message: Some(message),
            stack_trace,
            ..Fault::default()
        });
    }
    r
}

/// "TypeError: boom", "ValueError: bad": an unqualified type, only when it ends like one.
fn plain_type_prefix(line: &str) -> Option<(String, String)> {
    let (t, m) = line.split_once(": ")?;
    let t = t.trim();
    let ends_like_exception = ["Exception", "Error"]
        .iter()
        .any(|s| t.ends_with(s) && t != *s);
    (ends_like_exception && is_java_type(t) && !t.contains('.'))
        .then(|| (t.to_string(), m.trim().to_string()))
}

fn masstransit(dl: &DeadLetter) -> Reading {
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::MassTransit);
    let reason = text(h, "MT-Reason");
    r.skipped = matches!(reason.as_deref(), Some("skip" | "dead-letter"))
        || (reason.is_none() && dl.queue.ends_with("_skipped"));
    let envelope_type = body_json(dl).and_then(|b| {
        let t = b.get("messageType")?;
        let first = match t {
            Value::Array(a) => a.first()?.as_str()?,
            Value::String(s) => s.as_str(),
            _ => return None,
        };
        Some(first.to_string())
    });
    let message_type = text(h, "MT-Fault-MessageType").or(envelope_type).map(|t| {
        t.strip_prefix("urn:message:")
            .map(str::to_string)
            .unwrap_or(t)
    });
    let endpoint = text(h, "MT-Fault-InputAddress")
        .and_then(|a| last_path_segment(&a))
        .or_else(|| {
            dl.queue
                .strip_suffix("_error")
                .or_else(|| dl.queue.strip_suffix("_skipped"))
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        });
    r.source.queue = endpoint;
    let exception_type = text(h, "MT-Fault-ExceptionType");
    if exception_type.is_some() || text(h, "MT-Fault-Message").is_some() {
        r.fault = Some(Fault {
            exception_type,
            message: text(h, "MT-Fault-Message"),
            stack_trace: text(h, "MT-Fault-StackTrace"),
            consumer: text(h, "MT-Fault-ConsumerType"),
            message_type: message_type.clone(),
            inner_exception_type: None,
            host: text(h, "MT-Host-MachineName"),
        });
        // The header is only written when retries ran.
        r.retries = Some(h.get_i64("MT-Fault-RetryCount").unwrap_or(0));
    } else if let Some(n) = h.get_i64("MT-Fault-RetryCount") {
        r.retries = Some(n);
    }
    r.failed_at = h.get("MT-Fault-Timestamp").and_then(parse_time);
    r.message_type = message_type;
    r
}

fn spring(dl: &DeadLetter, deaths: &DeathHistory) -> Reading {
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::Spring);
    let message = text(h, "x-exception-message");
    let stack = text(h, "x-exception-stacktrace");
    let (top, root) = stack.as_deref().map(java_trace_types).unwrap_or_default();
    // The root cause is what went wrong; the top is usually Spring's ListenerExecutionFailedException.
    let chosen = root.clone().or(top.clone());
    let mut exception_type = chosen.as_ref().map(|(t, _)| t.clone());
    let mut fault_message = message
        .clone()
        .or_else(|| chosen.as_ref().and_then(|(_, m)| m.clone()));
    if exception_type.is_none()
        && let Some((t, m)) = message.as_deref().and_then(qualified_type_prefix)
    {
        exception_type = Some(t);
        fault_message = Some(m);
    }
    let wrapper = match (&top, &root) {
        (Some((t, _)), Some((rt, _))) if t != rt => Some(t.clone()),
        _ => None,
    };
    if exception_type.is_some() || fault_message.is_some() || stack.is_some() {
        r.fault = Some(Fault {
            exception_type,
            message: fault_message,
            stack_trace: stack,
            consumer: None,
            message_type: None,
            // For Spring this holds the wrapping exception (the trace's first line).
            inner_exception_type: wrapper,
            host: None,
        });
    }
    r.source.exchange = text_keep_empty(h, "x-original-exchange");
    r.source.routing_key = text_keep_empty(h, "x-original-routingKey");
    r.source.queue = deaths
        .origin_queue()
        .map(str::to_string)
        .or_else(|| spring_binder_queue(&dl.queue));
    r.retries = h.get_i64("retry-count");
    r
}

/// The queue a Spring Cloud Stream binder DLQ belongs to: `<dest>.<group>.dlq` → `<dest>.<group>`.
pub fn spring_binder_queue(dlq: &str) -> Option<String> {
    dlq.strip_suffix(".dlq")
        .filter(|q| q.contains('.'))
        .map(str::to_string)
}

fn nservicebus(dl: &DeadLetter) -> Reading {
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::NServiceBus);
    let p = "NServiceBus.ExceptionInfo.";
    let message_type = text(h, "NServiceBus.EnclosedMessageTypes").and_then(|t| {
        // "Ns.Type, Assembly, Version=…;Ns.IInterface, …": the first type, without the assembly.
        let first = t.split(';').next()?.split(',').next()?.trim().to_string();
        (!first.is_empty()).then_some(first)
    });
    r.fault = Some(Fault {
        exception_type: text(h, &format!("{p}ExceptionType")),
        message: text(h, &format!("{p}Message")),
        stack_trace: text(h, &format!("{p}StackTrace")),
        consumer: text(h, "NServiceBus.ProcessingEndpoint"),
        message_type: message_type.clone(),
        inner_exception_type: text(h, &format!("{p}InnerExceptionType")),
        host: text(h, "NServiceBus.ProcessingMachine"),
    });
    r.source.queue = nservicebus_failed_queue(h);
    r.retries = h.get_i64("NServiceBus.Retries");
    r.failed_at = h.get("NServiceBus.TimeOfFailure").and_then(parse_time);
    r.message_type = message_type;
    r
}

/// `NServiceBus.FailedQ` without the `@machine` old versions append.
pub fn nservicebus_failed_queue(h: &Table) -> Option<String> {
    let q = text(h, "NServiceBus.FailedQ")?;
    let q = q.split('@').next().unwrap_or_default().trim();
    (!q.is_empty()).then(|| q.to_string())
}

fn wolverine(dl: &DeadLetter) -> Reading {
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::Wolverine);
    let exception_type = text(h, "exception-type");
    let message = text(h, "exception-message");
    if exception_type.is_some() || message.is_some() {
        r.fault = Some(Fault {
            exception_type,
            message,
            stack_trace: text(h, "exception-stack"),
            consumer: None,
            message_type: text(h, "message-type"),
            inner_exception_type: None,
            host: None,
        });
    }
    // A Wolverine destination is a URI such as rabbitmq://queue/orders.
    r.source.queue = text(h, "original-destination").map(|d| {
        if d.contains("://") {
            last_path_segment(&d).unwrap_or(d)
        } else {
            d
        }
    });
    r.retries = h.get_i64("attempts");
    r.failed_at = h.get("failed-at").and_then(parse_time);
    r
}

fn rebus(dl: &DeadLetter) -> Reading {
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::Rebus);
    let details = text(h, "rbs2-error-details");
    let parsed = details.as_deref().and_then(find_exception);
    r.fault = Some(Fault {
        exception_type: parsed.as_ref().map(|(t, _)| t.clone()),
        message: parsed.and_then(|(_, m)| m).or_else(|| {
            details
                .as_deref()
                .and_then(|d| d.lines().next())
                .map(str::to_string)
        }),
        stack_trace: details,
        consumer: None,
        message_type: text(h, "rbs2-msg-type")
            .map(|t| t.split(',').next().unwrap_or_default().trim().to_string()),
        inner_exception_type: None,
        host: None,
    });
    r.source.queue = text(h, "rbs2-source-queue");
    r.retries = h.get_i64("rbs2-delivery-count");
    r
}

fn sneakers(dl: &DeadLetter) -> Reading {
    let mut r = Reading::empty(Convention::Sneakers);
    // retry_info is JSON text as Sneakers writes it; accept a table too.
    let info = match dl.headers.get("retry_info") {
        Some(HeaderValue::Table(t)) => t.clone(),
        Some(v) => value_text(v)
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .map(|j| table_from_json(&j))
            .unwrap_or_default(),
        None => Table::new(),
    };
    let backtrace = match info.get("backtrace") {
        Some(HeaderValue::Array(lines)) => Some(
            lines
                .iter()
                .filter_map(value_text)
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Some(v) => value_text(v),
        None => None,
    };
    let exception_type = text(&info, "error_class");
    let message = text(&info, "error_message").or_else(|| text(&info, "error"));
    if exception_type.is_some() || message.is_some() {
        r.fault = Some(Fault {
            exception_type,
            message,
            stack_trace: backtrace,
            consumer: None,
            message_type: None,
            inner_exception_type: None,
            host: None,
        });
    }
    r.source.queue = dl
        .queue
        .strip_suffix("-error")
        .filter(|q| !q.is_empty())
        .map(str::to_string);
    r.source.routing_key = Some(dl.delivery.routing_key.clone());
    r.retries = info.get_i64("num_attempts");
    r.failed_at = info.get("failed_at").and_then(parse_time);
    r
}

fn easynetq(dl: &DeadLetter) -> Reading {
    let mut r = Reading::empty(Convention::EasyNetQ);
    let body = body_json(dl);
    let field = |k: &str| {
        body.as_ref()
            .and_then(|b| b.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let exception = field("Exception");
    let parsed = exception.as_deref().and_then(find_exception);
    let message_type = body
        .as_ref()
        .and_then(|b| b.get("BasicProperties"))
        .and_then(|p| p.get("Type"))
        .and_then(Value::as_str)
        .map(|t| t.split(',').next().unwrap_or_default().trim().to_string())
        .filter(|t| !t.is_empty());
    if exception.is_some() {
        r.fault = Some(Fault {
            exception_type: parsed.as_ref().map(|(t, _)| t.clone()),
            message: parsed.and_then(|(_, m)| m),
            stack_trace: exception,
            consumer: None,
            message_type: message_type.clone(),
            inner_exception_type: None,
            host: None,
        });
    }
    r.source.queue = field("Queue").filter(|q| !q.is_empty());
    r.source.exchange = field("Exchange");
    r.source.routing_key = field("RoutingKey");
    r.failed_at = body
        .as_ref()
        .and_then(|b| b.get("DateTime"))
        .and_then(Value::as_str)
        .and_then(|s| parse_time(&HeaderValue::string(s)));
    r.message_type = message_type;
    r
}

/// Celery's task message, protocol 2: the task record is in the headers (`lang`, `task`, `id`).
/// Protocol 1 kept it in the body and has been gone since Celery 4.
fn is_celery(h: &Table) -> bool {
    text(h, "lang").as_deref() == Some("py") && text(h, "task").is_some() && text(h, "id").is_some()
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
    let h = &dl.headers;
    if is_celery(h) {
        return text(h, "id").map(|id| (IdPlace::Header("id"), id));
    }
    dramatiq_message_id(&dl.body).map(|id| (IdPlace::Body("message_id"), id))
}

/// Body bytes that go into a content key; every browse keeps at least this many.
pub const HASHED_BODY: usize = 64 * 1024;

/// Celery names the task and counts its retries; it records no exception in the message (the
/// result backend has it, if there is one), so the broker's death record says what happened.
fn celery(dl: &DeadLetter) -> Reading {
    let h = &dl.headers;
    let mut r = Reading::empty(Convention::Celery);
    r.message_type = text(h, "task");
    r.retries = h.get_i64("retries");
    // An ISO 8601 time; `None` (a void) when the task has no deadline.
    r.deadline = h.get("expires").and_then(parse_time);
    r
}

/// The body as JSON, when it is complete and parses. Frameworks that keep their record in the
/// body write JSON; anything else is not theirs.
pub(crate) fn body_json(dl: &DeadLetter) -> Option<Value> {
    if !dl.body_complete() || dl.body.first().is_none_or(|b| *b != b'{') {
        return None;
    }
    serde_json::from_slice(&dl.body).ok()
}

/// A header as trimmed text, `None` when absent, not a string, or blank.
pub(crate) fn text(h: &Table, key: &str) -> Option<String> {
    nonempty(h.get(key).and_then(value_text))
}

/// Like `text`, but an empty string is a real value (the default exchange is `""`).
fn text_keep_empty(h: &Table, key: &str) -> Option<String> {
    h.get(key).and_then(value_text)
}

fn nonempty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The last path segment of an address such as `rabbitmq://host/vhost/shipping-label?bind=true`.
fn last_path_segment(address: &str) -> Option<String> {
    let without_query = address.split(['?', '#']).next().unwrap_or_default();
    let path = without_query
        .split_once("://")
        .map_or(without_query, |(_, rest)| rest);
    let seg = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    // The scheme's host alone is not an endpoint.
    (!seg.is_empty() && path.contains('/')).then(|| seg.to_string())
}

/// Java class-name shape: dotted identifiers (`$` allowed for nested classes).
fn is_java_type(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        })
}

/// `Type: message` or `Type` from one line of a Java stack trace.
fn java_exception_line(line: &str) -> Option<(String, Option<String>)> {
    let line = line.trim();
    let (t, m) = match line.split_once(": ") {
        Some((t, m)) => (
            t.trim(),
            Some(m.trim().to_string()).filter(|m| !m.is_empty()),
        ),
        None => (line.strip_suffix(':').unwrap_or(line), None),
    };
    is_java_type(t).then(|| (t.to_string(), m))
}

/// The top exception (first line) and the root cause (last `Caused by:`) of a Java stack trace.
type TypeAndMessage = (String, Option<String>);
fn java_trace_types(trace: &str) -> (Option<TypeAndMessage>, Option<TypeAndMessage>) {
    let top = trace
        .lines()
        .find(|l| !l.trim().is_empty())
        .and_then(java_exception_line);
    let root = trace
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Caused by:"))
        .filter_map(java_exception_line)
        .next_back();
    (top, root)
}

/// "com.acme.OutOfStockException: SKU A-0 is out of stock" → type and message, only when the
/// prefix is a fully qualified class name ending like an exception, so "Order 12: bad" or
/// "Error: x" are not mistaken for types.
fn qualified_type_prefix(message: &str) -> Option<(String, String)> {
    let (t, m) = message.split_once(": ")?;
    let t = t.trim();
    let ends_like_exception = ["Exception", "Error", "Throwable", "Fault"]
        .iter()
        .any(|s| t.ends_with(s));
    (t.contains('.') && is_java_type(t) && ends_like_exception)
        .then(|| (t.to_string(), m.trim().to_string()))
}

/// A Python traceback's last line: `ValueError: boom` or `pkg.errors.Oops: boom`.
pub(crate) fn python_exception_line(line: &str) -> Option<TypeAndMessage> {
    let line = line.trim();
    let (t, m) = line.split_once(':').map_or((line, None), |(t, m)| {
        (
            t.trim(),
            Some(m.trim().to_string()).filter(|m| !m.is_empty()),
        )
    });
    is_java_type(t).then(|| (t.to_string(), m))
}

static DOTNET_EXCEPTION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"\b((?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*(?:Exception|Error|Fault))\b(?::[ \t]*([^\r\n]*))?")
        .ok()
});

/// The first .NET-style exception in free text (Rebus error details, EasyNetQ's `Exception`).
fn find_exception(text: &str) -> Option<TypeAndMessage> {
    let re = DOTNET_EXCEPTION.as_ref()?;
    let caps = re.captures(text)?;
    let t = caps.get(1)?.as_str().to_string();
    let m = caps
        .get(2)
        .map(|m| m.as_str().trim().to_string())
        .filter(|m| !m.is_empty());
    Some((t, m))
}

/// The short name of a type: `Shop.Shipping.CarrierUnavailableException` →
/// `CarrierUnavailableException`, without an assembly qualification or nesting prefix.
pub fn short_type(t: &str) -> &str {
    // A type has no spaces: text that has them (an AMQP 1.0 consumer's annotated reason) is
    // shown whole.
    if t.split(',')
        .next()
        .unwrap_or(t)
        .trim()
        .contains(char::is_whitespace)
    {
        return t.trim();
    }
    let t = t.split(',').next().unwrap_or(t).trim();
    let t = t.rsplit(['.', '+', ':']).next().unwrap_or(t);
    if t.is_empty() { "?" } else { t }
}

static NSB_TIME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}):(\d{1,9}) Z$").ok());

/// A failure time as frameworks write it: an AMQP timestamp, Unix seconds or milliseconds, RFC
/// 3339, a .NET round-trip string without offset (taken as UTC), or NServiceBus's
/// `yyyy-MM-dd HH:mm:ss:ffffff Z`.
pub fn parse_time(v: &HeaderValue) -> Option<Timestamp> {
    match v {
        HeaderValue::ShortString(_) | HeaderValue::LongString(_) => {
            let s = value_text(v)?;
            let s = s.trim();
            if let Ok(n) = s.parse::<i64>() {
                return time_from_number(n);
            }
            if let Ok(t) = s.parse::<Timestamp>() {
                return Some(t);
            }
            if let Some(c) = NSB_TIME.as_ref().and_then(|re| re.captures(s)) {
                let (d, t, f) = (c.get(1)?.as_str(), c.get(2)?.as_str(), c.get(3)?.as_str());
                return format!("{d}T{t}.{f}Z").parse().ok();
            }
            let spaced = s.replacen(' ', "T", 1);
            if let Ok(t) = spaced.parse::<Timestamp>() {
                return Some(t);
            }
            spaced
                .parse::<jiff::civil::DateTime>()
                .ok()
                .and_then(|dt| jiff::tz::Offset::UTC.to_timestamp(dt).ok())
        }
        HeaderValue::Timestamp(_) => timestamp_from_value(v),
        other => other.as_i64().and_then(time_from_number),
    }
}

/// Seconds, or milliseconds when the number is too large to be seconds of this era.
fn time_from_number(n: i64) -> Option<Timestamp> {
    if n.unsigned_abs() > 100_000_000_000 {
        Timestamp::from_millisecond(n).ok()
    } else {
        Timestamp::from_second(n).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dramatiq_message_id_only_from_dramatiqs_shape() {
        let id = |b: &str| dramatiq_message_id(b.as_bytes());
        let full = r#"{"queue_name":"work","actor_name":"charge","args":[1,{"message_id":"inner"}],"kwargs":{},"options":{"retries":1},"message_id":"m-1","message_timestamp":1}"#;
        assert_eq!(
            id(full).as_deref(),
            Some("m-1"),
            "the top-level id, not one in the args"
        );
        assert_eq!(id(&format!("  \n{full}")).as_deref(), Some("m-1"));
        // Cut anywhere after the id: still read.
        assert_eq!(id(&full[..full.len() - 5]).as_deref(), Some("m-1"));
        // Cut before it: none.
        assert_eq!(id(&full[..60]), None);
        // Not dramatiq's: another key, a missing actor or queue, an id that is not a string,
        // blank or absurdly long, no object at all.
        assert_eq!(
            id(r#"{"queue_name":"q","actor_name":"a","tenant":"t","message_id":"m"}"#),
            None
        );
        assert_eq!(id(r#"{"message_id":"m","queue_name":"q"}"#), None);
        assert_eq!(
            id(r#"{"queue_name":"q","actor_name":1,"message_id":"m"}"#),
            None
        );
        assert_eq!(
            id(r#"{"queue_name":"q","actor_name":"a","message_id":7}"#),
            None
        );
        assert_eq!(
            id(r#"{"queue_name":"q","actor_name":"a","message_id":"  "}"#),
            None
        );
        let long = format!(
            r#"{{"queue_name":"q","actor_name":"a","message_id":"{}"}}"#,
            "i".repeat(dramatiq::MAX_ID + 1)
        );
        assert_eq!(id(&long), None);
        for junk in [
            "",
            "[]",
            "null",
            "{",
            "{\"queue_name\":",
            "\u{0}\u{ff}",
            "{{{{",
        ] {
            assert_eq!(id(junk), None, "{junk:?}");
        }
        assert_eq!(dramatiq_message_id(&[0xff, b'{', 0xfe]), None);
    }

    #[test]
    fn java_traces() {
        let trace = "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: Listener failed\n\tat x.y(Z.java:1)\nCaused by: java.lang.IllegalStateException: wrapped\n\tat a\nCaused by: com.acme.OutOfStockException: SKU A-0\n\t... 12 more";
        let (top, root) = java_trace_types(trace);
        assert_eq!(
            top.map(|t| t.0).as_deref(),
            Some("org.springframework.amqp.rabbit.support.ListenerExecutionFailedException")
        );
        assert_eq!(
            root,
            Some((
                "com.acme.OutOfStockException".to_string(),
                Some("SKU A-0".to_string())
            ))
        );
    }

    #[test]
    fn type_prefix_is_careful() {
        assert!(qualified_type_prefix("Order 12: bad").is_none());
        assert!(qualified_type_prefix("Error: bad").is_none());
        assert!(qualified_type_prefix("see http://x: y").is_none());
        assert_eq!(
            qualified_type_prefix("java.lang.IllegalStateException: no"),
            Some(("java.lang.IllegalStateException".into(), "no".into()))
        );
    }

    #[test]
    fn times() {
        let want: Timestamp = "2025-09-28T06:50:15Z"
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        for s in [
            "2025-09-28T06:50:15Z",
            "2025-09-28T06:50:15.0000000Z",
            "2025-09-28T06:50:15",
            "2025-09-28 06:50:15:000000 Z",
            "2025-09-28T08:50:15+02:00",
            "1759042215",
        ] {
            assert_eq!(parse_time(&HeaderValue::string(s)), Some(want), "{s}");
        }
        assert_eq!(parse_time(&HeaderValue::I64(1_759_042_215_000)), Some(want));
        assert_eq!(
            parse_time(&HeaderValue::Timestamp(1_759_042_215)),
            Some(want)
        );
        assert_eq!(parse_time(&HeaderValue::string("yesterday")), None);
        assert_eq!(parse_time(&HeaderValue::I64(i64::MAX)), None);
    }

    #[test]
    fn addresses_and_names() {
        assert_eq!(
            last_path_segment("rabbitmq://rabbitmq/shipping-label").as_deref(),
            Some("shipping-label")
        );
        assert_eq!(
            last_path_segment("rabbitmq://host/vh/shipping-label?bind=true").as_deref(),
            Some("shipping-label")
        );
        assert_eq!(last_path_segment("rabbitmq://host"), None);
        assert_eq!(
            short_type("Shop.Shipping.CarrierUnavailableException"),
            "CarrierUnavailableException"
        );
        assert_eq!(
            short_type("Shop.Messages.PlaceOrder, Shop.Messages"),
            "PlaceOrder"
        );
        assert_eq!(short_type("Shop.Contracts:Foo"), "Foo");
        assert_eq!(short_type(""), "?");
        assert_eq!(
            spring_binder_queue("orders.group.dlq").as_deref(),
            Some("orders.group")
        );
        assert_eq!(spring_binder_queue("orders.dlq"), None);
        assert_eq!(
            find_exception(
                "2 unhandled exceptions: 2025-01-01 10:00:00 +01:00: System.ApplicationException: boom\n   at X"
            ),
            Some(("System.ApplicationException".into(), Some("boom".into())))
        );
    }
}
