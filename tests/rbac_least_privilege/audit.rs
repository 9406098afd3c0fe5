//! The audit log's verdict on the walk: no request refused, every grant used.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::grants::{EXEMPT, Grant, allows, resource_of};
use crate::USER;
use crate::support::{AuditedRequest, Started};

/// Reads [`USER`]'s requests once the operator is killed, and asserts that none was refused
/// and that every grant was used (or is exempt, for a reason still true).
pub async fn check(cp: &Started, granted: &[Grant], operator_log: &str, started: Instant) {
    // The audit log. A watch is audited (ResponseComplete) only when it ends: wait for the
    // API server to record the watches the kill cut off.
    let audited = || -> Vec<AuditedRequest> {
        cp.audited_requests()
            .expect("audit log")
            .into_iter()
            .filter(|r| r.user == USER)
            .collect()
    };
    // Quiet for 2 s ends the wait early; the deadline only bounds it (a busy machine may take
    // long to close the watches).
    let deadline = Instant::now() + Duration::from_secs(60);
    let watched = |rs: &[AuditedRequest]| {
        rs.iter()
            .filter(|r| r.verb == "watch")
            .map(|r| (r.api_group.clone(), r.resource.clone()))
            .collect::<BTreeSet<_>>()
    };
    let mut requests = audited();
    let mut quiet = 0;
    while quiet < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let again = audited();
        let same = again.len() == requests.len() && watched(&again) == watched(&requests);
        quiet = if same { quiet + 1 } else { 0 };
        requests = again;
    }
    assert!(!requests.is_empty(), "no request by {USER} audited");
    let forbidden: BTreeSet<String> = requests
        .iter()
        .filter(|r| r.code == 403)
        .map(|r| {
            format!(
                "{} {}/{} ns={:?} name={:?}",
                r.verb,
                r.api_group,
                resource_of(r),
                r.namespace,
                r.name
            )
        })
        .collect();

    let role_grants: Vec<&Grant> = granted.iter().filter(|g| g.namespace.is_some()).collect();
    let used = |g: &Grant| {
        requests.iter().any(|r| {
            r.code != 403
                && allows(g, r)
                && (g.namespace.is_some() || !role_grants.iter().any(|rg| allows(rg, r)))
        })
    };
    let mut unused = Vec::new();
    let mut usage = Vec::new();
    for g in granted {
        let count = requests
            .iter()
            .filter(|r| r.code != 403 && allows(g, r))
            .count();
        usage.push(format!(
            "{:28} {:>24} {:45} {:7} {:?} {count}",
            g.source,
            g.namespace.as_deref().unwrap_or("*"),
            format!("{}/{}", g.group, g.resource),
            g.verb,
            g.names
        ));
        if used(g) {
            continue;
        }
        if EXEMPT
            .iter()
            .any(|(gr, res, v, _)| *gr == g.group && *res == g.resource && *v == g.verb)
        {
            continue;
        }
        unused.push(format!(
            "{}: {}/{} {} (namespace {})",
            g.source,
            g.group,
            g.resource,
            g.verb,
            g.namespace.as_deref().unwrap_or("any")
        ));
    }
    eprintln!(
        "{} requests by {USER} in {:?}; grants and matching requests:\n{}",
        requests.len(),
        started.elapsed(),
        usage.join("\n")
    );

    // The exemptions hold: the plugin that would exercise them is not loaded.
    let apiserver_log =
        std::fs::read_to_string(cp.dir().join("kube-apiserver.log")).expect("API server log");
    assert!(
        apiserver_log.contains("admission controller(s) successfully in the following order"),
        "the API server log no longer lists its admission plugins: the exemptions are unchecked"
    );
    assert!(
        !apiserver_log.contains("OwnerReferencesPermissionEnforcement"),
        "OwnerReferencesPermissionEnforcement runs here: drop the exemptions and exercise them"
    );
    for (group, resource, verb, _) in EXEMPT {
        assert!(
            granted
                .iter()
                .any(|g| g.group == *group && g.resource == *resource && g.verb == *verb),
            "exemption {group}/{resource} {verb} is not granted any more: remove it"
        );
    }

    assert!(
        forbidden.is_empty(),
        "the operator was refused (a grant is missing):\n{}\noperator log:\n{operator_log}",
        forbidden.into_iter().collect::<Vec<_>>().join("\n")
    );
    assert!(
        unused.is_empty(),
        "granted but never used (remove from the manifest, or exempt with a reason):\n{}",
        unused.join("\n")
    );
}
