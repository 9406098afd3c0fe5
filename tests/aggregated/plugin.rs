//! The `kubectl machine` plugin as a user runs it: the operator's binary installed as
//! `kubectl-machine`, with a kubeconfig and piped stdin.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tokio::io::AsyncWriteExt;

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
    let mut command = tokio::process::Command::new(installed_plugin(dir));
    command
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(k) = kubeconfig {
        command.env("KUBECONFIG", k);
    }
    let mut child = command.spawn().expect("kubectl-machine");
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
