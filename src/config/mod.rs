//! Where Warren connects and how it behaves: the config file (named contexts, one per broker or
//! cluster, plus global settings), command-line and environment overrides, and the resolved
//! [`Target`] the rest of the program uses. Passwords come from an environment variable or a
//! command, live in a [`Secret`], and never appear in output, logs or errors.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use percent_encoding::percent_decode_str;
use regex::Regex;
use serde::Deserialize;
use url::Url;

use crate::domain::convention::{
    Conventions, DEFAULT_ERROR_TEXT_HEADERS, DEFAULT_RETRY_COUNTER_HEADERS,
};

mod scope;
mod urls;

pub use scope::{ContextScope, VhostScope};

use urls::{UrlCredentials, Urls, urls_of, vhost_of_amqp_url};
pub use urls::{amqp_url_for, management_url_for};

/// Name of the one-off context built from `--amqp-url` / `--management-url` alone.
pub const COMMAND_LINE_CONTEXT: &str = "command-line";
/// Name of the context used when there is no config file and no URL was given.
pub const LOCAL_CONTEXT: &str = "local";

/// What the command line (clap) hands over. `WARREN_AMQP_URL` and `WARREN_MANAGEMENT_URL` are
/// read by clap into the URL fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub config_path: Option<PathBuf>,
    pub context: Option<String>,
    pub amqp_url: Option<String>,
    pub management_url: Option<String>,
    pub vhost: Option<String>,
    pub read_only: bool,
    /// Set for the terminal UI: `password_command` is never run while resolving, its answer is
    /// taken from here (see [`Unlocked`]). `None`: run it (the command line has the terminal).
    pub unlocked: Option<Unlocked>,
}

// ---------------------------------------------------------------------------------------------
// Secrets and credentials

/// A password. `Debug` and `Display` print `***`; only [`Secret::expose`] gives the text, for
/// the moment it is handed to a client library.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: Secret,
}

/// What each context's `password_command` answered, for one process. The terminal UI runs the
/// commands while it does not hold the terminal (before it starts, or with the terminal handed
/// back for a `:ctx`), so that a password manager that prompts gets a normal terminal; its worker
/// resolves contexts with [`Overrides::unlocked`] set and so only reads what is here. Each
/// context's command runs once per session, however often the worker reconnects.
#[derive(Clone, Default)]
pub struct Unlocked(Arc<Mutex<HashMap<String, Result<Secret, String>>>>);

impl Unlocked {
    fn get(&self, context: &str) -> Option<Result<Secret, String>> {
        self.0.lock().ok()?.get(context).cloned()
    }

    fn put(&self, context: &str, answer: Result<Secret, String>) {
        if let Ok(mut map) = self.0.lock() {
            map.insert(context.to_string(), answer);
        }
    }

    /// The context `overrides` name, when its password comes from a command that has not
    /// answered yet (never run, or failed). Nothing is run.
    pub fn needs(&self, overrides: &Overrides) -> Option<String> {
        let config = Config::read(overrides.config_path.as_deref()).ok()?;
        let env = |name: &str| std::env::var(name).ok();
        let asked = std::cell::RefCell::new(None);
        let _ = resolve_with(&config, overrides, &env, &|context, _| {
            if !matches!(self.get(context), Some(Ok(_))) {
                *asked.borrow_mut() = Some(context.to_string());
            }
            Err(ConfigError::PasswordLocked {
                context: context.to_string(),
            })
        });
        asked.into_inner()
    }

    /// Resolves the context `overrides` name, running its `password_command` unless it already
    /// answered, and keeps the answer (a failure too, with its reason, for the worker to report).
    pub fn unlock(&self, overrides: &Overrides) -> Result<Target, ConfigError> {
        let config = Config::read(overrides.config_path.as_deref())?;
        let env = |name: &str| std::env::var(name).ok();
        resolve_with(&config, overrides, &env, &|context, cmd| {
            if let Some(Ok(secret)) = self.get(context) {
                return Ok(secret);
            }
            let answer = run_password_command(context, cmd);
            self.put(
                context,
                answer.as_ref().map(Secret::clone).map_err(|e| match e {
                    ConfigError::PasswordCommand { reason, .. } => reason.clone(),
                    other => other.to_string(),
                }),
            );
            answer
        })
    }
}

impl fmt::Debug for Unlocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .0
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        write!(f, "Unlocked({names:?})")
    }
}

