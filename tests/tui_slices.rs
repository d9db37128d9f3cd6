//! A big page's view is made between key presses (`tui::refresh`): a filter that reads every
//! body, a new grouping, and the three orders are done a slice per `Event::Idle`, the list
//! keeping the view it had until the new one is whole. What comes out is what the view made at
//! once gives, and the keys pressed meanwhile act on what is on screen. The last test runs the
//! real loop in tmux, which must give those slices their idle moments.

use crate::tui_fixtures::*;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use warren::domain::grouping::GroupBy;
use warren::domain::selection::Selection;
use warren::tui::state::{MsgOrder, Overlay, Row};
use warren::tui::{Event, State, update};

/// Over the size a page is viewed at once (`tui::refresh::SLICED_ABOVE`, 10,000).
const N: u64 = 12_000;

/// Ladders (three tries), every seventh one expired in the wait queue (one try), each body
/// holding its order id.
fn page() -> Vec<warren::domain::message::DeadLetter> {
    (0..N)
        .map(|n| {
            if n % 7 == 0 {
                broker_expired(n)
            } else {
                broker_ladder(n)
            }
        })
        .collect()
}

fn idle_until_done(st: &mut State) -> usize {
    let mut steps = 0;
    while st.has_idle_work() {
        update(st, Event::Idle);
        steps += 1;
        assert!(steps < 10_000, "the idle work ends");
    }
    steps
}

fn ids(st: &State) -> Vec<String> {
    st.msgs
        .visible_rows()
        .iter()
        .map(|r| r.shown_id().unwrap_or_default().to_string())
        .collect()
}

