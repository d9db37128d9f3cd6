//! The RabbitMQ management HTTP API: broker version, who we are, queues (one cheap listing, so
//! 10,000 queues list quickly), policies, exchanges, bindings, permissions and connections.
//! Cluster nodes are tried in order until one answers; the one that did is remembered. Errors
//! say, in the user's words, which user, which URL and what to do — never with a password.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use url::Url;

use crate::config::{Credentials, Target};
use crate::domain::discovery::{Binding, BrokerFeatures, ExchangeInfo, Policy, QueueInfo};
use crate::domain::sanitize;

mod wire;

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// For the calls that list all of a vhost's queues, exchanges, bindings or policies.
pub const LISTING_TIMEOUT: Duration = Duration::from_secs(120);
const QUEUE_COLUMNS: &str = "name,type,arguments,durable,auto_delete,messages,messages_ready,\
messages_unacknowledged,consumers,policy,effective_policy_definition,delivery_limit,message_bytes";

#[derive(Debug, thiserror::Error)]
pub enum ManagementError {
    #[error("RabbitMQ at {url} refused user '{user}': wrong username or password")]
    WrongCredentials { url: String, user: String },
    #[error(
        "RabbitMQ at {url} does not let user '{user}' use the management API: the user needs the 'management' tag (or monitoring/administrator)"
    )]
    NotManagementUser { url: String, user: String },
    #[error(
        "user '{user}' has no access to vhost '{vhost}' at {url} — ask for read permission on it"
    )]
    NoVhostAccess {
        url: String,
        user: String,
        vhost: String,
    },
    #[error(
        "user '{user}' has no access to vhost '{vhost}' at {url}, or the vhost does not exist — check the name, or ask for read permission on it"
    )]
    VhostNotFound {
        url: String,
        user: String,
        vhost: String,
    },
    #[error("user '{user}' needs the '{tag}' tag at {url} to {what}")]
    MissingTag {
        url: String,
        user: String,
        tag: String,
        what: String,
    },
    #[error("{what} not found at {url}")]
    NotFound { url: String, what: String },
    /// The URL answers, but not as RabbitMQ's management API does (a path ending in `/api`,
    /// another web server, the AMQP port behind a proxy).
    #[error("{url} is not RabbitMQ's management API: {seen}. {hint}")]
    NotManagementApi {
        url: String,
        seen: String,
        hint: String,
    },
    /// The queue asked about does not exist (a name mistyped, or a queue deleted).
    #[error("no queue '{queue}' in vhost '{vhost}' — `warren queues` lists them")]
    NoQueue { vhost: String, queue: String },
    #[error("could not reach the management API: tried {}", describe_attempts(.attempts))]
    Unreachable { attempts: Vec<Attempt> },
    #[error("RabbitMQ at {url} answered {status} when asked to {what}: {reason}")]
    Http {
        url: String,
        status: u16,
        what: String,
        reason: String,
    },
    #[error("RabbitMQ at {url} sent an answer Warren cannot read when asked to {what}: {reason}")]
    BadResponse {
        url: String,
        what: String,
        reason: String,
    },
    #[error("cannot set up HTTPS: {reason}")]
    Setup { reason: String },
}

/// One management URL that did not answer, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub url: String,
    pub failure: String,
}

