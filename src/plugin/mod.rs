//! `kubectl machine` (issue 34): the operator's binary, invoked as `kubectl-machine` (a copy or
//! a symlink of that name on PATH), is a kubectl plugin for the Machine subresources of the
//! aggregated API `subresources.vitistack.io/v1alpha1`. It calls them through kube-apiserver with
//! the user's own kubeconfig, so kube-apiserver authorizes each call on the Machine.
//!
//! - [`args`]: the command line (kubectl's `-n`, `--context`, `--kubeconfig`).
//! - [`call`]: what each command asks of the API (pure: method, path, body).
//! - [`grace`]: `stop --grace`, parsed and bounded (pure).
//! - [`escape`]: the console's escape key in the typed bytes (pure).
//! - [`pump`]: bytes between a local stream and a WebSocket (console and each VNC viewer).
//! - [`connect`]: the user's client, a button pressed, a stream opened, errors worded.
//! - [`terminal`]: raw mode on a TTY, restored on every exit.
//! - [`vnc`]: the local port for VNC viewers.
//! - [`run`]: the entry point.

use std::ffi::OsStr;
use std::path::Path;

pub mod args;
pub mod call;
pub mod connect;
pub mod escape;
pub mod grace;
pub mod pump;
pub mod run;
pub mod terminal;
pub mod vnc;

/// The file name kubectl finds the plugin by (`kubectl machine` runs `kubectl-machine`).
pub const PLUGIN_NAME: &str = "kubectl-machine";

/// Whether the binary was started under the plugin's name (`argv[0]`'s file name, with any
/// extension such as `.exe` dropped), rather than as the operator.
pub fn invoked_as_plugin(argv0: Option<&OsStr>) -> bool {
    argv0
        .map(Path::new)
        .and_then(Path::file_stem)
        .is_some_and(|stem| stem == PLUGIN_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_the_binary_named_kubectl_machine() {
        let cases = [
            (Some("kubectl-machine"), true),
            (Some("/usr/local/bin/kubectl-machine"), true),
            (Some("C:\\bin\\kubectl-machine.exe"), cfg!(windows)),
            (Some("./kubectl-machine.exe"), true),
            (Some("/usr/local/bin/kubevirt-operator"), false),
            (Some("kubectl-machines"), false),
            (Some("/opt/kubectl-machine/kubevirt-operator"), false),
            (None, false),
        ];
        for (argv0, want) in cases {
            assert_eq!(invoked_as_plugin(argv0.map(OsStr::new)), want, "{argv0:?}");
        }
    }
}
