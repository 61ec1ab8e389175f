//! Row-major matrix views of read-only slices, and fixed-size tiles of them.
//!
//! A kernel that walks a matrix in tiles (a matrix product, a stencil, a transpose) forms
//! indices like `(row0 + r) * n + col0 + c`. Checked one by one against the slice's length,
//! each load costs a compare and a branch in the hot loop, and the optimiser cannot prove
//! them away: the index is a product of runtime values. A [`Matrix`] checks its shape against
//! the slice once; [`Matrix::tile`] checks that a whole `R × C` tile lies inside it (two
//! comparisons per tile); and indexing the [`Tile`] checks `r < R` and `c < C` against
//! constants, which the optimiser proves whenever the indices come from the declared block
//! shape (`#[gpu_kernel(block = (16, 16))]` bounds `thread::idx_x()` to `0..16`) and
//! unrolled loop counters. The loads of a tile then compile to plain `ld.global`s.
//!
//! ```
//! use berth_device::matrix::Matrix;
//! // A 3 × 4 matrix, row-major.
//! let data: Vec<u32> = (0..12).collect();
//! let m = Matrix::new(&data, 3, 4);
//! assert_eq!((m[(1, 2)], m.row(2)), (6, &[8, 9, 10, 11][..]));
//! // The 2 × 2 tile whose top-left element is (1, 2).
//! let t = m.tile::<2, 2>(1, 2);
//! assert_eq!((t[(0, 0)], t[(1, 1)], t.row(1)), (6, 11, &[10, 11]));
//! assert!(m.get_tile::<2, 2>(2, 0).is_none()); // row 3 does not exist
//! ```

use crate::own::Own2;
use crate::panic::{fail, index_out_of_bounds, outside_matrix};
use core::marker::PhantomData;
use core::ops::{Index, IndexMut};

/// Whether an `h × w` block at `(r0, c0)` lies inside a `rows × cols` matrix, without
/// overflow: `h <= rows` first, then `r0 <= rows - h`.
#[inline(always)]
fn fits(rows: usize, cols: usize, r0: usize, c0: usize, h: usize, w: usize) -> bool {
    h <= rows && r0 <= rows - h && w <= cols && c0 <= cols - w
}

/// The element count of a `rows × cols` matrix made of a slice of `len` elements: stops the
/// kernel (at the caller's location) when the count overflows, or as an index out of bounds
/// naming the first missing element when the slice is shorter.
#[inline(always)]
#[track_caller]
pub(crate) fn checked_shape(rows: usize, cols: usize, len: usize) -> usize {
    let Some(n) = rows.checked_mul(cols) else {
        fail("a matrix's rows × columns overflow usize")
    };
    if n > len {
        // `n > len >= 0`: element `n - 1` is the first one missing.
        index_out_of_bounds(n - 1, len)
    }
    n
}

/// Read `*p`, logged for the simulator's race check.
///
/// # Safety
/// `p` is valid for reads, and no other thread writes `*p` during the launch.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn read_noted<T: Copy>(p: *mut T) -> T {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::host::note_element(p, crate::host::Access::Read);
    // SAFETY: the caller's contract.
    unsafe { p.read() }
}

/// Write `*p = v`, logged for the simulator's race check. The old value is overwritten, not
/// dropped: elements are `DeviceCopy` (plain data) in every view the launcher builds.
///
/// # Safety
/// `p` is valid for writes, and no other thread reads or writes `*p` during the launch.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn write_noted<T>(p: *mut T, v: T) {
    #[cfg(not(target_arch = "nvptx64"))]
    crate::host::note_element(p, crate::host::Access::Write);
    // SAFETY: the caller's contract.
    unsafe { p.write(v) }
}

/// Report an `h × w` block (a tile or a submatrix) at `(r0, c0)` that reaches outside its
/// `rows × cols` matrix, naming the block's last element.
#[inline(always)]
#[track_caller]
fn outside_block(r0: usize, c0: usize, h: usize, w: usize, rows: usize, cols: usize) -> ! {
    outside_matrix(
        r0.saturating_add(h.max(1) - 1),
        c0.saturating_add(w.max(1) - 1),
        rows,
        cols,
    )
}

/// A read-only `rows × cols` matrix stored row-major in a slice: element `(r, c)` is
/// `slice[r * cols + c]`. Build it with [`Slice::matrix`](crate::Slice::matrix) in a kernel
/// (or [`Matrix::new`]); its shape is checked against the slice once, there.
///
/// ```
/// use berth_device::matrix::Matrix;
/// let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
/// let m = Matrix::new(&data, 2, 3);
/// assert_eq!((m.rows(), m.cols(), m[(1, 0)]), (2, 3, 4.0));
/// assert_eq!(m.get(0, 3), None); // column 3 of 3 columns: outside, even though
///                                // `data[0 * 3 + 3]` exists
/// ```
pub struct Matrix<'a, T> {
    /// Element `(r, c)` is `inner[r * stride + c]`: when the matrix has an element
    /// (`rows, cols >= 1`), `(rows - 1) * stride + cols <= inner.len()` and `cols <= stride`.
    inner: &'a [T],
    rows: usize,
    cols: usize,
    /// Elements from the start of one row to the start of the next: `cols`, or the whole
    /// matrix's for a [`Matrix::submatrix`].
    stride: usize,
}

impl<T> Clone for Matrix<'_, T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Matrix<'_, T> {}

impl<T> core::fmt::Debug for Matrix<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Matrix")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("stride", &self.stride)
            .finish_non_exhaustive()
    }
}

impl<'a, T> Matrix<'a, T> {
    /// The first `rows * cols` elements of `data` as a `rows × cols` matrix.
    ///
    /// # Panics
    /// If `data` has fewer than `rows * cols` elements, as an index out of bounds (the last
    /// element of the matrix), or if `rows * cols` overflows; on the GPU both stop the kernel
    /// with the caller's location, without `core::fmt`.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [0u8; 10];
    /// let m = Matrix::new(&data, 3, 3); // 9 of the 10 elements
    /// assert_eq!(m.as_slice().len(), 9);
    /// let err = std::panic::catch_unwind(|| Matrix::new(&data, 4, 3)).unwrap_err();
    /// assert_eq!(err.downcast_ref::<String>().unwrap(), "index out of bounds: the len is 10 but the index is 11");
    /// assert!(std::panic::catch_unwind(|| Matrix::new(&data, usize::MAX, 2)).is_err());
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn new(data: &'a [T], rows: usize, cols: usize) -> Self {
        let n = checked_shape(rows, cols, data.len());
        Matrix {
            // SAFETY: `n <= data.len()` (checked_shape).
            inner: unsafe { data.get_unchecked(..n) },
            rows,
            cols,
            stride: cols,
        }
    }

