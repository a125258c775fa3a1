//! Fortran `LOGICAL` values in reductions.
//!
//! Fortran compilers disagree on the bits of `.TRUE.` (gfortran: 1; classic Intel Fortran: -1,
//! all bits set), so the C library cannot know them; a Fortran layer registers them per
//! `LOGICAL` size with `MPI_Abi_set_fortran_booleans`, kept here ([`set_booleans`]). Until then
//! the logical operations on `MPI_LOGICALn` read any non-zero value as true and write 1, as on
//! C integers; once registered, a value is true unless it is the registered `.FALSE.`, and
//! results are the registered `.TRUE.` and `.FALSE.`.

use super::Op;
use std::sync::RwLock;

/// The registered (`.TRUE.`, `.FALSE.`) bytes, by log2 of the `LOGICAL` size (1 to 16 bytes).
type Booleans = (Vec<u8>, Vec<u8>);
static BOOLEANS: RwLock<[Option<Booleans>; 5]> = RwLock::new([None, None, None, None, None]);

/// The table index of a `LOGICAL` size, when it is a power of two up to 16.
pub fn size_index(size: usize) -> Option<usize> {
    (size.is_power_of_two() && size <= 16).then(|| size.trailing_zeros() as usize)
}

/// Registers the booleans of `size`-byte `LOGICAL`s; false when some were registered before
/// (the first registration stays) or `size` is not a `LOGICAL` size. `t` and `f` hold `size`
/// bytes each.
pub fn set_booleans(size: usize, t: &[u8], f: &[u8]) -> bool {
    let Some(i) = size_index(size) else { return false };
    let mut g = BOOLEANS.write().unwrap_or_else(|e| e.into_inner());
    if g[i].is_some() {
        return false;
    }
    g[i] = Some((t.to_vec(), f.to_vec()));
    true
}

/// The registered booleans of `size`-byte `LOGICAL`s, if any.
pub fn booleans(size: usize) -> Option<Booleans> {
    let i = size_index(size)?;
    BOOLEANS.read().unwrap_or_else(|e| e.into_inner())[i].clone()
}

/// `inout = input op inout` for a logical `op` over packed `size`-byte `LOGICAL`s, with the
/// registered booleans; false (nothing done) when none are registered for that size.
pub(super) fn logical(op: Op, size: usize, input: &[u8], inout: &mut [u8]) -> bool {
    let Some((t, f)) = booleans(size) else { return false };
    for (o, i) in inout.chunks_exact_mut(size).zip(input.chunks_exact(size)) {
        let (a, b) = (i != f.as_slice(), &*o != f.as_slice());
        let r = match op {
            Op::Land => a & b,
            Op::Lor => a | b,
            _ => a ^ b,
        };
        o.copy_from_slice(if r { &t } else { &f });
    }
    true
}
