//! The target side without processes: an engine whose frames loop back to itself, origins that
//! are only ranks in request headers, and an [`Exposure`] over memory of its own. Each test
//! sends requests as an origin would and checks the memory and the answers.

use super::target::Exposure;
use super::wire::{Ask, Shape};
use super::{op_code, Memory};
use crate::engine::{Engine, Net, ProcIdx, ReqId, SendData, Sender, Sink};
use crate::op::Op;
use crate::progress::Service;
use baton_abi::consts as c;
use baton_transport::frame::Header;
use baton_transport::mem::UserBuf;
use baton_transport::region::Region;
use std::collections::VecDeque;
use std::sync::Arc;

const CTX: u64 = 0x100;
const REPLY: u64 = 0x200;

/// Frames to this very process, in order; messages above `eager` bytes go by rendezvous and
/// stream, since nothing can be read from "the other side".
struct Loop {
    frames: VecDeque<(Header, Vec<u8>)>,
    eager: usize,
}

impl Net for Loop {
    fn try_send(&mut self, _to: ProcIdx, h: &Header, payload: &[u8]) -> bool {
        self.frames.push_back((*h, payload.to_vec()));
        true
    }
    fn max_frame(&self, _to: ProcIdx) -> usize {
        1 << 20
    }
    fn eager_limit(&self, _to: ProcIdx, _sender: Sender) -> usize {
        self.eager
    }
    fn read_remote(&mut self, _from: ProcIdx, _addr: u64, _dst: &UserBuf) -> bool {
        false
    }
    fn read_remote_into(&mut self, _from: ProcIdx, _addr: u64, _dst: &mut [u8]) -> bool {
        false
    }
}

struct World {
    engine: Engine,
    net: Loop,
    exposure: Exposure,
    memory: Arc<Region>,
}

impl World {
    /// A target of `n` origin ranks (all this process) over `len` bytes.
    fn new(len: usize, n: usize) -> World {
        let memory = Arc::new(Region::create(len).unwrap());
        let span = memory.buf().prefix(len);
        let exposure =
            Exposure::new(CTX, REPLY, 0, vec![0; n], "the window".into(), Memory::Span(span), Some(memory.clone()));
        World { engine: Engine::new(), net: Loop { frames: VecDeque::new(), eager: 1 << 16 }, exposure, memory }
    }

    fn mem(&self) -> UserBuf {
        self.memory.buf()
    }

    /// Sends request `ask` with `data` as origin rank `from`.
    fn ask(&mut self, from: i32, ask: Ask, data: &[u8]) {
        let msg = ask.encode(data);
        let id = self.engine.send(&mut self.net, 0, CTX, from, 0, SendData::Packed(msg), false, Sender::GoesOn);
        self.engine.release(id);
    }

    /// Posts the receive of the answer under `tag` (`len` bytes).
    fn answer(&mut self, tag: i32, len: usize) -> ReqId {
        self.engine.recv(&mut self.net, REPLY, c::MPI_ANY_SOURCE, tag, Sink::Owned(vec![0; len]))
    }

    /// Runs progress passes until no frame is left and nothing waits to go out.
    fn pump(&mut self) {
        for _ in 0..10_000 {
            while let Some((h, p)) = self.net.frames.pop_front() {
                self.engine.on_frame(&mut self.net, 0, &h, &p);
            }
            self.engine.run_actions(&mut self.net);
            self.engine.progress(&mut self.net);
            self.exposure.serve(&mut self.engine, &mut self.net);
            if self.net.frames.is_empty() && !self.engine.has_outgoing() {
                return;
            }
        }
        panic!("the loop never went quiet");
    }

    fn answered(&mut self, id: ReqId) -> Option<Vec<u8>> {
        let r = self.engine.get_mut(id)?;
        r.complete.then(|| r.owned.take().unwrap_or_default())
    }
}

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn read_ints(b: &UserBuf, off: usize, n: usize) -> Vec<i32> {
    b.read(off, 4 * n).chunks(4).map(|w| i32::from_ne_bytes(w.try_into().unwrap())).collect()
}

#[test]
fn puts_and_gets_follow_the_target_shape() {
    let mut w = World::new(256, 1);
    // Every other int of 8, from offset 16.
    let layout = crate::datatype::Layout::vector(4, 1, 2, crate::datatype::predefined(c::MPI_INT).unwrap()).unwrap();
    let shape = Shape::of(&layout, 1);
    w.ask(0, Ask::Put { off: 16, shape: shape.clone() }, &ints(&[1, 2, 3, 4]));
    w.pump();
    assert_eq!(read_ints(&w.mem(), 16, 8), vec![1, 0, 2, 0, 3, 0, 4, 0]);
    let id = w.answer(7, 16);
    w.ask(0, Ask::Get { id: 7, off: 16, shape }, &[]);
    w.pump();
    assert_eq!(w.answered(id).unwrap(), ints(&[1, 2, 3, 4]));
}

