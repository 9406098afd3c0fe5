use std::process::ExitCode;

use clap::Parser;
use kubevirt_operator::commands::{self, Cli, Command, validate::Checked};
use kubevirt_operator::{api, plugin, telemetry, tls};

fn main() -> ExitCode {
    // The same binary is `kubectl machine` when installed as `kubectl-machine`.
    if plugin::invoked_as_plugin(std::env::args_os().next().as_deref()) {
        return plugin::run::main(std::env::args_os());
    }
    let cli = Cli::parse();
    telemetry::logging::init(cli.log_format);
    tls::install_crypto_provider();
    let runtime = match runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// At least two async workers, whatever the CPU quota: tokio sizes its pool from
/// `available_parallelism`, which a `500m` limit turns into one, and one worker lets any slow
/// task hold up probes, the Lease renewal and the webhooks alike. `TOKIO_WORKER_THREADS`, when
/// set, is tokio's own override and wins.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let overridden = std::env::var_os("TOKIO_WORKER_THREADS").is_some();
    if let Some(workers) = worker_threads(overridden, std::thread::available_parallelism) {
        builder.worker_threads(workers);
    }
    builder.enable_all().build()
}

const MIN_WORKERS: usize = 2;

/// The async workers to ask tokio for: none when `TOKIO_WORKER_THREADS` is set (`overridden`:
/// tokio reads it itself), else the CPUs tokio would use (one when they cannot be read), but at
/// least [`MIN_WORKERS`].
fn worker_threads(
    overridden: bool,
    available: impl FnOnce() -> std::io::Result<std::num::NonZeroUsize>,
) -> Option<usize> {
    (!overridden).then(|| available().map_or(1, |n| n.get()).max(MIN_WORKERS))
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Crd => {
            print!("{}", api::crd::to_yaml()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => commands::run::run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Webhook(args) => commands::webhook::run(*args)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Certs(args) => commands::certs::run(args).await,
        Command::CheckAdmission(args) => commands::check::run(args).await,
        Command::Check(args) => commands::orphans::run(args).await,
        Command::WebhookConfigurations(args) => {
            print!("{}", commands::webhook_configs::render(&args)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Validate(args) => {
            let catalog = args.templates.catalog()?;
            let input = commands::validate::read_input(&args.file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
            let results = commands::validate::check_documents(&input, &catalog)
                .map_err(anyhow::Error::msg)?;
            let mut failed = false;
            for result in results {
                match result {
                    Checked::Valid { machine, warnings } => {
                        for w in warnings {
                            eprintln!("Warning: {w}");
                        }
                        print!("---\n{}", serde_yaml::to_string(&machine)?);
                    }
                    Checked::Class { class } => {
                        print!("---\n{}", serde_yaml::to_string(&class)?);
                    }
                    Checked::Invalid { message, .. } => {
                        failed = true;
                        eprintln!("{}: {message}", args.file.display());
                    }
                }
            }
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use super::*;

    fn cpus(n: usize) -> impl FnOnce() -> std::io::Result<NonZeroUsize> {
        move || NonZeroUsize::new(n).ok_or_else(|| std::io::Error::other("unknown"))
    }

    #[test]
    fn at_least_two_workers_unless_tokio_worker_threads_is_set() {
        assert_eq!(worker_threads(false, cpus(1)), Some(2), "a 500m quota");
        assert_eq!(worker_threads(false, cpus(0)), Some(2), "CPUs unknown");
        assert_eq!(worker_threads(false, cpus(6)), Some(6));
        assert_eq!(worker_threads(true, cpus(1)), None, "tokio reads it");
    }
}
