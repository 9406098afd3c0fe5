//! Child processes (etcd, kube-apiserver) that cannot outlive the test process.
//!
//! Every child is forked from one spawner thread that lives as long as the process and gets
//! PR_SET_PDEATHSIG(SIGKILL): the kernel kills the child when the thread that forked it exits,
//! so forking from a test thread or a tokio worker would kill it early. An `atexit` hook also
//! kills registered children and removes their directories on a normal exit (statics such as the
//! shared control plane are never dropped).

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;

use anyhow::{Context, Result, anyhow};

type SpawnJob = Box<dyn FnOnce() + Send>;

fn spawner() -> Result<mpsc::Sender<SpawnJob>> {
    static SPAWNER: Mutex<Option<mpsc::Sender<SpawnJob>>> = Mutex::new(None);
    let mut slot = SPAWNER
        .lock()
        .map_err(|_| anyhow!("spawner lock poisoned"))?;
    if let Some(tx) = slot.as_ref() {
        return Ok(tx.clone());
    }
    let (tx, rx) = mpsc::channel::<SpawnJob>();
    std::thread::Builder::new()
        .name("control-plane-spawner".into())
        // A sender stays in the static, so this loop (and the thread) ends only with the process.
        .spawn(move || rx.iter().for_each(|job| job()))
        .context("starting the control-plane spawner thread")?;
    *slot = Some(tx.clone());
    Ok(tx)
}

/// A running child whose stdout and stderr go to `log`.
pub struct Proc {
    pub name: &'static str,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(
        name: &'static str,
        program: &Path,
        args: Vec<OsString>,
        log: PathBuf,
    ) -> Result<Proc> {
        Self::spawn_with_env(name, program, args, &[], log)
    }

    /// Like [`Proc::spawn`], with `env` added to (or overriding) this process's environment.
    pub fn spawn_with_env(
        name: &'static str,
        program: &Path,
        args: Vec<OsString>,
        env: &[(&str, &str)],
        log: PathBuf,
    ) -> Result<Proc> {
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating the log file handle")?;
        let parent = std::process::id() as libc::pid_t;
        let mut cmd = Command::new(program);
        cmd.args(&args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // SAFETY: prctl, getppid and _exit are async-signal-safe, as pre_exec requires.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let (done_tx, done_rx) = mpsc::channel();
        spawner()?
            .send(Box::new(move || {
                let _ = done_tx.send(cmd.spawn());
            }))
            .map_err(|_| anyhow!("the control-plane spawner thread is gone"))?;
        let child = done_rx
            .recv()
            .map_err(|_| anyhow!("the control-plane spawner thread dropped the request"))?
            .with_context(|| format!("spawning {name} ({})", program.display()))?;
        Ok(Proc { name, child, log })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has already exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL and reap. Idempotent.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`. Returns how it exited, if it
    /// did so on its own.
    pub fn terminate(&mut self, grace: std::time::Duration) -> Option<ExitStatus> {
        if let Some(status) = self.exited() {
            return Some(status);
        }
        // SAFETY: a signal to our own child, which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.kill();
        None
    }

    /// The last `lines` lines of the log, for error messages.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn log_tail(path: &Path, lines: usize) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            let tail = all[all.len().saturating_sub(lines)..].join("\n");
            format!("--- last {lines} lines of {} ---\n{tail}", path.display())
        }
        Err(e) => format!("(could not read {}: {e})", path.display()),
    }
}

struct ExitCleanup {
    id: u64,
    pids: Vec<u32>,
    dir: PathBuf,
}

static AT_EXIT: Mutex<Vec<ExitCleanup>> = Mutex::new(Vec::new());

/// Kill `pids` and remove `dir` when the process exits normally (replacing an earlier entry for
/// `id`), unless `forget_at_exit(id)` ran first (Drop does the same work for instances that are dropped).
pub fn cleanup_at_exit(id: u64, pids: Vec<u32>, dir: PathBuf) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        // SAFETY: registering a plain extern "C" fn; failure only means no hook.
        unsafe { libc::atexit(run_at_exit) };
    });
    if let Ok(mut list) = AT_EXIT.lock() {
        list.retain(|c| c.id != id);
        list.push(ExitCleanup { id, pids, dir });
    }
}

pub fn forget_at_exit(id: u64) {
    if let Ok(mut list) = AT_EXIT.lock() {
        list.retain(|c| c.id != id);
    }
}

extern "C" fn run_at_exit() {
    // try_lock: never block process exit on a lock a dying thread may hold.
    let Ok(list) = AT_EXIT.try_lock() else { return };
    for cleanup in list.iter() {
        for &pid in &cleanup.pids {
            // SAFETY: plain syscalls on pids we spawned and have not reaped.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
        let _ = std::fs::remove_dir_all(&cleanup.dir);
    }
}

/// Whether `pid` is a live process (a zombie waiting to be reaped counts as gone).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name, which may contain spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}
