//! Tensor maps: the host's description of a matrix in device memory for the bulk tensor
//! copies of [`berth_device::tma`].

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use berth_device::DeviceCopy;
use berth_device::tma::{MapShape, TensorMap};
use std::sync::Arc;

impl Gpu {
    /// The tensor map of `matrix` seen as `rows × cols` elements, row-major (its first
    /// `rows * cols` elements), copied in boxes of `box_rows` rows of 128 bytes
    /// (`128 / size_of::<T>()` elements) with the 128-byte swizzle: the layout of a
    /// [`SwizzledTile<T, box_rows>`](berth_device::tma::SwizzledTile). On a GPU the driver
    /// encodes it (`cuTensorMapEncodeTiled`); on the simulator the shape alone is kept.
    ///
    /// Pass it to the kernel in a `&[TensorMap]` argument ([`Gpu::upload`] a slice of maps),
    /// with `matrix` itself as the `&[T]` argument that [`berth_device::tma::load`] checks the
    /// map against.
    ///
    /// # Errors
    /// [`Error::Usage`] when `matrix` belongs to another GPU, is shorter than `rows * cols`, a
    /// row is not a multiple of 16 bytes, a dimension is 0 or past `u32`, `box_rows` is not 8
    /// to 256 in steps of 8, or `128` is not a multiple of `size_of::<T>()`; the driver's error
    /// if it refuses the map.
    pub fn tensor_map<T: DeviceCopy>(
        &self,
        matrix: &DeviceBuffer<T>,
        rows: usize,
        cols: usize,
        box_rows: usize,
    ) -> Result<TensorMap> {
        let es = size_of::<T>();
        let usage = |why: &str| Err(Error::Usage(format!("Gpu::tensor_map: {why}")));
        if !Arc::ptr_eq(&matrix.gpu, &self.inner) {
            return usage("the matrix belongs to another GPU");
        }
        if es == 0 || !128usize.is_multiple_of(es) {
            return usage("the element size does not divide 128 bytes");
        }
        if rows == 0 || cols == 0 || u32::try_from(rows).is_err() || u32::try_from(cols).is_err() {
            return usage("rows and columns are 1 to u32::MAX");
        }
        if rows.checked_mul(cols).is_none_or(|n| n > matrix.len()) {
            return usage("the buffer is shorter than rows × columns");
        }
        if !(cols * es).is_multiple_of(16) {
            return usage("a row must be a multiple of 16 bytes");
        }
        if box_rows == 0 || box_rows > 256 || !box_rows.is_multiple_of(8) {
            return usage("a box has 8 to 256 rows, a multiple of 8");
        }
        let shape = MapShape {
            rows: rows as u32,
            cols: cols as u32,
            row_stride: cols as u64,
            box_rows: box_rows as u32,
            box_cols: (128 / es) as u32,
            elem_bytes: es as u32,
            swizzle: 128,
        };
        self.inner.bind()?;
        let encoded = self.inner.ops().tensor_map(matrix.ptr, &shape)?;
        // SAFETY: `encoded` is the driver's encoding of exactly this shape at `matrix.ptr`
        // (zeros on the simulator), a device allocation (256-byte aligned) holding the matrix.
        Ok(unsafe { TensorMap::from_parts(encoded, matrix.ptr, shape) })
    }
}
