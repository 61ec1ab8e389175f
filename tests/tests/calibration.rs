//! `Gpu::link_costs()` finds a calibration for its own device and ignores others. Its own
//! test binary: it sets `BERTH_LINK_COSTS`, which every context of the process reads.

use berth::Gpu;
use berth::placement::LinkCosts;

#[test]
fn a_context_uses_the_calibration_of_its_device_only() {
    let dir = std::env::temp_dir().join(format!("berth-calibration-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("link-costs.json");
    // SAFETY: the only test of this binary, and it starts no threads before this point, so
    // nothing reads the environment concurrently.
    unsafe { std::env::set_var("BERTH_LINK_COSTS", &path) };
    assert_eq!(LinkCosts::cache_path(), Some(path.clone()));

    let measured = LinkCosts {
        copy_bytes_per_s: 11e9,
        copy_d2h_bytes_per_s: 12e9,
        mapped_seq_bytes_per_s: 9e9,
        mapped_random_per_s: [3e7, 2.9e7, 2.5e7, 2e7, 1e7, 0.9e7, 0.8e7],
        mapped_latency_s: 3e-6,
        pin_s_per_byte: 5e-10,
        device_gather_bytes_per_s: 0.4e12,
        fixed_s: 2e-5,
        calibrated: true,
    };

    // No file: conservative constants, marked uncalibrated.
    let gpu = Gpu::simulator();
    assert_eq!(gpu.link_costs(), LinkCosts::conservative());

    // A calibration of another device is ignored.
    std::fs::write(&path, measured.to_json("some other GPU")).unwrap();
    assert_eq!(Gpu::simulator().link_costs(), LinkCosts::conservative());

    // This device's calibration is used by a new context; a context keeps what it read.
    let gpu2 = Gpu::simulator();
    std::fs::write(&path, measured.to_json(gpu2.name())).unwrap();
    assert_eq!(gpu2.link_costs(), measured);
    assert_eq!(gpu.link_costs(), LinkCosts::conservative());

    // An explicit override wins only before the first use.
    let gpu3 = Gpu::simulator();
    assert!(gpu3.set_link_costs(LinkCosts::h200_reference()));
    assert_eq!(gpu3.link_costs(), LinkCosts::h200_reference());
    assert!(!gpu2.set_link_costs(LinkCosts::h200_reference()));

    std::fs::remove_dir_all(&dir).unwrap();
}
