//! Collectives whose data is personal to each pair of processes: gather, scatter, allgather,
//! alltoall and their `v`/`w` forms (blocking, nonblocking and persistent; `int` and `_c`).

#![allow(clippy::too_many_arguments)]

use super::*;

// ----- gather, scatter -----

/// Each buffer as a region of `s`, in order.
pub(crate) fn regions(s: &mut Schedule, bufs: &[Buf]) -> Vec<Loc> {
    bufs.iter().map(|b| b.region(s)).collect()
}

/// Gather and Gatherv (`v` = Some((counts, displs)), significant at the root).
#[allow(clippy::too_many_arguments)]
fn gather_any(
    mode: Mode,
    call: &'static str,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    v: Option<VSide>,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    launch(mode, call, comm_h, |_, cm| {
        if cm.core.is_inter() {
            let root = inter_root(call, cm, root)?;
            let n = cm.core.peer_size() as usize;
            let mut s;
            match root {
                Root::Me => {
                    no_in_place(call, cm, "send", sbuf)?;
                    let bufs = match &v {
                        Some(v) => v.bufs(call, "receive", rbuf)?,
                        None => vec![Buf::new(call, "receive", rbuf, times(call, "receive", rc, n)?, rt)?],
                    };
                    let b = if v.is_none() { Buf::new(call, "receive", rbuf, rc, rt)?.bytes() } else { 0 };
                    s = sched(cm, call);
                    let dst = match v {
                        Some(_) => regions(&mut s, &bufs),
                        None => blocks(bufs[0].region(&mut s), n, b),
                    };
                    inter::gather(&mut s, root, None, &dst);
                }
                Root::Idle => s = sched(cm, call),
                Root::Remote(_) => {
                    no_in_place(call, cm, "send", sbuf)?;
                    let sb = Buf::new(call, "send", sbuf, sc, st)?;
                    s = sched(cm, call);
                    let src = sb.region(&mut s);
                    inter::gather(&mut s, root, Some(src), &[]);
                }
            }
            return Ok(s);
        }
        check_root(call, cm, root)?;
        let (n, me) = (cm.core.size(), cm.core.rank);
        let is_root = me == root;
        if in_place(sbuf) && !is_root {
            return Err(in_place_at_root(call));
        }
        let sb = if in_place(sbuf) { None } else { Some(Buf::new(call, "send", sbuf, sc, st)?) };
        let block = if is_root && v.is_none() { Some(Buf::new(call, "receive", rbuf, rc, rt)?) } else { None };
        let b = match (&sb, &block) {
            (_, Some(rb)) => {
                if let Some(sb) = &sb {
                    same_size(call, sb.bytes(), rb.bytes())?;
                }
                rb.bytes()
            }
            (Some(sb), None) => sb.bytes(),
            (None, None) => 0,
        };
        let shape = Shape { n, bytes: b, uniform: v.is_none(), ..Default::default() };
        let a = algo::choose(Coll::Gather, shape)?;
        let whole = match (&v, is_root) {
            (None, true) => Some(Buf::new(call, "receive", rbuf, times(call, "receive", rc, n as usize)?, rt)?),
            _ => None,
        };
        let vbufs = match &v {
            Some(v) => v.bufs(call, "receive", rbuf)?,
            None => Vec::new(),
        };
        let mut s = sched(cm, call);
        let dst = match whole {
            Some(w) => blocks(w.region(&mut s), n as usize, b),
            None => regions(&mut s, &vbufs),
        };
        let src = sb.map(|x| x.region(&mut s));
        algo::gather(&mut s, a, root, src, &dst, b);
        Ok(s)
    })
}

#[allow(clippy::too_many_arguments)]
fn gather(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    gather_any(mode, "MPI_Gather", sbuf, sc, st, rbuf, rc, None, rt, root, comm_h)
}

coll_entry!(PMPI_Gather, PMPI_Igather, PMPI_Gather_init, gather,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc as i64, rt, root, comm));
coll_entry!(PMPI_Gather_c, PMPI_Igather_c, PMPI_Gather_init_c, gather,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc, st, rbuf, rc, rt, root, comm));

