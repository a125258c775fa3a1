//! Typed receives (a sink with a datatype: data blocks, padding and bytes around the span) and
//! typed sends (elements of a datatype packed frame by frame, in place or not).

use crate::common::GUARD;
use crate::sim::{assert_guard, contig, guarded, pat, sim, status, ByteStream};
use crate::TRUNCATE;
use baton_abi::consts as c;
use baton_core::datatype::{predefined, Layout};
use baton_core::engine::{SendData, Sender, Sink};
use baton_transport::frame::Kind;
use baton_transport::mem::UserBuf;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------------
// Typed sinks
// ---------------------------------------------------------------------------------------------

/// Receives `msg` (packed MPI_DOUBLE_INT elements) into `count` elements at offset 8 of a
/// guarded buffer, and checks the data blocks, the padding and the bytes around the span.
fn run_double_int(msg_elems: usize, count: usize, eager: usize, max_frame: usize, read_ok: bool, posted_first: bool) {
    let lay = predefined(c::MPI_DOUBLE_INT).expect("MPI_DOUBLE_INT").clone();
    assert_eq!((lay.size, lay.extent), (12, 16));
    let mut s = sim(2, 2, read_ok);
    s.w.eager = eager;
    s.w.max_frame = max_frame;
    let msg = pat(7, 12 * msg_elems);
    let base = 8usize;
    let mut buf = vec![GUARD; base + 16 * count + 16];
    let make_sink = |buf: &mut Vec<u8>| {
        // SAFETY: `buf` is test-owned, outlives the receive and is untouched until it completes.
        let span = unsafe { UserBuf::new(buf.as_mut_ptr() as usize, buf.len() - 16) };
        Sink::Typed { span, base_off: base as isize, layout: lay.clone(), start: 0, len: lay.size * count }
    };
    let mut r = None;
    if posted_first {
        r = Some(s.recv(1, 1, 0, 0, make_sink(&mut buf)));
    }
    let sd = s.send(0, 1, 1, 0, &msg, false);
    s.pump();
    let r = r.unwrap_or_else(|| s.recv(1, 1, 0, 0, make_sink(&mut buf)));
    s.pump();
    let what = format!("elems {msg_elems} count {count} eager {eager} frame {max_frame} read {read_ok}");
    assert!(s.done(0, sd) && s.done(1, r), "{what}");
    let n = msg_elems.min(count);
    let err = if msg_elems > count { TRUNCATE } else { 0 };
    assert_eq!(s.get(1, r).status, status(0, 0, 12 * n as u64, err), "{what}");
    let mut expect = vec![GUARD; buf.len()];
    for e in 0..n {
        let at = base + 16 * e;
        expect[at..at + 12].copy_from_slice(&msg[12 * e..12 * e + 12]);
    }
    assert_eq!(buf, expect, "{what}");
}

#[test]
fn typed_double_int_sink() {
    for read_ok in [true, false] {
        for posted_first in [true, false] {
            // Eager.
            run_double_int(3, 3, 64, 128, read_ok, posted_first);
            // Rendezvous (read into a bounce buffer, or streamed in pieces that split elements).
            run_double_int(3, 3, 16, 128, read_ok, posted_first);
            run_double_int(7, 7, 16, 5, read_ok, posted_first);
            run_double_int(7, 7, 16, 13, read_ok, posted_first);
            // Truncated: the extra elements never land.
            run_double_int(3, 2, 64, 128, read_ok, posted_first);
            run_double_int(9, 4, 16, 7, read_ok, posted_first);
            // Fewer elements than room.
            run_double_int(2, 5, 16, 11, read_ok, posted_first);
        }
    }
}

#[test]
fn mprobed_synchronous_send_completes_on_mrecv() {
    for size in [10, 300] {
        let mut s = sim(2, usize::MAX, true);
        let msg = pat(1, size);
        let sd = s.send(0, 1, 1, 0, &msg, true);
        s.pump();
        let m = s.eng[1].mprobe(1, 0, 0).expect("mprobe");
        s.pump();
        assert!(!s.done(0, sd), "mprobe is not a match for a synchronous send");
        let mut buf = guarded(size);
        let r = s.with(1, |e, n| e.mrecv(n, m, contig(&mut buf, size)));
        s.pump();
        assert!(s.done(1, r) && s.done(0, sd));
        assert_eq!(&buf[..size], &msg[..]);
    }
}

