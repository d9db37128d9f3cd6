//! The non-interactive commands: `queues`, `show`, `groups`, `replay`, `audit`. Each prints
//! sanitised text for people or one JSON object per line for scripts.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::args::{ConnArgs, ReplayArgs};
use super::front::CliFront;
use super::run_print::report_run;
use super::{Failure, exit};
use crate::broker::replay::{Progress, Summary};
use crate::broker::session::{self, Explained, ReadConsent, ReplaySpec, Session, SessionError};
use crate::config::{self, Overrides};
use crate::domain::canary::CanaryRule;
use crate::domain::convention::Conventions;
use crate::domain::discovery::Discovery;
use crate::domain::filter::Filter;
use crate::domain::grouping::{GroupBy, WaitQueues};
use crate::domain::message::DeadLetter;
use crate::domain::sanitize::one_line;
use crate::domain::selection::{GroupChoice, Selection};
use crate::domain::snapshot::{self, SnapshotHeader};
use crate::ops;
use crate::store::Store;
use crate::worker::Source;

/// Widest cell Warren prints for a broker string in text output.
pub(crate) const CELL: usize = 120;

pub fn overrides(c: &ConnArgs) -> Overrides {
    Overrides {
        config_path: c.config.clone(),
        context: c.context.clone(),
        amqp_url: c.amqp_url.clone(),
        management_url: c.management_url.clone(),
        vhost: c.vhost.clone(),
        read_only: c.read_only,
        unlocked: None,
    }
}

/// `[conventions]` from the config file, for a snapshot read without a broker.
pub(crate) fn file_conventions(c: &ConnArgs) -> Result<Conventions, Failure> {
    let cfg =
        config::Config::read(c.config.as_deref()).map_err(|e| Failure::usage(e.to_string()))?;
    let settings = cfg.settings().map_err(|e| Failure::usage(e.to_string()))?;
    Ok(settings.conventions)
}

pub fn broker_failure(e: SessionError) -> Failure {
    match e {
        SessionError::NeedsConsent { queue, text } => Failure::failed(format!(
            "{text} Nothing was read: pass --read-again to accept the cost, or make the queue free to read with `warren protect {queue}`"
        )),
        // A queue name that names nothing is the command's argument, not the broker's fault.
        SessionError::Management(crate::broker::management::ManagementError::NoQueue {
            ..
        }) => Failure::usage(e.to_string()),
        e if e.is_broker() => Failure::broker(e.to_string()),
        e => Failure::failed(e.to_string()),
    }
}

/// The consent the command line gives up front.
pub(crate) fn consent(c: &ConnArgs) -> ReadConsent {
    if c.read_again {
        ReadConsent::ReadAgain
    } else {
        ReadConsent::Reuse
    }
}

/// Runs a read; where reading again would cost deliveries, the one home asks (`ops::read`): on
/// a terminal, or by `--read-again`; elsewhere it refuses.
pub(crate) async fn read_with_consent<T, Fut>(
    c: &ConnArgs,
    read: impl Fn(ReadConsent) -> Fut,
) -> Result<T, Failure>
where
    Fut: std::future::Future<Output = Result<T, SessionError>>,
{
    let mut front = crate::cli::front::CliFront::new(c, false, false);
    match ops::read::consented(&mut front, consent(c), read).await {
        Ok(t) => Ok(t),
        Err(stop) => stopped_err(stop),
    }
}

/// Resolves the configuration and connects to the management API.
pub async fn open(c: &ConnArgs) -> Result<Session, Failure> {
    refuse_every_vhost(c)?;
    let target = config::load(&overrides(c)).map_err(|e| Failure::usage(e.to_string()))?;
    Session::open(target.1).await.map_err(broker_failure)
}

/// `--vhost '*'` names every vhost: only `queues`, `watch` and the terminal UI look at several
/// at once.
pub fn refuse_every_vhost(c: &ConnArgs) -> Result<(), Failure> {
    if overrides(c).every_vhost() {
        return Err(Failure::usage(
            "--vhost '*' (every vhost) works with `warren queues`, `warren watch` and the terminal UI; name one vhost for this command",
        ));
    }
    Ok(())
}

