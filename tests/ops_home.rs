//! The operations' one home (`warren::ops`), tested where the guarantees live, against real
//! brokers: rights come first (a viewer is refused before anything is read or planned), the
//! consent to create a stream is asked of the front end and a "no" creates nothing, the audit's
//! start is on record before the first message moves, and the finish records what happened,
//! with the targets the run reached. One test per binary: the store is found through
//! `WARREN_STORE`, set once here.

use crate::common;
use crate::replay_util;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use replay_util::{Home, dead_letter, simple};
use warren::broker::audit::Consent;
use warren::broker::session::{ReplaySpec, Session};
use warren::domain::features::QueueType;
use warren::domain::selection::Selection;
use warren::ops::{self, Front, Plan, Stop};
use warren::store::Store;

/// A front end that answers yes to the go-ahead, no to every creation, and writes down what it
/// was shown and asked.
#[derive(Default)]
struct Recording {
    plans: Vec<&'static str>,
    asked: Vec<String>,
    said: Vec<String>,
    started: Vec<String>,
}

impl Front for Recording {
    fn plan(&mut self, plan: Plan<'_>) {
        self.plans.push(match plan {
            Plan::Replay { .. } => "replay",
            Plan::Archive(_) => "archive",
            Plan::Restore(_) => "restore",
        });
    }
    fn go_ahead(
        &mut self,
        count: u64,
        kind: warren::domain::run::RunKind,
        _typed: bool,
    ) -> Result<bool, String> {
        self.asked.push(format!("{} {count}", kind.verb()));
        Ok(true)
    }
    fn audit_consent(&mut self, _configured: Option<bool>) -> Consent<'_> {
        self.asked.push("audit stream".into());
        Consent::Refuse
    }
    fn create_archive(&mut self, _what: &str) -> Result<bool, String> {
        self.asked.push("archive stream".into());
        Ok(false)
    }
    fn read_again(&mut self, _queue: &str, _cost: &str) -> Result<bool, String> {
        Ok(false)
    }
    fn say(&mut self, text: &str) {
        self.said.push(text.to_string());
    }
    fn started(&mut self, run_id: &str, _on_broker: bool) {
        self.started.push(run_id.to_string());
    }
}

async fn session(vh: &TestVhost, home: &Home, user: Option<&str>) -> Session {
    common::session_as(vh, home.dir.join("config.toml"), user).await
}

async fn viewer(vh: &TestVhost) -> String {
    common::make_user(vh, "monitoring", "^$", "^$").await
}

fn spec(queue: &str) -> ReplaySpec {
    ReplaySpec::all_of(queue, 1000)
}

fn replay_request(queue: &str) -> ops::replay::ReplayRequest {
    ops::replay::ReplayRequest {
        spec: spec(queue),
        dry_run: false,
        look_first: false,
        unaudited: None,
        filter: None,
        group: None,
        canary: None,
        edit: None,
    }
}

fn archive_request(queue: &str, way: ops::archive::Way) -> ops::archive::ArchiveRequest {
    ops::archive::ArchiveRequest {
        spec: spec(queue),
        way,
        dry_run: false,
        filter: None,
        group: None,
    }
}

fn restore_request() -> ops::restore::RestoreRequest {
    ops::restore::RestoreRequest {
        archive: ops::restore::ArchiveOf::Configured { local: true },
        selection: Selection::All,
        from: None,
        limit: None,
        window: None,
        again: false,
        trust_unsigned: false,
        replay: None,
        dry_run: false,
        filter: None,
        group: None,
    }
}

/// `orders.dlq` with four broker deaths from `orders` (ids h-0 … h-3).
async fn setup(vh: &TestVhost) {
    let conn = h::connect(vh).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "orders.dlq", QueueType::Classic, Default::default()).await;
    let msgs: Vec<_> = (0..4).map(|i| simple("h", i, &[])).collect();
    dead_letter(&conn, "orders", "orders.dlq", &msgs).await;
    let _ = conn.close(200, "ok".into()).await;
}