#[test]
fn send_to_self() {
    for read_ok in [true, false] {
        for size in [5, 64, 65, 1000] {
            let mut s = sim(1, 1, read_ok);
            let msg = pat(2, size);
            let sd = s.send(0, 0, 1, 3, &msg, true);
            s.pump();
            assert!(!s.done(0, sd));
            let (r, buf) = s.post(0, 1, 0, 3, size);
            s.pump();
            assert!(s.done(0, sd) && s.done(0, r), "size {size} read {read_ok}");
            assert_eq!(s.get(0, r).status, status(0, 3, size as u64, 0));
            assert_eq!(&buf[..size], &msg[..]);
            assert_guard(&buf, size);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Typed sends: elements of a datatype packed frame by frame
// ---------------------------------------------------------------------------------------------

/// Layouts with short, odd and gapped blocks: (name, layout).
fn odd_layouts() -> Vec<(&'static str, Arc<Layout>)> {
    let short = predefined(c::MPI_SHORT).unwrap();
    let dbl = predefined(c::MPI_DOUBLE).unwrap();
    let chr = predefined(c::MPI_CHAR).unwrap();
    let int = predefined(c::MPI_INT).unwrap();
    let st = Layout::structure(&[1, 1, 2], &[0, 8, 20], &[chr, dbl, int]).unwrap();
    vec![
        ("double_int", predefined(c::MPI_DOUBLE_INT).unwrap().clone()),
        ("vector 3x3 shorts stride 7", Arc::new(Layout::vector(3, 3, 7, short).unwrap())),
        ("indexed 1,5,2 chars", Arc::new(Layout::indexed(&[1, 5, 2], &[9, 1, 12], chr).unwrap())),
        ("struct with gaps", Arc::new(st)),
        ("negative stride", Arc::new(Layout::hvector(4, 1, -12, int).unwrap())),
    ]
}

/// The packed bytes of `count` elements of `lay` at `base` in `mem`, block by block from the
/// type map (independent of the engine's runs).
fn ref_pack(lay: &Layout, mem: &[u8], base: isize, count: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for e in 0..count as isize {
        for &(off, len) in &lay.blocks {
            let at = (base + e * lay.extent + off) as usize;
            v.extend_from_slice(&mem[at..at + len]);
        }
    }
    v
}

/// The buffer a typed receive of `packed` should leave: `blank` with the blocks filled in.
fn ref_unpack(lay: &Layout, blank: &[u8], base: isize, packed: &[u8]) -> Vec<u8> {
    let mut out = blank.to_vec();
    let mut src = packed;
    let mut e = 0isize;
    while !src.is_empty() {
        for &(off, len) in &lay.blocks {
            let n = len.min(src.len());
            let at = (base + e * lay.extent + off) as usize;
            out[at..at + n].copy_from_slice(&src[..n]);
            src = &src[n..];
        }
        e += 1;
    }
    out
}

/// Where `count` elements of `lay` lie in a fresh buffer: (buffer length, base offset).
fn room(lay: &Layout, count: usize) -> (usize, isize) {
    let (lo, hi) = lay.span(count);
    ((hi - lo) as usize + 16, -lo + 8)
}

#[allow(clippy::too_many_arguments)]
fn run_typed(
    name: &str,
    lay: &Arc<Layout>,
    count: usize,
    eager: usize,
    max_frame: usize,
    read_ok: bool,
    in_place: bool,
    stream: Option<usize>,
    typed_recv: bool,
) {
    let mut s = sim(2, 2, read_ok);
    s.w.eager = eager;
    s.w.max_frame = max_frame;
    s.w.in_place = in_place;
    if let Some(p) = stream {
        s.w.stream = ByteStream::new(p, 2, true);
    }
    let (len, base) = room(lay, count);
    let mem = pat(3, len);
    let packed = ref_pack(lay, &mem, base, count);
    let total = packed.len();
    let what = format!(
        "{name} count {count} eager {eager} frame {max_frame} read {read_ok} in-place {in_place} \
         stream {stream:?} typed-recv {typed_recv}"
    );
    // SAFETY: `mem` outlives the send (pumped to completion below) and is not modified.
    let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
    let data = SendData::Typed { span, base_off: base, layout: lay.clone(), len: total };
    let sd = s.with(0, |e, n| e.send(n, 1, 1, 0, 4, data, false, Sender::GoesOn));
    let mut rbuf = if typed_recv { vec![GUARD; len] } else { guarded(total) };
    let blank = rbuf.clone();
    // SAFETY: `rbuf` outlives the receive and is untouched until it completes.
    let rspan = unsafe { UserBuf::new(rbuf.as_mut_ptr() as usize, rbuf.len()) };
    let sink = if typed_recv {
        Sink::Typed { span: rspan, base_off: base, layout: lay.clone(), start: 0, len: total }
    } else {
        Sink::Contig(rspan.prefix(total))
    };
    let r = s.recv(1, 1, 0, 4, sink);
    s.pump();
    assert!(s.done(0, sd) && s.done(1, r), "{what}");
    assert_eq!(s.get(1, r).status, status(0, 4, total as u64, 0), "{what}");
    if typed_recv {
        assert_eq!(rbuf, ref_unpack(lay, &blank, base, &packed), "{what}");
    } else {
        assert_eq!(&rbuf[..total], &packed[..], "{what}");
        assert_guard(&rbuf, total);
    }
    // The sender's elements are never read remotely: the receiver cannot know where they lie.
    assert!(s.w.reads.iter().all(|r| r.1 != 0), "{what}: read the sender's memory");
    let rts: Vec<_> = s.w.log.iter().filter(|l| l.2.kind == Kind::Rts).collect();
    assert!(rts.iter().all(|l| l.2.aux == 0), "{what}: Rts offered an address");
    if total > eager.min(max_frame) {
        assert_eq!(rts.len(), 1, "{what}");
        let data: usize = s.w.log.iter().filter(|l| l.2.kind == Kind::Data).map(|l| l.3).sum();
        assert_eq!(data, total, "{what}: streamed bytes");
    }
    if !in_place {
        assert_eq!(s.w.filled, 0, "{what}");
    } else if total > 0 && stream.is_none() {
        assert!(s.w.filled > 0, "{what}: nothing was packed in place");
    }
}

#[test]
fn typed_send_data_packs_per_frame() {
    for (name, lay) in odd_layouts() {
        for count in [1, 3, 40] {
            for (eager, frame) in [(4096, 4096), (16, 5), (16, 13), (16, 64), (0, 7)] {
                for read_ok in [true, false] {
                    for in_place in [true, false] {
                        for typed_recv in [false, true] {
                            run_typed(name, &lay, count, eager, frame, read_ok, in_place, None, typed_recv);
                        }
                    }
                    for piece in [1, 3] {
                        run_typed(name, &lay, count, eager, frame, read_ok, false, Some(piece), true);
                    }
                }
            }
        }
    }
}

/// Kinds and payload lengths of the frames rank 0 sent in a run of `lay` x `count` with an
/// eager limit far above the message (the received bytes are checked by `run_typed`).
fn frames_of(lay: &Arc<Layout>, count: usize, in_place: bool) -> Vec<(Kind, usize)> {
    run_typed("frames", lay, count, 1 << 20, 1 << 20, false, in_place, None, true);
    let mut s = sim(2, 2, false);
    s.w.eager = 1 << 20;
    s.w.max_frame = 1 << 20;
    s.w.in_place = in_place;
    let (len, base) = room(lay, count);
    let mem = pat(5, len);
    let total = ref_pack(lay, &mem, base, count).len();
    // SAFETY: `mem` outlives the send (pumped to completion below) and is not modified.
    let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
    let data = SendData::Typed { span, base_off: base, layout: lay.clone(), len: total };
    let sd = s.with(0, |e, n| e.send(n, 1, 1, 0, 4, data, false, Sender::GoesOn));
    let mut rbuf = vec![0u8; total];
    // SAFETY: `rbuf` outlives the receive and is untouched until it completes.
    let r = s.recv(1, 1, 0, 4, Sink::Contig(unsafe { UserBuf::new(rbuf.as_mut_ptr() as usize, total) }));
    s.pump();
    assert!(s.done(0, sd) && s.done(1, r));
    assert_eq!(rbuf, ref_pack(lay, &mem, base, count));
    s.w.log.iter().filter(|l| l.0 == 0 && l.2.kind != Kind::Fin).map(|l| (l.2.kind, l.3)).collect()
}

#[test]
fn sparse_elements_stream_in_pieces_dense_ones_go_eagerly() {
    let dbl = predefined(c::MPI_DOUBLE).unwrap();
    // A column of a 512 x 512 matrix of doubles: 4 KiB of data over 2 MiB.
    let column = Arc::new(Layout::vector(512, 1, 512, dbl).unwrap());
    let frames = frames_of(&column, 1, true);
    assert_eq!(frames[0].0, Kind::Rts, "{frames:?}");
    let data: Vec<usize> = frames.iter().filter(|f| f.0 == Kind::Data).map(|f| f.1).collect();
    assert!(data.len() >= 4, "gathered and scattered in one piece: {frames:?}");
    assert_eq!(data.iter().sum::<usize>(), 4096);
    // Over a transport that is not filled in place (a socket) the round trip costs more.
    assert_eq!(frames_of(&column, 1, false), [(Kind::Eager, 4096)]);
    // A small column still goes in one eager frame.
    let small = Arc::new(Layout::vector(64, 1, 512, dbl).unwrap());
    assert_eq!(frames_of(&small, 1, true), [(Kind::Eager, 512)]);
    // As does an array of structs of the same size: dense, nothing to overlap.
    let st = Arc::new(Layout::structure(&[1, 1], &[0, 8], &[dbl, dbl]).unwrap());
    assert_eq!(frames_of(&st, 256, true), [(Kind::Eager, 4096)]);
}

#[test]
fn typed_send_waits_for_ring_space_without_losing_its_window() {
    // A full ring refuses the in-place fill and the staged window; both are retried intact.
    let (_, lay) = odd_layouts().remove(1);
    for in_place in [true, false] {
        let mut s = sim(2, 1, false);
        s.w.eager = 8;
        s.w.max_frame = 11;
        s.w.in_place = in_place;
        let count = 9;
        let (len, base) = room(&lay, count);
        let mem = pat(5, len);
        let packed = ref_pack(&lay, &mem, base, count);
        // SAFETY: `mem` outlives the send and is not modified.
        let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
        let data = SendData::Typed { span, base_off: base, layout: lay.clone(), len: packed.len() };
        let sd = s.with(0, |e, n| e.send(n, 1, 1, 0, 0, data, false, Sender::GoesOn));
        let mut buf = guarded(packed.len());
        let r = s.recv(1, 1, 0, 0, contig(&mut buf, packed.len()));
        s.w.blocked.push((0, 1));
        for _ in 0..5 {
            s.step();
        }
        s.w.blocked.clear();
        s.pump();
        assert!(s.done(0, sd) && s.done(1, r));
        assert!(s.w.refused > 0);
        assert_eq!(&buf[..packed.len()], &packed[..]);
    }
}

#[test]
fn typed_send_data_forms() {
    for (name, lay) in odd_layouts() {
        typed_windows(name, &lay, 5);
        typed_windows(name, &lay, 1);
    }
}

/// Every window of the packed stream of `count` elements, packed by the engine's `SendData` and
/// unpacked through a typed sink, against the reference.
fn typed_windows(name: &str, lay: &Arc<Layout>, count: usize) {
    let (len, base) = room(lay, count);
    let mem = pat(9, len);
    let packed = ref_pack(lay, &mem, base, count);
    // SAFETY: `mem` outlives `data`.
    let span = unsafe { UserBuf::new(mem.as_ptr() as usize, mem.len()) };
    let data = SendData::Typed { span, base_off: base, layout: lay.clone(), len: packed.len() };
    assert!(data.contig().is_none());
    assert_eq!(data.len(), packed.len());
    assert_eq!(data.to_vec(), packed);
    for start in 0..packed.len() {
        for n in 0..=(packed.len() - start).min(40) {
            let mut w = vec![0u8; n];
            data.pack(start, &mut w);
            assert_eq!(w, &packed[start..start + n], "{name}: window {start}+{n}");
            let blank = vec![GUARD; len];
            let mut out = blank.clone();
            // SAFETY: `out` outlives the sink.
            let ospan = unsafe { UserBuf::new(out.as_mut_ptr() as usize, out.len()) };
            let mut sink =
                Sink::Typed { span: ospan, base_off: base, layout: lay.clone(), start: 0, len: packed.len() };
            sink.write(start, &w);
            let mut whole = ref_unpack(lay, &blank, base, &packed);
            // Only the window's bytes land: compare against the reference within the window.
            let mut mask = vec![0u8; packed.len()];
            mask[start..start + n].fill(1);
            let sel = ref_unpack(lay, &vec![0u8; len], base, &mask);
            for (i, m) in sel.iter().enumerate() {
                if *m == 0 {
                    whole[i] = GUARD;
                }
            }
            assert_eq!(out, whole, "{name}: unpacked window {start}+{n}");
        }
    }
}

#[test]
fn typed_receive_of_a_large_message_read_in_pieces() {
    // More than one bounce buffer's worth: read and unpacked piece by piece.
    for read_ok in [true, false] {
        run_double_int(6000, 6000, 16, 4096, read_ok, true);
        run_double_int(6000, 5999, 16, 4096, read_ok, false);
    }
}