/// Warren's store, or `None` with a warning on stderr (browsing works without it).
pub(crate) fn store_or_warn() -> Option<Store> {
    match Store::open_default() {
        Ok(s) => Some(s),
        Err(e) => {
            crate::errln!("warren: {}", one_line(&e.to_string(), 600));
            None
        }
    }
}

pub fn print_line(v: &Value) {
    crate::outln!("{}", json_text(v));
}

/// The text of one `--json` line: every printer goes through here, so DEL, C1, bidi and
/// invisible characters are `\uXXXX` escapes and never raw bytes (see `sanitize::json_line`).
fn json_text(v: &Value) -> String {
    crate::domain::sanitize::json_line(v)
}

/// The ordinary queues of a discovery (`queues --all`), after its dead-letter queues;
/// `vhost` names the vhost on each line when the scope is every vhost.
pub fn print_other_queues(d: &Discovery, json: bool, vhost: Option<&str>) {
    // A queue holding stuck dead letters was listed as `stuck` already.
    let stuck = |name: &str| d.stuck.iter().any(|s| s.queue == name);
    for q in d.other_queues.iter().filter(|q| !stuck(&q.name)) {
        // A retry loop's wait queue holds messages between tries: never a replay target.
        let kind = if d.retry_loops.iter().any(|l| l.wait_queue == q.name) {
            "wait"
        } else {
            "queue"
        };
        if json {
            let mut v = json!({"name": q.name, "kind": kind, "depth": q.depth, "queue_type": q.queue_type.as_str()});
            if let (Some(vh), Some(o)) = (vhost, v.as_object_mut()) {
                o.insert("vhost".into(), json!(vh));
            }
            print_line(&v);
        } else {
            let name = match vhost {
                Some(vh) => format!("{vh}/{}", q.name),
                None => q.name.clone(),
            };
            crate::outln!(
                "{:<40} {:<8} {:<12} {:>7}",
                one_line(&name, 40),
                kind,
                "",
                q.depth.map_or("?".into(), |d| d.to_string())
            );
        }
    }
}

/// Browses and explains, recording first-seen times.
pub(crate) async fn read_explained(
    c: &ConnArgs,
    s: &Session,
    queue: &str,
    limit: usize,
) -> Result<(Vec<Explained>, bool), Failure> {
    let page = read_with_consent(c, |consent| s.browse(queue, limit, consent)).await?;
    if let Some(note) = s.handle.cost_note(queue, &page).await {
        crate::errln!("warren: {}", one_line(&note, 400));
    }
    // Every message the queue held when the read began: a look that can say a group is gone.
    let end = page.end();
    let whole = end.whole();
    let keys: Vec<String> = page
        .messages
        .iter()
        .map(crate::domain::identity::message_key)
        .collect();
    let seen = store_or_warn()
        .and_then(|st| {
            crate::ops::recall(s, &st, queue, &keys, jiff::Timestamp::now())
                .map_err(|e| crate::errln!("warren: {}", one_line(&e.to_string(), 600)))
                .ok()
        })
        .unwrap_or_default();
    match &page.stopped {
        crate::broker::browse::StopReason::QuorumSafety { reason, .. } => {
            crate::errln!("warren: stopped early: {}", one_line(reason, 600));
        }
        crate::broker::browse::StopReason::Idle
            if (page.messages.len() as u64) < page.queue_depth_at_start.min(limit as u64) =>
        {
            crate::errln!(
                "warren: read {} of the {} messages the queue held: the broker sent nothing more for {} s (another consumer may have taken them); run it again to read the rest",
                page.messages.len(),
                page.queue_depth_at_start,
                crate::broker::browse::DEFAULT_IDLE_TIMEOUT.as_secs()
            );
        }
        _ => {}
    }
    // Everything ready at the start was read, but the queue held something else: said, as
    // the TUI's status line says it.
    if let crate::domain::read_end::ReadEnd::Changed { .. } = &end {
        crate::errln!("warren: {}", one_line(&end.text(), 600));
    }
    let explained = session::explain_all(
        session::into_messages(page),
        &seen,
        &s.handle.target.settings.conventions,
    );
    super::triage::remember_head(s, queue, &explained, jiff::Timestamp::now());
    Ok((explained, whole))
}

/// Reads a snapshot file, with errors that name the file.
pub fn read_snapshot(file: &Path) -> Result<(SnapshotHeader, Vec<DeadLetter>), Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::usage(format!("cannot read snapshot {}: {e}", file.display())))?;
    snapshot::read(&text).map_err(|e| {
        Failure::usage(format!(
            "{} is not a readable Warren snapshot: {e}",
            file.display()
        ))
    })
}

