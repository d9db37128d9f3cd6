//! The command-line definition (clap). Also the source of the shell completions and man page.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::domain::grouping::GroupBy;

#[derive(Debug, Parser)]
#[command(
    name = "warren",
    version,
    about = "Find RabbitMQ dead-letter queues, explain why each message died, group the failures, and replay them safely.",
    long_about = "Warren reads RabbitMQ dead-letter queues without losing a message, explains each \
                  dead letter in one sentence (x-death, MassTransit, Spring, NServiceBus, …), groups \
                  failures, and replays the right messages back to where they failed.\n\n\
                  With no command it opens the terminal UI."
)]
pub struct Cli {
    #[command(flatten)]
    pub conn: ConnArgs,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// How to reach the broker; shared by every command.
#[derive(Debug, Args, Clone, Default)]
pub struct ConnArgs {
    /// Configuration file (default: the platform's config dir, e.g. ~/.config/warren/config.toml).
    #[arg(long, global = true, value_name = "PATH", env = "WARREN_CONFIG")]
    pub config: Option<PathBuf>,

    /// Named context (broker or cluster) from the configuration file; `*` for every context at
    /// once (`queues`, `watch`, the terminal UI).
    #[arg(long, global = true, value_name = "NAME", env = "WARREN_CONTEXT")]
    pub context: Option<String>,