/// The same cache, not the same contents: two `Overrides` are equal when they share it.
impl PartialEq for Unlocked {
    fn eq(&self, other: &Unlocked) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Unlocked {}

// ---------------------------------------------------------------------------------------------
// The config file

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The context used when `--context` is not given.
    pub default_context: Option<String>,
    #[serde(default)]
    pub contexts: BTreeMap<String, ContextConfig>,
    #[serde(default)]
    pub discovery: DiscoveryConfig,
    #[serde(default)]
    pub browse: BrowseConfig,
    #[serde(default)]
    pub replay: ReplayConfig,
    #[serde(default)]
    pub conventions: ConventionsConfig,
    /// Custom commands on the message under the cursor in the terminal UI (`[[commands]]`).
    #[serde(default)]
    pub commands: Vec<CommandConfig>,
    /// The file this came from (`None` when no file was read).
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

/// One string or a list of them, so `management_urls = "http://…"` also works.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl Default for OneOrMany {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

impl OneOrMany {
    fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// One broker or cluster. No `password` key on purpose: a password does not belong in a file
/// that gets copied around.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// Cluster nodes' management URLs, tried in order until one answers.
    #[serde(default, alias = "management_url")]
    pub management_urls: OneOrMany,
    /// Cluster nodes' AMQP URLs, tried in order.
    #[serde(default, alias = "amqp_url")]
    pub amqp_urls: OneOrMany,
    pub vhost: Option<String>,
    #[serde(default)]
    pub read_only: bool,
    pub username: Option<String>,
    /// Name of an environment variable holding the password.
    pub password_env: Option<String>,
    /// A shell command (run with `sh -c`) whose standard output is the password.
    pub password_command: Option<String>,
    /// PEM file of extra certificate authorities for `https://` and `amqps://`.
    pub ca_file: Option<PathBuf>,
    /// The colour of the context's name in the terminal UI's header bar (`color = "red"` for
    /// production).
    pub color: Option<ContextColor>,
    /// Shown in the header bar instead of the context's name (`label = "PROD"`).
    pub label: Option<String>,
    /// The archive stream of `warren archive` (default `warren.archive`), one per vhost.
    pub archive_stream: Option<String>,
    /// Its retention, as the stream's `x-max-age` (default `30D`; `Y`, `M`, `D`, `h`, `m`, `s`).
    pub archive_max_age: Option<String>,
    /// Keep the archive in a snapshot file in Warren's data directory instead of a stream.
    #[serde(default)]
    pub archive_local: bool,
    /// Create the archive stream when it is missing without asking (scripts; a terminal asks).
    #[serde(default)]
    pub archive_create: bool,
    /// The stream on the broker that every recorded operation is also written to, so the whole
    /// rota shares one record (default `warren.audit`; `""` turns the broker record off).
    pub audit_stream: Option<String>,
    /// The audit stream's retention (`x-max-age`, RabbitMQ's units: `30D`, `12h`, `1Y`),
    /// applied when Warren creates it. Default 30 days.
    pub audit_max_age: Option<String>,
    /// Creating the audit stream needs configure permission and changes the broker, so Warren
    /// asks first on a terminal. `true`: create it without asking (scripts, the terminal UI);
    /// `false`: never create it (local record only). Unset: ask on a terminal, else don't.
    pub create_audit_stream: Option<bool>,
}

/// Where the broker's copy of the audit goes (see [`ContextConfig::audit_stream`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditSettings {
    /// `None`: the broker record is turned off for this context.
    pub stream: Option<String>,
    pub max_age: String,
    pub create: Option<bool>,
}

/// The audit stream's name unless a context names another.
pub const DEFAULT_AUDIT_STREAM: &str = "warren.audit";
/// Its retention unless a context says otherwise.
pub const DEFAULT_AUDIT_MAX_AGE: &str = "30D";

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            stream: Some(DEFAULT_AUDIT_STREAM.to_string()),
            max_age: DEFAULT_AUDIT_MAX_AGE.to_string(),
            create: None,
        }
    }
}

/// A context's colour in the terminal UI. Names only, from the 16 colours every terminal has,
/// so that the colour means the same in every terminal theme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum ContextColor {
    Red,
    Green,
    Yellow,
    Blue,
    Magenta,
    Cyan,
    White,
    Gray,
}

