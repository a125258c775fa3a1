//! The direct receive (blocking `MPI_Recv` without a request): post order with requests,
//! truncation, synchronous sends, a rendezvous that turns it into a request, a failed peer.

use crate::sim::{assert_guard, contig, guarded, pat, sim, status, Sim};
use crate::TRUNCATE;
use baton_core::engine::{DirectEnd, ProcIdx, Status, ANY_SOURCE, ANY_TAG};
use baton_transport::frame::Kind;
use baton_transport::mem::UserBuf;

fn span(buf: &mut [u8], cap: usize) -> UserBuf {
    assert!(cap <= buf.len());
    // SAFETY: as in `contig`: a test-owned buffer, untouched until the receive ends.
    unsafe { UserBuf::new(buf.as_mut_ptr() as usize, cap) }
}

fn direct(s: &mut Sim, i: ProcIdx, ctx: u64, src: i32, tag: i32, buf: UserBuf) -> bool {
    s.with(i, |e, n| e.recv_direct(n, ctx, src, tag, buf))
}

fn direct_done(s: &mut Sim, i: ProcIdx) -> Option<Status> {
    match s.eng[i as usize].take_direct()? {
        DirectEnd::Done(st) => Some(st),
        DirectEnd::Request(_) => panic!("an eager message became a request"),
    }
}

#[test]
fn direct_receive_keeps_post_order_with_requests() {
    let mut s = sim(2, usize::MAX, true);
    let mut a = guarded(8);
    let mut b = guarded(8);
    let ra = s.recv(1, 1, 0, 5, contig(&mut a, 8));
    assert!(direct(&mut s, 1, 1, ANY_SOURCE, ANY_TAG, span(&mut b, 8)));
    // Only one direct receive at a time: a second caller must use a request.
    let mut spare = guarded(8);
    assert!(!direct(&mut s, 1, 1, 0, 5, span(&mut spare, 8)));
    let m1 = pat(1, 8);
    let m2 = pat(2, 6);
    s.send(0, 1, 1, 5, &m1, false);
    s.pump();
    assert!(s.done(1, ra), "the receive posted first takes the first message");
    assert!(s.eng[1].take_direct().is_none());
    s.send(0, 1, 1, 7, &m2, false);
    s.pump();
    assert_eq!(direct_done(&mut s, 1), Some(status(0, 7, 6, 0)));
    assert_eq!(&a[..8], &m1[..]);
    assert_eq!(&b[..6], &m2[..]);
    assert_guard(&b, 6);
    assert!(s.eng[1].take_direct().is_none(), "taking the end frees the slot");
    assert_guard(&spare, 0);

    // An unexpected message matches at post time; a later request sees the next one.
    let m3 = pat(3, 4);
    let m4 = pat(4, 4);
    s.send(0, 1, 1, 9, &m3, false);
    s.send(0, 1, 1, 9, &m4, false);
    s.pump();
    let mut c = guarded(8);
    assert!(direct(&mut s, 1, 1, 0, 9, span(&mut c, 8)));
    assert_eq!(direct_done(&mut s, 1), Some(status(0, 9, 4, 0)));
    assert_eq!(&c[..4], &m3[..]);
    let (rd, d) = s.post(1, 1, 0, 9, 8);
    assert!(s.done(1, rd));
    assert_eq!(&d[..4], &m4[..]);
}

#[test]
fn direct_receive_truncation_and_synchronous_send() {
    let mut s = sim(2, usize::MAX, true);
    let mut a = guarded(16);
    assert!(direct(&mut s, 1, 2, 0, 1, span(&mut a, 16)));
    let m = pat(5, 40);
    let sd = s.send(0, 1, 2, 1, &m, true);
    s.pump();
    assert_eq!(direct_done(&mut s, 1), Some(status(0, 1, 16, TRUNCATE)));
    assert_eq!(&a[..16], &m[..16]);
    assert_guard(&a, 16);
    assert!(s.done(0, sd), "the synchronous send completes once the direct receive matched it");
    assert_eq!(s.kinds(1, 0), vec![Kind::SyncAck]);
}

#[test]
fn direct_receive_of_a_rendezvous_becomes_a_request() {
    for read_ok in [true, false] {
        let mut s = sim(2, usize::MAX, read_ok);
        let m = pat(6, 1000);
        let mut a = guarded(1000);
        assert!(direct(&mut s, 1, 1, 0, 3, span(&mut a, 1000)));
        let sd = s.send(0, 1, 1, 3, &m, false);
        s.pump();
        let Some(DirectEnd::Request(id)) = s.eng[1].take_direct() else { panic!("no request") };
        assert!(s.done(1, id) && s.done(0, sd));
        s.assert_received(1, id, status(0, 3, 1000, 0), &a, &m, "");
    }
}

#[test]
fn direct_receive_fails_with_its_peer() {
    let mut s = sim(2, usize::MAX, true);
    let mut a = guarded(8);
    assert!(direct(&mut s, 1, 1, 0, 3, span(&mut a, 8)));
    assert!(s.eng[1].fail_peer(0, |ctx, src| ctx == 1 && (src == 0 || src == ANY_SOURCE), 77));
    assert_eq!(direct_done(&mut s, 1).map(|st| st.error), Some(77));
    assert_guard(&a, 0);
}
