//! Views of kernel slice arguments as the body sees them.
//!
//! Every GPU thread runs the body. If each held a `&mut [T]` to the whole output, thousands of
//! live `&mut` to one buffer would exist at once: undefined behaviour in Rust's model, whatever
//! the threads actually touch. So an argument declared `&mut [T]` reaches the body as a
//! [`SliceMut<T>`]: a pointer and a length, indexed by an [`Own`] — an element index no
//! other thread of the launch holds ([`thread::index`](crate::thread::index),
//! [`thread::grid_stride`](crate::thread::grid_stride)) — so safe code cannot make two
//! threads touch one element. Writes at other indices (a tile of a matrix, a block's partial
//! sum, a scatter) are `unsafe` ([`SliceMut::write`], [`SliceMut::read`],
//! [`SliceMut::get_unchecked_mut`]), with the contract that no other thread of the launch
//! accesses the element; the simulator checks it. Read-only `&[T]` arguments are real shared
//! slices: many `&` may coexist, and the launcher's borrows keep the host from writing the
//! buffer while the launch is in flight. `docs/write-model.md` has the reasoning.

use crate::own::{Own, OwnedIndex};
use core::marker::PhantomData;
use core::ops::{Index, IndexMut};

/// A kernel's view of a `&mut [T]` argument: one thread's right to read and write the
/// elements it owns.
///
/// ```
/// use berth_device::{Slice, SliceMut, thread};
///
/// /// The body of `fn axpy(a: f32, x: &[f32], y: &mut [f32])` as it sees its arguments.
/// fn axpy(a: f32, x: Slice<'_, f32>, mut y: SliceMut<'_, f32>) {
///     for i in thread::grid_stride(y.len()) {
///         y[i] += a * x[i];
///     }
/// }
///
/// let (x, mut y) = ([1.0f32, 2.0], [10.0f32, 20.0]);
/// // SAFETY: the arrays outlive the views; this one thread is the whole launch.
/// axpy(2.0, unsafe { Slice::from_raw(x.as_ptr(), 2) }, unsafe {
///     SliceMut::from_raw(y.as_mut_ptr(), 2)
/// });
/// assert_eq!(y, [12.0, 24.0]);
/// ```
pub struct SliceMut<'a, T> {
    ptr: *mut T,
    len: usize,
    _life: PhantomData<&'a [T]>,
}

