//! Element indices a thread owns: the safe way to write a `&mut [T]` argument.
//!
//! Every thread of a launch runs the same body over the same `&mut [T]` view
//! ([`SliceMut`](crate::SliceMut)). If any thread could write any element, two threads writing
//! one element (or one writing what another reads) would be a data race reachable from safe
//! code. So a `SliceMut` is indexed only by an [`Own`]: an index that no other thread of the
//! launch can hold.
//!
//! **The invariant.** Number the launch's threads `0..T` (`T` = threads per block × blocks;
//! the number is [`thread::index`](crate::thread::index)). Every `Own` a thread can obtain is
//! congruent to its own number modulo `T`: its number itself ([`thread::index`]) or a step of
//! its grid-stride loop ([`thread::grid_stride`]). Two threads therefore never hold the same
//! `Own`, whatever lengths, branches or loops they run. `Own` has no public constructor, and it
//! is neither `Send` nor `Sync`, so it cannot travel to another thread through shared memory
//! (whose elements must be `Send`), a signal, a warp shuffle (sealed to numbers) or a static.
//!
//! **Two dimensions.** [`Own2`] ([`thread::index_2d`]) is the thread's position
//! `(global_x, global_y)` in a two-dimensional launch. Two threads share it only if they
//! differ along z, so obtaining one checks, once, that the launch's grid and block have z
//! extent 1 (a kernel panic otherwise; on a kernel that declares a one- or two-dimensional
//! block the launcher already refuses such grids, and the check compiles away). It indexes
//! the one view whose element map is the same in every thread: a `&mut [T]` argument
//! declared `#[matrix(cols = n)]` ([`GridMatrix`](crate::GridMatrix)), element
//! `(row = y, col = x)`, checked against both extents. It does not index a `SliceMut`: the
//! threads numbered by [`thread::index`] would meet the threads placed by their position.
//!
//! Everything else a thread may want to write is reached another way: atomics through an
//! `#[atomic]` argument ([`AtomicSlice`](crate::atomic::AtomicSlice)), per-block data through
//! shared memory, and writes at computed indices (a tile of a matrix, a block's partial sum, a
//! scatter) through `unsafe` accessors whose contract says which thread owns what —
//! checked by the simulator on every launch. The design and its reasons are in
//! `docs/write-model.md`.
//!
//! [`thread::index`]: crate::thread::index
//! [`thread::grid_stride`]: crate::thread::grid_stride
//! [`thread::index_2d`]: crate::thread::index_2d

use core::marker::PhantomData;

/// An element index that no other thread of the launch holds; see the [module](self).
///
/// It reads as a number (`i.get()`, `i < n`, `{i}`) and indexes every kernel view:
/// [`SliceMut`](crate::SliceMut) (read and write), [`Slice`](crate::Slice) and
/// [`Window`](crate::Window) (read).
///
/// ```
/// use berth_device::{Slice, SliceMut, thread};
/// let (input, mut data) = ([1.0f32, 2.0, 3.0], [0.0f32; 3]);
/// // SAFETY: the arrays outlive the views; nothing else touches them.
/// let x = unsafe { Slice::from_raw(input.as_ptr(), input.len()) };
/// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
/// for i in thread::grid_stride(out.len()) {
///     // `i` indexes the output; `i + 1`, a plain `usize`, only reads.
///     let next = if i + 1 < x.len() { x[i + 1] } else { 0.0 };
///     out[i] = x[i] + next;
/// }
/// assert_eq!(data, [3.0, 5.0, 3.0]); // one thread visits every index
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Own {
    i: usize,
    /// Not `Send`, not `Sync`: an `Own` stays with the thread that obtained it.
    _thread: PhantomData<*const ()>,
}

impl Own {
    /// Only [`thread::index`](crate::thread::index) and
    /// [`GridStride`] make one; see the module's invariant.
    #[inline(always)]
    pub(crate) fn new(i: usize) -> Own {
        Own {
            i,
            _thread: PhantomData,
        }
    }

    /// The index as a number.
    ///
    /// ```
    /// let i = berth_device::thread::index();
    /// let n: usize = i.get();
    /// assert_eq!((n, usize::from(i)), (0, 0)); // outside an executor: thread 0 of 1
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(self) -> usize {
        self.i
    }
}

