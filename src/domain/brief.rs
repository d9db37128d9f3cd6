//! What a list of many dead letters keeps of each one's explanation: the facts the list shows,
//! the filter language matches and the failure groups gather by, and nothing else. The timeline,
//! the fault's other fields and the replay plan are explained again from the message when it is
//! opened. What many messages share (a verdict, an exception type, a queue, a fingerprint) is
//! kept once through an [`Interner`].

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use jiff::Timestamp;

use super::arrival::{self, Arrival};
use super::convention::Convention;
use super::explain::Explanation;
use super::filter::Subject;
use super::fingerprint::Fingerprint;
use super::grouping::{self, Facets};
// Lives with the grouping that reads it, so that grouping does not import this module, which
// imports grouping.
pub use super::grouping::message_type;
use super::message::DeadLetter;
use super::replay::{self, ReplayTarget};
use super::value::Table;

/// The list's and the filter's view of one explained dead letter.
#[derive(Clone, Debug, PartialEq)]
pub struct Brief {
    /// The fault's message (kept once when messages share it).
    pub exception_message: Option<Arc<str>>,
    /// What it shares with the messages that failed the same way, the verdict's frame included.
    pub common: Arc<Common>,
    /// The convention's retry counter, else the number of deaths recorded (at least 1), in 4
    /// bytes with the position below: a page of a million keeps a million briefs.
    attempts: i32,
    failed_at: Seconds,
    /// When it reached its DLQ, exactly, where its history makes that so; else the earliest it
    /// can have (`domain::arrival`).
    arrived: Seconds,
    earliest: Seconds,
    /// Its place in the queue when it was browsed, 0-based (a page is far below 4 billion).
    position: u32,
}

/// The part of a [`Brief`] that messages which failed alike have in common, kept once for all.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Common {
    /// The verdict, or, when it holds the fault's message (most framework verdicts end with
    /// it), what comes before and after the message: "X in Y after 3 retries: " and "".
    pub verdict: VerdictFrame,
    pub exception_type: Option<String>,
    /// Broker death reasons, in header order.
    pub reasons: Vec<String>,
    pub origin_queue: Option<String>,
    /// The message type: the convention's, else the `type` property.
    pub message_type: Option<String>,
    pub convention: Convention,
    pub fingerprint: Fingerprint,
    /// The broker's reason for the newest death ([`grouping::death_reason`]).
    pub death_reason: Option<String>,
    /// Where a replay would publish it ([`replay::default_target`]), for grouping by endpoint.
    pub endpoint: Option<ReplayTarget>,
}

/// A verdict as [`Common`] keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum VerdictFrame {
    Whole(String),
    AroundMessage { before: String, after: String },
}

impl Brief {
    pub fn new(msg: &DeadLetter, exp: &Explanation, strings: &mut Interner) -> Brief {
        let fault = exp.fault.as_ref();
        let message = fault.and_then(|f| f.message.as_deref());
        let verdict = match message.and_then(|m| Some((m, exp.verdict.find(m)?))) {
            Some((m, at)) if !m.is_empty() => VerdictFrame::AroundMessage {
                before: exp.verdict[..at].to_string(),
                after: exp.verdict[at + m.len()..].to_string(),
            },
            _ => VerdictFrame::Whole(exp.verdict.clone()),
        };
        let common = Common {
            verdict,
            exception_type: fault.and_then(|f| f.exception_type.clone()),
            reasons: exp
                .deaths
                .entries
                .iter()
                .filter_map(|d| d.reason.as_ref())
                .map(|r| r.as_str().to_string())
                .collect(),
            origin_queue: exp.source.queue.clone(),
            message_type: message_type(msg, exp).map(str::to_string),
            convention: exp.convention,
            fingerprint: exp.fingerprint.clone(),
            death_reason: grouping::death_reason(exp).map(str::to_string),
            endpoint: replay::default_target(msg, exp),
        };
        Brief {
            exception_message: message.map(|m| strings.str(m)),
            common: strings.common(common),
            attempts: attempts(exp).clamp(i32::MIN.into(), i32::MAX.into()) as i32,
            failed_at: Seconds::new(failed_at(exp)),
            arrived: Seconds::new(arrival::exact_death(&exp.deaths)),
            earliest: Seconds::new(arrival::newest_death(&exp.deaths).or(exp.failed_at)),
            position: u32::try_from(msg.position).unwrap_or(u32::MAX),
        }
    }

