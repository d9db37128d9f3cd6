//! Gathering what discovery needs from the management API — queues, exchanges, bindings and
//! policies of a vhost, fetched concurrently — and handing it to the pure classifier in
//! [`crate::domain::discovery`].

use regex::Regex;

use crate::broker::management::{Management, ManagementError};
use crate::domain::discovery::{self, BrokerFeatures, Discovery, Topology};

/// Queues, exchanges, bindings and policies of one vhost, fetched in parallel.
pub async fn topology(mgmt: &Management, vhost: &str) -> Result<Topology, ManagementError> {
    let (queues, exchanges, bindings, policies) = tokio::join!(
        mgmt.queues(vhost),
        mgmt.exchanges(vhost),
        mgmt.bindings(vhost),
        mgmt.policies(vhost),
    );
    let mut t = Topology {
        queues: queues?,
        exchanges: exchanges?,
        bindings: bindings?,
        policies: policies?,
    };
    held_dead_letters(mgmt, vhost, &mut t).await;
    Ok(t)
}

/// Most queues whose held dead letters one discovery asks for, one request each.
const HELD_PROBES: usize = 64;

/// Fills `messages_dlx` for the queues of `vhost` that dead-letter at least once (the listing
/// does not carry it), at most [`HELD_PROBES`] of them, concurrently. A queue that cannot be
/// asked keeps `None`: nothing is said about it, and the listing is not failed for it.
async fn held_dead_letters(mgmt: &Management, vhost: &str, t: &mut Topology) {
    let wanted = discovery::stuck::candidates(t, HELD_PROBES);
    let asks = wanted.iter().filter_map(|&i| t.queues.get(i)).map(|q| {
        let name = q.name.clone();
        async move { mgmt.dead_letters_held(vhost, &name).await }
    });
    let counts = futures_util::future::join_all(asks).await;
    for (i, n) in wanted.into_iter().zip(counts) {
        match (t.queues.get_mut(i), n) {
            (Some(q), Ok(n)) => q.messages_dlx = n,
            (_, Err(e)) => tracing::debug!("held dead letters not counted: {e}"),
            _ => {}
        }
    }
}

/// Every dead-letter queue of `vhost`, its feeders, the retry loops and the other queues. Asks
/// the broker for its version too (delivery-limit defaults depend on it); use
/// [`discover_with`] when the version is already known.
pub async fn discover(
    mgmt: &Management,
    vhost: &str,
    patterns: &[Regex],
) -> Result<Discovery, ManagementError> {
    let (overview, topo) = tokio::join!(mgmt.overview(), topology(mgmt, vhost));
    let features = overview?.features;
    let topo = topo?;
    let mut d = discovery::discover(&topo, &features, patterns);
    d.set_vhost(vhost);
    count_consumers(mgmt, None, vhost, &mut d).await;
    Ok(d)
}

/// [`discover`] for a broker whose features are already known.
pub async fn discover_with(
    mgmt: &Management,
    vhost: &str,
    patterns: &[Regex],
    features: &BrokerFeatures,
) -> Result<Discovery, ManagementError> {
    let topo = topology(mgmt, vhost).await?;
    let mut d = discovery::discover(&topo, features, patterns);
    d.set_vhost(vhost);
    Ok(d)
}

/// Every vhost's discovery from four listings (queues, exchanges, bindings, policies of every
/// vhost at once), whatever the number of vhosts; vhosts without queues are left out. By vhost
/// name.
pub async fn discover_all(
    mgmt: &Management,
    patterns: &[Regex],
    features: &BrokerFeatures,
) -> Result<Vec<(String, Discovery)>, ManagementError> {
    let (queues, rest) = tokio::join!(mgmt.queues_all(), mgmt.everything_but_queues());
    let (policies, exchanges, bindings) = rest?;
    let mut by: std::collections::BTreeMap<String, Topology> = Default::default();
    for (v, q) in queues? {
        by.entry(v).or_default().queues.push(q);
    }
    for (v, p) in policies {
        if let Some(t) = by.get_mut(&v) {
            t.policies.push(p);
        }
    }
    for (v, e) in exchanges {
        if let Some(t) = by.get_mut(&v) {
            t.exchanges.push(e);
        }
    }
    for (v, b) in bindings {
        if let Some(t) = by.get_mut(&v) {
            t.bindings.push(b);
        }
    }
    let mut all: Vec<(String, Discovery)> = Vec::new();
    for (v, mut topo) in by {
        held_dead_letters(mgmt, &v, &mut topo).await;
        let mut d = discovery::discover(&topo, features, patterns);
        d.set_vhost(&v);
        all.push((v, d));
    }
    Ok(all)
}

/// The consumers of the queues `d` shows in `vhost` (its dead-letter queues and their feeders):
/// live over AMQP when `conn` (a connection to `vhost`) is given, then the management API's
/// per-queue figure for those AMQP did not count (see [`feeder_consumers`]). A dead-letter
/// queue found by its name and a framework's topology alone that something consumes goes back
/// to the other queues ([`Discovery::consumed_guesses_are_queues`]).
pub(crate) async fn count_consumers(
    mgmt: &Management,
    conn: Option<&lapin::Connection>,
    vhost: &str,
    d: &mut Discovery,
) {
    if let Some(conn) = conn {
        let wanted = d.consumer_counts_wanted(vhost, MAX_LIVE_COUNTS);
        let live = live_consumers(conn, &wanted).await;
        d.set_consumers(vhost, &live);
    }
    feeder_consumers(mgmt, d).await;
    d.consumed_guesses_are_queues();
}

