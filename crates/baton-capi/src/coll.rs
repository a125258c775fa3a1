//! Blocking collectives over point-to-point messages on each communicator's collective context.
//!
//! These are simple, correct algorithms (binomial trees, rings, pairwise exchange) that the
//! foundation needs; the schedule engine with nonblocking and persistent forms and tuned,
//! locality-aware algorithms replaces them in the collectives work.

use crate::errors::guard;
use crate::p2p::{dtype, send_data, sink};
use crate::state::{lib, CommObj, Lib};
use baton_abi::consts as c;
use baton_core::datatype::Layout;
use baton_core::engine::{ReqId, SendData, Sink};
use baton_core::error::{MpiError, Result};
use baton_core::op::{self, Op};
use baton_core::runtime::{TAG_ALLTOALL, TAG_BCAST, TAG_GATHER, TAG_REDUCE, TAG_SCATTER};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

fn in_place(p: *const c_void) -> bool {
    p as usize == c::MPI_IN_PLACE
}

/// A buffer argument of a collective: address, element count and datatype, checked.
struct Buf {
    addr: usize,
    count: usize,
    lay: Arc<Layout>,
    dt: usize,
}

impl Buf {
    fn new(call: &str, what: &str, p: *const c_void, count: i64, dt: usize) -> Result<Buf> {
        let lay: Arc<Layout> = dtype(call, dt)?.clone();
        if count < 0 {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {what} count {count} is negative")));
        }
        crate::p2p::check_buf(call, p as usize, count as usize, &lay).map_err(|e| {
            if what.is_empty() {
                e
            } else {
                MpiError::new(e.class, format!("{} ({what} buffer)", e.msg))
            }
        })?;
        Ok(Buf { addr: p as usize, count: count as usize, lay, dt })
    }
    fn bytes(&self) -> usize {
        self.count * self.lay.size
    }
    /// Block `i` of a buffer holding several blocks of `count` elements.
    fn block(&self, i: usize) -> Buf {
        let off = i as isize * self.count as isize * self.lay.extent;
        Buf { addr: self.addr.wrapping_add_signed(off), count: self.count, lay: self.lay.clone(), dt: self.dt }
    }
    fn data(&self, call: &str) -> Result<SendData> {
        send_data(call, self.addr, self.count, &self.lay)
    }
    fn packed(&self, call: &str) -> Result<Vec<u8>> {
        Ok(match self.data(call)? {
            SendData::Packed(v) => v,
            d => d.bytes().to_vec(),
        })
    }
    fn sink(&self, call: &str) -> Result<Sink> {
        sink(call, self.addr, self.count, &self.lay)
    }
    fn unpack(&self, call: &str, bytes: &[u8]) -> Result<()> {
        self.sink(call)?.write(0, bytes);
        Ok(())
    }
}

fn comm<'a>(l: &'a Lib, call: &str, h: usize) -> Result<crate::state::CommRef<'a>> {
    l.comm(call, h)
}

fn check_root(call: &str, cm: &CommObj, root: c_int) -> Result<()> {
    let n = cm.core.size();
    if !(0..n).contains(&root) {
        return Err(MpiError::new(
            c::MPI_ERR_ROOT,
            format!("{call}: root {root} is out of range for a communicator of size {n}"),
        ));
    }
    Ok(())
}

fn op_of(call: &str, h: usize, b: &Buf) -> Result<Op> {
    if h == c::MPI_OP_NULL {
        return Err(MpiError::new(c::MPI_ERR_OP, format!("{call}: op is MPI_OP_NULL")));
    }
    let o = Op::from_handle(h)
        .ok_or_else(|| MpiError::new(c::MPI_ERR_OP, format!("{call}: op {h:#x} is not a valid operation handle")))?;
    op::check(call, o, b.dt, b.lay.name)?;
    Ok(o)
}

fn same_size(call: &str, got: usize, want: usize, who: c_int) -> Result<()> {
    if got != want {
        return Err(MpiError::new(
            c::MPI_ERR_TRUNCATE,
            format!("{call}: rank {who} sent {got} bytes where {want} were expected (type signatures differ)"),
        ));
    }
    Ok(())
}

fn wait_all(l: &Lib, ids: Vec<ReqId>) {
    for id in ids {
        l.mpi.wait(id);
    }
}