    /// Number of rows.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// assert_eq!(Matrix::new(&[0u8; 6], 2, 3).rows(), 2);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (the distance between the starts of two rows).
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// assert_eq!(Matrix::new(&[0u8; 6], 2, 3).cols(), 3);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Elements from the start of one row to the start of the next: [`Matrix::cols`], or
    /// the enclosing matrix's for a [`Matrix::submatrix`].
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [0u8; 12];
    /// let m = Matrix::new(&data, 3, 4);
    /// assert_eq!((m.stride(), m.submatrix(1, 1, 2, 2).stride()), (4, 4));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The memory the matrix spans: its elements row after row, from `(0, 0)` through
    /// `(rows - 1, cols - 1)` — exactly `rows * cols` of them for a matrix made by
    /// [`Matrix::new`], with the enclosing matrix's other columns between the rows of a
    /// [`Matrix::submatrix`].
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [1u8, 2, 3, 4, 5, 6];
    /// let m = Matrix::new(&data, 2, 3);
    /// assert_eq!(m.as_slice(), &[1, 2, 3, 4, 5, 6]);
    /// assert_eq!(m.submatrix(0, 1, 2, 1).as_slice(), &[2, 3, 4, 5]); // (0, 1) .. (1, 1)
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn as_slice(&self) -> &'a [T] {
        if self.rows == 0 || self.cols == 0 {
            return &[];
        }
        // SAFETY: `(rows - 1) * stride + cols <= inner.len()` (the field's invariant).
        unsafe {
            self.inner
                .get_unchecked(..(self.rows - 1) * self.stride + self.cols)
        }
    }

    /// The `rows × cols` block whose top-left element is `(r0, c0)`, as a matrix of its own
    /// (its [`stride`](Matrix::stride) is this one's): checked once, here, to lie inside this
    /// matrix. A kernel that walks a band of rows or columns tile by tile takes the band
    /// once, before its loop, and its tiles then check only the coordinate that moves.
    ///
    /// # Panics
    /// Unless the block lies inside the matrix, as an index out of bounds naming its last
    /// element (on the GPU: stops the kernel with the caller's location).
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data: Vec<u32> = (0..20).collect();
    /// let m = Matrix::new(&data, 4, 5);
    /// // Columns 3 and 4 of every row.
    /// let band = m.submatrix(0, 3, 4, 2);
    /// assert_eq!((band[(0, 0)], band[(3, 1)], band.row(1)), (3, 19, &[8, 9][..]));
    /// assert_eq!(band.get(0, 2), None); // column 5 of `m` does not exist
    /// assert_eq!(band.tile::<2, 2>(2, 0)[(0, 1)], 14);
    /// assert!(std::panic::catch_unwind(|| m.submatrix(1, 3, 4, 2)).is_err());
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn submatrix(&self, r0: usize, c0: usize, rows: usize, cols: usize) -> Matrix<'a, T> {
        match self.get_submatrix(r0, c0, rows, cols) {
            Some(m) => m,
            None => outside_block(r0, c0, rows, cols, self.rows, self.cols),
        }
    }

    /// [`Matrix::submatrix`], or `None` unless the block lies inside the matrix.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [0u8; 12];
    /// let m = Matrix::new(&data, 3, 4);
    /// assert!(m.get_submatrix(1, 1, 2, 3).is_some());
    /// assert!(m.get_submatrix(1, 2, 2, 3).is_none());
    /// assert!(m.get_submatrix(usize::MAX, 0, 2, 1).is_none());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get_submatrix(
        &self,
        r0: usize,
        c0: usize,
        rows: usize,
        cols: usize,
    ) -> Option<Matrix<'a, T>> {
        if !fits(self.rows, self.cols, r0, c0, rows, cols) {
            return None;
        }
        let inner = if rows == 0 || cols == 0 {
            &[]
        } else {
            // SAFETY: with `rows, cols >= 1`, `r0 < self.rows` and `c0 < self.cols`, so the
            // start `r0 * stride + c0` is an element of this matrix, inside `inner`.
            unsafe { self.inner.get_unchecked(r0 * self.stride + c0..) }
        };
        // The invariant: `(rows - 1) * stride + cols` from the new start reaches
        // `(r0 + rows - 1) * stride + c0 + cols <= (self.rows - 1) * stride + self.cols`.
        Some(Matrix {
            inner,
            rows,
            cols,
            stride: self.stride,
        })
    }

    /// Element `(r, c)`, or `None` when `r >= rows` or `c >= cols`.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [1u8, 2, 3, 4];
    /// let m = Matrix::new(&data, 2, 2);
    /// assert_eq!((m.get(1, 1), m.get(0, 2), m.get(2, 0)), (Some(&4), None, None));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, r: usize, c: usize) -> Option<&'a T> {
        if r < self.rows && c < self.cols {
            // SAFETY: `r * stride + c <= (rows - 1) * stride + cols - 1 < inner.len()` (the
            // field's invariant).
            Some(unsafe { self.inner.get_unchecked(r * self.stride + c) })
        } else {
            None
        }
    }

    /// Row `r`, as a slice of `cols` elements.
    ///
    /// # Panics
    /// If `r >= rows` (on the GPU: stops the kernel with the caller's location).
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [1u8, 2, 3, 4, 5, 6];
    /// let m = Matrix::new(&data, 3, 2);
    /// assert_eq!(m.row(1).iter().sum::<u8>(), 7);
    /// assert!(std::panic::catch_unwind(|| m.row(3)).is_err());
    /// // A zero-column matrix still has its rows, each empty.
    /// assert!(m.submatrix(0, 0, 3, 0).row(2).is_empty());
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn row(&self, r: usize) -> &'a [T] {
        if r >= self.rows {
            outside_matrix(r, 0, self.rows, self.cols)
        }
        if self.cols == 0 {
            // The invariant bounds `inner` only for a matrix with an element: a zero-column
            // matrix's `inner` may be empty while its rows are not.
            return &[];
        }
        let start = r * self.stride;
        // SAFETY: `r < rows` and `cols >= 1`, so the field's invariant holds:
        // `start + cols <= (rows - 1) * stride + cols <= inner.len()`.
        unsafe { self.inner.get_unchecked(start..start + self.cols) }
    }

    /// The `R × C` tile whose top-left element is `(r0, c0)`, or `None` unless all of it lies
    /// inside the matrix.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [0u16; 64];
    /// let m = Matrix::new(&data, 8, 8);
    /// assert!(m.get_tile::<4, 8>(4, 0).is_some());
    /// assert!(m.get_tile::<4, 8>(5, 0).is_none()); // rows 5..9
    /// assert!(m.get_tile::<1, 1>(0, 8).is_none()); // column 8
    /// assert!(m.get_tile::<16, 1>(0, 0).is_none()); // taller than the matrix
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get_tile<const R: usize, const C: usize>(
        &self,
        r0: usize,
        c0: usize,
    ) -> Option<Tile<'a, T, R, C>> {
        if fits(self.rows, self.cols, r0, c0, R, C) {
            // SAFETY: just checked.
            Some(unsafe { self.tile_unchecked(r0, c0) })
        } else {
            None
        }
    }

    /// # Safety
    /// `fits(self.rows, self.cols, r0, c0, R, C)`.
    #[inline(always)]
    unsafe fn tile_unchecked<const R: usize, const C: usize>(
        &self,
        r0: usize,
        c0: usize,
    ) -> Tile<'a, T, R, C> {
        Tile {
            // Element `(r0, c0)` whenever the tile has one (`R, C >= 1`: then `r0 < rows`,
            // `c0 < cols`, and the sum indexes an element of `inner`); never read otherwise.
            base: self
                .inner
                .as_ptr()
                .wrapping_add(r0.wrapping_mul(self.stride).wrapping_add(c0)),
            stride: self.stride,
            origin: (r0, c0),
            _life: PhantomData,
        }
    }

    /// The `R × C` tile whose top-left element is `(r0, c0)`: one check that the whole tile
    /// lies inside the matrix, after which indexing the tile checks only against `R` and `C`.
    ///
    /// # Panics
    /// Unless the tile lies inside the matrix, as an index out of bounds naming the tile's
    /// last element (on the GPU: stops the kernel with the caller's location).
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data: Vec<u32> = (0..32).collect();
    /// let m = Matrix::new(&data, 4, 8);
    /// let t = m.tile::<2, 4>(2, 4);
    /// assert_eq!((t[(0, 0)], t[(1, 3)]), (20, 31));
    /// let err = std::panic::catch_unwind(|| m.tile::<2, 4>(2, 5)).unwrap_err();
    /// assert_eq!(
    ///     err.downcast_ref::<String>().unwrap(),
    ///     "index (3, 8) out of bounds: the matrix is 4 × 8 (rows × columns)"
    /// );
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn tile<const R: usize, const C: usize>(&self, r0: usize, c0: usize) -> Tile<'a, T, R, C> {
        if !fits(self.rows, self.cols, r0, c0, R, C) {
            outside_block(r0, c0, R, C, self.rows, self.cols)
        }
        // SAFETY: just checked.
        unsafe { self.tile_unchecked(r0, c0) }
    }

    /// The `R × C` tiles of rows `r0 .. r0 + R`, left to right, covering every column:
    /// tile `k` is [`tile::<R, C>(r0, k * C)`](Matrix::tile). Checked once, here, for all of
    /// them — the rows exist and the columns are a whole number of tiles — so the walk
    /// costs no check per tile: the iterator's end test is its only comparison. The `a`
    /// side of a matrix product walks its band of rows this way, in step with
    /// [`Matrix::tiles_down`] on `b`'s band of columns.
    ///
    /// # Panics
    /// Unless rows `r0 .. r0 + R` exist and `C` divides the columns, as an index out of
    /// bounds naming the last element of the first tile that would not fit (on the GPU:
    /// stops the kernel with the caller's location). A tile with no row or no column does
    /// not compile. For a ragged edge, walk the whole tiles of a
    /// [`submatrix`](Matrix::submatrix) and take the rest with [`Matrix::get_tile`].
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data: Vec<u32> = (0..24).collect();
    /// let m = Matrix::new(&data, 4, 6);
    /// // Rows 2 and 3, three 2 × 2 tiles left to right.
    /// let firsts: Vec<u32> = m.tiles_across::<2, 2>(2).map(|t| t[(0, 0)]).collect();
    /// assert_eq!(firsts, [12, 14, 16]);
    /// let err = std::panic::catch_unwind(|| m.tiles_across::<2, 4>(0)).unwrap_err();
    /// assert_eq!(
    ///     err.downcast_ref::<String>().unwrap(),
    ///     "index (1, 7) out of bounds: the matrix is 4 × 6 (rows × columns)"
    /// );
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn tiles_across<const R: usize, const C: usize>(&self, r0: usize) -> Tiles<'a, T, R, C> {
        match self.get_tiles_across(r0) {
            Some(t) => t,
            // Rows missing: the first tile does not fit; else the one after the last whole.
            None if !fits(self.rows, self.cols, r0, 0, R, 0) => {
                outside_block(r0, 0, R, C, self.rows, self.cols)
            }
            None => outside_block(r0, self.cols / C * C, R, C, self.rows, self.cols),
        }
    }

    /// [`Matrix::tiles_across`], or `None` unless rows `r0 .. r0 + R` exist and `C` divides
    /// the columns.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [0u8; 24];
    /// let m = Matrix::new(&data, 4, 6);
    /// assert_eq!(m.get_tiles_across::<4, 3>(0).map(|t| t.len()), Some(2));
    /// assert!(m.get_tiles_across::<2, 4>(0).is_none()); // 6 columns are not whole tiles of 4
    /// assert!(m.get_tiles_across::<2, 3>(3).is_none()); // row 4 does not exist
    /// assert!(m.get_tiles_across::<1, 1>(usize::MAX).is_none());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get_tiles_across<const R: usize, const C: usize>(
        &self,
        r0: usize,
    ) -> Option<Tiles<'a, T, R, C>> {
        const { assert!(R > 0 && C > 0, "a tile has at least one row and one column") };
        if !fits(self.rows, self.cols, r0, 0, R, 0) || !self.cols.is_multiple_of(C) {
            return None;
        }
        // Tile `k < cols / C` starts at column `k * C <= cols - C`: inside.
        Some(Tiles {
            matrix: *self,
            front: (r0, 0),
            step: (0, C),
            left: self.cols / C,
        })
    }

    /// The `R × C` tiles of columns `c0 .. c0 + C`, top to bottom, covering every row: tile
    /// `k` is [`tile::<R, C>(k * R, c0)`](Matrix::tile). Checked once, here, for all of
    /// them, as [`Matrix::tiles_across`] is; the `b` side of a matrix product walks its band
    /// of columns this way.
    ///
    /// # Panics
    /// Unless columns `c0 .. c0 + C` exist and `R` divides the rows, as an index out of
    /// bounds naming the last element of the first tile that would not fit (on the GPU:
    /// stops the kernel with the caller's location). A tile with no row or no column does
    /// not compile.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data: Vec<u32> = (0..24).collect();
    /// let m = Matrix::new(&data, 6, 4);
    /// // Columns 1 and 2, three 2 × 2 tiles top to bottom; the last one first.
    /// let mut tiles = m.tiles_down::<2, 2>(1);
    /// assert_eq!(tiles.next_back().map(|t| (t.origin(), t[(1, 1)])), Some(((4, 1), 22)));
    /// assert_eq!(tiles.map(|t| t.row(0)[0]).collect::<Vec<_>>(), [1, 9]);
    /// assert!(std::panic::catch_unwind(|| m.tiles_down::<4, 2>(1)).is_err()); // rows 4..8
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn tiles_down<const R: usize, const C: usize>(&self, c0: usize) -> Tiles<'a, T, R, C> {
        match self.get_tiles_down(c0) {
            Some(t) => t,
            None if !fits(self.rows, self.cols, 0, c0, 0, C) => {
                outside_block(0, c0, R, C, self.rows, self.cols)
            }
            None => outside_block(self.rows / R * R, c0, R, C, self.rows, self.cols),
        }
    }

    /// [`Matrix::tiles_down`], or `None` unless columns `c0 .. c0 + C` exist and `R`
    /// divides the rows.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [0u8; 24];
    /// let m = Matrix::new(&data, 6, 4);
    /// assert_eq!(m.get_tiles_down::<3, 4>(0).map(|t| t.len()), Some(2));
    /// assert!(m.get_tiles_down::<4, 1>(0).is_none()); // 6 rows are not whole tiles of 4
    /// assert!(m.get_tiles_down::<1, 2>(3).is_none()); // column 4 does not exist
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get_tiles_down<const R: usize, const C: usize>(
        &self,
        c0: usize,
    ) -> Option<Tiles<'a, T, R, C>> {
        const { assert!(R > 0 && C > 0, "a tile has at least one row and one column") };
        if !fits(self.rows, self.cols, 0, c0, 0, C) || !self.rows.is_multiple_of(R) {
            return None;
        }
        // Tile `k < rows / R` starts at row `k * R <= rows - R`: inside.
        Some(Tiles {
            matrix: *self,
            front: (0, c0),
            step: (R, 0),
            left: self.rows / R,
        })
    }
}

