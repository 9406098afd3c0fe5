use std::process::ExitCode;

use clap::Parser;
use kubevirt_operator::admission::Admission;
use kubevirt_operator::cli::{Cli, Command};
use kubevirt_operator::commands::{self, validate::Checked};
use kubevirt_operator::machine::Catalog;
use kubevirt_operator::{api, telemetry, tls};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::logging::init(cli.log_format);
    tls::install_crypto_provider();
    match run(cli.command).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Crd => {
            print!("{}", api::crd::to_yaml()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => commands::run::run(*args).await.map(|()| ExitCode::SUCCESS),
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
