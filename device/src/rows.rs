//! A kernel's view of a table read a row at a time by id, through a hot tier where the launch
//! passes one ([`Rows`]).

use core::marker::PhantomData;
use core::ops::Index;

/// A kernel's view of an `#[auto] table: &Rows<T>` argument: a table of rows of
/// [`width`](Rows::width) elements, read one row at a time by its id. Where the launch passes
/// a hot tier (the host passed a `HotTier`), each row is looked up in the tier's slot table
/// and read from device memory if it is resident there, else from the table in host memory;
/// otherwise every row is read from the table where the launch put it. The kernel's code is
/// the same either way: `table.row(id)` (or `&table[id]`) is the row's elements.
///
/// An id that is not a row of the table stops the kernel with its location, like an index
/// out of bounds.
///
/// ```
/// use berth_device::Rows;
/// // Three rows of two floats; row 2 is resident in slot 0 of a tier of one slot, which
/// // holds it.
/// let table = [0.0f32, 1.0, 10.0, 11.0, 20.0, 21.0];
/// let slots = [u32::MAX, u32::MAX, 0];
/// let tier = [20.0f32, 21.0];
/// // SAFETY: `table` holds 3 rows of 2; every slot table entry is at least the capacity or
/// // names a slot of `tier` that holds its row; all outlive the view and none is written.
/// let rows = unsafe { Rows::from_raw(table.as_ptr(), 6, slots.as_ptr(), tier.as_ptr(), 1, 2) };
/// assert_eq!((rows.rows(), rows.width()), (3, 2));
/// assert_eq!(rows.row(1), &[10.0, 11.0]);
/// assert_eq!(&rows[2], &[20.0, 21.0]); // read from the tier
/// assert!(rows.is_resident(2) && !rows.is_resident(0));
/// assert_eq!(rows.get(3), None);
/// ```
pub struct Rows<'a, T> {
    /// Row `r` at `table + r × width`.
    table: *const T,
    rows: usize,
    width: usize,
    /// The slot table (`rows` entries), or null.
    slots: *const u32,
    /// `capacity` slots of `width` elements.
    tier: *const T,
    capacity: usize,
    _life: PhantomData<&'a [T]>,
}

impl<'a, T> Rows<'a, T> {
    /// Build the view of a kernel argument: a table of `len` elements at `table`, rows of
    /// `width` elements (`len / width` rows; none where `width` is 0), read through the slot
    /// table `slots` of a tier of `capacity` slots at `tier` unless `slots` is null.
    ///
    /// # Safety
    /// `table` is valid for reads of `len` elements for `'a`, aligned. Unless `slots` is null:
    /// it is valid for reads of one `u32` per row for `'a`, and every entry below `capacity`
    /// names a slot `s` whose `width` elements at `tier + s × width` (valid for reads for
    /// `'a`, aligned) are the row's. Nothing writes any of this memory during `'a`.
    ///
    /// ```
    /// use berth_device::Rows;
    /// let table = [0u32, 1, 10, 11, 20, 21]; // 3 rows of 2
    /// // SAFETY: `table` holds 3 rows of 2 and outlives the view; no tier.
    /// let rows = unsafe { Rows::from_raw(table.as_ptr(), 6, core::ptr::null(), core::ptr::null(), 0, 2) };
    /// assert_eq!(rows.row(2), &[20, 21]);
    /// ```
    #[inline(always)]
    pub unsafe fn from_raw(
        table: *const T,
        len: usize,
        slots: *const u32,
        tier: *const T,
        capacity: usize,
        width: usize,
    ) -> Self {
        Rows {
            table,
            rows: len.checked_div(width).unwrap_or(0),
            width,
            slots,
            tier,
            capacity,
            _life: PhantomData,
        }
    }

    /// A view of `table` read by rows of `width` elements, without a tier: every row is read
    /// from `table` (`table.len() / width` rows; none where `width` is 0).
    ///
    /// ```
    /// use berth_device::Rows;
    /// let rows = Rows::new(&[0u32, 1, 10, 11, 20, 21], 2);
    /// assert_eq!((rows.rows(), rows.row(2)), (3, &[20, 21][..]));
    /// ```
    #[inline(always)]
    pub fn new(table: &'a [T], width: usize) -> Self {
        // SAFETY: `table` is valid for reads of its length for `'a`, aligned, and a shared
        // borrow: nothing writes it during `'a`; no slot table.
        unsafe {
            Rows::from_raw(
                table.as_ptr(),
                table.len(),
                core::ptr::null(),
                core::ptr::null(),
                0,
                width,
            )
        }
    }

    /// Rows of the table: the ids below this are rows.
    ///
    /// ```
    /// use berth_device::Rows;
    /// let rows = Rows::new(&[0u32, 1, 10, 11, 20, 21], 2); // 3 rows of 2
    /// assert_eq!(rows.rows(), 3);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Elements per row.
    ///
    /// ```
    /// use berth_device::Rows;
    /// let rows = Rows::new(&[0u32, 1, 10, 11, 20, 21], 2); // 3 rows of 2
    /// assert_eq!(rows.width(), 2);
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn width(&self) -> usize {
        self.width
    }

