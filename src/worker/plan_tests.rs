use super::*;

/// The session is a name: the plan only hands it on.
type P = Plan<&'static str>;

fn browse(queue: &str) -> Command {
    Command::Browse {
        vhost: "/".into(),
        queue: queue.into(),
        limit: 500,
        read_again: false,
        restart: false,
    }
}

/// Ctrl-R: read it again from the start.
fn reread(queue: &str) -> Command {
    Command::Browse {
        vhost: "/".into(),
        queue: queue.into(),
        limit: 500,
        read_again: false,
        restart: true,
    }
}

fn preview(queue: &str) -> Command {
    Command::PreviewReplay {
        vhost: "/".into(),
        queue: queue.into(),
        selection: Selection::All,
        keep_attempts: false,
        edited: None,
        strip_failure_stamp: false,
    }
}

fn replay(queue: &str) -> Command {
    Command::Replay(ReplayRequest {
        vhost: "/".into(),
        queue: queue.into(),
        selection: Selection::All,
        expected: 3,
        rate: 10,
        keep_attempts: false,
        dry_run: false,
        job: Default::default(),
        ..Default::default()
    })
}

fn attempt(actions: &[Action<&str>]) -> Option<u64> {
    actions.iter().find_map(|a| match a {
        Action::Connect { attempt, .. } => Some(*attempt),
        _ => None,
    })
}

fn started(actions: &[Action<&'static str>]) -> Vec<(Ticket, Work, &'static str)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Start { job, session } => Some((job.ticket, job.work.clone(), *session)),
            _ => None,
        })
        .collect()
}

fn sent<'a>(actions: &'a [Action<&str>]) -> Vec<&'a Report> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn page(queue: &str, ticket: Ticket) -> Report {
    Report::MessagesLoaded {
        vhost: "/".into(),
        queue: queue.into(),
        messages: Vec::new(),
        first_seen: Vec::new(),
        replays: Vec::new(),
        authors: Default::default(),
        stop: "all 0 messages".into(),
        ticket,
    }
}

/// A plan connected to session "s1".
fn connected() -> P {
    let mut p = P::broker();
    let a = p.command(Command::LoadQueues);
    let n = attempt(&a).expect("connects");
    let a = p.connected(n, Ok("s1"));
    let [(t, Work::Discover, "s1")] = started(&a)[..] else {
        panic!("{a:?}")
    };
    p.finished(t, Vec::new(), None);
    p
}

#[test]
fn the_first_request_connects_and_waits_then_runs_on_the_session() {
    let mut p = P::broker();
    let a = p.command(Command::LoadQueues);
    assert!(matches!(
        sent(&a)[..],
        [Report::Connection(ConnectionState::Connecting)]
    ));
    let n = attempt(&a).expect("a connect");
    assert!(started(&a).is_empty(), "nothing runs before the session");
    // More requests while connecting: no second connect.
    let b = p.command(browse("q"));
    assert!(attempt(&b).is_none() && started(&b).is_empty(), "{b:?}");
    let c = p.connected(n, Ok("s1"));
    assert!(matches!(
        sent(&c)[..],
        [Report::Connection(ConnectionState::Connected)]
    ));
    let s = started(&c);
    assert_eq!(s.len(), 2, "both waiting requests start: {c:?}");
    assert!(matches!(s[0].1, Work::Discover) && s[0].2 == "s1");
    assert!(matches!(&s[1].1, Work::Browse { queue, .. } if queue == "q"));
    assert!(s[0].0.request < s[1].0.request, "numbered in arrival order");
}

#[test]
fn cancel_and_quit_act_while_a_connect_is_pending() {
    let mut p = P::broker();
    let a = p.command(replay("q"));
    assert!(attempt(&a).is_some());
    // Today's connect may take its full timeout; the cancel does not wait for it.
    let c = p.command(Command::CancelReplay);
    assert!(
        matches!(
            sent(&c)[..],
            [Report::ReplayFinished(ReplayOutcome {
                cancelled: true,
                error: None,
                progress: ReplayProgress {
                    moved: 0,
                    total: 3,
                    ..
                },
                ..
            })]
        ),
        "{c:?}"
    );
    assert!(matches!(p.command(Command::Quit)[..], [Action::Quit]));
    // The cancelled replay never starts once the connect lands.
    let done = p.connected(attempt(&a).expect("a connect"), Ok("s1"));
    assert!(started(&done).is_empty(), "{done:?}");
    // And another replay may be accepted.
    assert!(!started(&p.command(replay("q"))).is_empty());
}

