//! The argument checks of the C boundary: one function per role of `abi/bindings.tsv`, each
//! turning a C argument into the value the implementation takes, or into the catalogued
//! `MpiError` (`baton_core::error`) that names the call, the argument and the reason.
//!
//! The entry points generated from the table (`baton_abi::bindings`) call these in order, then
//! the implementation; hand-written entry points call them directly. Important types:
//! - [`Call`]: which entry point runs (its name for messages, and whether it is the large-count
//!   `_c` form);
//! - [`Count`]: the integer types of counts (`int`, `MPI_Aint`, `MPI_Count`), so that one
//!   check serves both forms of a call;
//! - [`Out`], [`CountOut`], [`StrOut`]: checked output pointers; a `CountOut` is an `int *` in
//!   one form and an `MPI_Count *` in the other, and says when a value does not fit;
//! - [`StatusOut`], [`Statuses`]: where a call reports one status or an array of them, either
//!   of which the application may ignore;
//! - [`Data`], [`Message`], [`Matching`], [`Requests`]: checked arguments bundled (a message's
//!   buffer, count, datatype, peer and tag; a probe's source and tag; an array of requests and
//!   its length);
//! - [`Dt`]: a datatype argument (handle, layout, committed), predefined layouts borrowed.
//!
//! Everything here is `#[inline]` or off the success path, so a generated wrapper costs what
//! the hand-written checks did.

use crate::state::{lib_any, CommObj, CommRef, Lib};
use crate::{put_status, MPI_Status};
use baton_abi::consts as c;
use baton_core::datatype::{predefined, Layout};
use baton_core::engine::Status;
use baton_core::error::{HandleKind, MpiError, Result};
use baton_core::group::Group;
use std::borrow::Cow;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

/// The largest tag: the frame header carries tags as 32-bit signed integers.
pub const TAG_UB: c_int = i32::MAX;

/// The entry point being run.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    /// The standard name, as messages print it (`MPI_Type_vector_c`).
    pub name: &'static str,
    /// The large-count form (`_c`, or the older `_x`): counts are `MPI_Count`.
    pub large: bool,
}

impl Call {
    pub const fn new(name: &'static str, large: bool) -> Call {
        Call { name, large }
    }
}

/// A pointer to a count of one of the C count types.
#[derive(Clone, Copy)]
pub enum CountPtr {
    Int(*mut c_int),
    Aint(*mut isize),
    Count(*mut i64),
}

/// The C integer types a count or displacement has in one form or another of a call.
pub trait Count: Copy {
    fn wide(self) -> i64;
    fn count_ptr(p: *mut Self) -> CountPtr;
    /// The values as 64-bit counts, borrowed when they already are.
    fn wide_slice(s: &[Self]) -> Cow<'_, [i64]>;
}

/// The narrower count types, widened on reading.
macro_rules! narrow_count {
    ($t:ty, $variant:ident) => {
        impl Count for $t {
            #[inline]
            fn wide(self) -> i64 {
                self as i64
            }
            fn count_ptr(p: *mut Self) -> CountPtr {
                CountPtr::$variant(p)
            }
            fn wide_slice(s: &[Self]) -> Cow<'_, [i64]> {
                Cow::Owned(s.iter().map(|&v| v as i64).collect())
            }
        }
    };
}

narrow_count!(c_int, Int);
narrow_count!(isize, Aint);

impl Count for i64 {
    #[inline]
    fn wide(self) -> i64 {
        self
    }
    fn count_ptr(p: *mut Self) -> CountPtr {
        CountPtr::Count(p)
    }
    fn wide_slice(s: &[Self]) -> Cow<'_, [i64]> {
        Cow::Borrowed(s)
    }
}

/// A count or displacement as 64 bits (the `int` and `_c` forms meet here).
#[inline]
pub fn wide<T: Count>(v: T) -> i64 {
    v.wide()
}

/// Role `count`: a number of elements (`MPI_ERR_COUNT` when negative).
#[inline]
pub fn count<T: Count>(call: &str, arg: &str, v: T) -> Result<usize> {
    not_negative(call, arg, v.wide(), true)
}

/// Role `nonneg`: a size or length that is not a count of elements (`MPI_ERR_ARG`).
#[inline]
pub fn nonneg<T: Count>(call: &str, arg: &str, v: T) -> Result<usize> {
    not_negative(call, arg, v.wide(), false)
}