pub(crate) fn parse_filter(f: Option<&str>) -> Result<Option<Filter>, Failure> {
    f.map(|q| Filter::parse(q).map_err(|e| Failure::usage(format!("--filter: {e}"))))
        .transpose()
}

/// `warren protect QUEUE`: shows the policy that lifts the queue's delivery limit, asks, sets it.
pub async fn protect(c: &ConnArgs, queue: &str, dry_run: bool, yes: bool) -> Result<i32, Failure> {
    let s = open(c).await?;
    let plan = ops::protect::look(&s, queue).await.or_else(stopped_err)?;
    let def = serde_json::to_string(&plan.policy.definition).unwrap_or_default();
    crate::errln!(
        "{} policy '{}' on vhost '{}': pattern {} priority {} definition {}",
        if dry_run { "Would set" } else { "Set" },
        one_line(&plan.policy.name, 120),
        one_line(s.vhost(), 80),
        one_line(&plan.policy.pattern, 120),
        plan.policy.priority,
        one_line(&def, 400)
    );
    crate::errln!(
        "  delivery limit {} → unlimited{}",
        plan.limit_before.map_or("none".into(), |l| l.to_string()),
        plan.replaces.as_ref().map_or(String::new(), |p| format!(
            "; carries every key of policy '{}', which it outranks",
            one_line(p, 80)
        ))
    );
    if dry_run {
        return Ok(exit::OK);
    }
    ops::protect::admit(&s).await.or_else(stopped_err)?;
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::usage(
                "not a terminal: pass --yes to set the policy without confirmation (or --dry-run to look)",
            ));
        }
        crate::err!("Set it? [y/N] ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err()
            || !matches!(line.trim(), "y" | "Y" | "yes")
        {
            crate::errln!("nothing changed");
            return Ok(exit::FAILED);
        }
    }
    let mut front = CliFront::new(c, yes, false);
    let (_, notes) = ops::protect::apply(&s, queue, &mut front)
        .await
        .or_else(stopped_err)?;
    crate::errln!(
        "protected: reading '{}' no longer spends deliveries",
        one_line(queue, 80)
    );
    for note in notes {
        crate::errln!("warren: {}", one_line(&note, 600));
    }
    Ok(exit::OK)
}

/// A stop as the command's failure (for steps that return a value when they go on).
fn stopped_err<T>(stop: ops::Stop) -> Result<T, Failure> {
    match stopped(stop) {
        Ok(code) => Err(Failure {
            code,
            message: "nothing changed".into(),
        }),
        Err(f) => Err(f),
    }
}

/// `warren export QUEUE -o FILE`: every message of the head of the queue, whole bodies.
pub async fn export(
    c: &ConnArgs,
    queue: &str,
    output: &Path,
    limit: usize,
) -> Result<i32, Failure> {
    let s = open(c).await?;
    let page = read_with_consent(c, |consent| {
        s.browse_with_cap(queue, limit, usize::MAX, consent)
    })
    .await?;
    let header = SnapshotHeader {
        queue: queue.to_string(),
        vhost: s.vhost().to_string(),
        exported_at: jiff::Timestamp::now().to_string(),
        source: format!("RabbitMQ {}", s.handle.overview.rabbitmq_version),
    };
    let text = snapshot::write(&header, &page.messages);
    std::fs::write(output, text)
        .map_err(|e| Failure::failed(format!("cannot write {}: {e}", output.display())))?;
    crate::errln!(
        "exported {} message(s) from {} to {}",
        page.messages.len(),
        one_line(queue, 80),
        output.display()
    );
    // Everything ready at the start, in a queue that held something else.
    if let end @ crate::domain::read_end::ReadEnd::Changed { .. } = page.end() {
        crate::errln!("warren: {}", one_line(&end.text(), 600));
    }
    if page.messages.len() as u64 > 0
        && (page.messages.len() as u64) < page.queue_depth_at_start
        && page.messages.len() < limit
    {
        crate::errln!(
            "warren: the queue held {} at the start; the rest could not be read safely",
            page.queue_depth_at_start
        );
        return Ok(exit::FAILED);
    }
    Ok(exit::OK)
}

