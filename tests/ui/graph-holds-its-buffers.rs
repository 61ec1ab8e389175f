// Reading a buffer on the host while a graph holds it: the graph's replays write it, so it is
// borrowed mutably for the graph's whole life.
use berth::prelude::*;

#[gpu_kernel]
pub fn step(a: &[f32], b: &mut [f32]) {
    let i = thread::index();
    if i < b.len() {
        b[i] = a[i];
    }
}

fn main() {
    let gpu = Gpu::new().unwrap();
    let mut a = gpu.upload(&[1.0f32; 16]).unwrap();
    let mut b = gpu.upload(&[0.0f32; 16]).unwrap();
    let mut graph = gpu.graph();
    let ha = graph.hold(&mut a).unwrap();
    let mut hb = graph.hold(&mut b).unwrap();
    graph.record(|r| step(r, Grid::cover(16), &ha, &mut hb)?.wait()).unwrap();
    let seen = b.to_vec().unwrap();
    graph.run(&gpu).unwrap().wait().unwrap();
    drop(seen);
}