/// Binomial-tree broadcast of packed bytes from `root`; every rank returns the bytes.
fn bcast_bytes(l: &Lib, cm: &CommObj, root: c_int, mut bytes: Vec<u8>) -> Vec<u8> {
    let n = cm.core.size();
    let me = cm.core.rank;
    let vr = (me - root + n) % n;
    let real = |v: c_int| (v + root) % n;
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            bytes = l.mpi.recv_internal(&cm.core, real(vr - mask), TAG_BCAST);
            break;
        }
        mask <<= 1;
    }
    let mut sends = Vec::new();
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            sends.push(l.mpi.isend_internal(&cm.core, real(vr + mask), TAG_BCAST, bytes.clone()));
        }
        mask >>= 1;
    }
    wait_all(l, sends);
    bytes
}

/// Buffers the collectives reuse: a large buffer freshly allocated is fresh pages, and touching
/// a megabyte of fresh pages costs more than reducing it.
static POOL: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

fn take_buf(n: usize) -> Vec<u8> {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let mut v = match pool.iter().position(|b| b.capacity() >= n) {
        Some(i) => pool.swap_remove(i),
        None => pool.pop().unwrap_or_default(),
    };
    v.clear();
    v.resize(n, 0);
    v
}

fn give_buf(v: Vec<u8>) {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if pool.len() < 4 {
        pool.push(v);
    }
}

/// Binomial-tree reduction of `sb` to `root`, which gets the result (the others get None).
/// Leaves send straight from the application's buffer; inner ranks combine in pooled buffers.
fn reduce_to(l: &Lib, cm: &CommObj, root: c_int, o: Op, sb: &Buf, call: &str) -> Result<Option<Vec<u8>>> {
    let n = cm.core.size();
    let vr = (cm.core.rank - root + n) % n;
    let real = |v: c_int| (v + root) % n;
    // Children are vr|mask for masks below vr's lowest set bit (every mask for the root).
    let low = if vr == 0 { (n as u32).next_power_of_two() as c_int } else { vr & -vr };
    let has_children = (0..31).map(|b| 1 << b).take_while(|&m| m < low).any(|m| vr | m < n && vr & m == 0);
    if !has_children {
        if vr != 0 {
            let s = l.mpi.coll_isend(&cm.core, real(vr - low), TAG_REDUCE, sb.data(call)?);
            l.mpi.wait(s);
            return Ok(None);
        }
        return Ok(Some(sb.packed(call)?));
    }
    let mut acc = take_buf(sb.bytes());
    acc.copy_from_slice(sb.data(call)?.bytes());
    let mut scratch = Some(take_buf(sb.bytes()));
    let mut mask = 1;
    while mask < n {
        if vr & mask == 0 {
            let child = vr | mask;
            if child < n {
                let buf = scratch.take().unwrap_or_else(|| take_buf(acc.len()));
                let id = l.mpi.coll_irecv(&cm.core, real(child), TAG_REDUCE, Sink::Owned(buf));
                let (st, part) = l.mpi.wait_pending(id);
                let part = part.unwrap_or_default();
                same_size(call, st.bytes as usize + (st.error != 0) as usize, acc.len(), real(child))?;
                op::apply(o, sb.dt, &part, &mut acc);
                scratch = Some(part);
            }
        } else {
            let s = l.mpi.isend_internal(&cm.core, real(vr & !mask), TAG_REDUCE, acc);
            l.mpi.wait(s);
            if let Some(b) = scratch {
                give_buf(b);
            }
            return Ok(None);
        }
        mask <<= 1;
    }
    if let Some(b) = scratch {
        give_buf(b);
    }
    Ok(Some(acc))
}

