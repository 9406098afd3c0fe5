//! `kubevirt-operator run` as the access tests run it: with self-managed certificates, as the
//! admin, filling the webhook configurations installed here for its URL (as the chart installs
//! them in a cluster: for the whole cluster, or the namespaces of `--watch-namespaces`), hence
//! on a dedicated control plane. Started by [`super::Fixture::webhook_operator`].

use super::{ControlPlane, Proc};

/// `run` with self-managed certificates, filling the webhook configurations installed here for
/// its URL (as the chart installs them in a cluster: for the whole cluster, or the namespaces of
/// `--watch-namespaces` in `extra`), hence the dedicated control plane.
pub async fn start_operator(cp: &ControlPlane, op_ns: &str, extra: &[&str]) -> Proc {
    start_replica(cp, op_ns, "access", extra).await.0
}

/// One replica of `run` named `identity` (its own ports and log directory), and its webhook
/// port. The webhook configurations are installed for this replica's URL first: the API server
/// calls the replica started last.
pub async fn start_replica(
    cp: &ControlPlane,
    op_ns: &str,
    identity: &str,
    extra: &[&str],
) -> (Proc, u16) {
    let webhook = super::free_port().expect("port");
    let scope = extra
        .iter()
        .position(|a| *a == "--watch-namespaces")
        .and_then(|i| extra.get(i + 1))
        .map(|v| kubevirt_operator::config::parse_watch_namespaces(v).expect("namespaces"))
        .unwrap_or(kubevirt_operator::config::WatchScope::All);
    let url = format!("https://127.0.0.1:{webhook}");
    let admin = cp.client().await.expect("admin client");
    super::webhooks::install(&admin, &super::webhooks::url_settings(op_ns, &url, &scope)).await;
    (
        spawn_replica(cp, op_ns, identity, extra, &url, webhook),
        webhook,
    )
}

/// A second replica beside the one listening on `leader_port`: its own listener, but the
/// configurations keep calling the leader (as both replicas of a Deployment share a Service),
/// so the leader that fills their caBundle finds its own URL in them.
pub fn start_follower(
    cp: &ControlPlane,
    op_ns: &str,
    identity: &str,
    leader_port: u16,
) -> (Proc, u16) {
    let webhook = super::free_port().expect("port");
    let url = format!("https://127.0.0.1:{leader_port}");
    (
        spawn_replica(cp, op_ns, identity, &[], &url, webhook),
        webhook,
    )
}

fn spawn_replica(
    cp: &ControlPlane,
    op_ns: &str,
    identity: &str,
    extra: &[&str],
    url: &str,
    webhook: u16,
) -> Proc {
    let [metrics, probes] = [(); 2].map(|()| super::free_port().expect("port"));
    let dir = cp.dir().join(if identity == "access" {
        "access-operator".to_owned()
    } else {
        format!("operator-{identity}")
    });
    std::fs::create_dir_all(&dir).expect("dir");
    let mut args: Vec<String> = [
        "--log-format",
        "json",
        "run",
        "--kubeconfig",
        &cp.admin_kubeconfig().display().to_string(),
        "--namespace",
        op_ns,
        "--identity",
        identity,
        "--reconcile-interval",
        "2s",
        "--webhook-url",
        url,
        "--listen",
        &format!("127.0.0.1:{webhook}"),
        "--health-probe-bind-address",
        &format!("127.0.0.1:{probes}"),
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    // A test that scrapes /metrics names its own port.
    if !extra.contains(&"--metrics-bind-address") {
        args.extend([
            "--metrics-bind-address".into(),
            format!("127.0.0.1:{metrics}"),
        ]);
    }
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Proc::spawn(
        "kubevirt-operator",
        super::operator::operator_binary(),
        args.into_iter().map(Into::into).collect(),
        dir.join("operator.log"),
    )
    .expect("spawn operator")
}