#[inline(always)]
fn not_negative(call: &str, arg: &str, v: i64, count: bool) -> Result<usize> {
    if v < 0 {
        return Err(negative(call, arg, v, count));
    }
    Ok(v as usize)
}

#[cold]
#[inline(never)]
fn negative(call: &str, arg: &str, v: i64, count: bool) -> MpiError {
    if count {
        MpiError::negative_count(call, arg, v)
    } else {
        MpiError::negative(call, arg, v)
    }
}

/// Roles `tag` and `tag_or_any`.
#[inline]
pub fn tag(call: &str, arg: &str, t: c_int, any_ok: bool) -> Result<c_int> {
    if (0..=TAG_UB).contains(&t) || (any_ok && t == c::MPI_ANY_TAG) {
        return Ok(t);
    }
    Err(MpiError::bad_tag(call, arg, t, TAG_UB))
}

#[inline]
pub fn nonnull<T>(call: &str, arg: &str, p: *const T) -> Result<()> {
    if p.is_null() {
        return Err(null_pointer(call, arg));
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn null_pointer(call: &str, arg: &str) -> MpiError {
    MpiError::null_pointer(call, arg)
}

#[inline]
pub fn nonnull_mut<T>(call: &str, arg: &str, p: *mut T) -> Result<()> {
    nonnull(call, arg, p as *const T)
}

// ----- output pointers -----

/// A checked (non-null) pointer to one value the call reads or writes.
pub struct Out<T> {
    p: *mut T,
}

impl<T: Copy> Out<T> {
    #[inline]
    pub fn put(&self, v: T) {
        // SAFETY: non-null (checked in `out`), and valid for one value by `out`'s contract.
        unsafe { self.p.write(v) }
    }

    #[inline]
    pub fn get(&self) -> T {
        // SAFETY: as in `put`.
        unsafe { self.p.read() }
    }
}

impl<T> Out<T> {
    pub fn ptr(&self) -> *mut T {
        self.p
    }
}

/// Role `out`: a pointer the call writes through (and may read first).
///
/// # Safety
/// `p`, when non-null, must be valid for reads and writes of one `T` for the whole call.
#[inline]
pub unsafe fn out<T>(call: &str, arg: &str, p: *mut T) -> Result<Out<T>> {
    nonnull_mut(call, arg, p)?;
    Ok(Out { p })
}

/// Role `out` where the forms of a call disagree on the type (`int *` / `MPI_Count *`).
pub struct CountOut {
    p: CountPtr,
    call: &'static str,
    arg: &'static str,
}

impl CountOut {
    #[inline]
    pub fn get(&self) -> i64 {
        // SAFETY: non-null and valid for one value (`count_out`'s contract).
        unsafe {
            match self.p {
                CountPtr::Int(p) => p.read() as i64,
                CountPtr::Aint(p) => p.read() as i64,
                CountPtr::Count(p) => p.read(),
            }
        }
    }

    /// Writes `v`; an `int` that cannot hold it is an error pointing at the `_c` form.
    #[inline]
    pub fn put(&self, v: i64) -> Result<()> {
        match self.p {
            CountPtr::Int(p) => {
                let Ok(v) = c_int::try_from(v) else { return Err(does_not_fit(self.call, self.arg, v)) };
                // SAFETY: as in `get`.
                unsafe { p.write(v) }
            }
            // SAFETY: as in `get`.
            CountPtr::Aint(p) => unsafe { p.write(v as isize) },
            // SAFETY: as in `get`.
            CountPtr::Count(p) => unsafe { p.write(v) },
        }
        Ok(())
    }

    /// Writes `v`, at most `INT_MAX` to an `int` (sizes of which the classic binding sees only
    /// that much).
    pub fn put_clamped(&self, v: i64) {
        let v = if matches!(self.p, CountPtr::Int(_)) { v.min(c_int::MAX as i64) } else { v };
        let _ = self.put(v);
    }

    /// Writes `v`, or `MPI_UNDEFINED` where an `int` cannot hold it (the standard's answer of
    /// the size queries).
    pub fn put_or_undefined(&self, v: i64) {
        let v = if matches!(self.p, CountPtr::Int(_)) && v > c_int::MAX as i64 { c::MPI_UNDEFINED as i64 } else { v };
        let _ = self.put(v);
    }
}

#[cold]
#[inline(never)]
fn does_not_fit(call: &str, arg: &str, v: i64) -> MpiError {
    MpiError::does_not_fit(call, arg, v)
}

/// Role `out` on a count whose type differs between the forms of a call.
///
/// # Safety
/// As [`out`].
#[inline]
pub unsafe fn count_out<T: Count>(call: &'static str, arg: &'static str, p: *mut T) -> Result<CountOut> {
    nonnull_mut(call, arg, p)?;
    Ok(CountOut { p: T::count_ptr(p), call, arg })
}

/// Role `out_or_null`: a pointer the call writes through unless it is NULL.
///
/// # Safety
/// As [`out`].
#[inline]
pub unsafe fn out_or_null<T>(p: *mut T) -> Option<Out<T>> {
    (!p.is_null()).then_some(Out { p })
}

/// Role `out_or_null` on a count whose type differs between the forms of a call.
///
/// # Safety
/// As [`out`].
#[inline]
pub unsafe fn count_out_or_null<T: Count>(call: &'static str, arg: &'static str, p: *mut T) -> Option<CountOut> {
    (!p.is_null()).then(|| CountOut { p: T::count_ptr(p), call, arg })
}

/// Role `status`: where a call reports a status, or `MPI_STATUS_IGNORE` (NULL).
#[derive(Clone, Copy)]
pub struct StatusOut {
    p: *mut MPI_Status,
}

impl StatusOut {
    /// # Safety
    /// `p`, when non-null, must be valid for writes of one status for the whole call.
    #[inline]
    pub unsafe fn new(p: *mut MPI_Status) -> StatusOut {
        StatusOut { p }
    }

    /// Writes `s` (its `MPI_ERROR` field only in `with_error`, as the multiple-completion calls
    /// do), unless the status is ignored.
    #[inline]
    pub fn put(self, s: &Status, with_error: bool) {
        // SAFETY: null or valid for one status (`new`'s contract).
        unsafe { put_status(self.p, s, with_error) }
    }
}

/// Role `statuses(len=N)`: an array of `N` statuses, or `MPI_STATUSES_IGNORE` (NULL).
pub struct Statuses {
    p: *mut MPI_Status,
    len: usize,
}

impl Statuses {
    /// # Safety
    /// `p`, when non-null, must be valid for writes of `len` statuses for the whole call.
    #[inline]
    pub unsafe fn new(p: *mut MPI_Status, len: usize) -> Statuses {
        Statuses { p, len }
    }

    /// Status `i` (below the length), with its `MPI_ERROR` field.
    #[inline]
    pub fn put(&self, i: usize, s: &Status) {
        assert!(i < self.len, "status {i} of an array of {}", self.len);
        if !self.p.is_null() {
            // SAFETY: `i` is within the `len` statuses `new`'s contract promises.
            unsafe { put_status(self.p.add(i), s, true) }
        }
    }
}

/// Role `string_out(max=N)`: a `char` buffer of `max` bytes the call writes a string into.
pub struct StrOut {
    p: *mut c_char,
    max: usize,
}

impl StrOut {
    /// Writes `text` (cut to fit, NUL-terminated) and its length to `len`, when given.
    pub fn write(&self, text: &str, len: Option<&Out<c_int>>) {
        let n = len.map_or(std::ptr::null_mut(), Out::ptr);
        // SAFETY: `string_out`'s contract: `max` writable bytes at `p`; `n` is null or checked.
        unsafe { cstr_out(text, self.p, self.max, n) }
    }
}

/// # Safety
/// `p`, when non-null, must be valid for writes of `max` bytes for the whole call.
#[inline]
pub unsafe fn string_out(call: &str, arg: &str, p: *mut c_char, max: usize) -> Result<StrOut> {
    nonnull_mut(call, arg, p)?;
    Ok(StrOut { p, max })
}

/// Copies `text` as a NUL-terminated string of at most `max` bytes (terminator included) to `out`
/// and its length to `len` (when non-null).
///
/// # Safety
/// `out` must be valid for writes of `max` bytes (`max` > 0), `len` null or valid for one int.
pub unsafe fn cstr_out(text: &str, out: *mut c_char, max: usize, len: *mut c_int) {
    let bytes = text.as_bytes();
    let n = bytes.len().min(max.saturating_sub(1));
    // SAFETY: the caller guarantees `max` writable bytes at `out`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out as *mut u8, n);
        *out.add(n) = 0;
        if !len.is_null() {
            *len = n as c_int;
        }
    }
}

// ----- input pointers -----

/// Role `nonnull`: a pointer that must not be null and is passed on as it is (a function
/// pointer, a `void *` that is really a `void **`).
#[inline]
pub fn nonnull_ptr<T>(call: &str, arg: &str, p: *mut T) -> Result<*mut T> {
    nonnull_mut(call, arg, p)?;
    Ok(p)
}

/// Role `string`: a NUL-terminated string (checked for null).
///
/// # Safety
/// `p`, when non-null, must point to a NUL-terminated string.
pub unsafe fn string(call: &str, arg: &str, p: *const c_char) -> Result<String> {
    // SAFETY: forwarded contract.
    unsafe { cstr_in(call, arg, p) }
}

/// Reads a NUL-terminated C string (checked for null).
///
/// # Safety
/// `p`, when non-null, must point to a NUL-terminated string.
pub unsafe fn cstr_in(call: &str, arg: &str, p: *const c_char) -> Result<String> {
    nonnull(call, arg, p)?;
    // SAFETY: non-null, NUL-terminated per the caller's contract.
    Ok(unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Role `array(len=N)`: `n` values at `p` (no pointer is needed when `n` is 0).
///
/// # Safety
/// `p`, when non-null, must point to `n` readable values that outlive `'a`.
#[inline]
pub unsafe fn array<'a, T>(call: &str, arg: &str, p: *const T, n: usize) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    nonnull(call, arg, p)?;
    // SAFETY: non-null, and `n` values per the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Role `array(len=N)` on counts or displacements whose type differs between the forms of a
/// call: 64-bit values, copied only from the `int` and `MPI_Aint` forms.
///
/// # Safety
/// As [`array`].
pub unsafe fn counts<'a, T: Count + 'a>(call: &str, arg: &str, p: *const T, n: usize) -> Result<Cow<'a, [i64]>> {
    // SAFETY: forwarded contract.
    let s: &'a [T] = unsafe { array(call, arg, p, n) }?;
    Ok(T::wide_slice(s))
}

/// Role `array_out(len=N)`: `n` values at `p` that the call reads and writes (no pointer is
/// needed when `n` is 0).
///
/// # Safety
/// `p`, when non-null, must point to `n` values, readable and writable for `'a`.
#[inline]
pub unsafe fn array_out<'a, T>(call: &str, arg: &str, p: *mut T, n: usize) -> Result<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    nonnull_mut(call, arg, p)?;
    // SAFETY: non-null, and `n` values per the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// Role `buf(count=N,datatype=D)`: a NULL buffer is `MPI_BOTTOM`, valid only for a datatype
/// whose data lies at absolute addresses (built from `MPI_Get_address`), never for one that
/// would touch the first page.
#[inline]
pub fn buf(call: &str, arg: &str, p: *const c_void, n: usize, lay: &Layout) -> Result<()> {
    if p.is_null() && n > 0 && lay.size > 0 && lay.true_lb < 4096 {
        return Err(MpiError::null_buffer(call, arg, n, type_name(lay)));
    }
    Ok(())
}

/// How messages name a datatype: its name, or "a derived datatype".
pub fn type_name(lay: &Layout) -> &'static str {
    if lay.name.is_empty() {
        "a derived datatype"
    } else {
        lay.name
    }
}

/// Bundle `data(buf=B,count=N,datatype=D)`: the data of a message, each part checked by its
/// own role (the buffer against the count and datatype).
pub struct Data {
    pub buf: *const c_void,
    pub count: usize,
    pub datatype: Dt,
}

impl Data {
    #[inline]
    pub fn new(buf: *const c_void, count: usize, datatype: Dt) -> Data {
        Data { buf, count, datatype }
    }
}

/// Bundle `message(buf=B,count=N,datatype=D,peer=R,tag=T)`: a message's data, the rank it
/// goes to or comes from and its tag, each checked by its own role.
pub struct Message {
    pub data: Data,
    pub peer: c_int,
    pub tag: c_int,
}

impl Message {
    #[inline]
    pub fn new(buf: *const c_void, count: usize, datatype: Dt, peer: c_int, tag: c_int) -> Message {
        Message { data: Data::new(buf, count, datatype), peer, tag }
    }
}

/// Bundle `matching(source=S,tag=T)`: which messages a probe matches (`MPI_ANY_SOURCE` and
/// `MPI_ANY_TAG` allowed by their roles).
#[derive(Clone, Copy)]
pub struct Matching {
    pub source: c_int,
    pub tag: c_int,
}

impl Matching {
    #[inline]
    pub fn new(source: c_int, tag: c_int) -> Matching {
        Matching { source, tag }
    }
}

/// Bundle `remote(rank=R,disp=D,count=N,datatype=T)`: where a one-sided operation lands, each
/// part checked by its own role.
pub struct Remote {
    pub rank: c_int,
    pub disp: isize,
    pub count: usize,
    pub datatype: Dt,
}

impl Remote {
    #[inline]
    pub fn new(rank: c_int, disp: isize, count: usize, datatype: Dt) -> Remote {
        Remote { rank, disp, count, datatype }
    }

    /// As the device takes it.
    pub fn target(&self) -> baton_core::rma::origin::Target<'_> {
        baton_core::rma::origin::Target {
            rank: self.rank,
            disp: self.disp as i64,
            count: self.count,
            layout: self.datatype.layout(),
        }
    }
}

