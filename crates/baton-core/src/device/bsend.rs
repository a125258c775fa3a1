//! Buffered sends (`MPI_Bsend`, `MPI_Ibsend`, `MPI_Bsend_init`): the space accounting against
//! the buffer the application attached, and attach, detach and flush, blocking or not, of the
//! process's buffer and of the buffers attached to communicators (MPI 4.1).
//!
//! Important types:
//! - [`Buffers`]: the process's buffer and the communicators' ones; a buffered send on a
//!   communicator with a buffer of its own uses that one, else the process's.
//! - [`Bsend`]: the attached buffer (or the automatic one) and the buffered sends still in flight,
//!   each with the space it holds. A buffered send's bytes are copied at once into memory the
//!   request owns, so the attached buffer itself is never written: it only bounds how much may be
//!   in flight, as the standard's accounting (`MPI_BSEND_OVERHEAD` per message) says.
//! - [`Detached`]: what `MPI_Buffer_detach` hands back.
//!
//! Lock order: the [`Buffers`] mutex, then the engine lock; neither is held while waiting.
//!
//! A nonblocking flush (`MPI_Buffer_iflush`, `MPI_Comm_iflush_buffer`) returns a request that a
//! helper thread completes once the sends it covers are done: nothing else in the library
//! watches requests complete, and the sends' own progress needs no help from it.

use super::request::EMPTY;
use super::Device;
use crate::engine::{Engine, ReqId};
use crate::error::{MpiError, Result};
use baton_abi::consts as c;
use std::collections::HashMap;
use std::sync::MutexGuard;

/// The buffers for buffered sends: the process's and those attached to communicators, by
/// context id.
#[derive(Debug, Default)]
pub struct Buffers {
    process: Bsend,
    comms: HashMap<u64, Bsend>,
}

impl Buffers {
    /// The buffer that a buffered send on context `ctx` draws on.
    pub fn for_send(&mut self, ctx: u64) -> &mut Bsend {
        if self.comms.contains_key(&ctx) {
            self.comms.get_mut(&ctx).expect("checked")
        } else {
            &mut self.process
        }
    }

    /// The process's buffer (`None`) or communicator `ctx`'s, made if it has none.
    fn of(&mut self, ctx: Option<u64>) -> &mut Bsend {
        match ctx {
            None => &mut self.process,
            Some(ctx) => self.comms.entry(ctx).or_default(),
        }
    }
}

/// The buffer attached for buffered sends and what is in flight from it.
#[derive(Debug, Default)]
pub struct Bsend {
    addr: usize,
    size: usize,
    attached: bool,
    /// `MPI_BUFFER_AUTOMATIC`: the library finds the space itself, so there is no bound.
    automatic: bool,
    /// Buffered sends not known to be complete yet, with the space each holds (its packed bytes
    /// plus `MPI_BSEND_OVERHEAD`).
    inflight: Vec<(ReqId, usize)>,
}

/// The buffer `MPI_Buffer_detach` gives back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detached {
    /// The application's buffer: its address and size.
    User { addr: usize, size: usize },
    /// `MPI_BUFFER_AUTOMATIC` was attached.
    Automatic,
}

impl Bsend {
    /// The space buffered sends in flight hold; those that completed are forgotten and their
    /// requests released.
    pub fn in_use(&mut self, engine: &mut Engine) -> usize {
        self.inflight.retain(|&(id, _)| {
            let done = engine.get(id).is_none_or(|r| r.complete);
            if done {
                engine.release(id);
            }
            !done
        });
        self.inflight.iter().map(|&(_, n)| n).sum()
    }

    /// Whether a message needing `need` bytes of the buffer (overhead included) may start while
    /// `used` bytes are held; the error names `call`.
    pub fn check_room(&self, call: &str, need: usize, used: usize) -> Result<()> {
        if self.automatic {
            return Ok(());
        }
        if !self.attached {
            return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: no buffer is attached (MPI_Buffer_attach)")));
        }
        if used + need > self.size {
            return Err(MpiError::new(
                c::MPI_ERR_BUFFER,
                format!(
                    "{call}: attached buffer too small: {need} bytes needed, {} free",
                    self.size - used.min(self.size)
                ),
            ));
        }
        Ok(())
    }

    /// Records buffered send `id`, holding `need` bytes until it completes.
    pub fn hold(&mut self, id: ReqId, need: usize) {
        self.inflight.push((id, need));
    }

    /// Attaches `size` bytes at `addr`, or the automatic buffer (`addr` is then ignored).
    pub fn attach(&mut self, call: &str, addr: usize, size: usize, automatic: bool) -> Result<()> {
        if self.attached {
            return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: a buffer is already attached")));
        }
        // Sends still in flight from a buffer detached earlier stay accounted for.
        let inflight = std::mem::take(&mut self.inflight);
        *self = if automatic {
            Bsend { attached: true, automatic: true, inflight, ..Default::default() }
        } else {
            Bsend { addr, size, attached: true, automatic: false, inflight }
        };
        Ok(())
    }

