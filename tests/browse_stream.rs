//! Browsing a stream reads from an offset and deletes nothing: two browses see every message,
//! each with its offset, and paging from an offset starts there.

use crate::common;

use common::amqp::{self as amqp_h, seqs};
use common::{TestBroker, TestVhost};
use lapin::types::FieldTable;
use warren::broker::browse::{BrowseRequest, StopReason, browse};
use warren::domain::features::QueueType;
use warren::domain::message::Properties;
use warren::domain::quorum::BrowsePolicy;
use warren::domain::value::{HeaderValue, Table};

const N: i64 = 40;

#[tokio::test]
async fn stream_browsed_twice_keeps_everything_with_offsets() {
    for broker in TestBroker::all() {
        let vhost = TestVhost::new(&broker, "browse-stream").await;
        let conn = amqp_h::connect(&vhost).await;
        let ch = amqp_h::confirm_channel(&conn).await;
        amqp_h::declare(&ch, "events.dlq", QueueType::Stream, FieldTable::default()).await;
        for i in 0..N {
            let mut h = Table::new();
            h.insert("seq", HeaderValue::I64(i));
            let body = format!("event-{i}");
            amqp_h::publish(
                &ch,
                "events.dlq",
                &Properties::default(),
                &h,
                body.as_bytes(),
            )
            .await;
        }
        let policy = BrowsePolicy::decide(
            amqp_h::broker_version(&vhost).await,
            &QueueType::Stream,
            None,
        );
        let expected: Vec<i64> = (0..N).collect();
        let mut offsets = Vec::new();
        for round in 0..2 {
            // Once bounded by silence at the end of the log, once by the management depth.
            let known_depth = if round == 0 {
                None
            } else {
                amqp_h::mgmt_depth(&vhost, "events.dlq", N as u64).await
            };
            let req = BrowseRequest {
                known_depth,
                ..BrowseRequest::new("events.dlq", QueueType::Stream, policy.clone())
            };
            let page = browse(&conn, &req).await.expect("browse stream");
            assert_eq!(
                seqs(&page.messages),
                expected,
                "round {round} on {}",
                broker.label
            );
            assert_eq!(page.stopped, StopReason::Exhausted, "round {round}");
            let offs: Vec<u64> = page
                .messages
                .iter()
                .map(|m| m.delivery.stream_offset.expect("offset reported"))
                .collect();
            assert!(offs.windows(2).all(|w| w[0] < w[1]), "{offs:?}");
            for m in &page.messages {
                assert_eq!(Some(m.position), m.delivery.stream_offset);
            }
            offsets.push(offs);
        }
        assert_eq!(offsets[0], offsets[1]);

        // Paging: ten messages from the 20th message's offset.
        let from = offsets[0][20];
        let req = BrowseRequest {
            limit: 10,
            stream_offset: Some(from),
            ..BrowseRequest::new("events.dlq", QueueType::Stream, policy.clone())
        };
        let page = browse(&conn, &req).await.expect("browse from offset");
        assert_eq!(page.stopped, StopReason::Limit);
        assert_eq!(seqs(&page.messages), (20..30).collect::<Vec<_>>());
        assert_eq!(page.messages[0].delivery.stream_offset, Some(from));
        let n = N as u64;
        assert_eq!(amqp_h::mgmt_depth(&vhost, "events.dlq", n).await, Some(n));
        vhost.cleanup().await;
    }
}