/// A rooted `v` collective's arrays, read at the root only, where they are significant
/// (elsewhere: no blocks).
unsafe fn root_side<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    call: &str,
    names: [&str; 2],
    comm_h: usize,
    root: c_int,
    counts: *const C,
    displs: *const D,
    dt: usize,
) -> Result<VSide> {
    let Some(core) = comm_core(comm_h) else { return Ok(VSide::default()) };
    // On an intercommunicator the root says MPI_ROOT, and the arrays cover the remote group.
    let (n, is_root) = if core.is_inter() {
        (core.peer_size() as usize, root == c::MPI_ROOT)
    } else {
        (core.size() as usize, core.rank == root)
    };
    if !is_root {
        return Ok(VSide::default());
    }
    // SAFETY: forwarded contract: one entry per process at the root.
    unsafe { VSide::read(call, [names[0], names[1], ""], counts, displs, (dt, std::ptr::null()), false, n) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn gatherv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rcounts: *const C,
    displs: *const D,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Gatherv";
    // SAFETY: forwarded array contracts.
    match unsafe { root_side(call, ["recvcounts", "displs"], comm_h, root, rcounts, displs, rt) } {
        Ok(v) => gather_any(mode, call, sbuf, sc, st, rbuf, 0, Some(v), rt, root, comm_h),
        Err(e) => guard(comm_h, || Err(e)),
    }
}

coll_entry!(PMPI_Gatherv, PMPI_Igatherv, PMPI_Gatherv_init, gatherv,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, d: *mut c_int, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc, d, rt, root, comm));
coll_entry!(PMPI_Gatherv_c, PMPI_Igatherv_c, PMPI_Gatherv_init_c, gatherv,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: *mut i64, d: *mut isize, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc, st, rbuf, rc, d as *const i64, rt, root, comm));

/// Scatter and Scatterv (`v` significant at the root).
#[allow(clippy::too_many_arguments)]
fn scatter_any(
    mode: Mode,
    call: &'static str,
    sbuf: *const c_void,
    sc: i64,
    v: Option<VSide>,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    launch(mode, call, comm_h, |_, cm| {
        if cm.core.is_inter() {
            let root = inter_root(call, cm, root)?;
            let n = cm.core.peer_size() as usize;
            let mut s;
            match root {
                Root::Me => {
                    no_in_place(call, cm, "receive", rbuf)?;
                    let bufs = match &v {
                        Some(v) => v.bufs(call, "send", sbuf)?,
                        None => vec![Buf::new(call, "send", sbuf, times(call, "send", sc, n)?, st)?],
                    };
                    let b = if v.is_none() { Buf::new(call, "send", sbuf, sc, st)?.bytes() } else { 0 };
                    s = sched(cm, call);
                    let src = match v {
                        Some(_) => regions(&mut s, &bufs),
                        None => blocks(bufs[0].region(&mut s), n, b),
                    };
                    inter::scatter(&mut s, root, &src, None);
                }
                Root::Idle => s = sched(cm, call),
                Root::Remote(_) => {
                    no_in_place(call, cm, "receive", rbuf)?;
                    let rb = Buf::new(call, "receive", rbuf, rc, rt)?;
                    s = sched(cm, call);
                    let dst = rb.region(&mut s);
                    inter::scatter(&mut s, root, &[], Some(dst));
                }
            }
            return Ok(s);
        }
        check_root(call, cm, root)?;
        let (n, me) = (cm.core.size(), cm.core.rank);
        let is_root = me == root;
        if in_place(rbuf) && !is_root {
            return Err(in_place_at_root(call));
        }
        let rb = if in_place(rbuf) { None } else { Some(Buf::new(call, "receive", rbuf, rc, rt)?) };
        let block = if is_root && v.is_none() { Some(Buf::new(call, "send", sbuf, sc, st)?) } else { None };
        let b = match (&rb, &block) {
            (_, Some(sb)) => {
                if let Some(rb) = &rb {
                    same_size(call, sb.bytes(), rb.bytes())?;
                }
                sb.bytes()
            }
            (Some(rb), None) => rb.bytes(),
            (None, None) => 0,
        };
        let shape = Shape { n, bytes: b, uniform: v.is_none(), ..Default::default() };
        let a = algo::choose(Coll::Scatter, shape)?;
        let whole = match (&v, is_root) {
            (None, true) => Some(Buf::new(call, "send", sbuf, times(call, "send", sc, n as usize)?, st)?),
            _ => None,
        };
        let vbufs = match &v {
            Some(v) => v.bufs(call, "send", sbuf)?,
            None => Vec::new(),
        };
        let mut s = sched(cm, call);
        let src = match whole {
            Some(w) => blocks(w.region(&mut s), n as usize, b),
            None => regions(&mut s, &vbufs),
        };
        let dst = rb.map(|x| x.region(&mut s));
        algo::scatter(&mut s, a, root, &src, dst, b);
        Ok(s)
    })
}

