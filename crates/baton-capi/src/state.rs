//! The library's state after `MPI_Init`: the core runtime plus the C-visible object tables.
//!
//! One lock here: `tables` (handles and their objects). The device ([`Lib::mpi`]) keeps its own
//! locks, taken only inside its entries: code may call a device entry while holding `tables`
//! (never the other way round), and holds `tables` neither while calling application callbacks
//! (error handlers, attribute callbacks) nor while calling an entry that blocks.

use crate::handles::{Kind, Table};
use baton_abi::consts as c;
use baton_core::comm::Comm;
use baton_core::device::Persistent;
use baton_core::engine::{ReqId, Unexpected};
use baton_core::error::{MpiError, Result};
use baton_core::group::Group;
use baton_core::runtime::Mpi;
use baton_core::topo::Topology;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A communicator found by handle: borrowed when predefined, else a counted reference.
pub enum CommRef<'a> {
    Borrowed(&'a Arc<CommObj>),
    Owned(Arc<CommObj>),
}

impl std::ops::Deref for CommRef<'_> {
    type Target = Arc<CommObj>;
    fn deref(&self) -> &Arc<CommObj> {
        match self {
            CommRef::Borrowed(a) => a,
            CommRef::Owned(a) => a,
        }
    }
}

/// A communicator as the application sees it.
pub struct CommObj {
    pub core: Arc<Comm>,
    /// This communicator's own handle (set when registered).
    pub handle: AtomicUsize,
    pub name: Mutex<String>,
    pub errhandler: AtomicUsize,
    /// (keyval, attribute value) in the order the attributes were first set ([`Attrs`]).
    pub attrs: Mutex<Attrs>,
    pub info: Mutex<Vec<(String, String)>>,
    /// Process topology, fixed at creation and shared with duplicates.
    pub topo: Option<Arc<Topology>>,
}

impl CommObj {
    pub fn new(core: Arc<Comm>, name: &str, errhandler: usize) -> Arc<CommObj> {
        Self::with_topo(core, name, errhandler, None)
    }

    pub fn with_topo(core: Arc<Comm>, name: &str, errhandler: usize, topo: Option<Arc<Topology>>) -> Arc<CommObj> {
        Arc::new(CommObj {
            core,
            handle: AtomicUsize::new(c::MPI_COMM_NULL),
            name: Mutex::new(name.to_string()),
            errhandler: AtomicUsize::new(errhandler),
            attrs: Mutex::new(Attrs::default()),
            info: Mutex::new(Vec::new()),
            topo,
        })
    }
}

/// A window as the application sees it.
pub struct WinObj {
    pub core: Arc<baton_core::rma::Window>,
    /// This window's own handle (set when registered).
    pub handle: AtomicUsize,
    pub name: Mutex<String>,
    pub errhandler: AtomicUsize,
    pub attrs: Mutex<Attrs>,
    pub info: Mutex<Vec<(String, String)>>,
    /// The values of the predefined attributes (`MPI_WIN_SIZE` ...): the application receives
    /// pointers to them, valid while the window lives.
    pub attr_size: isize,
    pub attr_disp_unit: c_int,
    pub attr_flavor: c_int,
    pub attr_model: c_int,
}

#[derive(Clone, Copy)]
pub struct UserErrhandler {
    pub func: usize,
    pub refs: usize,
}

#[derive(Clone, Copy)]
pub struct Keyval {
    pub copy_fn: usize,
    pub delete_fn: usize,
    pub extra: usize,
    pub freed: bool,
    pub uses: usize,
}

/// A persistent request: its operation, started again by every `MPI_Start`, the request of the
/// round in progress, and the communicator handle whose error handler applies to it.
pub struct PersistentEntry {
    pub op: Persistent,
    pub active: Option<ReqId>,
    pub comm: usize,
}

/// The persistent requests by handle.
pub struct PersistentTable(Table<PersistentEntry>);

impl PersistentTable {
    /// Registers a persistent request and returns its handle.
    pub fn insert(&mut self, e: PersistentEntry) -> usize {
        self.0.insert(e)
    }
    pub fn get(&self, h: usize) -> Option<&PersistentEntry> {
        self.0.get(h)
    }
    pub fn get_mut(&mut self, h: usize) -> Option<&mut PersistentEntry> {
        self.0.get_mut(h)
    }
    pub fn remove(&mut self, h: usize) -> Option<PersistentEntry> {
        self.0.remove(h)
    }
}