/// The whole `R × C` tiles of a band of a [`Matrix`], in order: left to right along a band
/// of rows ([`Matrix::tiles_across`]) or top to bottom along a band of columns
/// ([`Matrix::tiles_down`]). Every tile was checked when the iterator was made, so taking
/// the next one compares only the count left, and indexing a tile only against `R` and
/// `C`.
///
/// ```
/// use berth_device::matrix::Matrix;
/// let data: Vec<f32> = (0..16).map(|x| x as f32).collect();
/// let m = Matrix::new(&data, 4, 4);
/// // Row 1 · column 2, in steps of two elements.
/// let dot: f32 = m
///     .tiles_across::<1, 2>(1)
///     .zip(m.tiles_down::<2, 1>(2))
///     .map(|(a, b)| a[(0, 0)] * b[(0, 0)] + a[(0, 1)] * b[(1, 0)])
///     .sum();
/// assert_eq!(dot, 4.0 * 2.0 + 5.0 * 6.0 + 6.0 * 10.0 + 7.0 * 14.0);
/// ```
pub struct Tiles<'a, T, const R: usize, const C: usize> {
    matrix: Matrix<'a, T>,
    /// The origin of the front tile.
    front: (usize, usize),
    /// From one tile's origin to the next: `(0, C)` across, `(R, 0)` down.
    step: (usize, usize),
    /// The tiles left: those at `front + k * step` for `k < left`, every one of them inside
    /// `matrix` (`fits`).
    left: usize,
}

impl<T, const R: usize, const C: usize> Clone for Tiles<'_, T, R, C> {
    #[inline(always)]
    fn clone(&self) -> Self {
        Tiles { ..*self }
    }
}

impl<T, const R: usize, const C: usize> core::fmt::Debug for Tiles<'_, T, R, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tiles")
            .field("rows", &R)
            .field("cols", &C)
            .field("front", &self.front)
            .field("step", &self.step)
            .field("left", &self.left)
            .finish_non_exhaustive()
    }
}

impl<'a, T, const R: usize, const C: usize> Iterator for Tiles<'a, T, R, C> {
    type Item = Tile<'a, T, R, C>;

    #[inline(always)]
    fn next(&mut self) -> Option<Tile<'a, T, R, C>> {
        if self.left == 0 {
            return None;
        }
        let (r0, c0) = self.front;
        // No overflow: the front tile fits, so `r0 + R <= rows` and `c0 + C <= cols`, and
        // the step is at most `(R, C)`.
        self.front = (r0 + self.step.0, c0 + self.step.1);
        self.left -= 1;
        // SAFETY: `k = 0` of the field's invariant; the rest of it holds for the new front.
        Some(unsafe { self.matrix.tile_unchecked(r0, c0) })
    }

    #[inline(always)]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }

    /// The tile `k` places on, without making the ones between.
    #[inline(always)]
    fn nth(&mut self, k: usize) -> Option<Tile<'a, T, R, C>> {
        if k >= self.left {
            self.left = 0;
            return None;
        }
        // Tile `k < left` fits (the field's invariant): its origin does not overflow.
        self.front = (
            self.front.0 + k * self.step.0,
            self.front.1 + k * self.step.1,
        );
        self.left -= k;
        self.next()
    }
}

impl<T, const R: usize, const C: usize> DoubleEndedIterator for Tiles<'_, T, R, C> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The back tile, `k = left` (after the decrement): it fits, so its origin is below
        // the matrix's shape and the products do not overflow.
        let (r0, c0) = (
            self.front.0 + self.left * self.step.0,
            self.front.1 + self.left * self.step.1,
        );
        // SAFETY: `k = left < ` the old `left`, inside by the field's invariant.
        Some(unsafe { self.matrix.tile_unchecked(r0, c0) })
    }
}

impl<T, const R: usize, const C: usize> ExactSizeIterator for Tiles<'_, T, R, C> {}
impl<T, const R: usize, const C: usize> core::iter::FusedIterator for Tiles<'_, T, R, C> {}

impl<T> Index<(usize, usize)> for Matrix<'_, T> {
    type Output = T;
    /// Element `(row, column)`; outside the matrix, stops the kernel with the caller's
    /// location and both numbers.
    #[inline(always)]
    #[track_caller]
    fn index(&self, (r, c): (usize, usize)) -> &T {
        match self.get(r, c) {
            Some(v) => v,
            None => outside_matrix(r, c, self.rows, self.cols),
        }
    }
}

impl<T> Index<Own2> for Matrix<'_, T> {
    type Output = T;
    /// Element `(row = p.y(), col = p.x())`: the element of a thread's 2D position
    /// ([`thread::index_2d`](crate::thread::index_2d)); outside the matrix, stops the kernel
    /// as `m[(row, col)]` does.
    #[inline(always)]
    #[track_caller]
    fn index(&self, p: Own2) -> &T {
        &self[(p.y(), p.x())]
    }
}

