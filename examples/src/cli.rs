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

/// End a checking example: exit status 0 when its checks passed, 2 (after "`name`: FAILED")
/// when they did not, 1 (after the error) when it could not run.
pub fn exit_with<E: std::fmt::Display>(name: &str, outcome: Result<bool, E>) {
    match outcome {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("{name}: FAILED");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(1);
        }
    }
}

/// The median and the smallest of `v` (not empty): a benchmark's typical sample and its
/// best.
///
/// ```
/// assert_eq!(berth_examples::cli::median_min(vec![3.0, 1.0, 2.0]), (2.0, 1.0));
/// ```
pub fn median_min(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
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

/// Zipf-distributed ranks in `0..n`: rank `k` drawn with probability proportional to
/// `1 / (k + 1)^s` (`s = 0`: uniform), by rejection-inversion (Hörmann and Derflinger, "Rejection-inversion to
/// generate variates from monotone discrete distributions", 1996): constant time per draw
/// and no table, for any `n`.
#[derive(Clone, Copy, Debug)]
pub struct Zipf {
    n: f64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    cut: f64,
}

impl Zipf {
    /// Ranks `0..n` (`n ≥ 1`) with exponent `s ≥ 0`.
    pub fn new(n: u64, s: f64) -> Result<Zipf, String> {
        if n == 0 || !(s >= 0.0 && s.is_finite()) {
            return Err(format!(
                "Zipf needs n ≥ 1 and a finite s ≥ 0, not n = {n}, s = {s}"
            ));
        }
        let mut z = Zipf {
            n: n as f64,
            s,
            h_x1: 0.0,
            h_n: 0.0,
            cut: 0.0,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(z.n + 0.5);
        z.cut = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        Ok(z)
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let l = x.ln();
        helper2((1.0 - self.s) * l) * l
    }

    fn h_integral_inv(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (helper1(t) * x).exp()
    }

    /// One rank in `0..n`.
    pub fn sample(&self, rng: &mut impl rand::Rng) -> u64 {
        if self.s == 0.0 {
            return rng.random_range(0..self.n as u64);
        }
        loop {
            let u = self.h_n + rng.random::<f64>() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inv(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.cut || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64 - 1;
            }
        }
    }
}

/// `ln(1 + x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x − 1) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod zipf_tests {
    use super::Zipf;
    use rand::SeedableRng;

    /// Frequencies of the first ranks match `1/(k+1)^s` normalised, within a few percent.
    #[test]
    fn zipf_frequencies_follow_the_law() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for s in [0.0, 0.8, 1.0, 1.2] {
            let n = 1000u64;
            let z = Zipf::new(n, s).unwrap();
            let draws = 400_000;
            let mut hist = vec![0u32; n as usize];
            for _ in 0..draws {
                hist[z.sample(&mut rng) as usize] += 1;
            }
            let norm: f64 = (1..=n).map(|k| (k as f64).powf(-s)).sum();
            for k in [0usize, 1, 9] {
                let want = ((k + 1) as f64).powf(-s) / norm * draws as f64;
                let got = f64::from(hist[k]);
                assert!(
                    (got - want).abs() < 0.05 * want + 30.0,
                    "s {s}, rank {k}: {got} vs {want}"
                );
            }
        }
        assert!(Zipf::new(0, 1.0).is_err() && Zipf::new(5, -1.0).is_err());
    }
}