pub struct Tables {
    pub comms: Table<Arc<CommObj>>,
    pub groups: Table<Arc<Group>>,
    pub errhandlers: Table<UserErrhandler>,
    pub persistent: PersistentTable,
    pub messages: Table<(Unexpected, Arc<CommObj>)>,
    /// User-defined datatypes: layout and whether committed.
    pub datatypes: Table<(Arc<baton_core::datatype::Layout>, bool)>,
    /// User-defined reduction operations.
    pub ops: Table<UserOp>,
    pub wins: Table<Arc<WinObj>>,
    pub keyvals: BTreeMap<c_int, Keyval>,
    pub next_keyval: c_int,
    pub world: Arc<CommObj>,
    pub self_comm: Arc<CommObj>,
}

pub struct Lib {
    pub mpi: baton_core::device::Device,
    /// The predefined communicators, reachable without the tables lock.
    pub world: Arc<CommObj>,
    pub self_comm: Arc<CommObj>,
    pub tables: Mutex<Tables>,
    pub thread_level: c_int,
    pub main_thread: std::thread::ThreadId,
    /// `MPI_Comm_get_parent`'s answer: the intercommunicator to the job that spawned this one.
    pub parent: std::sync::atomic::AtomicUsize,
}

static LIB: OnceLock<Lib> = OnceLock::new();

/// Bumped whenever a window is freed; see [`Lib::win`].
pub static WIN_EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The thread's last window, kept alive here while `WIN_FAST` points at it.
    static WIN_CACHE: std::cell::RefCell<Option<Arc<WinObj>>> = const { std::cell::RefCell::new(None) };
    /// The same entry as plain values (handle, epoch, object), read with one thread-local access.
    static WIN_FAST: std::cell::Cell<(usize, u64, *const WinObj)> =
        const { std::cell::Cell::new((0, u64::MAX, std::ptr::null())) };
}

/// A window found by handle: borrowed from the thread's cache, or a counted reference.
pub enum WinRef {
    Borrowed(&'static WinObj),
    Owned(Arc<WinObj>),
}

impl std::ops::Deref for WinRef {
    type Target = WinObj;
    fn deref(&self) -> &WinObj {
        match self {
            WinRef::Borrowed(w) => w,
            WinRef::Owned(w) => w,
        }
    }
}

/// Bumped whenever a communicator is freed; see [`Lib::comm_arc`].
pub static COMM_EPOCH: AtomicU64 = AtomicU64::new(0);

/// The per-thread cache of the last communicator used: (handle, epoch, object).
struct CommCacheEntry(Option<(usize, u64, Arc<CommObj>)>);

impl Drop for CommCacheEntry {
    fn drop(&mut self) {
        // The thread is ending: its express paths must not reach the object any more (a
        // destructor of another thread-local could still call MPI).
        let _ = COMM_FAST.try_with(|f| f.set((0, u64::MAX, std::ptr::null())));
    }
}

thread_local! {
    static COMM_CACHE: std::cell::RefCell<CommCacheEntry> = const { std::cell::RefCell::new(CommCacheEntry(None)) };
    /// The same entry for the express paths, as plain values: a `Cell` of `Copy` data needs no
    /// borrow flag and no destructor registration, so reading it is one thread-local access.
    /// The pointer is valid while `COMM_CACHE` holds the same object, which both are updated
    /// together to do.
    static COMM_FAST: std::cell::Cell<(usize, u64, *const CommObj)> =
        const { std::cell::Cell::new((0, u64::MAX, std::ptr::null())) };
}
/// 0 before init, 1 initialized, 2 finalized.
pub static PHASE: AtomicU8 = AtomicU8::new(0);

pub fn phase() -> u8 {
    PHASE.load(Ordering::SeqCst)
}

pub fn install(lib: Lib) {
    let _ = LIB.set(lib);
    PHASE.store(1, Ordering::SeqCst);
}

/// The library, or an error naming `call` when MPI is not initialized (or already finalized).
pub fn lib(call: &str) -> Result<&'static Lib> {
    match (phase(), LIB.get()) {
        (1, Some(l)) => Ok(l),
        (2, _) => Err(MpiError::new(c::MPI_ERR_OTHER, format!("{call}: called after MPI_Finalize"))),
        _ => Err(MpiError::new(c::MPI_ERR_OTHER, format!("{call}: called before MPI_Init"))),
    }
}

/// The library when initialized, with no error to build (the express paths).
#[inline]
pub fn lib_fast() -> Option<&'static Lib> {
    if PHASE.load(Ordering::Relaxed) == 1 {
        LIB.get()
    } else {
        None
    }
}

/// The library even after finalize (for the few calls allowed then).
pub fn lib_any() -> Option<&'static Lib> {
    LIB.get()
}

impl Lib {
    pub fn t(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The communicator behind `h`, or an MPI_ERR_COMM error naming `call`. The predefined
    /// ones are borrowed (no lock, no reference count traffic on the hot path).
    pub fn comm(&self, call: &str, h: usize) -> Result<CommRef<'_>> {
        match h {
            c::MPI_COMM_WORLD => return Ok(CommRef::Borrowed(&self.world)),
            c::MPI_COMM_SELF => return Ok(CommRef::Borrowed(&self.self_comm)),
            _ => {}
        }
        self.comm_arc(call, h).map(CommRef::Owned)
    }

