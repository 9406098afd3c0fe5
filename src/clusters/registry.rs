//! What the Machine reconciler reads: each KubevirtConfig's health and, when reachable, a client
//! of its cluster. Filled by [`super::run()`]; a deleted KubevirtConfig leaves it (and its client
//! is dropped with the last reader's handle).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use tokio::sync::watch;

/// Which optional APIs a cluster serves: a remote one as last probed, the operator's own as
/// discovered when its watches start (`reconciler::run::controller`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Apis {
    /// `kubevirt.io/v1` virtualmachines.
    pub kubevirt: bool,
    /// `cdi.kubevirt.io/v1beta1` datavolumes.
    pub cdi: bool,
    /// `cdi.kubevirt.io/v1beta1` storageprofiles (not served by every CDI install).
    pub storage_profiles: bool,
    /// `k8s.cni.cncf.io/v1` network-attachment-definitions.
    pub multus: bool,
    /// `snapshot.kubevirt.io/v1beta1` virtualmachinerestores: a remote Machine's snapshots and
    /// restores are taken there.
    pub kubevirt_snapshots: bool,
    /// `kubevirt.io/v1` kubevirts: KubeVirt's install resource, read for disk hot-plug.
    pub kubevirt_installs: bool,
}

/// A reachable remote cluster, as last probed.
pub struct Connection {
    /// The KubevirtConfig's name.
    pub name: String,
    /// A client of the remote cluster (rate-limited, read timeout, short connect timeout).
    pub client: kube::Client,
    /// Changes when the kubeconfig's or the KubevirtConfig's spec's content changes (the first
    /// 16 hex digits of a SHA-256 over both): a reader holding watches on `client` restarts
    /// them when it changes.
    pub revision: String,
    /// The KubevirtConfig's `allowCrossNamespaceClones`.
    pub allow_cross_namespace_clones: bool,
    /// The KubevirtConfig's `namespaceSelector`: the reconciler works only for Machines of the
    /// namespaces it selects (`crate::reconciler::decide::placement`).
    pub namespace_selector: Option<LabelSelector>,
    /// What the last probe found served.
    pub apis: Apis,
    /// The cluster's identity (its kube-system namespace's uid), as the last probe found it.
    pub identity: String,
    /// The KubevirtConfig's `vitistack.io/acknowledge-cluster` annotation: a Machine made on
    /// another cluster goes on only when it names `identity`.
    pub acknowledged: Option<String>,
}

#[cfg(test)]
impl Connection {
    /// A Connection to KubevirtConfig `dc1` for unit tests: a client of an address nothing
    /// answers, the cluster `identity`, every optional API served but Multus, KubeVirt as asked.
    pub fn for_tests(identity: &str, kubevirt: bool) -> Connection {
        let config = kube::Config::new("https://127.0.0.1:1".parse().expect("url"));
        Connection {
            name: "dc1".into(),
            client: kube::Client::try_from(config).expect("client"),
            revision: "r1".into(),
            allow_cross_namespace_clones: false,
            namespace_selector: None,
            apis: Apis {
                kubevirt,
                cdi: true,
                storage_profiles: true,
                multus: false,
                kubevirt_snapshots: true,
                kubevirt_installs: true,
            },
            identity: identity.into(),
            acknowledged: None,
        }
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.name)
            .field("revision", &self.revision)
            .field(
                "allow_cross_namespace_clones",
                &self.allow_cross_namespace_clones,
            )
            .field("namespace_selector", &self.namespace_selector)
            .field("apis", &self.apis)
            .field("identity", &self.identity)
            .field("acknowledged", &self.acknowledged)
            .finish_non_exhaustive()
    }
}

/// Why a KubevirtConfig is (not) ready: its status `reason` and its Ready condition's reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    Ready,
    /// No Secret `kubeconfigSecretRef` in `secretNamespace`.
    SecretNotFound,
    /// The operator may not read Secrets in `secretNamespace` (RBAC).
    SecretForbidden,
    /// The Secret has no `kubeconfig` key.
    KeyMissing,
    /// The kubeconfig does not parse, has no usable context, or asks for an exec plugin or a
    /// file (refused: the Secret's writer must not run commands or read files in the operator).
    KubeconfigInvalid,
    /// The API server did not answer (refused, timed out, TLS failed, 5xx).
    Unreachable,
    /// The API server refused the credentials (401) or their rights (403).
    Unauthorized,
    /// The kubeconfig reaches another cluster than the one recorded at first Ready (another
    /// kube-system uid), and no admin acknowledged the move.
    ClusterChanged,
}

impl Reason {
    /// The CamelCase word written into the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Ready => "Ready",
            Reason::SecretNotFound => "SecretNotFound",
            Reason::SecretForbidden => "SecretForbidden",
            Reason::KeyMissing => "KeyMissing",
            Reason::KubeconfigInvalid => "KubeconfigInvalid",
            Reason::Unreachable => "Unreachable",
            Reason::Unauthorized => "Unauthorized",
            Reason::ClusterChanged => "ClusterChanged",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A KubevirtConfig's health as the reconciler sees it.
#[derive(Clone, Debug)]
pub enum Health {
    Ready(Arc<Connection>),
    NotReady {
        reason: Reason,
        message: String,
        /// The last connection that was ready (for cleanup once the cluster is back, or with
        /// credentials that still work for reads); None if it never was under this leader.
        last: Option<Arc<Connection>>,
    },
}

impl Health {
    pub fn reason(&self) -> Reason {
        match self {
            Health::Ready(_) => Reason::Ready,
            Health::NotReady { reason, .. } => *reason,
        }
    }

