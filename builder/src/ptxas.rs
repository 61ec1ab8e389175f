//! Locating `ptxas` and reading its per-kernel resource report (`ptxas -v`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Resources ptxas assigned to one `.entry`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryUsage {
    /// Kernel (entry) name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Stack frame bytes.
    pub stack: u32,
    /// Spill store bytes.
    pub spill_stores: u32,
    /// Spill load bytes.
    pub spill_loads: u32,
    /// Static shared memory bytes.
    pub shared: u32,
}

/// ptxas failed or could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PtxasError {
    /// ptxas could not be started.
    #[error("could not run {0}: {1}")]
    Spawn(PathBuf, std::io::Error),
    /// ptxas rejected the PTX.
    #[error("ptxas rejected {file}:\n{stderr}")]
    Rejected {
        /// The PTX file.
        file: PathBuf,
        /// What ptxas printed.
        stderr: String,
    },
}

/// Find ptxas: `$BERTH_PTXAS`, then `ptxas` on `PATH`, then the `nvidia-cuda-nvcc` Python
/// wheel (`<site-packages>/nvidia/cu13/bin/ptxas`, installed by
/// `pip install nvidia-cuda-nvcc==13.0.88`).
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BERTH_PTXAS") {
        return Some(PathBuf::from(p));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("ptxas");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    for cuda in ["/usr/local/cuda/bin/ptxas", "/opt/cuda/bin/ptxas"] {
        if Path::new(cuda).is_file() {
            return Some(cuda.into());
        }
    }
    python_dirs()
        .into_iter()
        .flat_map(|d| {
            ["cu13", "cuda_nvcc", "cu12"].map(|v| d.join("nvidia").join(v).join("bin/ptxas"))
        })
        .find(|p| p.is_file())
}

/// Python's package directories (site-packages and `sys.path`), where pip puts NVIDIA's
/// wheels; empty without `python3`.
pub(crate) fn python_dirs() -> Vec<PathBuf> {
    let Ok(out) = Command::new("python3")
        .args([
            "-c",
            "import site,sys; print('\\n'.join(site.getsitepackages()+[site.getusersitepackages()]+sys.path))",
        ])
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// Assemble `ptx` for `arch` with `ptxas -v` and return each entry's resource usage.
pub fn ptxas_usage(ptxas: &Path, ptx: &Path, arch: &str) -> Result<Vec<EntryUsage>, PtxasError> {
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(ptx)
        .arg("-o")
        .arg("/dev/null")
        .output()
        .map_err(|e| PtxasError::Spawn(ptxas.to_owned(), e))?;
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(PtxasError::Rejected {
            file: ptx.to_owned(),
            stderr: text,
        });
    }
    Ok(parse_usage(&text))
}

fn numbers_before(line: &str, unit: &str) -> u32 {
    let Some(pos) = line.find(unit) else { return 0 };
    line[..pos]
        .split(|c: char| !c.is_ascii_digit())
        .rfind(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn parse_usage(text: &str) -> Vec<EntryUsage> {
    let mut out: Vec<EntryUsage> = Vec::new();
    // "Function properties for X" blocks also appear for device functions (`.func`); only
    // those of the current entry describe it.
    let mut props_of_entry = false;
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_owned();
            out.push(EntryUsage {
                name,
                ..Default::default()
            });
            props_of_entry = false;
        } else if let Some(f) = line.split("Function properties for ").nth(1) {
            props_of_entry = out.last().is_some_and(|e| e.name == f.trim());
        } else if let Some(cur) = out.last_mut() {
            if line.contains("bytes stack frame") && props_of_entry {
                cur.stack = numbers_before(line, "bytes stack frame");
                cur.spill_stores = numbers_before(line, "bytes spill stores");
                cur.spill_loads = numbers_before(line, "bytes spill loads");
            } else if line.contains("Used") && line.contains("registers") {
                cur.registers = numbers_before(line, "registers");
                cur.shared = numbers_before(line, "bytes smem");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_ptxas_report() {
        let text = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'reduce' for 'sm_90'\n\
ptxas info    : Function properties for reduce\n\
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Function properties for helper\n\
    99 bytes stack frame, 99 bytes spill stores, 99 bytes spill loads\n\
ptxas info    : Used 18 registers, used 1 barriers, 1024 bytes smem, 376 bytes cmem[0]\n\
ptxas info    : Compiling entry function 'saxpy' for 'sm_90'\n\
ptxas info    : Used 10 registers, used 0 barriers, 388 bytes cmem[0]\n";
        let u = super::parse_usage(text);
        assert_eq!(u.len(), 2);
        assert_eq!(
            (
                u[0].name.as_str(),
                u[0].registers,
                u[0].stack,
                u[0].spill_stores,
                u[0].spill_loads,
                u[0].shared
            ),
            ("reduce", 18, 8, 4, 12, 1024)
        );
        assert_eq!(
            (u[1].name.as_str(), u[1].registers, u[1].shared),
            ("saxpy", 10, 0)
        );
    }
}