#[allow(clippy::too_many_arguments)]
fn scatter(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    root: c_int,
    comm_h: usize,
) -> c_int {
    scatter_any(mode, "MPI_Scatter", sbuf, sc, None, st, rbuf, rc, rt, root, comm_h)
}

coll_entry!(PMPI_Scatter, PMPI_Iscatter, PMPI_Scatter_init, scatter,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc as i64, rt, root, comm));
coll_entry!(PMPI_Scatter_c, PMPI_Iscatter_c, PMPI_Scatter_init_c, scatter,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc, st, rbuf, rc, rt, root, comm));

#[allow(clippy::too_many_arguments)]
unsafe fn scatterv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
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
    let call = "MPI_Scatterv";
    // SAFETY: forwarded array contracts.
    match unsafe { root_side(call, ["sendcounts", "displs"], comm_h, root, scounts, displs, st) } {
        Ok(v) => scatter_any(mode, call, sbuf, 0, Some(v), st, rbuf, rc, rt, root, comm_h),
        Err(e) => guard(comm_h, || Err(e)),
    }
}

coll_entry!(PMPI_Scatterv, PMPI_Iscatterv, PMPI_Scatterv_init, scatterv,
    (sbuf: *mut c_void, sc: *mut c_int, d: *mut c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc, d, st, rbuf, rc as i64, rt, root, comm));
coll_entry!(PMPI_Scatterv_c, PMPI_Iscatterv_c, PMPI_Scatterv_init_c, scatterv,
    (sbuf: *mut c_void, sc: *mut i64, d: *mut isize, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, root: c_int, comm: usize)
    => (sbuf, sc, d as *const i64, st, rbuf, rc, rt, root, comm));

// ----- allgather -----

#[allow(clippy::too_many_arguments)]
fn allgather(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Allgather";
    attach_shm(call, &mode, comm_h);
    if let Some(rc) = blocks_fast(call, &mode, comm_h, (sbuf, sc, st), (rbuf, rc, rt), Coll::Allgather) {
        return rc;
    }
    launch(mode, call, comm_h, |_, cm| {
        let n = cm.core.peer_size();
        no_in_place(call, cm, "send", sbuf)?;
        let rb = Buf::new(call, "receive", rbuf, rc, rt)?;
        let sb = if in_place(sbuf) { None } else { Some(Buf::new(call, "send", sbuf, sc, st)?) };
        if let (Some(sb), false) = (&sb, cm.core.is_inter()) {
            same_size(call, sb.bytes(), rb.bytes())?;
        }
        let b = rb.bytes();
        if cm.core.is_inter() {
            let whole = Buf::new(call, "receive", rbuf, times(call, "receive", rc, n as usize)?, rt)?;
            let sb = sb.expect("not in place");
            let mut s = sched(cm, call);
            let dst = blocks(whole.region(&mut s), n as usize, b);
            let src = sb.region(&mut s);
            inter::allgather(&mut s, src, &dst);
            return Ok(s);
        }
        let a = algo::choose(Coll::Allgather, Shape::of(&cm.core, b))?;
        let whole = Buf::new(call, "receive", rbuf, times(call, "receive", rc, n as usize)?, rt)?;
        let mut s = sched(cm, call);
        let whole = whole.region(&mut s);
        let src = sb.map(|x| x.region(&mut s));
        algo::allgather(&mut s, a, src, &blocks(whole, n as usize, b));
        Ok(s)
    })
}

