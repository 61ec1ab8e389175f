//! Runtime behaviour that needs no GPU: errors instead of panics where the driver is absent,
//! and launch-configuration arithmetic.

use berth::{Error, Gpu, Grid};

#[test]
fn missing_driver_is_a_typed_error_not_a_panic() {
    // SAFETY: only checks whether libcuda can be opened.
    let driver_present = unsafe { berth::raw::sys::is_culib_present() };
    match Gpu::new() {
        Err(Error::NoDriver(why)) => {
            assert!(!driver_present, "driver present but NoDriver: {why}");
            let msg = Error::NoDriver(why).to_string();
            assert!(msg.contains("no CUDA driver"), "{msg}");
        }
        Err(Error::NoDevice { .. }) => assert!(driver_present),
        Ok(gpu) => assert!(
            driver_present,
            "got a GPU ({}) without a driver?",
            gpu.name()
        ),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[test]
fn cover_rounds_up_to_whole_blocks() {
    for (n, blocks) in [
        (0, 1),
        (1, 1),
        (256, 1),
        (257, 2),
        (1 << 20, 4096),
        (1_000_001, 3907),
    ] {
        let g = Grid::cover(n);
        assert_eq!(g.blocks.x, blocks, "n = {n}");
        assert_eq!(g.threads.x, Grid::DEFAULT_BLOCK);
        assert!(g.threads_x() >= n as u64);
    }
    assert_eq!(Grid::cover_with_block(1000, 128).blocks.x, 8);
    assert_eq!(Grid::new((2, 3), (32, 4, 2)).threads.z, 2);
}
