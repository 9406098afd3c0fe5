//! `kubevirt-operator check --orphans`: lists, on the local cluster and every KubevirtConfig's,
//! the VMs, claims and DataVolumes that carry the operator's labels or proofs but belong to no
//! live Machine, each with how to delete or adopt it; and apart, those that claim to be ours
//! with no proof that verifies. Deletes nothing. Exit 1 when anything is listed or a cluster
//! could not be looked at, so a cron job or CI can alert on it.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::orphans::decide::judged;
use crate::orphans::scan::{self, Found, LOCAL};
use crate::orphans::{Verdict, advice};
use crate::reconciler::run::watches::Scope;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// List leftovers: objects with the operator's labels or proofs that belong to no live
    /// Machine (the only check so far; required).
    #[arg(long, required = true)]
    pub orphans: bool,
    /// Namespace the operator runs in (its ownership key Secret is read there).
    #[arg(
        long,
        short = 'n',
        env = "NAMESPACE",
        default_value = "kubevirt-operator-system"
    )]
    pub namespace: String,
}

/// The report (pure): leftovers with advice, then unproven objects, then clusters not looked at.
/// Returns the text and whether anything was listed.
pub fn report(
    found: &[Found],
    unreachable: &[(String, String)],
    clusters: usize,
) -> (String, bool) {
    let mut out = String::new();
    let orphans: Vec<&Found> = (found.iter())
        .filter(|f| matches!(f.verdict, Verdict::Orphan { .. }))
        .collect();
    let unproven: Vec<&Found> = (found.iter())
        .filter(|f| f.verdict == Verdict::Unproven)
        .collect();
    for f in &orphans {
        let Verdict::Orphan { machine, why } = &f.verdict else {
            continue;
        };
        let on = if f.cluster == LOCAL {
            String::new()
        } else {
            format!(" (on the cluster of KubevirtConfig {})", f.cluster)
        };
        let _ = writeln!(
            out,
            "{} {} {}/{} Machine={machine} {}\n    {}{on}",
            f.cluster,
            f.kind,
            f.namespace,
            f.name,
            why.as_str(),
            advice(&f.kind, &f.namespace, &f.name, machine, why)
        );
    }
    if !unproven.is_empty() {
        let _ = writeln!(
            out,
            "Claim to be ours (our labels or a proof annotation) with no proof that verifies under \
             this operator's key: another install's, or forged; the operator never touches them:"
        );
        for f in &unproven {
            let _ = writeln!(out, "{} {} {}/{}", f.cluster, f.kind, f.namespace, f.name);
        }
    }
    for (name, why) in unreachable {
        let _ = writeln!(
            out,
            "NOT CHECKED: the cluster of KubevirtConfig {name}: {why}"
        );
    }
    let _ = writeln!(
        out,
        "{} leftovers, {} unproven, on {clusters} clusters; nothing was deleted",
        orphans.len(),
        unproven.len()
    );
    (out, !found.is_empty() || !unreachable.is_empty())
}

pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the cluster (KUBECONFIG or in-cluster configuration)")?;
    let key = scan::key(&client, &args.namespace).await?;
    let (targets, mut unreachable) = scan::targets(&client, &key).await?;
    let all = [Scope::All];
    let mut listed = Vec::new();
    for target in &targets {
        match scan::claiming(target, &all).await {
            Ok(l) => listed.push((target, l)),
            // A remote cluster that fails mid-way is reported, the others still listed.
            Err(e) if target.name != LOCAL => {
                unreachable.push((target.name.clone(), e.to_string()))
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Read after the objects: one made for a Machine created meanwhile finds it.
    let live = scan::live_machines(&client, &all).await?;
    let found: Vec<Found> = (listed.iter())
        .flat_map(|(t, l)| judged(&t.name, &t.key, l, &live))
        .collect();
    let checked = listed.len();
    let (text, listed) = report(&found, &unreachable, checked);
    print!("{text}");
    Ok(if listed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orphans::Why;

    fn found(cluster: &str, name: &str, verdict: Verdict) -> Found {
        Found {
            cluster: cluster.to_owned(),
            kind: "PersistentVolumeClaim".to_owned(),
            namespace: "team-a".to_owned(),
            name: name.to_owned(),
            verdict,
        }
    }

    #[test]
    fn the_report_lists_leftovers_with_advice_then_unproven_then_unreachable() {
        let (text, listed) = report(&[], &[], 2);
        assert_eq!(
            text,
            "0 leftovers, 0 unproven, on 2 clusters; nothing was deleted\n"
        );
        assert!(!listed);
        let gone = Verdict::Orphan {
            machine: "m".to_owned(),
            why: Why::MachineGone,
        };
        let (text, listed) = report(
            &[
                found("edge", "m-root", gone),
                found(LOCAL, "x-root", Verdict::Unproven),
            ],
            &[("far".to_owned(), "no Secret".to_owned())],
            2,
        );
        assert!(listed);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "edge PersistentVolumeClaim team-a/m-root Machine=m MachineGone"
        );
        assert!(lines[1].contains("kubectl delete pvc m-root -n team-a"));
        assert!(lines[1].ends_with("(on the cluster of KubevirtConfig edge)"));
        assert!(lines[2].starts_with("Claim to be ours"));
        assert_eq!(lines[3], "local PersistentVolumeClaim team-a/x-root");
        assert_eq!(
            lines[4],
            "NOT CHECKED: the cluster of KubevirtConfig far: no Secret"
        );
        assert_eq!(
            lines[5],
            "1 leftovers, 1 unproven, on 2 clusters; nothing was deleted"
        );
    }
}