fn status(st: &State) -> String {
    let mut term = Terminal::new(TestBackend::new(160, 40)).unwrap();
    term.draw(|f| warren::tui::view(st, f)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn filter(st: &mut State, text: &str) {
    update(st, ch('/'));
    update(st, ctrl('u'));
    for c in text.chars() {
        update(st, ch(c));
    }
    update(st, Event::FilterSettle);
    update(st, key(KeyCode::Enter));
}

#[test]
fn a_filter_on_every_body_is_made_in_slices_while_the_keys_act_on_the_list_shown() {
    let mut st = browsed(false, "orders.dlq", page());
    // The page is shown whole at once; its orders are made ahead in idle moments.
    assert_eq!(st.msgs.visible_rows().len(), N as usize);
    // Each order: its rows' keys in slices of at most 4,096, then the sort.
    assert!(idle_until_done(&mut st) >= 3 * 4);

    // A body filter: orders 1042 and 11042 (messages 42, expired, and 10042, a ladder).
    filter(&mut st, "body:1042,");
    assert!(st.has_idle_work());
    assert_eq!(
        st.msgs.visible_rows().len(),
        N as usize,
        "the old view stays"
    );
    update(&mut st, Event::Idle);
    let shown = status(&st);
    assert!(shown.contains("updating the list…"), "{shown}");
    // Keys meanwhile act on the list shown: moving, and an order, which the new view keeps.
    update(&mut st, ch('j'));
    assert_eq!(st.msgs.cursor, 1);
    update(&mut st, ch('3'));
    assert_eq!(st.msgs.order, MsgOrder::Tries);
    assert!(
        st.has_idle_work(),
        "an order does not end the view being made"
    );
    let steps = idle_until_done(&mut st);
    assert!(steps >= 2, "{steps} slices");
    // Most tries first: the ladder, then the one that expired once.
    assert_eq!(ids(&st), vec!["order-11042", "order-exp-42"]);
    // The cursor stayed on its message through the order (the first ladder, now first).
    assert_eq!(st.msgs.cursor, 0);
    assert!(!status(&st).contains("updating the list"));
    let b = st.msgs.browse.as_ref().unwrap();
    let grouped: usize = b.groups.iter().map(|g| g.rows.len()).sum();
    assert_eq!(grouped, 2, "the groups are of the rows that pass");
}

#[test]
fn the_view_made_in_slices_is_the_view_made_at_once() {
    let mut sliced = browsed(false, "orders.dlq", page());
    let mut whole = browsed(false, "orders.dlq", page());
    for st in [&mut sliced, &mut whole] {
        update(st, ch('3'));
        // Bodies with a 7 in their order id: both kinds of failure, not every message.
        filter(st, "body:7");
        // By origin (the third grouping after the fingerprint), in the group view.
        update(st, ch('f'));
        for _ in 0..3 {
            update(st, ch('b'));
        }
    }
    assert_eq!(sliced.msgs.group_by, GroupBy::Origin);
    idle_until_done(&mut sliced);
    whole.refresh_view_now();
    let (a, b) = (
        sliced.msgs.browse.as_ref().unwrap(),
        whole.msgs.browse.as_ref().unwrap(),
    );
    assert_eq!(a.visible, b.visible);
    assert!(!a.visible.is_empty() && a.visible.len() < N as usize);
    assert_eq!(a.groups, b.groups);
    assert!(a.groups.len() >= 2, "{:?}", a.groups.len());
    // Each group: its rows in queue order, dated by their earliest and latest.
    for g in &a.groups {
        assert!(g.rows.windows(2).all(|w| w[0] < w[1]));
        let times: Vec<_> = g
            .rows
            .iter()
            .filter_map(|&i| a.rows[i].dead_since())
            .collect();
        assert_eq!(g.first, times.iter().min().copied());
        assert_eq!(g.last, times.iter().max().copied());
    }
}

#[test]
fn a_new_page_ends_the_view_being_made_and_is_shown_filtered_at_once() {
    let mut st = browsed(false, "orders.dlq", page());
    filter(&mut st, "-reason:rejected");
    update(&mut st, Event::Idle);
    assert!(st.msgs.browse.as_ref().unwrap().updating().is_some());
    update(&mut st, messages_loaded("orders.dlq", page()));
    let b = st.msgs.browse.as_ref().unwrap();
    assert_eq!(b.updating(), None);
    let expired = N.div_ceil(7) as usize;
    assert_eq!(
        b.visible.len(),
        expired,
        "the filter in force, applied whole"
    );
}

#[test]
fn the_orders_made_ahead_are_the_orders_asked_for() {
    let mut ahead = browsed(false, "orders.dlq", page());
    idle_until_done(&mut ahead);
    let mut asked = browsed(false, "orders.dlq", page());
    // Pressed while the first order is being made: its keys half known (2 steps), all known
    // (3), packed (4), sorted (5), made (6); made whole from what was made.
    let mut midway: Vec<State> = [2, 3, 4, 5, 6]
        .into_iter()
        .map(|steps| {
            let mut st = browsed(false, "orders.dlq", page());
            for _ in 0..steps {
                update(&mut st, Event::Idle);
            }
            st
        })
        .collect();
    for key in ['2', '3', '4', '3', '1'] {
        update(&mut ahead, ch(key));
        update(&mut asked, ch(key));
        assert_eq!(ids(&ahead), ids(&asked), "{key}");
        for (i, st) in midway.iter_mut().enumerate() {
            update(st, ch(key));
            assert_eq!(ids(st), ids(&asked), "{key} after {} idle steps", i + 2);
        }
    }
    // Most tries first (ties in queue order), reversed by the second press: the whole list
    // backwards, the last of the fewest tries first.
    update(&mut ahead, ch('3'));
    update(&mut ahead, ch('3'));
    let rows: Vec<&Row> = ahead.msgs.visible_rows();
    assert!(rows.windows(2).all(|w| w[0].attempts() <= w[1].attempts()));
    assert_eq!(rows[0].shown_id(), Some("order-exp-11998"));
    let most = rows.iter().map(|r| r.attempts()).max().unwrap();
    let first_ladder = rows.iter().position(|r| r.attempts() == most).unwrap();
    assert_eq!(rows[first_ladder - 1].shown_id(), Some("order-exp-0"));
    assert_eq!(rows.last().unwrap().shown_id(), Some("order-1001"));
}

#[test]
fn a_group_picked_while_a_new_grouping_is_made_is_the_group_on_screen() {
    let mut st = browsed(false, "orders.dlq", page());
    idle_until_done(&mut st);
    update(&mut st, ch('f'));
    let shown = st.msgs.current_group().unwrap().key.clone();
    // By exception now: made in idle moments; the failure groups stay on screen meanwhile.
    update(&mut st, ch('b'));
    assert_eq!(st.msgs.group_by, GroupBy::Exception);
    assert!(st.msgs.browse.as_ref().unwrap().updating().is_some());
    assert_eq!(st.msgs.shown_grouping(), GroupBy::Fingerprint);
    assert!(
        status(&st).contains("Failure groups"),
        "the title says what is shown"
    );
    update(&mut st, ch('r'));
    let Overlay::Replay(modal) = &st.overlay else {
        panic!("no replay modal: {:?}", st.banner.notice);
    };
    let Selection::Group(g) = &modal.selection else {
        panic!("{:?}", modal.selection);
    };
    assert_eq!(
        (g.by, g.name.as_str()),
        (GroupBy::Fingerprint, shown.as_str())
    );
    update(&mut st, key(KeyCode::Esc));
    idle_until_done(&mut st);
    assert_eq!(st.msgs.shown_grouping(), GroupBy::Exception);
    assert!(status(&st).contains("Groups by exception"));
}

/// The real loop pumps the idle moments: a body filter on a page of 12,000 read from a broker
/// ends with the one message it names, and nothing is left "updating".
#[tokio::test(flavor = "multi_thread")]
async fn the_terminal_loop_makes_a_big_pages_filter_in_its_idle_moments() {
    use crate::common::amqp::{confirm_channel, connect, declare};
    use crate::common::{TestBroker, TestVhost, unique};
    use lapin::BasicProperties;
    use lapin::options::BasicPublishOptions;
    use lapin::types::FieldTable;
    use std::time::Duration;
    use warren::domain::features::QueueType;

    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "e2e-slices").await;
    let conn = connect(&vhost).await;
    let ch = confirm_channel(&conn).await;
    declare(&ch, "slices.dlq", QueueType::Classic, FieldTable::default()).await;
    let mut confirms = Vec::new();
    for i in 0..N {
        let props = BasicProperties::default().with_message_id(format!("m-{i}").into());
        let body = format!("message-{i}");
        let c = ch
            .basic_publish(
                "".into(),
                "slices.dlq".into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                props,
            )
            .await
            .expect("publish");
        confirms.push(c);
    }
    for c in confirms {
        c.await.expect("confirm");
    }
    let dir = std::env::temp_dir().join(unique("warren-e2e-slices"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let cmd = format!(
        "WARREN_STORE={store} WARREN_LOG_DIR={dir} WARREN_CACHE_DIR={dir} {bin} --config {cfg} --amqp-url '{amqp}' --management-url '{mgmt}' --vhost '{vhost}'; sleep 30",
        store = dir.join("warren.db").display(),
        dir = dir.display(),
        cfg = dir.join("config.toml").display(),
        bin = env!("CARGO_BIN_EXE_warren"),
        amqp = vhost.amqp_url(),
        mgmt = broker.mgmt_url_with_creds(),
        vhost = vhost.name,
    );
    std::fs::write(dir.join("config.toml"), "").expect("config");
    let t = crate::tmux_util::Tmux::open(&cmd, None, 160, 40);
    t.wait_for("slices.dlq", Duration::from_secs(30));
    t.keys(&[":", "limit 20000", "Enter", "Enter"]);
    t.wait_for(&format!("{N} of {N}"), Duration::from_secs(60));
    t.keys(&["/", "body:message-4242", "Enter"]);
    let done = t.wait_until("the filter made", Duration::from_secs(60), |s| {
        s.contains(&format!("1 of {N}")) && !s.contains("updating the list")
    });
    assert!(done.contains("m-4242"), "{done}");
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
    vhost.cleanup().await;
}
