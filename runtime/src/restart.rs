//! Recovery by a new process, for drivers that keep a process's CUDA state poisoned after a
//! kernel fault (`Error::ProcessPoisoned`).

use crate::error::Error;

/// Environment variable set in the re-executed process: how many times it was restarted.
pub const RESTART_ENV: &str = "BERTH_RESTARTS";

/// Replace this process with a fresh run of the same program (same executable, arguments and
/// environment, plus `BERTH_RESTARTS` counting the restarts), whose CUDA state is new.
///
/// Returns only on failure, with the reason. Host state is lost: a program that wants to
/// resume must have saved it. The process id stays the same, so supervisors see no exit.
pub fn restart_process() -> Error {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return Error::ContextLost(format!("restart_process: no executable path: {e}")),
    };
    let restarts: u32 = std::env::var(RESTART_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(0)
        .saturating_add(1);
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1))
        .env(RESTART_ENV, restarts.to_string());
    tracing::warn!(restarts, "re-executing the process after a GPU fault");
    exec(cmd)
}

#[cfg(unix)]
fn exec(mut cmd: std::process::Command) -> Error {
    use std::os::unix::process::CommandExt;
    let e = cmd.exec();
    Error::ContextLost(format!("restart_process: exec failed: {e}"))
}

#[cfg(not(unix))]
fn exec(mut cmd: std::process::Command) -> Error {
    // No exec: run the new process to completion and exit with its status.
    match cmd.status() {
        Ok(s) => std::process::exit(s.code().unwrap_or(1)),
        Err(e) => Error::ContextLost(format!("restart_process: spawn failed: {e}")),
    }
}