/// Bundle `requests(count=N,handles=A)`: an array of `N` request handles (role `array_out`)
/// that a completion call reads and updates.
pub struct Requests<'a> {
    pub handles: &'a mut [usize],
}

impl<'a> Requests<'a> {
    #[inline]
    pub fn new(count: usize, handles: &'a mut [usize]) -> Requests<'a> {
        debug_assert_eq!(count, handles.len());
        Requests { handles }
    }
}

// ----- handles -----

/// Role `comm`: a live communicator.
#[inline]
pub fn comm(l: &'static Lib, call: &str, arg: &str, h: usize) -> Result<CommRef<'static>> {
    l.comm(call, h).map_err(|_| MpiError::invalid_handle(call, arg, HandleKind::Comm, h))
}

/// Role `intracomm`: a live intracommunicator.
pub fn intracomm(l: &'static Lib, call: &str, arg: &str, h: usize) -> Result<CommRef<'static>> {
    let cm = comm(l, call, arg, h)?;
    require_intra(call, arg, &cm)?;
    Ok(cm)
}

/// An `MPI_ERR_COMM` error unless `cm` is an intracommunicator (`arg` names it).
pub fn require_intra(call: &str, arg: &str, cm: &CommObj) -> Result<()> {
    if cm.core.is_inter() {
        return Err(MpiError::not_intracomm(call, arg));
    }
    Ok(())
}

/// Role `group`: a live group (`MPI_GROUP_EMPTY` included).
pub fn group(l: &Lib, call: &str, arg: &str, h: usize) -> Result<Arc<Group>> {
    l.group(call, h).map_err(|_| MpiError::invalid_handle(call, arg, HandleKind::Group, h))
}

/// Whether `h` is a predefined or live user-defined error handler.
pub fn errhandler_valid(l: &Lib, h: usize) -> bool {
    matches!(h, c::MPI_ERRORS_ARE_FATAL | c::MPI_ERRORS_RETURN | c::MPI_ERRORS_ABORT)
        || l.t().errhandlers.get(h).is_some()
}

/// Role `errhandler`: a predefined or live user-defined error handler.
pub fn errhandler(l: &Lib, call: &str, arg: &str, h: usize) -> Result<usize> {
    if !errhandler_valid(l, h) {
        return Err(MpiError::invalid_handle(call, arg, HandleKind::Errhandler, h));
    }
    Ok(h)
}

/// Role `win`: a live window.
pub fn win(l: &Lib, call: &str, arg: &str, h: usize) -> Result<crate::state::WinRef> {
    l.win(call, arg, h)
}

impl Ranks for crate::state::WinObj {
    fn ranks(&self) -> (i32, bool) {
        (self.core.size_of_group(), false)
    }
    fn of(&self) -> &'static str {
        "the window's group"
    }
}

impl Ranks for crate::state::WinRef {
    fn ranks(&self) -> (i32, bool) {
        (**self).ranks()
    }
    fn of(&self) -> &'static str {
        (**self).of()
    }
}

/// Role `op`: a predefined operation or a live user-defined one.
pub fn op(l: &Lib, call: &str, arg: &str, h: usize) -> Result<usize> {
    if baton_core::op::Op::from_handle(h).is_some() || l.t().ops.get(h).is_some() {
        return Ok(h);
    }
    Err(MpiError::invalid_handle(call, arg, HandleKind::Op, h))
}

/// A datatype argument. The layout is borrowed from the predefined table, or kept alive by
/// `owner` for a user-defined type; plain words, so that it passes in registers.
#[derive(Clone)]
pub struct Dt {
    pub handle: usize,
    layout: std::ptr::NonNull<Layout>,
    owner: Option<Arc<Layout>>,
    /// 1: predefined, or user-defined and committed (usable for communication). A word, not a
    /// `bool`: a `Result<Dt>` then moves as whole words, never byte by byte.
    committed: usize,
}

impl Dt {
    fn predefined(h: usize, lay: &'static Arc<Layout>) -> Dt {
        Dt { handle: h, layout: std::ptr::NonNull::from(&**lay), owner: None, committed: 1 }
    }