    /// Detaches the buffer (the caller has waited for what was in flight).
    pub fn detach(&mut self, call: &str) -> Result<Detached> {
        if !self.attached {
            return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: no buffer is attached")));
        }
        let b = std::mem::take(self);
        Ok(if b.automatic { Detached::Automatic } else { Detached::User { addr: b.addr, size: b.size } })
    }

    /// The sends in flight, forgotten here: the caller waits for them.
    fn take_inflight(&mut self) -> Vec<ReqId> {
        std::mem::take(&mut self.inflight).into_iter().map(|(id, _)| id).collect()
    }

    /// The sends in flight, still accounted for here.
    fn inflight_ids(&self) -> Vec<ReqId> {
        self.inflight.iter().map(|&(id, _)| id).collect()
    }
}

impl Device {
    pub(super) fn bsend(&self) -> MutexGuard<'_, Buffers> {
        self.bsend.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `MPI_Buffer_attach`: `size` bytes at `addr`, or `automatic` (`MPI_BUFFER_AUTOMATIC`).
    pub fn buffer_attach(&self, call: &str, addr: usize, size: usize, automatic: bool) -> Result<()> {
        self.comm_buffer_attach(call, None, addr, size, automatic)
    }

    /// `MPI_Buffer_detach`: waits until every buffered send has left, then detaches.
    pub fn buffer_detach(&self, call: &str) -> Result<Detached> {
        self.comm_buffer_detach(call, None)
    }

    /// `MPI_Buffer_flush` (and finalize): waits until every buffered send has left.
    pub fn buffer_flush(&self) {
        self.comm_buffer_flush(None);
    }

    /// `MPI_Comm_attach_buffer` (`ctx`: the communicator's context id) or, with `ctx` None,
    /// `MPI_Buffer_attach`.
    pub fn comm_buffer_attach(&self, call: &str, ctx: Option<u64>, addr: usize, size: usize, auto: bool) -> Result<()> {
        self.bsend().of(ctx).attach(call, addr, size, auto)
    }

    /// `MPI_Comm_detach_buffer` or, with `ctx` None, `MPI_Buffer_detach`: waits until the
    /// buffer's sends have left, then detaches it.
    pub fn comm_buffer_detach(&self, call: &str, ctx: Option<u64>) -> Result<Detached> {
        self.comm_buffer_flush(ctx);
        let mut b = self.bsend();
        let got = b.of(ctx).detach(call);
        if let Some(ctx) = ctx {
            // Sends on the communicator use the process's buffer again.
            b.comms.remove(&ctx);
        }
        got
    }

    /// `MPI_Comm_flush_buffer` or, with `ctx` None, `MPI_Buffer_flush`: waits until the
    /// buffer's sends have left.
    pub fn comm_buffer_flush(&self, ctx: Option<u64>) {
        // Taken out first: no lock is held while waiting, and other threads may go on sending.
        let ids = match ctx {
            None => self.bsend().process.take_inflight(),
            Some(ctx) => self.bsend().comms.get_mut(&ctx).map(Bsend::take_inflight).unwrap_or_default(),
        };
        for id in ids {
            self.wait(id);
        }
    }

