//! The aggregated API `subresources.vitistack.io/v1alpha1` (issue 34): subresources of Machines
//! that kube-apiserver authorizes (RBAC on `machines/<subresource>`) and proxies to the operator.
//!
//! Served on a listener of its own (`--subresources-listen`; unset: not served), which completes
//! the TLS handshake only with kube-apiserver's front proxy: a client certificate that the
//! requestheader CA of `kube-system/extension-apiserver-authentication` verifies, with a CN among
//! its allowed names ([`verifier`]). The user is then the one kube-apiserver names in the
//! requestheader headers ([`front_proxy`]), or the request is refused with 401.
//!
//! - [`front_proxy`]: the pure decisions (the ConfigMap read, the CN, the user from headers).
//! - [`verifier`]: the TLS client-certificate check, swappable as the ConfigMap changes.
//! - [`observe`]: reading and following the ConfigMap.
//! - [`discovery`]: what the group serves, as discovery documents.
//! - [`power`]: the power buttons relayed to KubeVirt (pure: which VMI, which path).
//! - [`relay`]: relaying one (the Machine read, KubeVirt called, an Event recorded).
//! - [`buttons`]: which of the two a PUT of `machines/<name>/<subresource>` is.
//! - [`power_through_machine`]: stop, forcestop, start, restart, performed through the Machine
//!   (the decision; its `act` performs it).
//! - [`sessions`]: console and VNC sessions (pure: whether one opens, whether it should end).
//! - [`held`]: the sessions a replica holds, counted; [`session_args`]: their settings.
//! - [`console`]: opening a session; [`upstream`]: KubeVirt's side; [`pipe`]: relaying one.
//! - [`answer`]: the handlers' shared state, the user named, Status answers.
//! - [`routes`]: the HTTP routes.
//! - [`serve`]: the listener.
//!
//! Served: `pause`, `unpause`, `softreboot`, `stop`, `forcestop`, `start`, `restart`,
//! `console`, `vnc` (docs/user/console-and-power.md).

pub mod answer;
pub mod buttons;
pub mod console;
pub mod discovery;
pub mod front_proxy;
pub mod held;
pub mod observe;
pub mod pipe;
pub mod power;
pub mod power_through_machine;
pub mod relay;
pub mod routes;
pub mod serve;
pub mod session_args;
pub mod sessions;
pub mod upstream;
pub mod verifier;

/// The API group kube-apiserver routes to us (the APIService `v1alpha1.subresources.vitistack.io`).
pub const GROUP: &str = "subresources.vitistack.io";
pub const VERSION: &str = "v1alpha1";