/// An `R × C` tile of a [`Matrix`], checked to lie inside it when it was made
/// ([`Matrix::tile`]): element `(r, c)` of the tile is element `(r0 + r, c0 + c)` of the
/// matrix, and indexing it checks only `r < R` and `c < C`.
///
/// ```
/// use berth_device::matrix::Matrix;
/// let data: Vec<f32> = (0..16).map(|x| x as f32).collect();
/// let m = Matrix::new(&data, 4, 4);
/// // The lower-right 2 × 2 tile, summed.
/// let t = m.tile::<2, 2>(2, 2);
/// let sum: f32 = (0..2).flat_map(|r| (0..2).map(move |c| (r, c))).map(|rc| t[rc]).sum();
/// assert_eq!(sum, 10.0 + 11.0 + 14.0 + 15.0);
/// assert_eq!(t.get(2, 0), None);
/// ```
pub struct Tile<'a, T, const R: usize, const C: usize> {
    /// The tile's element `(0, 0)`: when the tile has elements (`R, C >= 1`), element
    /// `(r, c)` for `r < R`, `c < C` is `base + r * stride + c`, readable for `'a` (the tile
    /// lies inside its matrix). A raw pointer rather than a reference, so that an
    /// `Option<Tile>` (an iterator's item) carries its own tag instead of a null test of an
    /// address the GPU compiler cannot fold.
    base: *const T,
    /// The matrix's row stride.
    stride: usize,
    /// `(r0, c0)`: where the tile starts in the matrix.
    origin: (usize, usize),
    _life: PhantomData<&'a [T]>,
}

// SAFETY: a tile reads shared `T`s only, as `&'a [T]` does: it may go to, and be shared
// with, other threads where `&[T]` may (`T: Sync`).
unsafe impl<T: Sync, const R: usize, const C: usize> Send for Tile<'_, T, R, C> {}
// SAFETY: as above.
unsafe impl<T: Sync, const R: usize, const C: usize> Sync for Tile<'_, T, R, C> {}

impl<T, const R: usize, const C: usize> Clone for Tile<'_, T, R, C> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const R: usize, const C: usize> Copy for Tile<'_, T, R, C> {}

impl<T, const R: usize, const C: usize> core::fmt::Debug for Tile<'_, T, R, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tile")
            .field("rows", &R)
            .field("cols", &C)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl<'a, T, const R: usize, const C: usize> Tile<'a, T, R, C> {
    /// Where the tile starts in its matrix: the matrix's `(row, column)` of the tile's `(0, 0)`.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data = [0u8; 12];
    /// assert_eq!(Matrix::new(&data, 3, 4).tile::<2, 2>(1, 2).origin(), (1, 2));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn origin(&self) -> (usize, usize) {
        self.origin
    }

    /// Element `(r, c)` of the tile, or `None` when `r >= R` or `c >= C`.
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data: Vec<u8> = (0..9).collect();
    /// let t = Matrix::new(&data, 3, 3).tile::<2, 2>(1, 1);
    /// assert_eq!((t.get(0, 1), t.get(1, 2)), (Some(&5), None));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get(&self, r: usize, c: usize) -> Option<&'a T> {
        if r < R && c < C {
            // SAFETY: `r < R` and `c < C`: an element of the tile (the field's invariant).
            // The tile was made inside the matrix (`fits`: `r0 + R <= rows`,
            // `c0 + C <= cols`), so the element is the matrix's `(r0 + r, c0 + c)`, at
            // `(r0 + r) * stride + c0 + c <= (rows - 1) * stride + cols - 1 < inner.len()`
            // (the matrix's invariant).
            Some(unsafe { &*self.base.add(r * self.stride + c) })
        } else {
            None
        }
    }

    /// Row `r` of the tile: `C` consecutive elements of the matrix.
    ///
    /// # Panics
    /// If `r >= R` (on the GPU: stops the kernel with the caller's location).
    ///
    /// ```
    /// use berth_device::matrix::Matrix;
    /// let data: Vec<u8> = (0..12).collect();
    /// let t = Matrix::new(&data, 3, 4).tile::<2, 3>(1, 1);
    /// assert_eq!((t.row(0), t.row(1)), (&[5, 6, 7], &[9, 10, 11]));
    /// assert!(std::panic::catch_unwind(|| t.row(2)).is_err());
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn row(&self, r: usize) -> &'a [T; C] {
        if r >= R {
            outside_matrix(r, 0, R, C)
        }
        // SAFETY: as in `get`, the `C` elements from `base + r * stride` are
        // `(r0 + r, c0 .. c0 + C)` of the matrix (none when `C == 0`, where the empty array
        // reads nothing); a `[T; C]` has the layout of `C` consecutive `T`.
        unsafe { &*self.base.wrapping_add(r * self.stride).cast::<[T; C]>() }
    }
}

impl<T, const R: usize, const C: usize> Index<(usize, usize)> for Tile<'_, T, R, C> {
    type Output = T;
    /// Element `(row, column)` of the tile; outside it, stops the kernel with the caller's
    /// location and both numbers.
    #[inline(always)]
    #[track_caller]
    fn index(&self, (r, c): (usize, usize)) -> &T {
        match self.get(r, c) {
            Some(v) => v,
            None => outside_matrix(r, c, R, C),
        }
    }
}

/// A `rows × cols` row-major matrix view of a kernel's `&mut [T]` argument
/// ([`SliceMut::matrix_mut`](crate::SliceMut::matrix_mut)), for threads that write a tile
/// of it: as with [`SliceMut::write`](crate::SliceMut::write), reaching an element this
/// thread does not own is `unsafe`, with the contract that no other thread of the launch
/// touches it (the simulator checks it). Its shape is checked against the slice once, and a
/// [`TileMut`] once more for the whole tile.
///
/// ```
/// use berth_device::SliceMut;
/// let mut data = [0u32; 12];
/// // SAFETY: `data` outlives the view; this one thread is the launch.
/// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
/// let mut m = out.matrix_mut(3, 4);
/// // SAFETY: this one thread is the launch: no other thread touches the elements.
/// unsafe {
///     m.write(2, 3, 7);
///     let mut t = m.tile_mut::<2, 2>(0, 1);
///     t.write(1, 1, 5); // element (1, 2) of the matrix
/// }
/// assert_eq!((data[11], data[6]), (7, 5));
/// ```
pub struct MatrixMut<'s, T> {
    /// Element `(r, c)` is `ptr + r * stride + c`. Unless `rows` or `cols` is 0, the
    /// `(rows - 1) * stride + cols` elements from `ptr` are valid for reads and writes for
    /// `'s` (checked at construction against a `SliceMut`, whose contract makes them valid,
    /// and kept by [`MatrixMut::submatrix_mut`]); `cols <= stride`.
    ptr: *mut T,
    rows: usize,
    cols: usize,
    stride: usize,
    _view: PhantomData<&'s mut [T]>,
}