impl<'a, T> SliceMut<'a, T> {
    /// Build the view of a kernel argument.
    ///
    /// # Safety
    /// 1. `ptr` is valid for reads and writes of `len` elements of `T` for `'a`, and aligned
    ///    (it may dangle when `len == 0`).
    /// 2. Nothing outside the launch's threads accesses the memory during `'a`, and each of
    ///    them builds at most one view of it.
    ///
    /// ```
    /// use berth_device::SliceMut;
    /// let mut data = [0u8; 16];
    /// // SAFETY: `data` outlives the view, and nothing else reads or writes it meanwhile. (In a
    /// // kernel the launcher builds the view of each `&mut [T]` argument.)
    /// let out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// assert_eq!(out.len(), 16);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        Self {
            ptr,
            len,
            _life: PhantomData,
        }
    }

    /// Number of elements.
    ///
    /// ```
    /// # use berth_device::{SliceMut, thread};
    /// # let mut data = [1u32, 2, 3];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// assert_eq!(out.len(), 3);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no elements.
    ///
    /// ```
    /// use berth_device::SliceMut;
    /// // SAFETY: a view of no elements may dangle.
    /// let out = unsafe { SliceMut::<f32>::from_raw(core::ptr::NonNull::dangling().as_ptr(), 0) };
    /// assert!(out.is_empty());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element this thread owns at `i`, or `None` past the end.
    ///
    /// ```
    /// # use berth_device::{SliceMut, thread};
    /// # let mut data = [1u32, 2, 3];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [3, 0, 0], block: [0, 0, 0], block_dim: [4, 1, 1], grid_dim: [1, 1, 1],
    /// # });
    /// // Thread 3 of a launch of 4 threads over 3 elements: past the end.
    /// assert_eq!(out.get(thread::index()), None);
    /// ```
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn get(&self, i: Own) -> Option<&T> {
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check (also for `Index`)
        if i.get() < self.len {
            crate::host::note_element(self.ptr.wrapping_add(i.get()), crate::host::Access::Read);
        }
        // SAFETY: bounds checked; valid per from_raw's contract; no other thread holds `i`
        // (`Own`'s invariant), so nothing writes the element while the `&T` lives.
        (i.get() < self.len).then(|| unsafe { &*self.ptr.add(i.get()) })
    }

    /// The element this thread owns at `i` for writing, or `None` past the end.
    ///
    /// ```
    /// # use berth_device::{SliceMut, thread};
    /// # let mut data = [1u32, 2, 3];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// // The tail check and the write in one step (outside an executor: thread 0).
    /// if let Some(v) = out.get_mut(thread::index()) {
    ///     *v *= 10;
    /// }
    /// assert_eq!(data, [10, 2, 3]);
    /// ```
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub fn get_mut(&mut self, i: Own) -> Option<&mut T> {
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check (also for `IndexMut`)
        if i.get() < self.len {
            crate::host::note_element(self.ptr.wrapping_add(i.get()), crate::host::Access::Write);
        }
        // SAFETY: as in `get`; `&mut self` keeps this thread's own references unique.
        (i.get() < self.len).then(|| unsafe { &mut *self.ptr.add(i.get()) })
    }

    /// Read element `i`, which this thread need not own (bounds-checked).
    ///
    /// # Safety
    /// No other thread of the launch writes element `i` during the launch (one that only
    /// reads it is fine).
    ///
    /// ```
    /// # use berth_device::{SliceMut, thread};
    /// # let mut data = [1u32, 2, 3];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// // A neighbour's element: thread 0 reads element 2.
    /// // SAFETY: no thread of this launch writes element 2.
    /// let right = unsafe { out.read(2) };
    /// assert_eq!(right, 3);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read(&self, i: usize) -> T
    where
        T: Copy,
    {
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check
        if i < self.len {
            crate::host::note_element(self.ptr.wrapping_add(i), crate::host::Access::Read);
        }
        // SAFETY: in bounds (checked by `then`); valid per from_raw's contract; no concurrent
        // write (the caller's contract).
        match (i < self.len).then(|| unsafe { &*self.ptr.add(i) }) {
            Some(v) => *v,
            None => out_of_bounds(i, self.len),
        }
    }

    /// Write element `i`, which this thread need not own (bounds-checked): a tile of a
    /// matrix, a block's slot, a scatter.
    ///
    /// # Safety
    /// No other thread of the launch reads or writes element `i` during the launch.
    ///
    /// ```
    /// # use berth_device::{SliceMut, thread};
    /// # let mut data = [1u32, 2, 3];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// // A scatter: the thread writes the element its own computation names.
    /// let target = (thread::index() + 2) % out.len();
    /// // SAFETY: the targets are a permutation of the threads' indices: no two threads share one.
    /// unsafe { out.write(target, 7) };
    /// assert_eq!(data, [1, 2, 7]);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&mut self, i: usize, v: T) {
        let len = self.len;
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check
        if i < len {
            crate::host::note_element(self.ptr.wrapping_add(i), crate::host::Access::Write);
        }
        // SAFETY: in bounds (checked by `then`); valid per from_raw's contract; this thread is
        // the element's only user (the caller's contract).
        match (i < len).then(|| unsafe { &mut *self.ptr.add(i) }) {
            // The old value is overwritten, not dropped: elements are `DeviceCopy` (plain
            // data) in every view the launcher builds.
            Some(slot) => *slot = v,
            None => out_of_bounds(i, len),
        }
    }

    /// The element at `i` without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`, and no other thread of the launch writes element `i` during the
    /// launch.
    ///
    /// ```
    /// # use berth_device::{SliceMut, thread};
    /// # let mut data = [1u32, 2, 3];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// // SAFETY: 1 < 3, and no thread of this launch writes element 1.
    /// assert_eq!(unsafe { *out.get_unchecked(1) }, 2);
    /// ```
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn get_unchecked(&self, i: usize) -> &T {
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check
        crate::host::note_element(self.ptr.wrapping_add(i), crate::host::Access::Read);
        // SAFETY: in bounds and unwritten by others by the caller's contract; valid per
        // from_raw's contract.
        unsafe { &*self.ptr.add(i) }
    }

    /// The element at `i` for writing, without a bounds check.
    ///
    /// # Safety
    /// `i < self.len()`, and no other thread of the launch reads or writes element `i`
    /// during the launch.
    ///
    /// ```
    /// # use berth_device::{SliceMut, thread};
    /// # let mut data = [1u32, 2, 3];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// // SAFETY: 1 < 3, and this thread is the only one that touches element 1.
    /// unsafe { *out.get_unchecked_mut(1) += 40 };
    /// assert_eq!(data, [1, 42, 3]);
    /// ```
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn get_unchecked_mut(&mut self, i: usize) -> &mut T {
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check
        crate::host::note_element(self.ptr.wrapping_add(i), crate::host::Access::Write);
        // SAFETY: as in `get_unchecked`; `&mut self` keeps this thread's references unique.
        unsafe { &mut *self.ptr.add(i) }
    }

    /// The first `rows * cols` elements as a row-major `rows × cols`
    /// [`MatrixMut`](crate::matrix::MatrixMut), for a thread that writes a tile of a result:
    /// the shape is checked against the length once, here, and
    /// [`tile_mut`](crate::matrix::MatrixMut::tile_mut) checks a whole tile at once.
    ///
    /// # Panics
    /// If the slice is shorter than `rows * cols` (as an index out of bounds: the matrix's
    /// last element), or `rows * cols` overflows.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// let mut data = [0f32; 8];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(2, 4);
    /// // SAFETY: this thread alone touches element (1, 3).
    /// unsafe { m.write(1, 3, 1.5) };
    /// assert_eq!(data[7], 1.5);
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn matrix_mut(&mut self, rows: usize, cols: usize) -> crate::matrix::MatrixMut<'_, T> {
        crate::matrix::checked_shape(rows, cols, self.len);
        // SAFETY: `rows * cols <= len` elements (checked_shape) from `ptr` are valid for reads and writes for as long
        // as this view (from_raw's contract), which `&mut self` borrows.
        unsafe { crate::matrix::MatrixMut::from_raw(self.ptr, rows, cols) }
    }

    /// Raw pointer to the first element, for intrinsics (vector loads and stores). Using it
    /// is `unsafe` and bound by the same contract as [`SliceMut::write`].
    ///
    /// ```
    /// # use berth_device::{SliceMut, thread};
    /// # let mut data = [1u32, 2, 3];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let p = out.as_mut_ptr();
    /// // SAFETY: elements 1 and 2 are in bounds and this thread is the only one that touches
    /// // them (`write`'s contract).
    /// unsafe { p.add(1).cast::<[u32; 2]>().write_unaligned([8, 9]) };
    /// assert_eq!(data, [1, 8, 9]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }
}

