//! One builder for every control-plane test's set-up: the control plane (dedicated or shared,
//! with kube-apiserver flags, with kube-controller-manager), the CRDs, namespaces, users and
//! their (Cluster)Roles, and the operator, in that order:
//!
//! ```ignore
//! let env = Fixture::new()
//!     .with_all_crds()
//!     .namespace("team-a")
//!     .user("alice", &["devs"])
//!     .grant("team-a", "alice", vec![rule("vitistack.io", "machines", &["create"])])
//!     .operator("e2e", &[])
//!     .start()
//!     .await;
//! let alice = env.client_of("alice").await;
//! ```
//!
//! [`Started`] derefs to its [`ControlPlane`], so everything the control plane offers (clients,
//! per-test namespaces, the audit log, restarts) is at hand.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Client;

use super::operator::{OPERATOR_USER, Operator, operator_user};
use super::{ApiserverExtras, ControlPlane, Proc, User, crd_fixtures, create_namespace};

/// What a test needs of a control plane, built up and then started.
#[derive(Clone, Debug, Default)]
#[must_use = "a fixture does nothing until started"]
pub struct Fixture {
    extras: ApiserverExtras,
    crds: Vec<PathBuf>,
    controller_manager: bool,
    namespaces: Vec<String>,
    users: Vec<(String, Vec<String>)>,
    grants: Vec<(String, String, Vec<PolicyRule>)>,
    cluster_grants: Vec<(String, Vec<PolicyRule>)>,
    operator_rbac: bool,
    operator: Option<Launch>,
}

/// How the operator is run.
#[derive(Clone, Debug)]
enum Launch {
    /// As the reconciler tests run it: as [`OPERATOR_USER`], who holds exactly
    /// `manifests/rbac/`, with a serving certificate of its own ([`Operator::start_with_env`]).
    Reconciler {
        identity: String,
        extra: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// As the access tests run it: as the admin, with self-managed certificates, the webhook
    /// configurations installed for its URL ([`super::replica::start_operator`]).
    Webhooks {
        namespace: String,
        extra: Vec<String>,
    },
}

/// Our own CRDs (Machine, MachineClass, NetworkConfiguration, ...).
pub fn machine_crds() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/crds.yaml")
}

/// The fixtures' CRDs (KubeVirt, CDI, Multus, KubeVirt snapshots) and ours.
pub fn all_crds() -> Vec<PathBuf> {
    let mut crds = crd_fixtures().expect("fixture CRDs");
    crds.push(machine_crds());
    crds
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl Fixture {
    pub fn new() -> Self {
        Self::default()
    }

    /// kube-apiserver flags and files (dedicated control planes only).
    pub fn apiserver(mut self, extras: ApiserverExtras) -> Self {
        self.extras = extras;
        self
    }

    /// The CRDs of `tests/fixtures/crds/`: KubeVirt's, CDI's, Multus' and KubeVirt's snapshots'.
    pub fn with_fixture_crds(self) -> Self {
        self.with_crds(crd_fixtures().expect("fixture CRDs"))
    }

    /// Our own CRDs, `manifests/crds.yaml`.
    pub fn with_machine_crds(self) -> Self {
        self.with_crds([machine_crds()])
    }

    /// The fixtures' CRDs and ours: what the operator works with.
    pub fn with_all_crds(self) -> Self {
        self.with_crds(all_crds())
    }

    pub fn with_crds(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.crds.extend(paths);
        self
    }

    /// kube-controller-manager (garbage collector, namespace controller), started after the
    /// CRDs are installed: it discovers resources when it starts, then only every 30 s.
    pub fn with_controller_manager(mut self) -> Self {
        self.controller_manager = true;
        self
    }

    /// Namespace `name`, labelled with its name as kube-apiserver 1.21+ does.
    pub fn namespace(mut self, name: &str) -> Self {
        self.namespaces.push(name.to_owned());
        self
    }

    /// A user with a client certificate for `name` in `groups` ([`Started::user`]); no rights.
    pub fn user(mut self, name: &str, groups: &[&str]) -> Self {
        self.users.push((name.to_owned(), owned(groups)));
        self
    }

    /// A Role `user` in `ns` with `rules`, bound to user `user`.
    pub fn grant(mut self, ns: &str, user: &str, rules: Vec<PolicyRule>) -> Self {
        self.grants.push((ns.to_owned(), user.to_owned(), rules));
        self
    }

    /// A ClusterRole `user` with `rules`, bound to user `user`.
    pub fn grant_cluster(mut self, user: &str, rules: Vec<PolicyRule>) -> Self {
        self.cluster_grants.push((user.to_owned(), rules));
        self
    }

    /// `manifests/rbac/`, bound to [`OPERATOR_USER`] (`Started::user(OPERATOR_USER)`), for
    /// tests that start their operators themselves.
    pub fn operator_rbac(mut self) -> Self {
        self.operator_rbac = true;
        self
    }

    /// The operator as the reconciler tests run it, named `identity` ([`Started::operator`]),
    /// as [`OPERATOR_USER`] (see [`Fixture::operator_rbac`]).
    pub fn operator(self, identity: &str, extra: &[&str]) -> Self {
        self.operator_with_env(identity, extra, &[])
    }

    /// Like [`Fixture::operator`], with `env` set for the operator only (e.g. `RUST_LOG`).
    pub fn operator_with_env(
        mut self,
        identity: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        self.operator_rbac = true;
        self.operator = Some(Launch::Reconciler {
            identity: identity.to_owned(),
            extra: owned(extra),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        });
        self
    }

    /// The operator as the access tests run it, in `namespace` ([`Started::replica`]).
    pub fn webhook_operator(mut self, namespace: &str, extra: &[&str]) -> Self {
        self.operator = Some(Launch::Webhooks {
            namespace: namespace.to_owned(),
            extra: owned(extra),
        });
        self
    }

    /// A dedicated control plane, set up; dropping the [`Started`] tears it down.
    pub async fn start(self) -> Started {
        super::init_crypto();
        let cp = ControlPlane::start_with(self.extras.clone())
            .await
            .expect("control plane");
        self.set_up(cp).await
    }

    /// One control plane for the whole test process, set up by the first caller; every caller
    /// must ask for the same set-up (it is checked). Give each test its own namespace with
    /// [`ControlPlane::namespace`] and its own clients (they are tied to the test's runtime).
    pub async fn shared(self) -> &'static Started {
        super::init_crypto();
        let wanted = format!("{self:?}");
        let (set_up, env) = SHARED
            .get_or_init(|| async {
                let key = format!("{self:?}");
                // Never dropped: its processes die with the test process, its directory is
                // removed at exit (as for `ControlPlane::shared`).
                let cp = ControlPlane::start().await.expect("shared control plane");
                (key, self.set_up(cp).await)
            })
            .await;
        assert_eq!(
            *set_up, wanted,
            "this test binary's tests ask for different shared set-ups"
        );
        env
    }

    async fn set_up(self, mut cp: ControlPlane) -> Started {
        cp.install_crds(&self.crds).await.expect("CRDs");
        if self.controller_manager {
            cp.start_controller_manager()
                .await
                .expect("kube-controller-manager");
        }
        let admin = cp.client().await.expect("admin client");
        for ns in &self.namespaces {
            create_namespace(&admin, ns).await.expect("namespace");
        }
        let mut users = BTreeMap::new();
        for (name, groups) in &self.users {
            let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
            let user = cp.mint_user(name, &groups).expect("user");
            users.insert(name.clone(), user);
        }
        for (ns, user, rules) in self.grants {
            super::rbac::grant(&admin, &ns, &user, rules).await;
        }
        for (user, rules) in self.cluster_grants {
            super::rbac::grant_cluster(&admin, &user, rules).await;
        }
        if self.operator_rbac {
            let user = operator_user(&cp, &admin, OPERATOR_USER).await;
            users.insert(OPERATOR_USER.to_owned(), user);
        }
        let (mut operator, mut replica) = (None, None);
        match self.operator {
            None => {}
            Some(Launch::Reconciler {
                identity,
                extra,
                env,
            }) => {
                let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
                let env: Vec<(&str, &str)> =
                    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let user = &users[OPERATOR_USER];
                operator = Some(Operator::start_with_env(&cp, user, &identity, &extra, &env));
            }
            Some(Launch::Webhooks { namespace, extra }) => {
                let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
                replica = Some(super::replica::start_operator(&cp, &namespace, &extra).await);
            }
        }
        Started {
            operator,
            replica,
            cp,
            users,
        }
    }
}