/// `warren` with no command: the terminal UI on the configured broker.
pub async fn tui(c: &ConnArgs) -> Result<i32, Failure> {
    // Before any password command runs for a UI that cannot start.
    need_terminal()?;
    let prepared = prepare_tui(c)?;
    let unlock = prepared.overrides.clone();
    let tui = Tui {
        read_only: c.read_only,
        settings: prepared.settings,
        commands: prepared.commands,
        contexts: prepared.contexts,
        unlock: Some(unlock),
    };
    run_tui(Source::Broker(prepared.overrides), tui).await
}

/// What the terminal UI settles while the terminal is still the shell's.
#[derive(Debug)]
pub struct Prepared {
    /// What the worker connects with: it takes `password_command` answers from
    /// `overrides.unlocked` and never runs one itself.
    pub overrides: Overrides,
    pub settings: Option<config::Settings>,
    pub commands: Vec<crate::tui::custom::CustomCommand>,
    /// The config file's contexts, for the TUI's picker and Tab completion.
    pub contexts: Vec<crate::tui::picker::ContextChoice>,
}

/// Everything the terminal UI needs before it takes the terminal. The starting context's
/// `password_command` runs here: a password manager that prompts needs a normal terminal, and
/// the UI's raw mode and alternate screen would swallow its prompt and its keys. A context
/// first opened later with `:ctx` runs its command then, with the terminal handed back for it
/// (`tui::run`), rather than every context's at startup: an operator expects one prompt for the
/// context he opens, and a vault records each read of a production secret he did not ask for
/// (`--context '*'` asks for every one: each runs here, one after the other).
/// A configuration that does not load, or a password command that fails, is the worker's to
/// report on screen; a custom command's key that Warren already uses is refused here.
pub fn prepare_tui(c: &ConnArgs) -> Result<Prepared, Failure> {
    let mut o = overrides(c);
    let cfg = config::Config::read(o.config_path.as_deref()).ok();
    let commands = custom_commands(cfg.as_ref())?;
    let unlocked = config::Unlocked::default();
    match (o.context_scope(), &cfg) {
        // Every context at once, asked for on the command line: each context's command runs
        // here, in the file's order (the worker never runs one: a context left locked is shown
        // unreached, with how to open it).
        (Some(config::ContextScope::EveryContext), Some(cfg)) => {
            for name in cfg.every_context().unwrap_or_default() {
                let one = Overrides {
                    context: Some(name),
                    ..o.clone()
                };
                let _ = unlocked.unlock(&one);
            }
        }
        _ => {
            let _ = unlocked.unlock(&o);
        }
    }
    o.unlocked = Some(unlocked);
    let contexts = cfg.as_ref().map_or_else(Vec::new, |c| {
        c.contexts
            .iter()
            .map(|(name, ctx)| crate::tui::picker::ContextChoice {
                name: name.clone(),
                label: ctx.label.clone().filter(|l| !l.trim().is_empty()),
            })
            .collect()
    });
    Ok(Prepared {
        overrides: o,
        settings: cfg.and_then(|c| c.settings().ok()),
        commands,
        contexts,
    })
}

/// The config's `[[commands]]`, checked against the key table.
fn custom_commands(
    cfg: Option<&config::Config>,
) -> Result<Vec<crate::tui::custom::CustomCommand>, Failure> {
    let Some(cfg) = cfg else {
        return Ok(Vec::new());
    };
    crate::tui::custom::from_config(&cfg.commands).map_err(|e| {
        let path = cfg
            .path
            .as_ref()
            .map_or_else(|| "the config".to_string(), |p| p.display().to_string());
        Failure::usage(format!("{path}: {e}"))
    })
}

/// `warren open FILE`: the terminal UI on a snapshot, read-only.
pub async fn open_snapshot(c: &ConnArgs, files: &[std::path::PathBuf]) -> Result<i32, Failure> {
    let snapshots = files
        .iter()
        .map(|f| read_snapshot(f))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = config::Config::read(c.config.as_deref()).ok();
    let commands = custom_commands(cfg.as_ref())?;
    let tui = Tui {
        read_only: true,
        commands,
        ..Tui::default()
    };
    run_tui(Source::Snapshot(snapshots), tui).await
}