fn describe_attempts(attempts: &[Attempt]) -> String {
    if attempts.is_empty() {
        return "no URLs".to_string();
    }
    attempts
        .iter()
        .map(|a| format!("{} ({})", a.url, a.failure))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `GET /api/overview`, reduced to what Warren uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Overview {
    pub rabbitmq_version: String,
    pub product_name: Option<String>,
    pub cluster_name: Option<String>,
    pub features: BrokerFeatures,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WhoAmI {
    pub name: String,
    pub tags: Vec<String>,
}

/// A user's permission regexes on one vhost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permissions {
    pub configure: String,
    pub write: String,
    pub read: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PermissionState {
    Known(Permissions),
    /// The broker says the user has no permissions on the vhost.
    NoneGranted,
    /// Reading permissions needs the administrator tag; the user lacks it.
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The broker's name for the connection (`127.0.0.1:51234 -> 127.0.0.1:5672`).
    pub name: String,
    pub user: Option<String>,
    pub vhost: Option<String>,
    /// The `connection_name` client property, when the client set one.
    pub client_name: Option<String>,
}

/// A client for one broker or cluster's management API. Cheap to clone; clones share the
/// remembered node.
#[derive(Clone)]
pub struct Management {
    client: reqwest::Client,
    urls: Vec<Url>,
    /// `urls[0]`, kept apart so [`Management::active_url`] needs no fallible indexing.
    first: Url,
    active: Arc<AtomicUsize>,
    credentials: Credentials,
}

impl std::fmt::Debug for Management {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Management")
            .field(
                "urls",
                &self.urls.iter().map(Url::as_str).collect::<Vec<_>>(),
            )
            .field("user", &self.credentials.username)
            .finish()
    }
}

/// How many redirects one request follows (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// Why a redirect to `next` is not followed, if it is not. Every request carries the broker
/// credentials: a redirect from https to http would send them in clear, and one to another host
/// would hand them (or the operator's trust) to it. Same host, same or stronger scheme only.
fn redirect_refusal(previous: &[Url], next: &Url) -> Option<String> {
    let from = previous.last()?;
    let shown = |u: &Url| crate::config::redact_url(u.as_str());
    if previous.len() > MAX_REDIRECTS {
        return Some(format!(
            "more than {MAX_REDIRECTS} redirects from {}: not followed",
            shown(&previous[0])
        ));
    }
    if from.scheme() == "https" && next.scheme() != "https" {
        return Some(format!(
            "the management API at {} redirected to {}, which is not https: not followed, so the credentials are not sent unencrypted; use the https URL the API is served at",
            shown(from),
            shown(next)
        ));
    }
    if from.host_str() != next.host_str() {
        return Some(format!(
            "the management API at {} redirected to another host ({}): not followed, so the credentials stay with the broker they are for; use the URL the API is served at",
            shown(from),
            shown(next)
        ));
    }
    None
}

impl Management {
    /// A client for the target's management URLs, with its credentials and CA file.
    pub fn new(target: &Target) -> Result<Management, ManagementError> {
        let Some(first) = target.management_urls.first().cloned() else {
            return Err(ManagementError::Setup {
                reason: format!("context '{}' has no management URL", target.context),
            });
        };
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::custom(
                |a| match redirect_refusal(a.previous(), a.url()) {
                    Some(why) => a.error(why),
                    None => a.follow(),
                },
            ))
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("warren/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &target.ca_file {
            let pem = std::fs::read(path).map_err(|e| ManagementError::Setup {
                reason: format!("cannot read ca_file {}: {e}", path.display()),
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                ManagementError::Setup {
                    reason: format!(
                        "ca_file {} holds no usable PEM certificate: {}",
                        path.display(),
                        error_chain(&e)
                    ),
                }
            })?;
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder.build().map_err(|e| ManagementError::Setup {
            reason: error_chain(&e),
        })?;
        Ok(Management {
            client,
            urls: target.management_urls.clone(),
            first,
            active: Arc::new(AtomicUsize::new(0)),
            credentials: target.credentials.clone(),
        })
    }

    /// The management URL that answered last (the first one before any call).
    pub fn active_url(&self) -> &Url {
        let i = self.active.load(Ordering::Relaxed);
        self.urls.get(i).unwrap_or(&self.first)
    }

    pub fn username(&self) -> &str {
        &self.credentials.username
    }

    pub async fn overview(&self) -> Result<Overview, ManagementError> {
        let what = "report its version";
        let (v, _) = self
            .call(
                Method::GET,
                &["overview"],
                &[(
                    "columns",
                    "rabbitmq_version,product_version,product_name,cluster_name",
                )],
                None,
                None,
                what,
            )
            .await
            .map_err(|e| match e {
                ManagementError::NotFound { .. } => {
                    self.not_the_api("GET api/overview answered 404")
                }
                e => e,
            })?;
        let (version, product_name, cluster_name) = wire::one::<wire::Overview>(&v)
            .unwrap_or_default()
            .into_parts();
        // Every RabbitMQ names its version there; an answer without one is something else.
        if version.trim().is_empty() {
            return Err(self.not_the_api("its api/overview names no RabbitMQ version"));
        }
        Ok(Overview {
            features: BrokerFeatures::from_version(&version),
            rabbitmq_version: version,
            product_name,
            cluster_name,
        })
    }

    /// The URL is not the management API: what was seen, and what to give instead.
    fn not_the_api(&self, seen: &str) -> ManagementError {
        let url = self.active_url();
        let path = url.path().trim_end_matches('/');
        let hint = if path.ends_with("/api") {
            let mut base = url.clone();
            base.set_path(&format!("{}/", path.trim_end_matches("/api")));
            format!(
                "Warren adds /api itself: give the plugin's address without it, {}",
                sanitize::one_line(base.as_str(), 200)
            )
        } else {
            "Give the management plugin's address, e.g. http://HOST:15672/ (not the AMQP port, not another web server), or --amqp-url alone to derive it".to_string()
        };
        ManagementError::NotManagementApi {
            url: sanitize::one_line(url.as_str(), 200),
            seen: seen.to_string(),
            hint,
        }
    }

    pub async fn whoami(&self) -> Result<WhoAmI, ManagementError> {
        let (v, _) = self
            .call(Method::GET, &["whoami"], &[], None, None, "say who we are")
            .await?;
        Ok(wire::one::<wire::Whoami>(&v)
            .unwrap_or_default()
            .into_domain(&self.credentials.username))
    }

    /// Every queue of a vhost with cheap columns and no per-queue stats (`disable_stats`,
    /// `enable_queue_totals`), in one request. Not paged on purpose: measured on 3.10 with
    /// 10,000 queues, every page costs about as much as the whole listing (the broker gathers and
    /// sorts all queues for each page), so 20 pages took 10–13 s and one request 1–2 s. The one
    /// request gets a longer timeout ([`LISTING_TIMEOUT`]) than the other calls.
    pub async fn queues(&self, vhost: &str) -> Result<Vec<QueueInfo>, ManagementError> {
        let what = format!("list the queues of vhost '{vhost}'");
        let v = self
            .queue_listing(&["queues", vhost], QUEUE_COLUMNS, Some(vhost), &what)
            .await?;
        Ok(v.into_iter().map(|(_, q)| q).collect())
    }

    /// Every queue of every vhost the user may see, with its vhost, in one request
    /// (`GET /api/queues`, as [`Management::queues`] does for one vhost).
    pub async fn queues_all(&self) -> Result<Vec<(String, QueueInfo)>, ManagementError> {
        let columns = format!("vhost,{QUEUE_COLUMNS}");
        self.queue_listing(
            &["queues"],
            &columns,
            None,
            "list the queues of every vhost",
        )
        .await
    }

    async fn queue_listing(
        &self,
        segments: &[&str],
        columns: &str,
        vhost: Option<&str>,
        what: &str,
    ) -> Result<Vec<(String, QueueInfo)>, ManagementError> {
        let query = [
            ("columns", columns),
            ("disable_stats", "true"),
            ("enable_queue_totals", "true"),
        ];
        let (status, body, url) = self
            .send_with_timeout(Method::GET, segments, &query, None, LISTING_TIMEOUT)
            .await?;
        // A paged shape (`items`) if a proxy or future broker insists on one.
        let keep = |item: &Value| wire::in_vhost(item, vhost, &wire::Queue::into_domain);
        self.accept_list(status, &body, &url, vhost, what, keep)
            .await?
            .ok_or_else(|| ManagementError::BadResponse {
                url: url.clone(),
                what: what.to_string(),
                reason: "not a list of queues".to_string(),
            })
    }

    /// The policies, exchanges and bindings of every vhost, each with its vhost: three requests
    /// whatever the number of vhosts.
    pub async fn everything_but_queues(
        &self,
    ) -> Result<
        (
            Vec<(String, Policy)>,
            Vec<(String, ExchangeInfo)>,
            Vec<(String, Binding)>,
        ),
        ManagementError,
    > {
        let (p, e, b) = tokio::join!(
            self.list_all(
                &["policies"],
                &[],
                "list the policies of every vhost",
                wire::Policy::into_domain
            ),
            self.list_all(
                &["exchanges"],
                &[("columns", "vhost,name,type")],
                "list the exchanges of every vhost",
                wire::Exchange::into_domain
            ),
            self.list_all(
                &["bindings"],
                &[],
                "list the bindings of every vhost",
                wire::Binding::into_domain
            ),
        );
        Ok((p?, e?, b?))
    }

    async fn list_all<T, W>(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
        what: &str,
        into_domain: impl Fn(W) -> Option<T>,
    ) -> Result<Vec<(String, T)>, ManagementError>
    where
        W: serde::de::DeserializeOwned,
    {
        let (status, body, url) = self
            .send_with_timeout(Method::GET, segments, query, None, LISTING_TIMEOUT)
            .await?;
        let keep = |item: &Value| wire::in_vhost(item, None, &into_domain);
        let kept = self.accept_list(status, &body, &url, None, what, keep);
        Ok(kept.await?.unwrap_or_default())
    }

    /// One queue with its current counters.
    pub async fn queue(&self, vhost: &str, name: &str) -> Result<QueueInfo, ManagementError> {
        let what = format!("describe queue '{name}' in vhost '{vhost}'");
        let (v, url) = self
            .call(
                Method::GET,
                &["queues", vhost, name],
                &[],
                None,
                Some(vhost),
                &what,
            )
            .await
            .map_err(|e| match e {
                ManagementError::NotFound { .. } => ManagementError::NoQueue {
                    vhost: sanitize::one_line(vhost, 100),
                    queue: sanitize::one_line(name, 200),
                },
                e => e,
            })?;
        let queue = wire::one(&v).and_then(wire::Queue::into_domain);
        queue.ok_or(ManagementError::BadResponse {
            url,
            what,
            reason: "no queue name".to_string(),
        })
    }

    /// A quorum queue's dead letters held inside it (`messages_dlx`), which the queue listing
    /// (without per-queue stats) leaves out; `None` when the broker does not report it.
    pub async fn dead_letters_held(
        &self,
        vhost: &str,
        name: &str,
    ) -> Result<Option<u64>, ManagementError> {
        let what = format!("count the dead letters held in queue '{name}' of vhost '{vhost}'");
        let (v, _) = self
            .call(
                Method::GET,
                &["queues", vhost, name],
                &[("columns", "name,messages_dlx")],
                None,
                Some(vhost),
                &what,
            )
            .await?;
        Ok(wire::one(&v)
            .and_then(wire::Queue::into_domain)
            .and_then(|q| q.messages_dlx))
    }

    pub async fn policies(&self, vhost: &str) -> Result<Vec<Policy>, ManagementError> {
        let what = format!("list the policies of vhost '{vhost}'");
        self.list(
            vhost,
            &["policies", vhost],
            &[],
            &what,
            wire::Policy::into_domain,
        )
        .await
    }

    pub async fn exchanges(&self, vhost: &str) -> Result<Vec<ExchangeInfo>, ManagementError> {
        let what = format!("list the exchanges of vhost '{vhost}'");
        let columns = [("columns", "name,type")];
        self.list(
            vhost,
            &["exchanges", vhost],
            &columns,
            &what,
            wire::Exchange::into_domain,
        )
        .await
    }

    /// Every binding of a vhost (including the default exchange's implicit ones).
    pub async fn bindings(&self, vhost: &str) -> Result<Vec<Binding>, ManagementError> {
        let what = format!("list the bindings of vhost '{vhost}'");
        self.list(
            vhost,
            &["bindings", vhost],
            &[],
            &what,
            wire::Binding::into_domain,
        )
        .await
    }

    /// The bindings whose destination is one queue: what routes to it.
    pub async fn queue_bindings(
        &self,
        vhost: &str,
        queue: &str,
    ) -> Result<Vec<Binding>, ManagementError> {
        let what = format!("list the bindings of queue '{queue}' in vhost '{vhost}'");
        let path = ["queues", vhost, queue, "bindings"];
        self.list(vhost, &path, &[], &what, wire::Binding::into_domain)
            .await
    }

    /// The bindings whose source is one exchange: where it routes.
    pub async fn exchange_bindings(
        &self,
        vhost: &str,
        exchange: &str,
    ) -> Result<Vec<Binding>, ManagementError> {
        let what = format!("list the bindings of exchange '{exchange}' in vhost '{vhost}'");
        // The API names the default exchange `amq.default`.
        let name = if exchange.is_empty() {
            "amq.default"
        } else {
            exchange
        };
        let path = ["exchanges", vhost, name, "bindings", "source"];
        self.list(vhost, &path, &[], &what, wire::Binding::into_domain)
            .await
    }

    /// A GET of one of a vhost's lists: each entry that parses, in the broker's order (one that
    /// does not is skipped, as [`wire::entries`] says).
    async fn list<T, W>(
        &self,
        vhost: &str,
        segments: &[&str],
        query: &[(&str, &str)],
        what: &str,
        into_domain: impl Fn(W) -> Option<T>,
    ) -> Result<Vec<T>, ManagementError>
    where
        W: serde::de::DeserializeOwned,
    {
        // A listing of a large vhost is slow: a loaded 3.10 took over 15 s for the bindings of
        // 10,000 queues.
        let (status, body, url) = self
            .send_with_timeout(Method::GET, segments, query, None, LISTING_TIMEOUT)
            .await?;
        let keep = |item: &Value| wire::one(item).and_then(&into_domain);
        let kept = self.accept_list(status, &body, &url, Some(vhost), what, keep);
        Ok(kept.await?.unwrap_or_default())
    }

    /// The current user's permissions on a vhost. Reading them needs the administrator tag; a
    /// user without it gets [`PermissionState::Unknown`] rather than an error.
    pub async fn permissions(&self, vhost: &str) -> Result<PermissionState, ManagementError> {
        let what = format!(
            "read the permissions of user '{}' on vhost '{vhost}'",
            self.credentials.username
        );
        let user = self.credentials.username.clone();
        match self
            .call(
                Method::GET,
                &["permissions", vhost, &user],
                &[],
                None,
                None,
                &what,
            )
            .await
        {
            Ok((v, _)) => Ok(PermissionState::Known(
                wire::one::<wire::Permissions>(&v)
                    .unwrap_or_default()
                    .into(),
            )),
            Err(ManagementError::MissingTag { .. }) => Ok(PermissionState::Unknown),
            Err(ManagementError::NotFound { .. }) => Ok(PermissionState::NoneGranted),
            Err(e) => Err(e),
        }
    }

    /// Open connections, of one vhost or (with `None`) all the user may see.
    pub async fn connections(
        &self,
        vhost: Option<&str>,
    ) -> Result<Vec<ConnectionInfo>, ManagementError> {
        let what = "list connections".to_string();
        let (v, _) = match vhost {
            Some(vh) => {
                self.call(
                    Method::GET,
                    &["vhosts", vh, "connections"],
                    &[],
                    None,
                    Some(vh),
                    &what,
                )
                .await?
            }
            None => {
                self.call(Method::GET, &["connections"], &[], None, None, &what)
                    .await?
            }
        };
        Ok(wire::entries(wire::array(&v))
            .filter_map(wire::Connection::into_domain)
            .collect())
    }

    /// Closes a connection by its broker name, giving `reason` to the client.
    pub async fn close_connection(&self, name: &str, reason: &str) -> Result<(), ManagementError> {
        let what = format!("close connection '{name}'");
        self.call(
            Method::DELETE,
            &["connections", name],
            &[],
            Some(reason),
            None,
            &what,
        )
        .await?;
        Ok(())
    }

    /// Creates or replaces a policy of `vhost` (needs the policymaker tag).
    pub async fn put_policy(&self, vhost: &str, policy: &Policy) -> Result<(), ManagementError> {
        let what = format!("set policy '{}' in vhost '{vhost}'", policy.name);
        let body = serde_json::json!({
            "pattern": policy.pattern,
            "apply-to": policy.apply_to,
            "priority": policy.priority,
            "definition": policy.definition,
        });
        let (status, text, base) = self
            .request(
                Method::PUT,
                &["policies", vhost, &policy.name],
                &[],
                None,
                Some(&body),
                REQUEST_TIMEOUT,
            )
            .await?;
        self.accept(status, &text, &base, Some(vhost), &what)
            .await?;
        Ok(())
    }

    /// A GET of any API path (segments are percent-encoded, so a vhost `/` is fine), for callers
    /// that need a field this module does not model.
    pub async fn get_json(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
        what: &str,
    ) -> Result<Value, ManagementError> {
        Ok(self
            .call(Method::GET, segments, query, None, None, what)
            .await?
            .0)
    }

    /// Any other request (PUT, DELETE, …) with an optional JSON body, for callers that need a
    /// call this module does not model; answers the JSON, or `Null` when the answer is empty.
    /// Refusals are explained as for every other call (`what` says what was asked).
    pub async fn send_json(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&Value>,
        what: &str,
    ) -> Result<Value, ManagementError> {
        let (status, text, base) = self
            .request(method, segments, &[], None, body, REQUEST_TIMEOUT)
            .await?;
        self.accept(status, &text, &base, None, what).await
    }

    /// Sends one request, trying each node from the remembered one onwards until one answers,
    /// and turns non-success answers into errors. Returns the JSON and the base URL that
    /// answered.
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        x_reason: Option<&str>,
        vhost: Option<&str>,
        what: &str,
    ) -> Result<(Value, String), ManagementError> {
        let (status, body, base) = self.send(method, segments, query, x_reason).await?;
        let v = self.accept(status, &body, &base, vhost, what).await?;
        Ok((v, base))
    }

    /// Parses a success, or explains a refusal.
    async fn accept(
        &self,
        status: StatusCode,
        body: &str,
        base: &str,
        vhost: Option<&str>,
        what: &str,
    ) -> Result<Value, ManagementError> {
        let parse = |b: &str| match b.trim().is_empty() {
            true => Ok(Value::Null),
            false => serde_json::from_str(b),
        };
        self.accept_with(status, body, base, vhost, what, parse)
            .await
    }

    /// A list reply read entry by entry ([`wire::each_entry`]): what `keep` kept, or `None`
    /// when the reply is not a list.
    async fn accept_list<T>(
        &self,
        status: StatusCode,
        body: &str,
        base: &str,
        vhost: Option<&str>,
        what: &str,
        keep: impl FnMut(&Value) -> Option<T>,
    ) -> Result<Option<Vec<T>>, ManagementError> {
        let parse = |b: &str| wire::each_entry(b, keep);
        self.accept_with(status, body, base, vhost, what, parse)
            .await
    }

    /// A success read by `parse`, or a refusal explained.
    async fn accept_with<T>(
        &self,
        status: StatusCode,
        body: &str,
        base: &str,
        vhost: Option<&str>,
        what: &str,
        parse: impl FnOnce(&str) -> Result<T, serde_json::Error>,
    ) -> Result<T, ManagementError> {
        if status.is_success() {
            return parse(body).map_err(|e| ManagementError::BadResponse {
                url: base.to_string(),
                what: what.to_string(),
                reason: e.to_string(),
            });
        }
        Err(self.interpret(status, body, base, vhost, what).await)
    }

    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        x_reason: Option<&str>,
    ) -> Result<(StatusCode, String, String), ManagementError> {
        self.send_with_timeout(method, segments, query, x_reason, REQUEST_TIMEOUT)
            .await
    }

    async fn send_with_timeout(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        x_reason: Option<&str>,
        timeout: Duration,
    ) -> Result<(StatusCode, String, String), ManagementError> {
        self.request(method, segments, query, x_reason, None, timeout)
            .await
    }

    /// One request with an optional JSON body, to each node in turn until one answers.
    async fn request(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, &str)],
        x_reason: Option<&str>,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(StatusCode, String, String), ManagementError> {
        let n = self.urls.len();
        let start = self.active.load(Ordering::Relaxed);
        let mut attempts = Vec::new();
        for k in 0..n {
            let i = (start + k) % n;
            let Some(base) = self.urls.get(i) else {
                continue;
            };
            let shown = base.as_str().trim_end_matches('/').to_string();
            let url = api_url(base, segments);
            // A loaded management listener sometimes closes a connection before it answers
            // (seen on 4.0 in CI: "connection closed before message completed"): a read is
            // asked once more of the same node before the next one, or before giving up.
            let tries = if method == Method::GET { 2 } else { 1 };
            for attempt in 1..=tries {
                let mut req = self
                    .client
                    .request(method.clone(), url.clone())
                    .basic_auth(
                        &self.credentials.username,
                        Some(self.credentials.password.expose()),
                    )
                    .timeout(timeout);
                if !query.is_empty() {
                    req = req.query(query);
                }
                if let Some(r) = x_reason {
                    req = req.header("X-Reason", r);
                }
                if let Some(b) = body {
                    req = req.json(b);
                }
                let failure = match req.send().await {
                    Ok(resp) => {
                        let status = resp.status();
                        match read_body(resp).await {
                            Ok(Some(body)) => {
                                self.active.store(i, Ordering::Relaxed);
                                return Ok((status, body, shown));
                            }
                            Ok(None) => {
                                return Err(ManagementError::BadResponse {
                                    url: shown,
                                    what: "read a reply".to_string(),
                                    reason: format!(
                                        "the reply is larger than {} MiB",
                                        MAX_REPLY >> 20
                                    ),
                                });
                            }
                            Err(e) => e,
                        }
                    }
                    Err(e) => e,
                };
                // Nothing listening, or no answer in time: asking again would only wait. A
                // redirect refused (`redirect_refusal`) would be refused again.
                if attempt == tries
                    || failure.is_connect()
                    || failure.is_timeout()
                    || failure.is_redirect()
                {
                    attempts.push(Attempt {
                        url: shown.clone(),
                        failure: describe_reqwest(&failure),
                    });
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Err(ManagementError::Unreachable { attempts })
    }

    /// Turns a refusal into the error that says what to do about it.
    async fn interpret(
        &self,
        status: StatusCode,
        body: &str,
        base: &str,
        vhost: Option<&str>,
        what: &str,
    ) -> ManagementError {
        let user = self.credentials.username.clone();
        let url = base.to_string();
        let (error, reason) = error_fields(body);
        let reason_lc = reason.to_ascii_lowercase();
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                if reason_lc.contains("virtual host") {
                    ManagementError::NoVhostAccess {
                        url,
                        user,
                        vhost: vhost.unwrap_or("?").to_string(),
                    }
                } else if reason_lc.contains("management user") {
                    ManagementError::NotManagementUser { url, user }
                } else if let Some(tag) = ["administrator", "policymaker", "monitoring"]
                    .iter()
                    .find(|t| reason_lc.contains(*t))
                {
                    ManagementError::MissingTag {
                        url,
                        user,
                        tag: tag.to_string(),
                        what: what.to_string(),
                    }
                } else {
                    ManagementError::WrongCredentials { url, user }
                }
            }
            StatusCode::NOT_FOUND => {
                // 4.x answers 404 for a vhost the user may not see; tell that apart from a
                // missing queue or exchange by asking about the vhost itself. Only a 404 there
                // says so: a `management`-tagged user gets 401 for a vhost it may use (3.10 and
                // 4.3, measured), and its missing queue is just missing.
                if let Some(vh) = vhost
                    && !self.vhost_visible(vh).await
                {
                    return ManagementError::VhostNotFound {
                        url,
                        user,
                        vhost: vh.to_string(),
                    };
                }
                ManagementError::NotFound {
                    url,
                    what: what.to_string(),
                }
            }
            _ => ManagementError::Http {
                url,
                status: status.as_u16(),
                what: what.to_string(),
                reason: if reason.is_empty() { error } else { reason },
            },
        }
    }
}

