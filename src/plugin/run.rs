//! The plugin's entry point: parse, load the user's kubeconfig, do what was asked, tell how it
//! went (stdout for results, stderr for everything else, exit 1 on any failure).

use std::ffi::OsString;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use super::args::MachineCli;
use super::call::{Plan, plan};
use super::connect::{PluginError, open_stream, press, user_client};
use super::escape::ESCAPE_SHOWN;
use super::pump::{End, pump};
use super::terminal::RawMode;
use super::vnc;

/// Runs the plugin on `args` (argv, its name first) and returns the exit code.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = MachineCli::parse_from(args);
    crate::tls::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(cli));
    // A console's stdin reader may still sit in a blocking read: do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        // Worded as kubectl words it already (`Error from server (Forbidden): ...`).
        Err(PluginError::Refused(message)) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: MachineCli) -> Result<(), PluginError> {
    let (client, context_namespace) =
        user_client(cli.kubeconfig.as_deref(), cli.context.as_deref()).await?;
    let namespace = cli.namespace.clone().unwrap_or(context_namespace.clone());
    let name = cli.command.machine();
    match plan(&cli, &context_namespace) {
        Plan::Press(p) => {
            press(&client, &p).await?;
            println!("Machine {namespace}/{name}: {} accepted", p.subresource);
            Ok(())
        }
        Plan::Console { path } => console(&client, &path, &namespace, name).await,
        Plan::Vnc {
            path,
            port,
            proxy_only,
        } => {
            vnc::serve(&client, &path, port, |addr| {
                vnc::announcement(addr, name, &namespace, proxy_only)
            })
            .await
        }
    }
}

/// The serial console on this terminal (raw, with the escape key) or on piped input.
async fn console(
    client: &kube::Client,
    path: &str,
    namespace: &str,
    name: &str,
) -> Result<(), PluginError> {
    let mut stream = open_stream(client, path, "console").await?;
    let tty = std::io::stdin().is_terminal();
    if tty {
        eprintln!(
            "Connected to the console of Machine {namespace}/{name}. The escape sequence is {ESCAPE_SHOWN}"
        );
    }
    let raw = if tty {
        Some(RawMode::enable().map_err(|e| PluginError::Local(format!("raw terminal: {e}")))?)
    } else {
        None
    };
    let end = tokio::select! {
        end = pump(&mut stream, tokio::io::stdin(), tokio::io::stdout(), tty) => end,
        // Killed (SIGTERM, the terminal hung up): the terminal is restored all the same.
        signal = terminated() => {
            drop(raw);
            eprintln!();
            return Err(PluginError::Local(format!("ended by {signal}")));
        }
    };
    drop(raw);
    match end? {
        End::ServerClosed(Some(reason)) => eprintln!("\nThe server ended the session: {reason}"),
        End::ServerClosed(None) if tty => eprintln!("\nThe server ended the session."),
        End::Escaped => eprintln!(),
        _ => {}
    }
    Ok(())
}

/// Resolves on SIGTERM or SIGHUP, naming it; never where they cannot be listened to.
async fn terminated() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) {
        (Ok(mut term), Ok(mut hup)) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = hup.recv() => "SIGHUP",
        },
        _ => std::future::pending().await,
    }
}
