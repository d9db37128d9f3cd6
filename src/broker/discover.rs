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
    let mut d = discovery::discover(&topo?, &features, patterns);
    d.set_vhost(vhost);
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
    Ok(by
        .into_iter()
        .map(|(v, topo)| {
            let mut d = discovery::discover(&topo, features, patterns);
            d.set_vhost(&v);
            (v, d)
        })
        .collect())
}