    /// `MPI_Comm_iflush_buffer` or, with `ctx` None, `MPI_Buffer_iflush`: a request complete
    /// once every send now in flight from the buffer has left. The sends stay accounted for (and
    /// are released) by the buffer; the request only watches them.
    pub fn comm_buffer_iflush(&'static self, ctx: Option<u64>) -> ReqId {
        let ids = match ctx {
            None => self.bsend().process.inflight_ids(),
            Some(ctx) => self.bsend().comms.get(&ctx).map(Bsend::inflight_ids).unwrap_or_default(),
        };
        let req = self.lock().engine.external(0);
        let left = move |st: &crate::runtime::State| ids.iter().all(|&id| st.engine.get(id).is_none_or(|r| r.complete));
        if left(&self.lock()) {
            self.lock().engine.complete(req, EMPTY);
            return req;
        }
        std::thread::spawn(move || {
            self.block(|st| left(st).then_some(()));
            self.lock().engine.complete(req, EMPTY);
            self.wake_sleepers();
        });
        req
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Status;

    const CALL: &str = "MPI_Bsend";

    fn attached(size: usize) -> Bsend {
        let mut b = Bsend::default();
        b.attach("MPI_Buffer_attach", 0x1000, size, false).unwrap();
        b
    }

    /// A 1000-byte buffer holding the space of one send in flight per entry of `needs`.
    fn holding(needs: &[usize]) -> (Engine, Bsend, Vec<ReqId>) {
        let mut engine = Engine::new();
        let mut b = attached(1000);
        let ids = needs
            .iter()
            .map(|&need| {
                let id = engine.external(0);
                b.hold(id, need);
                id
            })
            .collect();
        (engine, b, ids)
    }

    #[test]
    fn without_a_buffer_a_buffered_send_fails_naming_the_call() {
        let b = Bsend::default();
        let e = b.check_room(CALL, 10, 0).unwrap_err();
        assert_eq!(e.class, c::MPI_ERR_BUFFER);
        assert_eq!(e.msg, "MPI_Bsend: no buffer is attached (MPI_Buffer_attach)");
    }

    #[test]
    fn space_held_by_sends_in_flight_is_freed_as_they_complete() {
        let (mut engine, mut b, ids) = holding(&[600, 300]);
        let (first, second) = (ids[0], ids[1]);
        assert_eq!(b.in_use(&mut engine), 900);
        // 100 bytes free: a message needing 101 does not fit, one needing 100 does.
        let e = b.check_room(CALL, 101, 900).unwrap_err();
        assert_eq!(e.class, c::MPI_ERR_BUFFER);
        assert_eq!(e.msg, "MPI_Bsend: attached buffer too small: 101 bytes needed, 100 free");
        b.check_room(CALL, 100, 900).unwrap();
        engine.complete(first, Status::default());
        assert_eq!(b.in_use(&mut engine), 300);
        // A completed send's request is released with it.
        assert!(engine.get(first).is_none());
        assert!(engine.get(second).is_some());
        b.check_room(CALL, 700, 300).unwrap();
    }

    #[test]
    fn more_in_use_than_attached_reports_nothing_free() {
        // A smaller buffer attached while sends from a larger one were still in flight.
        let b = attached(100);
        let e = b.check_room(CALL, 1, 500).unwrap_err();
        assert_eq!(e.msg, "MPI_Bsend: attached buffer too small: 1 bytes needed, 0 free");
    }

    #[test]
    fn the_automatic_buffer_has_no_bound() {
        let mut b = Bsend::default();
        b.attach("MPI_Buffer_attach", 0, 0, true).unwrap();
        b.check_room(CALL, usize::MAX / 2, usize::MAX / 2).unwrap();
        assert_eq!(b.detach("MPI_Buffer_detach").unwrap(), Detached::Automatic);
    }

    #[test]
    fn attach_twice_and_detach_without_a_buffer_are_errors() {
        let mut b = attached(64);
        let e = b.attach("MPI_Buffer_attach", 0x2000, 64, false).unwrap_err();
        assert_eq!(e.msg, "MPI_Buffer_attach: a buffer is already attached");
        assert_eq!(b.detach("MPI_Buffer_detach").unwrap(), Detached::User { addr: 0x1000, size: 64 });
        let e = b.detach("MPI_Buffer_detach").unwrap_err();
        assert_eq!(e.class, c::MPI_ERR_BUFFER);
        assert_eq!(e.msg, "MPI_Buffer_detach: no buffer is attached");
    }

    #[test]
    fn sends_in_flight_stay_accounted_for_across_a_new_attach() {
        let (mut engine, mut b, _) = holding(&[800]);
        // Detaching normally waits first; here the send is still open when a new buffer comes.
        b.attached = false;
        b.attach("MPI_Buffer_attach", 0x3000, 1000, false).unwrap();
        assert_eq!(b.in_use(&mut engine), 800);
        assert!(b.check_room(CALL, 300, 800).is_err());
    }

    /// Detach waits for a buffered send still in flight, and gives the buffer back only after it
    /// completed (a singleton process: no launcher, no peers).
    #[test]
    fn detach_waits_for_sends_in_flight() {
        let dev = std::sync::Arc::new(Device::new(crate::runtime::Mpi::init().expect("a singleton")));
        dev.buffer_attach("MPI_Buffer_attach", 0x1000, 4096, false).unwrap();
        let id = dev.lock().engine.external(0);
        dev.bsend().process.hold(id, 100);
        let completer = {
            let dev = dev.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                dev.lock().engine.complete(id, Status::default());
                std::time::Instant::now()
            })
        };
        let got = dev.buffer_detach("MPI_Buffer_detach").unwrap();
        let returned = std::time::Instant::now();
        let completed = completer.join().unwrap();
        assert!(returned >= completed, "detach returned before the send completed");
        assert_eq!(got, Detached::User { addr: 0x1000, size: 4096 });
        // The wait released the request.
        assert!(dev.lock().engine.get(id).is_none());
    }
}