/// Binomial-tree broadcast straight between application buffers: each rank receives into its
/// own buffer and forwards from it, so a large message costs one single-copy read per hop.
fn bcast_buf(l: &Lib, cm: &CommObj, root: c_int, b: &Buf, call: &str) -> Result<()> {
    let n = cm.core.size();
    if n == 1 {
        return Ok(());
    }
    let vr = (cm.core.rank - root + n) % n;
    let real = |v: c_int| (v + root) % n;
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            let id = l.mpi.coll_irecv(&cm.core, real(vr - mask), TAG_BCAST, b.sink(call)?);
            let s = l.mpi.wait_pending(id).0;
            if s.error != 0 || s.bytes as usize != b.bytes() {
                same_size(call, s.bytes as usize + (s.error != 0) as usize, b.bytes(), root)?;
            }
            break;
        }
        mask <<= 1;
    }
    let mut sends = Vec::new();
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            sends.push(l.mpi.coll_isend(&cm.core, real(vr + mask), TAG_BCAST, b.data(call)?));
        }
        mask >>= 1;
    }
    wait_all(l, sends);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Bcast(buf: *mut c_void, count: c_int, dt: usize, root: c_int, comm_h: usize) -> c_int {
    bcast(buf, count as i64, dt, root, comm_h)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Bcast_c(buf: *mut c_void, count: i64, dt: usize, root: c_int, comm_h: usize) -> c_int {
    bcast(buf, count, dt, root, comm_h)
}

fn bcast(buf: *mut c_void, count: i64, dt: usize, root: c_int, comm_h: usize) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Bcast";
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        check_root(call, &cm, root)?;
        let b = Buf::new(call, "", buf, count, dt)?;
        bcast_buf(l, &cm, root, &b, call)
    })
}

