//! An in-memory broker behind the ports (`ops::ports`) and a front end that writes down what it
//! was asked: every guarantee of an operation on ports is tested here, with no broker. Each
//! call to the broker is logged in order, so "rights first" and "nothing kept without consent"
//! are read off the log.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use super::ports::{Author, ProtectPort, RedirectPort, Rights};
use super::rights::ReadOnly;
use super::{Front, Plan, Stop};
use crate::broker::audit::Consent;
use crate::broker::redirects::Current;
use crate::domain::discovery::{JsonMap, Policy};
use crate::domain::protect::ProtectPlan;
use crate::domain::redirect::{self, Destination, Entry, RedirectRecord};

pub(crate) const REDIRECT_STREAM: &str = "warren.redirects";
pub(crate) const AUDIT_STREAM: &str = "warren.audit";

/// The broker: its queues, streams, redirect and audit entries, policies, and the calls made.
#[derive(Default)]
pub(crate) struct FakeBroker {
    pub(crate) read_only: Option<ReadOnly>,
    pub(crate) create_streams: Option<bool>,
    pub(crate) queues: HashMap<String, Destination>,
    pub(crate) streams: Mutex<HashSet<String>>,
    pub(crate) entries: Mutex<Vec<Entry>>,
    pub(crate) audit: Mutex<Vec<String>>,
    pub(crate) policies: Mutex<Vec<String>>,
    pub(crate) calls: Mutex<Vec<String>>,
}

impl FakeBroker {
    pub(crate) fn with_queues(names: &[(&str, Destination)]) -> FakeBroker {
        FakeBroker {
            queues: names
                .iter()
                .map(|(n, d)| ((*n).to_string(), d.clone()))
                .collect(),
            ..Default::default()
        }
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub(crate) fn streams(&self) -> HashSet<String> {
        self.streams.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn call(&self, what: &str) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(what.to_string());
        }
    }

    /// Opens `name`, creating it as `consent` allows (as `AuditStream::open_kept` does).
    fn open_stream(&self, name: &str, consent: Consent<'_>) -> Result<(), String> {
        let mut streams = self.streams.lock().map_err(|e| e.to_string())?;
        if streams.contains(name) {
            return Ok(());
        }
        let yes = match consent {
            Consent::Create => true,
            Consent::Ask(ask) => ask(&format!("create {name}")),
            Consent::Refuse | Consent::Declined => false,
        };
        if !yes {
            return Err(format!(
                "{name} does not exist and was not allowed to be created"
            ));
        }
        streams.insert(name.to_string());
        Ok(())
    }

    fn missing(&self, name: &str) -> bool {
        !self.streams().contains(name)
    }
}

impl Rights for FakeBroker {
    async fn read_only(&self) -> Option<ReadOnly> {
        self.call("read_only");
        self.read_only.clone()
    }
}

impl RedirectPort for FakeBroker {
    fn author(&self) -> Author {
        Author {
            broker_user: "guest".into(),
            context: "c".into(),
            vhost: "v".into(),
            create_streams: self.create_streams,
        }
    }

    async fn redirects(&self) -> Result<Current, String> {
        self.call("redirects");
        let entries = self.entries.lock().map_err(|e| e.to_string())?.clone();
        let (redirects, ignored) = redirect::fold(entries);
        Ok(Current { redirects, ignored })
    }

    async fn destination(&self, queue: &str) -> Result<Destination, Stop> {
        self.call(&format!("destination {queue}"));
        Ok(self
            .queues
            .get(queue)
            .cloned()
            .unwrap_or(Destination::Missing))
    }

    async fn streams_to_create(&self) -> Vec<String> {
        self.call("streams_to_create");
        [REDIRECT_STREAM, AUDIT_STREAM]
            .into_iter()
            .filter(|s| self.missing(s))
            .map(|s| format!("Warren will create the stream '{s}'"))
            .collect()
    }

    async fn keep(
        &self,
        event: &'static str,
        rec: &RedirectRecord,
        consent: Consent<'_>,
    ) -> Result<(), String> {
        self.call(&format!("keep {event}"));
        self.open_stream(REDIRECT_STREAM, consent)?;
        let entry = Entry {
            event: event.to_string(),
            record: rec.clone(),
            vouched: Some(rec.broker_user.clone()),
        };
        self.entries.lock().map_err(|e| e.to_string())?.push(entry);
        Ok(())
    }