    /// The convention's retry counter, else the number of deaths recorded (at least 1).
    pub fn attempts(&self) -> i64 {
        i64::from(self.attempts)
    }

    /// Its place in the queue when it was browsed, 0-based.
    pub fn position(&self) -> u64 {
        u64::from(self.position)
    }

    /// The verdict, as the explanation gave it.
    pub fn verdict(&self) -> Cow<'_, str> {
        match (&self.common.verdict, self.exception_message.as_deref()) {
            (VerdictFrame::Whole(v), _) => Cow::Borrowed(v),
            (VerdictFrame::AroundMessage { before, after }, m) => {
                Cow::Owned(format!("{before}{}{after}", m.unwrap_or_default()))
            }
        }
    }

    pub fn exception_type(&self) -> Option<&str> {
        self.common.exception_type.as_deref()
    }

    pub fn fingerprint(&self) -> &Fingerprint {
        &self.common.fingerprint
    }

    /// What grouping reads, as [`Facets::of`] would read it from the message.
    pub fn facets(&self) -> Facets<'_> {
        let c = &*self.common;
        Facets {
            exception_type: c.exception_type.as_deref(),
            message_type: c.message_type.as_deref(),
            origin: c.origin_queue.as_deref(),
            death_reason: c.death_reason.as_deref(),
            endpoint: c.endpoint.as_ref().map(Cow::Borrowed),
            convention: c.convention,
            fingerprint: &c.fingerprint,
        }
    }

    /// When it reached its DLQ, by the one rule, given when Warren first saw it.
    pub fn arrival(&self, first_seen: Option<Timestamp>) -> Arrival {
        Arrival::from_parts(self.arrived.get(), self.earliest.get(), first_seen)
    }

    /// When it first failed: the earliest death, else the framework's failure time (whole
    /// seconds).
    pub fn failed_at(&self) -> Option<Timestamp> {
        self.failed_at.get()
    }

    /// The filter language's view, with the message's `headers` (decoded by the caller when
    /// the filter names them: see `Filter::header_names`) and browsed `body`.
    pub fn subject<'a>(
        &'a self,
        headers: &'a Table,
        body: &'a [u8],
        age_secs: Option<u64>,
    ) -> Subject<'a> {
        let c = &*self.common;
        Subject {
            verdict: self.verdict(),
            exception_type: c.exception_type.as_deref(),
            exception_message: self.exception_message.as_deref(),
            reasons: c.reasons.iter().map(String::as_str).collect(),
            origin_queue: c.origin_queue.as_deref(),
            message_type: c.message_type.as_deref(),
            convention: c.convention.as_str(),
            headers,
            body,
            age_secs,
        }
    }
}

/// A time to the second in 8 bytes (an `Option<Timestamp>` takes 24), for lists of many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seconds(i64);

impl Seconds {
    const NONE: i64 = i64::MIN;

    pub fn new(t: Option<Timestamp>) -> Seconds {
        Seconds(t.map_or(Self::NONE, |t| t.as_second()))
    }

    pub fn get(self) -> Option<Timestamp> {
        (self.0 != Self::NONE)
            .then(|| Timestamp::from_second(self.0).ok())
            .flatten()
    }
}

/// Attempts: the convention's retry counter, else the number of deaths recorded (at least 1).
pub fn attempts(exp: &Explanation) -> i64 {
    exp.retries.unwrap_or_else(|| {
        exp.deaths
            .entries
            .iter()
            .map(|d| d.times())
            .sum::<i64>()
            .max(1)
    })
}

