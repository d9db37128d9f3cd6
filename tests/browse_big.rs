//! A page longer than one chunk, read from a real broker the way the TUI reads it: the worker
//! sends it in chunks as the messages arrive, each message kept in the page's spill file, and
//! `update` puts the chunks together. Every message is listed exactly once, in queue order;
//! opening one reads its body back from the file byte for byte; the file is gone once the page
//! is replaced; the list sorts by age, tries and reason.

use crate::common;
use crate::replay_util;

use std::collections::HashSet;
use std::time::Duration;

use common::amqp as amqp_h;
use common::{TestBroker, TestVhost};
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};
use lapin::{BasicProperties, Connection};
use replay_util::Home;
use warren::config::Overrides;
use warren::domain::features::QueueType;
use warren::local::spill::Letter;
use warren::tui::state::{Focus, MsgOrder};
use warren::tui::{Command, Event, Report, State, Theme, update};

/// More than two chunks of the worker's (`worker::page::CHUNK` is 1024) and a tail.
const N: u32 = 2_500;
const REASONS: [&str; 3] = ["rejected", "expired", "maxlen"];

fn body_of(i: u32) -> Vec<u8> {
    // Distinct bytes, not only text: what comes back must be these exactly.
    let mut b = format!("{{\"order\": {i}}}").into_bytes();
    b.extend((0..300u32).map(|j| (i.wrapping_mul(31).wrapping_add(j) % 256) as u8));
    b
}

/// `N` dead letters as the broker writes them: three reasons, one to four deaths, death times
/// that do not follow the queue's order.
async fn fill(conn: &Connection, queue: &str) {
    let ch = amqp_h::confirm_channel(conn).await;
    let mut pending = Vec::new();
    for i in 0..N {
        let reason = REASONS[i as usize % 3];
        let mut death = FieldTable::default();
        death.insert("count".into(), AMQPValue::LongLongInt(1 + i64::from(i % 4)));
        death.insert("reason".into(), AMQPValue::LongString(reason.into()));
        death.insert("queue".into(), AMQPValue::LongString("orders".into()));
        death.insert("exchange".into(), AMQPValue::LongString("".into()));
        death.insert(
            "routing-keys".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::LongString(
                LongString::from("orders"),
            )])),
        );
        let when = 1_764_000_000 + u64::from(i.wrapping_mul(7919) % 86_400);
        death.insert("time".into(), AMQPValue::Timestamp(when));
        let mut h = FieldTable::default();
        h.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)])),
        );
        let props = BasicProperties::default()
            .with_message_id(format!("big-{i:05}").into())
            .with_headers(h);
        let confirm = ch
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                &body_of(i),
                props,
            )
            .await
            .expect("publish");
        pending.push(confirm);
        if pending.len() >= 500 {
            for c in pending.drain(..) {
                c.await.expect("confirm");
            }
        }
    }
    for c in pending {
        c.await.expect("confirm");
    }
}

/// Reports into `update` until a page has ended (its last part came).
async fn read_page(
    st: &mut State,
    rx: &mut tokio::sync::mpsc::Receiver<Report>,
    label: &str,
    chunks: &mut usize,
) {
    loop {
        let r = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("{label}: a report within 60 s"))
            .expect("the worker is alive");
        if let Report::Error(f) = &r {
            panic!("{label}: {f}");
        }
        if matches!(r, Report::MessagesChunk { .. }) {
            *chunks += 1;
        }
        let end = matches!(r, Report::MessagesLoaded { .. });
        update(st, r);
        if end {
            return;
        }
    }
}

fn spill_of(st: &State) -> std::path::PathBuf {
    let b = st.msgs.browse.as_ref().expect("a page");
    b.rows
        .iter()
        .find_map(|r| match &r.letter {
            Letter::Spilled(s) => Some(s.spill().path().to_path_buf()),
            Letter::Held(_) => None,
        })
        .expect("a message in the spill file")
}

