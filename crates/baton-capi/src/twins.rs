//! The `int` and `_c` twins of the point-to-point and completion calls that the generator
//! (`abi/bindings.tsv`) does not produce yet: one macro writes both entry points over one
//! function of 64-bit counts, and [`CountOut`] is a count written back in either width.

use baton_abi::consts as c;
use std::ffi::c_int;

/// The `int` and `_c` entry points of one call, which differ only in the width of their counts
/// (marked `Count`: `int`, or `MPI_Count` in the `_c` one; `CountPtr`: where one is written
/// back): both forward to one function over 64-bit counts, with the extra arguments after `;`.
/// Types of more than one token are parenthesized.
macro_rules! twins {
    ($int:ident, $big:ident => $imp:ident($($a:ident: $t:tt),* $(; $($x:expr),*)?)) => {
        #[no_mangle]
        pub unsafe extern "C" fn $int($($a: $crate::twins::twin_ty!(int $t)),*) -> c_int {
            $imp($($crate::twins::twin_arg!(int $a $t)),* $(, $($x),*)?)
        }
        #[no_mangle]
        pub unsafe extern "C" fn $big($($a: $crate::twins::twin_ty!(big $t)),*) -> c_int {
            $imp($($crate::twins::twin_arg!(big $a $t)),* $(, $($x),*)?)
        }
    };
}

/// An argument's type in the `int` or the `_c` (`big`) twin.
macro_rules! twin_ty {
    (int Count) => { c_int };
    (big Count) => { i64 };
    (int CountPtr) => { *mut c_int };
    (big CountPtr) => { *mut i64 };
    ($w:ident ($($t:tt)*)) => { $($t)* };
    ($w:ident $t:tt) => { $t };
}

/// An argument as the common function takes it.
macro_rules! twin_arg {
    ($w:ident $a:ident Count) => {
        $a as i64
    };
    (int $a:ident CountPtr) => {
        $crate::twins::CountOut::Int($a)
    };
    (big $a:ident CountPtr) => {
        $crate::twins::CountOut::Big($a)
    };
    ($w:ident $a:ident $t:tt) => {
        $a
    };
}

pub(crate) use {twin_arg, twin_ty, twins};

/// A count written back to the application: an `int` of the classic binding, or an
/// `MPI_Count` of the `_c` one.
#[derive(Clone, Copy)]
pub enum CountOut {
    Int(*mut c_int),
    Big(*mut i64),
}

impl CountOut {
    pub fn is_null(self) -> bool {
        match self {
            CountOut::Int(p) => p.is_null(),
            CountOut::Big(p) => p.is_null(),
        }
    }

    /// Writes `v`; an `int` gets `MPI_UNDEFINED` when `v` is beyond its range, as for any
    /// count the classic binding cannot hold.
    ///
    /// # Safety
    /// The pointer is non-null and the application's to write.
    pub unsafe fn put(self, v: i64) {
        // SAFETY: as the caller promises.
        unsafe {
            match self {
                CountOut::Int(p) => *p = c_int::try_from(v).unwrap_or(c::MPI_UNDEFINED),
                CountOut::Big(p) => *p = v,
            }
        }
    }
}