#[test]
fn cancel_reaches_a_running_replay_at_once() {
    let mut p = connected();
    let a = p.command(replay("q"));
    assert_eq!(started(&a).len(), 1);
    assert!(matches!(
        p.command(Command::CancelReplay)[..],
        [Action::CancelReplay]
    ));
    let again = p.command(replay("q"));
    assert!(
        matches!(sent(&again)[..], [Report::Error(f)] if f.text.contains("already running")),
        "{again:?}"
    );
}

#[test]
fn a_failed_connect_answers_what_waited_and_the_next_request_connects_again() {
    let mut p = P::broker();
    let n = attempt(&p.command(browse("q"))).unwrap();
    p.command(replay("r"));
    let a = p.connected(n, Err("connection refused".into()));
    let events = sent(&a);
    assert!(
        matches!(events[0], Report::Connection(ConnectionState::Disconnected(w)) if w == "connection refused")
    );
    assert!(matches!(events[1], Report::Error(f) if f.text == "connection refused"));
    assert!(
        matches!(events[2], Report::ReplayFinished(o) if o.error.as_deref() == Some("connection refused")),
        "the progress window gets its end: {a:?}"
    );
    assert!(started(&a).is_empty());
    let b = p.command(browse("q"));
    let m = attempt(&b).expect("connects again");
    assert_ne!(m, n);
    // The old attempt's late report is not this one's.
    assert!(p.connected(n, Ok("stale")).is_empty());
    assert_eq!(started(&p.connected(m, Ok("s2")))[0].2, "s2");
}

#[test]
fn one_read_of_a_queue_at_a_time_and_the_newest_reread_wins() {
    let mut p = connected();
    let first = started(&p.command(browse("q")));
    assert_eq!(first.len(), 1);
    // Another queue is read at the same time; the same queue is not.
    assert_eq!(started(&p.command(browse("other"))).len(), 1);
    assert!(started(&p.command(reread("q"))).is_empty(), "held");
    assert!(
        started(&p.command(reread("q"))).is_empty(),
        "held, replacing the one held"
    );
    // The first read ends: its page is dropped (a newer browse of q waits), the newest starts.
    let t1 = first[0].0;
    let a = p.finished(t1, vec![page("q", t1)], None);
    assert!(sent(&a).is_empty(), "{a:?}");
    let next = started(&a);
    assert_eq!(next.len(), 1, "only the newest of the two held: {a:?}");
    assert_eq!(next[0].0.request, t1.request + 3);
    assert!(
        matches!(&next[0].1, Work::Browse { again: true, .. }),
        "its page says it was read again: {a:?}"
    );
    let a = p.finished(next[0].0, vec![page("q", next[0].0)], None);
    assert_eq!(sent(&a).len(), 1, "the newest answers");
}

/// The report: Enter on a queue whose read of a million was under way started it again.
#[test]
fn a_second_open_of_a_queue_being_read_does_not_start_it_again() {
    let mut p = connected();
    let first = started(&p.command(browse("q")));
    assert_eq!(first.len(), 1);
    assert!(matches!(&first[0].1, Work::Browse { again: false, .. }));
    for _ in 0..2 {
        let a = p.command(browse("q"));
        assert!(started(&a).is_empty(), "{a:?}");
        assert!(
            matches!(sent(&a)[..], [Report::Notice(n)] if n.starts_with("already reading q")),
            "{a:?}"
        );
    }
    // The read under way answers, and nothing starts after it.
    let t1 = first[0].0;
    let a = p.finished(t1, vec![page("q", t1)], None);
    assert_eq!(sent(&a).len(), 1, "the first read answers: {a:?}");
    assert!(started(&a).is_empty(), "not read again: {a:?}");
    // Once it ended, Enter reads the queue again, as a new read.
    let b = started(&p.command(browse("q")));
    assert!(matches!(
        &b[..],
        [(_, Work::Browse { again: false, .. }, _)]
    ));
}

#[test]
fn a_browse_waiting_for_the_connection_answers_a_second_open_too() {
    let mut p = P::broker();
    let n = attempt(&p.command(browse("q"))).unwrap();
    let a = p.command(browse("q"));
    assert!(matches!(sent(&a)[..], [Report::Notice(_)]), "{a:?}");
    let c = p.connected(n, Ok("s1"));
    assert_eq!(started(&c).len(), 1, "one read: {c:?}");
}

