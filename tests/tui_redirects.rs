//! The TUI's detail pane applies the redirects the worker reported (`Report::Redirects`), as the
//! replay's plan does: "a replay would publish" names the redirect's queue and why, and a report
//! of none restores the plain target. Pure: no broker.

use crate::tui_fixtures;

use jiff::Timestamp;
use tui_fixtures::*;
use warren::domain::redirect::{self, Entry, RedirectRecord};
use warren::tui::detail;
use warren::tui::{Report, update};

fn publish_line(st: &warren::tui::State) -> String {
    let row = st.current_opened().expect("the message under the cursor");
    detail::lines(st, &row)
        .iter()
        .map(|l| {
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
        })
        .find(|l| l.trim_start().starts_with("publish"))
        .expect("a publish line")
}

fn redirects(from: &str) -> warren::domain::redirect::Redirects {
    let record = RedirectRecord {
        at: Timestamp::UNIX_EPOCH,
        from: from.into(),
        to: "orders.v2".into(),
        reason: "endpoint renamed".into(),
        os_user: "ops".into(),
        broker_user: "guest".into(),
        context: "c".into(),
        vhost: VHOST.into(),
    };
    let entry = Entry {
        event: redirect::ADD.into(),
        record,
        vouched: Some("guest".into()),
    };
    redirect::fold([entry]).0
}

#[test]
fn the_detail_pane_follows_the_redirects_in_force() {
    let mut st = browsed(false, "orders.dlq", orders_messages());
    let plain = publish_line(&st);
    assert!(!plain.contains("redirected"), "{plain}");
    let row = st.current_opened().unwrap();
    let from = warren::domain::replay::plan(&row.msg, &row.exp, &Default::default())
        .target
        .and_then(|t| t.expected_queue)
        .expect("a broker death has its queue");
    let report = |r| Report::Redirects {
        vhost: VHOST.into(),
        redirects: r,
        ticket: Default::default(),
    };
    update(&mut st, report(redirects(&from)));
    let line = publish_line(&st);
    assert!(
        line.contains("orders.v2")
            && line.contains(&format!("(redirected from {from}: endpoint renamed)")),
        "{line}"
    );
    update(&mut st, report(Default::default()));
    assert_eq!(publish_line(&st), plain);
}