/// Most queues counted over AMQP in one discovery (dead-letter queues first, then their
/// feeders); the rest keep what the management API says, or stay unknown.
pub(crate) const MAX_LIVE_COUNTS: usize = 200;
/// Passive declares in flight at once on the one channel.
const LIVE_IN_FLIGHT: usize = 16;
/// For opening the channel, and for each passive declare.
const LIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
/// Channels opened again after one the broker closed (a queue deleted since the listing).
const LIVE_REOPENS: usize = 3;

/// The live consumer count of each queue of `names` (in the connection's vhost), from a
/// passive `queue.declare` (its `consumer_count`) on one channel, [`LIVE_IN_FLIGHT`] at a time.
/// A queue the broker refuses (gone since the listing, exclusive to another connection) closes
/// the channel: it is left out, and the rest are counted on a new one (at most
/// [`LIVE_REOPENS`] times). A queue not answered in [`LIVE_TIMEOUT`] is left out. Never reads a
/// message.
pub(crate) async fn live_consumers(
    conn: &lapin::Connection,
    names: &[String],
) -> std::collections::HashMap<String, u64> {
    use futures_util::StreamExt;
    let mut counted = std::collections::HashMap::new();
    let mut rest: Vec<&String> = names.iter().collect();
    for _ in 0..=LIVE_REOPENS {
        if rest.is_empty() {
            break;
        }
        let Ok(Ok(ch)) = tokio::time::timeout(LIVE_TIMEOUT, conn.create_channel()).await else {
            break;
        };
        let owned: Vec<String> = rest.iter().map(|n| (*n).clone()).collect();
        let answers: Vec<Option<u64>> = futures_util::stream::iter(owned)
            .map(|name| {
                let ch = ch.clone();
                async move {
                    let options = lapin::options::QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    };
                    let declare =
                        ch.queue_declare(name.as_str().into(), options, Default::default());
                    match tokio::time::timeout(LIVE_TIMEOUT, declare).await {
                        Ok(Ok(q)) => Some(u64::from(q.consumer_count())),
                        _ => None,
                    }
                }
            })
            .buffered(LIVE_IN_FLIGHT)
            .collect()
            .await;
        if ch.status().connected() {
            let _ = ch.close(200, "counted".into()).await;
        }
        let failed = answers.iter().position(Option::is_none);
        for (name, n) in rest.iter().zip(&answers) {
            if let Some(n) = n {
                counted.insert((*name).clone(), *n);
            }
        }
        // Past the first refusal every answer on that channel failed with it: those again.
        rest = match failed {
            Some(i) => rest
                .into_iter()
                .skip(i + 1)
                .filter(|n| !counted.contains_key(*n))
                .collect(),
            None => Vec::new(),
        };
    }
    counted
}

/// Most feeding queues asked for their consumers in one discovery; the rest stay unknown.
const MAX_FEEDERS_ASKED: usize = 100;

/// Consumers on the queues that feed the dead-letter queues: a listing without statistics
/// (what keeps 10,000 queues cheap) does not carry them, and "nothing consumes the work queue"
/// is the most useful fact at 3 a.m. So each feeder not counted yet is asked for, with its
/// statistics (one small request each, 16 at a time, at most [`MAX_FEEDERS_ASKED`]); one the
/// broker has no statistics for yet stays unknown.
pub(crate) async fn feeder_consumers(mgmt: &Management, d: &mut Discovery) {
    use futures_util::StreamExt;
    let known: std::collections::HashSet<(&str, &str)> = d
        .other_queues
        .iter()
        .filter(|q| q.consumers.is_some())
        .map(|q| (q.vhost.as_str(), q.name.as_str()))
        .chain(
            d.dead_letter_queues
                .iter()
                .filter(|q| q.consumers.is_some())
                .map(|q| (q.vhost.as_str(), q.name.as_str())),
        )
        .collect();
    let mut wanted: Vec<(String, String)> = d
        .dead_letter_queues
        .iter()
        .flat_map(|q| q.feeders.iter().map(move |f| (q.vhost.clone(), f.clone())))
        .filter(|(v, f)| !known.contains(&(v.as_str(), f.as_str())))
        .collect();
    wanted.sort();
    wanted.dedup();
    wanted.truncate(MAX_FEEDERS_ASKED);
    let counted: Vec<((String, String), Option<u64>)> = futures_util::stream::iter(wanted)
        .map(|(v, f)| async move {
            let n = mgmt.queue(&v, &f).await.ok().and_then(|q| q.consumers);
            ((v, f), n)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let counted: std::collections::HashMap<(String, String), u64> = counted
        .into_iter()
        .filter_map(|(k, n)| Some((k, n?)))
        .collect();
    if counted.is_empty() {
        return;
    }
    let count = |v: &str, n: &str| counted.get(&(v.to_string(), n.to_string())).copied();
    for q in &mut d.other_queues {
        if q.consumers.is_none() {
            q.consumers = count(&q.vhost, &q.name);
        }
    }
    for q in &mut d.dead_letter_queues {
        if q.consumers.is_none() {
            q.consumers = count(&q.vhost, &q.name);
        }
    }
}