impl<T> core::fmt::Debug for MatrixMut<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MatrixMut")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl<'s, T> MatrixMut<'s, T> {
    /// # Safety
    /// `ptr` is valid for reads and writes of `rows * cols` elements for `'s` (no overflow),
    /// under [`SliceMut::from_raw`](crate::SliceMut::from_raw)'s contract.
    #[inline(always)]
    pub(crate) unsafe fn from_raw(ptr: *mut T, rows: usize, cols: usize) -> Self {
        MatrixMut {
            ptr,
            rows,
            cols,
            stride: cols,
            _view: PhantomData,
        }
    }

    /// Number of rows.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// # let mut data = [0u8; 6];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// assert_eq!(out.matrix_mut(2, 3).rows(), 2);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// # let mut data = [0u8; 6];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// assert_eq!(out.matrix_mut(2, 3).cols(), 3);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Elements from the start of one row to the start of the next: the columns of the
    /// matrix this one was cut from ([`MatrixMut::submatrix_mut`]), else its own.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// # let mut data = [0u8; 12];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(3, 4);
    /// assert_eq!(m.stride(), 4);
    /// assert_eq!(m.submatrix_mut(1, 1, 2, 2).stride(), 4);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// The `rows × cols` block whose top-left element is `(r0, c0)`, as a matrix of its own
    /// that writes through to this one (its [`stride`](MatrixMut::stride) is this one's):
    /// checked once, here, to lie inside this matrix. A block of threads that writes its own
    /// region of a result takes the region once, and indexes it from `(0, 0)`.
    ///
    /// # Panics
    /// Unless the block lies inside the matrix, as for [`Matrix::submatrix`].
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// let mut data = [0u32; 20];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(4, 5);
    /// // Rows 2 and 3, columns 3 and 4.
    /// let mut block = m.submatrix_mut(2, 3, 2, 2);
    /// // SAFETY: this one thread is the launch: no other thread touches the elements.
    /// unsafe {
    ///     block.write(0, 0, 1); // element (2, 3) of `m`
    ///     block.tile_mut::<1, 2>(1, 0).write(0, 1, 2); // element (3, 4)
    /// }
    /// assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
    ///     let _ = m.submatrix_mut(3, 3, 2, 2); // row 4 does not exist
    /// }))
    /// .is_err());
    /// assert_eq!((data[13], data[19]), (1, 2));
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn submatrix_mut(
        &mut self,
        r0: usize,
        c0: usize,
        rows: usize,
        cols: usize,
    ) -> MatrixMut<'_, T> {
        let shape = (self.rows, self.cols);
        match self.get_submatrix_mut(r0, c0, rows, cols) {
            Some(block) => block,
            None => outside_block(r0, c0, rows, cols, shape.0, shape.1),
        }
    }

    /// [`MatrixMut::submatrix_mut`], or `None` unless the block lies inside the matrix.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// # let mut data = [0u8; 12];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(3, 4);
    /// assert!(m.get_submatrix_mut(1, 1, 2, 3).is_some());
    /// assert!(m.get_submatrix_mut(1, 2, 2, 3).is_none());
    /// assert!(m.get_submatrix_mut(usize::MAX, 0, 2, 1).is_none());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get_submatrix_mut(
        &mut self,
        r0: usize,
        c0: usize,
        rows: usize,
        cols: usize,
    ) -> Option<MatrixMut<'_, T>> {
        if !fits(self.rows, self.cols, r0, c0, rows, cols) {
            return None;
        }
        // With `rows, cols >= 1` the start is element `(r0, c0)` of this matrix, and the
        // block's last element `(r0 + rows - 1, c0 + cols - 1)` is one of this matrix's valid
        // elements (`fits`), so the new matrix's `(rows - 1) * stride + cols` elements from
        // its start are valid for `'_`, which borrows this one mutably. An empty block
        // reaches no element, whatever its start.
        Some(MatrixMut {
            ptr: self
                .ptr
                .wrapping_add(r0.wrapping_mul(self.stride).wrapping_add(c0)),
            rows,
            cols,
            stride: self.stride,
            _view: PhantomData,
        })
    }

    /// Pointer to element `(r, c)`, stopping the kernel unless `r < rows` and `c < cols`
    /// (then it is one of the valid elements).
    #[inline(always)]
    #[track_caller]
    fn at(&self, r: usize, c: usize) -> *mut T {
        if r >= self.rows || c >= self.cols {
            outside_matrix(r, c, self.rows, self.cols)
        }
        self.ptr.wrapping_add(r * self.stride + c)
    }

    /// Read element `(r, c)`, which this thread need not own (checked against the shape).
    ///
    /// # Safety
    /// No other thread of the launch writes the element during the launch.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// let mut data = [1u8, 2, 3, 4];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let m = out.matrix_mut(2, 2);
    /// // SAFETY: no other thread writes element (1, 0).
    /// assert_eq!(unsafe { m.read(1, 0) }, 3);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read(&self, r: usize, c: usize) -> T
    where
        T: Copy,
    {
        // SAFETY: inside the valid elements (`at`); no concurrent write (the caller's
        // contract).
        unsafe { read_noted(self.at(r, c)) }
    }

    /// Write element `(r, c)`, which this thread need not own (checked against the shape).
    ///
    /// # Safety
    /// No other thread of the launch reads or writes the element during the launch.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// let mut data = [0u8; 4];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(2, 2);
    /// // SAFETY: no other thread touches element (0, 1).
    /// unsafe { m.write(0, 1, 9) };
    /// // Outside the shape: stops the kernel, like an index out of bounds.
    /// let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
    ///     // SAFETY: as above (and outside, which `write` reports before touching anything).
    ///     m.write(0, 2, 9)
    /// }))
    /// .unwrap_err();
    /// assert_eq!(
    ///     err.downcast_ref::<String>().unwrap(),
    ///     "index (0, 2) out of bounds: the matrix is 2 × 2 (rows × columns)"
    /// );
    /// assert_eq!(data, [0, 9, 0, 0]);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&mut self, r: usize, c: usize, v: T) {
        // SAFETY: inside the valid elements (`at`); this thread is the element's only user
        // (the caller's contract).
        unsafe { write_noted(self.at(r, c), v) }
    }

    /// The `R × C` tile whose top-left element is `(r0, c0)`, or `None` unless all of it lies
    /// inside the matrix.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// # let mut data = [0u8; 16];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(4, 4);
    /// assert!(m.get_tile_mut::<2, 2>(2, 2).is_some());
    /// assert!(m.get_tile_mut::<2, 2>(3, 0).is_none());
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn get_tile_mut<const R: usize, const C: usize>(
        &mut self,
        r0: usize,
        c0: usize,
    ) -> Option<TileMut<'_, T, R, C>> {
        if fits(self.rows, self.cols, r0, c0, R, C) {
            // SAFETY: just checked.
            Some(unsafe { self.tile_mut_unchecked(r0, c0) })
        } else {
            None
        }
    }

    /// The `R × C` tile whose top-left element is `(r0, c0)`: one check that the whole tile
    /// lies inside the matrix, after which reaching its elements checks only against `R`
    /// and `C` — the shape of a thread that writes its own patch of a result.
    ///
    /// # Panics
    /// Unless the tile lies inside the matrix, as for [`Matrix::tile`].
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// let mut data = [0u32; 16];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(4, 4);
    /// let mut patch = m.tile_mut::<2, 2>(2, 2);
    /// for r in 0..2 {
    ///     for c in 0..2 {
    ///         // SAFETY: this thread alone touches the patch.
    ///         unsafe { patch.write(r, c, (10 * r + c) as u32) };
    ///     }
    /// }
    /// assert_eq!(&data[8..], &[0, 0, 0, 1, 0, 0, 10, 11]);
    /// ```
    #[inline(always)]
    #[track_caller]
    #[must_use]
    pub fn tile_mut<const R: usize, const C: usize>(
        &mut self,
        r0: usize,
        c0: usize,
    ) -> TileMut<'_, T, R, C> {
        if !fits(self.rows, self.cols, r0, c0, R, C) {
            outside_block(r0, c0, R, C, self.rows, self.cols)
        }
        // SAFETY: just checked.
        unsafe { self.tile_mut_unchecked(r0, c0) }
    }

    /// # Safety
    /// `fits(rows, cols, r0, c0, R, C)`.
    #[inline(always)]
    unsafe fn tile_mut_unchecked<const R: usize, const C: usize>(
        &mut self,
        r0: usize,
        c0: usize,
    ) -> TileMut<'_, T, R, C> {
        TileMut {
            // Element `(r0, c0)` when the tile has one (see `Matrix::tile_unchecked`).
            base: self
                .ptr
                .wrapping_add(r0.wrapping_mul(self.stride).wrapping_add(c0)),
            stride: self.stride,
            origin: (r0, c0),
            _view: PhantomData,
        }
    }
}

/// A `&mut [T]` argument declared `#[matrix(cols = n)]`: a row-major matrix of `n` columns
/// (and `len / n` rows), whose element `(row, col)` belongs to the thread at position
/// `(x = col, y = row)` of a two-dimensional launch. Indexed by that position,
/// [`thread::index_2d`](crate::thread::index_2d), it reads and writes without `unsafe`:
///
/// ```ignore
/// #[gpu_kernel(block = (16, 16))]
/// pub fn scale(k: f32, cols: usize, a: &[f32], #[matrix(cols = cols)] out: &mut [f32]) {
///     let p = thread::index_2d();
///     if p.x() < out.cols() && p.y() < out.rows() {
///         out[p] = k * a[p.y() * cols + p.x()];
///     }
/// }
/// ```
///
/// Why it is sound: the column count comes from a kernel argument, so it is the same in
/// every thread of the launch, and indexing checks `col < cols` as well as `row < rows` —
/// so `row * cols + col` is one-to-one, and distinct positions are distinct elements. The
/// argument is a matrix for the whole kernel: no thread reaches it through another map (an
/// [`Own`](crate::Own) index, another width, a block of it), which could meet a position's
/// element. Indexing outside the matrix stops the kernel at its line with the index and
/// the shape.
///
/// Other writes (a patch per thread, a tile per block) go through
/// [`as_matrix_mut`](GridMatrix::as_matrix_mut) and its `unsafe` accessors.
///
/// ```
/// use berth_device::{GridMatrix, thread};
/// let mut data = [0u32; 7];
/// // SAFETY: `data` outlives the view; this one thread is the launch.
/// let mut out = unsafe { GridMatrix::from_raw(data.as_mut_ptr(), data.len(), 3) };
/// // 7 elements of 3 columns: two whole rows; the seventh element is not in the matrix.
/// assert_eq!((out.rows(), out.cols()), (2, 3));
/// let p = thread::index_2d(); // outside an executor: position (0, 0)
/// out[p] = 5;
/// out[p] += 1;
/// assert_eq!((out[p], data[0]), (6, 6));
/// ```
pub struct GridMatrix<'s, T> {
    /// Element `(r, c)` is `ptr + r * cols + c`; the `len` elements from `ptr` are valid for
    /// reads and writes for `'s` (from `SliceMut::from_raw`'s contract).
    ptr: *mut T,
    len: usize,
    cols: usize,
    _view: PhantomData<&'s mut [T]>,
}

