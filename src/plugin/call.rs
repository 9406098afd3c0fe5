//! What each command asks of the aggregated API (pure): the subresource's path, the method and
//! the body of a button, the path of a stream.

use super::args::{MachineCli, MachineCommand};
use crate::subresources::{GROUP, VERSION};

/// A power button: a PUT with KubeVirt's options as the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Press {
    /// The subresource's name (`pause`, `stop`, ...).
    pub subresource: &'static str,
    pub path: String,
    /// JSON: `{}`, or KubeVirt's `StopOptions` (`{"gracePeriod":300}`).
    pub body: String,
}

/// What a command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    Press(Press),
    /// The serial console: a WebSocket (GET with upgrade) on `path`.
    Console {
        path: String,
    },
    /// VNC: a local port whose every connection is a WebSocket on `path`.
    Vnc {
        path: String,
        port: u16,
        proxy_only: bool,
    },
}

/// The plan for `cli`, in its `-n` namespace, else `context_namespace` (the kubeconfig
/// context's, or `default`).
pub fn plan(cli: &MachineCli, context_namespace: &str) -> Plan {
    let namespace = cli.namespace.as_deref().unwrap_or(context_namespace);
    let path = |name: &str, subresource: &str| machine_path(namespace, name, subresource);
    let press = |name: &str, subresource: &'static str, body: String| {
        Plan::Press(Press {
            subresource,
            path: path(name, subresource),
            body,
        })
    };
    let empty = || "{}".to_owned();
    match &cli.command {
        MachineCommand::Console(m) => Plan::Console {
            path: path(&m.name, "console"),
        },
        MachineCommand::Vnc(v) => Plan::Vnc {
            path: path(&v.machine.name, "vnc"),
            port: v.port,
            proxy_only: v.proxy_only,
        },
        MachineCommand::Pause(m) => press(&m.name, "pause", empty()),
        MachineCommand::Unpause(m) => press(&m.name, "unpause", empty()),
        MachineCommand::SoftReboot(m) => press(&m.name, "softreboot", empty()),
        MachineCommand::Stop(s) => press(&s.machine.name, "stop", stop_options(s.grace)),
        MachineCommand::ForceStop(m) => press(&m.name, "forcestop", empty()),
        MachineCommand::Start(m) => press(&m.name, "start", empty()),
        MachineCommand::Restart(m) => press(&m.name, "restart", empty()),
    }
}

/// `/apis/subresources.vitistack.io/v1alpha1/namespaces/<ns>/machines/<name>/<subresource>`.
/// The names were checked as DNS names by the command line, so nothing needs escaping.
pub fn machine_path(namespace: &str, name: &str, subresource: &str) -> String {
    format!("/apis/{GROUP}/{VERSION}/namespaces/{namespace}/machines/{name}/{subresource}")
}

/// KubeVirt's `StopOptions`: the grace period when one is given.
fn stop_options(grace: Option<u64>) -> String {
    match grace {
        Some(seconds) => serde_json::json!({ "gracePeriod": seconds }).to_string(),
        None => "{}".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn parse(line: &str) -> Result<MachineCli, String> {
        MachineCli::try_parse_from(line.split_whitespace()).map_err(|e| e.to_string())
    }

    const BASE: &str = "/apis/subresources.vitistack.io/v1alpha1/namespaces";

    #[test]
    fn each_button_is_a_put_of_its_subresource_with_kubevirts_options() {
        let cases = [
            ("kubectl-machine pause vm-1", "pause", "ctx", "{}"),
            (
                "kubectl-machine unpause vm-1 -n team-a",
                "unpause",
                "team-a",
                "{}",
            ),
            (
                "kubectl-machine -n team-a softreboot vm-1",
                "softreboot",
                "team-a",
                "{}",
            ),
            ("kubectl-machine stop vm-1", "stop", "ctx", "{}"),
            (
                "kubectl-machine stop vm-1 --grace 300s --namespace b",
                "stop",
                "b",
                r#"{"gracePeriod":300}"#,
            ),
            (
                "kubectl-machine stop --grace=1h30m vm-1",
                "stop",
                "ctx",
                r#"{"gracePeriod":5400}"#,
            ),
            ("kubectl-machine forcestop vm-1", "forcestop", "ctx", "{}"),
            (
                "kubectl-machine start vm-1 --context other",
                "start",
                "ctx",
                "{}",
            ),
            ("kubectl-machine restart vm-1", "restart", "ctx", "{}"),
        ];
        for (line, sub, ns, body) in cases {
            let cli = parse(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let want = Plan::Press(Press {
                subresource: sub,
                path: format!("{BASE}/{ns}/machines/vm-1/{sub}"),
                body: body.to_owned(),
            });
            assert_eq!(plan(&cli, "ctx"), want, "{line}");
        }
    }

    #[test]
    fn console_and_vnc_are_streams_on_their_subresource() {
        let cli = parse("kubectl-machine console vm-1 -n team-a").expect("console");
        assert_eq!(
            plan(&cli, "default"),
            Plan::Console {
                path: format!("{BASE}/team-a/machines/vm-1/console")
            }
        );
        let cli = parse("kubectl-machine vnc vm-1").expect("vnc");
        assert_eq!(
            plan(&cli, "default"),
            Plan::Vnc {
                path: format!("{BASE}/default/machines/vm-1/vnc"),
                port: 0,
                proxy_only: false
            }
        );
        let cli = parse("kubectl-machine vnc vm-1 --proxy-only --port 5901").expect("vnc");
        assert!(matches!(
            plan(&cli, "default"),
            Plan::Vnc {
                port: 5901,
                proxy_only: true,
                ..
            }
        ));
    }

    #[test]
    fn kubectls_flags_are_read() {
        let cli =
            parse("kubectl-machine pause vm-1 --context c1 --kubeconfig /k -n x").expect("flags");
        assert_eq!(cli.context.as_deref(), Some("c1"));
        assert_eq!(cli.kubeconfig.as_deref(), Some(std::path::Path::new("/k")));
        assert_eq!(cli.namespace.as_deref(), Some("x"));
    }

    #[test]
    fn bad_names_and_lines_are_refused_naming_what_is_wrong() {
        let cases = [
            ("kubectl-machine pause", "NAME"),
            (
                "kubectl-machine pause ../secrets",
                "not a DNS-1123 subdomain",
            ),
            ("kubectl-machine pause vm?x=1", "not a DNS-1123 subdomain"),
            ("kubectl-machine pause vm-1 -n Team", "not a DNS-1123 label"),
            ("kubectl-machine pause vm-1 -n a/b", "not a DNS-1123 label"),
            ("kubectl-machine reboot vm-1", "unrecognized subcommand"),
            ("kubectl-machine pause vm-1 --grace 5s", "--grace"),
            ("kubectl-machine stop vm-1 --grace 0s", "forcestop"),
            ("kubectl-machine vnc vm-1 --port 70000", "--port"),
        ];
        for (line, want) in cases {
            let err = parse(line).err().unwrap_or_else(|| panic!("{line} parsed"));
            assert!(err.contains(want), "{line}: {err}");
        }
    }
}