fn need_terminal() -> Result<(), Failure> {
    if std::io::stdout().is_terminal() {
        return Ok(());
    }
    Err(Failure::usage(
        "the terminal UI needs a terminal; for scripts use `warren queues`, `show` or `groups`",
    ))
}

/// What the terminal UI starts with besides its source.
#[derive(Default)]
struct Tui {
    read_only: bool,
    settings: Option<config::Settings>,
    commands: Vec<crate::tui::custom::CustomCommand>,
    contexts: Vec<crate::tui::picker::ContextChoice>,
    unlock: Option<Overrides>,
}

async fn run_tui(source: Source, tui: Tui) -> Result<i32, Failure> {
    let Tui {
        read_only,
        settings,
        commands,
        contexts,
        unlock,
    } = tui;
    need_terminal()?;
    let (cmd_tx, cmd_rx) = tokio::sync::mpsc::channel(64);
    let (ev_tx, ev_rx) = tokio::sync::mpsc::channel(256);
    let worker = tokio::spawn(crate::worker::run(source, cmd_rx, ev_tx));
    let mut state = crate::tui::State::new(
        jiff::Timestamp::now(),
        read_only,
        crate::tui::Theme::from_env(),
    );
    state.settings.custom_commands = commands;
    state.settings.contexts = contexts;
    // [browse] and [replay] are the configuration file's, whichever context is open.
    if let Some(settings) = settings {
        state.settings.browse_limit = settings.browse.page_size;
        state.settings.conventions = settings.conventions;
        if let Some(rate) = settings.replay.rate {
            state.settings.replay_rate = rate;
        }
        state.settings.canary_above = settings.replay.canary_above;
        state.settings.canary_size = settings.replay.canary_size;
        state.settings.canary_wait = settings.replay.canary_wait;
    }
    let result = crate::tui::run::run(ev_rx, cmd_tx, state, unlock).await;
    // The UI dropped its sender: the worker settles any replay in flight and ends.
    let code = crate::tui::stop::settle(
        worker,
        crate::tui::run::stopped_by(&result),
        exit::OK,
        exit::FAILED,
    )
    .await;
    match result {
        // Nothing was ever shown: said as the commands say it, with their exit code.
        Ok(crate::tui::run::Ending::Quit {
            unreached: Some(why),
        }) => Err(Failure::broker(format!(
            "the broker was never reached: {why}"
        ))),
        Ok(_) => Ok(code),
        Err(e) => Err(Failure::failed(format!("{e:#}"))),
    }
}

/// `warren demo`.
pub async fn demo(c: &ConnArgs) -> Result<i32, Failure> {
    let mut o = overrides(c);
    let vhost = o.vhost.take().unwrap_or_else(|| "warren-demo".to_string());
    let (_, target) = config::load(&o).map_err(|e| Failure::usage(e.to_string()))?;
    // The demo builds through management and checks through AMQP: both must be one broker.
    if target.amqp_urls.is_empty() {
        return Err(Failure::usage(target.no_amqp_url()));
    }
    let mgmt = crate::broker::management::Management::new(&target)
        .map_err(|e| Failure::broker(e.to_string()))?;
    let overview = mgmt
        .overview()
        .await
        .map_err(|e| Failure::broker(e.to_string()))?;
    crate::broker::cluster::verify(&target.amqp_urls, &overview, mgmt.active_url())
        .await
        .map_err(Failure::broker)?;
    let mut report = crate::demo::build(&target, &vhost)
        .await
        .map_err(|e| Failure::broker(e.to_string()))?;
    report.reach = reach_args(c);
    crate::outln!("{report}");
    Ok(exit::OK)
}

/// The options that reached the broker, for a follow-up command that reaches it too: the
/// config file and context as given, the URLs without their credentials (the password is the
/// user's to give again; the environment's variables still apply).
fn reach_args(c: &ConnArgs) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(p) = &c.config {
        out.extend(["--config".to_string(), p.display().to_string()]);
    }
    if let Some(x) = &c.context {
        out.extend(["--context".to_string(), x.clone()]);
    }
    if let Some(u) = &c.management_url {
        out.extend(["--management-url".to_string(), config::redact_url(u)]);
    }
    if let Some(u) = &c.amqp_url {
        out.extend(["--amqp-url".to_string(), config::redact_url(u)]);
    }
    out
}

