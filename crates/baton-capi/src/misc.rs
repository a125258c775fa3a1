//! Small functions: handle conversion, clocks, address arithmetic, memory allocation, profiling
//! control. Those returning an error code are generated (`abi/bindings.tsv`).

use crate::state::Lib;
use crate::validate::{Call, Out};
use baton_abi::consts as c;
use baton_core::error::{MpiError, Result};
use std::ffi::{c_int, c_void};
use std::sync::OnceLock;
use std::time::Instant;

// Handles are below 2^31 by construction (see `handles`), so conversion to `int` is exact.
macro_rules! int_conv {
    ($to:ident, $from:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $to(h: usize) -> c_int {
            h as c_int
        }
        #[no_mangle]
        pub unsafe extern "C" fn $from(i: c_int) -> usize {
            i as u32 as usize
        }
    };
}

int_conv!(PMPI_Comm_toint, PMPI_Comm_fromint);
int_conv!(PMPI_Errhandler_toint, PMPI_Errhandler_fromint);
int_conv!(PMPI_File_toint, PMPI_File_fromint);
int_conv!(PMPI_Group_toint, PMPI_Group_fromint);
int_conv!(PMPI_Info_toint, PMPI_Info_fromint);
int_conv!(PMPI_Message_toint, PMPI_Message_fromint);
int_conv!(PMPI_Op_toint, PMPI_Op_fromint);
int_conv!(PMPI_Request_toint, PMPI_Request_fromint);
int_conv!(PMPI_Session_toint, PMPI_Session_fromint);
int_conv!(PMPI_Type_toint, PMPI_Type_fromint);
int_conv!(PMPI_Win_toint, PMPI_Win_fromint);

fn epoch() -> &'static Instant {
    static E: OnceLock<Instant> = OnceLock::new();
    E.get_or_init(Instant::now)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Wtime() -> f64 {
    epoch().elapsed().as_secs_f64()
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Wtick() -> f64 {
    1e-9
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Aint_diff(a: isize, b: isize) -> isize {
    a.wrapping_sub(b)
}

#[inline]
pub(crate) fn get_address(_cx: Call, location: *mut c_void, address: Out<isize>) -> Result<()> {
    address.put(location as isize);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Pcontrol(_level: c_int) -> c_int {
    // Profiling control has no effect without a profiling tool (tools intercept MPI_Pcontrol).
    c::MPI_SUCCESS
}

pub(crate) fn alloc_mem(cx: Call, _l: &Lib, size: isize, _info: usize, baseptr: *mut c_void) -> Result<()> {
    if size < 0 {
        return Err(MpiError::new(c::MPI_ERR_SIZE, format!("{}: size {size} is negative", cx.name)));
    }
    // Large allocations in memory peers on this host can map (a window created over it is then
    // reached by loads, stores and atomics, see baton_core::rma::direct).
    if let Some(b) = baton_core::rma::direct::alloc_mem(size as usize) {
        // SAFETY: `baseptr` is really a `void **` (standard C binding), checked non-null by its role.
        unsafe { *(baseptr as *mut *mut c_void) = b.addr() as *mut c_void };
        return Ok(());
    }
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: plain allocation; 64-byte alignment suits every datatype and the transports.
    let rc = unsafe { libc::posix_memalign(&mut p, 64, size.max(1) as usize) };
    if rc != 0 {
        return Err(MpiError::new(c::MPI_ERR_NO_MEM, format!("{}: cannot allocate {size} bytes", cx.name)));
    }
    // SAFETY: `baseptr` is really a `void **` (standard C binding), checked non-null by its role.
    unsafe { *(baseptr as *mut *mut c_void) = p };
    Ok(())
}

pub(crate) fn free_mem(_cx: Call, _l: &Lib, base: *mut c_void) -> Result<()> {
    if baton_core::rma::direct::free_mem(base as usize) {
        return Ok(());
    }
    // SAFETY: `base` came from MPI_Alloc_mem (posix_memalign) or is NULL.
    unsafe { libc::free(base) };
    Ok(())
}