impl ContextColor {
    pub const ALL: [ContextColor; 8] = [
        ContextColor::Red,
        ContextColor::Green,
        ContextColor::Yellow,
        ContextColor::Blue,
        ContextColor::Magenta,
        ContextColor::Cyan,
        ContextColor::White,
        ContextColor::Gray,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ContextColor::Red => "red",
            ContextColor::Green => "green",
            ContextColor::Yellow => "yellow",
            ContextColor::Blue => "blue",
            ContextColor::Magenta => "magenta",
            ContextColor::Cyan => "cyan",
            ContextColor::White => "white",
            ContextColor::Gray => "gray",
        }
    }
}

impl TryFrom<String> for ContextColor {
    type Error = String;

    /// The message becomes the config error (with the file's line and column).
    fn try_from(name: String) -> Result<Self, Self::Error> {
        let wanted = name.trim().to_ascii_lowercase();
        let wanted = if wanted == "grey" {
            "gray".into()
        } else {
            wanted
        };
        ContextColor::ALL
            .into_iter()
            .find(|c| c.name() == wanted)
            .ok_or_else(|| {
                let names: Vec<&str> = ContextColor::ALL.iter().map(|c| c.name()).collect();
                format!(
                    "color {:?} is not a colour Warren knows; use one of {}",
                    name.chars().take(40).collect::<String>(),
                    names.join(", ")
                )
            })
    }
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DiscoveryConfig {
    /// Extra regular expressions naming dead-letter queues.
    #[serde(default)]
    pub patterns: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BrowseConfig {
    pub body_cap_bytes: Option<usize>,
    pub page_size: Option<usize>,
    pub quorum_safety_margin: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    pub window: Option<usize>,
    /// Messages per second; none means as fast as confirms allow.
    pub rate: Option<u32>,
    /// The TUI's replay modal starts with a canary above this many messages (0: never).
    pub canary_above: Option<u64>,
    /// The canary's size when the modal starts with one.
    pub canary_size: Option<u64>,
    /// How long a canary waits for its messages (`30s`, `2m`).
    pub canary_wait: Option<String>,
}

/// `[conventions]`: the header names a team's own retry ladder writes, so its messages are read
/// like a framework's. A list replaces the default for that key.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ConventionsConfig {
    /// Default `["x-retry-count", "x-retries"]`.
    pub retry_counter_headers: Option<Vec<String>>,
    /// Default `["x-last-error", "x-error", "x-exception"]`.
    pub error_text_headers: Option<Vec<String>>,
}

/// One `[[commands]]` entry: a shell command the terminal UI runs on the message under the
/// cursor, with the message's fields in environment variables (`$MESSAGE_ID`, …; see
/// `tui::custom`). The TUI checks the key against its own key table at startup.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CommandConfig {
    /// One character, e.g. "L" (Shift-L).
    pub key: String,
    /// What the help screen calls it.
    pub name: String,
    /// Run with `sh -c`; the message's fields are environment variables, never spliced in.
    pub run: String,
    /// It changes something: disabled in read-only mode.
    #[serde(default)]
    pub dangerous: bool,
}

// ---------------------------------------------------------------------------------------------
// Resolved settings

#[derive(Clone, Debug)]
pub struct BrowseSettings {
    /// Bodies longer than this are cut when read (default 1 MiB).
    pub body_cap_bytes: usize,
    /// Messages the terminal UI reads from a queue at a time (default 500; `:limit N` changes
    /// it for the session).
    pub page_size: usize,
    /// Stop browsing a quorum queue this many deliveries before its limit (default 5).
    pub quorum_safety_margin: u64,
}

#[derive(Clone, Debug)]
pub struct ReplaySettings {
    /// Unselected messages a filtered replay holds back at most (default 10,000).
    pub window: usize,
    /// Messages per second; `None` = unthrottled.
    pub rate: Option<u32>,
    /// The TUI's replay modal starts with a canary of `canary_size` above `canary_above`
    /// messages (0: never); every canary waits `canary_wait` unless told otherwise.
    pub canary_above: u64,
    pub canary_size: u64,
    pub canary_wait: std::time::Duration,
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub discovery_patterns: Vec<Regex>,
    /// `[conventions]`, resolved: what the domain reads ladders by.
    pub conventions: Conventions,
    pub browse: BrowseSettings,
    pub replay: ReplaySettings,
}

/// Where `warren archive` keeps what it takes out of a DLQ (see `domain::archive`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveSettings {
    /// The stream's name in the vhost.
    pub stream: String,
    /// The stream's `x-max-age`.
    pub max_age: String,
    /// A snapshot file in the data directory instead of the stream.
    pub local: bool,
    /// Consent, given in the configuration, to create the stream when it is missing.
    pub create: bool,
}