    /// AMQP URL for one-off use; credentials in the URL are allowed.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "WARREN_AMQP_URL",
        hide_env_values = true
    )]
    pub amqp_url: Option<String>,

    /// Management API URL for one-off use; credentials in the URL are allowed.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "WARREN_MANAGEMENT_URL",
        hide_env_values = true
    )]
    pub management_url: Option<String>,

    /// Virtual host (default: the context's, else "/"); `*` for every vhost (`queues`, `watch`).
    #[arg(long, global = true, value_name = "NAME", env = "WARREN_VHOST", value_parser = vhost_name)]
    pub vhost: Option<String>,

    /// Look, never touch: no replay, no publishing channel is ever opened.
    #[arg(long, global = true)]
    pub read_only: bool,

    /// Accept that reading a quorum queue again spends deliveries of its limit (Warren asks on
    /// a terminal, and refuses without this flag elsewhere). Never past the safety margin.
    #[arg(long, global = true)]
    pub read_again: bool,

    /// Create the broker's audit stream (the context's `audit_stream`, default warren.audit)
    /// when it is missing, without asking: every replay and protect is recorded there too, for
    /// the whole rota. Needs configure permission. Same as `create_audit_stream = true`.
    #[arg(long, global = true)]
    pub create_audit_stream: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the dead-letter queues of the vhost (`--vhost '*'`: of every vhost), most urgent
    /// first: depth, growth, age of the oldest dead letter, the last arrival, consumers on the
    /// queues that feed it.
    Queues {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
        /// Also list ordinary queues.
        #[arg(long)]
        all: bool,
        /// Order: urgency (growing first, then depth), depth, growth, age, last, name.
        #[arg(long, default_value = "urgency", value_parser = super::triage::sort)]
        sort: crate::domain::urgency::SortBy,
    },
    /// Follow every dead-letter queue of the scope and print what changes (new dead letters, a
    /// new failure group, a threshold crossed); `--once` for cron and monitoring checks.
    Watch(WatchArgs),
    /// Browse a dead-letter queue and explain each message (messages stay where they are).
    Show {
        /// The queue to read (or use --snapshot).
        #[arg(required_unless_present = "snapshot", value_parser = queue_name)]
        queue: Option<String>,
        /// Read a snapshot file made by `warren export` instead of a broker.
        #[arg(long, value_name = "FILE", conflicts_with = "queue")]
        snapshot: Option<PathBuf>,
        /// How many messages from the head of the queue.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per line per message.
        #[arg(long)]
        json: bool,
        /// Only messages that match this filter query (the filter language: `warren man`).
        // A query may start with '-' (a negation: `--filter '-exception:x'`).
        #[arg(long, value_name = "QUERY", allow_hyphen_values = true, value_parser = filter_query)]
        filter: Option<String>,
    },
    /// Group a dead-letter queue's messages: by failure fingerprint, or by what matters now
    /// (--by exception|type|origin|reason|endpoint), with the notes attached to each group.
    Groups {
        /// The queue to read (or use --snapshot).
        #[arg(required_unless_present = "snapshot", value_parser = queue_name)]
        queue: Option<String>,
        /// Read a snapshot file made by `warren export` instead of a broker.
        #[arg(long, value_name = "FILE", conflicts_with = "queue")]
        snapshot: Option<PathBuf>,
        #[arg(long, default_value_t = 10_000)]
        limit: usize,
        #[arg(long)]
        json: bool,
        /// What makes a group: fingerprint (how it failed, the default), exception (the
        /// exception type), type (the message type, task or actor), origin (the queue it failed
        /// in), reason (the broker's x-death reason), endpoint (where a replay delivers it).
        #[arg(long, value_name = "MODE", default_value = "fingerprint", value_parser = group_by)]
        by: GroupBy,
        /// Attach a note to a group (its key, or its value as listed), kept until the group is
        /// gone: `--note 1a2b3c4d5e6f7a8b 'carrier outage, replay after 10:00'`. An empty text
        /// removes the note.
        #[arg(long, num_args = 2, value_names = ["GROUP", "TEXT"], conflicts_with = "snapshot", allow_hyphen_values = true)]
        note: Option<Vec<String>>,
    },
    /// Move dead letters back to where they failed: confirmed, throttled, on the record.
    Replay(ReplayArgs),
    /// Save a queue's messages losslessly (properties, typed headers, body bytes) to a file.
    Export {
        #[arg(value_parser = queue_name)]
        queue: String,
        /// The snapshot file to write (one JSON object per line).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// At most this many messages from the head of the queue.
        #[arg(long, default_value_t = 100_000)]
        limit: usize,
    },
    /// Open snapshots in the terminal UI: read-only, no broker needed.
    Open {
        /// Files made by `warren export`, one queue each (e.g. assets/demo/*.jsonl).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Build a demo topology with real dead letters in its own vhost on the connected broker
    /// (the vhost from --vhost, default "warren-demo"; it is deleted and built again).
    Demo,
    /// Print shell completions.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    Man,
    /// Make a quorum dead-letter queue free to read: a policy that lifts its delivery limit
    /// (keeping every key of the policy in force), on the record. Refused in read-only mode.
    Protect {
        queue: String,
        /// Show the policy and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Redirects: replays that would go to one queue go to another (an endpoint renamed, split
    /// or retired). Kept on the broker beside the audit stream (`warren.redirects`), with who
    /// set each and why, and on the record; every replay plan a redirect changes says so.
    Redirect {
        #[command(subcommand)]
        command: RedirectCommand,
    },
    /// Take dead letters out of the way without losing them: into the vhost's archive stream
    /// (`warren.archive`), kept byte for byte with who, when and why. `warren archive list`
    /// shows what it holds.
    Archive(ArchiveArgs),
    /// Put archived messages back into the dead-letter queue they came from (or, with --replay,
    /// straight to where they failed, as a replay would).
    Restore(RestoreArgs),
    /// Delete dead letters for good, after writing a lossless snapshot of exactly those.
    Discard(DiscardArgs),
    /// The record of every replay, archive, restore, discard and protect: this machine's and
    /// the broker's audit stream, merged, with what came back after each replay.
    Audit {
        #[arg(long)]
        json: bool,
        /// Only this machine's records: do not contact the broker.
        #[arg(long)]
        local: bool,
        /// How many records, newest first.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

#[derive(Debug, Args, Clone)]
pub struct WatchArgs {
    /// A threshold that raises an alert: depth>N, age>DURATION (90s, 30m, 1h, 2d),
    /// growth>N/min, new-group. Repeat for several.
    #[arg(long, value_name = "THRESHOLD", value_parser = super::triage::alert)]
    pub alert: Vec<crate::domain::watch::Threshold>,
    /// Run this shell command on each alert, the alert as one JSON object on its standard input.
    #[arg(long, value_name = "CMD")]
    pub exec: Option<String>,
    /// Look once and exit: 0 all clear, 1 an alert, 3 broker unreachable.
    #[arg(long)]
    pub once: bool,
    /// One JSON object per line (for bots).
    #[arg(long)]
    pub json: bool,
    /// `prometheus` (with --once): the text format, for a node exporter's textfile collector.
    #[arg(long, value_enum, default_value = "text")]
    pub format: WatchFormat,
    /// Seconds between looks.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub interval: u64,
    /// Messages read per queue for its failure groups (only where a read is free).
    #[arg(long, default_value_t = 1_000)]
    pub limit: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchFormat {
    Text,
    Prometheus,
}

#[derive(Debug, Args, Clone)]
pub struct ReplayArgs {
    /// The dead-letter queue to replay from.
    #[arg(value_parser = queue_name)]
    pub queue: String,
    #[command(flatten)]
    pub pick: Pick,
    /// Messages per second, from 0.01 to 1000000 (default: as fast as confirms allow).
    #[arg(long, value_name = "PER_SEC", value_parser = rate)]
    pub rate: Option<f64>,
    /// Pause publishing while the queue the messages come to rest in holds N ready messages
    /// or more; go on as its consumer drains it (with --rate, the slower wins).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_backlog: Option<u64>,
    /// Send every selected message to this queue (through the default exchange).
    #[arg(long, value_name = "QUEUE", value_parser = queue_name)]
    pub to: Option<String>,
    /// Replay the first N selected messages first and wait until they were consumed or came
    /// back dead; more than --canary-tolerance back stops the replay (exit 1), the rest
    /// untouched.
    #[arg(long, value_name = "N")]
    pub canary: Option<u64>,
    /// How long the canary waits for its messages: `30s`, `2m` (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = canary_wait, requires = "canary")]
    pub canary_wait: Option<std::time::Duration>,
    /// Canary messages that may come back dead without stopping the replay.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "canary")]
    pub canary_tolerance: u64,
    /// Allow a publish through an exchange that reaches more than one queue.
    #[arg(long)]
    pub allow_fan_out: bool,
    /// Leave retry counters and death headers exactly as they are.
    #[arg(long)]
    pub keep_attempts: bool,
    /// Also replay messages whose framework deadline has passed (Celery's `expires`), which
    /// their worker would otherwise discard unrun: the deadline is removed (the `expires` header
    /// and the `expiration` property) and the audit records it. Without it they stay in the DLQ.
    #[arg(long)]
    pub clear_expiry: bool,
    /// Symfony Messenger (JSON serializer): remove `SentToFailureTransportStamp`, so a message
    /// that fails all its retries again goes back to the failure transport; Symfony 5.4 drops
    /// one that still carries the stamp.
    #[arg(long)]
    pub strip_failure_stamp: bool,
    /// The protocol the replay reads and publishes with: `auto` (AMQP 1.0 on RabbitMQ 4 when
    /// the messages came from AMQP 1.0 clients, so their consumers get them unchanged; else
    /// AMQP 0.9.1), `amqp091` or `amqp10`.
    #[arg(long, value_name = "PROTOCOL", default_value = "auto")]
    pub protocol: crate::domain::amqp10::carrier::Choice,
    /// Show the plan and touch nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Edit, then replay: the selected messages (at most 100) open in $VISUAL or $EDITOR as one
    /// document; the ones you change are replayed as edited, each original archived first. A
    /// document saved unchanged or emptied moves nothing.
    #[arg(long, conflicts_with = "no_audit")]
    pub edit: bool,
    /// With --edit: create the archive stream for the originals if it is missing, without
    /// asking (a terminal asks first).
    #[arg(long, requires = "edit")]
    pub create_archive: bool,
    /// With --edit: keep the originals in the local archive file, not in the stream.
    #[arg(long, requires = "edit")]
    pub local: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// Progress and summary as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Replay without writing the audit record (only when Warren's store cannot be opened).
    #[arg(long)]
    pub no_audit: bool,
}

/// Which messages of a queue: shared by replay, archive, restore and discard.
#[derive(Debug, Args, Clone, Default)]
pub struct Pick {
    /// Only messages that match this filter query.
    // A query may start with '-' (a negation: `--filter '-exception:x'`).
    #[arg(long, value_name = "QUERY", allow_hyphen_values = true, value_parser = filter_query)]
    pub filter: Option<String>,
    /// Only messages of this group, as `warren groups` lists it: its key (by default a
    /// failure fingerprint) or its value (`--by reason --group rejected`).
    #[arg(long, value_name = "KEY")]
    pub group: Option<String>,
    /// The grouping --group names a group of (see `warren groups --by`).
    #[arg(long, value_name = "MODE", default_value = "fingerprint", value_parser = group_by, requires = "group")]
    pub by: GroupBy,
    /// At most this many messages.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Messages looked at from the head, at most (default: replay.window, 10,000).
    #[arg(long, value_name = "N", value_parser = window)]
    pub window: Option<usize>,
}

#[derive(Debug, Args, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ArchiveArgs {
    #[command(subcommand)]
    pub list: Option<ArchiveCommand>,
    /// The dead-letter queue to archive from.
    #[arg(required = true, value_parser = queue_name)]
    pub queue: Option<String>,
    #[command(flatten)]
    pub pick: Pick,
    /// Why (kept with each message as warren-archive-reason).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Create the archive stream if it is missing, without asking (a terminal asks first).
    #[arg(long)]
    pub create_archive: bool,
    /// Keep the archive in a snapshot file in Warren's data directory, not in a stream.
    #[arg(long)]
    pub local: bool,
    /// Messages per second (default: as fast as confirms allow).
    #[arg(long, value_name = "PER_SEC", value_parser = rate)]
    pub rate: Option<f64>,
    /// Show what would be archived and touch nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// Plan, progress and summary as JSON lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand, Clone)]
pub enum RedirectCommand {
    /// Replays that would go to FROM go to TO instead. Refused in read-only mode, and when TO
    /// does not exist or is a wait queue. The first one creates the redirect stream (asked on
    /// a terminal; --create-audit-stream allows it).
    Add {
        #[arg(value_parser = queue_name)]
        from: String,
        #[arg(value_parser = queue_name)]
        to: String,
        /// Why, for the rota: shown in every plan the redirect changes.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
    /// The redirects in force, with who set each, when and why.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove FROM's redirect: its replays go to their plain target again.
    Remove {
        #[arg(value_parser = queue_name)]
        from: String,
    },
}

#[derive(Debug, Subcommand, Clone)]
pub enum ArchiveCommand {
    /// What the archive holds, explained like `show`, with who archived each message, when and
    /// why (`--groups`: grouped like `groups`).
    List {
        #[command(flatten)]
        pick: Pick,
        /// Only messages archived from this queue.
        #[arg(long, value_name = "QUEUE")]
        from: Option<String>,
        /// One line per failure group instead of one per message.
        #[arg(long)]
        groups: bool,
        /// Read the local archive file, not the stream.
        #[arg(long)]
        local: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args, Clone)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub pick: Pick,
    /// Only messages archived from this queue.
    #[arg(long, value_name = "QUEUE")]
    pub from: Option<String>,
    /// Replay them to where they failed (plan, preview, retry budget reset, confirms) instead
    /// of putting them back into their dead-letter queue.
    #[arg(long)]
    pub replay: bool,
    /// With --replay: send every one to this queue.
    #[arg(long, value_name = "QUEUE", value_parser = queue_name, requires = "replay")]
    pub to: Option<String>,
    /// With --replay: allow a publish through an exchange that reaches more than one queue.
    #[arg(long, requires = "replay")]
    pub allow_fan_out: bool,
    /// With --replay: leave retry counters and death headers as they are.
    #[arg(long, requires = "replay")]
    pub keep_attempts: bool,
    /// Restore messages that were restored before (a stream never forgets them).
    #[arg(long)]
    pub again: bool,
    /// Read the local archive file, not the stream.
    #[arg(long)]
    pub local: bool,
    /// Restore archived messages that carry no user id the broker vouched for as their
    /// archiver (archived before Warren signed its archive, or put there by someone else).
    #[arg(long)]
    pub trust_unsigned: bool,
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub yes: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct DiscardArgs {
    /// The dead-letter queue to delete from.
    #[arg(value_parser = queue_name)]
    pub queue: String,
    #[command(flatten)]
    pub pick: Pick,
    /// Where the snapshot goes (default: `discarded/` in Warren's data directory).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Delete without writing a snapshot first (personal data that must not be kept).
    #[arg(long)]
    pub no_snapshot: bool,
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask (a terminal asks for the count to be typed).
    #[arg(long)]
    pub yes: bool,
    #[arg(long)]
    pub json: bool,
}

/// The slowest and fastest `--rate` accepted: one message in 100 s, and a million a second
/// (far above what confirms allow; it only keeps the pacer's arithmetic finite).
pub const RATE_RANGE: std::ops::RangeInclusive<f64> = 0.01..=1_000_000.0;

/// AMQP names (queues, exchanges, vhosts, routing keys) are short strings: at most 255 bytes.
const MAX_NAME_BYTES: usize = 255;

fn short_name(what: &str, s: &str) -> Result<String, String> {
    if s.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{what} is {} bytes; AMQP allows {MAX_NAME_BYTES}",
            s.len()
        ));
    }
    Ok(s.to_string())
}

/// A queue name as given on the command line: at most 255 bytes.
pub fn queue_name(s: &str) -> Result<String, String> {
    short_name("the queue name", s)
}

/// `--filter`: a query that is not empty. An empty or blank one (`--filter "$UNSET"`) would
/// select every message, which is never what was meant: `discard q --filter "$UNSET" --yes`
/// would empty the queue.
pub fn filter_query(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err(
            "the filter is empty, which would select every message: give a query (FILTER LANGUAGE in `warren man`), or leave --filter out to mean every message"
                .into(),
        );
    }
    Ok(s.to_string())
}

/// `--window`: at least one message (0 would look at nothing and say nothing matched).
pub fn window(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("a window of 0 looks at no message: give at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a number of messages")),
    }
}

