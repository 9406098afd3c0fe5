//! Test support: a real etcd + kube-apiserver (+ kube-controller-manager, on request) control
//! plane for integration tests.
//!
//! Integration tests use it with `mod support;`, and set up through [`Fixture`]. Each test crate uses a different subset,
//! so unused items and re-exports are expected here.
#![allow(dead_code, unused_imports)]

pub mod aggregation;
mod apiserver;
mod apiserver_extras;
mod assets;
mod audit;
mod clients;
pub mod console_client;
mod control_plane;
mod controller_manager;
mod crds;
mod etcd;
mod events;
mod fixture;
mod kubeconfig;
pub mod operator;
mod pki;
mod ports;
mod process;
pub mod rbac;
pub mod replica;
pub mod virt_api;
mod wait;
pub mod webhooks;

use std::path::PathBuf;

pub use apiserver::SecondApiserver;
pub use apiserver_extras::ApiserverExtras;
pub use assets::{binary, kubectl_path};
pub use audit::AuditedRequest;
pub use control_plane::{
    ControlPlane, OPERATOR_NAMESPACE, Ports, Startup, create_namespace, sweep_stale_dirs,
};
pub use crds::crd_fixtures;
pub use events::events_about;
pub use fixture::{Fixture, Started, all_crds, machine_crds, shared_started};
pub use kubeconfig::{client_from_kubeconfig, kubeconfig_yaml};
pub use pki::{User, write_private};
pub use ports::free_port;
pub use process::{Proc, log_tail, process_alive};
pub use wait::{eventually, eventually_with};

/// Installs ring as the process-wide rustls provider (the only one this project links).
/// Safe to call many times, from any test.
pub fn init_crypto() {
    // Err only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Path of a file under `tests/fixtures/`.
pub fn fixture(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative)
}