impl<T, I: OwnedIndex> Index<I> for SliceMut<'_, T> {
    type Output = T;
    #[inline(always)]
    #[track_caller]
    fn index(&self, i: I) -> &T {
        let i = Own::new(i.index());
        match self.get(i) {
            Some(v) => v,
            None => out_of_bounds(i.get(), self.len),
        }
    }
}

impl<T, I: OwnedIndex> IndexMut<I> for SliceMut<'_, T> {
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, i: I) -> &mut T {
        let i = Own::new(i.index());
        let len = self.len;
        match self.get_mut(i) {
            Some(v) => v,
            None => out_of_bounds(i.get(), len),
        }
    }
}

use crate::panic::index_out_of_bounds as out_of_bounds;

/// A kernel's view of a `&[T]` argument: a shared slice (it derefs to `&[T]`, so every slice
/// method works), whose indexing reports failures without `core::fmt`.
///
/// Why not a plain `&[T]`: `core`'s bounds check formats its message, and merely linking
/// `core::fmt`'s integer formatting raises the register count of every kernel that indexes a
/// slice from ~10 to ~56 (ptxas sizes a kernel for everything it may call), which halves
/// occupancy. [`Slice`]'s `Index` records the index and length for the host directly.
///
/// ```
/// use berth_device::Slice;
/// let weights = [0.5f32, 0.25, 0.25];
/// // SAFETY: `weights` outlives the view and is not written meanwhile.
/// let w = unsafe { Slice::from_raw(weights.as_ptr(), weights.len()) };
/// // Indexing, and every method of `&[T]`.
/// assert_eq!((w[0], w.len(), w.iter().sum::<f32>()), (0.5, 3, 1.0));
/// assert_eq!(w.iter().position(|&x| x < 0.5), Some(1));
/// ```
#[derive(Clone, Copy)]
pub struct Slice<'a, T> {
    inner: &'a [T],
}