impl<T> core::fmt::Debug for GridMatrix<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GridMatrix")
            .field("rows", &self.rows())
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl<'s, T> GridMatrix<'s, T> {
    /// The view a kernel's entry builds for a `#[matrix(cols = n)]` argument: `len`
    /// elements at `ptr`, `cols` to a row. Not for kernel code (the launcher builds it).
    ///
    /// # Safety
    /// As [`SliceMut::from_raw`](crate::SliceMut::from_raw) for `ptr` and `len`; and every
    /// thread of the launch that reaches these elements does so through a `GridMatrix`
    /// built with the same `cols` (the kernel's argument), and through no other view.
    ///
    /// ```
    /// use berth_device::GridMatrix;
    /// let mut data = [0u8; 12];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let m = unsafe { GridMatrix::from_raw(data.as_mut_ptr(), data.len(), 4) };
    /// assert_eq!((m.rows(), m.cols()), (3, 4));
    /// ```
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T, len: usize, cols: usize) -> Self {
        GridMatrix {
            ptr,
            len,
            cols,
            _view: PhantomData,
        }
    }

    /// Number of rows: the whole rows of `cols` elements the argument holds (none when
    /// `cols` is 0).
    ///
    /// ```
    /// # use berth_device::GridMatrix;
    /// # let mut data = [0u8; 10];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let m = unsafe { GridMatrix::from_raw(data.as_mut_ptr(), 10, 4) };
    /// assert_eq!(m.rows(), 2); // 10 elements of 4 columns: elements 8 and 9 are past the matrix
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn rows(&self) -> usize {
        self.len.checked_div(self.cols).unwrap_or(0)
    }

    /// Number of columns: the kernel argument named by `#[matrix(cols = ..)]`.
    ///
    /// ```
    /// # use berth_device::GridMatrix;
    /// # let mut data = [0u8; 10];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let m = unsafe { GridMatrix::from_raw(data.as_mut_ptr(), 10, 4) };
    /// assert_eq!(m.cols(), 4);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Pointer to element `(p.y(), p.x())`, stopping the kernel unless it is inside the
    /// matrix: `x < cols` and `(y + 1) * cols <= len` (then `y * cols + x < len`).
    #[inline(always)]
    #[track_caller]
    fn at(&self, p: Own2) -> *mut T {
        let (r, c, cols, len) = (p.y(), p.x(), self.cols, self.len);
        // `c < cols` makes `cols >= 1`; with `cols <= len` and `r * cols <= len - cols`,
        // row `r` is one of the whole rows.
        match r.checked_mul(cols) {
            Some(rc) if c < cols && cols <= len && rc <= len - cols => {
                self.ptr.wrapping_add(rc + c)
            }
            _ => outside_matrix(r, c, self.rows(), cols),
        }
    }

    /// The matrix as a [`MatrixMut`] of its whole rows, for writes a position does not name
    /// (a patch per thread, a tile per block): its accessors are `unsafe`, under the
    /// contract that no other thread touches the element — including through a position.
    ///
    /// ```
    /// # use berth_device::GridMatrix;
    /// let mut data = [0u32; 6];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let mut out = unsafe { GridMatrix::from_raw(data.as_mut_ptr(), data.len(), 3) };
    /// let mut m = out.as_matrix_mut();
    /// // SAFETY: this one thread is the launch: no other thread touches element (1, 2).
    /// unsafe { m.write(1, 2, 9) };
    /// assert_eq!(data, [0, 0, 0, 0, 0, 9]);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn as_matrix_mut(&mut self) -> MatrixMut<'_, T> {
        // SAFETY: `rows * cols <= len` elements from `ptr` are valid for reads and writes for
        // as long as this view, which `&mut self` borrows.
        unsafe { MatrixMut::from_raw(self.ptr, self.rows(), self.cols) }
    }
}

impl<T> Index<Own2> for GridMatrix<'_, T> {
    type Output = T;
    /// Element `(row = p.y(), col = p.x())`, which this thread owns; outside the matrix,
    /// stops the kernel with the caller's location, the index and the shape.
    #[inline(always)]
    #[track_caller]
    fn index(&self, p: Own2) -> &T {
        let e = self.at(p);
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check
        crate::host::note_element(e, crate::host::Access::Read);
        // SAFETY: inside the valid elements (`at`). No other thread writes the element: the
        // position `p` is this thread's alone (`Own2`), every thread reaches this argument
        // through this one map of positions to elements (`from_raw`'s contract), and the map
        // is one-to-one (`x < cols`).
        unsafe { &*e }
    }
}

impl<T> IndexMut<Own2> for GridMatrix<'_, T> {
    #[inline(always)]
    #[track_caller]
    fn index_mut(&mut self, p: Own2) -> &mut T {
        let e = self.at(p);
        #[cfg(not(target_arch = "nvptx64"))] // the simulator's race check
        crate::host::note_element(e, crate::host::Access::Write);
        // SAFETY: as in `index`: no other thread reads or writes the element, and `&mut self`
        // keeps this thread's references to it unique.
        unsafe { &mut *e }
    }
}

/// An `R × C` tile of a [`MatrixMut`], checked to lie inside it when it was made
/// ([`MatrixMut::tile_mut`]). Reaching its elements is `unsafe` for the reason
/// [`SliceMut::write`](crate::SliceMut::write) is, and checks only `r < R` and `c < C`.
///
/// ```
/// use berth_device::SliceMut;
/// let mut data = [0u16; 9];
/// // SAFETY: `data` outlives the view; this one thread is the launch.
/// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
/// let mut m = out.matrix_mut(3, 3);
/// // The thread's 2 × 2 patch at the lower right.
/// let mut patch = m.tile_mut::<2, 2>(1, 1);
/// for (r, c) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
///     // SAFETY: this thread alone touches the patch.
///     unsafe { patch.write(r, c, 1) };
/// }
/// assert_eq!(data, [0, 0, 0, 0, 1, 1, 0, 1, 1]);
/// ```
pub struct TileMut<'m, T, const R: usize, const C: usize> {
    /// The matrix's element `origin`.
    base: *mut T,
    /// The matrix's stride.
    stride: usize,
    origin: (usize, usize),
    _view: PhantomData<&'m mut [T]>,
}