impl Default for ArchiveSettings {
    fn default() -> Self {
        ArchiveSettings {
            stream: crate::domain::archive::DEFAULT_STREAM.to_string(),
            max_age: crate::domain::archive::DEFAULT_MAX_AGE.to_string(),
            local: false,
            create: false,
        }
    }
}

/// A stream's `x-max-age` as RabbitMQ takes it: a positive number and one unit.
fn valid_max_age(s: &str) -> bool {
    crate::domain::archive::max_age_secs(s).is_some()
}

pub const DEFAULT_BODY_CAP_BYTES: usize = 1024 * 1024;
/// Messages the terminal UI reads from a queue at a time.
pub const DEFAULT_PAGE_SIZE: usize = 500;
pub const DEFAULT_QUORUM_SAFETY_MARGIN: u64 = 5;
pub const DEFAULT_REPLAY_WINDOW: usize = 10_000;

/// Everything needed to reach one broker. URLs carry no credentials; `Debug` and `Display` never
/// show the password.
#[derive(Clone, Debug)]
pub struct Target {
    pub context: String,
    pub management_urls: Vec<Url>,
    pub amqp_urls: Vec<Url>,
    /// Default `/`.
    pub vhost: String,
    /// Nothing may leave a queue: `--read-only` or the context's `read_only` (see
    /// `read_only_flag` for which).
    pub read_only: bool,
    /// `--read-only` was given (for saying why).
    pub read_only_flag: bool,
    pub credentials: Credentials,
    pub ca_file: Option<PathBuf>,
    /// The context's colour and label in the terminal UI (see [`ContextConfig`]).
    pub color: Option<ContextColor>,
    pub label: Option<String>,
    pub settings: Settings,
    /// The context's archive (`archive_*` keys).
    pub archive: ArchiveSettings,
    /// The broker's copy of the audit.
    pub audit: AuditSettings,
}

impl Target {
    /// Why this target has no AMQP URL, and what to pass: its management URL is not on a
    /// default port (15672, or 15671 for https), so where AMQP listens cannot be guessed.
    pub fn no_amqp_url(&self) -> String {
        let shown = self
            .management_urls
            .iter()
            .map(Url::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "context '{}' has no AMQP URL, and the management URL {shown} is not on RabbitMQ's default port (15672, or 15671 for https), so Warren cannot tell where AMQP listens: pass --amqp-url (or set amqp_urls in the context)",
            self.context
        )
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |urls: &[Url]| urls.iter().map(Url::as_str).collect::<Vec<_>>().join(", ");
        write!(
            f,
            "context '{}': management {}; AMQP {}; vhost '{}'; user '{}'{}",
            self.context,
            join(&self.management_urls),
            join(&self.amqp_urls),
            self.vhost,
            self.credentials.username,
            if self.read_only { "; read-only" } else { "" }
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path}, line {line}, column {column}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("there is no context '{name}' in {}; known contexts: {}", .path.display(), list_or_none(.known))]
    UnknownContext {
        name: String,
        path: PathBuf,
        known: Vec<String>,
    },
    #[error(
        "{} defines several contexts ({}) and no default_context: choose one with --context NAME or set default_context",
        .path.display(), .known.join(", ")
    )]
    NoDefaultContext { path: PathBuf, known: Vec<String> },
    #[error(
        "every context at once (--context '*', :ctx *) looks at each context of the config file, and {where_} defines none: add [contexts.NAME] sections"
    )]
    NoContexts { where_: String },
    #[error("context '{context}' has no {what} URL: add {what}_urls to it, or pass --{what}-url")]
    NoUrls { context: String, what: &'static str },
    #[error(
        "context '{context}': the AMQP URL {url} is not on RabbitMQ's default port (5672, or 5671 for amqps), so Warren cannot tell where the management API listens: pass --management-url (or set management_urls in the context)"
    )]
    CannotDerive { context: String, url: String },
    #[error("{what} URL '{url}' is not usable: {reason}")]
    BadUrl {
        what: &'static str,
        url: String,
        reason: String,
    },
    #[error(
        "context '{context}' takes its password from the environment variable {var}, which is not set (or not valid UTF-8)"
    )]
    PasswordEnvMissing { context: String, var: String },
    #[error("context '{context}': password_command failed: {reason}")]
    PasswordCommand { context: String, reason: String },
    #[error(
        "context '{context}' takes its password from password_command, which Warren runs only with the terminal free: open it with `:ctx {context}` (or `--context {context}`)"
    )]
    PasswordLocked { context: String },
    #[error("context '{context}' sets both password_env and password_command: keep one")]
    TwoPasswordSources { context: String },
    #[error("discovery pattern '{pattern}' is not a valid regular expression: {reason}")]
    BadPattern { pattern: String, reason: String },
    #[error("{setting} must be at least 1")]
    BadSetting { setting: &'static str },
    #[error(
        "context '{context}': archive_max_age '{value}' is not a retention RabbitMQ understands: a number and one unit of Y, M, D, h, m, s (e.g. \"30D\")"
    )]
    BadMaxAge { context: String, value: String },
    #[error("context '{context}': archive_stream '{value}' must be 1 to 255 bytes")]
    BadArchiveStream { context: String, value: String },
    #[error("{setting} lists an empty header name: remove it, or name the header")]
    BlankHeaderName { setting: &'static str },
    #[error("{reason}")]
    BadAudit { reason: String },
}