/// A vhost name as given on the command line: at most 255 bytes.
pub fn vhost_name(s: &str) -> Result<String, String> {
    short_name("the vhost name", s)
}

/// `--by`: one of the grouping modes.
pub fn group_by(s: &str) -> Result<GroupBy, String> {
    GroupBy::parse(s).ok_or_else(|| {
        let modes: Vec<&str> = GroupBy::ALL.iter().map(|b| b.as_str()).collect();
        format!("'{s}' is not a grouping: use one of {}", modes.join(", "))
    })
}

/// `--canary-wait`: `90s`, `2m`, or plain seconds; at least a second, at most a day.
pub fn canary_wait(s: &str) -> Result<std::time::Duration, String> {
    match crate::domain::watch::parse_duration(s.trim()) {
        Some(n) if (1..=86_400).contains(&n) => Ok(std::time::Duration::from_secs(n)),
        _ => Err(format!(
            "'{s}' is not a wait from 1s to 1d: write e.g. 30s, 2m or 1h"
        )),
    }
}

/// `--rate`: a finite number of messages per second within [`RATE_RANGE`].
pub fn rate(s: &str) -> Result<f64, String> {
    let r: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of messages per second"))?;
    if !r.is_finite() || !RATE_RANGE.contains(&r) {
        return Err(format!(
            "{s} messages per second is out of range: use {} to {}",
            RATE_RANGE.start(),
            RATE_RANGE.end()
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_finite_and_in_range() {
        assert_eq!(rate("50"), Ok(50.0));
        assert_eq!(rate("0.01"), Ok(0.01));
        assert_eq!(rate("1000000"), Ok(1_000_000.0));
        for bad in ["1e-20", "0", "-3", "NaN", "inf", "1e7", "fast", ""] {
            assert!(rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_are_at_most_255_bytes() {
        assert!(queue_name(&"q".repeat(255)).is_ok());
        let e = queue_name(&"q".repeat(300)).unwrap_err();
        assert_eq!(e, "the queue name is 300 bytes; AMQP allows 255");
        // Bytes, not characters: 128 two-byte characters are 256 bytes.
        assert!(vhost_name(&"é".repeat(128)).is_err());
    }

    #[test]
    fn an_empty_filter_or_window_is_a_usage_error() {
        for args in [
            &["warren", "discard", "dlq", "--filter", "", "--yes"][..],
            &["warren", "replay", "dlq", "--filter", "  "],
            &["warren", "archive", "dlq", "--filter="],
            &["warren", "show", "dlq", "--filter", "\t"],
            &["warren", "replay", "dlq", "--window", "0"],
        ] {
            let e = Cli::try_parse_from(args).expect_err("refused");
            assert!(e.use_stderr(), "{args:?}: a usage error (exit 2): {e}");
        }
        assert!(Cli::try_parse_from(["warren", "replay", "dlq", "--window", "1"]).is_ok());
    }

    #[test]
    fn filter_may_start_with_a_negation() {
        use clap::Parser;
        let cli = Cli::try_parse_from(["warren", "show", "dlq", "--filter", "-exception:x"])
            .expect("a negated query is a value, not an option");
        match cli.command {
            Some(Command::Show { filter, .. }) => {
                assert_eq!(filter.as_deref(), Some("-exception:x"))
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["warren", "replay", "dlq", "--filter", "-reason:expired"])
            .expect("replay takes a negated query too");
        match cli.command {
            Some(Command::Replay(r)) => {
                assert_eq!(r.pick.filter.as_deref(), Some("-reason:expired"))
            }
            other => panic!("{other:?}"),
        }
        // The `=` form, and an option after the query still parses as an option.
        let cli = Cli::try_parse_from(["warren", "show", "dlq", "--filter=-exception:x", "--json"])
            .unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Show { json: true, .. })
        ));
    }

    #[test]
    fn archive_takes_a_queue_or_list() {
        use clap::Parser;
        let cli =
            Cli::try_parse_from(["warren", "archive", "orders.dlq", "--reason", "gone"]).unwrap();
        match cli.command {
            Some(Command::Archive(a)) => {
                assert_eq!(a.queue.as_deref(), Some("orders.dlq"));
                assert_eq!(a.reason.as_deref(), Some("gone"));
                assert!(a.list.is_none());
            }
            other => panic!("{other:?}"),
        }
        let cli = Cli::try_parse_from(["warren", "archive", "list", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Archive(ArchiveArgs {
                list: Some(ArchiveCommand::List { json: true, .. }),
                ..
            }))
        ));
        assert!(Cli::try_parse_from(["warren", "archive"]).is_err());
        assert!(Cli::try_parse_from(["warren", "restore", "--to", "q"]).is_err());
    }

    #[test]
    fn clap_refuses_long_to_and_tiny_rate() {
        use clap::Parser;
        let long = "q".repeat(300);
        let e = Cli::try_parse_from(["warren", "replay", "dlq", "--to", &long]).unwrap_err();
        assert!(e.to_string().contains("300 bytes; AMQP allows 255"), "{e}");
        let e = Cli::try_parse_from(["warren", "replay", "dlq", "--rate", "1e-20"]).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        assert!(Cli::try_parse_from(["warren", "replay", "dlq", "--rate", "2.5"]).is_ok());
    }
}