impl<'a, T> Slice<'a, T> {
    /// Build the view of a kernel argument.
    ///
    /// # Safety
    /// `ptr` is valid for reads of `len` elements for `'a` and aligned (or anything when
    /// `len == 0`), and nothing writes the memory during `'a`.
    ///
    /// ```
    /// use berth_device::Slice;
    /// let table = [1u16, 2, 3];
    /// // SAFETY: `table` outlives the view and nothing writes it meanwhile.
    /// let t = unsafe { Slice::from_raw(table.as_ptr(), table.len()) };
    /// assert_eq!(t[2], 3);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *const T, len: usize) -> Self {
        // SAFETY: forwarded contract.
        Slice {
            inner: unsafe { slice_from_raw(ptr, len) },
        }
    }

    /// The underlying shared slice.
    ///
    /// ```
    /// use berth_device::Slice;
    /// let table = [1u16, 2, 3];
    /// // SAFETY: `table` outlives the view and nothing writes it meanwhile.
    /// let t = unsafe { Slice::from_raw(table.as_ptr(), table.len()) };
    /// let s: &[u16] = t.as_slice(); // outlives `t`: the argument's lifetime
    /// assert_eq!(s, &[1, 2, 3]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn as_slice(&self) -> &'a [T] {
        self.inner
    }

    /// The first `len` elements, as a view of their own. An input that must be at least as
    /// long as the output: `let a = a.prefix(out.len());` once at the top of the kernel, and
    /// the optimiser, knowing `a.len()` is `out.len()`, drops the checks of the reads below
    /// that the guard on the output's length already proves (`a[i]`, `a[i - 1]`, `a[i + 1]`
    /// inside `0 < i < n - 1`): the loads are then as nvcc emits them.
    ///
    /// # Panics
    /// If the slice has fewer than `len` elements, as an index out of bounds (the last
    /// element asked for), without `core::fmt`.
    ///
    /// ```
    /// use berth_device::Slice;
    /// let table = [1u16, 2, 3, 4];
    /// // SAFETY: `table` outlives the view and nothing writes it meanwhile.
    /// let t = unsafe { Slice::from_raw(table.as_ptr(), table.len()) };
    /// let head = t.prefix(2);
    /// assert_eq!((head.len(), head[1]), (2, 2));
    /// assert!(std::panic::catch_unwind(|| t.prefix(5)).is_err());
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn prefix(self, len: usize) -> Slice<'a, T> {
        match self.inner.get(..len) {
            Some(inner) => Slice { inner },
            // `len > self.len() >= 0`: element `len - 1` is the first one missing.
            None => out_of_bounds(len - 1, self.inner.len()),
        }
    }

    /// The first `rows * cols` elements as a row-major `rows × cols`
    /// [`Matrix`](crate::Matrix): checked against the length once, here, so that a
    /// [`Matrix::tile`](crate::Matrix::tile) needs one check per tile, and its elements none
    /// the optimiser cannot prove.
    ///
    /// # Panics
    /// As [`Matrix::new`](crate::Matrix::new): if the slice is shorter than `rows * cols`.
    ///
    /// ```
    /// use berth_device::Slice;
    /// let data: Vec<f32> = (0..6).map(|x| x as f32).collect();
    /// // SAFETY: `data` outlives the view and nothing writes it meanwhile.
    /// let s = unsafe { Slice::from_raw(data.as_ptr(), data.len()) };
    /// let m = s.matrix(2, 3);
    /// assert_eq!((m[(1, 2)], m.tile::<2, 2>(0, 1)[(1, 0)]), (5.0, 4.0));
    /// assert!(std::panic::catch_unwind(|| s.matrix(3, 3)).is_err());
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn matrix(self, rows: usize, cols: usize) -> crate::Matrix<'a, T> {
        crate::Matrix::new(self.inner, rows, cols)
    }
}

impl<T> core::ops::Deref for Slice<'_, T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        self.inner
    }
}

impl<T> Index<usize> for Slice<'_, T> {
    type Output = T;
    #[inline(always)]
    #[track_caller]
    fn index(&self, i: usize) -> &T {
        match self.inner.get(i) {
            Some(v) => v,
            None => out_of_bounds(i, self.inner.len()),
        }
    }
}