    fn user(h: usize, lay: Arc<Layout>, committed: bool) -> Dt {
        Dt { handle: h, layout: std::ptr::NonNull::from(&*lay), owner: Some(lay), committed: committed as usize }
    }

    pub fn layout(&self) -> &Layout {
        self
    }

    pub fn is_predefined(&self) -> bool {
        self.owner.is_none()
    }

    /// Predefined, or user-defined and committed: usable for communication.
    pub fn committed(&self) -> bool {
        self.committed != 0
    }

    /// The layout as a counted reference (to keep beyond the call).
    pub fn arc(&self) -> Arc<Layout> {
        match &self.owner {
            Some(a) => a.clone(),
            None => self.static_arc().clone(),
        }
    }

    /// Like [`arc`](Self::arc), handing over the reference a user-defined type holds.
    #[inline]
    pub fn into_arc(self) -> Arc<Layout> {
        match self.owner {
            Some(a) => a,
            None => self.static_arc().clone(),
        }
    }

    /// The layout as a buffer holds it: a predefined type's borrowed, a user type's held.
    #[inline]
    pub fn into_layout_ref(self) -> baton_core::device::LayoutRef {
        match self.owner {
            Some(a) => baton_core::device::LayoutRef::Held(a),
            None => baton_core::device::LayoutRef::Predefined(self.static_arc()),
        }
    }

