//! Calibration I/O of the placement model: the link's constants ([`LinkCosts`]) as a JSON file
//! per machine (`cargo xtask calibrate` writes it), found in a cache directory, read once per
//! context; uncalibrated machines get [`LinkCosts::conservative`].

use crate::context::Inner;
use crate::gpu::Gpu;
use crate::placement::model::{
    DEVICE_GATHER_CONSERVATIVE, LinkCosts, RANDOM_FOOTPRINTS, interpolate,
};

impl LinkCosts {
    /// The constants as JSON (the calibration file's format).
    pub fn to_json(&self, device: &str) -> String {
        serde_json::json!({
            "device": device,
            "copy_bytes_per_s": self.copy_bytes_per_s,
            "copy_d2h_bytes_per_s": self.copy_d2h_bytes_per_s,
            "mapped_seq_bytes_per_s": self.mapped_seq_bytes_per_s,
            "mapped_random_per_s": self.random_points(),
            "mapped_latency_s": self.mapped_latency_s,
            "pin_s_per_byte": self.pin_s_per_byte,
            "device_gather_bytes_per_s": self.device_gather_bytes_per_s,
            "fixed_s": self.fixed_s,
        })
        .to_string()
    }

    /// Read a calibration file for `device`; `None` if absent, unreadable or for another
    /// device.
    pub fn from_json(text: &str, device: &str) -> Option<LinkCosts> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        if v["device"].as_str()? != device {
            return None;
        }
        Some(LinkCosts {
            copy_bytes_per_s: v["copy_bytes_per_s"].as_f64()?,
            copy_d2h_bytes_per_s: v["copy_d2h_bytes_per_s"].as_f64()?,
            mapped_seq_bytes_per_s: v["mapped_seq_bytes_per_s"].as_f64()?,
            mapped_random_per_s: random_rates(&v["mapped_random_per_s"])?,
            mapped_latency_s: v["mapped_latency_s"].as_f64()?,
            pin_s_per_byte: v["pin_s_per_byte"].as_f64()?,
            // Files written before it was measured: the conservative rate.
            device_gather_bytes_per_s: v["device_gather_bytes_per_s"]
                .as_f64()
                .filter(|&r| r > 0.0)
                .unwrap_or(DEVICE_GATHER_CONSERVATIVE),
            fixed_s: v["fixed_s"].as_f64()?,
            calibrated: true,
        })
    }

    /// Where calibrations are cached: `$BERTH_LINK_COSTS`, else
    /// `$XDG_CACHE_HOME/berth/link-costs.json`, else `~/.cache/berth/link-costs.json`.
    pub fn cache_path() -> Option<std::path::PathBuf> {
        if let Some(p) = std::env::var_os("BERTH_LINK_COSTS") {
            return Some(p.into());
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("berth").join("link-costs.json"))
    }
}

/// The random-read rates of a calibration file at [`RANDOM_FOOTPRINTS`]: from `[bytes, rate]`
/// pairs (interpolated where the file measured other sizes), or one number for every size
/// (files written before the rate depended on the region).
fn random_rates(v: &serde_json::Value) -> Option<[f64; RANDOM_FOOTPRINTS.len()]> {
    if let Some(flat) = v.as_f64() {
        return Some([flat; RANDOM_FOOTPRINTS.len()]);
    }
    let mut points = v
        .as_array()?
        .iter()
        .map(|p| Some((p.get(0)?.as_f64()?, p.get(1)?.as_f64()?)))
        .collect::<Option<Vec<_>>>()?;
    if points.is_empty() || points.iter().any(|&(x, y)| !(x > 0.0 && y > 0.0)) {
        return None;
    }
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    Some(std::array::from_fn(|i| {
        interpolate(&points, RANDOM_FOOTPRINTS[i] as f64)
    }))
}

