//! The command-line definition (clap). Also the source of the shell completions and man page.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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

    /// Named context (broker or cluster) from the configuration file.
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

    /// Virtual host (default: the context's, else "/").
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
    /// List the dead-letter queues of the vhost.
    Queues {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
        /// Also list ordinary queues.
        #[arg(long)]
        all: bool,
    },
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
        /// Only messages that match this filter query (see `warren help filter`).
        // A query may start with '-' (a negation: `--filter '-exception:x'`).
        #[arg(long, value_name = "QUERY", allow_hyphen_values = true)]
        filter: Option<String>,
    },
    /// Group a dead-letter queue's messages by failure fingerprint.
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
    /// The record of every replay and protect: this machine's and the broker's audit stream,
    /// merged, with what came back after each replay.
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
pub struct ReplayArgs {
    /// The dead-letter queue to replay from.
    #[arg(value_parser = queue_name)]
    pub queue: String,
    /// Move at most this many messages.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Messages per second, from 0.01 to 1000000 (default: as fast as confirms allow).
    #[arg(long, value_name = "PER_SEC", value_parser = rate)]
    pub rate: Option<f64>,
    /// Only messages that match this filter query.
    // A query may start with '-' (a negation: `--filter '-exception:x'`).
    #[arg(long, value_name = "QUERY", allow_hyphen_values = true)]
    pub filter: Option<String>,
    /// Only messages of this failure group (a fingerprint from `warren groups`).
    #[arg(long, value_name = "FINGERPRINT")]
    pub group: Option<String>,
    /// Send every selected message to this queue (through the default exchange).
    #[arg(long, value_name = "QUEUE", value_parser = queue_name)]
    pub to: Option<String>,
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
    /// Show the plan and touch nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub yes: bool,
    /// Progress and summary as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Replay without writing the audit record (only when Warren's store cannot be opened).
    #[arg(long)]
    pub no_audit: bool,
    /// Unselected messages held back at most (then the replay stops and says so).
    #[arg(long, value_name = "N")]
    pub window: Option<usize>,
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

/// A vhost name as given on the command line: at most 255 bytes.
pub fn vhost_name(s: &str) -> Result<String, String> {
    short_name("the vhost name", s)
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
            Some(Command::Replay(r)) => assert_eq!(r.filter.as_deref(), Some("-reason:expired")),
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