async fn depths(vh: &TestVhost) -> (u64, u64) {
    let conn = h::connect(vh).await;
    let d = (
        amqp_depth(&conn, "orders.dlq").await,
        amqp_depth(&conn, "orders").await,
    );
    let _ = conn.close(200, "ok".into()).await;
    d
}

/// Rights first: a viewer's every operation is refused before the front end is shown a plan or
/// asked anything, and nothing is on the record.
async fn rights_come_first(vh: &TestVhost, home: &Home) {
    let user = viewer(vh).await;
    let s = session(vh, home, Some(&user)).await;
    let mut f = Recording::default();
    let refusals = [
        ops::replay::prepare(&s, replay_request("orders.dlq"), &mut f)
            .await
            .err(),
        ops::archive::prepare(
            &s,
            archive_request("orders.dlq", ops::archive::Way::Discard { snapshot: None }),
            &mut f,
        )
        .await
        .err(),
        ops::archive::prepare(
            &s,
            archive_request(
                "orders.dlq",
                ops::archive::Way::Archive {
                    local: true,
                    create: false,
                    reason: String::new(),
                },
            ),
            &mut f,
        )
        .await
        .err(),
        ops::restore::prepare(&s, restore_request(), &mut f)
            .await
            .err(),
        ops::protect::admit(&s).await.err(),
    ];
    for r in refusals {
        match r {
            Some(Stop::Refused(
                r @ warren::ops::Refusal::ReadOnly {
                    why: warren::domain::rights::ReadOnly::Broker(_),
                    ..
                },
            )) => {
                let why = r.to_string();
                assert!(why.starts_with("read-only:"), "{why}");
                assert!(why.contains("may not publish"), "{why}");
            }
            other => panic!("{}: not refused: {other:?}", vh.broker.label),
        }
    }
    assert!(
        f.plans.is_empty() && f.asked.is_empty(),
        "{:?} {:?}",
        f.plans,
        f.asked
    );
    common::drop_user(vh, &user).await;
}

#[tokio::test]
async fn each_operation_keeps_its_guarantees_at_its_home() {
    let home = Home::new("ops-home");
    // SAFETY: set once, before any thread of this test binary reads the environment.
    unsafe { std::env::set_var("WARREN_STORE", home.store()) };
    for b in TestBroker::all() {
        let vh = TestVhost::new(&b, "ops-home").await;
        setup(&vh).await;
        rights_come_first(&vh, &home).await;
        assert_eq!(
            depths(&vh).await,
            (4, 0),
            "{}: the viewer moved nothing",
            b.label
        );

        let s = session(&vh, &home, None).await;
        // Consent: the archive stream does not exist; the front end says no: nothing is
        // created, nothing moves.
        let mut f = Recording::default();
        let no = ops::archive::prepare(
            &s,
            archive_request(
                "orders.dlq",
                ops::archive::Way::Archive {
                    local: false,
                    create: false,
                    reason: String::new(),
                },
            ),
            &mut f,
        )
        .await;
        assert!(
            matches!(no, Err(Stop::Refused(ref w)) if w.to_string().contains("not created")),
            "{}",
            b.label
        );
        assert!(
            f.asked.contains(&"archive stream".to_string()),
            "{:?}",
            f.asked
        );
        assert_eq!(
            s.handle.queue_exists("warren.archive").await.ok(),
            Some(false),
            "{}: no stream without consent",
            b.label
        );

        // The audit's start is on record before the first message moves; the finish says
        // what happened, with the target it reached.
        let mut f = Recording::default();
        let mut ready = ops::replay::prepare(&s, replay_request("orders.dlq"), &mut f)
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", b.label));
        assert_eq!(f.started.len(), 1, "{}", b.label);
        assert!(
            f.asked.contains(&"audit stream".to_string()),
            "{:?}",
            f.asked
        );
        let st = Store::open(&home.store()).expect("store");
        let before = st.list_audit(1).expect("audit");
        assert_eq!(before[0].run_id.as_deref(), Some(f.started[0].as_str()));
        assert_eq!(
            before[0].outcome.to_string(),
            "interrupted",
            "{}: started, not finished",
            b.label
        );
        assert_eq!(depths(&vh).await, (4, 0), "{}: nothing moved yet", b.label);
        let (_tx, cancel) = tokio::sync::watch::channel(false);
        let result = ready.run(cancel, |_| {}).await;
        let notes = ready.finish(&result).await;
        let sum = result.expect("the run");
        assert_eq!(sum.progress.moved, 4, "{}: {notes:?}", b.label);
        let after = st.list_audit(1).expect("audit");
        assert_eq!(after[0].outcome.to_string(), "completed", "{}", b.label);
        assert_eq!(after[0].moved, Some(4));
        assert_eq!(after[0].message_ids.len(), 4);
        assert!(
            after[0].targets.contains(&"orders".to_string()) || !after[0].targets.is_empty(),
            "{:?}",
            after[0].targets
        );
        assert_eq!(depths(&vh).await, (0, 4), "{}", b.label);
        the_other_ways_out_keep_theirs(&vh, &s, &st).await;
        vh.cleanup().await;
    }
}

