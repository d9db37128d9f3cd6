//! The guarantees of the operations on ports, each against the in-memory broker (`ops::fake`):
//! rights first, nothing created or kept without consent, the checks before any question, the
//! record after the change and by the broker's user. No broker.

use super::fake::{AUDIT_STREAM, Answer, FakeBroker, REDIRECT_STREAM, TestFront};
use super::redirect::{self, AddRequest, RemoveRequest};
use super::rights::ReadOnly;
use super::{Refusal, Stop, protect};
use crate::domain::redirect::Destination;

fn add(from: &str, to: &str) -> AddRequest {
    AddRequest {
        from: from.into(),
        to: to.into(),
        reason: " renamed ".into(),
    }
}

fn orders() -> FakeBroker {
    FakeBroker::with_queues(&[
        ("orders", Destination::Queue),
        ("orders.v2", Destination::Queue),
        ("orders.retry", Destination::WaitQueue),
    ])
}

#[tokio::test]
async fn read_only_refuses_a_redirect_before_anything_is_read_or_asked() {
    let mut b = orders();
    b.read_only = Some(ReadOnly::Flag);
    let mut front = TestFront::answering(Answer::Yes);
    let r = redirect::add(&b, &add("orders", "orders.v2"), &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(why @ Refusal::ReadOnly { .. }))
            if why.to_string().contains("read-only") && why.to_string().contains("no redirect changed")),
        "{r:?}"
    );
    assert_eq!(b.calls(), ["read_only"]);
    assert!(front.asked.is_empty(), "{:?}", front.asked);
    let r = redirect::remove(
        &b,
        &RemoveRequest {
            from: "orders".into(),
        },
        &mut front,
    )
    .await;
    assert!(matches!(r, Err(Stop::Refused(Refusal::ReadOnly { .. }))));
    assert!(b.streams().is_empty(), "nothing created");
}

#[tokio::test]
async fn a_refused_target_is_refused_before_any_question() {
    for (to, why) in [
        ("nowhere", "does not exist"),
        ("orders.retry", "wait queue"),
    ] {
        let b = orders();
        let mut front = TestFront::answering(Answer::Yes);
        let r = redirect::add(&b, &add("orders", to), &mut front).await;
        assert!(
            matches!(&r, Err(Stop::Refused(w @ Refusal::Redirect(_)))
                if w.to_string().contains(why) && w.to_string().contains("no redirect changed")),
            "{to}: {r:?}"
        );
        assert!(front.asked.is_empty(), "{to}: {:?}", front.asked);
        assert!(!b.calls().iter().any(|c| c.starts_with("keep")), "{to}");
    }
}