impl Management {
    /// Whether this user can see vhost `vh`: asked of the vhost itself, and where that answers
    /// 401 (a `management`-tagged user, whether or not it may use the vhost: 3.10 and 4.3,
    /// measured) of the list of vhosts it may use. Unknown counts as visible.
    async fn vhost_visible(&self, vh: &str) -> bool {
        match self.send(Method::GET, &["vhosts", vh], &[], None).await {
            Ok((st, _, _)) if st == StatusCode::NOT_FOUND => false,
            Ok((st, _, _)) if st == StatusCode::UNAUTHORIZED || st == StatusCode::FORBIDDEN => {
                match self
                    .send(Method::GET, &["vhosts"], &[("columns", "name")], None)
                    .await
                {
                    Ok((st, text, _)) if st.is_success() => {
                        serde_json::from_str::<Vec<Value>>(&text).is_ok_and(|list| {
                            list.iter()
                                .any(|v| v.get("name").and_then(Value::as_str) == Some(vh))
                        })
                    }
                    _ => true,
                }
            }
            _ => true,
        }
    }
}

/// Characters escaped in one path segment of a management API URL: everything but RFC 3986's
/// unreserved characters. The `url` crate's own segment set leaves `[ ] | ^` and more as they
/// are, and RabbitMQ answers 400 to a queue named `a[b]` sent that way.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `base` + `api/` + each segment percent-encoded with [`SEGMENT`] (so `/` inside a vhost name
/// becomes `%2F`, `[` becomes `%5B`). Any query or fragment of `base` is dropped.
pub fn api_url(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    let mut path = url.path().trim_end_matches('/').to_string();
    path.push_str("/api");
    for s in segments {
        path.push('/');
        path.extend(percent_encoding::utf8_percent_encode(s, SEGMENT));
    }
    // Every byte outside the unreserved set is already `%XX`, so `set_path` keeps it as is.
    url.set_path(&path);
    url
}

