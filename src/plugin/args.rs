//! The plugin's command line: one subcommand per subresource, a Machine's name, and kubectl's own
//! flags for where and as whom (`-n`, `--context`, `--kubeconfig`; `KUBECONFIG` as kubectl reads
//! it). The flags are global, so they may follow the subcommand as kubectl users type them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::grace::parse_grace;
use crate::config::{parse_dns_label, parse_dns_subdomain};

#[derive(Parser, Debug)]
#[command(
    name = "kubectl-machine",
    bin_name = "kubectl machine",
    version,
    about = "Console, VNC and power buttons of vitistack.io Machines, through kube-apiserver \
             (the aggregated API subresources.vitistack.io, authorized on the Machine)"
)]
pub struct MachineCli {
    /// The Machine's namespace. Unset: the context's namespace, else `default`.
    #[arg(short = 'n', long, global = true, value_parser = parse_dns_label)]
    pub namespace: Option<String>,
    /// The kubeconfig context to use. Unset: the current context.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig file. Unset: `KUBECONFIG` (a list of files, merged as kubectl does),
    /// else `~/.kube/config`.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,

    #[command(subcommand)]
    pub command: MachineCommand,
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum MachineCommand {
    /// Attach this terminal to the Machine's serial console; `Ctrl+]` leaves (on a terminal).
    /// Piped input is sent as it is and the session ends when it does.
    Console(Name),
    /// Listen on a local port (127.0.0.1) and relay each VNC viewer that connects to the
    /// Machine's VNC display; runs until interrupted (Ctrl+C). No viewer is launched.
    Vnc(VncArgs),
    /// Pause the Machine's VM (KubeVirt's pause of its VMI).
    Pause(Name),
    /// Unpause the Machine's VM.
    Unpause(Name),
    /// Ask the guest to reboot (ACPI, through the guest agent if it runs).
    #[command(name = "softreboot")]
    SoftReboot(Name),
    /// Stop the Machine's VM, giving the guest a grace period to shut down.
    Stop(StopArgs),
    /// Stop the Machine's VM at once (its VMI deleted with no grace period).
    #[command(name = "forcestop")]
    ForceStop(Name),
    /// Start the Machine's VM.
    Start(Name),
    /// Restart the Machine's VM.
    Restart(Name),
}

impl MachineCommand {
    /// The Machine's name.
    pub fn machine(&self) -> &str {
        match self {
            MachineCommand::Console(m)
            | MachineCommand::Pause(m)
            | MachineCommand::Unpause(m)
            | MachineCommand::SoftReboot(m)
            | MachineCommand::ForceStop(m)
            | MachineCommand::Start(m)
            | MachineCommand::Restart(m) => &m.name,
            MachineCommand::Stop(s) => &s.machine.name,
            MachineCommand::Vnc(v) => &v.machine.name,
        }
    }
}

/// The Machine a command acts on.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct Name {
    /// The Machine's name.
    #[arg(value_name = "NAME", value_parser = parse_dns_subdomain)]
    pub name: String,
}

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct StopArgs {
    #[command(flatten)]
    pub machine: Name,
    /// How long the guest has to shut down before it is stopped, in whole seconds (e.g. 300s,
    /// 5m; 1s to 24h). Unset: the VM's own termination grace period.
    #[arg(long, value_name = "DURATION", value_parser = parse_grace)]
    pub grace: Option<u64>,
}

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct VncArgs {
    #[command(flatten)]
    pub machine: Name,
    /// The local port to listen on. 0: a free one, printed.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Print only the port, as JSON (`{"port":5900}`), for scripts that start their own viewer
    /// (virtctl's flag of the same name).
    #[arg(long)]
    pub proxy_only: bool,
}