coll_entry!(PMPI_Allgather, PMPI_Iallgather, PMPI_Allgather_init, allgather,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
coll_entry!(PMPI_Allgather_c, PMPI_Iallgather_c, PMPI_Allgather_init_c, allgather,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm: usize)
    => (sbuf, sc, st, rbuf, rc, rt, comm));

#[allow(clippy::too_many_arguments)]
unsafe fn allgatherv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rcounts: *const C,
    displs: *const D,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Allgatherv";
    let names = ["recvcounts", "displs", ""];
    // SAFETY: one entry per process.
    let side =
        match unsafe { VSide::read(call, names, rcounts, displs, (rt, std::ptr::null()), false, comm_peers(comm_h)) } {
            Ok(v) => v,
            Err(e) => return guard(comm_h, || Err(e)),
        };
    launch(mode, call, comm_h, |_, cm| {
        let (n, me) = (cm.core.size(), cm.core.rank as usize);
        no_in_place(call, cm, "send", sbuf)?;
        let sb = if in_place(sbuf) { None } else { Some(Buf::new(call, "send", sbuf, sc, st)?) };
        let rbufs = side.bufs(call, "receive", rbuf)?;
        if cm.core.is_inter() {
            let sb = sb.expect("not in place");
            let mut s = sched(cm, call);
            let bl = regions(&mut s, &rbufs);
            let src = sb.region(&mut s);
            inter::allgather(&mut s, src, &bl);
            return Ok(s);
        }
        if let Some(sb) = &sb {
            same_size(call, sb.bytes(), rbufs[me].bytes())?;
        }
        let a = algo::choose(Coll::Allgatherv, Shape { n, ..Default::default() })?;
        let mut s = sched(cm, call);
        let bl = regions(&mut s, &rbufs);
        let src = sb.map(|x| x.region(&mut s));
        algo::allgather(&mut s, a, src, &bl);
        Ok(s)
    })
}

coll_entry!(PMPI_Allgatherv, PMPI_Iallgatherv, PMPI_Allgatherv_init, allgatherv,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, d: *mut c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc, d, rt, comm));
coll_entry!(PMPI_Allgatherv_c, PMPI_Iallgatherv_c, PMPI_Allgatherv_init_c, allgatherv,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: *mut i64, d: *mut isize, rt: usize, comm: usize)
    => (sbuf, sc, st, rbuf, rc, d as *const i64, rt, comm));

// ----- alltoall -----

#[allow(clippy::too_many_arguments)]
fn alltoall(
    mode: Mode,
    sbuf: *const c_void,
    sc: i64,
    st: usize,
    rbuf: *mut c_void,
    rc: i64,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Alltoall";
    attach_shm(call, &mode, comm_h);
    if let Some(rc) = blocks_fast(call, &mode, comm_h, (sbuf, sc, st), (rbuf, rc, rt), Coll::Alltoall) {
        return rc;
    }
    launch(mode, call, comm_h, |_, cm| {
        let n = cm.core.peer_size();
        no_in_place(call, cm, "send", sbuf)?;
        let rb = Buf::new(call, "receive", rbuf, rc, rt)?;
        let sb = if in_place(sbuf) { None } else { Some(Buf::new(call, "send", sbuf, sc, st)?) };
        if let (Some(sb), false) = (&sb, cm.core.is_inter()) {
            same_size(call, sb.bytes(), rb.bytes())?;
        }
        let b = rb.bytes();
        if let (Some(sb), true) = (&sb, cm.core.is_inter()) {
            let sw = Buf::new(call, "send", sbuf, times(call, "send", sc, n as usize)?, st)?;
            let rw = Buf::new(call, "receive", rbuf, times(call, "receive", rc, n as usize)?, rt)?;
            let mut s = sched(cm, call);
            let dst = blocks(rw.region(&mut s), n as usize, b);
            let src = blocks(sw.region(&mut s), n as usize, sb.bytes());
            inter::alltoall(&mut s, &src, &dst);
            return Ok(s);
        }
        let a = algo::choose(Coll::Alltoall, Shape::of(&cm.core, b))?;
        let rwhole = Buf::new(call, "receive", rbuf, times(call, "receive", rc, n as usize)?, rt)?;
        let swhole = match sb {
            Some(_) => Some(Buf::new(call, "send", sbuf, times(call, "send", sc, n as usize)?, st)?),
            None => None,
        };
        let mut s = sched(cm, call);
        let dst = blocks(rwhole.region(&mut s), n as usize, b);
        let src = swhole.map(|w| blocks(w.region(&mut s), n as usize, b));
        algo::alltoall(&mut s, a, src.as_deref(), &dst);
        Ok(s)
    })
}