#[tokio::test]
async fn with_nobody_to_ask_the_question_goes_back_and_nothing_is_created() {
    let b = orders();
    let mut front = TestFront::answering(Answer::NobodyToAsk);
    let r = redirect::add(&b, &add("orders", "orders.v2"), &mut front).await;
    match &r {
        Err(Stop::Unanswered(q)) => {
            assert!(
                q.contains(REDIRECT_STREAM) && q.contains(AUDIT_STREAM),
                "{q}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(b.streams().is_empty());
    assert!(!b.calls().iter().any(|c| c.starts_with("keep")));
    // Once both streams exist there is nothing to ask: the change is kept without a question.
    b.streams
        .lock()
        .unwrap()
        .extend([REDIRECT_STREAM.into(), AUDIT_STREAM.into()]);
    let r = redirect::add(&b, &add("orders", "orders.v2"), &mut front).await;
    assert!(r.is_ok(), "{r:?}");
}

#[tokio::test]
async fn a_no_keeps_nothing_and_a_yes_keeps_the_change_then_records_it() {
    let b = orders();
    let mut no = TestFront::answering(Answer::No);
    let r = redirect::add(&b, &add("orders", "orders.v2"), &mut no).await;
    assert!(matches!(r, Err(Stop::Refused(_))), "{r:?}");
    assert!(b.streams().is_empty() && b.entries.lock().unwrap().is_empty());

    let mut yes = TestFront::answering(Answer::Yes);
    let changed = redirect::add(&b, &add("orders", "orders.v2"), &mut yes)
        .await
        .expect("kept");
    assert!(changed.notes.is_empty(), "{:?}", changed.notes);
    assert_eq!(changed.record.reason, "renamed", "trimmed");
    assert_eq!(changed.record.broker_user, "guest");
    let calls = b.calls();
    let keep = calls.iter().rposition(|c| c == "keep add").expect("kept");
    let record = calls
        .iter()
        .rposition(|c| c == "record add redirect")
        .expect("recorded");
    assert!(keep < record, "the record follows the change: {calls:?}");
    assert_eq!(calls.first().map(String::as_str), Some("read_only"));
    let listed = redirect::list(&b).await.expect("listed");
    assert_eq!(
        listed.redirects.get("orders").map(|r| r.to.as_str()),
        Some("orders.v2")
    );
    // Written by the one writer (`ops::record`): kind `redirect`, the change as its record.
    let audit = b.audit();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert!(audit[0].starts_with("redirect add "), "{audit:?}");
    let rec = &b.records()[0];
    assert_eq!(
        (&rec["from"], &rec["to"]),
        (&"orders".into(), &"orders.v2".into())
    );
    assert_eq!(rec["broker_user"], "guest");
}

#[tokio::test]
async fn a_context_that_allows_creating_asks_nothing_and_one_that_forbids_keeps_nothing() {
    let mut b = orders();
    b.create_streams = Some(false);
    let mut front = TestFront::answering(Answer::NobodyToAsk);
    let r = redirect::add(&b, &add("orders", "orders.v2"), &mut front).await;
    assert!(matches!(r, Err(Stop::Refused(_))), "{r:?}");
    assert!(b.streams().is_empty());
    b.create_streams = Some(true);
    let r = redirect::add(&b, &add("orders", "orders.v2"), &mut front).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(b.streams().len(), 2);
}

#[tokio::test]
async fn removing_names_what_it_removes_and_refuses_what_is_not_redirected() {
    let mut b = orders();
    b.create_streams = Some(true);
    let mut front = TestFront::default();
    let gone = RemoveRequest {
        from: "orders".into(),
    };
    let r = redirect::remove(&b, &gone, &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w @ Refusal::NotRedirected { .. })) if w.to_string().contains("is not redirected")),
        "{r:?}"
    );
    redirect::add(&b, &add("orders", "orders.v2"), &mut front)
        .await
        .expect("added");
    let removed = redirect::remove(&b, &gone, &mut front)
        .await
        .expect("removed");
    assert_eq!(removed.record.to, "orders.v2");
    assert!(redirect::list(&b).await.unwrap().redirects.is_empty());
    // A chain is refused: orders.v2 may not be redirected onwards while orders goes there.
    redirect::add(&b, &add("orders", "orders.v2"), &mut front)
        .await
        .expect("added again");
    let r = redirect::add(&b, &add("orders.v2", "orders"), &mut front).await;
    assert!(
        matches!(r, Err(Stop::Refused(Refusal::Redirect(_)))),
        "{r:?}"
    );
}

#[tokio::test]
async fn protect_is_refused_read_only_before_the_policy_and_a_look_is_not() {
    let mut b = orders();
    b.read_only = Some(ReadOnly::Context("prod".into()));
    let mut front = TestFront::answering(Answer::Yes);
    let r = protect::apply(&b, "orders.dlq", &mut front).await;
    assert!(
        matches!(&r, Err(Stop::Refused(w @ Refusal::ReadOnly { .. })) if w.to_string().contains("read-only")),
        "{r:?}"
    );
    assert_eq!(b.calls(), ["read_only"]);
    assert!(b.policies.lock().unwrap().is_empty());
    let look = protect::look(&b, "orders.dlq").await.expect("a look");
    assert_eq!(look.limit_after, None);
    assert!(b.policies.lock().unwrap().is_empty(), "a look sets nothing");
}

#[tokio::test]
async fn protect_sets_the_policy_then_records_it_as_consent_allows() {
    let b = orders();
    let mut front = TestFront::answering(Answer::No);
    let (plan, notes) = protect::apply(&b, "orders.dlq", &mut front)
        .await
        .expect("set");
    assert_eq!(plan.policy.name, "warren-protect-orders.dlq");
    // Rights, the policy, then the record by the one writer: the local store, then the
    // broker's audit stream.
    assert_eq!(
        b.calls(),
        [
            "read_only",
            "protect orders.dlq apply=true",
            "memory open",
            "memory protect orders.dlq",
            "audit open",
            "record done protect",
        ]
    );
    let kept = b.protects.lock().unwrap().clone();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].policy, "warren-protect-orders.dlq");
    assert_eq!(kept[0].broker_user, "guest");
    // The operator said no to the audit stream: the policy stands, the local record has it,
    // and the note says the broker's record is missing.
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("broker audit record was not written")
            && notes[0].contains("the local record was"),
        "{notes:?}"
    );
    assert!(b.streams().is_empty());
    assert!(b.audit().is_empty());

    // With the stream there, both halves have it.
    let b = orders();
    b.streams.lock().unwrap().insert(AUDIT_STREAM.into());
    let (_, notes) = protect::apply(&b, "orders.dlq", &mut front)
        .await
        .expect("set");
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(b.protects.lock().unwrap().len(), 1);
    assert!(b.audit()[0].starts_with("protect done "), "{:?}", b.audit());
    assert_eq!(b.records()[0]["queue"], "orders.dlq");
}