#[test]
fn another_limit_or_a_reread_replaces_the_read_under_way_and_says_so() {
    let mut p = connected();
    let first = started(&p.command(browse("q")));
    let bigger = Command::Browse {
        vhost: "/".into(),
        queue: "q".into(),
        limit: 1_000_000,
        read_again: false,
        restart: false,
    };
    let a = p.command(bigger);
    assert!(started(&a).is_empty(), "held: {a:?}");
    assert!(
        matches!(sent(&a)[..], [Report::Notice(n)] if n.contains("read again from the start")),
        "{a:?}"
    );
    let a = p.finished(first[0].0, vec![page("q", first[0].0)], None);
    assert!(
        sent(&a).is_empty(),
        "the replaced read's page is dropped: {a:?}"
    );
    assert!(
        matches!(
            &started(&a)[..],
            [(
                _,
                Work::Browse {
                    limit: 1_000_000,
                    again: true,
                    ..
                },
                _
            )]
        ),
        "{a:?}"
    );
}

#[test]
fn queues_of_one_name_in_two_vhosts_are_two_queues() {
    let mut p = connected();
    let in_vhost = |vhost: &str| Command::Browse {
        vhost: vhost.into(),
        queue: "q".into(),
        limit: 500,
        read_again: false,
        restart: false,
    };
    let a = started(&p.command(in_vhost("/")));
    let b = started(&p.command(in_vhost("billing")));
    assert_eq!(
        (a.len(), b.len()),
        (1, 1),
        "read side by side: not one queue"
    );
    assert!(
        matches!(&b[0].1, Work::Browse { vhost, queue, .. } if vhost == "billing" && queue == "q")
    );
    // The same queue of the same vhost still waits its turn.
    assert!(started(&p.command(in_vhost("billing"))).is_empty());
}

#[test]
fn a_plan_waits_for_a_browse_of_its_queue_and_does_not_replace_it() {
    let mut p = connected();
    let b = started(&p.command(browse("q")));
    assert!(started(&p.command(preview("q"))).is_empty(), "held");
    let a = p.finished(b[0].0, vec![page("q", b[0].0)], None);
    assert_eq!(sent(&a).len(), 1, "a plan does not supersede a browse");
    assert!(matches!(started(&a)[..], [(_, Work::Preview { .. }, _)]));
}

#[test]
fn a_replay_waits_for_a_read_of_its_queue_and_cancels_there() {
    let mut p = connected();
    let b = started(&p.command(browse("q")));
    assert!(started(&p.command(replay("q"))).is_empty(), "held");
    let c = p.command(Command::CancelReplay);
    assert!(matches!(sent(&c)[..], [Report::ReplayFinished(o)] if o.cancelled));
    let a = p.finished(b[0].0, Vec::new(), None);
    assert!(started(&a).is_empty(), "the cancelled replay never starts");
}

#[test]
fn one_discovery_at_a_time_and_a_refresh_out_skips_the_next() {
    let mut p = connected();
    let d = started(&p.command(Command::LoadQueues));
    assert_eq!(d.len(), 1);
    assert!(started(&p.command(Command::LoadQueues)).is_empty());
    let a = p.finished(d[0].0, vec![Report::Notice("first".into())], None);
    assert_eq!(sent(&a).len(), 1, "the first discovery still answers");
    assert!(matches!(started(&a)[..], [(_, Work::Discover, _)]));

    let r = started(&p.command(Command::RefreshDepths));
    assert_eq!(r.len(), 1);
    assert!(started(&p.command(Command::RefreshDepths)).is_empty());
    p.finished(r[0].0, Vec::new(), None);
    assert_eq!(started(&p.command(Command::RefreshDepths)).len(), 1);
}

#[test]
fn a_protect_is_followed_by_a_discovery() {
    let mut p = connected();
    let s = started(&p.command(Command::Protect {
        vhost: "/".into(),
        queue: "q".into(),
    }));
    let a = p.finished(
        s[0].0,
        vec![Report::Notice("protected".into())],
        Some(Work::Discover),
    );
    assert_eq!(sent(&a).len(), 1);
    assert!(matches!(started(&a)[..], [(_, Work::Discover, _)]));
}

fn listing(generation: u64) -> Report {
    Report::QueuesLoaded {
        overview: Default::default(),
        discovery: Default::default(),
        ticket: Ticket {
            generation,
            request: 0,
        },
    }
}