fn audit_settings(ctx: Option<&ContextConfig>) -> Result<AuditSettings, ConfigError> {
    let mut a = AuditSettings::default();
    let Some(c) = ctx else { return Ok(a) };
    if let Some(name) = &c.audit_stream {
        let name = name.trim();
        a.stream = (!name.is_empty()).then(|| name.to_string());
        if name.len() > 255 {
            return Err(ConfigError::BadAudit {
                reason: format!("audit_stream is {} bytes; AMQP allows 255", name.len()),
            });
        }
    }
    if let Some(age) = &c.audit_max_age {
        let age = age.trim();
        if !valid_max_age(age) {
            return Err(ConfigError::BadAudit {
                reason: format!(
                    "audit_max_age '{age}' is not a RabbitMQ max-age: a number and one of Y, M, D, h, m, s (e.g. 30D)"
                ),
            });
        }
        a.max_age = age.to_string();
    }
    a.create = c.create_audit_stream;
    Ok(a)
}

fn list_or_none(known: &[String]) -> String {
    if known.is_empty() {
        "(none)".to_string()
    } else {
        known.join(", ")
    }
}

/// A URL with any `user:password@` removed, for messages. Text that does not parse as a URL
/// still has everything between `://` and the last `@` of the authority cut out; without a
/// `://` (`amqp//user:PASS@host`, a typo) everything from the last `/` before the last `@` to
/// it is replaced by `***`: what cannot be parsed cannot be trusted to hold no password.
pub fn redact_url(text: &str) -> String {
    // A text that parses without a host (`user:PASS@host` reads as scheme `user`) is redacted
    // as text below.
    if let Ok(mut url) = Url::parse(text)
        && url.has_host()
    {
        if url.password().is_some() || !url.username().is_empty() {
            let _ = url.set_password(None);
            let _ = url.set_username("");
        }
        return url.to_string();
    }
    let Some(start) = text.find("://").map(|i| i + 3) else {
        return match text.rfind('@') {
            Some(at) => {
                let from = text
                    .get(..at)
                    .and_then(|t| t.rfind('/'))
                    .map_or(0, |i| i + 1);
                format!(
                    "{}***@{}",
                    text.get(..from).unwrap_or(""),
                    text.get(at + 1..).unwrap_or("")
                )
            }
            None => text.to_string(),
        };
    };
    let rest = text.get(start..).unwrap_or("");
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = rest.get(..authority_end).unwrap_or("");
    match authority.rfind('@') {
        Some(at) => format!(
            "{}{}",
            text.get(..start).unwrap_or(""),
            rest.get(at + 1..).unwrap_or("")
        ),
        None => text.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Loading

/// The default config file: `<config dir>/warren/config.toml` (e.g. `~/.config/warren/config.toml`).
pub fn default_config_path() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "warren").map(|d| d.config_dir().join("config.toml"))
}

impl Config {
    /// The contexts that every context at once ([`ContextScope::EveryContext`]) looks at: each of the
    /// file's, by name. A file that defines none (or no file) says how to define them.
    pub fn every_context(&self) -> Result<Vec<String>, ConfigError> {
        if self.contexts.is_empty() {
            return Err(ConfigError::NoContexts {
                where_: self.path.as_ref().map_or_else(
                    || "no config file was found, so Warren".to_string(),
                    |p| p.display().to_string(),
                ),
            });
        }
        Ok(self.contexts.keys().cloned().collect())
    }

