// A graph that would outlive a buffer it holds: its replays would write freed memory.
use berth::prelude::*;

fn main() {
    let gpu = Gpu::new().unwrap();
    let graph = gpu.graph();
    {
        let mut a = gpu.upload(&[1.0f32; 16]).unwrap();
        let _held = graph.hold(&mut a).unwrap();
    }
    graph.run(&gpu).unwrap().wait().unwrap();
}