    /// Runs `f` on the communicator behind `h` when that costs neither a lock nor reference
    /// count traffic: a predefined one, or the one this thread's previous call used (see
    /// [`comm_arc`](Self::comm_arc)). None otherwise; the express paths then take the generic
    /// path, which looks the handle up (and caches it for the next call).
    #[inline]
    pub fn with_comm_fast<R>(&self, h: usize, f: impl FnOnce(&CommObj) -> R) -> Option<R> {
        match h {
            c::MPI_COMM_WORLD => Some(f(&self.world)),
            c::MPI_COMM_SELF => Some(f(&self.self_comm)),
            _ => {
                let epoch = COMM_EPOCH.load(Ordering::Acquire);
                let (ch, ce, obj) = COMM_FAST.get();
                if ch != h || ce != epoch || obj.is_null() {
                    return None;
                }
                // SAFETY: `COMM_CACHE` of this thread holds an `Arc` of this very object (set
                // together in `comm_arc`), so it is alive; the epoch check says it is not freed.
                Some(f(unsafe { &*obj }))
            }
        }
    }

    /// Like [`comm`](Self::comm), as an owned reference (to keep beyond the call).
    pub fn comm_arc(&self, call: &str, h: usize) -> Result<Arc<CommObj>> {
        // Most calls reuse the communicator of the previous call on this thread; the epoch
        // (bumped by every MPI_Comm_free) makes a cached entry of a freed one miss.
        let epoch = COMM_EPOCH.load(Ordering::Acquire);
        let hit = COMM_CACHE.with(|c| match &c.borrow().0 {
            Some((ch, ce, obj)) if *ch == h && *ce == epoch => Some(obj.clone()),
            _ => None,
        });
        if let Some(obj) = hit {
            return Ok(obj);
        }
        let obj = self.comm_lookup(call, h)?;
        COMM_CACHE.with(|c| c.borrow_mut().0 = Some((h, epoch, obj.clone())));
        COMM_FAST.set((h, epoch, Arc::as_ptr(&obj)));
        Ok(obj)
    }

    fn comm_lookup(&self, call: &str, h: usize) -> Result<Arc<CommObj>> {
        let t = self.t();
        match h {
            c::MPI_COMM_WORLD => Ok(t.world.clone()),
            c::MPI_COMM_SELF => Ok(t.self_comm.clone()),
            c::MPI_COMM_NULL => Err(MpiError::new(c::MPI_ERR_COMM, format!("{call}: comm is MPI_COMM_NULL"))),
            _ => t.comms.get(h).cloned().ok_or_else(|| {
                MpiError::new(c::MPI_ERR_COMM, format!("{call}: comm {h:#x} is not a valid communicator handle"))
            }),
        }
    }

    pub fn group(&self, call: &str, h: usize) -> Result<Arc<Group>> {
        match h {
            c::MPI_GROUP_EMPTY => Ok(Arc::new(Group::default())),
            c::MPI_GROUP_NULL => Err(MpiError::new(c::MPI_ERR_GROUP, format!("{call}: group is MPI_GROUP_NULL"))),
            _ => self.t().groups.get(h).cloned().ok_or_else(|| {
                MpiError::new(c::MPI_ERR_GROUP, format!("{call}: group {h:#x} is not a valid group handle"))
            }),
        }
    }

    /// The window behind `h`, or an `MPI_ERR_WIN` error naming `call`.
    /// The window behind `h`, or an `MPI_ERR_WIN` error naming `call`. One-sided operations
    /// come in long runs on one window: the thread's last window is kept, so the lookup then
    /// takes no lock (`WIN_EPOCH`, bumped by every `MPI_Win_free`, invalidates it).
    pub fn win(&self, call: &str, arg: &str, h: usize) -> Result<WinRef> {
        let epoch = WIN_EPOCH.load(Ordering::Acquire);
        let (ch, ce, obj) = WIN_FAST.get();
        if ch == h && ce == epoch && !obj.is_null() {
            // SAFETY: `WIN_CACHE` of this thread holds an `Arc` of this very object (set together
            // below), so it is alive; the epoch says no window was freed since.
            return Ok(WinRef::Borrowed(unsafe { &*obj }));
        }
        let w = self
            .t()
            .wins
            .get(h)
            .cloned()
            .ok_or_else(|| MpiError::invalid_handle(call, arg, baton_core::error::HandleKind::Win, h))?;
        WIN_FAST.set((h, epoch, Arc::as_ptr(&w)));
        WIN_CACHE.with(|c| *c.borrow_mut() = Some(w.clone()));
        Ok(WinRef::Owned(w))
    }

