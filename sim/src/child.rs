//! Child processes, one module for every user: the real soak's writers, the real kill-point
//! table's children, and the foreign-store driver's store processes.
//!
//! Promises:
//! - A [`ChildProc`] is killed (SIGKILL) and reaped when it is dropped, unless it was
//!   already waited for: no child outlives its owner as a zombie or an orphan. A child
//!   whose parent dies anyway sees its stdin close (every user pipes stdin or gives it
//!   `/dev/null`), which the foreign-store protocol defines as "exit now".
//! - [`ChildProc::kill`] returns only after the child is reaped, so whatever the kernel
//!   releases at death (its SQLite file locks above all) is released when it returns: the
//!   next process to take the lock finds it free, every time, which is what keeps a crash
//!   deterministic.
//! - Reading stdout is line-based and bounded by a wall-clock guard measured on the
//!   machine's monotonic clock (`poll` with a real timeout; madsim never intercepts it).
//!   The guard can only turn a hung child into an error; it never decides anything else.
//! - A child spawned with [`ChildProc::spawn_group`] leads its own process group, and a kill
//!   SIGKILLs the whole group: a store started through a wrapper (`sh`, `npx`, `uv run`)
//!   dies with everything it started. (Such a child does not see the terminal's Ctrl-C; it
//!   exits when its stdin closes, which happens when its parent dies.)
//! - stderr is either discarded, piped (the caller reads it), or captured into a temporary
//!   file unlinked as soon as it is opened (nothing is left even if this process is killed);
//!   [`ChildProc::stderr_tail`] reads what it holds.
//!
//! - Every live child is in one process-wide registry from spawn until it is reaped;
//!   [`kill_all_live`] (the Ctrl-C / SIGTERM handler, `crate::interrupt`) SIGKILLs and
//!   reaps every one of them, whichever thread owns it. A kill signal is sent only by
//!   whoever takes the child out of the registry, so a child reaped by the handler is
//!   never signalled again by its owner. (One narrow window remains: a child that exits on
//!   its own is reaped by its owner's `wait` just before it leaves the registry, and the
//!   handler may signal that pid in between; the process exits right after.) Once
//!   [`refuse_spawns`] was called (the process is exiting), spawning fails.
//!
//! Nothing here runs a madsim runtime or reads the virtual clock.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::machine::mono_ns;

/// Where a child's stderr goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stderr {
    Null,
    /// Piped; take it with [`ChildProc::take_stderr`].
    Piped,
    /// Into a temporary file removed with the child (read with [`ChildProc::stderr_tail`]).
    Capture,
}

/// What reading a line can end with, besides a line.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The child closed its stdout (it exited, or closed it).
    Eof,
    /// Nothing complete arrived within the guard.
    Timeout(Duration),
    /// A line that is not UTF-8, or an I/O error.
    Io(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Eof => f.write_str("closed its stdout (exited?)"),
            ReadError::Timeout(d) => {
                write!(f, "did not answer within the {} ms wall-clock guard", d.as_millis())
            }
            ReadError::Io(e) => write!(f, "unreadable stdout: {e}"),
        }
    }
}

static STDERR_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The live children: token -> (pid, leads its own process group); `refused` once the
/// process is exiting on a signal.
struct Registry {
    live: std::collections::BTreeMap<u64, (u32, bool)>,
    refused: bool,
    next: u64,
}

static REGISTRY: std::sync::Mutex<Registry> =
    std::sync::Mutex::new(Registry { live: std::collections::BTreeMap::new(), refused: false, next: 0 });

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn signal_kill(pid: u32, group: bool) {
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else { return };
    if group {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
}

/// From now on every spawn fails (the process is exiting on a signal).
pub fn refuse_spawns() {
    registry().refused = true;
}

/// How many children are alive (spawned and not yet reaped).
pub fn live_count() -> usize {
    registry().live.len()
}

/// SIGKILL every live child (its whole process group when it leads one) and reap it;
/// returns how many there were. Their owners' later `kill`/`wait` find them gone and do
/// nothing harmful (a wait answers ECHILD).
pub fn kill_all_live() -> usize {
    let taken: Vec<(u32, bool)> = {
        let mut reg = registry();
        let taken = std::mem::take(&mut reg.live).into_values().collect();
        for &(pid, group) in &taken {
            signal_kill(pid, group);
        }
        taken
    };
    for &(pid, _) in &taken {
        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
            // Its owner may have reaped it first (ECHILD): either way it is gone.
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        }
    }
    taken.len()
}