/// The cost model's constants of the context `gpu` (see [`Gpu::link_costs`]).
pub(crate) fn link_costs(gpu: &Inner) -> LinkCosts {
    *gpu.costs.get_or_init(|| {
        let name = gpu.ops().name().to_owned();
        let cached = LinkCosts::cache_path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| LinkCosts::from_json(&t, &name));
        match cached {
            Some(c) => c,
            None => {
                tracing::info!(device = %name, "no link calibration: the placement model uses conservative constants");
                LinkCosts::conservative()
            }
        }
    })
}

impl Gpu {
    /// The cost model's constants for this GPU: the cached calibration if there is one for
    /// this device ([`LinkCosts::cache_path`]), else [`LinkCosts::conservative`] (logged).
    pub fn link_costs(&self) -> LinkCosts {
        link_costs(&self.inner)
    }

    /// Use `costs` for this context's placement decisions (for example a fresh calibration).
    pub fn set_link_costs(&self, costs: LinkCosts) -> bool {
        self.inner.costs.set(costs).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: usize = 1 << 30;

    #[test]
    fn a_calibration_file_round_trips_for_its_device_only() {
        let c = LinkCosts {
            copy_bytes_per_s: 53.9e9,
            copy_d2h_bytes_per_s: 55.1e9,
            mapped_seq_bytes_per_s: 50.7e9,
            mapped_random_per_s: [7.9e8, 7.6e8, 7.1e8, 3.3e8, 1.1e8, 1.0e8, 0.9e8],
            mapped_latency_s: 1.31e-6,
            pin_s_per_byte: 4.1e-10,
            device_gather_bytes_per_s: 0.9e12,
            fixed_s: 1e-5,
            calibrated: true,
        };
        let json = c.to_json("NVIDIA H200");
        assert_eq!(LinkCosts::from_json(&json, "NVIDIA H200"), Some(c));
        assert_eq!(LinkCosts::from_json(&json, "NVIDIA H100"), None);
        let partial = json.replace("\"pin_s_per_byte\"", "\"other\"");
        assert_eq!(LinkCosts::from_json(&partial, "NVIDIA H200"), None);
        assert_eq!(LinkCosts::from_json("not json", "NVIDIA H200"), None);
        assert!((c.pin_s(1 << 30) - 0.44).abs() < 0.01);
    }

    #[test]
    fn older_and_coarser_calibration_files_still_read() {
        let c = LinkCosts::h200_reference();
        let json = c.to_json("NVIDIA H200");
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        // A file from before the rate depended on the region: one number for all sizes.
        v["mapped_random_per_s"] = serde_json::json!(1.05e8);
        let flat = LinkCosts::from_json(&v.to_string(), "NVIDIA H200").unwrap();
        assert_eq!(flat.mapped_random_per_s, [1.05e8; RANDOM_FOOTPRINTS.len()]);
        // Measured at other sizes: interpolated onto the model's sizes.
        v["mapped_random_per_s"] = serde_json::json!([[1u64 << 30, 1e8], [128u64 << 20, 8e8]]);
        let coarse = LinkCosts::from_json(&v.to_string(), "NVIDIA H200").unwrap();
        assert_eq!(coarse.random_per_s(128 << 20), 8e8);
        assert_eq!(coarse.random_per_s(GIB), 1e8);
        let r = coarse.random_per_s(512 << 20);
        assert!((1e8..8e8).contains(&r));
        // A file from before the device gather rate was measured: the conservative rate.
        let mut old: serde_json::Value = serde_json::from_str(&json).unwrap();
        old.as_object_mut()
            .unwrap()
            .remove("device_gather_bytes_per_s");
        let old = LinkCosts::from_json(&old.to_string(), "NVIDIA H200").unwrap();
        assert_eq!(
            old.device_gather_bytes_per_s,
            LinkCosts::conservative().device_gather_bytes_per_s
        );
        assert!(old.calibrated);
        // Nonsense is refused.
        v["mapped_random_per_s"] = serde_json::json!([[0, 1e8]]);
        assert_eq!(LinkCosts::from_json(&v.to_string(), "NVIDIA H200"), None);
    }
}
