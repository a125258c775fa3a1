//! What the engine needs from the transports ([`Net`]) and what it tells them about a sender
//! ([`Sender`]).

use super::ProcIdx;
use baton_transport::coop::CoopSlot;
use baton_transport::frame::Header;
use baton_transport::mem::UserBuf;

/// What the sending application does while a message is on its way, which decides how large
/// a message still goes eagerly ([`Net::eager_limit`]) and whether TCP may hold a small one
/// back to leave with the next ones (`TcpNet::try_send_more`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    /// It waits for this send before going on (`MPI_Send`, `MPI_Ssend`, `MPI_Rsend`,
    /// `MPI_Sendrecv_replace`): it loses nothing while the receiver copies straight from its
    /// buffer.
    Waits,
    /// It goes on, and more messages may follow (`MPI_Isend`, collective schedules): the eager
    /// copies of successive messages overlap, where the receiver's single copies of rendezvous
    /// messages come one after the other.
    GoesOn,
}

/// What the engine needs from the transports.
pub trait Net {
    /// Pushes one whole frame; false if there is no room now.
    fn try_send(&mut self, to: ProcIdx, h: &Header, payload: &[u8]) -> bool;
    /// Pushes data frame `h` whose payload is `window`, of which the first `at` bytes were
    /// taken by earlier calls; returns how many more bytes it took (0: none now). A transport
    /// that carries whole frames takes all of it or nothing (`at` is then always 0); a byte
    /// stream may take a part and remembers the frame under way, so the engine offers the rest
    /// of it (the same `h` and `window`, a larger `at`) before any other data frame to `to`.
    fn send_data(&mut self, to: ProcIdx, h: &Header, window: &[u8], at: usize) -> usize {
        debug_assert_eq!(at, 0, "a whole-frame transport never took part of a frame");
        if self.try_send(to, h, window) {
            window.len()
        } else {
            0
        }
    }
    /// Pushes one whole frame of `len` payload bytes that `fill` writes in place (a window of a
    /// derived datatype packed straight into the transport's memory); false, without calling
    /// `fill`, if there is no room now. The engine uses it only where
    /// [`fills_in_place`](Self::fills_in_place) says so; elsewhere it packs into a buffer of its
    /// own and sends that.
    fn try_send_with(&mut self, to: ProcIdx, h: &Header, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> bool {
        let mut v = vec![0u8; len];
        fill(&mut v);
        self.try_send(to, h, &v)
    }
    /// Whether [`try_send_with`](Self::try_send_with) to `to` writes into the transport's own
    /// memory (a ring record) and takes whole frames only.
    fn fills_in_place(&self, _to: ProcIdx) -> bool {
        false
    }
    /// Largest payload of one frame to `to`.
    fn max_frame(&self, to: ProcIdx) -> usize;

    /// Sends an eager frame if its payload is within the eager limit for `to` and the
    /// transport takes it now; false, having done nothing, otherwise. One call where the hot
    /// path would otherwise ask for both limits and then send.
    fn try_send_eager(&mut self, to: ProcIdx, h: &Header, payload: &[u8], sender: Sender) -> bool {
        payload.len() <= self.eager_limit(to, sender).min(self.max_frame(to)) && self.try_send(to, h, payload)
    }
    /// Messages up to this many bytes go eagerly to `to` from a sender that does as `sender`
    /// says.
    fn eager_limit(&self, to: ProcIdx, sender: Sender) -> usize;
    /// Copies `dst.len()` bytes at `addr` in process `from` straight into the application's
    /// span `dst` (single copy); false when this process cannot read `from`'s memory. This and
    /// the methods below serve the outbox's actions only ([`Engine::run_actions`]), never the
    /// handling of a frame.
    ///
    /// [`Engine::run_actions`]: super::Engine::run_actions
    fn read_remote(&mut self, from: ProcIdx, addr: u64, dst: &UserBuf) -> bool;
    /// The same into a buffer of the library's own.
    fn read_remote_into(&mut self, from: ProcIdx, addr: u64, dst: &mut [u8]) -> bool;
    /// Writes `src` at `addr` in process `to` (single copy); false if that is not possible.
    fn write_remote(&mut self, _to: ProcIdx, _addr: u64, _src: &[u8]) -> bool {
        false
    }
    /// The shared counters for cooperative copies of rendezvous messages between this process
    /// and `peer` (this one sending when `sending`); None where the two cannot share copies.
    fn coop_slot(&mut self, _peer: ProcIdx, _sending: bool) -> Option<&CoopSlot> {
        None
    }
    /// Smallest message worth a cooperative copy.
    fn coop_min(&self) -> usize {
        usize::MAX
    }
    /// Wakes process `to` if a thread of it sleeps on its doorbell: what it waits for changed
    /// in memory both map (a cooperative copy's counters), without a frame.
    fn wake_peer(&mut self, _to: ProcIdx) {}
    /// Whether `peer` reads a rendezvous message out of this process's memory itself (a single
    /// copy), so that the send needs nothing more of this side than to take the answer.
    fn reads_sender(&self, _peer: ProcIdx) -> bool {
        false
    }
    /// Whether a thread of process `peer` is inside a blocking MPI wait (known only where
    /// progress threads run; false where it cannot be known).
    fn peer_waits(&mut self, _peer: ProcIdx) -> bool {
        false
    }
}
