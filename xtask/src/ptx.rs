//! `cargo xtask ptx`: build kernel crates for nvptx64 and report ptxas resource usage.

use crate::{Result, workspace_root};
use std::path::PathBuf;
use std::process::Command;

/// Workspace members whose build script depends on `berth-gpu-build`: (name, manifest dir).
pub fn kernel_crates() -> Result<Vec<(String, PathBuf)>> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(workspace_root())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let mut crates = Vec::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        let builds_kernels = p["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|d| d["name"] == "berth-gpu-build" && d["kind"] == "build");
        if builds_kernels {
            let manifest = PathBuf::from(p["manifest_path"].as_str().unwrap_or_default());
            let dir = manifest.parent().map(PathBuf::from).unwrap_or_default();
            crates.push((p["name"].as_str().unwrap_or_default().to_owned(), dir));
        }
    }
    Ok(crates)
}

pub fn run(args: &[String]) -> Result {
    let mut only = None;
    let mut arch =
        std::env::var(berth_build::ARCH_ENV).unwrap_or_else(|_| berth_build::DEFAULT_ARCH.into());
    let mut out_dir = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-p" | "--package" => only = Some(it.next().ok_or("-p needs a crate name")?.clone()),
            "--arch" => arch = it.next().ok_or("--arch needs a value like sm_90")?.clone(),
            "--out" => out_dir = Some(PathBuf::from(it.next().ok_or("--out needs a folder")?)),
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    let mut crates = kernel_crates()?;
    if let Some(name) = &only {
        crates.retain(|(n, _)| n == name);
        if crates.is_empty() {
            return Err(format!("`{name}` is not a kernel crate of this workspace (none of its build-dependencies is berth-gpu-build)").into());
        }
    }
    let target_dir = workspace_root().join("target").join("berth-nvptx");
    let ptxas = berth_build::find_ptxas();
    for (name, dir) in crates {
        eprintln!("building {name} for nvptx64 ({arch})");
        let built = berth_build::Builder::new(&dir, &target_dir)
            .arch(&arch)
            .build()?;
        let dest = match &out_dir {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                let dest = d.join(format!("{}.ptx", name.replace('-', "_")));
                std::fs::copy(&built.ptx, &dest)?;
                dest
            }
            None => built.ptx.clone(),
        };
        println!("{name}: {}", dest.display());
        match &ptxas {
            Some(ptxas) => {
                let usage = berth_build::ptxas_usage(ptxas, &built.ptx, &built.arch)?;
                println!(
                    "  {:<28} {:>9} {:>8} {:>12} {:>11} {:>10}",
                    "kernel", "registers", "stack B", "spill st. B", "spill ld. B", "shared B"
                );
                for u in usage {
                    println!(
                        "  {:<28} {:>9} {:>8} {:>12} {:>11} {:>10}",
                        u.name, u.registers, u.stack, u.spill_stores, u.spill_loads, u.shared
                    );
                }
            }
            None => println!(
                "  (ptxas not found: `pip install nvidia-cuda-nvcc==13.0.88` or set BERTH_PTXAS for a resource report)"
            ),
        }
        if !built.lints.is_empty() {
            println!("  performance lints:");
            for lint in &built.lints {
                println!("  warning: {lint}");
            }
        }
    }
    Ok(())
}