    /// Parses config text. Errors give the line and column but never quote the file, so a
    /// mistake near a secret does not print it.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut config: Config = toml::from_str(text).map_err(|e| {
            let offset = e.span().map(|s| s.start).unwrap_or(0);
            let before = text.get(..offset).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before
                .rsplit('\n')
                .next()
                .map(|l| l.chars().count())
                .unwrap_or(0)
                + 1;
            ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: e.message().trim().to_string(),
            }
        })?;
        config.path = Some(path.to_path_buf());
        Ok(config)
    }

    /// Reads the file the user named (which must exist) or the default one (which may not).
    pub fn read(named: Option<&Path>) -> Result<Config, ConfigError> {
        let (path, required) = match named {
            Some(p) => (p.to_path_buf(), true),
            None => match default_config_path() {
                Some(p) => (p, false),
                None => return Ok(Config::default()),
            },
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Config::parse(&text, &path),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Config::default())
            }
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    fn shown_path(&self) -> PathBuf {
        self.path
            .clone()
            .unwrap_or_else(|| PathBuf::from("(no config file)"))
    }

    /// Global settings, validated.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        let discovery_patterns = self
            .discovery
            .patterns
            .iter()
            .map(|p| {
                Regex::new(p).map_err(|e| ConfigError::BadPattern {
                    pattern: p.clone(),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let positive = |v: Option<usize>, default: usize, setting: &'static str| match v {
            Some(0) => Err(ConfigError::BadSetting { setting }),
            Some(n) => Ok(n),
            None => Ok(default),
        };
        if self.replay.rate == Some(0) {
            return Err(ConfigError::BadSetting {
                setting: "replay.rate",
            });
        }
        let canary_wait = match self.replay.canary_wait.as_deref() {
            None => crate::domain::canary::DEFAULT_WAIT,
            Some(w) => match crate::domain::watch::parse_duration(w.trim()) {
                Some(n) if (1..=86_400).contains(&n) => std::time::Duration::from_secs(n),
                _ => {
                    return Err(ConfigError::BadSetting {
                        setting: "replay.canary_wait",
                    });
                }
            },
        };
        let names = |v: &Option<Vec<String>>, default: &[&str], setting: &'static str| match v {
            None => Ok(default.iter().map(|n| n.to_string()).collect()),
            Some(list) if list.iter().any(|n| n.trim().is_empty()) => {
                Err(ConfigError::BlankHeaderName { setting })
            }
            Some(list) => Ok(list.clone()),
        };
        let conventions = Conventions {
            retry_counter_headers: names(
                &self.conventions.retry_counter_headers,
                DEFAULT_RETRY_COUNTER_HEADERS,
                "conventions.retry_counter_headers",
            )?,
            error_text_headers: names(
                &self.conventions.error_text_headers,
                DEFAULT_ERROR_TEXT_HEADERS,
                "conventions.error_text_headers",
            )?,
        };
        Ok(Settings {
            discovery_patterns,
            conventions,
            browse: BrowseSettings {
                body_cap_bytes: positive(
                    self.browse.body_cap_bytes,
                    DEFAULT_BODY_CAP_BYTES,
                    "browse.body_cap_bytes",
                )?,
                page_size: positive(self.browse.page_size, DEFAULT_PAGE_SIZE, "browse.page_size")?,
                quorum_safety_margin: self
                    .browse
                    .quorum_safety_margin
                    .unwrap_or(DEFAULT_QUORUM_SAFETY_MARGIN),
            },
            replay: ReplaySettings {
                window: positive(self.replay.window, DEFAULT_REPLAY_WINDOW, "replay.window")?,
                rate: self.replay.rate,
                canary_above: self
                    .replay
                    .canary_above
                    .unwrap_or(crate::domain::canary::DEFAULT_ABOVE),
                canary_size: positive(
                    self.replay
                        .canary_size
                        .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                    crate::domain::canary::DEFAULT_SIZE as usize,
                    "replay.canary_size",
                )? as u64,
                canary_wait,
            },
        })
    }
}

/// Reads the config and resolves the target broker.
///
/// Precedence: `--context` (else `default_context`, else the only context) supplies URLs,
/// credentials and settings; `--amqp-url` / `--management-url` replace the context's URLs (and
/// without any context make a one-off `command-line` target); credentials in a URL beat the
/// context's; `--vhost` beats a vhost in the AMQP URL, which beats the context's; `--read-only`
/// can only add protection. With no config file and no URL, the local broker
/// (`amqp://127.0.0.1:5672`, `http://127.0.0.1:15672`, guest) is used.
pub fn load(overrides: &Overrides) -> Result<(Config, Target), ConfigError> {
    let config = Config::read(overrides.config_path.as_deref())?;
    let env = |name: &str| std::env::var(name).ok();
    let target = resolve(&config, overrides, &env)?;
    Ok((config, target))
}