    /// Whether the launch reads row `id` from a tier's device memory (false for an id that
    /// is not a row, and for every row where the launch passed no tier).
    ///
    /// ```
    /// use berth_device::Rows;
    /// let rows = Rows::new(&[0u32, 1, 10, 11, 20, 21], 2); // 3 rows of 2
    /// assert!(!rows.is_resident(1)); // no tier: every row read from the table
    /// ```
    #[inline(always)]
    #[must_use]
    pub fn is_resident(&self, id: usize) -> bool {
        id < self.rows && self.slot(id).is_some()
    }

    /// The slot of row `id < rows` in the tier, if the launch passed one and it holds the row.
    #[inline(always)]
    fn slot(&self, id: usize) -> Option<usize> {
        if self.slots.is_null() {
            return None;
        }
        // SAFETY: `id < rows`, and a slot table that is not null has one entry per row, not
        // written during `'a` (from_raw's contract).
        let s = unsafe { *self.slots.add(id) } as usize;
        (s < self.capacity).then_some(s)
    }

    /// Row `id`, or `None` where `id` is not a row of the table.
    ///
    /// ```
    /// use berth_device::Rows;
    /// let rows = Rows::new(&[0u32, 1, 10, 11, 20, 21], 2); // 3 rows of 2
    /// assert_eq!((rows.get(1), rows.get(3)), (Some(&[10, 11][..]), None));
    /// ```
    #[inline(always)]
    pub fn get(&self, id: usize) -> Option<&'a [T]> {
        if id >= self.rows {
            return None;
        }
        let start = match self.slot(id) {
            // SAFETY: slot `s < capacity` holds the row's `width` elements (from_raw's
            // contract); `s × width` is inside the tier's allocation, so it does not overflow.
            Some(s) => unsafe { self.tier.add(s * self.width) },
            // SAFETY: `id < rows`, so the row's elements are inside the table's `len`.
            None => unsafe { self.table.add(id * self.width) },
        };
        // SAFETY: `width` readable elements from `start`, not written during `'a` (above).
        Some(unsafe { crate::slice::slice_from_raw(start, self.width) })
    }

    /// Row `id`; an id that is not a row stops the kernel with the caller's location.
    ///
    /// ```
    /// use berth_device::Rows;
    /// let rows = Rows::new(&[0u32, 1, 10, 11, 20, 21], 2); // 3 rows of 2
    /// assert_eq!(rows.row(0), &[0, 1]);
    /// assert!(std::panic::catch_unwind(|| rows.row(3)).is_err());
    /// ```
    #[inline(always)]
    #[track_caller]
    pub fn row(&self, id: usize) -> &'a [T] {
        match self.get(id) {
            Some(r) => r,
            None => crate::panic::index_out_of_bounds(id, self.rows),
        }
    }
}

impl<T> Index<usize> for Rows<'_, T> {
    type Output = [T];
    /// Row `id` ([`Rows::row`]).
    #[inline(always)]
    #[track_caller]
    fn index(&self, id: usize) -> &[T] {
        self.row(id)
    }
}

#[cfg(test)]
mod tests {
    use super::Rows;

    #[test]
    fn rows_read_from_the_tier_where_resident_and_from_the_table_elsewhere() {
        let table: Vec<u32> = (0..40).collect(); // 10 rows of 4
        // Rows 3 and 7 resident, in slots 1 and 0 (with other values there, so that a read
        // from the table would show); row 5's entry a pending mark, row 9's a slot past the
        // capacity: both read from the table.
        let tier = [700u32, 701, 702, 703, 300, 301, 302, 303];
        let mut slots = [u32::MAX; 10];
        (slots[3], slots[7], slots[5], slots[9]) = (1, 0, u32::MAX - 1, 2);
        // SAFETY: 10 rows of 4; entries below 2 name slots holding their rows' values; all
        // outlive the views and none is written.
        let v = unsafe { Rows::from_raw(table.as_ptr(), 40, slots.as_ptr(), tier.as_ptr(), 2, 4) };
        assert_eq!(v.row(3), &[300, 301, 302, 303]);
        assert_eq!(v.row(7), &[700, 701, 702, 703]);
        assert_eq!(v.row(5), &[20, 21, 22, 23]);
        assert_eq!(v.row(9), &[36, 37, 38, 39]);
        assert!(v.is_resident(3) && !v.is_resident(9) && !v.is_resident(10));
        assert_eq!(v.get(10), None);
        // No slot table: every row from the table.
        let plain = Rows::new(&table, 4);
        assert_eq!(plain.row(3), &[12, 13, 14, 15]);
        assert!(!plain.is_resident(3));
        // A width of 0 has no rows; a partial last row is not a row.
        let none = Rows::new(&table, 0);
        assert_eq!((none.rows(), none.get(0)), (0, None));
        // 39 elements: 9 whole rows of 4.
        let short = Rows::new(&table[..39], 4);
        assert_eq!((short.rows(), short.get(9)), (9, None));
    }

    #[test]
    fn an_id_past_the_table_stops_the_kernel() {
        let table = [1u8; 8];
        let v = Rows::new(&table, 2); // 4 rows of 2
        let err = std::panic::catch_unwind(|| v.row(4)).unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().unwrap(),
            "index out of bounds: the len is 4 but the index is 4"
        );
    }
}