/// One child process with piped stdout (and optionally stdin).
pub struct ChildProc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    /// The captured stderr: a temporary file already unlinked (nothing to leave behind,
    /// whatever happens to this process), read through this handle.
    stderr_file: Option<std::fs::File>,
    buf: Vec<u8>,
    reaped: Option<ExitStatus>,
    /// The child leads its own process group; a kill signals the group.
    group: bool,
    /// Its key in the registry of live children.
    token: u64,
}

impl ChildProc {
    /// Spawn `cmd` with stdout piped, stdin piped (or `/dev/null`), stderr as asked.
    pub fn spawn(cmd: Command, piped_stdin: bool, stderr: Stderr) -> std::io::Result<ChildProc> {
        ChildProc::spawn_with(cmd, piped_stdin, true, stderr)
    }

    /// As [`ChildProc::spawn`], with stdout piped or `/dev/null`.
    pub fn spawn_with(
        cmd: Command,
        piped_stdin: bool,
        piped_stdout: bool,
        stderr: Stderr,
    ) -> std::io::Result<ChildProc> {
        ChildProc::spawn_inner(cmd, piped_stdin, piped_stdout, stderr, false)
    }

    /// Spawn and register; `group`: the command was made to lead its own process group, so
    /// every kill (the signal handler's too) signals the group.
    fn spawn_inner(
        mut cmd: Command,
        piped_stdin: bool,
        piped_stdout: bool,
        stderr: Stderr,
        group: bool,
    ) -> std::io::Result<ChildProc> {
        cmd.stdout(if piped_stdout { Stdio::piped() } else { Stdio::null() });
        cmd.stdin(if piped_stdin { Stdio::piped() } else { Stdio::null() });
        let mut stderr_file = None;
        match stderr {
            Stderr::Null => {
                cmd.stderr(Stdio::null());
            }
            Stderr::Piped => {
                cmd.stderr(Stdio::piped());
            }
            Stderr::Capture => {
                let n = STDERR_COUNTER.fetch_add(1, Ordering::Relaxed);
                let path =
                    std::env::temp_dir().join(format!("fencesim-child-{}-{n}.stderr", std::process::id()));
                let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path);
                let _ = std::fs::remove_file(&path);
                let file = file?;
                cmd.stderr(Stdio::from(file.try_clone()?));
                stderr_file = Some(file);
            }
        }
        if registry().refused {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                "fencesim is exiting on a signal",
            ));
        }
        let mut child = cmd.spawn()?;
        let token = {
            let mut reg = registry();
            if reg.refused {
                // The handler ran while this child started: it dies here, not orphaned.
                drop(reg);
                signal_kill(child.id(), group);
                let _ = child.wait();
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "fencesim is exiting on a signal",
                ));
            }
            reg.next += 1;
            let token = reg.next;
            reg.live.insert(token, (child.id(), group));
            token
        };
        Ok(ChildProc {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            stderr_file,
            buf: Vec::new(),
            reaped: None,
            group,
            token,
        })
    }

    /// A protocol child: stdin and stdout piped, stderr captured, leading its own process
    /// group (killed as a group).
    pub fn spawn_group(mut cmd: Command) -> std::io::Result<ChildProc> {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        ChildProc::spawn_inner(cmd, true, true, Stderr::Capture, true)
    }

    /// The child's pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The piped stderr, if it was piped and not taken yet.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.stderr.take()
    }

    /// Write one line (a `\n` is appended) and flush.
    pub fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin is closed"))?;
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        stdin.write_all(&bytes)?;
        stdin.flush()
    }

    /// The next line of stdout (without its newline), waiting at most `guard` of wall time
    /// in total (`None`: no guard).
    pub fn read_line(&mut self, guard: Option<Duration>) -> Result<String, ReadError> {
        let deadline = guard.map(|g| mono_ns().saturating_add(g.as_nanos() as u64));
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                let text = String::from_utf8(line[..pos].to_vec())
                    .map_err(|_| ReadError::Io("a line that is not UTF-8".into()))?;
                return Ok(text);
            }
            let Some(out) = self.stdout.as_mut() else { return Err(ReadError::Eof) };
            if let (Some(deadline), Some(g)) = (deadline, guard) {
                let left = deadline.saturating_sub(mono_ns());
                if left == 0 {
                    return Err(ReadError::Timeout(g));
                }
                let ts = rustix::time::Timespec {
                    tv_sec: (left / 1_000_000_000) as i64,
                    tv_nsec: (left % 1_000_000_000) as i64,
                };
                let fd = out.as_fd();
                let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
                match rustix::event::poll(&mut fds, Some(&ts)) {
                    Ok(0) => return Err(ReadError::Timeout(g)),
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(ReadError::Io(e.to_string())),
                }
            }
            let mut chunk = [0u8; 8192];
            match out.read(&mut chunk) {
                Ok(0) => {
                    self.stdout = None;
                    if !self.buf.is_empty() {
                        return Err(ReadError::Io(format!(
                            "stdout ended inside a line: {:?}",
                            String::from_utf8_lossy(&self.buf)
                        )));
                    }
                    return Err(ReadError::Eof);
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e.to_string())),
            }
        }
    }

    /// Close stdin (the child sees end of input).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// SIGKILL the child and reap it; returns once it is dead. Idempotent.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_none() {
            {
                // Signalled only if still registered (not already killed and reaped by
                // `kill_all_live`), under the registry's lock.
                let mut reg = registry();
                if reg.live.remove(&self.token).is_some() {
                    signal_kill(self.child.id(), self.group);
                }
            }
            self.reaped = self.child.wait().ok();
        }
        self.reaped
    }

    /// Wait for the child to exit on its own and reap it.
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(s) = self.reaped {
            return Ok(s);
        }
        self.stdin.take();
        let s = self.child.wait();
        registry().live.remove(&self.token);
        let s = s?;
        self.reaped = Some(s);
        Ok(s)
    }

    /// The exit status if the child has already exited (reaping it), without blocking.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.reaped.is_none() {
            self.reaped = self.child.try_wait().ok().flatten();
            if self.reaped.is_some() {
                registry().live.remove(&self.token);
            }
        }
        self.reaped
    }

    /// The last `max` bytes of the captured stderr (empty if not captured).
    pub fn stderr_tail(&self, max: usize) -> String {
        use std::io::Seek;
        let Some(file) = &self.stderr_file else { return String::new() };
        let mut text = Vec::new();
        let mut f = file;
        if f.seek(std::io::SeekFrom::Start(0)).is_err() || f.read_to_end(&mut text).is_err() {
            return String::new();
        }
        let start = text.len().saturating_sub(max);
        String::from_utf8_lossy(&text[start..]).trim_end().to_string()
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        self.stdin.take();
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn lines_come_back_in_order_and_eof_is_reported() {
        let mut c = ChildProc::spawn(sh("echo one; echo two"), false, Stderr::Null).unwrap();
        assert_eq!(c.read_line(Some(Duration::from_secs(5))).unwrap(), "one");
        assert_eq!(c.read_line(Some(Duration::from_secs(5))).unwrap(), "two");
        assert_eq!(c.read_line(Some(Duration::from_secs(5))), Err(ReadError::Eof));
        assert!(c.wait().unwrap().success());
    }

    #[test]
    fn a_silent_child_trips_the_guard_and_is_killed_and_reaped_on_drop() {
        let mut c = ChildProc::spawn(sh("exec sleep 30"), true, Stderr::Null).unwrap();
        let pid = c.id();
        assert_eq!(
            c.read_line(Some(Duration::from_millis(50))),
            Err(ReadError::Timeout(Duration::from_millis(50)))
        );
        drop(c);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "child {pid} still exists");
    }

    #[test]
    fn a_group_kill_takes_the_grandchildren_too() {
        let mut c = ChildProc::spawn_group(sh("sleep 30 & echo $!; wait")).unwrap();
        let grandchild = c.read_line(Some(Duration::from_secs(5))).unwrap();
        assert!(std::path::Path::new(&format!("/proc/{grandchild}")).exists());
        c.kill();
        // The grandchild was reparented and is reaped by init; give it a moment.
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
            stat.is_empty() || stat.contains(") Z ")
        });
        assert!(gone, "grandchild {grandchild} survived the group kill");
    }

    #[test]
    fn captured_stderr_is_readable_and_never_a_file_in_the_temp_dir() {
        let mut c = ChildProc::spawn(sh("echo oops >&2; echo done"), false, Stderr::Capture).unwrap();
        assert_eq!(c.read_line(Some(Duration::from_secs(5))).unwrap(), "done");
        c.wait().unwrap();
        assert_eq!(c.stderr_tail(100), "oops");
        let prefix = format!("fencesim-child-{}-", std::process::id());
        let named = std::fs::read_dir(std::env::temp_dir())
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&prefix));
        assert!(!named, "a captured stderr file is visible in the temp dir");
    }
}
