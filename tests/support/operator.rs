//! The operator as its users run it: the `kubevirt-operator run` binary in a child process,
//! authenticated as a user that holds exactly the RBAC in `manifests/rbac/`, against a real
//! control plane. Started by [`super::Fixture::operator`] for the reconciler's integration
//! tests, which play KubeVirt (VMIs and their status) and the volume controller (PVC phases)
//! themselves.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};

use super::{ControlPlane, OPERATOR_NAMESPACE, Proc, User};

pub const OPERATOR_USER: &str = "kubevirt-operator";
/// Short, so that resync behaviour shows within a test's patience.
pub const RESYNC: Duration = Duration::from_secs(2);

/// The `kubevirt-operator` binary cargo built for this test (`examples/dev.rs` also includes
/// this module, and cargo builds no binary for examples: it never starts one).
// An unwrap of option_env! on purpose: the example compiles this module and never calls it.
#[allow(clippy::option_env_unwrap)]
pub fn operator_binary() -> &'static Path {
    Path::new(
        option_env!("CARGO_BIN_EXE_kubevirt-operator")
            .expect("the kubevirt-operator binary, built for integration tests"),
    )
}

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

async fn create_or_keep<K>(api: &Api<K>, obj: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating {}: {e}", obj.name_any()),
    }
}

/// Installs `manifests/rbac/` and binds it to a freshly minted user, who has no other rights.
pub async fn operator_user(cp: &ControlPlane, client: &Client, name: &str) -> User {
    let role: ClusterRole = serde_yaml::from_str(
        &std::fs::read_to_string(manifest("manifests/rbac/cluster_role.yaml"))
            .expect("cluster role"),
    )
    .expect("ClusterRole YAML");
    let lease_role: Role = serde_yaml::from_str(
        &std::fs::read_to_string(manifest("manifests/rbac/leader_election_role.yaml"))
            .expect("leader election role"),
    )
    .expect("Role YAML");
    create_or_keep(&Api::<ClusterRole>::all(client.clone()), &role).await;
    create_or_keep(
        &Api::<Role>::namespaced(client.clone(), OPERATOR_NAMESPACE),
        &lease_role,
    )
    .await;
    let subject = Subject {
        kind: "User".into(),
        name: name.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        namespace: None,
    };
    let mut crb = ClusterRoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.name_any(),
        },
        subjects: Some(vec![subject.clone()]),
        ..Default::default()
    };
    crb.metadata.name = Some(format!("{name}-binding"));
    create_or_keep(&Api::<ClusterRoleBinding>::all(client.clone()), &crb).await;
    let mut rb = RoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: lease_role.name_any(),
        },
        subjects: Some(vec![subject]),
        ..Default::default()
    };
    rb.metadata.name = Some(format!("{name}-leader-election"));
    create_or_keep(
        &Api::<RoleBinding>::namespaced(client.clone(), OPERATOR_NAMESPACE),
        &rb,
    )
    .await;
    cp.mint_user(name, &[]).expect("mint user")
}

/// Installs the CRDs the operator works with: KubeVirt's and Multus' fixtures and our own.
pub async fn install_crds(cp: &ControlPlane) {
    let mut crds = crate::support::crd_fixtures().expect("fixture CRDs");
    crds.push(manifest("manifests/crds.yaml"));
    cp.install_crds(&crds).await.expect("CRDs install");
}

/// One `kubevirt-operator run` process, killed with the test process at the latest.
pub struct Operator {
    pub proc: Proc,
    pub identity: String,
    /// Port of `/healthz` and `/readyz` on 127.0.0.1.
    pub probes: u16,
    /// Its files (serving certificate `tls.crt`, log).
    pub dir: PathBuf,
}

/// The Service tests register the operator's aggregated API under (in [`OPERATOR_NAMESPACE`]),
/// and the host its serving certificate carries for it.
pub const SUBRESOURCES_SERVICE: &str = "kubevirt-operator-subresources";
pub const SUBRESOURCES_HOST: &str = "kubevirt-operator-subresources.kubevirt-operator-system.svc";