/// `--group` and `--filter` as a selection (both must hold); neither: all.
/// The selection `--group` (under `--by`) and `--filter` name, as replay, archive, restore and
/// discard take it.
pub(crate) async fn selection_of(
    s: &Session,
    group: Option<&str>,
    by: GroupBy,
    filter: Option<Filter>,
) -> Result<Selection, Failure> {
    let mut parts = Vec::new();
    if let Some(g) = group {
        // The endpoint is past a wait queue: the vhost's retry loops say which queues are.
        let waits = if by == GroupBy::Endpoint {
            WaitQueues::from_discovery(&s.discover().await.map_err(broker_failure)?)
        } else {
            WaitQueues::default()
        };
        parts.push(Selection::Group(GroupChoice {
            by,
            name: g.to_string(),
            waits,
        }));
    }
    if let Some(f) = filter {
        parts.push(Selection::Filter(f));
    }
    Ok(match parts.len() {
        0 => Selection::All,
        1 => parts.remove(0),
        _ => Selection::AllOf(parts),
    })
}

/// Asks on the terminal whether to `verb` them: typing the count when `typed`, else y/N.
pub(crate) fn confirm_to(count: u64, verb: &str, typed: bool) -> bool {
    let prompt = if typed {
        format!("Type {count} to {verb} them: ")
    } else {
        let mut v = verb.to_string();
        if let Some(first) = v.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        format!("{v} them? [y/N] ")
    };
    crate::err!("{prompt}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    let answer = line.trim();
    if typed {
        answer == count.to_string()
    } else {
        matches!(answer, "y" | "Y" | "yes")
    }
}

pub async fn replay(c: &ConnArgs, a: &ReplayArgs) -> Result<i32, Failure> {
    let filter = parse_filter(a.pick.filter.as_deref())?;
    if let Some(r) = a.rate
        && !(r.is_finite() && r > 0.0)
    {
        return Err(Failure::usage(
            "--rate must be a positive number of messages per second",
        ));
    }
    let mut steps = crate::broker::steps::Steps::new("replay command");
    let s = open(c).await?;
    steps.done("session");
    let selection = selection_of(&s, a.pick.group.as_deref(), a.pick.by, filter.clone()).await?;
    let spec = ReplaySpec {
        selection,
        limit: a.pick.limit,
        rate: a
            .rate
            .or(s.handle.target.settings.replay.rate.map(f64::from)),
        to: a.to.clone(),
        allow_fan_out: a.allow_fan_out,
        keep_attempts: a.keep_attempts,
        clear_expiry: a.clear_expiry,
        strip_failure_stamp: a.strip_failure_stamp,
        consent: consent(c),
        max_backlog: a.max_backlog,
        protocol: a.protocol,

        ..ReplaySpec::all_of(
            &a.queue,
            a.pick
                .window
                .unwrap_or(s.handle.target.settings.replay.window),
        )
    };
    let req = ops::replay::ReplayRequest {
        spec,
        dry_run: a.dry_run,
        look_first: false,
        unaudited: a.no_audit.then(|| "--no-audit".to_string()),
        filter: filter.as_ref().map(|f| f.to_string()),
        group: a.pick.group.as_ref().map(|g| {
            GroupChoice {
                by: a.pick.by,
                name: g.clone(),
                waits: WaitQueues::default(),
            }
            .audit_label()
        }),
        canary: a.canary.map(|size| CanaryRule {
            size,
            wait: a
                .canary_wait
                .unwrap_or(s.handle.target.settings.replay.canary_wait),
            tolerance: a.canary_tolerance,
        }),
        edit: a.edit.then_some(ops::replay::EditArchive {
            local: a.local,
            create: a.create_archive,
        }),
    };
    let mut front = CliFront::new(c, a.yes, a.json).of(&s);
    let mut ready = match ops::replay::prepare(&s, req, &mut front).await {
        Ok(r) => r,
        Err(stop) => return stopped(stop),
    };
    let result = drive(a.json, |cancel_rx, on_progress| {
        ready.run(cancel_rx, on_progress)
    })
    .await;
    let notes = ready.finish(&result).await;
    report_run(
        result,
        notes,
        a.json,
        (crate::domain::run::RunKind::Replay, None),
    )
}

/// An operation that stopped before anything moved, as the command's exit.
pub(crate) fn stopped(stop: ops::Stop) -> Result<i32, Failure> {
    match stop {
        ops::Stop::DryRun => Ok(exit::OK),
        // The front end said "nothing moved" when the operator said no.
        ops::Stop::Declined => Ok(exit::FAILED),
        ops::Stop::Unanswered(question) => Err(Failure::failed(format!(
            "{question}: answer yes on a terminal, pass --create-audit-stream, or set create_audit_stream = true in the context; nothing changed"
        ))),
        ops::Stop::Refused(r) => Err(refused(r)),
        ops::Stop::Usage(why) => Err(Failure::usage(why)),
        ops::Stop::Broker(why) => Err(Failure::broker(why)),
        ops::Stop::ReadCost { queue, text } => {
            Err(broker_failure(SessionError::NeedsConsent { queue, text }))
        }
    }
}

/// A refusal as the command's failure, decided by its kind, never by its words: each exits 1
/// (the man page's "a read-only refusal; a redirect refused …"), with its words on stderr.
pub(crate) fn refused(r: ops::Refusal) -> Failure {
    use ops::Refusal as R;
    // No wildcard: a new kind of refusal decides its exit code here.
    let code = match &r {
        R::ReadOnly { .. }
        | R::AutoDelete { .. }
        | R::Store { .. }
        | R::NothingSelected { .. }
        | R::TooManyToEdit { .. }
        | R::NotReadAgain { .. }
        | R::Plan { .. }
        | R::Target { .. }
        | R::Archive(_)
        | R::ArchiveNotCreated
        | R::OriginalsNotKept { .. }
        | R::CannotAsk { .. }
        | R::Redirect(_)
        | R::NotRedirected { .. }
        | R::NoteNotKept { .. }
        | R::Said(_) => exit::FAILED,
    };
    Failure {
        code,
        message: r.to_string(),
    }
}

/// Runs one engine job (`start` is given the cancel signal and the progress reporter) with
/// progress on stderr, or as JSON lines: the first signal settles (the engine bounds that); a
/// second one ends the run at once; if even that does not return soon, the run is reported
/// from what the progress knew, marked as forced.
pub(crate) async fn drive<F, Fut>(json: bool, start: F) -> Result<Summary, SessionError>
where
    F: FnOnce(tokio::sync::watch::Receiver<bool>, Box<dyn FnMut(&Progress) + Send>) -> Fut,
    Fut: std::future::Future<Output = Result<Summary, SessionError>>,
{
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let mut signals = signals();
    let last = std::sync::Arc::new(std::sync::Mutex::new(Progress::default()));
    let seen = last.clone();
    let mut shown = 0usize;
    let run = start(
        cancel_rx,
        Box::new(move |p: &Progress| {
            let was = seen
                .lock()
                .map(|mut l| std::mem::replace(&mut *l, p.clone()).blocked)
                .unwrap_or_default();
            if was != p.blocked {
                match (&p.blocked, json) {
                    (Some(why), true) => print_line(&json!({"event": "blocked", "reason": why})),
                    (None, true) => print_line(&json!({"event": "unblocked"})),
                    (Some(why), false) => crate::errln!(
                        "\n  broker blocked publishing ({}): waiting; Ctrl-C to stop",
                        one_line(why, 200)
                    ),
                    (None, false) => crate::errln!("\n  broker unblocked publishing: going on"),
                }
            }
            if json {
                let backlog = p
                    .backlog
                    .as_ref()
                    .map(|w| json!({"queue": w.queue, "ready": w.ready, "max": w.max}));
                print_line(
                    &json!({"event": "progress", "moved": p.moved, "returned": p.returned, "failed": p.failed, "remaining": p.remaining, "rate": p.rate, "eta_secs": p.eta.map(|d| d.as_secs()), "blocked": p.blocked, "waiting_for_backlog": backlog, "canary": p.canary.as_ref().map(|c| c.to_string())}),
                );
            } else if let Some(c) = &p.canary {
                crate::err!("\r  {c}   ");
            } else {
                let waiting = p.backlog.as_ref().map_or(String::new(), |w| {
                    format!(
                        "  waiting: {} holds {} ready, max {}",
                        one_line(&w.queue, 60),
                        w.ready,
                        w.max
                    )
                });
                let line = format!(
                    "  moved {}  returned {}  failed {}  remaining {}  {:.0}/s  ETA {}{waiting}   ",
                    p.moved,
                    p.returned,
                    p.failed,
                    p.remaining,
                    p.rate,
                    p.eta.map_or("-".into(), |d| format!("{}s", d.as_secs()))
                );
                // The line is rewritten in place: padded to the last one's width, so the end of
                // a wait leaves nothing of it behind.
                let width = line.chars().count();
                crate::err!("\r{line:<shown$}");
                shown = width;
            }
        }),
    );
    tokio::pin!(run);
    let mut count = 0;
    let mut backstop: Option<tokio::time::Instant> = None;
    let result = loop {
        tokio::select! {
            r = &mut run => break Some(r),
            Some(name) = signals.recv() => {
                count += 1;
                if count == 1 {
                    crate::errln!("\nstopping ({name}): settling what is in flight (at most a few seconds); {name} again stops at once");
                } else {
                    crate::errln!("\nstopping now ({name}): unacknowledged messages go back to the dead-letter queue when the connection closes");
                    backstop.get_or_insert(tokio::time::Instant::now() + FORCE_GRACE);
                }
                let _ = cancel_tx.send(true);
            }
            () = async { match backstop { Some(b) => tokio::time::sleep_until(b).await, None => std::future::pending().await } } => break None,
        }
    };
    if !json {
        crate::errln!();
    }
    result.unwrap_or_else(|| {
        let p = last.lock().map(|p| p.clone()).unwrap_or_default();
        Ok(unreported_run(p))
    })
}

/// A run that did not report back after the second signal, from its last progress: every
/// moved message may also still be in the DLQ, and which ones moved is not known.
fn unreported_run(p: crate::broker::replay::Progress) -> crate::broker::replay::Summary {
    crate::broker::replay::Summary {
        counts: crate::domain::engine::Tally {
            moved: p.moved,
            returned: p.returned,
            failed: p.failed,
            duplicated: p.moved,
            forced: Some(
                "stopped at once by a second signal; message ids unknown (the run did not report them in time)"
                    .into(),
            ),
            ..Default::default()
        },
        moved_ids: Default::default(),
        progress: p,
        depth_at_start: 0,
        replayed_before: 0,
        planned_unread: false,
        left_in_dlq: None,
        held_elsewhere: 0,
        canary: None,
        carrier: Default::default(),
        stop: crate::broker::replay::StopReason::Cancelled,
        reconnected: Vec::new(),
    }
}

/// How long after a second signal the run may take to return before the process ends anyway.
pub(crate) const FORCE_GRACE: Duration = Duration::from_secs(3);

/// Ctrl-C, SIGTERM and SIGHUP, each as its name, for as long as the receiver lives.
pub(crate) fn signals() -> tokio::sync::mpsc::UnboundedReceiver<&'static str> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                while tokio::signal::ctrl_c().await.is_ok() {
                    if tx.send("Ctrl-C").is_err() {
                        return;
                    }
                }
                return;
            };
            loop {
                let name = tokio::select! {
                    r = tokio::signal::ctrl_c() => match r { Ok(()) => "Ctrl-C", Err(_) => return },
                    _ = term.recv() => "SIGTERM",
                    _ = hup.recv() => "SIGHUP",
                };
                if tx.send(name).is_err() {
                    return;
                }
            }
        }
        #[cfg(not(unix))]
        while tokio::signal::ctrl_c().await.is_ok() {
            if tx.send("Ctrl-C").is_err() {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::rights::{Act, ReadOnly};
    use ops::Refusal;

    /// A refusal exits 1 whatever its words, and says them: read-only by the broker's word
    /// too, though "refused" is in words the broker's own failures (exit 3) use.
    #[test]
    fn a_refusal_exits_one_by_its_kind_with_its_words() {
        for r in [
            Refusal::ReadOnly {
                act: Act::Replay,
                why: ReadOnly::Broker("the broker refused a trial publish".into()),
            },
            Refusal::AutoDelete {
                queue: "tmp".into(),
                verb: "discard",
            },
            Refusal::NotRedirected { from: "a".into() },
            Refusal::Said("the broker refused".into()),
        ] {
            let text = r.to_string();
            let f = stopped(ops::Stop::Refused(r)).expect_err("a refusal fails");
            assert_eq!((f.code, f.message), (exit::FAILED, text));
        }
    }
}
