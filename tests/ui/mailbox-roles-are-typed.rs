// The host side of an inbox only sends and of an outbox only receives; one is not the other.
use berth::prelude::*;
use std::time::Duration;

#[gpu_kernel]
pub fn serve(#[mapped] _jobs: &Inbox<u32>, #[mapped] _replies: &Outbox<u32>) {}

fn main() -> berth::Result<()> {
    let gpu = Gpu::simulator();
    let (inbox, outbox) = (gpu.inbox::<u32>(4)?, gpu.outbox::<u32>(4)?);
    // The host receiving from the kernel's inbox: the kernel's role.
    let _ = inbox.recv(Duration::ZERO);
    // The host sending into the kernel's outbox: the kernel's role.
    outbox.send(1, Duration::ZERO)?;
    // An outbox passed as the kernel's inbox.
    let _ = serve(&gpu, Grid::new(1, 1), &outbox, &inbox);
    Ok(())
}