impl From<Own> for usize {
    #[inline(always)]
    fn from(o: Own) -> usize {
        o.i
    }
}

impl PartialEq<usize> for Own {
    #[inline(always)]
    fn eq(&self, other: &usize) -> bool {
        self.i == *other
    }
}

impl PartialOrd<usize> for Own {
    #[inline(always)]
    fn partial_cmp(&self, other: &usize) -> Option<core::cmp::Ordering> {
        Some(self.i.cmp(other))
    }
}

/// Arithmetic on an `Own` gives a plain `usize` (`a[i + 1]`, `i * 4`): a neighbour or a
/// derived index is readable, but owning it is not implied, so it indexes inputs, not a
/// `SliceMut`.
macro_rules! arith {
    ($($tr:ident $f:ident),*) => { $(
        impl core::ops::$tr<usize> for Own {
            type Output = usize;
            #[inline(always)]
            #[track_caller]
            fn $f(self, rhs: usize) -> usize {
                core::ops::$tr::$f(self.i, rhs)
            }
        }
        impl core::ops::$tr<Own> for usize {
            type Output = usize;
            #[inline(always)]
            #[track_caller]
            fn $f(self, rhs: Own) -> usize {
                core::ops::$tr::$f(self, rhs.i)
            }
        }
    )* };
}
arith!(Add add, Sub sub, Mul mul, Div div, Rem rem);

impl core::fmt::Debug for Own {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&self.i, f)
    }
}

impl core::fmt::Display for Own {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.i, f)
    }
}

/// The calling thread's grid-stride loop over `0..len`: its [`thread::index`], then steps of
/// the launch's thread count, while below `len`. From
/// [`thread::grid_stride`](crate::thread::grid_stride).
///
/// [`thread::index`]: crate::thread::index
///
/// ```
/// use berth_device::thread;
/// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
/// #     thread: [5, 1, 0], block: [2, 3, 1], block_dim: [32, 2, 1], grid_dim: [4, 4, 2],
/// # });
/// // As thread (5, 1, 0) of block (2, 3, 1), in a 4×4×2 grid of 32×2×1 blocks:
/// // 2048 threads in all, this one number 1957: its loop over 5000 elements.
/// let mine: Vec<usize> = thread::grid_stride(5000).map(|i| i.get()).collect();
/// assert_eq!(mine, [1957, 1957 + 2048]);
/// ```
#[derive(Clone, Debug)]
pub struct GridStride {
    next: usize,
    step: usize,
    end: usize,
}

impl GridStride {
    #[inline(always)]
    pub(crate) fn new(first: usize, step: usize, end: usize) -> GridStride {
        GridStride {
            next: first,
            step,
            end,
        }
    }
}

impl Iterator for GridStride {
    type Item = Own;
    #[inline(always)]
    fn next(&mut self) -> Option<Own> {
        if self.next >= self.end {
            return None;
        }
        let i = self.next;
        // Saturating: a step past `usize::MAX` ends the loop instead of wrapping onto an index
        // another thread owns.
        self.next = i.saturating_add(self.step);
        Some(Own::new(i))
    }
}

/// A thread's position in a two-dimensional launch, `(global_x, global_y)`, which no other
/// thread of the launch holds; see the [module](self). From
/// [`thread::index_2d`](crate::thread::index_2d).
///
/// It reads as two numbers (`p.x()`, `p.y()`) and indexes, at element `(row = y, col = x)`,
/// a `#[matrix(cols = n)]` argument ([`GridMatrix`](crate::GridMatrix), read and write) and a
/// [`Matrix`](crate::Matrix) (read).
///
/// ```
/// use berth_device::{GridMatrix, Matrix, thread};
/// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
/// #     thread: [1, 1, 0], block: [1, 0, 0], block_dim: [2, 2, 1], grid_dim: [2, 1, 1],
/// # });
/// // As thread (1, 1) of block (1, 0), in a 2×1 grid of 2×2 blocks: position (3, 1).
/// let (input, mut data) = ([1.0f32; 8], [0.0f32; 8]);
/// let a = Matrix::new(&input, 2, 4);
/// // SAFETY: `data` outlives the view; nothing else touches it.
/// let mut out = unsafe { GridMatrix::from_raw(data.as_mut_ptr(), data.len(), 4) };
/// let p = thread::index_2d();
/// assert_eq!((p.x(), p.y()), (3, 1));
/// if p.x() < out.cols() && p.y() < out.rows() {
///     out[p] = a[p] + 1.0; // element (row 1, column 3)
/// }
/// assert_eq!(data[7], 2.0);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Own2 {
    x: usize,
    y: usize,
    /// Not `Send`, not `Sync`: an `Own2` stays with the thread that obtained it.
    _thread: PhantomData<*const ()>,
}