/// The record's newest run: its operation and outcome.
fn newest(st: &Store) -> (String, String, Option<u64>) {
    let r = st.list_audit(1).expect("audit").remove(0);
    (
        r.operation.as_str().to_string(),
        r.outcome.to_string(),
        r.moved,
    )
}

/// Archive (to the local file), restore and discard: each on record before its first move,
/// finished with what happened.
async fn the_other_ways_out_keep_theirs(vh: &TestVhost, s: &Session, st: &Store) {
    let label = &vh.broker.label;
    let conn = h::connect(vh).await;
    let msgs: Vec<_> = (10..13).map(|i| simple("h", i, &[])).collect();
    dead_letter(&conn, "orders", "orders.dlq", &msgs).await;
    let _ = conn.close(200, "ok".into()).await;
    let mut f = Recording::default();
    let way = ops::archive::Way::Archive {
        local: true,
        create: false,
        reason: "home".into(),
    };
    let mut ready = ops::archive::prepare(s, archive_request("orders.dlq", way), &mut f)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e:?}"));
    assert_eq!(newest(st), ("archive".into(), "interrupted".into(), None));
    assert_eq!(
        depths(vh).await.0,
        3,
        "{label}: nothing moved before the run"
    );
    let (_tx, cancel) = tokio::sync::watch::channel(false);
    let result = ready.run(cancel.clone(), |_| {}).await;
    ready.finish(&result).await;
    assert_eq!(newest(st), ("archive".into(), "completed".into(), Some(3)));
    assert_eq!(depths(vh).await.0, 0, "{label}");

    let mut ready = ops::restore::prepare(s, restore_request(), &mut f)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e:?}"));
    assert_eq!(newest(st), ("restore".into(), "interrupted".into(), None));
    let out = ready.run(&cancel, |_, _, _| {}).await;
    ready.finish(&out).await;
    assert_eq!(newest(st), ("restore".into(), "completed".into(), Some(3)));
    assert_eq!(depths(vh).await.0, 3, "{label}: back in the DLQ");

    let way = ops::archive::Way::Discard { snapshot: None };
    let mut ready = ops::archive::prepare(s, archive_request("orders.dlq", way), &mut f)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e:?}"));
    assert_eq!(newest(st), ("discard".into(), "interrupted".into(), None));
    assert_eq!(
        depths(vh).await.0,
        3,
        "{label}: nothing deleted before the run"
    );
    let result = ready.run(cancel, |_| {}).await;
    ready.finish(&result).await;
    assert_eq!(newest(st), ("discard".into(), "completed".into(), Some(3)));
    assert_eq!(depths(vh).await, (0, 4), "{label}");
    assert!(f.asked.contains(&"delete 3".to_string()), "{:?}", f.asked);
}