/// The ids shown, in order.
fn shown(st: &State) -> Vec<String> {
    st.msgs
        .visible_rows()
        .iter()
        .map(|r| r.shown_id().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_long_page_arrives_in_chunks_each_message_once_read_back_from_its_spill_file() {
    let home = Home::new("browse-big");
    // SAFETY: set before any thread of this test reads the environment.
    unsafe {
        std::env::set_var("WARREN_STORE", home.store());
        std::env::set_var(warren::local::spill::CACHE_ENV, home.dir.join("cache"));
    }
    let broker = TestBroker::default_broker();
    let label = broker.label.clone();
    let vhost = TestVhost::new(&broker, "browse-big").await;
    let conn = amqp_h::connect(&vhost).await;
    let ch = conn.create_channel().await.expect("channel");
    amqp_h::declare(&ch, "big.dlq", QueueType::Classic, FieldTable::default()).await;
    fill(&conn, "big.dlq").await;
    let (cmd_tx, mut rx, worker) = common::spawn_worker(Overrides {
        config_path: Some(home.dir.join("config.toml")),
        amqp_url: Some(vhost.amqp_url()),
        management_url: Some(vhost.broker.mgmt_url_with_creds()),
        vhost: Some(vhost.name.clone()),
        ..Default::default()
    });
    let browse = Command::Browse {
        vhost: vhost.name.clone(),
        queue: "big.dlq".into(),
        limit: 10_000,
        read_again: false,
        restart: false,
    };
    let mut st = State::new(jiff::Timestamp::now(), true, Theme::color());
    cmd_tx.send(browse.clone()).await.unwrap();
    let mut chunks = 0;
    read_page(&mut st, &mut rx, &label, &mut chunks).await;
    assert!(chunks >= 2, "{label}: {chunks} chunks");

    // Every message once, in queue order.
    let b = st.msgs.browse.as_ref().unwrap();
    assert_eq!(b.rows.len(), N as usize, "{label}: {}", b.stop);
    let ids = shown(&st);
    let want: Vec<String> = (0..N).map(|i| format!("big-{i:05}")).collect();
    assert_eq!(ids, want, "{label}");
    let keys: HashSet<&str> = b.rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys.len(), N as usize);
    let positions: Vec<u64> = b.rows.iter().map(|r| r.brief.position()).collect();
    assert_eq!(positions, (0..u64::from(N)).collect::<Vec<_>>());

    // Opened, each spilled message is the one published, body byte for byte.
    let spilled = b
        .rows
        .iter()
        .filter(|r| matches!(r.letter, Letter::Spilled(_)))
        .count();
    assert!(spilled >= 2048, "{label}: {spilled} spilled");
    for (i, r) in b.rows.iter().enumerate().step_by(97) {
        let opened = r.open(&st.settings.conventions);
        assert_eq!(opened.msg.body, body_of(i as u32), "{label}: message {i}");
        assert_eq!(
            opened.msg.properties.message_id.as_deref(),
            Some(want[i].as_str())
        );
    }
    let file = spill_of(&st);
    assert!(file.exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{label}: the file holds bodies");
    }

    // The list sorts by its columns; the same key again reverses.
    st.focus = Focus::Messages;
    let rows_of = |st: &State| {
        st.msgs
            .visible_rows()
            .into_iter()
            .cloned()
            .collect::<Vec<_>>()
    };
    update(&mut st, Event::Key(key('2')));
    assert_eq!(st.msgs.order, MsgOrder::Age);
    let by_age = rows_of(&st);
    assert!(
        by_age
            .windows(2)
            .all(|w| w[0].dead_since() <= w[1].dead_since())
    );
    update(&mut st, Event::Key(key('3')));
    let by_tries = rows_of(&st);
    assert!(
        by_tries
            .windows(2)
            .all(|w| w[0].attempts() >= w[1].attempts())
    );
    assert_eq!(by_tries[0].attempts(), 4);
    update(&mut st, Event::Key(key('3')));
    assert!(st.msgs.order_reverse);
    assert!(
        rows_of(&st)
            .windows(2)
            .all(|w| w[0].attempts() <= w[1].attempts())
    );
    update(&mut st, Event::Key(key('4')));
    let reasons: Vec<String> = rows_of(&st)
        .iter()
        .map(warren::tui::detail::headline)
        .collect();
    assert!(reasons.windows(2).all(|w| w[0] <= w[1]), "{label}");
    update(&mut st, Event::Key(key('1')));
    assert_eq!(shown(&st), want, "{label}: back to queue order");
    // The rows copied above refer to the file too.
    drop((by_age, by_tries));

    // Read again: the new page replaces the old, whose file goes with it.
    cmd_tx.send(browse).await.unwrap();
    read_page(&mut st, &mut rx, &label, &mut chunks).await;
    assert!(
        !file.exists(),
        "{label}: the replaced page's spill file is removed"
    );
    assert!(spill_of(&st).exists());
    assert_eq!(
        st.msgs.browse.as_ref().unwrap().rows.len(),
        N as usize,
        "{label}"
    );
    drop(st);
    drop(cmd_tx);
    let _ = tokio::time::timeout(Duration::from_secs(10), worker).await;
    vhost.cleanup().await;
}

fn key(c: char) -> ratatui::crossterm::event::KeyEvent {
    ratatui::crossterm::event::KeyEvent::new(
        ratatui::crossterm::event::KeyCode::Char(c),
        ratatui::crossterm::event::KeyModifiers::NONE,
    )
}