/// `{"error": …, "reason": …}` from a refusal, made safe to print.
fn error_fields(body: &str) -> (String, String) {
    let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let field = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(clean)
            .unwrap_or_default()
    };
    let (error, reason) = (field("error"), field("reason"));
    if error.is_empty() && reason.is_empty() {
        return (String::new(), clean(body));
    }
    (error, reason)
}

/// Broker text for an error message: one line of at most 300 characters, sanitised by the one
/// policy every terminal string follows (`domain::sanitize`).
fn clean(text: &str) -> String {
    crate::domain::sanitize::summary(text, 300)
}

/// Why a request got no answer, in a few words.
fn describe_reqwest(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".to_string();
    }
    let chain = error_chain(e);
    let lc = chain.to_ascii_lowercase();
    if e.is_redirect() {
        // The innermost cause is `redirect_refusal`'s sentence.
        let mut inner: &dyn std::error::Error = e;
        while let Some(s) = inner.source() {
            inner = s;
        }
        clean(&inner.to_string())
    } else if lc.contains("connection refused") {
        "connection refused".to_string()
    } else if e.is_dns() || lc.contains("dns error") || lc.contains("failed to lookup") {
        "host not found".to_string()
    } else if lc.contains("certificate") || lc.contains("tls") {
        format!("TLS failed: {chain}")
    } else if lc.contains("timed out") {
        "timed out".to_string()
    } else if lc.contains("invalid http version") {
        // What an AMQP listener sends back to an HTTP request: its protocol header.
        "this port answers AMQP, not HTTP: it is the broker's AMQP port; the management API listens on another (15672 by default: pass --management-url http://HOST:15672)".to_string()
    } else {
        chain
    }
}

