//! What the two in-memory networks of these tests share (`engine`, two or three engines with
//! settings per test, and `coll_sim`, n ranks running collective schedules): frames in per-pair
//! FIFO rings ([`Rings`]), one process's view of a wire ([`Link`], the `Net` an engine is given),
//! and the copy of a single-copy read that the wire allowed or refused ([`read_into`],
//! [`read_into_slice`]).

use baton_core::engine::ProcIdx;
use baton_transport::frame::Header;
use baton_transport::mem::UserBuf;
use std::collections::VecDeque;

/// Bytes the tests put where no data belongs (past a receive span, in the gaps of strided
/// memory): a write there shows.
pub const GUARD: u8 = 0xEE;

/// One frame in a ring: header and payload.
pub type Frame = (Header, Vec<u8>);

/// `rings[from][to]`: the frames pushed from one process to another, in order.
pub type Rings = Vec<Vec<VecDeque<Frame>>>;

/// Empty rings between `n` processes.
pub fn rings(n: usize) -> Rings {
    (0..n).map(|_| (0..n).map(|_| VecDeque::new()).collect()).collect()
}

/// Process `me`'s view of the wire `W`: what its engine gets as its `Net`.
pub struct Link<'a, W> {
    pub w: &'a mut W,
    pub me: ProcIdx,
}

/// Completes a single-copy read into application memory: copies `src`, the remote bytes, into
/// `dst`, or reports the read refused (`None`).
pub fn read_into(src: Option<&[u8]>, dst: &UserBuf) -> bool {
    match src {
        Some(src) => {
            assert_eq!(dst.write(0, src), src.len());
            true
        }
        None => false,
    }
}

/// [`read_into`] for a destination the engine owns (a bounce buffer, a packed copy).
pub fn read_into_slice(src: Option<&[u8]>, dst: &mut [u8]) -> bool {
    match src {
        Some(src) => {
            dst.copy_from_slice(src);
            true
        }
        None => false,
    }
}