/// [`load`] without the file system: resolves overrides against a parsed config, reading
/// environment variables through `env` (so tests need not touch the process environment).
/// For one-off targets without credentials in the URL, `WARREN_USERNAME` / `WARREN_PASSWORD`
/// are read before falling back to guest/guest.
pub fn resolve(
    config: &Config,
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Target, ConfigError> {
    resolve_with(
        config,
        overrides,
        env,
        &|context, cmd| match &overrides.unlocked {
            None => run_password_command(context, cmd),
            Some(unlocked) => match unlocked.get(context) {
                Some(Ok(secret)) => Ok(secret),
                Some(Err(reason)) => Err(ConfigError::PasswordCommand {
                    context: context.to_string(),
                    reason,
                }),
                None => Err(ConfigError::PasswordLocked {
                    context: context.to_string(),
                }),
            },
        },
    )
}

/// Answers a context's `password_command` (context name, command).
type PasswordRunner<'a> = dyn Fn(&str, &str) -> Result<Secret, ConfigError> + 'a;

/// [`resolve`], with `password_command` answered by `password`.
fn resolve_with(
    config: &Config,
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
    password: &PasswordRunner<'_>,
) -> Result<Target, ConfigError> {
    let has_url_override = overrides.amqp_url.is_some() || overrides.management_url.is_some();
    let chosen = chosen_context(config, overrides, has_url_override)?;
    let context_name = match (&chosen, has_url_override) {
        (Some((n, _)), _) => n.clone(),
        (None, true) => COMMAND_LINE_CONTEXT.to_string(),
        (None, false) => LOCAL_CONTEXT.to_string(),
    };
    let ctx = chosen.as_ref().map(|(_, c)| *c);

    let Urls {
        management: management_urls,
        amqp: amqp_urls,
        credentials: url_creds,
    } = urls_of(overrides, ctx, has_url_override, &context_name)?;

    // The vhost: --vhost, else the AMQP URL's path (only when given on the command line, since a
    // context has its own `vhost` key), else the context's, else "/".
    let url_vhost = overrides
        .amqp_url
        .as_ref()
        .and(amqp_urls.first())
        .and_then(vhost_of_amqp_url);
    let vhost = overrides
        .vhost
        .clone()
        .or(url_vhost)
        .or_else(|| ctx.and_then(|c| c.vhost.clone()))
        .unwrap_or_else(|| "/".to_string());

    let credentials = credentials_of(url_creds, ctx, &context_name, env, password)?;

    let archive = archive_settings(&context_name, ctx)?;
    Ok(Target {
        context: context_name,
        management_urls,
        amqp_urls,
        vhost,
        read_only: overrides.read_only || ctx.is_some_and(|c| c.read_only),
        read_only_flag: overrides.read_only,
        credentials,
        ca_file: ctx.and_then(|c| c.ca_file.clone()),
        color: ctx.and_then(|c| c.color),
        label: ctx
            .and_then(|c| c.label.as_deref())
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string),
        settings: config.settings()?,
        archive,
        audit: audit_settings(ctx)?,
    })
}

/// The context `--context` names, else the default one, else the only one; `None` for a
/// one-off (URLs on the command line) or without any context configured.
fn chosen_context<'c>(
    config: &'c Config,
    overrides: &Overrides,
    has_url_override: bool,
) -> Result<Option<(String, &'c ContextConfig)>, ConfigError> {
    let known: Vec<String> = config.contexts.keys().cloned().collect();
    let chosen = match &overrides.context {
        Some(name) => match config.contexts.get(name) {
            Some(c) => Some((name.clone(), c)),
            None => {
                return Err(ConfigError::UnknownContext {
                    name: name.clone(),
                    path: config.shown_path(),
                    known,
                });
            }
        },
        // URLs on the command line without --context: a one-off, not the default context.
        None if has_url_override => None,
        None => match &config.default_context {
            Some(name) => match config.contexts.get(name) {
                Some(c) => Some((name.clone(), c)),
                None => {
                    return Err(ConfigError::UnknownContext {
                        name: name.clone(),
                        path: config.shown_path(),
                        known,
                    });
                }
            },
            None if config.contexts.len() == 1 => {
                config.contexts.iter().next().map(|(n, c)| (n.clone(), c))
            }
            None if config.contexts.is_empty() => None,
            None => {
                return Err(ConfigError::NoDefaultContext {
                    path: config.shown_path(),
                    known,
                });
            }
        },
    };
    Ok(chosen)
}

