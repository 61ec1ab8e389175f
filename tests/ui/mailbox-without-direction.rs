// A kernel's mailbox says which way its messages go: `&Inbox<T>` or `&Outbox<T>`.
use berth::prelude::*;

#[gpu_kernel]
pub fn echo(#[mapped] m: &berth::Mailbox<u32>) {}

fn main() {}