/// `ALLOWED_BRIDGES` and `ALLOWED_VLANS` for the operators the tests start.
pub const TEST_NETWORKS: [(&str, &str); 2] = [
    ("ALLOWED_BRIDGES", "br0,br1,br7,br-prod,br-storage"),
    ("ALLOWED_VLANS", "0-4094"),
];

impl Operator {
    pub fn start(cp: &ControlPlane, user: &User, identity: &str, extra: &[&str]) -> Operator {
        Self::start_with_env(cp, user, identity, extra, &[])
    }

    /// Like [`Operator::start`], with `env` set for the operator only (e.g. `RUST_LOG`).
    pub fn start_with_env(
        cp: &ControlPlane,
        user: &User,
        identity: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Operator {
        let kubeconfig = cp.write_kubeconfig(user, None).expect("kubeconfig");
        Self::launch(cp, &kubeconfig, identity, extra, env)
    }

    /// The operator with its own `kubeconfig` (e.g. one for a second kube-apiserver).
    pub fn launch(
        cp: &ControlPlane,
        kubeconfig: &Path,
        identity: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Operator {
        let dir = cp.dir().join(format!("operator-{identity}"));
        std::fs::create_dir_all(&dir).expect("operator dir");
        // Also the name kube-apiserver checks when it proxies an aggregated API to the operator.
        let sans = vec!["127.0.0.1".to_owned(), SUBRESOURCES_HOST.to_owned()];
        let cert = rcgen::generate_simple_self_signed(sans).expect("cert");
        std::fs::write(dir.join("tls.crt"), cert.cert.pem()).expect("write cert");
        std::fs::write(dir.join("tls.key"), cert.signing_key.serialize_pem()).expect("write key");
        let probes = super::free_port().expect("free port");
        let mut args: Vec<OsString> = vec![
            "--log-format".into(),
            "json".into(),
            "run".into(),
            "--kubeconfig".into(),
            kubeconfig.into(),
            "--namespace".into(),
            OPERATOR_NAMESPACE.into(),
            "--identity".into(),
            identity.into(),
            "--cert-file".into(),
            dir.join("tls.crt").into(),
            "--key-file".into(),
            dir.join("tls.key").into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--health-probe-bind-address".into(),
            format!("127.0.0.1:{probes}").into(),
        ];
        // A test that scrapes /metrics names its own port.
        if !extra.contains(&"--metrics-bind-address") {
            args.extend(["--metrics-bind-address".into(), "127.0.0.1:0".into()]);
        }
        // RESYNC unless the test chose its own (one that must not lean on resyncs).
        if !extra.contains(&"--reconcile-interval") {
            args.extend([
                "--reconcile-interval".into(),
                format!("{}s", RESYNC.as_secs()).into(),
            ]);
        }
        args.extend(extra.iter().map(OsString::from));
        // The bridges and VLANs the tests' NetworkConfigurations use (none are allowed unset);
        // a test's own env or flags win.
        let mut env = env.to_vec();
        for (name, value) in TEST_NETWORKS {
            if !env.iter().any(|(n, _)| *n == name) {
                env.push((name, value));
            }
        }
        let proc = Proc::spawn_with_env(
            "kubevirt-operator",
            operator_binary(),
            args,
            &env,
            dir.join("operator.log"),
        )
        .expect("spawn operator");
        Operator {
            proc,
            identity: identity.to_owned(),
            probes,
            dir,
        }
    }

    /// The HTTP status of `/readyz`, if it answers.
    pub async fn readyz(&self) -> Option<u16> {
        let resp = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{}/readyz", self.probes))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        Some(resp.status().as_u16())
    }

    /// SIGTERM: a clean shutdown (the Lease is released).
    pub fn terminate(&self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.proc.pid() as libc::pid_t, libc::SIGTERM) };
    }

    pub fn log_tail(&self) -> String {
        self.proc.log_tail(60)
    }

    /// PEM of its (self-signed) serving certificate.
    pub fn serving_cert_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("tls.crt")).expect("the operator's certificate")
    }
}
