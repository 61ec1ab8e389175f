//! The program of `cargo xtask rebuild`'s workspace: it launches the kernel crate's kernels
//! (the benchmark only builds it).

use berth::{Gpu, Grid};

fn main() -> Result<(), berth::Error> {
    let gpu = Gpu::new_or_simulator()?;
    let n = 1 << 12;
    let x = gpu.upload(&vec![1.0f32; n])?;
    let mut y = gpu.upload(&vec![0.0f32; n])?;
    rebuild_kernels::saxpy(&gpu, Grid::cover(n), 2.0, &x, &mut y)?.wait()?;
    rebuild_kernels::scale(&gpu, Grid::cover(n), &x, &mut y)?.wait()?;
    let mut partial = gpu.alloc_zeroed::<f32>(4)?;
    rebuild_kernels::block_sum(&gpu, Grid::new(4, 256), &x, &mut partial)?.wait()?;
    let m = 64;
    let a = gpu.upload(&vec![1.0f32; m * m])?;
    let mut c = gpu.alloc_zeroed::<f32>(m * m)?;
    let grid = Grid::new((m as u32 / 16, m as u32 / 16), (16, 16));
    rebuild_kernels::sgemm_tiled(&gpu, grid, m as u32, &a, &a, &mut c)?.wait()?;
    rebuild_kernels::jacobi(&gpu, grid, m as u32, m as u32, &a, &mut c)?.wait()?;
    println!("sum of the first partial: {}", partial.to_vec()?[0]);
    Ok(())
}