    /// The ready connection, if any.
    pub fn ready(&self) -> Option<&Arc<Connection>> {
        match self {
            Health::Ready(c) => Some(c),
            Health::NotReady { .. } => None,
        }
    }

    /// Same state and the very same connections (so an unchanged probe wakes no reader).
    fn same(&self, other: &Health) -> bool {
        let same_conn = |a: &Option<Arc<Connection>>, b: &Option<Arc<Connection>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        match (self, other) {
            (Health::Ready(a), Health::Ready(b)) => Arc::ptr_eq(a, b),
            (
                Health::NotReady {
                    reason: r1,
                    message: m1,
                    last: l1,
                },
                Health::NotReady {
                    reason: r2,
                    message: m2,
                    last: l2,
                },
            ) => r1 == r2 && m1 == m2 && same_conn(l1, l2),
            _ => false,
        }
    }
}

/// Every KubevirtConfig's health by name. Cheap to clone; readers [`Registry::subscribe`] to
/// wake on changes (only real changes are published).
#[derive(Clone)]
pub struct Registry {
    tx: Arc<watch::Sender<Arc<BTreeMap<String, Health>>>>,
    /// The KubevirtConfigs that exist, once they were first listed (`None` before): a config
    /// listed but not probed yet is being checked, not missing.
    listed: Arc<std::sync::RwLock<Option<std::collections::BTreeSet<String>>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    pub fn new() -> Self {
        Registry {
            tx: Arc::new(watch::Sender::new(Arc::new(BTreeMap::new()))),
            listed: Arc::default(),
        }
    }

    /// Whether KubevirtConfig `name` exists; `None` until the KubevirtConfigs were first listed.
    pub fn exists(&self, name: &str) -> Option<bool> {
        let listed = self.listed.read().unwrap_or_else(|p| p.into_inner());
        listed.as_ref().map(|l| l.contains(name))
    }

    /// The KubevirtConfigs that exist; `None` until they were first listed.
    pub fn listed(&self) -> Option<std::collections::BTreeSet<String>> {
        let listed = self.listed.read().unwrap_or_else(|p| p.into_inner());
        listed.clone()
    }

    /// Records the KubevirtConfigs that exist (`None`: not known, as after a leader stepped
    /// down); `Some` with `add`/`drop` changes one name once they are known.
    pub(super) fn set_listed(&self, names: Option<std::collections::BTreeSet<String>>) {
        *self.listed.write().unwrap_or_else(|p| p.into_inner()) = names;
    }

    pub(super) fn listed_change(&self, name: &str, present: bool) {
        let mut listed = self.listed.write().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = listed.as_mut() {
            if present {
                l.insert(name.to_owned());
            } else {
                l.remove(name);
            }
        }
    }

    /// The health of KubevirtConfig `name`; None while it does not exist or was not probed yet.
    pub fn get(&self, name: &str) -> Option<Health> {
        self.tx.borrow().get(name).cloned()
    }

    /// Every KubevirtConfig's health, now and on each change.
    pub fn subscribe(&self) -> watch::Receiver<Arc<BTreeMap<String, Health>>> {
        self.tx.subscribe()
    }

    pub(super) fn set(&self, name: &str, health: Health) {
        self.tx.send_if_modified(|map| {
            if map.get(name).is_some_and(|h| h.same(&health)) {
                return false;
            }
            Arc::make_mut(map).insert(name.to_owned(), health);
            true
        });
    }

    pub(super) fn remove(&self, name: &str) {
        self.tx.send_if_modified(|map| {
            if !map.contains_key(name) {
                return false;
            }
            Arc::make_mut(map).remove(name);
            true
        });
    }

    /// Drops every entry whose name `keep` refuses (configs deleted while no watch saw it).
    pub(super) fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.tx.send_if_modified(|map| {
            if map.keys().all(|k| keep(k)) {
                return false;
            }
            Arc::make_mut(map).retain(|k, _| keep(k));
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_ready(reason: Reason, message: &str) -> Health {
        Health::NotReady {
            reason,
            message: message.into(),
            last: None,
        }
    }

    #[test]
    fn only_changes_are_published() {
        let registry = Registry::new();
        let mut rx = registry.subscribe();
        registry.set("dc1", not_ready(Reason::Unreachable, "refused"));
        assert!(rx.has_changed().unwrap());
        rx.mark_unchanged();
        registry.set("dc1", not_ready(Reason::Unreachable, "refused"));
        assert!(!rx.has_changed().unwrap(), "the same health again");
        registry.set("dc1", not_ready(Reason::Unreachable, "timed out"));
        assert!(rx.has_changed().unwrap(), "a new message");
        rx.mark_unchanged();
        registry.remove("dc2");
        assert!(!rx.has_changed().unwrap(), "nothing to remove");
        registry.retain(|n| n == "dc1");
        assert!(!rx.has_changed().unwrap());
        registry.retain(|_| false);
        assert!(rx.has_changed().unwrap());
        assert!(registry.get("dc1").is_none());
    }

    #[test]
    fn reasons_are_one_camel_case_word() {
        for r in [
            Reason::Ready,
            Reason::SecretNotFound,
            Reason::SecretForbidden,
            Reason::KeyMissing,
            Reason::KubeconfigInvalid,
            Reason::Unreachable,
            Reason::Unauthorized,
            Reason::ClusterChanged,
        ] {
            let s = r.as_str();
            assert!(s.chars().all(|c| c.is_ascii_alphabetic()), "{s}");
            assert!(s.starts_with(|c: char| c.is_ascii_uppercase()), "{s}");
            assert_eq!(format!("{r:?}"), s);
        }
    }
}