fn reduce(
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    oph: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Reduce";
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        check_root(call, &cm, root)?;
        let me = cm.core.rank;
        let is_root = me == root;
        if in_place(sbuf) && !is_root {
            return Err(MpiError::new(c::MPI_ERR_BUFFER, format!("{call}: MPI_IN_PLACE is only valid at the root")));
        }
        let rb = Buf::new(
            call,
            "receive",
            if is_root { rbuf } else { std::ptr::null_mut() },
            if is_root { count } else { 0 },
            dt,
        )?;
        let sb = if in_place(sbuf) {
            Buf::new(call, "receive", rbuf, count, dt)?
        } else {
            Buf::new(call, "send", sbuf, count, dt)?
        };
        let o = op_of(call, oph, &sb)?;
        if let Some(acc) = reduce_to(l, &cm, root, o, &sb, call)? {
            rb.unpack(call, &acc)?;
            give_buf(acc);
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: c_int,
    dt: usize,
    op: usize,
    root: c_int,
    comm: usize,
) -> c_int {
    reduce(sbuf, rbuf, count as i64, dt, op, root, comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_c(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    op: usize,
    root: c_int,
    comm: usize,
) -> c_int {
    reduce(sbuf, rbuf, count, dt, op, root, comm)
}

fn allreduce(sbuf: *const c_void, rbuf: *mut c_void, count: i64, dt: usize, oph: usize, comm_h: usize) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Allreduce";
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        let rb = Buf::new(call, "receive", rbuf, count, dt)?;
        let sb = if in_place(sbuf) {
            Buf::new(call, "receive", rbuf, count, dt)?
        } else {
            Buf::new(call, "send", sbuf, count, dt)?
        };
        let o = op_of(call, oph, &sb)?;
        if let Some(acc) = reduce_to(l, &cm, 0, o, &sb, call)? {
            rb.unpack(call, &acc)?;
            give_buf(acc);
        }
        bcast_buf(l, &cm, 0, &rb, call)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allreduce(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: c_int,
    dt: usize,
    op: usize,
    comm: usize,
) -> c_int {
    allreduce(sbuf, rbuf, count as i64, dt, op, comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allreduce_c(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    op: usize,
    comm: usize,
) -> c_int {
    allreduce(sbuf, rbuf, count, dt, op, comm)
}

fn gather(
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Gather";
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        check_root(call, &cm, root)?;
        let (n, me) = (cm.core.size(), cm.core.rank);
        if me != root {
            if in_place(sbuf) {
                return Err(MpiError::new(
                    c::MPI_ERR_BUFFER,
                    format!("{call}: MPI_IN_PLACE is only valid at the root"),
                ));
            }
            let sb = Buf::new(call, "send", sbuf, sc, st)?;
            let s = l.mpi.coll_isend(&cm.core, root, TAG_GATHER, sb.data(call)?);
            l.mpi.wait(s);
            return Ok(());
        }
        let rb = Buf::new(call, "receive", rbuf, rc, rt)?;
        let mut ids = Vec::new();
        for i in (0..n).filter(|&i| i != me) {
            ids.push((i, l.mpi.coll_irecv(&cm.core, i, TAG_GATHER, rb.block(i as usize).sink(call)?)));
        }
        if !in_place(sbuf) {
            let sb = Buf::new(call, "send", sbuf, sc, st)?;
            same_size(call, sb.bytes(), rb.bytes(), me)?;
            rb.block(me as usize).unpack(call, &sb.packed(call)?)?;
        }
        for (i, id) in ids {
            let (s, _) = l.mpi.wait(id);
            if s.error != 0 {
                same_size(call, usize::MAX, rb.bytes(), i)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Gather(
    sbuf: *mut c_void,
    sc: c_int,
    st: usize,
    rbuf: *mut c_void,
    rc: c_int,
    rt: usize,
    root: c_int,
    comm: usize,
) -> c_int {
    gather(sbuf, sc as i64, st, rbuf, rc as i64, rt, root, comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Gather_c(
    sbuf: *mut c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm: usize,
) -> c_int {
    gather(sbuf, sc, st, rbuf, rc, rt, root, comm)
}

fn scatter(
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    let block = |call: &str, i: c_int| Ok(Buf::new(call, "send", sbuf, sc, st)?.block(i as usize));
    scatter_blocks("MPI_Scatter", &block, rbuf, rc, rt, root, comm_h)
}

/// The root sends block `i` (given by `block`, asked for at the root only) to rank `i`; every
/// rank receives its own into `rbuf` (untouched at the root with `MPI_IN_PLACE`).
fn scatter_blocks(
    call: &str,
    block: &dyn Fn(&str, c_int) -> Result<Buf>,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        check_root(call, &cm, root)?;
        let (n, me) = (cm.core.size(), cm.core.rank);
        if me != root {
            let rb = Buf::new(call, "receive", rbuf, rc, rt)?;
            let id = l.mpi.coll_irecv(&cm.core, root, TAG_SCATTER, rb.sink(call)?);
            if l.mpi.wait(id).0.error != 0 {
                same_size(call, usize::MAX, rb.bytes(), root)?;
            }
            return Ok(());
        }
        let mut ids = Vec::new();
        for i in (0..n).filter(|&i| i != me) {
            ids.push(l.mpi.coll_isend(&cm.core, i, TAG_SCATTER, block(call, i)?.data(call)?));
        }
        if !in_place(rbuf) {
            let own = block(call, me)?;
            let rb = Buf::new(call, "receive", rbuf, rc, rt)?;
            same_size(call, own.bytes(), rb.bytes(), me)?;
            rb.unpack(call, &own.packed(call)?)?;
        }
        wait_all(l, ids);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scatter(
    sbuf: *mut c_void,
    sc: c_int,
    st: usize,
    rbuf: *mut c_void,
    rc: c_int,
    rt: usize,
    root: c_int,
    comm: usize,
) -> c_int {
    scatter(sbuf, sc as i64, st, rbuf, rc as i64, rt, root, comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scatter_c(
    sbuf: *mut c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm: usize,
) -> c_int {
    scatter(sbuf, sc, st, rbuf, rc, rt, root, comm)
}

fn allgather(sbuf: *const c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm_h: usize) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Allgather";
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        let me = cm.core.rank as usize;
        let rb = Buf::new(call, "receive", rbuf, rc, rt)?;
        let mine = if in_place(sbuf) {
            rb.block(me).packed(call)?
        } else {
            Buf::new(call, "send", sbuf, sc, st)?.packed(call)?
        };
        let all = l.mpi.allgather(&cm.core, mine);
        for (i, part) in all.iter().enumerate() {
            same_size(call, part.len(), rb.bytes(), i as c_int)?;
            if i != me || !in_place(sbuf) {
                rb.block(i).unpack(call, part)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allgather(
    sbuf: *mut c_void,
    sc: c_int,
    st: usize,
    rbuf: *mut c_void,
    rc: c_int,
    rt: usize,
    comm: usize,
) -> c_int {
    allgather(sbuf, sc as i64, st, rbuf, rc as i64, rt, comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allgather_c(
    sbuf: *mut c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    comm: usize,
) -> c_int {
    allgather(sbuf, sc, st, rbuf, rc, rt, comm)
}

fn alltoall(sbuf: *const c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm_h: usize) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Alltoall";
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        let (n, me) = (cm.core.size(), cm.core.rank);
        let rb = Buf::new(call, "receive", rbuf, rc, rt)?;
        // In place: send from a copy of the receive buffer.
        let copy;
        let sb = if in_place(sbuf) {
            copy = Buf::new(call, "receive", rbuf, rc * n as i64, rt)?.packed(call)?;
            None
        } else {
            copy = Vec::new();
            Some(Buf::new(call, "send", sbuf, sc, st)?)
        };
        let block_bytes = |i: c_int| -> Result<Vec<u8>> {
            match &sb {
                Some(b) => b.block(i as usize).packed(call),
                None => Ok(copy[i as usize * rb.bytes()..(i as usize + 1) * rb.bytes()].to_vec()),
            }
        };
        let mut recvs = Vec::new();
        let mut sends = Vec::new();
        for k in 1..n {
            let (to, from) = ((me + k) % n, (me - k + n) % n);
            recvs.push((from, l.mpi.coll_irecv(&cm.core, from, TAG_ALLTOALL, rb.block(from as usize).sink(call)?)));
            sends.push(l.mpi.coll_isend(&cm.core, to, TAG_ALLTOALL, SendData::Packed(block_bytes(to)?)));
        }
        let own = block_bytes(me)?;
        same_size(call, own.len(), rb.bytes(), me)?;
        rb.block(me as usize).unpack(call, &own)?;
        wait_all(l, sends);
        for (from, id) in recvs {
            if l.mpi.wait(id).0.error != 0 {
                same_size(call, usize::MAX, rb.bytes(), from)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alltoall(
    sbuf: *mut c_void,
    sc: c_int,
    st: usize,
    rbuf: *mut c_void,
    rc: c_int,
    rt: usize,
    comm: usize,
) -> c_int {
    alltoall(sbuf, sc as i64, st, rbuf, rc as i64, rt, comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alltoall_c(
    sbuf: *mut c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    comm: usize,
) -> c_int {
    alltoall(sbuf, sc, st, rbuf, rc, rt, comm)
}

fn reduce_local(sbuf: *mut c_void, rbuf: *mut c_void, count: i64, dt: usize, oph: usize) -> c_int {
    guard(c::MPI_COMM_WORLD, || {
        let call = "MPI_Reduce_local";
        let sb = Buf::new(call, "in", sbuf, count, dt)?;
        let rb = Buf::new(call, "inout", rbuf, count, dt)?;
        let o = op_of(call, oph, &sb)?;
        let mut acc = rb.packed(call)?;
        op::apply(o, dt, &sb.packed(call)?, &mut acc);
        rb.unpack(call, &acc)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_local(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: c_int,
    dt: usize,
    op: usize,
) -> c_int {
    reduce_local(sbuf, rbuf, count as i64, dt, op)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_local_c(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    op: usize,
) -> c_int {
    reduce_local(sbuf, rbuf, count, dt, op)
}

// ----- vector variants, reduce-scatter, scans -----

unsafe fn counts<'a, T: Copy>(call: &str, what: &str, p: *const T, n: usize) -> Result<&'a [T]> {
    crate::nonnull(call, what, p)?;
    // SAFETY: the standard makes these arrays hold one entry per process of the communicator.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Block `i` of a vector argument: `count` elements at displacement `disp` (in extents).
fn vblock(call: &str, base: *const c_void, count: i64, disp: i64, dt: usize) -> Result<Buf> {
    let lay: Arc<Layout> = dtype(call, dt)?.clone();
    let addr = (base as usize).wrapping_add_signed(disp as isize * lay.extent);
    Buf::new(call, "", if count > 0 { addr as *const c_void } else { base }, count, dt)
}

fn alltoallv_impl(
    call: &str,
    sbuf: *const c_void,
    sc: &dyn Fn(usize) -> (i64, i64),
    st: usize,
    rbuf: *mut c_void,
    rc: &dyn Fn(usize) -> (i64, i64),
    rt: usize,
    cm: &CommObj,
    l: &Lib,
) -> Result<()> {
    let (n, me) = (cm.core.size(), cm.core.rank);
    let inplace = in_place(sbuf);
    // In place: every outgoing block is first copied out of the receive buffer.
    let out_block = |i: usize| -> Result<Vec<u8>> {
        if inplace {
            let (c, d) = rc(i);
            vblock(call, rbuf, c, d, rt)?.packed(call)
        } else {
            let (c, d) = sc(i);
            vblock(call, sbuf, c, d, st)?.packed(call)
        }
    };
    let outgoing: Vec<Vec<u8>> = (0..n as usize).map(out_block).collect::<Result<_>>()?;
    let mut recvs = Vec::new();
    let mut sends = Vec::new();
    for k in 1..n {
        let (to, from) = ((me + k) % n, (me - k + n) % n);
        let (c, d) = rc(from as usize);
        let rb = vblock(call, rbuf, c, d, rt)?;
        recvs.push((from, rb.bytes(), l.mpi.coll_irecv(&cm.core, from, TAG_ALLTOALL, rb.sink(call)?)));
        sends.push(l.mpi.coll_isend(&cm.core, to, TAG_ALLTOALL, SendData::Packed(outgoing[to as usize].clone())));
    }
    let (c, d) = rc(me as usize);
    let own = vblock(call, rbuf, c, d, rt)?;
    same_size(call, outgoing[me as usize].len(), own.bytes(), me)?;
    own.unpack(call, &outgoing[me as usize])?;
    wait_all(l, sends);
    for (from, want, id) in recvs {
        let s = l.mpi.wait(id).0;
        if s.error != 0 || s.bytes as usize != want {
            same_size(call, s.bytes as usize + (s.error != 0) as usize, want, from)?;
        }
    }
    Ok(())
}

fn alltoallv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    sbuf: *const c_void,
    scounts: *const C,
    sdispls: *const D,
    st: usize,
    rbuf: *mut c_void,
    rcounts: *const C,
    rdispls: *const D,
    rt: usize,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Alltoallv";
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        let n = cm.core.size() as usize;
        // SAFETY: arrays of n entries per the standard.
        let (rcs, rds) = unsafe { (counts(call, "recvcounts", rcounts, n)?, counts(call, "rdispls", rdispls, n)?) };
        let (scs, sds) = if in_place(sbuf) {
            (rcs, rds)
        } else {
            // SAFETY: as above.
            unsafe { (counts(call, "sendcounts", scounts, n)?, counts(call, "sdispls", sdispls, n)?) }
        };
        alltoallv_impl(
            call,
            sbuf,
            &|i| (scs[i].into(), sds[i].into()),
            st,
            rbuf,
            &|i| (rcs[i].into(), rds[i].into()),
            rt,
            &cm,
            l,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alltoallv(
    sbuf: *mut c_void,
    sc: *mut c_int,
    sd: *mut c_int,
    st: usize,
    rbuf: *mut c_void,
    rc: *mut c_int,
    rd: *mut c_int,
    rt: usize,
    comm: usize,
) -> c_int {
    alltoallv(sbuf, sc, sd, st, rbuf, rc, rd, rt, comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Alltoallv_c(
    sbuf: *mut c_void,
    sc: *mut i64,
    sd: *mut isize,
    st: usize,
    rbuf: *mut c_void,
    rc: *mut i64,
    rd: *mut isize,
    rt: usize,
    comm: usize,
) -> c_int {
    alltoallv(sbuf, sc, sd as *const i64, st, rbuf, rc, rd as *const i64, rt, comm)
}

/// Gatherv / Allgatherv: every block lands at its displacement; `root == None` means all.
fn gatherv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    call: &'static str,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rcounts: *const C,
    displs: *const D,
    rt: usize,
    root: Option<c_int>,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        let (n, me) = (cm.core.size(), cm.core.rank);
        if let Some(r) = root {
            check_root(call, &cm, r)?;
        }
        let receiver = root.is_none_or(|r| r == me);
        let mine = if in_place(sbuf) {
            if !receiver {
                return Err(MpiError::new(
                    c::MPI_ERR_BUFFER,
                    format!("{call}: MPI_IN_PLACE is only valid at the root"),
                ));
            }
            None
        } else {
            Some(Buf::new(call, "send", sbuf, sc, st)?.packed(call)?)
        };
        let all = match root {
            Some(r) => {
                if me != r {
                    let s = l.mpi.isend_internal(&cm.core, r, TAG_GATHER, mine.unwrap_or_default());
                    l.mpi.wait(s);
                    return Ok(());
                }
                let mut all: Vec<Option<Vec<u8>>> = (0..n).map(|_| None).collect();
                for i in (0..n).filter(|&i| i != me) {
                    all[i as usize] = Some(l.mpi.recv_internal(&cm.core, i, TAG_GATHER));
                }
                all[me as usize] = mine;
                all
            }
            None => {
                let own = match &mine {
                    Some(v) => v.clone(),
                    None => {
                        // SAFETY: arrays of n entries per the standard.
                        let (c, d) = unsafe {
                            (
                                counts(call, "recvcounts", rcounts, n as usize)?,
                                counts(call, "displs", displs, n as usize)?,
                            )
                        };
                        vblock(call, rbuf, c[me as usize].into(), d[me as usize].into(), rt)?.packed(call)?
                    }
                };
                let mut all: Vec<Option<Vec<u8>>> = l.mpi.allgather(&cm.core, own).into_iter().map(Some).collect();
                if mine.is_none() {
                    all[me as usize] = None;
                }
                all
            }
        };
        // SAFETY: arrays of n entries per the standard (significant at receivers).
        let (c, d) =
            unsafe { (counts(call, "recvcounts", rcounts, n as usize)?, counts(call, "displs", displs, n as usize)?) };
        for (i, part) in all.iter().enumerate() {
            if let Some(p) = part {
                let b = vblock(call, rbuf, c[i].into(), d[i].into(), rt)?;
                same_size(call, p.len(), b.bytes(), i as c_int)?;
                b.unpack(call, p)?;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Gatherv(
    sbuf: *mut c_void,
    sc: c_int,
    st: usize,
    rbuf: *mut c_void,
    rc: *mut c_int,
    d: *mut c_int,
    rt: usize,
    root: c_int,
    comm: usize,
) -> c_int {
    gatherv("MPI_Gatherv", sbuf, sc as i64, st, rbuf, rc, d, rt, Some(root), comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allgatherv(
    sbuf: *mut c_void,
    sc: c_int,
    st: usize,
    rbuf: *mut c_void,
    rc: *mut c_int,
    d: *mut c_int,
    rt: usize,
    comm: usize,
) -> c_int {
    gatherv("MPI_Allgatherv", sbuf, sc as i64, st, rbuf, rc, d, rt, None, comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scatterv(
    sbuf: *mut c_void,
    scounts: *mut c_int,
    displs: *mut c_int,
    st: usize,
    rbuf: *mut c_void,
    rc: c_int,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    scatterv(sbuf, scounts, displs, st, rbuf, rc as i64, rt, root, comm_h)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scatterv_c(
    sbuf: *mut c_void,
    scounts: *mut i64,
    displs: *mut isize,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    scatterv(sbuf, scounts, displs as *const i64, st, rbuf, rc, rt, root, comm_h)
}

fn scatterv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    sbuf: *const c_void,
    scounts: *const C,
    displs: *const D,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    let block = |call: &str, i: c_int| {
        let n = lib(call)?.comm(call, comm_h)?.core.size() as usize;
        // SAFETY: arrays of one entry per process, significant at the root (where this runs).
        let (c, d) = unsafe { (counts(call, "sendcounts", scounts, n)?, counts(call, "displs", displs, n)?) };
        vblock(call, sbuf, c[i as usize].into(), d[i as usize].into(), st)
    };
    scatter_blocks("MPI_Scatterv", &block, rbuf, rc, rt, root, comm_h)
}

/// Reduce to rank 0 then scatter the blocks (`counts[i]` elements each).
fn reduce_scatter(
    call: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    cnts: &[i64],
    dt: usize,
    oph: usize,
    comm_h: usize,
) -> Result<()> {
    let l = lib(call)?;
    let cm = comm(l, call, comm_h)?;
    let me = cm.core.rank as usize;
    let total: i64 = cnts.iter().sum();
    let sb = if in_place(sbuf) {
        Buf::new(call, "receive", rbuf, total, dt)?
    } else {
        Buf::new(call, "send", sbuf, total, dt)?
    };
    let o = op_of(call, oph, &sb)?;
    let acc = reduce_to(l, &cm, 0, o, &sb, call)?.unwrap_or_default();
    let all = bcast_bytes(l, &cm, 0, acc);
    let size = sb.lay.size;
    let start: i64 = cnts[..me].iter().sum();
    let piece = &all[start as usize * size..(start + cnts[me]) as usize * size];
    Buf::new(call, "receive", rbuf, cnts[me], dt)?.unpack(call, piece)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter_block_c(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    rc: i64,
    dt: usize,
    op: usize,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Reduce_scatter_block_c";
        let n = lib(call)?.comm(call, comm_h)?.core.size() as usize;
        if rc < 0 {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: recvcount {rc} is negative")));
        }
        reduce_scatter(call, sbuf, rbuf, &vec![rc; n], dt, op, comm_h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter_c(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    rc: *mut i64,
    dt: usize,
    op: usize,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Reduce_scatter_c";
        let n = lib(call)?.comm(call, comm_h)?.core.size() as usize;
        // SAFETY: n entries per the standard.
        let cnt: Vec<i64> = unsafe { counts(call, "recvcounts", rc, n)? }.to_vec();
        if let Some(bad) = cnt.iter().find(|&&x| x < 0) {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: a recvcount is negative ({bad})")));
        }
        reduce_scatter(call, sbuf, rbuf, &cnt, dt, op, comm_h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter_block(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    rc: c_int,
    dt: usize,
    op: usize,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Reduce_scatter_block";
        let n = lib(call)?.comm(call, comm_h)?.core.size() as usize;
        if rc < 0 {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: recvcount {rc} is negative")));
        }
        reduce_scatter(call, sbuf, rbuf, &vec![rc as i64; n], dt, op, comm_h)
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Reduce_scatter(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    rc: *mut c_int,
    dt: usize,
    op: usize,
    comm_h: usize,
) -> c_int {
    guard(comm_h, || {
        let call = "MPI_Reduce_scatter";
        let n = lib(call)?.comm(call, comm_h)?.core.size() as usize;
        // SAFETY: n entries per the standard.
        let c: Vec<i64> = unsafe { counts(call, "recvcounts", rc, n)? }.iter().map(|&x| x as i64).collect();
        if let Some(bad) = c.iter().find(|&&x| x < 0) {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: a recvcount is negative ({bad})")));
        }
        reduce_scatter(call, sbuf, rbuf, &c, dt, op, comm_h)
    })
}

/// Inclusive (`exclusive == false`) or exclusive prefix reduction, in rank order along a chain.
fn scan(
    call: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    oph: usize,
    comm_h: usize,
    exclusive: bool,
) -> c_int {
    guard(comm_h, || {
        let l = lib(call)?;
        let cm = comm(l, call, comm_h)?;
        let (n, me) = (cm.core.size(), cm.core.rank);
        let rb = Buf::new(call, "receive", rbuf, count, dt)?;
        let sb = if in_place(sbuf) {
            Buf::new(call, "receive", rbuf, count, dt)?
        } else {
            Buf::new(call, "send", sbuf, count, dt)?
        };
        let o = op_of(call, oph, &sb)?;
        let mine = sb.packed(call)?;
        // prefix = op over ranks 0..me-1, received from the left neighbour.
        let prefix = if me > 0 { Some(l.mpi.recv_internal(&cm.core, me - 1, TAG_REDUCE)) } else { None };
        let mut incl = mine.clone();
        if let Some(p) = &prefix {
            same_size(call, p.len(), incl.len(), me - 1)?;
            op::apply(o, dt, p, &mut incl);
        }
        if me + 1 < n {
            let s = l.mpi.isend_internal(&cm.core, me + 1, TAG_REDUCE, incl.clone());
            l.mpi.wait(s);
        }
        if exclusive {
            if let Some(p) = prefix {
                rb.unpack(call, &p)?;
            }
        } else {
            rb.unpack(call, &incl)?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scan(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: c_int,
    dt: usize,
    op: usize,
    comm: usize,
) -> c_int {
    scan("MPI_Scan", sbuf, rbuf, count as i64, dt, op, comm, false)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Exscan(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: c_int,
    dt: usize,
    op: usize,
    comm: usize,
) -> c_int {
    scan("MPI_Exscan", sbuf, rbuf, count as i64, dt, op, comm, true)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Scan_c(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    op: usize,
    comm: usize,
) -> c_int {
    scan("MPI_Scan_c", sbuf, rbuf, count, dt, op, comm, false)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Exscan_c(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: usize,
    op: usize,
    comm: usize,
) -> c_int {
    scan("MPI_Exscan_c", sbuf, rbuf, count, dt, op, comm, true)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Gatherv_c(
    sbuf: *mut c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: *mut i64,
    d: *mut isize,
    rt: usize,
    root: c_int,
    comm: usize,
) -> c_int {
    gatherv("MPI_Gatherv_c", sbuf, sc, st, rbuf, rc, d as *const i64, rt, Some(root), comm)
}

#[no_mangle]
pub unsafe extern "C" fn PMPI_Allgatherv_c(
    sbuf: *mut c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: *mut i64,
    d: *mut isize,
    rt: usize,
    comm: usize,
) -> c_int {
    gatherv("MPI_Allgatherv_c", sbuf, sc, st, rbuf, rc, d as *const i64, rt, None, comm)
}