    async fn record(
        &self,
        event: &'static str,
        rec: &RedirectRecord,
        consent: Consent<'_>,
    ) -> Vec<String> {
        self.call(&format!("record {event}"));
        match self.open_stream(AUDIT_STREAM, consent) {
            Ok(()) => {
                if let Ok(mut a) = self.audit.lock() {
                    a.push(format!("redirect {event} {} → {}", rec.from, rec.to));
                }
                Vec::new()
            }
            Err(why) => vec![format!("the broker audit record was not written ({why})")],
        }
    }
}

impl ProtectPort for FakeBroker {
    fn create_streams(&self) -> Option<bool> {
        self.create_streams
    }

    async fn protect(&self, queue: &str, apply: bool) -> Result<ProtectPlan, Stop> {
        self.call(&format!("protect {queue} apply={apply}"));
        let policy = Policy {
            name: format!("warren-protect-{queue}"),
            pattern: format!("^{queue}$"),
            apply_to: "queues".into(),
            priority: 1,
            definition: JsonMap::default(),
        };
        if apply && let Ok(mut p) = self.policies.lock() {
            p.push(policy.name.clone());
        }
        Ok(ProtectPlan {
            policy,
            replaces: None,
            limit_before: Some(20),
            limit_after: None,
        })
    }

    async fn record_protect(
        &self,
        queue: &str,
        _plan: &ProtectPlan,
        consent: Consent<'_>,
    ) -> Vec<String> {
        self.call(&format!("record protect {queue}"));
        match self.open_stream(AUDIT_STREAM, consent) {
            Ok(()) => {
                if let Ok(mut a) = self.audit.lock() {
                    a.push(format!("protect {queue}"));
                }
                Vec::new()
            }
            Err(why) => vec![format!("the broker audit record was not written ({why})")],
        }
    }
}

/// How the test front end answers a question about creating a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Nobody can be asked (the TUI's worker before its modal asked, a command without a
    /// terminal).
    #[default]
    NobodyToAsk,
    Yes,
    No,
}

/// A front end that answers as told and writes down every question.
#[derive(Default)]
pub(crate) struct TestFront {
    pub(crate) answer: Answer,
    pub(crate) asked: Vec<String>,
    ask: Option<Box<Asker>>,
}

/// How the front end answers a consent question asked on its terminal.
type Asker = dyn FnMut(&str) -> bool + Send;

impl TestFront {
    pub(crate) fn answering(answer: Answer) -> TestFront {
        TestFront {
            answer,
            ..Default::default()
        }
    }
}

impl Front for TestFront {
    fn plan(&mut self, _plan: Plan<'_>) {
        self.asked.push("plan".into());
    }
    fn go_ahead(&mut self, count: u64, verb: &str, typed: bool) -> Result<bool, String> {
        self.asked
            .push(format!("go ahead: {verb} {count} typed={typed}"));
        Ok(self.answer == Answer::Yes)
    }
    fn audit_consent(&mut self, configured: Option<bool>) -> Consent<'_> {
        self.asked.push("stream".into());
        match (configured, self.answer) {
            (Some(true), _) => Consent::Create,
            (Some(false), _) | (None, Answer::NobodyToAsk) => Consent::Refuse,
            (None, answer) => {
                let yes = answer == Answer::Yes;
                Consent::Ask(self.ask.insert(Box::new(move |_| yes)).as_mut())
            }
        }
    }
    fn read_again(&mut self, queue: &str, _cost: &str) -> Result<bool, String> {
        self.asked.push(format!("read again {queue}"));
        Ok(self.answer == Answer::Yes)
    }
    fn create_archive(&mut self, what: &str) -> Result<bool, String> {
        self.asked.push(format!("create archive {what}"));
        Ok(self.answer == Answer::Yes)
    }
    fn say(&mut self, _text: &str) {}
    fn started(&mut self, _run_id: &str, _on_broker: bool) {}
}