/// When it first failed: the earliest death, else the framework's failure time.
pub fn failed_at(exp: &Explanation) -> Option<Timestamp> {
    exp.deaths
        .entries
        .iter()
        .filter_map(|d| d.time)
        .min()
        .or(exp.failed_at)
}

/// Hands out one shared copy of each distinct string (and [`Common`]) it is given.
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    commons: HashSet<Arc<Common>>,
}

impl Interner {
    pub fn str(&mut self, s: &str) -> Arc<str> {
        if let Some(kept) = self.strings.get(s) {
            return kept.clone();
        }
        let kept: Arc<str> = Arc::from(s);
        self.strings.insert(kept.clone());
        kept
    }

    pub fn common(&mut self, c: Common) -> Arc<Common> {
        if let Some(kept) = self.commons.get(&c) {
            return kept.clone();
        }
        let kept = Arc::new(c);
        self.commons.insert(kept.clone());
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::explain::explain;
    use crate::domain::selection;
    use crate::domain::value::HeaderValue;

    fn broker_death(id: &str) -> DeadLetter {
        let mut death = Table::new();
        death.insert("count", HeaderValue::I64(3));
        death.insert("reason", HeaderValue::string("rejected"));
        death.insert("queue", HeaderValue::string("orders.process"));
        death.insert("time", HeaderValue::Timestamp(1_759_042_215));
        let mut headers = Table::new();
        headers.insert(
            "x-death",
            HeaderValue::Array(vec![HeaderValue::Table(death)]),
        );
        let mut dl = DeadLetter {
            queue: "orders.dlq".into(),
            position: 4,
            headers,
            body: b"{}".to_vec(),
            ..DeadLetter::default()
        };
        dl.properties.message_id = Some(id.into());
        dl.properties.kind = Some("OrderPlaced".into());
        dl
    }

    #[test]
    fn the_brief_gives_the_filter_what_the_explanation_does() {
        let dl = broker_death("a");
        let exp = explain(&dl);
        let brief = Brief::new(&dl, &exp, &mut Interner::default());
        let full = selection::subject(&dl, &exp, Some(5));
        let short = brief.subject(&dl.headers, &dl.body, Some(5));
        assert_eq!(format!("{full:?}"), format!("{short:?}"));
        assert_eq!(brief.attempts(), 3);
        assert_eq!(
            brief.failed_at(),
            Timestamp::from_second(1_759_042_215).ok()
        );
        assert_eq!(brief.verdict(), exp.verdict);
        assert_eq!(brief.position(), 4);
    }

    #[test]
    fn a_verdict_around_the_fault_message_is_shared_and_given_back_whole() {
        let fault = |n: u32| {
            let mut dl = DeadLetter::default();
            dl.headers.insert("MT-Reason", HeaderValue::string("fault"));
            dl.headers.insert(
                "MT-Fault-ExceptionType",
                HeaderValue::string("Shop.CarrierUnavailableException"),
            );
            dl.headers.insert(
                "MT-Fault-Message",
                HeaderValue::string(format!("Carrier down (request {n})")),
            );
            dl
        };
        let mut strings = Interner::default();
        let (a, b) = (fault(1), fault(2));
        let (ea, eb) = (explain(&a), explain(&b));
        let (ba, bb) = (
            Brief::new(&a, &ea, &mut strings),
            Brief::new(&b, &eb, &mut strings),
        );
        assert!(
            ea.verdict.contains("Carrier down (request 1)"),
            "{}",
            ea.verdict
        );
        assert_eq!(ba.verdict(), ea.verdict);
        assert_eq!(bb.verdict(), eb.verdict);
        assert!(Arc::ptr_eq(&ba.common, &bb.common));
    }

    #[test]
    fn messages_that_failed_alike_share_their_strings() {
        let mut strings = Interner::default();
        let briefs: Vec<Brief> = ["a", "b"]
            .iter()
            .map(|id| {
                let dl = broker_death(id);
                Brief::new(&dl, &explain(&dl), &mut strings)
            })
            .collect();
        assert!(Arc::ptr_eq(&briefs[0].common, &briefs[1].common));
    }
}
