//! First-launch benchmark: how long a fresh process waits before its first kernel has run.
//!
//! `first_launch`: times `Gpu::new()`, then the first launch of `saxpy` (which loads a module:
//! the examples crate's SASS where the build embedded some for this GPU, else saxpy's own PTX
//! module, cut out of the crate's, which the driver JIT-compiles) until the kernel has
//! finished, then a second launch for comparison. Run it with `CUDA_CACHE_DISABLE=1` to keep
//! the driver's JIT cache out, with `BERTH_LOAD=ptx` to force the kernel's PTX, with
//! `BERTH_LOAD=crate-ptx` to force the whole crate's PTX. One JSON line:
//! `{"bench":"first_launch","module":"sass"|"kernel_ptx"|"crate_ptx","module_bytes":..,"crate":..,"kernel":..,"init_ms":..,"ms":..,"second_ms":..,"bad":..}`
//! (`ms`: the first launch, module load included; `module_bytes`: the size of the image
//! loaded). `bench/first_launch/reference.cu` is the same in CUDA C++. With
//! `RUST_LOG=berth_runtime=debug` the module load's phases are logged on stderr.

use berth::{Gpu, Grid};
use berth_examples::saxpy;
use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("first_launch: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    // `RUST_LOG=berth_runtime=debug` adds the module load's phases (check, load, fault
    // set-up) on stderr.
    if std::env::var_os("RUST_LOG").is_some() {
        berth_examples::cli::init_logging();
    }
    let kernel = &berth_examples::__BERTH_KERNEL_saxpy;
    // The image the runtime loads: the same choice as its driver backend's.
    let sass = berth::__private::crate_sass(kernel.crate_name);
    let (module, module_bytes) = match (std::env::var("BERTH_LOAD").as_deref(), sass) {
        (Ok("crate-ptx"), _) => ("crate_ptx", kernel.ptx().len()),
        (Ok("ptx"), _) | (_, None) => {
            let entries: Vec<&str> = kernel.entries().map(|(_, name)| name).collect();
            let piece = berth::ptx::kernel_module(kernel.ptx(), &entries)?;
            ("kernel_ptx", piece.len())
        }
        (_, Some(sass)) => (
            "sass",
            sass.kernel(kernel.name).map_or(0, |own| own.cubin.len()),
        ),
    };
    let t = Instant::now();
    let gpu = Gpu::new()?;
    let init = t.elapsed().as_secs_f64();

    let n = 1 << 16;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let dx = gpu.upload(&x)?;
    let mut dy = gpu.upload(&vec![1.0f32; n])?;
    let t = Instant::now();
    saxpy(&gpu, Grid::cover(n), 2.0, &dx, &mut dy)?.wait()?;
    let first = t.elapsed().as_secs_f64();
    let t = Instant::now();
    saxpy(&gpu, Grid::cover(n), 2.0, &dx, &mut dy)?.wait()?;
    let second = t.elapsed().as_secs_f64();

    let got = dy.to_vec()?;
    let bad = (0..n).filter(|&i| got[i] != 4.0 * x[i] + 1.0).count();
    println!(
        "{{\"bench\":\"first_launch\",\"module\":\"{module}\",\"module_bytes\":{module_bytes},\"crate\":\"{}\",\"kernel\":\"{}\",\"init_ms\":{:.3},\"ms\":{:.3},\"second_ms\":{:.3},\"bad\":{bad}}}",
        kernel.crate_name,
        kernel.name,
        init * 1e3,
        first * 1e3,
        second * 1e3
    );
    Ok(())
}
