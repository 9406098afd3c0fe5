//! kubevirt-operator: admission webhooks and a reconciler for `vitistack.io/v1alpha1` Machines.
//!
//! - [`api`]: the resource types and their CRDs.
//! - [`machine`]: the pure domain core (classes, merge, validation, update rules).
//! - [`classes`]: the watch-fed MachineClass cache every replica reads.
//! - [`access`]: access checks as the requesting user (SubjectAccessReview).
//! - [`admission`]: AdmissionReview in and out, and the webhook routes.
//! - [`tls`]: certificates in memory, file reloading and the HTTPS server.
//! - [`certs`]: self-managed webhook certificates, their rotation and the webhook configurations.
//! - [`leader`]: leader election on a Lease; the leader runs the reconciler and certificate manager.
//! - [`reconciler`]: Machines into KubeVirt VirtualMachines, PVCs and status (leader only).
//! - [`clusters`]: remote KubeVirt clusters (KubevirtConfig), their clients and health (leader only).
//! - [`snapshots`]: MachineSnapshots and MachineRestores through KubeVirt (leader only).
//! - [`subresources`]: the aggregated API `subresources.vitistack.io` (Machine subresources).
//! - [`plugin`]: `kubectl machine`, the client of those subresources (the binary as `kubectl-machine`).
//! - [`listen`]: dual-stack listeners.
//! - [`discovery`]: whether an optional API is served, asked with retries.
//! - [`commands`]: the subcommands' thin I/O shells.

pub mod access;
pub mod admission;
pub mod api;
pub mod certs;
pub mod classes;
pub mod cli;
pub mod client;
pub mod clusters;
pub mod commands;
pub mod config;
pub mod discovery;
pub mod leader;
pub mod listen;
pub mod machine;
pub mod macs;
pub mod orphans;
pub mod plugin;
pub mod reconciler;
pub mod snapshots;
pub mod subresources;
pub mod telemetry;
pub mod tls;