    pub fn new_group(&self, g: Group) -> usize {
        if g.procs.is_empty() {
            return c::MPI_GROUP_EMPTY;
        }
        self.t().groups.insert(Arc::new(g))
    }
}

pub fn new_tables(mpi: &Mpi) -> Tables {
    let world = CommObj::new(mpi.world.clone(), "MPI_COMM_WORLD", c::MPI_ERRORS_ARE_FATAL);
    let self_comm = CommObj::new(mpi.self_comm.clone(), "MPI_COMM_SELF", c::MPI_ERRORS_ARE_FATAL);
    world.handle.store(c::MPI_COMM_WORLD, Ordering::Relaxed);
    self_comm.handle.store(c::MPI_COMM_SELF, Ordering::Relaxed);
    Tables {
        comms: Table::new(Kind::Comm),
        groups: Table::new(Kind::Group),
        errhandlers: Table::new(Kind::Errhandler),
        persistent: PersistentTable(Table::new(Kind::PersistentRequest)),
        messages: Table::new(Kind::Message),
        datatypes: Table::new(Kind::Datatype),
        ops: Table::new(Kind::Op),
        wins: Table::new(Kind::Win),
        keyvals: BTreeMap::new(),
        next_keyval: 1000,
        world,
        self_comm,
    }
}

pub(crate) type UserFnInt = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut usize);
pub(crate) type UserFnLarge = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut i64, *mut usize);

#[derive(Clone, Copy)]
pub(crate) enum UserFn {
    Int(UserFnInt),
    Large(UserFnLarge),
}

/// An operation made by `MPI_Op_create` (`int` lengths) or `MPI_Op_create_c` (`MPI_Count`).
#[derive(Clone, Copy)]
pub struct UserOp {
    pub(crate) func: UserFn,
    pub commutative: bool,
}

impl UserOp {
    /// Calls the function on `n` elements of datatype `dt` at `inp` and `inout` (laid out as the
    /// datatype says, `extent` bytes apart), in pieces when `n` exceeds an `int` length.
    pub(crate) fn call(&self, dt: usize, inp: usize, inout: usize, n: usize, extent: isize) {
        let piece = match self.func {
            UserFn::Int(_) => c_int::MAX as usize,
            UserFn::Large(_) => i64::MAX as usize,
        };
        let mut done = 0usize;
        while done < n {
            let k = (n - done).min(piece);
            let off = done as isize * extent;
            let (a, b) = (inp.wrapping_add_signed(off) as *mut c_void, inout.wrapping_add_signed(off) as *mut c_void);
            // The function receives its own copy of the handle: it may not change ours.
            let mut dt = dt;
            match self.func {
                UserFn::Int(f) => {
                    let mut len = k as c_int;
                    // SAFETY: `f` is the application's MPI_User_function (MPI_Op_create's contract);
                    // `a` and `b` hold `len` elements of `dt`, and `b` is writable.
                    unsafe { f(a, b, &mut len, &mut dt) }
                }
                UserFn::Large(f) => {
                    let mut len = k as i64;
                    // SAFETY: as above, for an MPI_User_function_c.
                    unsafe { f(a, b, &mut len, &mut dt) }
                }
            }
            done += k;
        }
    }
}

/// The attributes of one object: (keyval, value) pairs in the order they were first set.
/// Objects carry few attributes, so a list beats a map.
#[derive(Default)]
pub struct Attrs(Vec<(c_int, usize)>);

impl Attrs {
    pub fn get(&self, k: c_int) -> Option<usize> {
        self.0.iter().find(|(kk, _)| *kk == k).map(|&(_, v)| v)
    }

    /// Sets `k` to `v` (keeping its place when already set): the value it replaces, if any.
    pub fn insert(&mut self, k: c_int, v: usize) -> Option<usize> {
        match self.0.iter_mut().find(|(kk, _)| *kk == k) {
            Some(e) => Some(std::mem::replace(&mut e.1, v)),
            None => {
                self.0.push((k, v));
                None
            }
        }
    }

    pub fn remove(&mut self, k: c_int) -> Option<usize> {
        let i = self.0.iter().position(|(kk, _)| *kk == k)?;
        Some(self.0.remove(i).1)
    }

    /// Every pair, in the order set.
    pub fn pairs(&self) -> Vec<(c_int, usize)> {
        self.0.clone()
    }

    /// Takes every pair out, the most recently set first (the order of deletion).
    pub fn take_newest_first(&mut self) -> Vec<(c_int, usize)> {
        let mut v = std::mem::take(&mut self.0);
        v.reverse();
        v
    }
}
