//! The command line `:` and the switches of context and vhost it starts.

use super::*;

pub(super) fn on_command_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Some(input) = &mut state.inputs.command else {
        return Vec::new();
    };
    match key.code {
        KeyCode::Esc => {
            state.inputs.command = None;
            Vec::new()
        }
        KeyCode::Enter => {
            let line = input.lines().join(" ");
            state.inputs.command = None;
            run_command_line(state, &line)
        }
        KeyCode::Tab => {
            let (line, fits) =
                crate::tui::picker::complete(&state.settings.contexts, &input.lines().join(" "));
            let mut done = TextArea::new(vec![line]);
            done.move_cursor(ratatui_textarea::CursorMove::End);
            *input = done;
            state.banner.notice = (!fits.is_empty()).then(|| {
                let shown: Vec<String> = fits.iter().map(|f| sanitize::one_line(f, 40)).collect();
                format!("Tab: {}", shown.join("  "))
            });
            Vec::new()
        }
        _ => {
            input.input(key);
            Vec::new()
        }
    }
}

/// `:` commands.
pub fn run_command_line(state: &mut State, line: &str) -> Vec<Command> {
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or("");
    let arg: Vec<&str> = words.collect();
    let arg = arg.join(" ");
    match (verb, arg.is_empty()) {
        ("", _) => Vec::new(),
        ("q" | "q!" | "quit" | "qa", _) => force_quit(state),
        ("ctx" | "context", false) => {
            let to = if crate::config::ContextScope::parse(&arg).is_every() {
                "every context".to_string()
            } else {
                format!("context {}", sanitize::one_line(&arg, 60))
            };
            switch(state, arg, None, true, to)
        }
        ("vhost" | "vh", false) => {
            if state.every_context() {
                state.banner.error = Some(
                    "every context at once lists each context's own vhost: open a context (:ctx NAME, or Enter on a queue) to choose another; `warren --context '*' --vhost '*'` lists every vhost of each".into(),
                );
                return Vec::new();
            }
            let to = if crate::config::VhostScope::parse(&arg).is_every() {
                "every vhost".to_string()
            } else {
                format!("vhost {}", sanitize::one_line(&arg, 60))
            };
            switch(state, arg, None, false, to)
        }
        ("limit", false) => {
            match arg.parse::<usize>() {
                Ok(n) if n > 0 => {
                    state.settings.browse_limit = n;
                    state.banner.notice = Some(format!("browsing reads up to {n} messages"));
                    // The open queue is read again with the new limit (after the usual
                    // confirmation where reading again costs deliveries).
                    read_open_queue_again(state)
                }
                _ => {
                    state.banner.error = Some(format!(
                        "limit needs a positive number, not “{}”",
                        sanitize::one_line(&arg, 20)
                    ));
                    Vec::new()
                }
            }
        }
        ("redirect" | "redirects", _) => redirect_command(state, verb, &arg),
        ("help" | "h", _) => {
            state.overlay = Overlay::Help;
            Vec::new()
        }
        ("ctx" | "context", true) if !state.settings.contexts.is_empty() => {
            state.overlay = Overlay::Contexts(Default::default());
            Vec::new()
        }
        ("ctx" | "context" | "vhost" | "vh" | "limit", true) => {
            state.banner.error = Some(format!(":{verb} needs an argument, e.g. :{verb} NAME"));
            Vec::new()
        }
        _ => {
            state.banner.error = Some(format!(
                "unknown command :{} — try :ctx NAME, :vhost NAME, :limit N, :redirects, :help, :q",
                sanitize::one_line(verb, 30)
            ));
            Vec::new()
        }
    }
}

/// Keys in the context picker: typing narrows it, the arrows choose, Enter opens the chosen
/// context as `:ctx NAME` does, Esc closes it.
pub(super) fn on_picker_key(state: &mut State, key: KeyEvent) -> Vec<Command> {
    let Overlay::Contexts(p) = &mut state.overlay else {
        return Vec::new();
    };
    let offered = crate::tui::picker::offered(&state.settings.contexts, &p.query);
    match key.code {
        KeyCode::Esc => state.overlay = Overlay::None,
        KeyCode::Enter => {
            let Some(name) = offered.get(p.cursor).cloned() else {
                return Vec::new();
            };
            state.overlay = Overlay::None;
            return run_command_line(state, &format!("ctx {name}"));
        }
        KeyCode::Up => p.cursor = p.cursor.saturating_sub(1),
        KeyCode::Down => p.cursor = (p.cursor + 1).min(offered.len().saturating_sub(1)),
        KeyCode::Backspace => {
            p.query.pop();
            p.cursor = 0;
        }
        KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
            p.query.push(c);
            p.cursor = 0;
        }
        _ => {}
    }
    Vec::new()
}