coll_entry!(PMPI_Alltoall, PMPI_Ialltoall, PMPI_Alltoall_init, alltoall,
    (sbuf: *mut c_void, sc: c_int, st: usize, rbuf: *mut c_void, rc: c_int, rt: usize, comm: usize)
    => (sbuf, sc as i64, st, rbuf, rc as i64, rt, comm));
coll_entry!(PMPI_Alltoall_c, PMPI_Ialltoall_c, PMPI_Alltoall_init_c, alltoall,
    (sbuf: *mut c_void, sc: i64, st: usize, rbuf: *mut c_void, rc: i64, rt: usize, comm: usize)
    => (sbuf, sc, st, rbuf, rc, rt, comm));

/// Per-rank (or per-neighbour) blocks of a `v` or `w` argument: counts, displacements (in
/// extents of the block's datatype for `v`, in bytes for `w`) and datatypes.
#[derive(Default)]
pub(crate) struct VSide {
    counts: Vec<i64>,
    displs: Vec<i64>,
    types: Vec<usize>,
    bytes_displs: bool,
}

impl VSide {
    /// Reads `n` entries of the counts and displacements arrays (`names` as the call calls
    /// them) and, for `w`, of the datatypes array `types.1`; otherwise every block is of `types.0`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn read<C: Copy + Into<i64>, D: Copy + Into<i64>>(
        call: &str,
        names: [&str; 3],
        counts: *const C,
        displs: *const D,
        types: (usize, *const usize),
        w: bool,
        n: usize,
    ) -> Result<VSide> {
        // SAFETY: forwarded contract: one entry per block in each array.
        let (counts, displs) = unsafe { (wide(call, names[0], counts, n)?, wide(call, names[1], displs, n)?) };
        if let Some((i, bad)) = counts.iter().enumerate().find(|(_, &v)| v < 0) {
            return Err(MpiError::new(c::MPI_ERR_COUNT, format!("{call}: {}[{i}] is negative ({bad})", names[0])));
        }
        let types = if w {
            // SAFETY: as above.
            unsafe { array(call, names[2], types.1, n)? }.to_vec()
        } else {
            vec![types.0; n]
        };
        Ok(VSide { counts, displs, types, bytes_displs: w })
    }

    /// Every block as a checked buffer, before a schedule exists (so that bad arguments fail
    /// before the call draws its tag).
    pub(crate) fn bufs(&self, call: &str, what: &str, base: *const c_void) -> Result<Vec<Buf>> {
        (0..self.counts.len())
            .map(|i| {
                let dt = self.types[i];
                let off = if self.bytes_displs {
                    self.displs[i] as isize
                } else {
                    self.displs[i] as isize * dtype(call, dt)?.extent
                };
                let addr = (base as usize).wrapping_add_signed(off);
                Buf::new(call, what, addr as *const c_void, self.counts[i], dt)
            })
            .collect()
    }
}

fn alltoallv_any(
    mode: Mode,
    call: &'static str,
    sbuf: *const c_void,
    snd: Option<VSide>,
    rbuf: *mut c_void,
    rcv: VSide,
    comm_h: usize,
) -> c_int {
    launch(mode, call, comm_h, |_, cm| {
        let n = cm.core.size();
        let me = cm.core.rank as usize;
        no_in_place(call, cm, "send", sbuf)?;
        let rbufs = rcv.bufs(call, "receive", rbuf)?;
        let sbufs = match &snd {
            Some(v) => Some(v.bufs(call, "send", sbuf)?),
            None => None,
        };
        if cm.core.is_inter() {
            let sbufs = sbufs.expect("not in place");
            let mut s = sched(cm, call);
            let dst = regions(&mut s, &rbufs);
            let src = regions(&mut s, &sbufs);
            inter::alltoall(&mut s, &src, &dst);
            return Ok(s);
        }
        if let Some(sb) = &sbufs {
            same_size(call, sb[me].bytes(), rbufs[me].bytes())?;
        }
        let a = algo::choose(Coll::Alltoallv, Shape { n, ..Default::default() })?;
        let mut s = sched(cm, call);
        let dst = regions(&mut s, &rbufs);
        let src = sbufs.map(|b| regions(&mut s, &b));
        algo::alltoall(&mut s, a, src.as_deref(), &dst);
        Ok(s)
    })
}

