//! The rank side: [`PmiClient`], used by the MPI library inside each process.

use std::collections::HashMap;
use std::env;
use std::net::TcpStream;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::auth::{client_handshake, Secret};
use crate::error::{PmiError, PmiErrorKind};
use crate::wire::{self, Msg, SpawnCmd, MAX_KEY_LEN, MAX_VALUE_LEN};
use baton_settings::protocol as proto;

/// How long `abort` waits to be killed by the launcher before giving up.
const ABORT_GRACE: Duration = Duration::from_secs(30);

/// A rank's authenticated connection to the launcher plus its local copy of
/// the key-value space.
///
/// Puts are buffered locally (and visible to `get` on the same rank at
/// once); a fence ships them to the launcher, which answers every rank with
/// the puts of all ranks, so `get` never needs a round trip.
#[derive(Debug)]
pub struct PmiClient {
    stream: TcpStream,
    rank: u32,
    size: u32,
    job_id: u64,
    appnum: u32,
    universe_size: u32,
    shm_fd: Option<RawFd>,
    secret: Secret,
    pending: Vec<(String, Vec<u8>)>,
    store: HashMap<(u32, String), Vec<u8>>,
    finalized: bool,
}

fn env_err(msg: String) -> PmiError {
    PmiError::new(PmiErrorKind::Environment, msg)
}

fn env_var(name: &str) -> Result<String, PmiError> {
    env::var(name).map_err(|_| env_err(format!("{name} is missing or not UTF-8")))
}

fn env_num<T: std::str::FromStr>(name: &str) -> Result<T, PmiError> {
    let v = env_var(name)?;
    v.trim().parse().map_err(|_| env_err(format!("{name}={v:?} is not a valid number")))
}

/// Validates the inherited descriptor and marks it close-on-exec so that
/// programs the rank starts do not keep the job's memory alive.
fn adopt_shm_fd() -> Option<RawFd> {
    let fd: RawFd = env::var(proto::SHM_FD.name).ok()?.trim().parse().ok()?;
    if fd < 0 {
        return None;
    }
    // SAFETY: fcntl on an arbitrary integer is harmless; an invalid fd only
    // yields EBADF, which we check.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return None;
    }
    // SAFETY: fd is open (checked above); we only add FD_CLOEXEC.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    Some(fd)
}

impl PmiClient {
    /// Connects to the launcher described by the `BATON_*` environment.
    ///
    /// Returns `Ok(None)` when `BATON_PMI_ADDR` is absent: the process was
    /// not started by Baton's mpiexec and runs as a singleton. Removes
    /// `BATON_PMI_SECRET` from the environment, so it must be called while
    /// the process is still single-threaded, and only once.
    pub fn from_env() -> Result<Option<PmiClient>, PmiError> {
        let Ok(addr) = env::var(proto::PMI_ADDR.name) else {
            return Ok(None);
        };
        let secret = env::var(proto::PMI_SECRET.name);
        // Removed before anything can fail so no child ever inherits it.
        env::remove_var(proto::PMI_SECRET.name);
        let secret = secret
            .map_err(|_| env_err(format!("{} is missing (was from_env called twice?)", proto::PMI_SECRET.name)))?;
        let secret = Secret::from_hex(secret.trim())?;
        let rank: u32 = env_num(proto::RANK.name)?;
        let job_id: u64 = env_num(proto::JOB_ID.name)?;
        let appnum: u32 = env_num(proto::APPNUM.name).unwrap_or(0);
        let client = PmiClient::connect(&addr, &secret, rank, job_id)?;
        let size_env: u32 = env_num(proto::SIZE.name)?;
        if size_env != client.size {
            return Err(env_err(format!(
                "{}={size_env} disagrees with the launcher's job size {}",
                proto::SIZE.name,
                client.size
            )));
        }
        let universe_size = env_num(proto::UNIVERSE_SIZE.name).unwrap_or(client.size);
        Ok(Some(PmiClient { appnum, universe_size, shm_fd: adopt_shm_fd(), ..client }))
    }

    /// Connects and authenticates with explicit parameters instead of the
    /// environment. Used by `from_env` and by tests that need to present a
    /// wrong secret; `appnum`, `universe_size` and `shm_fd` take defaults.
    pub fn connect(addr: &str, secret: &Secret, rank: u32, job_id: u64) -> Result<PmiClient, PmiError> {
        let mut stream =
            TcpStream::connect(addr).map_err(|e| PmiError::io(&format!("connecting to the launcher at {addr}"), e))?;
        // Requests are small and latency-bound.
        let _ = stream.set_nodelay(true);
        client_handshake(&mut stream, secret)?;
        wire::send(&mut stream, &Msg::Hello { rank, job_id })?;
        let size = match wire::recv(&mut stream)? {
            Msg::Welcome { size } => size,
            other => return Err(unexpected(other)),
        };
        Ok(PmiClient {
            stream,
            rank,
            size,
            job_id,
            appnum: 0,
            universe_size: size,
            shm_fd: None,
            secret: secret.clone(),
            pending: Vec::new(),
            store: HashMap::new(),
            finalized: false,
        })
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn job_id(&self) -> u64 {
        self.job_id
    }

    pub fn appnum(&self) -> u32 {
        self.appnum
    }

    pub fn universe_size(&self) -> u32 {
        self.universe_size
    }

    /// The job-wide memfd inherited from the launcher (size 0 until the MPI
    /// library sizes it). It is close-on-exec in this process.
    /// The job secret, which also authenticates the connections between ranks.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    pub fn shm_fd(&self) -> Option<RawFd> {
        self.shm_fd
    }

