// An `elementwise` kernel's chunks run at once on several streams: a mailbox passed whole to
// each of them would have every chunk take the kernel's side of it at once.
use berth::prelude::*;

#[gpu_kernel(elementwise)]
pub fn k(
    #[pinned_async] x: &[u32],
    #[pinned_async(out)] y: &mut [u32],
    #[mapped] jobs: &Inbox<u32>,
    #[mapped] done: &Outbox<u32>,
) {
    let i = thread::index();
    if i < y.len() {
        y[i] = x[i];
    }
    let _ = (jobs, done);
}

fn main() {}