#[test]
fn a_put_larger_than_the_eager_limit_arrives_whole() {
    let mut w = World::new(1 << 20, 1);
    w.net.eager = 256;
    let data: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
    w.ask(0, Ask::Put { off: 1000, shape: Shape::contiguous(data.len()) }, &data);
    w.pump();
    assert_eq!(w.mem().read(1000, data.len()), &data[..]);
}

#[test]
fn accumulates_combine_and_fetching_ones_answer_the_old_value() {
    let mut w = World::new(64, 1);
    let int = c::MPI_INT as u32;
    w.ask(0, Ask::Acc { op: op_code(Op::Sum), basic: int, off: 0, shape: Shape::contiguous(8) }, &ints(&[5, 6]));
    w.ask(0, Ask::Acc { op: op_code(Op::Sum), basic: int, off: 0, shape: Shape::contiguous(8) }, &ints(&[10, 20]));
    let id = w.answer(3, 8);
    let ask = Ask::GetAcc { id: 3, op: op_code(Op::Max), basic: int, off: 0, shape: Shape::contiguous(8) };
    w.ask(0, ask, &ints(&[100, 1]));
    w.pump();
    assert_eq!(w.answered(id).unwrap(), ints(&[15, 26]));
    assert_eq!(read_ints(&w.mem(), 0, 2), vec![100, 26]);
    // Compare-and-swap: the first matches, the second does not.
    let a = w.answer(4, 4);
    w.ask(0, Ask::Cas { id: 4, len: 4, off: 0 }, &ints(&[7, 100]));
    let b = w.answer(5, 4);
    w.ask(0, Ask::Cas { id: 5, len: 4, off: 0 }, &ints(&[9, 100]));
    w.pump();
    assert_eq!(w.answered(a).unwrap(), ints(&[100]));
    assert_eq!(w.answered(b).unwrap(), ints(&[7]));
    assert_eq!(read_ints(&w.mem(), 0, 1), vec![7]);
}

#[test]
fn an_exclusive_lock_holds_back_the_next_origin_until_unlock() {
    let mut w = World::new(16, 2);
    w.ask(1, Ask::Lock { exclusive: true, notify: false, id: 0 }, &[]);
    w.ask(1, Ask::Put { off: 0, shape: Shape::contiguous(4) }, &ints(&[1]));
    w.pump();
    // Origin 0 asks for the lock too, then writes: nothing of it may land while 1 holds it.
    let granted = w.answer(9, 0);
    w.ask(0, Ask::Lock { exclusive: true, notify: true, id: 9 }, &[]);
    w.ask(0, Ask::Put { off: 0, shape: Shape::contiguous(4) }, &ints(&[2]));
    w.pump();
    assert_eq!(read_ints(&w.mem(), 0, 1), vec![1]);
    assert!(w.answered(granted).is_none(), "granted while another origin holds the lock");
    let unlocked = w.answer(10, 0);
    w.ask(1, Ask::Unlock { id: 10 }, &[]);
    w.pump();
    assert!(w.answered(unlocked).is_some());
    assert!(w.answered(granted).is_some());
    assert_eq!(read_ints(&w.mem(), 0, 1), vec![2]);
}

#[test]
fn a_flush_is_answered_after_everything_before_it_and_completes_are_counted() {
    let mut w = World::new(16, 1);
    w.ask(0, Ask::Put { off: 4, shape: Shape::contiguous(4) }, &ints(&[42]));
    let id = w.answer(11, 0);
    w.ask(0, Ask::Flush { id: 11 }, &[]);
    w.ask(0, Ask::Complete, &[]);
    w.pump();
    assert!(w.answered(id).is_some());
    assert_eq!(read_ints(&w.mem(), 4, 1), vec![42]);
    assert_eq!(w.exposure.served().completes, 1);
}

#[test]
fn a_request_reaching_outside_the_window_writes_nothing() {
    let mut w = World::new(16, 1);
    let len = w.mem().len();
    w.ask(0, Ask::Put { off: 12, shape: Shape::contiguous(8) }, &ints(&[7, 7]));
    w.ask(0, Ask::Put { off: -4, shape: Shape::contiguous(8) }, &ints(&[7, 7]));
    w.pump();
    assert!(w.mem().read(0, len).iter().all(|&b| b == 0));
}