impl<T> Index<Own> for Slice<'_, T> {
    type Output = T;
    #[inline(always)]
    #[track_caller]
    fn index(&self, i: Own) -> &T {
        &self[i.get()]
    }
}

impl<'a, T> IntoIterator for Slice<'a, T> {
    type Item = &'a T;
    type IntoIter = core::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.inner.iter()
    }
}

/// Build the body's `&[T]` from a kernel parameter pair.
///
/// # Safety
/// `ptr` is valid for reads of `len` elements for `'a`, aligned (or dangling with `len == 0`,
/// in which case a null pointer is also accepted), and nothing writes the memory during `'a`.
///
/// ```
/// use berth_device::slice::slice_from_raw;
/// let data = [4u32, 5];
/// // SAFETY: `data` outlives the slice and nothing writes it meanwhile.
/// let s = unsafe { slice_from_raw(data.as_ptr(), 2) };
/// assert_eq!(s, &[4, 5]);
/// // An empty argument may come as a null pointer.
/// // SAFETY: zero elements.
/// assert!(unsafe { slice_from_raw::<u32>(core::ptr::null(), 0) }.is_empty());
/// ```
#[inline(always)]
pub unsafe fn slice_from_raw<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract above.
    unsafe { core::slice::from_raw_parts(ptr, len) }
}

/// A kernel's view of an `#[auto] &[T]` argument: indexed over the argument's whole length,
/// but a launch may have made only a range of it available — when its access hint is
/// `Touch::Range` and the cost model chose to copy just that range to the device. An index
/// outside the available range stops the kernel with its location (like an index out of
/// bounds), whatever the model chose, so a wrong hint fails the same way on every machine
/// instead of reading memory that was never copied.
///
/// Not a `&[T]`: a whole-length slice would claim memory that may not be there. Use
/// [`Window::get`], indexing, [`Window::as_slice`] (the whole argument, when available) or
/// [`Window::available_slice`].
///
/// ```
/// use berth_device::Window;
/// // Rows 1 and 2 of a 4-row table of 2 columns (a `Touch::Range` hint of elements 2..6).
/// let staged = [20u32, 21, 30, 31];
/// // SAFETY: `staged` holds elements 2..6 of the 8-element argument and outlives the view.
/// let table = unsafe { Window::from_raw(staged.as_ptr(), 8, 2, 6) };
/// let row = |r: usize| &table[r * 2..(r + 1) * 2];
/// assert_eq!((row(1), row(2)), (&[20, 21][..], &[30, 31][..]));
/// assert_eq!(table.get(0), None); // not available to this launch
/// ```
pub struct Window<'a, T> {
    /// Element `lo` of the argument.
    ptr: *const T,
    len: usize,
    lo: usize,
    hi: usize,
    _life: PhantomData<&'a [T]>,
}