    fn static_arc(&self) -> &'static Arc<Layout> {
        match predefined(self.handle) {
            Some(a) => a,
            None => null_layout(),
        }
    }
}

impl std::ops::Deref for Dt {
    type Target = Layout;
    fn deref(&self) -> &Layout {
        // SAFETY: `layout` points into a predefined layout (static) or into `owner`'s
        // allocation, which lives as long as `self`.
        unsafe { self.layout.as_ref() }
    }
}

/// Role `datatype`: any valid datatype, committed or not.
#[inline]
pub fn datatype(call: &str, arg: &str, h: usize) -> Result<Dt> {
    match predefined(h) {
        Some(l) => Ok(Dt::predefined(h, l)),
        None => user_datatype(call, arg, h, false),
    }
}

/// Role `datatype_committed`: a datatype usable for communication.
#[inline]
pub fn datatype_committed(call: &str, arg: &str, h: usize) -> Result<Dt> {
    match predefined(h) {
        Some(l) => Ok(Dt::predefined(h, l)),
        None => user_datatype(call, arg, h, true),
    }
}

/// Role `datatype_or_null(count=N,peer=R)`: as `datatype_committed`, and also
/// `MPI_DATATYPE_NULL` for a message that moves nothing (count 0, peer `MPI_PROC_NULL`), which
/// applications pass when a neighbour is missing.
#[inline]
pub fn datatype_or_null(call: &str, arg: &str, h: usize, count: usize, peer: c_int) -> Result<Dt> {
    if h == c::MPI_DATATYPE_NULL && count == 0 && peer == c::MPI_PROC_NULL {
        return Ok(Dt::predefined(h, null_layout()));
    }
    datatype_committed(call, arg, h)
}