/// The user and password: from the URL, else the context (its `password_command` runs
/// here), else `WARREN_USERNAME`/`WARREN_PASSWORD`, else guest.
fn credentials_of(
    url_creds: Option<UrlCredentials>,
    ctx: Option<&ContextConfig>,
    context_name: &str,
    env: &dyn Fn(&str) -> Option<String>,
    password: &PasswordRunner<'_>,
) -> Result<Credentials, ConfigError> {
    Ok(match (url_creds, ctx) {
        (Some((user, Some(pass))), _) => Credentials {
            username: user,
            password: Secret(pass),
        },
        (Some((user, None)), Some(c)) => Credentials {
            username: user,
            password: context_password(context_name, c, env, password)?,
        },
        (Some((user, None)), None) => Credentials {
            username: user,
            password: Secret(env("WARREN_PASSWORD").unwrap_or_else(|| "guest".to_string())),
        },
        (None, Some(c)) => Credentials {
            username: c.username.clone().unwrap_or_else(|| "guest".to_string()),
            password: context_password(context_name, c, env, password)?,
        },
        (None, None) => Credentials {
            username: env("WARREN_USERNAME").unwrap_or_else(|| "guest".to_string()),
            password: Secret(env("WARREN_PASSWORD").unwrap_or_else(|| "guest".to_string())),
        },
    })
}

/// A context's `archive_*` keys, checked; the defaults without a context.
fn archive_settings(
    context: &str,
    ctx: Option<&ContextConfig>,
) -> Result<ArchiveSettings, ConfigError> {
    let mut a = ArchiveSettings::default();
    let Some(c) = ctx else {
        return Ok(a);
    };
    if let Some(v) = &c.archive_max_age {
        if !valid_max_age(v.trim()) {
            return Err(ConfigError::BadMaxAge {
                context: context.to_string(),
                value: v.clone(),
            });
        }
        a.max_age = v.trim().to_string();
    }
    if let Some(v) = &c.archive_stream {
        if v.is_empty() || v.len() > 255 {
            return Err(ConfigError::BadArchiveStream {
                context: context.to_string(),
                value: v.clone(),
            });
        }
        a.stream = v.clone();
    }
    a.local = c.archive_local;
    a.create = c.archive_create;
    Ok(a)
}

fn context_password(
    context: &str,
    c: &ContextConfig,
    env: &dyn Fn(&str) -> Option<String>,
    password: &PasswordRunner<'_>,
) -> Result<Secret, ConfigError> {
    match (&c.password_env, &c.password_command) {
        (Some(_), Some(_)) => Err(ConfigError::TwoPasswordSources {
            context: context.to_string(),
        }),
        (Some(var), None) => env(var)
            .map(Secret)
            .ok_or_else(|| ConfigError::PasswordEnvMissing {
                context: context.to_string(),
                var: var.clone(),
            }),
        (None, Some(cmd)) => password(context, cmd),
        // RabbitMQ's default user; only accepted on localhost by the broker.
        (None, None) => Ok(Secret("guest".to_string())),
    }
}

/// Runs `sh -c COMMAND` with the terminal's stdin (so pinentry-style prompts work) and returns
/// its trimmed standard output. Errors show the exit status and the first line of stderr, never
/// stdout.
fn run_password_command(context: &str, cmd: &str) -> Result<Secret, ConfigError> {
    let fail = |reason: String| ConfigError::PasswordCommand {
        context: context.to_string(),
        reason,
    };
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| fail(format!("could not run sh: {e}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let first = stderr.lines().next().unwrap_or("").trim();
        let first: String = first.chars().take(200).collect();
        return Err(fail(format!(
            "it exited with {}{}",
            out.status,
            if first.is_empty() {
                String::new()
            } else {
                format!(": {first}")
            }
        )));
    }
    let text =
        String::from_utf8(out.stdout).map_err(|_| fail("its output is not UTF-8".to_string()))?;
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(fail("it printed nothing".to_string()));
    }
    Ok(Secret(trimmed.to_string()))
}

#[cfg(test)]
mod tests;
