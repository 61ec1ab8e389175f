//! What the example programs share on the host: logs filtered by `RUST_LOG`, progress bars,
//! sizes with K/M/G suffixes, and the host memory available for pinning.

use indicatif::{ProgressBar, ProgressStyle};

/// Send the runtime's `tracing` events to stderr, filtered by `RUST_LOG` (warnings when it is
/// unset): `RUST_LOG=berth_runtime=debug` shows each placement decision and pipeline plan.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // A second call (or another subscriber already set) keeps the first.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// A progress bar of `len` steps named `name`, drawn on stderr when it is a terminal (and not
/// at all in CI logs).
pub fn progress_bar(name: &str, len: u64, unit: &str) -> ProgressBar {
    let template = format!("{name}: [{{bar:40}}] {{percent:>3}}% ({{pos}}/{{len}} {unit}) {{msg}}");
    let style = ProgressStyle::with_template(&template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("#>-");
    ProgressBar::new(len).with_style(style)
}

/// A byte count like `512M`, `1G`, `64K`, `1.5GiB` or `4096`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim_end_matches(['i', 'B']);
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| (v * mult as f64) as usize)
        .ok_or_else(|| format!("`{s}` is not a size (like 512M or 1G)"))
}

/// Host memory available to new allocations without swapping, in bytes: `MemAvailable` of
/// `/proc/meminfo`; `None` where there is no such file.
pub fn host_memory_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("0.5M"), Ok(1 << 19));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1G").is_err());
    }
}
