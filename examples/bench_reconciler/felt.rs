//! What a user feels, measured with N Machines converged (`--modes`, on one control plane, in
//! this order):
//!
//! - idle: the API requests of the converged leader over `--idle-for` seconds, from the API
//!   server's audit log;
//! - apply: `--applies` new Machines created one by one at `--apply-qps`; each one's time from
//!   the create's response to its VM's first watch event;
//! - change: the same for a CPU change on as many converged Machines (until the VM's watch
//!   event shows the new cores);
//! - failover: a second replica follows, the leader is SIGKILLed, a Machine is changed at once;
//!   time until the follower's write shows on its VM.
//!
//! Setup: N Machines created through the mutating webhook (as the convergence runs do); one
//! replica converges them with the memory runs' fast client (`--rss-qps`) and stops, releasing
//! its Lease; replica `a` starts with the timed client (`--qps`/`--burst`) and the clock starts
//! once it has reconciled N times (its first pass). Admission is served by the `webhook`
//! command at the URL the configurations name, so it does not die with the leader.

#[path = "failover.rs"]
mod failover;
#[path = "idle.rs"]
mod idle;
#[path = "latency.rs"]
mod latency;

use std::time::Duration;

use super::measure::writes;
use super::replica::{replica, webhook_server};
use super::support;
use super::{Args, Placed, control_plane, create_admitted_machines, wait_converged};
use anyhow::{Context, Result, bail};
use latency::VmWatch;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Idle,
    Apply,
    Change,
    Failover,
}

pub struct Felt {
    pub modes: Vec<Mode>,
    converged: usize,
    applies: usize,
    apply_qps: f64,
    idle_for: Duration,
}

impl Default for Felt {
    fn default() -> Self {
        Felt {
            modes: Vec::new(),
            converged: 10_000,
            applies: 200,
            apply_qps: 50.0,
            idle_for: Duration::from_secs(180),
        }
    }
}

impl Felt {
    /// Takes this module's flags; any other is unknown.
    pub fn flag(&mut self, flag: &str, value: &str) -> Result<()> {
        match flag {
            "--modes" => {
                let mut modes = Vec::new();
                for m in value.split(',').map(str::trim).filter(|m| !m.is_empty()) {
                    modes.push(match m {
                        "idle" => Mode::Idle,
                        "apply" => Mode::Apply,
                        "change" => Mode::Change,
                        "failover" => Mode::Failover,
                        other => bail!("--modes: {other:?} is not idle, apply, change or failover"),
                    });
                }
                self.modes = modes;
            }
            "--converged" => self.converged = value.parse()?,
            "--applies" => self.applies = value.parse()?,
            "--apply-qps" => self.apply_qps = value.parse()?,
            "--idle-for" => self.idle_for = Duration::from_secs(value.parse()?),
            other => bail!("unknown flag {other}"),
        }
        Ok(())
    }
}

/// Runs the modes asked for; one report line each.
pub async fn run(args: &Args) -> Result<Vec<String>> {
    let felt = &args.felt;
    if felt.modes.is_empty() {
        return Ok(Vec::new());
    }
    let n = felt.converged;
    if felt.modes.contains(&Mode::Change) && felt.applies > n {
        bail!(
            "--applies {} changes more Machines than the {n} converged",
            felt.applies
        );
    }
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    let mut report = Vec::new();
    eprintln!("felt modes {:?}, {n} Machines converged", felt.modes);
    let (cp, admin, ns) = control_plane().await?;
    let dir = cp.dir().join("bench-operator");
    std::fs::create_dir_all(&dir)?;
    let port = support::free_port()?;
    create_admitted_machines(args, &cp, &admin, &ns, Placed::local(n), port, &dir).await?;
    let mut webhook = webhook_server(&args.operator, &dir, port)?;

    let rss_burst = (args.rss_qps * 2.0) as u32;
    let mut conv = replica(
        &args.operator,
        &cp,
        "converge",
        port,
        args.rss_qps,
        rss_burst,
    )?;
    let took = wait_converged(&admin, &ns, n, &mut conv.proc).await?;
    conv.proc.terminate(Duration::from_secs(20));
    let before = writes(&admin).await?;
    let mut a = replica(&args.operator, &cp, "a", port, args.qps, args.burst)?;
    let first_pass = a
        .wait_reconciles(n as u64, Duration::from_secs(1800))
        .await?;
    let after = writes(&admin).await?;
    let rewritten: std::collections::BTreeMap<&String, u64> = after
        .iter()
        .map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect();
    report.push(format!(
        "felt setup  N={n:>5}: converged in {took:.2?} (QPS {}); leader a (QPS {}/{}) reconciled all in {first_pass:.2?}, writes meanwhile {rewritten:?}  [load {}]",
        args.rss_qps,
        args.qps,
        args.burst,
        load()
    ));
    eprintln!("  {}", report[0]);

    // Opened after the idle window, so that its own requests are not counted there.
    let mut vms: Option<VmWatch> = None;
    for mode in [Mode::Idle, Mode::Apply, Mode::Change, Mode::Failover] {
        if !felt.modes.contains(&mode) {
            continue;
        }
        eprintln!("felt {mode:?} [load {}]", load());
        if mode != Mode::Idle && vms.is_none() {
            vms = Some(VmWatch::start(&admin, &ns).await?);
        }
        let watch = || vms.as_ref().context("the VirtualMachine watch");
        let line = match mode {
            Mode::Idle => idle::measure(&cp, &a, felt.idle_for).await?,
            Mode::Apply => {
                latency::apply_to_vm(&admin, &ns, felt.applies, felt.apply_qps, watch()?).await?
            }
            Mode::Change => {
                latency::change_to_vm(&admin, &ns, felt.applies, felt.apply_qps, watch()?).await?
            }
            Mode::Failover => {
                let follower = replica(&args.operator, &cp, "b", port, args.qps, args.burst)?;
                failover::measure(&admin, &ns, n, &mut a, follower, watch()?).await?
            }
        };
        let line = format!("{mode:?} N={n}: {line}  [load {}]", load());
        eprintln!("  {line}");
        report.push(line);
        if let Some(status) = a.proc.exited()
            && mode != Mode::Failover
        {
            bail!("leader a exited ({status})\n{}", a.proc.log_tail(30));
        }
    }
    let kept = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-felt-a.log");
    let _ = std::fs::copy(&a.proc.log, &kept);
    a.proc.kill();
    webhook.kill();
    drop(cp);
    Ok(report)
}
