//! Locates kube-apiserver, kube-controller-manager, etcd and kubectl the same way
//! `scripts/envtest-assets.sh` provides them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

const HOW_TO_FIX: &str = "run `make test` (it provides the binaries) or \
     `export KUBEBUILDER_ASSETS=$(scripts/envtest-assets.sh)` first";

/// The per-binary override variable, as setup-envtest/controller-runtime name them.
fn override_var(name: &str) -> Option<&'static str> {
    match name {
        "kube-apiserver" => Some("TEST_ASSET_KUBE_APISERVER"),
        "kube-controller-manager" => Some("TEST_ASSET_KUBE_CONTROLLER_MANAGER"),
        "etcd" => Some("TEST_ASSET_ETCD"),
        "kubectl" => Some("TEST_ASSET_KUBECTL"),
        _ => None,
    }
}

/// The script's cache: `$KUBEVIRT_OPERATOR_CACHE` or `${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-operator`.
fn default_dir() -> Option<PathBuf> {
    let cache = match std::env::var_os("KUBEVIRT_OPERATOR_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(dir) => PathBuf::from(dir).join("kubevirt-operator"),
            None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/kubevirt-operator"),
        },
    };
    Some(cache.join("envtest/bin"))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Path of `kube-apiserver`, `kube-controller-manager`, `etcd` or `kubectl`. An explicitly set
/// variable must point at the binary (no silent fallback); otherwise `KUBEBUILDER_ASSETS`, then
/// the script's cache.
/// Missing binaries are an error that says what is missing and how to get it: never a skip.
pub fn binary(name: &str) -> Result<PathBuf> {
    if let Some(var) = override_var(name)
        && let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty())
    {
        let path = PathBuf::from(value);
        if is_executable(&path) {
            return Ok(path);
        }
        bail!(
            "{name} not found: {var}={} is not an executable file; {HOW_TO_FIX}",
            path.display()
        );
    }
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(dir).join(name);
        if is_executable(&path) {
            return Ok(path);
        }
        bail!(
            "{name} not found: KUBEBUILDER_ASSETS is set but {} is not an executable file; {HOW_TO_FIX}",
            path.display()
        );
    }
    match default_dir() {
        Some(dir) if is_executable(&dir.join(name)) => Ok(dir.join(name)),
        Some(dir) => bail!(
            "{name} not found: none of {}, KUBEBUILDER_ASSETS is set and {} does not exist; {HOW_TO_FIX}",
            override_var(name).unwrap_or("TEST_ASSET_*"),
            dir.join(name).display()
        ),
        None => bail!("{name} not found: no asset variable is set and HOME is unset; {HOW_TO_FIX}"),
    }
}

/// Path of the `kubectl` that matches the test API server.
pub fn kubectl_path() -> Result<PathBuf> {
    binary("kubectl")
}