static SHARED: tokio::sync::OnceCell<(String, Started)> = tokio::sync::OnceCell::const_new();

/// The shared fixture, once started (for failure messages outside async code).
pub fn shared_started() -> Option<&'static Started> {
    SHARED.get().map(|(_, started)| started)
}

/// A started [`Fixture`]: its control plane (also through `Deref`), users and operator.
/// Fields drop in order: the operator dies before its control plane.
pub struct Started {
    /// The operator [`Fixture::operator`] started.
    pub operator: Option<Operator>,
    /// The operator [`Fixture::webhook_operator`] started.
    pub replica: Option<Proc>,
    pub cp: ControlPlane,
    users: BTreeMap<String, User>,
}

impl Started {
    /// A user the fixture made ([`Fixture::user`], or [`OPERATOR_USER`] for the operator).
    pub fn user(&self, name: &str) -> &User {
        self.users
            .get(name)
            .unwrap_or_else(|| panic!("the fixture has no user {name}"))
    }

    /// A client that authenticates as the fixture's user `name`.
    pub async fn client_of(&self, name: &str) -> Client {
        self.cp
            .client_for(self.user(name))
            .await
            .unwrap_or_else(|e| panic!("client of {name}: {e:#}"))
    }

    /// A new admin client (one per test: clients are tied to their runtime).
    pub async fn admin_client(&self) -> Client {
        self.cp.client().await.expect("admin client")
    }

    pub fn operator(&self) -> &Operator {
        self.operator
            .as_ref()
            .expect("the fixture runs no operator")
    }

    pub fn replica(&self) -> &Proc {
        self.replica
            .as_ref()
            .expect("the fixture runs no webhook operator")
    }

    /// An admin client and the webhook operator, taken out (for tests that stop or restart it).
    pub async fn take_replica(&mut self) -> (Client, Proc) {
        let op = self
            .replica
            .take()
            .expect("the fixture runs no webhook operator");
        (self.admin_client().await, op)
    }
}

impl Deref for Started {
    type Target = ControlPlane;
    fn deref(&self) -> &ControlPlane {
        &self.cp
    }
}

impl DerefMut for Started {
    fn deref_mut(&mut self) -> &mut ControlPlane {
        &mut self.cp
    }
}
