//! The connection handle: one context's way to one broker — its target (URLs, credentials, vhost,
//! read-only settings), the management client and what the broker said of itself when it was
//! opened, and the AMQP connection, opened on first need. It holds no state of what was read:
//! that is the session's read cache (`broker::session`).

use regex::Regex;
use tokio::sync::OnceCell;

use crate::broker::discover;
use crate::broker::management::{Management, Overview, WhoAmI};
use crate::broker::session::SessionError;
use crate::broker::{amqp, cluster};
use crate::config::Target;
use crate::domain::discovery::Discovery;
use crate::domain::features::BrokerVersion;

/// How long a discovery waits for the AMQP connection its live consumer counts use.
const COUNT_CONNECT: std::time::Duration = std::time::Duration::from_secs(3);

pub struct Handle {
    pub target: Target,
    pub mgmt: Management,
    pub overview: Overview,
    pub whoami: WhoAmI,
    amqp: OnceCell<lapin::Connection>,
    /// Whether the broker lets this user publish at all in the vhost: asked once per handle
    /// (see `broker::rights`).
    pub(crate) publishing: OnceCell<crate::broker::rights::Publishing>,
    /// Where in the context's AMQP URLs the next connection starts: a reconnect after a node
    /// loss starts one further, so it does not wait out the lost node's timeout first.
    pub(crate) amqp_start: std::sync::atomic::AtomicUsize,
}

impl Handle {
    /// Connects to the management API (overview and whoami) and checks that the AMQP URLs reach
    /// the same cluster (see `broker::cluster`): a command with two URLs to two brokers would
    /// answer for the wrong one. The AMQP connection itself waits until needed.
    pub async fn open(target: Target) -> Result<Handle, SessionError> {
        let mgmt = Management::new(&target)?;
        let (overview, whoami) = tokio::join!(mgmt.overview(), mgmt.whoami());
        let overview = overview?;
        cluster::verify(&target.amqp_urls, &overview, mgmt.active_url())
            .await
            .map_err(SessionError::Broker)?;
        Ok(Handle {
            overview,
            whoami: whoami?,
            mgmt,
            target,
            amqp: OnceCell::new(),
            publishing: OnceCell::new(),
            amqp_start: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The refusal of `act` when the flag or the context makes this handle read-only: the
    /// broker layer's last check behind `ops::rights`, in its words.
    pub(crate) fn configured_refusal(&self, act: crate::domain::rights::Act) -> Option<String> {
        self.configured_read_only(act).map(|r| r.to_string())
    }

    /// [`Handle::configured_refusal`], typed.
    pub(crate) fn configured_read_only(
        &self,
        act: crate::domain::rights::Act,
    ) -> Option<crate::domain::refusal::Refusal> {
        crate::domain::rights::ReadOnly::configured(
            self.target.read_only_flag,
            self.target.read_only,
            &self.target.context,
        )
        .map(|why| crate::domain::refusal::Refusal::ReadOnly { act, why })
    }

    pub fn vhost(&self) -> &str {
        &self.target.vhost
    }

    /// "context/vhost", the key under which Warren remembers first-seen times.
    pub fn memory_key(&self) -> String {
        self.memory_key_of(&self.target.vhost)
    }

    /// The key Warren remembers `vhost` of this context under (see [`Handle::memory_key`]).
    pub fn memory_key_of(&self, vhost: &str) -> String {
        format!("{}{}", self.target.context, vhost)
    }

    /// The broker's version for the quorum rules; an unknown version gets 4.0's cautious rules.
    pub fn version(&self) -> BrokerVersion {
        self.overview.features.rules_version()
    }

    /// The AMQP connection, opened on first use (cluster URLs tried in order).
    pub async fn amqp(&self) -> Result<&lapin::Connection, SessionError> {
        self.amqp
            .get_or_try_init(|| self.connect_amqp("warren"))
            .await
    }

    /// A new AMQP connection of its own, named `name` (cluster URLs tried in order, from the
    /// one after a lost node).
    pub async fn connect_amqp(&self, name: &str) -> Result<lapin::Connection, SessionError> {
        if self.target.amqp_urls.is_empty() {
            return Err(SessionError::Broker(self.target.no_amqp_url()));
        }
        let n = self.target.amqp_urls.len();
        let start = self.amqp_start.load(std::sync::atomic::Ordering::Relaxed) % n;
        let urls: Vec<String> = (0..n)
            .filter_map(|k| self.target.amqp_urls.get((start + k) % n))
            .map(|u| u.to_string())
            .collect();
        amqp::connect_named(
            &urls,
            &self.target.vhost,
            &self.target.credentials.username,
            self.target.credentials.password.expose(),
            self.target.ca_file.as_deref(),
            name,
        )
        .await
        .map_err(SessionError::from)
    }

    /// The vhost's queues, classified, with live consumer counts where AMQP answers in time.
    pub async fn discover(&self) -> Result<Discovery, SessionError> {
        let patterns: &[Regex] = &self.target.settings.discovery_patterns;
        let mut d =
            discover::discover_with(&self.mgmt, self.vhost(), patterns, &self.overview.features)
                .await?;
        let conn = self.amqp_for_counts().await;
        discover::count_consumers(&self.mgmt, conn, self.vhost(), &mut d).await;
        Ok(d)
    }

    /// Every vhost the user may see, from one listing of each kind (`discover::discover_all`).
    pub async fn discover_all(&self) -> Result<Vec<(String, Discovery)>, SessionError> {
        let patterns: &[Regex] = &self.target.settings.discovery_patterns;
        let mut found =
            discover::discover_all(&self.mgmt, patterns, &self.overview.features).await?;
        // Live counts over the handle's own connection, in its vhost; the management API's
        // figures elsewhere (a connection per vhost would cost more than the listing).
        let conn = self.amqp_for_counts().await;
        for (vhost, d) in &mut found {
            let conn = conn.filter(|_| vhost.as_str() == self.vhost());
            discover::count_consumers(&self.mgmt, conn, vhost, d).await;
        }
        Ok(found)
    }

    /// The AMQP connection for live consumer counts, when it opens within [`COUNT_CONNECT`]: a
    /// listing without one shows what the management API says.
    async fn amqp_for_counts(&self) -> Option<&lapin::Connection> {
        tokio::time::timeout(COUNT_CONNECT, self.amqp())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Whether `queue` exists in the vhost (a passive declare).
    pub async fn queue_exists(&self, queue: &str) -> Result<bool, SessionError> {
        crate::broker::session::queue_exists(self.amqp().await?, queue).await
    }
}