fn switch_vhost(p: &mut P, name: &str, generation: u64) -> Vec<Action<&'static str>> {
    p.command(Command::SwitchVhost {
        name: name.into(),
        generation,
    })
}

fn retargets(actions: &[Action<&str>]) -> Vec<Retarget> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Retarget(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_switch_is_tried_while_the_old_session_serves_and_adopted_after_its_listing() {
    let mut p = connected();
    let old = started(&p.command(browse("q")));
    let a = switch_vhost(&mut p, "/b", 1);
    assert!(
        matches!(&a[..], [Action::Connect { to: Some(Retarget::Vhost(v)), .. }] if v == "/b"),
        "a connect to the new place, nothing else: {a:?}"
    );
    let n = attempt(&a).unwrap();
    // The old session goes on serving, in the old generation.
    let during = started(&p.command(browse("other")));
    assert!(matches!(during[..], [(t, _, "s1")] if t.generation == 0));
    let e = p.finished(old[0].0, vec![page("q", old[0].0)], None);
    assert_eq!(sent(&e).len(), 1, "the old place's answer is still news");
    // Connected is not enough: the new place lists its queues first, on the new session.
    let c = p.connected(n, Ok("s2"));
    assert!(sent(&c).is_empty(), "{c:?}");
    let [(t, Work::Discover, "s2")] = started(&c)[..] else {
        panic!("{c:?}")
    };
    assert_eq!(t.generation, 1);
    let done = p.finished(t, vec![listing(1)], None);
    assert_eq!(retargets(&done), [Retarget::Vhost("/b".into())]);
    assert!(
        matches!(sent(&done)[..], [Report::QueuesLoaded { ticket, .. }] if ticket.generation == 1)
    );
    // From now on: the new session, the new generation.
    let next = started(&p.command(browse("q")));
    assert!(matches!(next[..], [(t, _, "s2")] if t.generation == 1));
    // A read of the old place ending late keeps its old tag (the UI drops it).
    let late = p.finished(during[0].0, vec![page("other", during[0].0)], None);
    assert!(
        matches!(sent(&late)[..], [Report::MessagesLoaded { ticket, .. }] if ticket.generation == 0)
    );
}

#[test]
fn a_failed_switch_changes_nothing_but_says_why() {
    // The connect fails (`:vhost nope`).
    let mut p = connected();
    let n = attempt(&switch_vhost(&mut p, "nope", 1)).unwrap();
    let a = p.connected(n, Err("vhost 'nope' does not exist".into()));
    assert!(
        matches!(&sent(&a)[..], [Report::SwitchFailed { generation: 1, text }] if text.contains("nope")),
        "{a:?}"
    );
    assert!(
        retargets(&a).is_empty(),
        "later connects still go to the old place"
    );
    assert!(
        !sent(&a).iter().any(|e| matches!(e, Report::Connection(_))),
        "the old session's connection is not in question"
    );
    assert!(matches!(started(&p.command(browse("q")))[..], [(t, _, "s1")] if t.generation == 0));

    // It connects but cannot list (no permission to see the vhost's queues).
    let n = attempt(&switch_vhost(&mut p, "/locked", 2)).unwrap();
    let c = p.connected(n, Ok("s2"));
    let [(t, Work::Discover, "s2")] = started(&c)[..] else {
        panic!("{c:?}")
    };
    let err = Report::Error(Failure::in_generation("403 access refused", 2));
    let d = p.finished(t, vec![err], None);
    assert!(
        matches!(&sent(&d)[..], [Report::SwitchFailed { generation: 2, text }] if text == "403 access refused"),
        "{d:?}"
    );
    assert!(retargets(&d).is_empty());
    assert!(matches!(started(&p.command(browse("r")))[..], [(t, _, "s1")] if t.generation == 0));
}

#[test]
fn a_newer_switch_replaces_one_under_way() {
    let mut p = connected();
    let first = attempt(&switch_vhost(&mut p, "/a", 1)).unwrap();
    let second = attempt(&switch_vhost(&mut p, "/b", 2)).unwrap();
    assert!(
        p.connected(first, Ok("sa")).is_empty(),
        "the replaced one is dropped"
    );
    let c = p.connected(second, Ok("sb"));
    let [(t, Work::Discover, "sb")] = started(&c)[..] else {
        panic!("{c:?}")
    };
    // A third switch while the second one lists: the second's listing is not news.
    let third = attempt(&switch_vhost(&mut p, "/c", 3)).unwrap();
    assert!(p.finished(t, vec![listing(2)], None).is_empty());
    let c = p.connected(third, Ok("sc"));
    let [(t, Work::Discover, "sc")] = started(&c)[..] else {
        panic!("{c:?}")
    };
    let done = p.finished(t, vec![listing(3)], None);
    assert_eq!(retargets(&done), [Retarget::Vhost("/c".into())]);
    assert!(matches!(started(&p.command(browse("q")))[..], [(t, _, "sc")] if t.generation == 3));
}

#[test]
fn a_switch_is_refused_during_a_replay_and_in_a_snapshot_and_a_replay_during_a_switch() {
    let mut p = connected();
    started(&p.command(replay("q")));
    let a = p.command(Command::SwitchContext {
        name: "staging".into(),
        vhost: None,
        generation: 1,
    });
    assert!(
        matches!(&sent(&a)[..], [Report::SwitchFailed { generation: 1, text }] if text.contains("replay is running"))
    );
    assert!(attempt(&a).is_none(), "the session stays");
    assert_eq!(started(&p.command(browse("x")))[0].0.generation, 0);

    let mut s = P::snapshot("file");
    let a = switch_vhost(&mut s, "/b", 1);
    assert!(
        matches!(&sent(&a)[..], [Report::SwitchFailed { text, .. }] if text.contains("snapshot"))
    );
    assert_eq!(started(&s.command(browse("x")))[0].0.generation, 0);

    // The session a replay would run on is about to go: refused, nothing started.
    let mut p = connected();
    switch_vhost(&mut p, "/b", 1);
    let r = p.command(replay("q"));
    assert!(started(&r).is_empty());
    assert!(
        matches!(sent(&r)[..], [Report::ReplayFinished(o)] if o.error.as_deref().is_some_and(|e| e.contains("switch")))
    );
}

#[test]
fn a_snapshot_needs_no_connect_and_refuses_what_needs_a_broker() {
    let mut p = P::snapshot("file");
    let a = p.command(Command::LoadQueues);
    assert!(attempt(&a).is_none());
    assert!(matches!(started(&a)[..], [(_, Work::Discover, "file")]));
    assert!(p.command(Command::RefreshDepths).is_empty());
    for cmd in [
        preview("q"),
        Command::Protect {
            vhost: "/".into(),
            queue: "q".into(),
        },
        Command::Redirect {
            vhost: "/".into(),
            change: crate::worker::protocol::RedirectChange::List,
            create_stream: None,
        },
    ] {
        let a = p.command(cmd);
        assert!(matches!(sent(&a)[..], [Report::Error(f)] if f.text.contains("snapshot")));
    }
    let a = p.command(replay("q"));
    assert!(
        matches!(sent(&a)[..], [Report::ReplayFinished(o)] if o.error.as_deref().is_some_and(|e| e.contains("snapshot")))
    );
    // A note belongs to a broker's queue; forgetting none is nothing to do.
    let note = crate::domain::grouping::GroupNote {
        queue: "q".into(),
        by: crate::domain::grouping::GroupBy::Reason,
        key: "0123456789abcdef".into(),
        text: "later".into(),
        author: String::new(),
        at: jiff::Timestamp::UNIX_EPOCH,
    };
    let a = p.command(Command::SetGroupNote {
        vhost: "/".into(),
        note: note.clone(),
    });
    assert!(matches!(sent(&a)[..], [Report::Error(f)] if f.text.contains("snapshot")));
    let a = p.command(Command::ForgetGroupNotes {
        vhost: "/".into(),
        queue: "q".into(),
        notes: vec![note],
    });
    assert!(a.is_empty());
}

#[test]
fn notes_are_kept_on_the_session_without_waiting_for_a_read() {
    let mut p = connected();
    // A browse of the queue is running; the note does not wait behind it.
    started(&p.command(browse("q")));
    let note = crate::domain::grouping::GroupNote {
        queue: "q".into(),
        by: crate::domain::grouping::GroupBy::Origin,
        key: "0123456789abcdef".into(),
        text: "carrier outage".into(),
        author: String::new(),
        at: jiff::Timestamp::UNIX_EPOCH,
    };
    let a = p.command(Command::SetGroupNote {
        vhost: "/".into(),
        note,
    });
    assert!(matches!(
        started(&a)[..],
        [(_, Work::Notes(NoteWork::Set { .. }), _)]
    ));
}