/// The layout `MPI_DATATYPE_NULL` stands for where it is allowed: no data.
fn null_layout() -> &'static Arc<Layout> {
    static NULL: std::sync::OnceLock<Arc<Layout>> = std::sync::OnceLock::new();
    NULL.get_or_init(|| Arc::new(Layout::basic("MPI_DATATYPE_NULL", 0)))
}

/// The user-defined datatypes' path of [`datatype`] and [`datatype_committed`], kept out of
/// line so that the predefined path inlines into every entry point.
#[inline(never)]
fn user_datatype(call: &str, arg: &str, h: usize, need_commit: bool) -> Result<Dt> {
    let found = if h == c::MPI_DATATYPE_NULL { None } else { lib_any().and_then(|l| l.t().datatypes.get(h).cloned()) };
    match found {
        Some((_, false)) if need_commit => Err(MpiError::not_committed(call, arg, h)),
        Some((lay, committed)) => Ok(Dt::user(h, lay, committed)),
        None => Err(MpiError::invalid_handle(call, arg, HandleKind::Datatype, h)),
    }
}

// ----- ranks -----

/// What a rank argument ranges over: a communicator (its remote group when it is an
/// intercommunicator) or a group.
pub trait Ranks {
    /// (size, inter)
    fn ranks(&self) -> (i32, bool);
    /// How a message names the range.
    fn of(&self) -> &'static str;
}

