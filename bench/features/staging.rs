//! The host's pass over a batch of ids that a hot tier's gather stages: copy 65,536 `u32`s
//! from memory the caches do not hold (64 batches drawn before, 256 MiB written between
//! rounds) into one of four destination buffers, taking the largest with four running
//! maxima, as `HotTier::gather` does, 60 µs apart (the GPU's part of a batch, untimed).
//! With streaming or plain 16-byte stores, on 1 to 4 threads (the calling one and helpers
//! that spin for their shares), against `memcpy`.
//! One line per case: `stores threads: µs a batch`, the last of three rounds.
//!
//! `cargo run --release -p berth-bench --bin bench_staging` (x86-64 only).

#[cfg(target_arch = "x86_64")]
fn main() {
    x86::main();
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("bench_staging measures SSE2 stores: x86-64 only");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_andnot_si128, _mm_cmpgt_epi32, _mm_loadu_si128, _mm_or_si128,
        _mm_set1_epi32, _mm_sfence, _mm_storeu_si128, _mm_stream_si128, _mm_xor_si128,
    };
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
    use std::time::Instant;

    const IDS: usize = 1 << 16;
    const BATCHES: usize = 64;

    /// Copy `src` into `dst` (16-byte aligned, a multiple of 16 elements long) and give the
    /// largest element.
    fn copy_max(dst: &mut [u32], src: &[u32], streaming: bool) -> u32 {
        assert!(dst.len() == src.len() && dst.len().is_multiple_of(16));
        assert!(dst.as_ptr().align_offset(16) == 0);
        // SAFETY: SSE2 is part of every x86-64 CPU.
        let flip = unsafe { _mm_set1_epi32(i32::MIN) };
        let mut tops = [flip; 4];
        for (d, s) in dst.chunks_exact_mut(16).zip(src.chunks_exact(16)) {
            for (k, top) in tops.iter_mut().enumerate() {
                // SAFETY: SSE2 is part of every x86-64 CPU; `s[4k..]` and `d[4k..]` hold 4
                // elements each (chunks of 16), `d` at a 16-byte boundary (asserted above,
                // chunks of 64 bytes), as the streaming store needs.
                unsafe {
                    let v = _mm_loadu_si128(s[4 * k..].as_ptr().cast::<__m128i>());
                    let at = d[4 * k..].as_mut_ptr().cast::<__m128i>();
                    if streaming {
                        _mm_stream_si128(at, v);
                    } else {
                        _mm_storeu_si128(at, v);
                    }
                    let f = _mm_xor_si128(v, flip);
                    let above = _mm_cmpgt_epi32(f, *top);
                    *top = _mm_or_si128(_mm_and_si128(above, f), _mm_andnot_si128(above, *top));
                }
            }
        }
        // SAFETY: SSE is part of every x86-64 CPU.
        unsafe { _mm_sfence() };
        let mut max = 0;
        for top in tops {
            let mut lanes = [0i32; 4];
            // SAFETY: SSE2; `lanes` is 16 writable bytes.
            unsafe { _mm_storeu_si128(lanes.as_mut_ptr().cast::<__m128i>(), top) };
            for lane in lanes {
                max = max.max((lane ^ i32::MIN) as u32);
            }
        }
        max
    }

    /// A helper's share: posted by number, done when `done` reaches it.
    #[derive(Default)]
    struct Share {
        src: AtomicU64,
        dst: AtomicU64,
        len: AtomicU64,
        posted: AtomicU64,
        done: AtomicU64,
        max: AtomicU32,
    }

    /// 16-byte aligned memory of `n` elements.
    fn aligned(n: usize) -> Vec<u128> {
        vec![0u128; n.div_ceil(4)]
    }

    pub fn main() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let all: Vec<u32> = (0..IDS * BATCHES)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 134_217_728) as u32
            })
            .collect();
        let mut ring: Vec<Vec<u128>> = (0..4).map(|_| aligned(IDS)).collect();
        let mut evict = vec![0u8; 256 << 20];
        for streaming in [true, false] {
            for threads in 1..=4usize {
                let shares: Vec<Share> = (1..threads).map(|_| Share::default()).collect();
                let stop = AtomicBool::new(false);
                std::thread::scope(|scope| {
                    for share in &shares {
                        let stop = &stop;
                        scope.spawn(move || {
                            let mut seen = 0;
                            while !stop.load(Ordering::Acquire) {
                                let posted = share.posted.load(Ordering::Acquire);
                                if posted == seen {
                                    std::hint::spin_loop();
                                    continue;
                                }
                                seen = posted;
                                let len = share.len.load(Ordering::Relaxed) as usize;
                                // SAFETY: the poster keeps both ranges borrowed, the
                                // destination exclusively, until `done` says this share is
                                // over; it waits for that before touching them again.
                                let (src, dst) = unsafe {
                                    (
                                        std::slice::from_raw_parts(
                                            share.src.load(Ordering::Relaxed) as *const u32,
                                            len,
                                        ),
                                        std::slice::from_raw_parts_mut(
                                            share.dst.load(Ordering::Relaxed) as *mut u32,
                                            len,
                                        ),
                                    )
                                };
                                share
                                    .max
                                    .store(copy_max(dst, src, streaming), Ordering::Relaxed);
                                share.done.store(seen, Ordering::Release);
                            }
                        });
                    }
                    let mut line = 0.0;
                    for round in 0..3u64 {
                        for (i, b) in evict.iter_mut().enumerate().step_by(64) {
                            *b = i as u8;
                        }
                        let mut total = std::time::Duration::ZERO;
                        for b in 0..BATCHES {
                            let src = &all[b * IDS..][..IDS];
                            let ring_at = ring[b % 4].as_mut_ptr().cast::<u32>();
                            // SAFETY: the buffer holds `IDS` u32s (4 to a u128), borrowed
                            // mutably through `ring` for this batch alone.
                            let dst = unsafe { std::slice::from_raw_parts_mut(ring_at, IDS) };
                            let started = Instant::now();
                            let each = IDS / threads / 16 * 16;
                            let (own, mut rest) = dst.split_at_mut(each);
                            let number = round * BATCHES as u64 + b as u64 + 1;
                            for (k, share) in shares.iter().enumerate() {
                                let start = (k + 1) * each;
                                let len = if k + 2 == threads { IDS - start } else { each };
                                let (this, later) = std::mem::take(&mut rest).split_at_mut(len);
                                rest = later;
                                share
                                    .src
                                    .store(src[start..].as_ptr() as u64, Ordering::Relaxed);
                                share.dst.store(this.as_mut_ptr() as u64, Ordering::Relaxed);
                                share.len.store(len as u64, Ordering::Relaxed);
                                share.posted.store(number, Ordering::Release);
                            }
                            let mut max = copy_max(own, &src[..each], streaming);
                            for share in &shares {
                                while share.done.load(Ordering::Acquire) != number {
                                    std::hint::spin_loop();
                                }
                                max = max.max(share.max.load(Ordering::Relaxed));
                            }
                            total += started.elapsed();
                            std::hint::black_box(max);
                            // The GPU's part of a batch, untimed: the helpers spin meanwhile.
                            let pause = Instant::now();
                            while pause.elapsed().as_micros() < 60 {
                                std::hint::spin_loop();
                            }
                        }
                        line = total.as_secs_f64() * 1e6 / BATCHES as f64;
                    }
                    stop.store(true, Ordering::Release);
                    let stores = if streaming { "streaming" } else { "plain" };
                    println!("{stores} {threads}: {line:.1} µs a batch");
                });
            }
        }
        for round in 0..3 {
            for (i, b) in evict.iter_mut().enumerate().step_by(64) {
                *b = i as u8;
            }
            let started = Instant::now();
            for b in 0..BATCHES {
                let ring_at = ring[b % 4].as_mut_ptr().cast::<u32>();
                // SAFETY: as above.
                let dst = unsafe { std::slice::from_raw_parts_mut(ring_at, IDS) };
                dst.copy_from_slice(&all[b * IDS..][..IDS]);
            }
            if round == 2 {
                let us = started.elapsed().as_secs_f64() * 1e6 / BATCHES as f64;
                println!("memcpy: {us:.1} µs a batch");
            }
        }
    }
}