impl<T, const R: usize, const C: usize> core::fmt::Debug for TileMut<'_, T, R, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TileMut")
            .field("rows", &R)
            .field("cols", &C)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl<T, const R: usize, const C: usize> TileMut<'_, T, R, C> {
    /// Where the tile starts in its matrix.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// # let mut data = [0u8; 16];
    /// # // SAFETY: `data` outlives the view; this one thread is the launch.
    /// # let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// assert_eq!(out.matrix_mut(4, 4).tile_mut::<2, 2>(1, 2).origin(), (1, 2));
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn origin(&self) -> (usize, usize) {
        self.origin
    }

    /// Pointer to element `(r, c)`, stopping the kernel unless `r < R` and `c < C`.
    #[inline(always)]
    #[track_caller]
    fn at(&self, r: usize, c: usize) -> *mut T {
        if r >= R || c >= C {
            outside_matrix(r, c, R, C)
        }
        // Inside the matrix: the tile was made inside it (`fits`), so with `r < R`, `c < C`
        // the element is `(r0 + r, c0 + c)` of the matrix, one of its valid elements.
        self.base.wrapping_add(r * self.stride + c)
    }

    /// Read element `(r, c)` of the tile.
    ///
    /// # Safety
    /// No other thread of the launch writes the element during the launch.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// let mut data = [1u8, 2, 3, 4];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(2, 2);
    /// let t = m.tile_mut::<1, 2>(1, 0);
    /// // SAFETY: no other thread writes the element.
    /// assert_eq!(unsafe { t.read(0, 1) }, 4);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read(&self, r: usize, c: usize) -> T
    where
        T: Copy,
    {
        // SAFETY: inside the matrix's valid elements (`at`); no concurrent write (the
        // caller's contract).
        unsafe { read_noted(self.at(r, c)) }
    }

    /// Write element `(r, c)` of the tile.
    ///
    /// # Safety
    /// No other thread of the launch reads or writes the element during the launch.
    ///
    /// ```
    /// # use berth_device::SliceMut;
    /// let mut data = [0u8; 4];
    /// // SAFETY: `data` outlives the view; this one thread is the launch.
    /// let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
    /// let mut m = out.matrix_mut(2, 2);
    /// let mut t = m.tile_mut::<1, 2>(1, 0);
    /// // SAFETY: this thread alone touches the tile.
    /// unsafe { t.write(0, 1, 8) };
    /// assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
    ///     // SAFETY: as above (row 1 of a one-row tile: stops before touching anything).
    ///     t.write(1, 0, 8)
    /// }))
    /// .is_err());
    /// assert_eq!(data, [0, 0, 0, 8]);
    /// ```
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&mut self, r: usize, c: usize, v: T) {
        // SAFETY: inside the matrix's valid elements (`at`); this thread is the element's
        // only user (the caller's contract).
        unsafe { write_noted(self.at(r, c), v) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SliceMut;

    /// Every way to ask for a tile that would reach outside the matrix — past either edge,
    /// at origins near `usize::MAX` (where `r0 + R` would wrap), taller or wider than the
    /// matrix, out of an empty matrix — is refused, and every tile that is handed out reads
    /// exactly the elements it names.
    #[test]
    fn tiles_are_handed_out_only_inside_the_matrix() {
        let data: Vec<u32> = (0..7 * 5).collect();
        let m = Matrix::new(&data, 7, 5);
        let big = usize::MAX;
        for (r0, c0) in [
            (6, 0),
            (0, 4),
            (big, 0),
            (0, big),
            (big - 1, big - 1),
            (7, 5),
        ] {
            assert!(m.get_tile::<2, 2>(r0, c0).is_none(), "({r0}, {c0})");
            assert!(std::panic::catch_unwind(|| m.tile::<2, 2>(r0, c0)).is_err());
        }
        assert!(m.get_tile::<8, 1>(0, 0).is_none() && m.get_tile::<1, 6>(0, 0).is_none());
        assert!(m.get_tile::<{ usize::MAX }, 1>(0, 0).is_none());
        for r0 in 0..=5 {
            for c0 in 0..=3 {
                let t = m.tile::<2, 2>(r0, c0);
                for (r, c) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    assert_eq!(t[(r, c)], data[(r0 + r) * 5 + c0 + c]);
                }
                assert_eq!(t.get(2, 0), None);
                assert_eq!(t.get(0, 2), None);
            }
        }
        // Zero-sized tiles are handed out at the far edges and hold nothing.
        let t = m.tile::<0, 0>(7, 5);
        assert_eq!(t.get(0, 0), None);
        let empty = Matrix::new(&data[..0], 0, 5);
        assert!(empty.get_tile::<1, 1>(0, 0).is_none());
        assert_eq!(empty.get(0, 0), None);
    }

    /// A matrix with rows but no columns (a zero-width block of a larger one, or built so)
    /// hands out each row as an empty slice, never a range of the empty `inner` it keeps.
    #[test]
    fn zero_column_matrices_have_empty_rows() {
        let data: Vec<u32> = (0..16).collect();
        let m = Matrix::new(&data, 4, 4);
        for block in [
            m.submatrix(0, 0, 4, 0),
            m.submatrix(1, 4, 3, 0),
            Matrix::new(&data[..0], 4, 0),
        ] {
            let last = block.rows() - 1;
            assert_eq!(block.row(last), &[] as &[u32]);
            assert_eq!(block.get(last, 0), None);
            assert!(std::panic::catch_unwind(|| block.row(block.rows())).is_err());
        }
        let t = m.submatrix(0, 0, 4, 0).tile::<4, 0>(0, 0);
        assert_eq!(t.row(3), &[] as &[u32; 0]);
    }

    /// Blocks of a matrix (and blocks of blocks) keep the enclosing stride: every element,
    /// row, tile and span they hand out is the enclosing matrix's at the shifted position,
    /// and a block reaching outside — past an edge, from an origin near `usize::MAX`, of
    /// zero size beyond the far edge — is refused.
    #[test]
    fn submatrices_read_exactly_their_block() {
        let data: Vec<u32> = (0..6 * 7).collect();
        let m = Matrix::new(&data, 6, 7);
        let at = |r: usize, c: usize| data[r * 7 + c];
        for (r0, c0, h, w) in [(0, 0, 6, 7), (1, 2, 3, 4), (5, 6, 1, 1), (2, 0, 4, 7)] {
            let b = m.submatrix(r0, c0, h, w);
            assert_eq!((b.rows(), b.cols(), b.stride()), (h, w, 7));
            for r in 0..h {
                assert_eq!(b.row(r), &data[(r0 + r) * 7 + c0..][..w]);
                for c in 0..w {
                    assert_eq!(b[(r, c)], at(r0 + r, c0 + c));
                }
                assert_eq!(b.get(r, w), None);
            }
            assert_eq!(b.get(h, 0), None);
            assert_eq!(b.as_slice().len(), (h - 1) * 7 + w);
            if h >= 2 && w >= 2 {
                let t = b.tile::<2, 2>(h - 2, w - 2);
                assert_eq!(t[(1, 1)], at(r0 + h - 1, c0 + w - 1));
                assert!(b.get_tile::<2, 2>(h - 1, 0).is_none());
                // A block of a block.
                let bb = b.submatrix(1, 1, h - 1, w - 1);
                assert_eq!(bb[(h - 2, w - 2)], at(r0 + h - 1, c0 + w - 1));
                assert!(b.get_submatrix(1, 1, h, 1).is_none());
            }
        }
        let big = usize::MAX;
        for (r0, c0, h, w) in [(1, 0, 6, 1), (0, 1, 1, 7), (big, 0, 2, 1), (0, big, 1, 2)] {
            assert!(
                m.get_submatrix(r0, c0, h, w).is_none(),
                "({r0}, {c0}, {h}, {w})"
            );
            assert!(std::panic::catch_unwind(|| m.submatrix(r0, c0, h, w)).is_err());
        }
        let empty = m.submatrix(6, 7, 0, 0);
        assert_eq!((empty.get(0, 0), empty.as_slice().len()), (None, 0));
        assert!(empty.get_tile::<1, 1>(0, 0).is_none());
        assert!(m.get_submatrix(7, 0, 0, 1).is_none());
    }

    /// Walks of whole tiles are handed out only where every tile lies inside the band —
    /// rows or columns that exist, a length that is a whole number of tiles, origins near
    /// `usize::MAX` refused — and from either end they yield exactly the tiles
    /// `tile::<R, C>` names, in order, reading the elements it reads; blocks with the
    /// enclosing stride included.
    #[test]
    fn tile_walks_cover_their_band_exactly_and_only_inside() {
        let data: Vec<u32> = (0..6 * 8).collect();
        let m = Matrix::new(&data, 6, 8);
        let same = |a: Tile<'_, u32, 2, 2>, b: Tile<'_, u32, 2, 2>| {
            a.origin() == b.origin()
                && (0..2).all(|r| (0..2).all(|c| a[(r, c)] == b[(r, c)] && a.row(r) == b.row(r)))
        };
        for band in [m, m.submatrix(2, 2, 4, 6), m.submatrix(0, 1, 6, 4)] {
            for r0 in 0..band.rows() {
                let Some(walk) = band.get_tiles_across::<2, 2>(r0) else {
                    assert!(r0 + 2 > band.rows(), "rows {r0}.. of {band:?}");
                    continue;
                };
                assert_eq!(walk.len(), band.cols() / 2);
                let want: Vec<_> = (0..band.cols() / 2)
                    .map(|k| band.tile::<2, 2>(r0, 2 * k))
                    .collect();
                let got: Vec<_> = walk.clone().collect();
                assert!(
                    got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(*a, *b))
                );
                let back: Vec<_> = walk.clone().rev().collect();
                assert!(back.iter().rev().zip(&want).all(|(a, b)| same(*a, *b)));
                // Skipping ahead lands where stepping does, and past the end stays there.
                for k in 0..=want.len() {
                    let mut w = walk.clone();
                    match (w.nth(k), want.get(k)) {
                        (Some(a), Some(b)) => assert!(same(a, *b)),
                        (a, b) => assert!(a.is_none() && b.is_none(), "nth({k})"),
                    }
                    assert_eq!(w.len(), want.len().saturating_sub(k + 1));
                }
            }
            for c0 in 0..band.cols() {
                let Some(mut walk) = band.get_tiles_down::<2, 2>(c0) else {
                    assert!(c0 + 2 > band.cols(), "columns {c0}.. of {band:?}");
                    continue;
                };
                let want: Vec<_> = (0..band.rows() / 2)
                    .map(|k| band.tile::<2, 2>(2 * k, c0))
                    .collect();
                // From both ends at once, meeting in the middle.
                let (mut front, mut back) = (Vec::new(), Vec::new());
                while let Some(t) = walk.next() {
                    front.push(t);
                    back.extend(walk.next_back());
                }
                assert!(walk.next().is_none() && walk.next_back().is_none());
                front.extend(back.into_iter().rev());
                assert!(
                    front.len() == want.len() && front.iter().zip(&want).all(|(a, b)| same(*a, *b))
                );
            }
        }
        // Not a whole number of tiles, or outside: refused, and reported at the first tile
        // that would not fit.
        let big = usize::MAX;
        assert!(m.get_tiles_across::<2, 3>(0).is_none() && m.get_tiles_down::<4, 1>(0).is_none());
        for r0 in [5, 6, big, big - 1] {
            assert!(m.get_tiles_across::<2, 2>(r0).is_none(), "{r0}");
            assert!(std::panic::catch_unwind(|| m.tiles_across::<2, 2>(r0)).is_err());
        }
        for c0 in [7, 8, big] {
            assert!(m.get_tiles_down::<2, 2>(c0).is_none(), "{c0}");
        }
        assert!(m.get_tiles_across::<7, 1>(0).is_none() && m.get_tiles_down::<1, 9>(0).is_none());
        let message = |f: fn() -> ()| {
            let e = std::panic::catch_unwind(f).unwrap_err();
            e.downcast_ref::<String>().cloned().unwrap_or_default()
        };
        assert_eq!(
            message(|| {
                let data = [0u8; 48];
                let _ = Matrix::new(&data, 6, 8).tiles_across::<2, 3>(4);
            }),
            "index (5, 8) out of bounds: the matrix is 6 × 8 (rows × columns)"
        );
        assert_eq!(
            message(|| {
                let data = [0u8; 48];
                let _ = Matrix::new(&data, 6, 8).tiles_down::<4, 2>(6);
            }),
            "index (7, 7) out of bounds: the matrix is 6 × 8 (rows × columns)"
        );
        // Empty matrices walk nothing; bands that do not exist are refused.
        let none: [u32; 0] = [];
        let empty = Matrix::new(&none, 0, 4);
        assert!(empty.get_tiles_across::<1, 2>(0).is_none());
        assert_eq!(empty.get_tiles_down::<1, 2>(0).map(|w| w.len()), Some(0));
        assert_eq!(
            Matrix::new(&none, 3, 0)
                .get_tiles_across::<1, 2>(0)
                .map(|w| w.len()),
            Some(0)
        );
    }

    /// `Tile` holds a raw pointer, so its `Send` and `Sync` are written by hand, as
    /// `&[T]`'s: tiles and walks of shared `T` go to and are read from several threads at
    /// once, each reading exactly its elements.
    #[test]
    fn tiles_are_shared_across_threads_like_slices() {
        fn send_sync<S: Send + Sync>(_: &S) {}
        let data: Vec<u64> = (0..64).collect();
        let m = Matrix::new(&data, 8, 8);
        let walk = m.tiles_down::<2, 4>(4);
        send_sync(&walk.clone().next().unwrap());
        let sums: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = walk
                .map(|t| s.spawn(move || (0..2).map(|r| t.row(r).iter().sum::<u64>()).sum()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let want: Vec<u64> = (0..4)
            .map(|k| {
                (2 * k..2 * k + 2)
                    .flat_map(|r| (4..8).map(move |c| r * 8 + c))
                    .sum()
            })
            .collect();
        assert_eq!(sums, want);
    }

    /// A shape is checked against the slice, including shapes whose element count
    /// overflows, and an element outside the shape is refused even where the slice has one
    /// (column `cols` of row 0 is element `cols` of the slice).
    #[test]
    fn a_matrix_reads_only_inside_its_shape() {
        let data = [1u8; 12];
        assert!(std::panic::catch_unwind(|| Matrix::new(&data, 13, 1)).is_err());
        assert!(std::panic::catch_unwind(|| Matrix::new(&data, 1 << 33, 1 << 33)).is_err());
        let m = Matrix::new(&data, 3, 3);
        assert_eq!(
            (m.get(0, 3), m.get(3, 0), m.get(2, 2)),
            (None, None, Some(&1))
        );
        let err = std::panic::catch_unwind(|| m[(0, 3)]).unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().unwrap(),
            "index (0, 3) out of bounds: the matrix is 3 × 3 (rows × columns)"
        );
        // Zero-sized elements: any count fits, nothing overflows.
        let units = [(); 4];
        let z = Matrix::new(&units, 2, 2);
        assert!(z.get_tile::<2, 2>(0, 0).is_some() && z.get_tile::<2, 2>(1, 0).is_none());
    }

    /// The writable views check the same shapes, and write only the elements they name.
    #[test]
    fn writable_tiles_write_only_inside_the_matrix() {
        let mut data = [0u32; 20];
        // SAFETY: `data` outlives the view; this one thread is the launch.
        let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
        assert!(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = out.matrix_mut(7, 3);
            }))
            .is_err()
        );
        let mut m = out.matrix_mut(4, 5);
        assert!(m.get_tile_mut::<2, 2>(3, 0).is_none());
        assert!(m.get_tile_mut::<2, 2>(0, 4).is_none());
        assert!(m.get_tile_mut::<2, 2>(usize::MAX, usize::MAX).is_none());
        let mut t = m.tile_mut::<2, 3>(2, 2);
        for r in 0..2 {
            for c in 0..3 {
                // SAFETY: one thread: nobody else touches the tile.
                unsafe { t.write(r, c, 1 + (r * 3 + c) as u32) };
            }
        }
        for (r, c) in [(2, 0), (0, 3)] {
            let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // SAFETY: as above; outside the tile, which `write` refuses first.
                unsafe { t.write(r, c, 99) }
            }));
            assert!(e.is_err(), "({r}, {c})");
        }
        // SAFETY: one thread.
        assert_eq!(unsafe { t.read(1, 2) }, 6);
        let mut want = [0u32; 20];
        for r in 0..2 {
            for c in 0..3 {
                want[(2 + r) * 5 + 2 + c] = 1 + (r * 3 + c) as u32;
            }
        }
        assert_eq!(data, want);
    }
    /// Writable blocks (and blocks of blocks, and tiles of blocks) keep the enclosing stride:
    /// every element they read or write is the enclosing matrix's at the shifted position,
    /// and nothing outside the block is written; a block reaching outside — past an edge,
    /// from an origin near `usize::MAX`, of zero size beyond the far edge — is refused.
    #[test]
    fn writable_blocks_write_exactly_their_block() {
        let big = usize::MAX;
        for (r0, c0, h, w) in [(0, 0, 6, 7), (1, 2, 3, 4), (5, 6, 1, 1), (2, 0, 4, 7)] {
            let mut data = [0u32; 6 * 7];
            // SAFETY: `data` outlives the view; this one thread is the launch.
            let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
            let mut m = out.matrix_mut(6, 7);
            let mut b = m.submatrix_mut(r0, c0, h, w);
            assert_eq!((b.rows(), b.cols(), b.stride()), (h, w, 7));
            for r in 0..h {
                for c in 0..w {
                    // SAFETY: one thread: nobody else touches the block.
                    unsafe { b.write(r, c, 1 + (r * w + c) as u32) };
                }
            }
            for (r, c) in [(h, 0), (0, w), (big, 0)] {
                let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    // SAFETY: as above; outside the block, which `write` refuses first.
                    unsafe { b.write(r, c, 99) }
                }));
                assert!(e.is_err(), "({r}, {c}) of a {h} × {w} block");
            }
            // SAFETY: one thread.
            assert_eq!(unsafe { b.read(h - 1, w - 1) }, (h * w) as u32);
            if h >= 2 && w >= 2 {
                // A tile of the block and a block of the block write the enclosing matrix's
                // elements at the shifted position.
                // SAFETY: one thread.
                unsafe { b.tile_mut::<2, 2>(h - 2, w - 2).write(1, 1, 500) };
                assert!(b.get_tile_mut::<2, 2>(h - 1, 0).is_none());
                let mut bb = b.submatrix_mut(1, 1, h - 1, w - 1);
                // SAFETY: one thread.
                unsafe { bb.write(0, 0, 600) };
                assert!(b.get_submatrix_mut(1, 1, h, 1).is_none());
            }
            let mut want = [0u32; 6 * 7];
            for r in 0..h {
                for c in 0..w {
                    want[(r0 + r) * 7 + c0 + c] = 1 + (r * w + c) as u32;
                }
            }
            if h >= 2 && w >= 2 {
                want[(r0 + h - 1) * 7 + c0 + w - 1] = 500;
                want[(r0 + 1) * 7 + c0 + 1] = 600;
            }
            assert_eq!(data, want, "block ({r0}, {c0}) {h} × {w}");
        }
        let mut data = [7u32; 6 * 7];
        // SAFETY: `data` outlives the view; this one thread is the launch.
        let mut out = unsafe { SliceMut::from_raw(data.as_mut_ptr(), data.len()) };
        let mut m = out.matrix_mut(6, 7);
        for (r0, c0, h, w) in [(1, 0, 6, 1), (0, 1, 1, 7), (big, 0, 2, 1), (0, big, 1, 2)] {
            assert!(
                m.get_submatrix_mut(r0, c0, h, w).is_none(),
                "({r0}, {c0}, {h}, {w})"
            );
            let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = m.submatrix_mut(r0, c0, h, w);
            }));
            assert!(e.is_err(), "({r0}, {c0}, {h}, {w})");
        }
        let mut empty = m.submatrix_mut(6, 7, 0, 0);
        assert!(empty.get_tile_mut::<1, 1>(0, 0).is_none());
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: one thread; an empty block has no element, which `write` refuses first.
            unsafe { empty.write(0, 0, 1) }
        }));
        assert!(e.is_err());
        assert!(m.get_submatrix_mut(7, 0, 0, 1).is_none());
        assert_eq!(data, [7u32; 6 * 7], "refused blocks write nothing");
    }
}