impl<'a, T> Window<'a, T> {
    /// Build the view of a kernel argument.
    ///
    /// # Safety
    /// `lo <= hi <= len`; `ptr` (element `lo` of the argument) is valid for reads of
    /// `hi - lo` elements for `'a`, aligned, and nothing writes them during `'a`.
    ///
    /// ```
    /// use berth_device::Window;
    /// let staged = [30u32, 40, 50];
    /// // SAFETY: `staged` holds elements 3..6 of a 10-element argument, and outlives the view.
    /// let w = unsafe { Window::from_raw(staged.as_ptr(), 10, 3, 6) };
    /// assert_eq!(w[4], 40);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *const T, len: usize, lo: usize, hi: usize) -> Self {
        Window {
            ptr,
            len,
            lo,
            hi,
            _life: PhantomData,
        }
    }

    /// Number of elements of the whole argument.
    ///
    /// ```
    /// use berth_device::Window;
    /// let staged = [30u32, 40, 50];
    /// // SAFETY: elements 3..6 of a 10-element argument; `staged` outlives the view.
    /// let w = unsafe { Window::from_raw(staged.as_ptr(), 10, 3, 6) };
    /// assert_eq!(w.len(), 10); // the whole argument, not what is available
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the argument has no elements.
    ///
    /// ```
    /// use berth_device::Window;
    /// // SAFETY: an empty argument: nothing is read.
    /// let w = unsafe { Window::<u8>::from_raw(core::ptr::null(), 0, 0, 0) };
    /// assert!(w.is_empty());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The indices this launch can read: all of them, unless its hint named a range.
    ///
    /// ```
    /// use berth_device::Window;
    /// let staged = [30u32, 40, 50];
    /// // SAFETY: elements 3..6 of a 10-element argument; `staged` outlives the view.
    /// let w = unsafe { Window::from_raw(staged.as_ptr(), 10, 3, 6) };
    /// let sum: u32 = w.available().map(|i| w[i]).sum();
    /// assert_eq!((w.available(), sum), (3..6, 120));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn available(&self) -> core::ops::Range<usize> {
        self.lo..self.hi
    }

    /// The element at `i`, or `None` outside [`Window::available`].
    ///
    /// ```
    /// use berth_device::Window;
    /// let staged = [30u32, 40, 50];
    /// // SAFETY: elements 3..6 of a 10-element argument; `staged` outlives the view.
    /// let w = unsafe { Window::from_raw(staged.as_ptr(), 10, 3, 6) };
    /// assert_eq!((w.get(5), w.get(6), w.get(42)), (Some(&50), None, None));
    /// ```
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<&'a T> {
        // SAFETY: `lo <= i < hi`, and `ptr` is element `lo`, valid for `hi - lo` elements
        // (from_raw's contract).
        (i >= self.lo && i < self.hi).then(|| unsafe { &*self.ptr.add(i - self.lo) })
    }

    /// The available elements as a slice (element `k` of it is `available().start + k`).
    ///
    /// ```
    /// use berth_device::Window;
    /// let staged = [30u32, 40, 50];
    /// // SAFETY: elements 3..6 of a 10-element argument; `staged` outlives the view.
    /// let w = unsafe { Window::from_raw(staged.as_ptr(), 10, 3, 6) };
    /// assert_eq!(w.available_slice(), &[30, 40, 50]); // element 0 of it is element 3
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn available_slice(&self) -> &'a [T] {
        // SAFETY: from_raw's contract: `hi - lo` readable elements from `ptr`.
        unsafe { slice_from_raw(self.ptr, self.hi - self.lo) }
    }

    /// The whole argument as a slice, when all of it is available.
    ///
    /// ```
    /// use berth_device::Window;
    /// let data = [1u32, 2, 3];
    /// // SAFETY: all 3 elements are available; `data` outlives the views.
    /// let whole = unsafe { Window::from_raw(data.as_ptr(), 3, 0, 3) };
    /// let part = unsafe { Window::from_raw(data[1..].as_ptr(), 3, 1, 3) };
    /// assert_eq!((whole.as_slice(), part.as_slice()), (Some(&data[..]), None));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn as_slice(&self) -> Option<&'a [T]> {
        (self.lo == 0 && self.hi == self.len).then(|| self.available_slice())
    }
}

impl<T> Index<usize> for Window<'_, T> {
    type Output = T;
    #[inline(always)]
    #[track_caller]
    fn index(&self, i: usize) -> &T {
        match self.get(i) {
            Some(v) => v,
            None if i >= self.len => out_of_bounds(i, self.len),
            None => crate::panic::outside_window(i, self.len, self.lo, self.hi),
        }
    }
}

impl<T> Index<Own> for Window<'_, T> {
    type Output = T;
    #[inline(always)]
    #[track_caller]
    fn index(&self, i: Own) -> &T {
        &self[i.get()]
    }
}

impl<T> Index<core::ops::Range<usize>> for Window<'_, T> {
    type Output = [T];
    /// A sub-slice inside the available range (`&table[row * d..(row + 1) * d]`); a range
    /// reaching outside it stops the kernel like a single index would.
    #[inline(always)]
    #[track_caller]
    fn index(&self, r: core::ops::Range<usize>) -> &[T] {
        if r.start <= r.end && r.start >= self.lo && r.end <= self.hi {
            // SAFETY: `lo <= start <= end <= hi`: inside the `hi - lo` readable elements
            // from `ptr` (element `lo`).
            return unsafe { slice_from_raw(self.ptr.add(r.start - self.lo), r.end - r.start) };
        }
        if r.end > self.len {
            out_of_bounds(r.end, self.len)
        }
        if r.start > r.end {
            crate::panic::fail("a range of an `#[auto]` argument starts after it ends")
        }
        // The first index of the range that is not available.
        let first = if r.start < self.lo {
            r.start
        } else {
            r.start.max(self.hi)
        };
        crate::panic::outside_window(first, self.len, self.lo, self.hi)
    }
}

