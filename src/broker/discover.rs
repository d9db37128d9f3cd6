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
    Ok(Topology {
        queues: queues?,
        exchanges: exchanges?,
        bindings: bindings?,
        policies: policies?,
    })
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
    by_content(mgmt, vhost, &topo, &mut d).await;
    feeder_consumers(mgmt, &mut d).await;
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
    by_content(mgmt, vhost, &topo, &mut d).await;
    feeder_consumers(mgmt, &mut d).await;
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
    for (v, topo) in by {
        let mut d = discovery::discover(&topo, features, patterns);
        d.set_vhost(&v);
        by_content(mgmt, &v, &topo, &mut d).await;
        all.push((v, d));
    }
    for (_, d) in &mut all {
        feeder_consumers(mgmt, d).await;
    }
    Ok(all)
}

/// Queues known by what their messages are (Symfony's failure transport, which nothing
/// dead-letters into): the head message of each candidate the pure rules name
/// (`discovery::content`) is read through the management API with a requeue, which puts a
/// classic queue's message back in its place; a read that fails leaves the queue as listed.
async fn by_content(mgmt: &Management, vhost: &str, topo: &Topology, d: &mut Discovery) {
    use discovery::content;
    for name in content::candidates(topo, d) {
        let body = serde_json::json!({
            "count": 1,
            "ackmode": "ack_requeue_true",
            "encoding": "auto",
            "truncate": crate::domain::convention::HASHED_BODY,
        });
        let what = format!("read the head of queue '{name}' in vhost '{vhost}'");
        let Ok(v) = mgmt
            .send_json(
                reqwest::Method::POST,
                &["queues", vhost, &name, "get"],
                Some(&body),
                &what,
            )
            .await
        else {
            continue;
        };
        let Some(head) = v.as_array().and_then(|a| a.first()) else {
            continue;
        };
        if let Some(c) = crate::domain::json::dead_letter_from_mgmt(&name, 0, head)
            .ok()
            .as_ref()
            .and_then(content::convention_of)
        {
            d.found_by_content(&name, c);
        }
    }
}

/// Most feeding queues asked for their consumers in one discovery; the rest stay unknown.
const MAX_FEEDERS_ASKED: usize = 100;

/// Consumers on the queues that feed the dead-letter queues: a listing without statistics
/// (what keeps 10,000 queues cheap) does not carry them, and "nothing consumes the work queue"
/// is the most useful fact at 3 a.m. So each feeder not counted yet is asked for, with its
/// statistics (one small request each, 16 at a time, at most [`MAX_FEEDERS_ASKED`]); one the
/// broker has no statistics for yet stays unknown.
async fn feeder_consumers(mgmt: &Management, d: &mut Discovery) {
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
