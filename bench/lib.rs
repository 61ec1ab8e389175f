//! What berth's benchmarks share: CUDA-event timing of launches, medians, and the streamed
//! input the CUDA C++ references compute alike.
//!
//! Each benchmark is a folder beside this file: `main.rs` (the berth side, a binary of this
//! crate), `reference.cu` (the same work in CUDA C++, compiled with nvcc on the GPU machine in
//! the same run), `record.rs` (how `cargo xtask record` renders its lines into
//! `BENCHMARKS.md`; compiled into xtask) and a `README.md` where the reference needs one.
//! `.gpu/run.sh` runs them (`cargo xtask gpu` stages it); `bench/README.md` lists them.

/// Element `i` of the benchmarks' streamed input: splitmix64 of `i`, scaled to `[-1, 1)`. A
/// pure function of `i`, the same as `x_at` in `bench/include/stream_input.h` (the CUDA references'), so
/// both sides stream identical data and any element can be checked without keeping the input.
pub fn stream_input_at(i: usize) -> f32 {
    let mut z = 0x243F_6A88_85A3_08D3u64.wrapping_add(
        (i as u64)
            .wrapping_add(1)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) >> 40) as f32 * (2.0 / 16_777_216.0) - 1.0
}

/// The median of the benchmarks' timings (the upper middle one for an even count).
pub fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// GPU timing for the benchmarks: CUDA events around work enqueued on the default stream.
pub mod timing {
    use berth::Gpu;
    use berth::raw::{result, sys};

    type BoxError = Box<dyn std::error::Error>;

    /// A pair of timing events on a GPU's default stream.
    pub struct Timer {
        start: sys::CUevent,
        stop: sys::CUevent,
        stream: sys::CUstream,
    }

    impl Timer {
        /// Events on `gpu`'s default stream.
        pub fn new(gpu: &Gpu) -> Result<Self, BoxError> {
            let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
            Ok(Timer {
                start: result::event::create(flags)?,
                stop: result::event::create(flags)?,
                stream: gpu
                    .raw_default_stream()
                    .ok_or("CUDA event timing needs a GPU, not the simulator")?,
            })
        }

        /// Milliseconds the GPU work `f` enqueues takes. The stop event is recorded right
        /// after `f` returns its guard, as the CUDA C++ reference records it after its launch,
        /// so the time includes berth's host-side launch work but not the wait.
        pub fn time<'a>(
            &self,
            f: impl FnOnce() -> berth::Result<berth::Pending<'a>>,
        ) -> Result<f32, BoxError> {
            // SAFETY: both events and the stream belong to the current context.
            unsafe { result::event::record(self.start, self.stream) }?;
            let pending = f()?;
            // SAFETY: as above.
            unsafe { result::event::record(self.stop, self.stream) }?;
            pending.wait()?;
            // SAFETY: as above.
            unsafe {
                result::event::synchronize(self.stop)?;
                Ok(result::event::elapsed(self.start, self.stop)?)
            }
        }
    }

    /// The median of `v` (the mean of the middle two for an even count).
    pub fn median(mut v: Vec<f32>) -> f64 {
        v.sort_by(f32::total_cmp);
        let n = v.len();
        match n {
            0 => f64::NAN,
            _ if n % 2 == 1 => f64::from(v[n / 2]),
            _ => (f64::from(v[n / 2 - 1]) + f64::from(v[n / 2])) / 2.0,
        }
    }
}

#[cfg(test)]
mod tests {
    /// The values `bench/include/stream_input.h`'s `x_at` gives (splitmix64, the top 24 bits scaled).
    #[test]
    fn the_streamed_input_matches_the_cuda_references() {
        let got = [super::stream_input_at(0), super::stream_input_at(12345)];
        let want = [-0.650_849_6_f32, 0.574_077_6];
        assert_eq!(got, want);
    }
}
