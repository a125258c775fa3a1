//! Packing and unpacking of non-contiguous predefined layouts over real memory.

use baton_abi::consts as c;
use baton_core::datatype::predefined;
use baton_transport::mem::UserBuf;

#[test]
fn pack_then_unpack_round_trips_at_any_split() {
    let lay = predefined(c::MPI_SHORT_INT).unwrap();
    let mut src = [0u8; 8 * 5];
    for (k, b) in src.iter_mut().enumerate() {
        *b = k as u8;
    }
    // SAFETY: test-local arrays outlive the spans.
    let sspan = unsafe { UserBuf::new(src.as_ptr() as usize, src.len()) };
    let mut packed = Vec::new();
    lay.pack_from(&sspan, 0, 5, &mut packed);
    assert_eq!(packed.len(), 30);
    assert_eq!(&packed[..6], &[0, 1, 4, 5, 6, 7]);
    for split in 0..30 {
        let mut dst = [0xAAu8; 40];
        // SAFETY: as above.
        let dspan = unsafe { UserBuf::new(dst.as_mut_ptr() as usize, dst.len()) };
        lay.unpack_into(&dspan, 0, 0, &packed[..split]);
        lay.unpack_into(&dspan, 0, split, &packed[split..]);
        for e in 0..5 {
            for k in [0, 1, 4, 5, 6, 7] {
                assert_eq!(dst[e * 8 + k], src[e * 8 + k], "split {split}");
            }
            assert_eq!(dst[e * 8 + 2], 0xAA, "padding must stay untouched");
        }
    }
}

#[test]
fn element_counts_follow_the_basic_elements() {
    let d = predefined(c::MPI_DOUBLE_INT).unwrap();
    assert_eq!(d.elements_in(24), Some(4));
    assert_eq!(d.elements_in(20), Some(3));
    assert_eq!(d.elements_in(14), None);
    assert_eq!(d.bytes_for_elements(3), 20);
    let i = predefined(c::MPI_INT).unwrap();
    assert_eq!(i.elements_in(12), Some(3));
    assert_eq!(i.elements_in(13), None);
}
