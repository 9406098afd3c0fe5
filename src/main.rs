use std::process::ExitCode;

use clap::Parser;
use kubevirt_operator::admission::Admission;
use kubevirt_operator::cli::{Cli, Command};
use kubevirt_operator::commands::{self, validate::Checked};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::{api, telemetry, tls};

fn main() -> ExitCode {
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
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        builder.worker_threads(cpus.max(MIN_WORKERS));
    }
    builder.enable_all().build()
}

const MIN_WORKERS: usize = 2;

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Crd => {
            print!("{}", api::crd::to_yaml()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => commands::run::run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Webhook(args) => commands::webhook::run(args)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Certs(args) => commands::certs::run(args).await,
        Command::Validate(args) => {
            let catalog = Catalog::with_default(&args.templates.default_template)?;
            let admission = Admission::new(catalog)?;
            let input = commands::validate::read_input(&args.file)
                .map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
            let results = commands::validate::check_documents(&input, &admission)
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