    fn check_open(&self) -> Result<(), PmiError> {
        if self.finalized {
            return Err(PmiError::new(PmiErrorKind::Usage, "the bootstrap connection was already finalized"));
        }
        Ok(())
    }

    /// Publishes `key` for this rank. Visible to this rank immediately and to
    /// the others after the next fence. A later put of the same key wins.
    pub fn put(&mut self, key: &str, value: &[u8]) -> Result<(), PmiError> {
        self.check_open()?;
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            return Err(PmiError::new(
                PmiErrorKind::Usage,
                format!("key length {} is outside 1..={MAX_KEY_LEN}", key.len()),
            ));
        }
        if value.len() > MAX_VALUE_LEN {
            return Err(PmiError::new(
                PmiErrorKind::Usage,
                format!("value of {} bytes exceeds {MAX_VALUE_LEN}", value.len()),
            ));
        }
        self.pending.push((key.to_owned(), value.to_vec()));
        self.store.insert((self.rank, key.to_owned()), value.to_vec());
        Ok(())
    }

    /// Collective over all ranks: returns once every rank has entered the
    /// fence; afterwards `get` sees every put made before any rank's fence.
    pub fn fence(&mut self) -> Result<(), PmiError> {
        self.check_open()?;
        let puts = std::mem::take(&mut self.pending);
        wire::send(&mut self.stream, &Msg::Fence { puts })?;
        match wire::recv(&mut self.stream)? {
            Msg::FenceDone { kvs } => {
                for kv in kvs {
                    self.store.insert((kv.rank, kv.key), kv.value);
                }
                Ok(())
            }
            other => Err(unexpected(other)),
        }
    }

    /// Looks `key` of `rank` up in the local copy; `None` if that rank has not
    /// put it (or the put has not been fenced yet).
    pub fn get(&mut self, rank: u32, key: &str) -> Result<Option<Vec<u8>>, PmiError> {
        if rank >= self.size {
            return Err(PmiError::new(
                PmiErrorKind::Usage,
                format!("rank {rank} is outside the job of size {}", self.size),
            ));
        }
        Ok(self.store.get(&(rank, key.to_owned())).cloned())
    }

    /// Asks the launcher to start a new job running `cmds` (ranks numbered
    /// consecutively over the commands, `BATON_APPNUM` = command index), and
    /// to give its ranks `parent_port` in `BATON_PARENT_PORT`. Returns the
    /// new job's id and size once all its processes have been started; the
    /// launcher starts all of them or none. A refusal is an error of kind
    /// [`PmiErrorKind::Launcher`] whose [`PmiError::message`] is the
    /// launcher's explanation, fit to show the user.
    ///
    /// Not collective: only the calling rank talks to the launcher.
    pub fn spawn(&mut self, cmds: &[SpawnCmd], parent_port: &str) -> Result<(u64, u32), PmiError> {
        self.check_open()?;
        let msg = Msg::Spawn { cmds: cmds.to_vec(), parent_port: parent_port.to_owned() };
        wire::send(&mut self.stream, &msg)?;
        match wire::recv(&mut self.stream)? {
            Msg::SpawnDone { job_id, size } => Ok((job_id, size)),
            other => Err(unexpected(other)),
        }
    }

    /// Asks the launcher to end the whole job with `code`, printing `msg`.
    /// On success the launcher kills this process, so this only returns
    /// (with an error) when the launcher cannot be reached or does not act.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<(), PmiError> {
        self.request_abort(code, msg)?;
        std::thread::sleep(ABORT_GRACE);
        Err(PmiError::new(PmiErrorKind::Launcher, "the launcher acknowledged the abort but did not end the job"))
    }

    /// Asks the launcher to end the whole job with `code`, printing `msg`,
    /// and returns once it has acknowledged. For a process the launcher does
    /// not own and will not kill — a singleton served by
    /// `mpiexec --singleton-server` — which must then exit by itself.
    pub fn request_abort(&mut self, code: i32, msg: &str) -> Result<(), PmiError> {
        let msg = msg.to_owned();
        wire::send(&mut self.stream, &Msg::Abort { code, msg })?;
        match wire::recv(&mut self.stream)? {
            Msg::AbortAck => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Tells the launcher this rank finalized cleanly. Further calls other
    /// than `get` fail afterwards.
    pub fn finalize(&mut self) -> Result<(), PmiError> {
        self.check_open()?;
        wire::send(&mut self.stream, &Msg::Finalize)?;
        match wire::recv(&mut self.stream)? {
            Msg::FinalizeAck => {
                self.finalized = true;
                Ok(())
            }
            other => Err(unexpected(other)),
        }
    }
}

fn unexpected(msg: Msg) -> PmiError {
    match msg {
        Msg::Error { msg } => PmiError::new(PmiErrorKind::Launcher, msg),
        other => PmiError::protocol(format!("unexpected answer from the launcher: {other:?}")),
    }
}