impl Ranks for CommObj {
    fn ranks(&self) -> (i32, bool) {
        (self.core.peer_size(), self.core.is_inter())
    }
    fn of(&self) -> &'static str {
        if self.core.is_inter() {
            "the remote group of an intercommunicator"
        } else {
            "a communicator"
        }
    }
}

impl Ranks for Group {
    fn ranks(&self) -> (i32, bool) {
        (self.size(), false)
    }
    fn of(&self) -> &'static str {
        "a group"
    }
}

impl Ranks for CommRef<'_> {
    fn ranks(&self) -> (i32, bool) {
        (**self).ranks()
    }
    fn of(&self) -> &'static str {
        (**self).of()
    }
}

impl Ranks for Arc<Group> {
    fn ranks(&self) -> (i32, bool) {
        (**self).ranks()
    }
    fn of(&self) -> &'static str {
        (**self).of()
    }
}

/// Role `rank(in=X)`: a rank of `X`; `rank_or_null` also takes `MPI_PROC_NULL`, `rank_or_any`
/// `MPI_PROC_NULL` and `MPI_ANY_SOURCE`.
#[inline]
pub fn rank<R: Ranks + ?Sized>(call: &str, arg: &str, r: c_int, set: &R, null_ok: bool, any_ok: bool) -> Result<c_int> {
    let (n, _) = set.ranks();
    if (0..n).contains(&r) || (null_ok && r == c::MPI_PROC_NULL) || (any_ok && r == c::MPI_ANY_SOURCE) {
        return Ok(r);
    }
    Err(MpiError::rank_out_of_range_of(call, arg, r, n, set.of()))
}

