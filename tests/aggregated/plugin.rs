//! The `kubectl machine` plugin as a user runs it: the operator's binary installed as
//! `kubectl-machine`, with a kubeconfig and piped stdin.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::WAIT;

/// The operator's binary as `kubectl-machine`, as installed: a symlink of that name in a
/// directory of its own under `dir`.
pub fn installed_plugin(dir: &Path) -> PathBuf {
    let bin = dir.join("plugin-bin");
    std::fs::create_dir_all(&bin).expect("plugin dir");
    let plugin = bin.join("kubectl-machine");
    if !plugin.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kubevirt-operator"), &plugin)
            .expect("symlink kubectl-machine");
    }
    plugin
}

/// Runs `kubectl-machine args` under `dir` with `kubeconfig` as `KUBECONFIG` (when given),
/// `stdin` piped to it, and returns how it ended.
pub async fn kubectl_machine(
    dir: &Path,
    kubeconfig: Option<&Path>,
    args: &[&str],
    stdin: &[u8],
) -> Output {
    let mut child = spawn(dir, kubeconfig, args, Stdio::piped());
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).await.expect("write stdin");
    drop(input);
    let output = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("kubectl-machine ends")
        .expect("kubectl-machine output");
    eprintln!(
        "kubectl-machine {}: {}\nstdout: {}\nstderr: {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// [`kubectl_machine`] for a console: `stdin` typed, then the input ended only once stdout has
/// shown `until`, as a user waits for the answer before leaving (ending the input at once closes
/// the session, and an answer still on its way through the relay is not shown); the stdout read
/// is returned with the exit status.
pub async fn kubectl_machine_until(
    dir: &Path,
    kubeconfig: Option<&Path>,
    args: &[&str],
    stdin: &[u8],
    until: &[u8],
) -> (std::process::ExitStatus, Vec<u8>) {
    let mut child = spawn(dir, kubeconfig, args, Stdio::inherit());
    let mut input = child.stdin.take().expect("stdin");
    let mut output = child.stdout.take().expect("stdout");
    input.write_all(stdin).await.expect("write stdin");
    let mut seen = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        while !seen.windows(until.len().max(1)).any(|w| w == until) {
            let n = output.read(&mut buf).await.expect("read stdout");
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("kubectl-machine shows the answer");
    drop(input);
    let mut rest = Vec::new();
    let status = tokio::time::timeout(WAIT, async {
        output.read_to_end(&mut rest).await.expect("read stdout");
        child.wait().await.expect("kubectl-machine status")
    })
    .await
    .expect("kubectl-machine ends");
    seen.extend_from_slice(&rest);
    eprintln!(
        "kubectl-machine {}: {status}\nstdout: {}",
        args.join(" "),
        String::from_utf8_lossy(&seen)
    );
    (status, seen)
}

/// `kubectl-machine args` started under `dir` as a user runs it, stdin and stdout piped.
fn spawn(
    dir: &Path,
    kubeconfig: Option<&Path>,
    args: &[&str],
    stderr: Stdio,
) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(installed_plugin(dir));
    command
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .kill_on_drop(true);
    if let Some(k) = kubeconfig {
        command.env("KUBECONFIG", k);
    }
    command.spawn().expect("kubectl-machine")
}
