//! Starting a launcher for a process that runs without one: [`start_singleton_server`] runs
//! `mpiexec --singleton-server`, and the process then connects to it as any rank does
//! ([`crate::PmiClient::connect`]).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::auth::Secret;

/// Starts `mpiexec --singleton-server JOB PID` for a process that runs without a launcher
/// (an MPI singleton that wants to spawn): the secret goes through its stdin, and it answers
/// with its bootstrap address on a pipe it gets as descriptor 3. Returns the child and the
/// address.
pub fn start_singleton_server(mpiexec: &Path, job: u64, secret: &Secret) -> io::Result<(Child, String)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own; close-on-exec so no other child inherits
    // them (the server gets the write end as fd 3 through dup2, which clears the flag).
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors from pipe2.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let wfd = w.as_raw_fd();
    let mut cmd = Command::new(mpiexec);
    cmd.arg("--singleton-server").arg(job.to_string()).arg(std::process::id().to_string());
    cmd.stdin(Stdio::piped());
    // SAFETY: dup2 is async-signal-safe and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(wfd, 3) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    drop(w);
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(format!("{}\n", secret.to_hex()).as_bytes())?;
    }
    let mut line = String::new();
    std::fs::File::from(r).read_to_string(&mut line)?;
    let addr = line.trim().to_string();
    if addr.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(io::Error::other(format!("{} --singleton-server gave no address", mpiexec.display())));
    }
    Ok((child, addr))
}