/// Role `root(in=X)`: a rank of `X`; on an intercommunicator also `MPI_ROOT` (this process is
/// the root) and `MPI_PROC_NULL` (another process of its group is).
#[inline]
pub fn root<R: Ranks + ?Sized>(call: &str, r: c_int, set: &R) -> Result<c_int> {
    let (n, inter) = set.ranks();
    if (0..n).contains(&r) || (inter && (r == c::MPI_ROOT || r == c::MPI_PROC_NULL)) {
        return Ok(r);
    }
    Err(MpiError::root_out_of_range(call, r, n, set.of()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CX: Call = Call::new("MPI_Test_call", false);

    #[test]
    fn counts_and_tags_name_the_call_and_argument() {
        assert_eq!(count(CX.name, "count", 3i64).unwrap(), 3);
        let e = count(CX.name, "count", -2).unwrap_err();
        assert_eq!((e.class, e.msg.as_str()), (c::MPI_ERR_COUNT, "MPI_Test_call: count -2 is negative"));
        assert_eq!(nonneg(CX.name, "n", -1isize).unwrap_err().class, c::MPI_ERR_ARG);
        assert_eq!(tag(CX.name, "tag", c::MPI_ANY_TAG, true).unwrap(), c::MPI_ANY_TAG);
        let e = tag(CX.name, "tag", c::MPI_ANY_TAG, false).unwrap_err();
        assert_eq!(e.class, c::MPI_ERR_TAG);
        assert!(e.msg.starts_with("MPI_Test_call: tag "), "{}", e.msg);
    }

    #[test]
    fn count_outputs_say_when_an_int_cannot_hold_the_value() {
        let mut small: c_int = 0;
        // SAFETY: a live local.
        let o = unsafe { count_out(CX.name, "size", &mut small as *mut c_int) }.unwrap();
        o.put(7).unwrap();
        assert_eq!(o.get(), 7);
        let e = o.put(1 << 40).unwrap_err();
        assert_eq!(e.class, c::MPI_ERR_COUNT);
        assert!(e.msg.contains("use MPI_Test_call_c"), "{}", e.msg);
        o.put_or_undefined(1 << 40);
        assert_eq!(small, c::MPI_UNDEFINED);
        let mut big: i64 = 0;
        // SAFETY: a live local.
        let o = unsafe { count_out(CX.name, "size", &mut big as *mut i64) }.unwrap();
        o.put(1 << 40).unwrap();
        assert_eq!(big, 1 << 40);
        // SAFETY: null is checked before any use.
        let e = unsafe { count_out(CX.name, "size", std::ptr::null_mut::<i64>()) }.err().unwrap();
        assert_eq!(e.msg, "MPI_Test_call: size is a null pointer");
    }

    #[test]
    fn arrays_need_a_pointer_only_when_not_empty() {
        // SAFETY: null with length 0 is never read.
        assert!(unsafe { array::<c_int>(CX.name, "ranks", std::ptr::null(), 0) }.unwrap().is_empty());
        // SAFETY: null is checked before any read.
        let e = unsafe { array::<c_int>(CX.name, "ranks", std::ptr::null(), 2) }.unwrap_err();
        assert_eq!(e.class, c::MPI_ERR_ARG);
        let v = [1i64, -2];
        // SAFETY: two live values.
        let w = unsafe { counts(CX.name, "displs", v.as_ptr(), 2) }.unwrap();
        assert!(matches!(w, Cow::Borrowed(_)));
        let v = [1 as c_int, -2];
        // SAFETY: two live values.
        assert_eq!(&*unsafe { counts(CX.name, "displs", v.as_ptr(), 2) }.unwrap(), &[1i64, -2]);
    }

    #[test]
    fn datatypes_null_and_garbage_are_type_errors() {
        let e = datatype(CX.name, "oldtype", c::MPI_DATATYPE_NULL).err().unwrap();
        assert_eq!((e.class, e.msg.as_str()), (c::MPI_ERR_TYPE, "MPI_Test_call: oldtype is MPI_DATATYPE_NULL"));
        let e = datatype(CX.name, "oldtype", 0x1234_5678).err().unwrap();
        assert!(e.msg.contains("oldtype 0x12345678 is not a valid datatype handle"), "{}", e.msg);
        let dt = datatype_committed(CX.name, "datatype", c::MPI_INT).unwrap();
        assert!(dt.is_predefined() && dt.size == 4);
        assert!(buf(CX.name, "buf", std::ptr::null(), 1, dt.layout()).is_err());
        assert!(buf(CX.name, "buf", std::ptr::null(), 0, dt.layout()).is_ok());
    }

    #[test]
    fn datatype_null_moves_nothing_only_to_or_from_proc_null() {
        let dt = datatype_or_null(CX.name, "datatype", c::MPI_DATATYPE_NULL, 0, c::MPI_PROC_NULL).unwrap();
        assert_eq!((dt.size, dt.span(0)), (0, (0, 0)));
        for (count, peer) in [(1, c::MPI_PROC_NULL), (0, 0)] {
            let e = datatype_or_null(CX.name, "datatype", c::MPI_DATATYPE_NULL, count, peer).err().unwrap();
            assert_eq!((e.class, e.msg.as_str()), (c::MPI_ERR_TYPE, "MPI_Test_call: datatype is MPI_DATATYPE_NULL"));
        }
        assert_eq!(datatype_or_null(CX.name, "datatype", c::MPI_INT, 0, c::MPI_PROC_NULL).unwrap().size, 4);
    }

    #[test]
    fn ignored_statuses_and_optional_outputs_are_not_written() {
        let s = Status { source: 3, tag: 7, error: 5, bytes: 12, cancelled: false };
        // SAFETY: null is MPI_STATUS(ES)_IGNORE and never written.
        unsafe { StatusOut::new(std::ptr::null_mut()) }.put(&s, false);
        // SAFETY: as above.
        unsafe { Statuses::new(std::ptr::null_mut(), 2) }.put(1, &s);
        let mut two = [MPI_Status::default(); 2];
        // SAFETY: two live statuses.
        let st = unsafe { Statuses::new(two.as_mut_ptr(), 2) };
        st.put(1, &s);
        assert_eq!((two[1].MPI_SOURCE, two[1].MPI_TAG, two[1].MPI_ERROR, two[1].bytes()), (3, 7, 5, 12));
        assert_eq!(two[0].MPI_SOURCE, 0);
        // SAFETY: null is never written.
        assert!(unsafe { out_or_null::<c_int>(std::ptr::null_mut()) }.is_none());
        let mut n: c_int = 0;
        // SAFETY: a live local.
        let o = unsafe { count_out_or_null(CX.name, "size", &mut n as *mut c_int) }.unwrap();
        o.put_clamped(1 << 40);
        assert_eq!(n, c_int::MAX);
    }
}