/// Reads both sides of an alltoallv or (with `w`) alltoallw; no send side with `MPI_IN_PLACE`.
#[allow(clippy::too_many_arguments)]
unsafe fn vsides<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    call: &str,
    sbuf: *const c_void,
    sc: *const C,
    sd: *const D,
    st: (usize, *const usize),
    rc: *const C,
    rd: *const D,
    rt: (usize, *const usize),
    w: bool,
    n: usize,
) -> Result<(Option<VSide>, VSide)> {
    // SAFETY: one entry per process in each array, per the standard.
    unsafe {
        let r = VSide::read(call, ["recvcounts", "rdispls", "recvtypes"], rc, rd, rt, w, n)?;
        let s = match in_place(sbuf) {
            true => None,
            false => Some(VSide::read(call, ["sendcounts", "sdispls", "sendtypes"], sc, sd, st, w, n)?),
        };
        Ok((s, r))
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallv<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    sc: *const C,
    sd: *const D,
    st: usize,
    rbuf: *mut c_void,
    rc: *const C,
    rd: *const D,
    rt: usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Alltoallv";
    let n = comm_peers(comm_h);
    // SAFETY: arrays of one entry per process.
    match unsafe { vsides(call, sbuf, sc, sd, (st, std::ptr::null()), rc, rd, (rt, std::ptr::null()), false, n) } {
        Ok((s, r)) => alltoallv_any(mode, call, sbuf, s, rbuf, r, comm_h),
        Err(e) => guard(comm_h, || Err(e)),
    }
}

coll_entry!(PMPI_Alltoallv, PMPI_Ialltoallv, PMPI_Alltoallv_init, alltoallv,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut c_int, st: usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut c_int, rt: usize, comm: usize)
    => (sbuf, sc, sd, st, rbuf, rc, rd, rt, comm));
coll_entry!(PMPI_Alltoallv_c, PMPI_Ialltoallv_c, PMPI_Alltoallv_init_c, alltoallv,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: usize, comm: usize)
    => (sbuf, sc, sd as *const i64, st, rbuf, rc, rd as *const i64, rt, comm));

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallw<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    mode: Mode,
    sbuf: *const c_void,
    sc: *const C,
    sd: *const D,
    st: *const usize,
    rbuf: *mut c_void,
    rc: *const C,
    rd: *const D,
    rt: *const usize,
    comm_h: usize,
) -> c_int {
    let call = "MPI_Alltoallw";
    let n = comm_peers(comm_h);
    // SAFETY: arrays of one entry per process.
    match unsafe { vsides(call, sbuf, sc, sd, (0, st), rc, rd, (0, rt), true, n) } {
        Ok((s, r)) => alltoallv_any(mode, call, sbuf, s, rbuf, r, comm_h),
        Err(e) => guard(comm_h, || Err(e)),
    }
}

coll_entry!(PMPI_Alltoallw, PMPI_Ialltoallw, PMPI_Alltoallw_init, alltoallw,
    (sbuf: *mut c_void, sc: *mut c_int, sd: *mut c_int, st: *mut usize, rbuf: *mut c_void, rc: *mut c_int, rd: *mut c_int, rt: *mut usize, comm: usize)
    => (sbuf, sc, sd, st, rbuf, rc, rd, rt, comm));
coll_entry!(PMPI_Alltoallw_c, PMPI_Ialltoallw_c, PMPI_Alltoallw_init_c, alltoallw,
    (sbuf: *mut c_void, sc: *mut i64, sd: *mut isize, st: *mut usize, rbuf: *mut c_void, rc: *mut i64, rd: *mut isize, rt: *mut usize, comm: usize)
    => (sbuf, sc, sd as *const i64, st, rbuf, rc, rd as *const i64, rt, comm));