impl Own2 {
    /// Only [`thread::index_2d`](crate::thread::index_2d) makes one, after checking that the
    /// launch's grid and block have z extent 1; see the module's invariant.
    #[inline(always)]
    pub(crate) fn new(x: usize, y: usize) -> Own2 {
        Own2 {
            x,
            y,
            _thread: PhantomData,
        }
    }

    /// The position along x: [`thread::global_x`](crate::thread::global_x), the column it
    /// indexes.
    ///
    /// ```
    /// let p = berth_device::thread::index_2d();
    /// assert_eq!(p.x(), 0); // outside an executor: thread 0 of 1
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn x(self) -> usize {
        self.x
    }

    /// The position along y: [`thread::global_y`](crate::thread::global_y), the row it
    /// indexes.
    ///
    /// ```
    /// use berth_device::thread;
    /// # let _thread = berth_device::host::enter_thread(berth_device::host::Coords {
    /// #     thread: [5, 1, 0], block: [2, 3, 0], block_dim: [32, 2, 1], grid_dim: [4, 4, 1],
    /// # });
    /// // As thread (5, 1) of block (2, 3), in a 4×4 grid of 32×2 blocks:
    /// assert_eq!(thread::index_2d().y(), 3 * 2 + 1);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn y(self) -> usize {
        self.y
    }
}

impl core::fmt::Debug for Own2 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("").field(&self.x).field(&self.y).finish()
    }
}

impl core::fmt::Display for Own2 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "({}, {})", self.x, self.y)
    }
}

#[cfg(test)]
mod tests {
    use super::{Own, Own2};

    #[test]
    fn a_position_reads_and_prints_as_two_numbers() {
        let p = Own2::new(3, 7);
        assert_eq!((p.x(), p.y()), (3, 7));
        assert_eq!(
            (format!("{p}"), format!("{p:?}")),
            ("(3, 7)".into(), "(3, 7)".into())
        );
    }

    #[test]
    fn arithmetic_gives_plain_numbers() {
        let i = Own::new(3);
        let n: usize = 4;
        assert_eq!(
            (i + 1, i - 1, i * 2, i / 2, i % 2, n + i),
            (4, 2, 6, 1, 1, 7)
        );
        assert!(i < n && i == 3 && i + 1 == n);
    }
}

/// What indexes a [`SliceMut`](crate::SliceMut): an [`Own`], and nothing else. The trait
/// exists so that indexing one with a plain `usize` says how to write at a computed index.
#[diagnostic::on_unimplemented(
    message = "a `&mut [T]` argument is written at an `Own` index, not at a computed `{Self}`",
    label = "a computed index: another thread may compute the same one",
    note = "for the element this thread owns, index with `thread::index()` or a step of `thread::grid_stride(n)`: `out[i] = v`",
    note = "for a computed index, write `unsafe {{ out.write(k, v) }}` under a `// SAFETY:` comment saying why no other thread writes element `k`, or declare the argument `#[atomic]` and update it with atomics",
    note = "for a thread's 2D position (`thread::index_2d()`), declare the argument a matrix, `#[matrix(cols = n)] out: &mut [T]`, and index it with the position: `out[p] = v`"
)]
pub trait OwnedIndex: Copy + sealed::Sealed {
    /// The index as a number.
    fn index(self) -> usize;
}

impl OwnedIndex for Own {
    #[inline(always)]
    fn index(self) -> usize {
        self.i
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Own {}
}