/// The innermost causes of an error, which say more than reqwest's outer message. The URLs in
/// them carry no credentials (those travel in a header).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        parts.push(s.to_string());
        src = s.source();
    }
    let tail: Vec<String> = parts.into_iter().rev().take(2).collect();
    clean(&tail.into_iter().rev().collect::<Vec<_>>().join(": "))
}

/// The largest reply read: a listing of 100,000 queues is about 100 MB.
const MAX_REPLY: usize = 512 << 20;

/// A reply's body as text, read chunk by chunk into one buffer (`text()` holds the chunks, a
/// joined copy and a decoded copy at once: three times a listing of tens of megabytes); `None`
/// past [`MAX_REPLY`]. The API speaks UTF-8 JSON.
async fn read_body(mut resp: reqwest::Response) -> Result<Option<String>, reqwest::Error> {
    let expected = resp.content_length().unwrap_or(0);
    let mut body = Vec::with_capacity(usize::try_from(expected).unwrap_or(0).min(MAX_REPLY));
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > MAX_REPLY {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(String::from_utf8(body).unwrap_or_else(|e| {
        String::from_utf8_lossy(e.as_bytes()).into_owned()
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_never_downgrade_or_leave_the_host() {
        let u = |s: &str| Url::parse(s).unwrap();
        let https = [u("https://rabbit.example:15671/api/overview")];
        let down = redirect_refusal(&https, &u("http://rabbit.example:15672/api/overview"));
        assert!(
            down.as_deref().is_some_and(|w| w.contains("not https")),
            "{down:?}"
        );
        let away = redirect_refusal(&https, &u("https://elsewhere.example/api/overview"));
        assert!(
            away.as_deref().is_some_and(|w| w.contains("another host")),
            "{away:?}"
        );
        // http to https on the same host is an upgrade; a path change on it is harmless.
        let http = [u("http://rabbit.example:15672/api/overview")];
        assert_eq!(
            redirect_refusal(&http, &u("https://rabbit.example:15671/api/overview")),
            None
        );
        assert_eq!(
            redirect_refusal(
                &https,
                &u("https://rabbit.example:15671/rabbit/api/overview")
            ),
            None
        );
        let many = vec![u("http://rabbit.example/"); MAX_REDIRECTS + 1];
        assert!(redirect_refusal(&many, &u("http://rabbit.example/")).is_some());
    }

    #[test]
    fn api_urls_encode_vhosts() {
        let base = Url::parse("http://h:15672").unwrap();
        assert_eq!(
            api_url(&base, &["queues", "/", "a b"]).as_str(),
            "http://h:15672/api/queues/%2F/a%20b"
        );
        assert_eq!(
            api_url(&base, &["queues", "v h", "a[b]|c^d e/f%?#"]).as_str(),
            "http://h:15672/api/queues/v%20h/a%5Bb%5D%7Cc%5Ed%20e%2Ff%25%3F%23"
        );
        assert_eq!(
            api_url(&base, &["exchanges", "/", "é.x-y_z~"]).as_str(),
            "http://h:15672/api/exchanges/%2F/%C3%A9.x-y_z~"
        );
        let prefixed = Url::parse("https://h/rabbit/").unwrap();
        assert_eq!(
            api_url(&prefixed, &["overview"]).as_str(),
            "https://h/rabbit/api/overview"
        );
    }

    #[test]
    fn refusal_text_is_cleaned() {
        let (e, r) =
            error_fields("{\"error\":\"not_authorised\",\"reason\":\"Login\\u001b[31m failed\"}");
        assert_eq!(e, "not_authorised");
        assert_eq!(r, "Login\\e[31m failed");
        assert_eq!(error_fields("<html>oops</html>").1, "<html>oops</html>");
    }
}