/// A kernel's view of a `#[per_block] &mut [T]` argument: element `b` belongs to block `b`
/// (blocks numbered x-fastest over the grid), and only the block's first thread
/// (`thread::linear_in_block() == 0`) may reach it — the shape of a reduction's partial sums.
///
/// Declaring the argument `#[per_block]` is what makes this sound: every thread of the launch
/// sees the buffer through this view, and the pair (block, first thread) is unique.
///
/// ```
/// use berth_device::{PerBlock, thread};
/// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
/// #     thread: [0, 0, 0], block: [2, 0, 0], block_dim: [256, 1, 1], grid_dim: [4, 1, 1],
/// # });
/// let mut partials = [0.0f32; 4];
/// // SAFETY: `partials` outlives the view; the launch reaches it only through such views.
/// let mut out = unsafe { PerBlock::from_raw(partials.as_mut_ptr(), partials.len()) };
/// // As the first thread of block 2 (of 4), after the block reduced its values to `sum`:
/// let sum = 6.5;
/// if let Some(slot) = out.mine() {
///     *slot = sum;
/// }
/// assert_eq!(thread::linear_in_block(), 0);
/// assert_eq!(partials, [0.0, 0.0, 6.5, 0.0]);
/// ```
pub struct PerBlock<'a, T> {
    ptr: *mut T,
    len: usize,
    _life: PhantomData<&'a [T]>,
}

impl<T> PerBlock<'_, T> {
    /// Build the view of a kernel argument.
    ///
    /// # Safety
    /// As [`SliceMut::from_raw`], and every thread of the launch reaches the memory only
    /// through such views.
    ///
    /// ```
    /// use berth_device::PerBlock;
    /// let mut partials = [0u64; 8];
    /// // SAFETY: `partials` outlives the view, and every access meanwhile goes through such
    /// // views. (In a kernel the launcher builds the view of a `#[per_block]` argument.)
    /// let out = unsafe { PerBlock::from_raw(partials.as_mut_ptr(), partials.len()) };
    /// assert_eq!(out.len(), 8);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        PerBlock {
            ptr,
            len,
            _life: PhantomData,
        }
    }

    /// Number of elements (one per block, when the launch has as many blocks).
    ///
    /// ```
    /// use berth_device::{PerBlock, grid};
    /// let mut partials = [0u64; 8];
    /// // SAFETY: `partials` outlives the view and every access goes through such views.
    /// let out = unsafe { PerBlock::from_raw(partials.as_mut_ptr(), partials.len()) };
    /// // A launch of fewer blocks than slots leaves the rest alone.
    /// assert!(out.len() >= grid::dim_x());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no elements.
    ///
    /// ```
    /// use berth_device::PerBlock;
    /// // SAFETY: zero elements: nothing is reached.
    /// let out = unsafe { PerBlock::<u64>::from_raw(core::ptr::NonNull::dangling().as_ptr(), 0) };
    /// assert!(out.is_empty());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The calling block's element, in the block's first thread; `None` in every other
    /// thread, and when the block's number is past the end.
    ///
    /// ```
    /// # use berth_device::PerBlock;
    /// # let mut data = [0.0f32; 1];
    /// # let mut partial = unsafe { PerBlock::from_raw(data.as_mut_ptr(), 1) };
    /// let total = 2.5; // the block's sum
    /// if let Some(slot) = partial.mine() {
    ///     *slot = total;
    /// }
    /// # assert_eq!(data, [2.5]); // outside an executor: one block of one thread
    /// ```
    #[inline(always)]
    pub fn mine(&mut self) -> Option<&mut T> {
        use crate::{block, grid, thread};
        if thread::linear_in_block() != 0 {
            return None;
        }
        let b = (block::idx_z() * grid::dim_y() + block::idx_y()) * grid::dim_x() + block::idx_x();
        // SAFETY: in bounds; valid per from_raw's contract; only the first thread of block `b`
        // reaches element `b`, and `&mut self` keeps its references unique.
        (b < self.len).then(|| unsafe { &mut *self.ptr.add(b) })
    }
}
