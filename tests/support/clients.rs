//! Clients, users and kubeconfigs of a control plane.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use kube::Client;

use super::ControlPlane;
use super::assets::kubectl_path;
use super::control_plane::sanitize;
use super::kubeconfig::{client_from_kubeconfig, client_from_yaml, kubeconfig_yaml};
use super::pki::User;

impl ControlPlane {
    /// A new admin (system:masters) client. Make one per test: clients are tied to their runtime.
    pub async fn client(&self) -> Result<Client> {
        client_from_kubeconfig(&self.admin_kubeconfig).await
    }

    /// A client that authenticates as `user` (see [`ControlPlane::mint_user`]).
    pub async fn client_for(&self, user: &User) -> Result<Client> {
        client_from_yaml(&self.kubeconfig_yaml(user, None)?).await
    }

    /// Issues a client certificate for `name` in up to two `groups`, valid at once without
    /// restarting the API server. The user has no permissions until RBAC grants some.
    pub fn mint_user(&self, name: &str, groups: &[&str]) -> Result<User> {
        self.pki.mint(name, groups)
    }

    /// The system:masters identity behind [`ControlPlane::client`].
    pub fn admin(&self) -> &User {
        &self.admin
    }

    /// A bearer token for the same system:masters identity (for raw HTTPS clients).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Kubeconfig text for `user`, with `namespace` as the default namespace when given.
    pub fn kubeconfig_yaml(&self, user: &User, namespace: Option<&str>) -> Result<String> {
        kubeconfig_yaml(&self.server, &self.pki.ca_pem, user, namespace)
    }

    /// Writes a kubeconfig for `user` into this control plane's directory (removed with it) and
    /// returns its path, e.g. for `KUBECONFIG=` of an operator subprocess.
    pub fn write_kubeconfig(&self, user: &User, namespace: Option<&str>) -> Result<PathBuf> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir_path
            .join(format!("{}-{n}.kubeconfig", sanitize(&user.name)));
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        super::pki::write_private(
            &self.dir_path,
            name,
            &self.kubeconfig_yaml(user, namespace)?,
        )
        .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// The admin kubeconfig file.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// `kubectl --kubeconfig <admin>`, ready for more arguments.
    pub fn kubectl(&self) -> Result<Command> {
        let mut cmd = Command::new(kubectl_path()?);
        cmd.arg("--kubeconfig").arg(&self.admin_kubeconfig);
        Ok(cmd)
    }
}