/// `:redirect add FROM TO [reason…]`, `:redirect remove FROM`, `:redirects`: asked of the
/// worker for the vhost shown, which goes through `ops::redirect` (read-only refuses there).
fn redirect_command(state: &mut State, verb: &str, arg: &str) -> Vec<Command> {
    use crate::worker::protocol::RedirectChange;
    if state.every_context() || state.every_vhost() {
        state.banner.error = Some(
            "redirects belong to one vhost: open it (:vhost NAME) to list or change its redirects"
                .into(),
        );
        return Vec::new();
    }
    let words: Vec<&str> = arg.split_whitespace().collect();
    let change = match (verb, words.as_slice()) {
        ("redirects", []) | ("redirect", [] | ["list"]) => RedirectChange::List,
        ("redirect", ["add", from, to, reason @ ..]) => RedirectChange::Add {
            from: from.to_string(),
            to: to.to_string(),
            reason: reason.join(" "),
        },
        ("redirect", ["remove" | "rm", from]) => RedirectChange::Remove {
            from: from.to_string(),
        },
        _ => {
            state.banner.error = Some(
                "usage: :redirect add FROM TO [reason…], :redirect remove FROM, :redirects".into(),
            );
            return Vec::new();
        }
    };
    state.banner.error = None;
    vec![Command::Redirect {
        vhost: state.overview.vhost.clone(),
        change,
        create_stream: None,
    }]
}

/// `:ctx`, `:vhost`, Enter in every context, `*`: nothing changes on screen until the worker
/// reached the new place and listed it. `name` is the context (with `vhost`, that vhost of it)
/// when `context`, else the vhost.
pub(super) fn switch(
    state: &mut State,
    name: String,
    vhost: Option<String>,
    context: bool,
    to: String,
) -> Vec<Command> {
    if state.replay_running() {
        state.banner.error =
            Some("a replay is running: wait for it or cancel it (Esc) before switching".into());
        return Vec::new();
    }
    let generation = state.last_generation.max(state.generation) + 1;
    state.last_generation = generation;
    state.switching = Some(Switching { generation, to });
    // A queue to open belongs to the switch that asked for it.
    state.pending.open_after_switch = None;
    state.banner.error = None;
    state.dirty = true;
    if context {
        vec![Command::SwitchContext {
            name,
            vhost,
            generation,
        }]
    } else {
        vec![Command::SwitchVhost { name, generation }]
    }
}

/// Where the screen is, in words: "context prod-eu, vhost /orders".
pub(super) fn place(state: &State) -> String {
    let o = &state.overview;
    if o.context.is_empty() {
        return "the current one".into();
    }
    if state.every_context() {
        return "every context".into();
    }
    format!(
        "context {}, {}",
        sanitize::one_line(&o.context, 40),
        scope_text(state)
    )
}

/// The vhost shown, in words: "vhost /orders", or "every vhost".
pub fn scope_text(state: &State) -> String {
    if state.every_vhost() {
        "every vhost".into()
    } else {
        format!("vhost {}", sanitize::one_line(&state.overview.vhost, 40))
    }
}

/// A switch succeeded: everything shown belongs to the old place, and so does every answer
/// still on its way (tagged with an older generation, dropped from now on).
pub(super) fn enter_new_place(state: &mut State, generation: u64) {
    state.generation = generation;
    state.msgs.content_serial += 1;
    state.connection = ConnectionState::Connecting;
    state.queues.discovery = Default::default();
    state.queues.histories.clear();
    state.queues.heads.clear();
    state.queues.figures.clear();
    state.queues.order.clear();
    state.queues.loaded = false;
    state.msgs.browse = None;
    // A page still arriving from the old place (and its spill file) goes with it.
    state.msgs.arriving = None;
    state.msgs.loading = None;
    state.msgs.selected.clear();
    state.msgs.anchor = None;
    state.queues.cursor = 0;
    // The filter was for the old place's names.
    state.queues.filter.clear();
    state.inputs.queue_filter = None;
    state.msgs.cursor = 0;
    state.msgs.group_cursor = 0;
    state.msgs.group_notes.clear();
    state.redirects.clear();
    state.inputs.note = None;
    state.focus = Focus::Queues;
    state.banner.error = None;
    state.banner.notice = None;
    state.pending.browse = None;
    state.pending.reread = None;
    state.pending.protect = None;
    // A modal planned on the old place would replay there.
    if matches!(state.overlay, Overlay::Replay(_)) {
        state.overlay = Overlay::None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::protocol::RedirectChange;

    fn asked(line: &str) -> (Vec<Command>, Option<String>) {
        let mut st = State::new(jiff::Timestamp::UNIX_EPOCH, false, Default::default());
        st.overview.vhost = "/orders".into();
        let cmds = run_command_line(&mut st, line);
        (cmds, st.banner.error)
    }

    fn change(line: &str) -> Option<RedirectChange> {
        match asked(line).0.as_slice() {
            [Command::Redirect { vhost, change, .. }] if vhost == "/orders" => Some(change.clone()),
            _ => None,
        }
    }

    #[test]
    fn redirect_commands_ask_the_worker_for_the_vhost_shown() {
        assert_eq!(
            change("redirect add orders orders.v2 endpoint renamed"),
            Some(RedirectChange::Add {
                from: "orders".into(),
                to: "orders.v2".into(),
                reason: "endpoint renamed".into(),
            })
        );
        assert_eq!(
            change("redirect remove orders"),
            Some(RedirectChange::Remove {
                from: "orders".into()
            })
        );
        assert_eq!(change("redirects"), Some(RedirectChange::List));
        let (cmds, error) = asked("redirect add orders");
        assert!(cmds.is_empty());
        assert!(error.is_some_and(|e| e.starts_with("usage: :redirect")));
    }
}
