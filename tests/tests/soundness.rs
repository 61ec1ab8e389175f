//! What safe code cannot do to memory the GPU uses, on both backends: leaked guards
//! (`mem::forget`) followed by a read, write, free or reuse of every memory kind; host threads
//! sharing one mailbox or one context; output staging that a kernel does not write; launches
//! refused by a check, which leave their outputs as they were and never wait.
//!
//! One test body, two backends, as in `gpu/`: the simulator by default, the GPU with
//! `--features gpu`. The leak tests launch kernels that wait for a gate (a signal cell) that
//! another thread opens after [`OPEN_AFTER`]: until then the leaked launch is certainly in
//! flight, so a host access that does not wait for it sees the memory change under it.

use berth::placement::DeviceProfile;
use berth::{Gpu, Grid, PipelineOptions, SignalBuffer};
use berth_fixtures::gated::{
    fill_bytes, gated_add, gated_add_pipelined, gated_copy_mapped, gated_fill, gated_fill_mapped,
    gated_fill_pinned, gated_fill_within, set_some,
};
use berth_fixtures::language::scale_pinned;
use berth_tests::{gpu, random_f32, random_u32};
use std::time::Duration;

/// Elements of the leak tests' buffers: 256 KiB of `u32`, above glibc's mmap threshold, so on
/// the simulator memory freed too early is unmapped and a late write faults.
const N: usize = 1 << 16;

/// When the gate opens.
const OPEN_AFTER: Duration = Duration::from_millis(150);

/// Run `body` with a closed gate that another thread opens after [`OPEN_AFTER`]; then wait
/// for the whole context, so nothing of the test is left in flight.
fn with_gate<R>(gpu: &Gpu, body: impl FnOnce(&SignalBuffer) -> R) -> R {
    let gate = gpu.signals(1).unwrap();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(OPEN_AFTER);
            gate.store(0, 1);
        });
        body(&gate)
    });
    gpu.synchronize().unwrap();
    r
}

/// `view` (a shared borrow taken after a guard was leaked) already holds what the leaked
/// launch writes, and still holds it once everything is done: a shared borrow never changes.
fn assert_settled(gpu: &Gpu, view: &[u32], want: u32, what: &str) {
    let first = view.to_vec();
    gpu.synchronize().unwrap();
    assert_eq!(view, &first[..], "{what}: changed behind a shared borrow");
    assert!(
        first.iter().all(|&v| v == want),
        "{what}: read before the leaked launch finished (first element {})",
        first[0]
    );
}

// ---- leaked guards: reads -------------------------------------------------------------------

#[test]
fn reading_a_pinned_output_after_a_leaked_launch_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut out = gpu.pinned_zeroed::<u32>(N).unwrap();
    with_gate(&gpu, |gate| {
        let launch = gated_fill_pinned(&gpu, Grid::cover(N), 7, gate, &mut out).unwrap();
        std::mem::forget(launch);
        assert_settled(&gpu, &out, 7, "pinned output");
    });
}

#[test]
fn reading_a_mapped_output_after_a_leaked_launch_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut out = gpu.mapped_zeroed::<u32>(N).unwrap();
    with_gate(&gpu, |gate| {
        let launch = gated_fill_mapped(&gpu, Grid::cover(N), 8, gate, &mut out).unwrap();
        std::mem::forget(launch);
        assert_settled(&gpu, &out, 8, "mapped output");
    });
}

#[test]
fn reading_a_managed_output_after_a_leaked_launch_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut out = gpu.managed_zeroed::<u32>(N).unwrap();
    with_gate(&gpu, |gate| {
        let launch = gated_fill_mapped(&gpu, Grid::cover(N), 12, gate, &mut out).unwrap();
        std::mem::forget(launch);
        assert_settled(&gpu, &out, 12, "managed output");
    });
}

#[test]
fn reading_a_device_output_after_a_leaked_launch_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut out = gpu.alloc_zeroed::<u32>(N).unwrap();
    let stream = gpu.stream().unwrap();
    with_gate(&gpu, |gate| {
        let launch = gated_fill(&stream, Grid::cover(N), 9, gate, &mut out).unwrap();
        std::mem::forget(launch);
        // A synchronous read goes through another stream than the leaked launch's.
        let got = out.to_vec().unwrap();
        assert!(got.iter().all(|&v| v == 9), "read before the launch ended");
    });
}

#[test]
fn reading_after_a_leaked_copy_back_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut dev = gpu.alloc_zeroed::<u32>(N).unwrap();
    let mut back = gpu.pinned_zeroed::<u32>(N).unwrap();
    let stream = gpu.stream().unwrap();
    with_gate(&gpu, |gate| {
        // The copy back queues behind the gated kernel on the same stream.
        std::mem::forget(gated_fill(&stream, Grid::cover(N), 10, gate, &mut dev).unwrap());
        std::mem::forget(dev.copy_to_pinned(&stream, &mut back).unwrap());
        assert_settled(&gpu, &back, 10, "pinned copy destination");
    });
}

#[test]
fn reading_the_outputs_of_a_leaked_pipelined_run_waits_for_it() {
    let (_g, gpu) = gpu();
    let x = gpu.pinned_from(&vec![5u32; N]).unwrap();
    let mut y = gpu.pinned_zeroed::<u32>(N).unwrap();
    let opts = PipelineOptions {
        chunk_bytes: Some(N), // four chunks
        streams: Some(2),
        ..Default::default()
    };
    with_gate(&gpu, |gate| {
        let run = gated_add_pipelined(&gpu, opts, 6, gate, &x, &mut y).unwrap();
        assert_eq!(run.chunks(), 4);
        std::mem::forget(run);
        assert_settled(&gpu, &y, 11, "pipelined output");
    });
}

// ---- leaked guards: writes ------------------------------------------------------------------

#[test]
fn writing_a_mapped_input_after_a_leaked_launch_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut x = gpu.mapped_from(&vec![3u32; N]).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(N).unwrap();
    with_gate(&gpu, |gate| {
        std::mem::forget(gated_copy_mapped(&gpu, Grid::cover(N), gate, &x, &mut out).unwrap());
        // The kernel reads `x` once the gate opens: the write must wait until it has.
        x.fill(4);
    });
    assert!(
        out.to_vec().unwrap().iter().all(|&v| v == 3),
        "the kernel saw a host write made after its launch"
    );
}

#[test]
fn writing_a_managed_input_after_a_leaked_launch_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut x = gpu.managed_from(&vec![3u32; N]).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(N).unwrap();
    with_gate(&gpu, |gate| {
        std::mem::forget(gated_copy_mapped(&gpu, Grid::cover(N), gate, &x, &mut out).unwrap());
        x.fill(4);
    });
    assert!(
        out.to_vec().unwrap().iter().all(|&v| v == 3),
        "the kernel saw a host write made after its launch"
    );
}

#[test]
fn writing_a_pinned_input_after_a_leaked_launch_waits_for_its_copy() {
    let (_g, gpu) = gpu();
    let stream = gpu.stream().unwrap();
    let mut blocker = gpu.alloc_zeroed::<u32>(N).unwrap();
    let mut x = gpu.pinned_from(&vec![3u32; N]).unwrap();
    let mut y = gpu.pinned_zeroed::<u32>(N).unwrap();
    with_gate(&gpu, |gate| {
        // The copy of `x` queues behind the gated kernel on the same stream.
        std::mem::forget(gated_fill(&stream, Grid::cover(N), 1, gate, &mut blocker).unwrap());
        std::mem::forget(gated_add(&stream, Grid::cover(N), 0, gate, &x, &mut y).unwrap());
        x.fill(4);
    });
    assert!(
        y.iter().all(|&v| v == 3),
        "the copy in took a host write made after its launch"
    );
}

#[test]
fn writing_the_source_of_a_leaked_copy_waits_for_it() {
    let (_g, gpu) = gpu();
    let stream = gpu.stream().unwrap();
    let mut blocker = gpu.alloc_zeroed::<u32>(N).unwrap();
    let mut dev = gpu.alloc_zeroed::<u32>(N).unwrap();
    let mut src = gpu.pinned_from(&vec![3u32; N]).unwrap();
    with_gate(&gpu, |gate| {
        std::mem::forget(gated_fill(&stream, Grid::cover(N), 1, gate, &mut blocker).unwrap());
        std::mem::forget(dev.copy_from_pinned(&stream, &src).unwrap());
        src.fill(4);
    });
    assert!(dev.to_vec().unwrap().iter().all(|&v| v == 3));
}

// ---- leaked guards: free and reuse ----------------------------------------------------------

#[test]
fn dropping_a_device_buffer_after_a_leaked_launch_waits_for_it() {
    let (_g, gpu) = gpu();
    let stream = gpu.stream().unwrap();
    with_gate(&gpu, |gate| {
        let mut out = gpu.alloc_zeroed::<u32>(N).unwrap();
        std::mem::forget(gated_fill(&stream, Grid::cover(N), 12, gate, &mut out).unwrap());
        drop(out);
        // Memory allocated now may reuse the freed addresses: the leaked launch must not
        // write it.
        let fresh = gpu.alloc_zeroed::<u32>(N).unwrap();
        stream.synchronize().unwrap();
        assert!(fresh.to_vec().unwrap().iter().all(|&v| v == 0));
    });
}

#[test]
fn dropping_a_pinned_buffer_after_a_leaked_launch_keeps_its_reuse_clean() {
    let (_g, gpu) = gpu();
    with_gate(&gpu, |gate| {
        let mut out = gpu.pinned_zeroed::<u32>(N).unwrap();
        std::mem::forget(gated_fill_pinned(&gpu, Grid::cover(N), 13, gate, &mut out).unwrap());
        drop(out);
        // The pool hands the same allocation out again.
        let reused = gpu.pinned_zeroed::<u32>(N).unwrap();
        assert!(gpu.pool_stats().pinned_reuses >= 1);
        assert_settled(&gpu, &reused, 0, "reused pinned memory");
    });
}

#[test]
fn a_pinned_buffer_sent_to_another_thread_after_a_leaked_launch_is_read_and_freed_safely() {
    let (_g, gpu) = gpu();
    with_gate(&gpu, |gate| {
        let mut out = gpu.pinned_zeroed::<u32>(N).unwrap();
        std::mem::forget(gated_fill_pinned(&gpu, Grid::cover(N), 17, gate, &mut out).unwrap());
        let before = gpu.pool_stats();
        // Read and dropped on another thread while the leaked launch may still be in flight.
        let first = std::thread::spawn(move || {
            let first = out.to_vec();
            drop(out);
            first
        })
        .join()
        .unwrap();
        assert!(
            first.iter().all(|&v| v == 17),
            "read on another thread before the leaked launch finished (first element {})",
            first[0]
        );
        // It went back to the pool from that thread: the next one reuses it, zeroed and
        // untouched by the finished launch.
        let reused = gpu.pinned_zeroed::<u32>(N).unwrap();
        assert_eq!(gpu.pool_stats().pinned_reuses, before.pinned_reuses + 1);
        assert_settled(
            &gpu,
            &reused,
            0,
            "pinned memory reused after a drop on another thread",
        );
    });
}

#[test]
fn dropping_a_mapped_buffer_after_a_leaked_launch_keeps_its_reuse_clean() {
    let (_g, gpu) = gpu();
    with_gate(&gpu, |gate| {
        let mut out = gpu.mapped_zeroed::<u32>(N).unwrap();
        std::mem::forget(gated_fill_mapped(&gpu, Grid::cover(N), 14, gate, &mut out).unwrap());
        drop(out);
        let reused = gpu.mapped_zeroed::<u32>(N).unwrap();
        assert_settled(&gpu, &reused, 0, "reused mapped memory");
    });
}

#[test]
fn dropping_a_managed_buffer_after_a_leaked_launch_waits_for_it() {
    let (_g, gpu) = gpu();
    with_gate(&gpu, |gate| {
        let mut out = gpu.managed_zeroed::<u32>(N).unwrap();
        std::mem::forget(gated_fill_mapped(&gpu, Grid::cover(N), 16, gate, &mut out).unwrap());
        drop(out);
        // The kernel writes `out` only once the gate opens: freeing it first would leave the
        // write to freed memory (a fault on the simulator, whose large allocations are
        // unmapped).
        assert_eq!(
            gate.load(0),
            1,
            "freed before the leaked launch could finish"
        );
        let fresh = gpu.managed_zeroed::<u32>(N).unwrap();
        assert_settled(&gpu, &fresh, 0, "fresh managed memory");
    });
}

#[test]
fn a_guard_leaked_through_an_rc_cycle_is_waited_for_too() {
    use std::cell::RefCell;
    use std::rc::Rc;
    struct Node<'a> {
        _launch: Option<berth::Pending<'a>>,
        next: Option<Rc<RefCell<Node<'a>>>>,
    }
    let (_g, gpu) = gpu();
    let mut out = gpu.pinned_zeroed::<u32>(N).unwrap();
    with_gate(&gpu, |gate| {
        {
            let launch = gated_fill_pinned(&gpu, Grid::cover(N), 15, gate, &mut out).unwrap();
            let node = Rc::new(RefCell::new(Node {
                _launch: Some(launch),
                next: None,
            }));
            node.borrow_mut().next = Some(node.clone());
        }
        assert_settled(&gpu, &out, 15, "pinned output of a guard in an Rc cycle");
    });
}

#[test]
fn registered_memory_after_a_leaked_launch_is_read_freed_and_returned_safely() {
    let (_g, gpu) = gpu();
    // Read through the registration.
    let mut reg = gpu.register(vec![0u32; N]).unwrap();
    with_gate(&gpu, |gate| {
        std::mem::forget(gated_fill_mapped(&gpu, Grid::cover(N), 16, gate, &mut reg).unwrap());
        assert_settled(&gpu, &reg, 16, "registered output");
    });
    // Given back: the Vec holds what the leaked launch wrote, and nothing writes it later.
    with_gate(&gpu, |gate| {
        std::mem::forget(gated_fill_mapped(&gpu, Grid::cover(N), 17, gate, &mut reg).unwrap());
        let v = std::mem::replace(&mut reg, gpu.register(vec![0u32; 1]).unwrap()).into_inner();
        let first = v.clone();
        gpu.synchronize().unwrap();
        assert_eq!(v, first, "changed after it was given back");
        assert!(v.iter().all(|&x| x == 17));
    });
    // Dropped: freed only once the leaked launch is done (a late write would hit freed pages).
    with_gate(&gpu, |gate| {
        let mut reg = gpu.register(vec![0u32; N]).unwrap();
        std::mem::forget(gated_fill_mapped(&gpu, Grid::cover(N), 18, gate, &mut reg).unwrap());
        drop(reg);
    });
}

// ---- host threads sharing one object ---------------------------------------------------------

#[test]
fn a_mailbox_shared_by_two_senders_and_two_receivers_loses_nothing() {
    use berth_examples::{Job, Reply, square_worker};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (_g, gpu) = gpu();
    let t = Duration::from_secs(10);
    let per_sender = 3000u32;
    let total = 2 * per_sender as usize;
    let inbox = gpu.inbox::<Job>(16).unwrap();
    let outbox = gpu.outbox::<Reply>(16).unwrap();
    let ctl = gpu.signals(2).unwrap();
    let stream = gpu.stream().unwrap();
    let worker = square_worker(&stream, Grid::new(1, 1), 20_000, &inbox, &outbox, &ctl).unwrap();
    let job = |id: u32| Job {
        id,
        stop: 0,
        value: (id % 1000) as f32,
    };
    let taken = AtomicUsize::new(0);
    let mut replies: Vec<Reply> = std::thread::scope(|s| {
        for first in [0, per_sender] {
            let inbox = &inbox;
            s.spawn(move || {
                for id in first..first + per_sender {
                    inbox.send(job(id), t).unwrap();
                }
            });
        }
        let receivers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut got = Vec::new();
                    while taken.fetch_add(1, Ordering::Relaxed) < total {
                        got.push(outbox.recv(t).unwrap());
                    }
                    got
                })
            })
            .collect();
        receivers
            .into_iter()
            .flat_map(|r| r.join().unwrap())
            .collect()
    });
    inbox
        .send(
            Job {
                id: 0,
                stop: 1,
                value: 0.0,
            },
            t,
        )
        .unwrap();
    worker.wait().unwrap();
    replies.sort_by_key(|r| r.id);
    assert_eq!(replies.len(), total);
    for (want_id, r) in (0..).zip(&replies) {
        let v = (want_id % 1000) as f32;
        assert_eq!((r.id, r.value), (want_id, v * v + 1.0), "reply {want_id}");
    }
}

#[test]
fn a_launch_after_a_queued_write_of_host_memory_is_ordered_on_the_gpu_not_by_the_host() {
    use berth_fixtures::gated::{gated_copy_mapped, gated_fill_mapped};
    const N: usize = 4096;
    let (_g, gpu) = gpu();
    let gate = gpu.signals(1).unwrap();
    let mut buf = gpu.mapped_zeroed::<u32>(N).unwrap();
    let mut out = gpu.alloc_zeroed::<u32>(N).unwrap();
    let start = std::time::Instant::now();
    // The fill waits for the gate, which opens only once both launches are queued: a host
    // wait for the fill before queueing the copy would last until the fill gives up.
    let queued = gpu
        .scope(|s| {
            gated_fill_mapped(s, Grid::cover(N), 7, &gate, &mut buf)?.detach();
            gated_copy_mapped(s, Grid::cover(N), &gate, &buf, &mut out)?.detach();
            let queued = start.elapsed();
            gate.store(0, 1);
            Ok(queued)
        })
        .unwrap();
    assert!(
        queued < Duration::from_secs(2),
        "queueing waited {queued:?}"
    );
    assert!(out.to_vec().unwrap().iter().all(|&v| v == 7));
}

#[test]
fn a_second_launch_on_a_mailbox_runs_after_the_first_not_beside_it() {
    use berth_fixtures::signals::relay;
    let (_g, gpu) = gpu();
    let t = Duration::from_secs(10);
    let inbox = gpu.inbox::<u32>(4).unwrap();
    let outbox = gpu.outbox::<u32>(4).unwrap();
    let (ctl_a, ctl_b) = (gpu.signals(1).unwrap(), gpu.signals(1).unwrap());
    let (s1, s2) = (gpu.stream().unwrap(), gpu.stream().unwrap());
    let a = relay(&s1, Grid::new(1, 1), 0, 12, 20_000, &inbox, &outbox, &ctl_a).unwrap();
    // Another stream, the same mailbox: the launch is queued behind `a` on the GPU.
    let b = relay(
        &s2,
        Grid::new(1, 1),
        12,
        12,
        20_000,
        &inbox,
        &outbox,
        &ctl_b,
    )
    .unwrap();
    ctl_a.wait(0, |v| v == 1, t).unwrap();
    use rand::Rng as _;
    let mut rng = berth_tests::rng();
    for n in 0..24u32 {
        if n < 12 {
            // Beside `a`, `b` would be running now, waiting for its first message.
            assert_eq!(
                ctl_b.load(0),
                0,
                "the second launch ran beside the first (message {n})"
            );
        }
        let v: u32 = rng.random();
        inbox.send(v, t).unwrap();
        assert_eq!(outbox.recv(t).unwrap(), v.wrapping_add(1), "message {n}");
    }
    a.wait().unwrap();
    b.wait().unwrap();
    assert_eq!((ctl_a.load(0), ctl_b.load(0)), (2, 2));
}

#[test]
fn consecutive_launches_on_one_stream_take_consecutive_messages_of_a_mailbox() {
    use berth_fixtures::signals::relay;
    let (_g, gpu) = gpu();
    let t = Duration::from_secs(10);
    let inbox = gpu.inbox::<u32>(2).unwrap();
    let outbox = gpu.outbox::<u32>(2).unwrap();
    let ctl = gpu.signals(1).unwrap();
    let s = gpu.stream().unwrap();
    let launches: Vec<_> = (0..3)
        .map(|k| relay(&s, Grid::new(1, 1), 5 * k, 5, 20_000, &inbox, &outbox, &ctl).unwrap())
        .collect();
    for n in 0..15u32 {
        inbox.send(n * 7, t).unwrap();
        assert_eq!(outbox.recv(t).unwrap(), n * 7 + 1, "message {n}");
    }
    for l in launches {
        l.wait().unwrap();
    }
    assert_eq!(ctl.load(0), 2);
}

#[test]
fn launches_from_several_threads_on_one_context_and_one_stream_are_independent() {
    use berth_examples::saxpy;
    let (_g, gpu) = gpu();
    let stream = gpu.stream().unwrap();
    let n = 10_007;
    std::thread::scope(|s| {
        for k in 0..4u32 {
            let (gpu, stream) = (&gpu, &stream);
            s.spawn(move || {
                let x: Vec<f32> = (0..n).map(|i| (i as u32 ^ k) as f32).collect();
                let dx = gpu.upload(&x).unwrap();
                let mut dy = gpu.alloc_zeroed::<f32>(n).unwrap();
                for round in 1..=20 {
                    // Two threads on the context's default stream, two on one shared stream.
                    let launch = if k % 2 == 0 {
                        saxpy(gpu, Grid::cover(n), 1.0, &dx, &mut dy).unwrap()
                    } else {
                        saxpy(stream, Grid::cover(n), 1.0, &dx, &mut dy).unwrap()
                    };
                    launch.wait().unwrap();
                    let want: Vec<f32> = x.iter().map(|&v| v * round as f32).collect();
                    assert_eq!(dy.to_vec().unwrap(), want, "thread {k}, round {round}");
                }
            });
        }
    });
}

#[test]
fn a_managed_buffer_is_read_by_launches_and_the_host_of_several_threads_and_moved_to_another() {
    let (_g, gpu) = gpu();
    let data = random_u32(N);
    let x = gpu.managed_from(&data).unwrap();
    with_gate(&gpu, |gate| {
        std::thread::scope(|s| {
            for k in 0..2 {
                let (gpu, x, data) = (&gpu, &x, &data);
                s.spawn(move || {
                    let mut out = gpu.alloc_zeroed::<u32>(N).unwrap();
                    let launch = gated_copy_mapped(gpu, Grid::cover(N), gate, x, &mut out).unwrap();
                    // The host reads it while the launches (which only read it) are in flight.
                    assert_eq!(&x[..], &data[..], "thread {k}: host read");
                    launch.wait().unwrap();
                    assert_eq!(out.to_vec().unwrap(), *data, "thread {k}: kernel read");
                });
            }
        });
    });
    // Moved to another thread, written and freed there.
    std::thread::spawn(move || {
        let mut x = x;
        x.fill(9);
        assert!(x.iter().all(|&v| v == 9));
    })
    .join()
    .unwrap();
}

// ---- what output staging holds ---------------------------------------------------------------

#[test]
fn a_bool_output_the_kernel_does_not_write_comes_back_false_not_stale_bytes() {
    let (_g, gpu) = gpu();
    let n = 100_000;
    // A u8 launch leaves 0xab in the pooled staging...
    let mut bytes = gpu.pinned_zeroed::<u8>(n).unwrap();
    fill_bytes(&gpu, Grid::cover(n), 0xab, &mut bytes)
        .unwrap()
        .wait()
        .unwrap();
    assert!(bytes.iter().all(|&b| b == 0xab));
    // ...which the next launch of the same size class reuses for a bool output it does not
    // write: the elements come back zeroed (`false`), not 0xab (an invalid bool) and not the
    // host's old values (that would need a copy in).
    let before = gpu.pool_stats().device_reuses;
    let mut flags = gpu.pinned_from(&vec![true; n]).unwrap();
    set_some(&gpu, Grid::cover(n), 0, &mut flags)
        .unwrap()
        .wait()
        .unwrap();
    assert!(
        gpu.pool_stats().device_reuses > before,
        "staging was reused"
    );
    // Read as bytes: reading an invalid bool as `bool` would itself be undefined behaviour.
    let raw: &[u8] = bytemuck_bools(&flags);
    assert!(
        raw.iter().all(|&b| b == 0),
        "unwritten elements: {:?}",
        &raw[..8]
    );
    // Elements it does write are `true`, the rest `false`.
    fill_bytes(&gpu, Grid::cover(n), 0xab, &mut bytes)
        .unwrap()
        .wait()
        .unwrap();
    set_some(&gpu, Grid::cover(n), 3, &mut flags)
        .unwrap()
        .wait()
        .unwrap();
    let raw: &[u8] = bytemuck_bools(&flags);
    assert!(
        raw.iter()
            .enumerate()
            .all(|(i, &b)| b == u8::from(i % 3 == 0))
    );
}

/// The bytes of a `bool` slice.
fn bytemuck_bools(v: &[bool]) -> &[u8] {
    // SAFETY: `bool` is one byte with alignment 1; any byte may be read as `u8`.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len()) }
}

#[test]
fn pipelined_outputs_the_kernel_does_not_write_come_back_zeroed() {
    use berth_fixtures::gated::mark_pipelined;
    let (_g, gpu) = gpu();
    let n = 1 << 16;
    let opts = PipelineOptions {
        chunk_bytes: Some(n / 4),
        streams: Some(2),
        ..Default::default()
    };
    // A first run writes `true` everywhere: every chunk's output staging holds it.
    let ones = gpu.pinned_from(&vec![1u8; n]).unwrap();
    let mut out = gpu.pinned_zeroed::<bool>(n).unwrap();
    mark_pipelined(&gpu, opts, &ones, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    assert!(out.iter().all(|&b| b));
    // Then a run that marks every seventh element and writes nothing else: the rest must come
    // back `false`, not the `true` the staging still held.
    let mask: Vec<u8> = (0..n).map(|i| u8::from(i % 7 == 0)).collect();
    let mask = gpu.pinned_from(&mask).unwrap();
    mark_pipelined(&gpu, opts, &mask, &mut out)
        .unwrap()
        .wait()
        .unwrap();
    let raw = bytemuck_bools(&out);
    assert!(
        raw.iter()
            .enumerate()
            .all(|(i, &b)| b == u8::from(i % 7 == 0)),
        "unwritten elements kept stale staging bytes"
    );
}

// ---- refused launches -----------------------------------------------------------------------

/// How long the gated launch of a refused-launch test waits for its gate before it fails: the
/// closure opens it right after the refusal, so a host wait in the refusal fails the test
/// within this bound.
const PATIENCE_NS: u64 = 2_000_000_000;

/// The backend under test, on the default profile or a coherent one (host memory passed to
/// kernels in place, as on Grace Hopper).
fn on_profile(coherent: bool) -> (std::sync::MutexGuard<'static, ()>, Gpu) {
    let (g, gpu) = gpu();
    if coherent {
        assert!(gpu.set_device_profile(DeviceProfile {
            pageable_memory_access: true,
            uses_host_page_tables: true,
        }));
    }
    (g, gpu)
}

// Each refusal is tried on its own, then in a scope behind a gated launch whose gate opens only
// after the refusal: a refusal that waits for the stream fails the scope.

#[test]
fn a_launch_refused_for_its_lengths_leaves_its_output_unchanged_and_does_not_wait() {
    for coherent in [false, true] {
        let (_g, gpu) = on_profile(coherent);
        let x = gpu.pinned_from(&random_f32(100)).unwrap();
        let poison = random_f32(50);
        let mut y = gpu.pinned_from(&poison).unwrap();
        let refused = |e: berth::Error| {
            assert!(
                matches!(e, berth::Error::LengthMismatch { .. }),
                "coherent {coherent}: {e}"
            );
        };
        refused(
            scale_pinned::<f32>(&gpu, Grid::cover(100), 2.0, &x, &mut y)
                .map(|_| ())
                .unwrap_err(),
        );
        assert_same_bits(&y, &poison, coherent, "after a plain launch");
        let gate = gpu.signals(1).unwrap();
        let mut blocker = gpu.alloc_zeroed::<u32>(N).unwrap();
        gpu.scope(|s| {
            gated_fill_within(s, Grid::cover(N), PATIENCE_NS, 1, &gate, &mut blocker)?.detach();
            refused(
                scale_pinned::<f32>(s, Grid::cover(100), 2.0, &x, &mut y)
                    .map(|_| ())
                    .unwrap_err(),
            );
            gate.store(0, 1);
            Ok(())
        })
        .unwrap();
        assert_same_bits(&y, &poison, coherent, "after a launch in a scope");
    }
}

#[test]
fn a_launch_refused_for_the_device_limits_leaves_its_output_unchanged_and_does_not_wait() {
    for coherent in [false, true] {
        let (_g, gpu) = on_profile(coherent);
        let poison = random_bytes(N);
        let mut out = gpu.pinned_from(&poison).unwrap();
        // 1 MiB of dynamic shared memory per block: more than any device allows.
        let over = Grid::cover(N).shared_bytes(1 << 20);
        let refused = |e: berth::Error| {
            assert!(
                matches!(e, berth::Error::InvalidLaunch { .. })
                    && e.to_string().contains("shared memory"),
                "coherent {coherent}: {e}"
            );
        };
        refused(fill_bytes(&gpu, over, 7, &mut out).map(|_| ()).unwrap_err());
        assert_eq!(
            &out[..],
            &poison[..],
            "coherent {coherent}: after a plain launch"
        );
        let gate = gpu.signals(1).unwrap();
        let mut blocker = gpu.alloc_zeroed::<u32>(N).unwrap();
        gpu.scope(|s| {
            gated_fill_within(s, Grid::cover(N), PATIENCE_NS, 1, &gate, &mut blocker)?.detach();
            refused(fill_bytes(s, over, 7, &mut out).map(|_| ()).unwrap_err());
            gate.store(0, 1);
            Ok(())
        })
        .unwrap();
        assert_eq!(
            &out[..],
            &poison[..],
            "coherent {coherent}: after a launch in a scope"
        );
        // The refusals took nothing from the launches that follow.
        fill_bytes(&gpu, Grid::cover(N), 7, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        assert!(
            out.iter().all(|&b| b == 7),
            "coherent {coherent}: a launch after"
        );
    }
}

/// A launch in blocks the compiled kernel cannot run is refused with the registers and the
/// limit before anything of it is queued: `register_heavy` needs more registers per thread
/// than a block of 512 threads leaves room for (`kernels.rs` checks ptxas's count), and the
/// GPU alone knows a compiled function's registers. Its output is left as it was on either
/// profile (on the coherent one a launch that went ahead zeroes it first), plain or pipelined,
/// the refusal does not wait, and the kernel then runs in blocks of 256 threads.
#[cfg(feature = "gpu")]
#[test]
fn a_launch_refused_for_its_registers_leaves_its_output_unchanged_and_does_not_wait() {
    use berth_fixtures::registers::{HELD, register_heavy, register_heavy_pipelined};
    let n = 4096;
    let xs = random_u32(n);
    // `register_heavy` on the host: thread `i` folds `HELD` elements from `i % (n - HELD + 1)`.
    let want: Vec<u32> = (0..n)
        .map(|i| {
            let v = &xs[i % (n - HELD + 1)..][..HELD];
            let s = v
                .iter()
                .fold(0u32, |s, &e| (s ^ e).wrapping_mul(0x9e37_79b9));
            v.iter()
                .rev()
                .fold(s, |s, &e| (s ^ e).wrapping_mul(0x85eb_ca6b))
        })
        .collect();
    for coherent in [false, true] {
        let (_g, gpu) = on_profile(coherent);
        let x = gpu.pinned_from(&xs).unwrap();
        let poison = random_u32(n);
        let mut y = gpu.pinned_from(&poison).unwrap();
        let refused = |e: berth::Error| {
            assert!(
                matches!(&e, berth::Error::InvalidLaunch { kernel: "register_heavy", reason }
                    if reason.contains("512 threads per block (512, 1, 1)")
                        && reason.contains("registers per thread, the kernel runs at most")),
                "coherent {coherent}: {e}"
            );
        };
        let unchanged = |y: &[u32], what: &str| {
            assert!(
                y == &poison[..],
                "coherent {coherent}: the output changed {what}"
            );
        };
        let wide = Grid::cover_with_block(n, 512);
        refused(
            register_heavy(&gpu, wide, &x, &mut y)
                .map(|_| ())
                .unwrap_err(),
        );
        unchanged(&y, "after a plain launch");
        let opts = PipelineOptions {
            chunk_bytes: Some(1024 * 4),
            streams: Some(2),
            threads_per_block: 512,
            ..Default::default()
        };
        refused(
            register_heavy_pipelined(&gpu, opts, &x, &mut y)
                .map(|_| ())
                .unwrap_err(),
        );
        unchanged(&y, "after a pipelined launch");
        let gate = gpu.signals(1).unwrap();
        let mut blocker = gpu.alloc_zeroed::<u32>(N).unwrap();
        gpu.scope(|s| {
            gated_fill_within(s, Grid::cover(N), PATIENCE_NS, 1, &gate, &mut blocker)?.detach();
            refused(register_heavy(s, wide, &x, &mut y).map(|_| ()).unwrap_err());
            gate.store(0, 1);
            Ok(())
        })
        .unwrap();
        unchanged(&y, "after a launch in a scope");
        // The refusals took nothing from the context: the kernel runs in smaller blocks.
        register_heavy(&gpu, Grid::cover_with_block(n, 256), &x, &mut y)
            .unwrap()
            .wait()
            .unwrap();
        assert!(y[..] == want[..], "coherent {coherent}: blocks of 256");
    }
}

/// `got` holds exactly the bits of `want`.
fn assert_same_bits(got: &[f32], want: &[f32], coherent: bool, what: &str) {
    let same = got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(g, w)| g.to_bits() == w.to_bits());
    assert!(same, "coherent {coherent}: the output changed {what}");
}

/// `n` random bytes, never zero.
fn random_bytes(n: usize) -> Vec<u8> {
    random_u32(n).iter().map(|v| (v % 255) as u8 + 1).collect()
}

// ---- memory lent to cudarc ------------------------------------------------------------------

/// cudarc's work on a lent buffer is still queued (behind a gated launch) when the lending
/// ends; a host read of the buffer waits for it.
#[cfg(feature = "gpu")]
#[test]
fn reading_a_buffer_cudarc_still_writes_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut out = gpu.upload(&vec![5u32; N]).unwrap();
    let mut blocker = gpu.alloc_zeroed::<u32>(N).unwrap();
    let stream = gpu.stream().unwrap();
    with_gate(&gpu, |gate| {
        // Held up until the gate opens; cudarc's zeroing queues behind it on the same stream.
        let launch = gated_fill(&stream, Grid::cover(N), 1, gate, &mut blocker).unwrap();
        std::mem::forget(launch);
        out.with_cudarc_mut(&stream, |mut view, s| s.memset_zeros(&mut view))
            .unwrap()
            .unwrap();
        let got = out.to_vec().unwrap();
        assert!(got.iter().all(|&v| v == 0), "read before cudarc's write");
    });
}

/// The same when cudarc's work goes to a stream of its own, which berth does not know: the
/// read waits for the whole context.
#[cfg(feature = "gpu")]
#[test]
fn reading_a_buffer_cudarc_writes_on_its_own_stream_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut out = gpu.upload(&vec![5u32; N]).unwrap();
    let mut blocker = gpu.alloc_zeroed::<u32>(N).unwrap();
    let stream = gpu.stream().unwrap();
    let own = gpu.cudarc_context().unwrap().new_stream().unwrap();
    with_gate(&gpu, |gate| {
        let launch = gated_fill(&stream, Grid::cover(N), 1, gate, &mut blocker).unwrap();
        std::mem::forget(launch);
        out.with_cudarc_mut(&stream, |mut view, s| {
            // `own` waits for the gated launch, then zeroes the buffer.
            own.join(s)?;
            own.memset_zeros(&mut view)
        })
        .unwrap()
        .unwrap();
        let got = out.to_vec().unwrap();
        assert!(got.iter().all(|&v| v == 0), "read before cudarc's write");
    });
}

/// A berth launch that takes a buffer cudarc still writes runs after cudarc's work.
#[cfg(feature = "gpu")]
#[test]
fn launching_on_a_buffer_cudarc_still_writes_waits_for_it() {
    let (_g, gpu) = gpu();
    let mut out = gpu.upload(&vec![5u32; N]).unwrap();
    let mut blocker = gpu.alloc_zeroed::<u32>(N).unwrap();
    let stream = gpu.stream().unwrap();
    let own = gpu.cudarc_context().unwrap().new_stream().unwrap();
    with_gate(&gpu, |gate| {
        let launch = gated_fill(&stream, Grid::cover(N), 1, gate, &mut blocker).unwrap();
        std::mem::forget(launch);
        out.with_cudarc_mut(&stream, |mut view, s| {
            own.join(s)?;
            own.memset_zeros(&mut view)
        })
        .unwrap()
        .unwrap();
        // On berth's default stream, unordered with `own` but for the recorded use.
        gated_fill(&gpu, Grid::cover(N), 7, gate, &mut out)
            .unwrap()
            .wait()
            .unwrap();
    });
    let got = out.to_vec().unwrap();
    assert!(
        got.iter().all(|&v| v == 7),
        "cudarc's write ran after berth's"
    );
}

// ---- two-dimensional ownership: `thread::index_2d()` and `#[matrix]` arguments ------------

/// `out[r][c] = a[r][c] + r * 1000 + c` on the host, for the whole rows of `cols` columns
/// that `len` elements hold; the elements past them keep `poison`.
fn add_coordinates_on_host(a: &[f32], cols: usize, poison: &[f32]) -> Vec<f32> {
    let rows = poison.len() / cols;
    let mut want = poison.to_vec();
    for k in 0..rows * cols {
        want[k] = a[k] + ((k / cols) * 1000 + k % cols) as f32;
    }
    want
}

/// On a 2D grid, both fixtures (block declared and not) write every element of their
/// matrix at the thread's position, and nothing past its whole rows, whatever the grid's
/// margin: the results are the host's on fresh random data over a poisoned output.
#[test]
fn a_matrix_argument_is_written_at_each_threads_2d_position() {
    use berth_fixtures::args::{add_coordinates, add_coordinates_16x16};
    let (_g, gpu) = gpu();
    // 77 whole rows of 333 columns, and 5 elements of a 78th row that the matrix does not
    // hold; the grids reach past both edges.
    let (w, h) = (333usize, 77usize);
    let len = w * h + 5;
    let a = random_f32(len);
    let poison = random_f32(len);
    let want = add_coordinates_on_host(&a, w, &poison);
    let da = gpu.upload(&a).unwrap();
    for declared in [false, true] {
        let mut out = gpu.upload(&poison).unwrap();
        if declared {
            let grid = Grid::cover_2d(w, h, (16, 16));
            add_coordinates_16x16(&gpu, grid, w as u32, &da, &mut out)
        } else {
            let grid = Grid::new((w.div_ceil(32) as u32, h.div_ceil(8) as u32 + 1), (32, 8));
            add_coordinates(&gpu, grid, w as u32, &da, &mut out)
        }
        .unwrap()
        .wait()
        .unwrap();
        let got = out.to_vec().unwrap();
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "declared block: {declared}"
        );
    }
}

/// A grid with two layers along z would give two threads every 2D position. A kernel that
/// declares a 2D block is refused before anything runs, naming the kernel and the grid to
/// use. (One that does not stops at its `thread::index_2d()`: `gpu/faults.rs`.)
#[test]
fn a_grid_with_z_layers_never_gives_two_threads_one_2d_position() {
    use berth_fixtures::args::add_coordinates_16x16;
    let (_g, gpu) = gpu();
    let (w, h) = (40usize, 20usize);
    let a = gpu.upload(&random_f32(w * h)).unwrap();
    let poison = random_f32(w * h);
    let mut out = gpu.upload(&poison).unwrap();
    let layered = Grid::new((3, 2, 2), (16, 16));
    let Err(err) = add_coordinates_16x16(&gpu, layered, w as u32, &a, &mut out) else {
        panic!("a z = 2 grid of a kernel with a declared 2D block was accepted");
    };
    let berth::Error::InvalidLaunch { kernel, reason } = &err else {
        panic!("expected InvalidLaunch, got {err}");
    };
    assert_eq!(*kernel, "add_coordinates_16x16");
    assert!(
        reason.contains("(3, 2, 2) blocks")
            && reason.contains("Grid::new((blocks_x, blocks_y), (16, 16))"),
        "{reason}"
    );
    gpu.synchronize().unwrap();
    assert_eq!(
        out.to_vec().unwrap(),
        poison,
        "a refused launch wrote its output"
    );
}

/// A kernel that returns from the threads off layer 0 along z runs its planar entry (which
/// takes every z coordinate as 0) on a grid without z, and its general entry on a grid with
/// z layers: both write every element once, with the same values.
#[test]
fn a_z_guarded_kernel_writes_the_same_with_or_without_z_layers() {
    use berth::__private::Entry;
    use berth_fixtures::args::{__BERTH_KERNEL_layer0_coordinates as KERNEL, layer0_coordinates};
    let (_g, gpu) = gpu();
    let (w, h) = (45usize, 21usize);
    let want: Vec<f32> = (0..w * h)
        .map(|i| ((i / w) * 1000 + i % w) as f32)
        .collect();
    for (grid, entry) in [
        (Grid::new((2, 3), (32, 8)), Entry::Planar),
        (Grid::new((2, 3, 2), (32, 8)), Entry::General),
        (Grid::new((2, 3), (32, 8, 2)), Entry::General),
    ] {
        assert_eq!(grid.entry_of(&KERNEL), entry, "{grid:?}");
        let mut out = gpu.upload(&random_f32(w * h)).unwrap();
        layer0_coordinates(&gpu, grid, w as u32, &mut out)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(out.to_vec().unwrap(), want, "{grid:?}");
    }
}

/// A declared 1D block fixes the grid to x alone as well: a grid along y is refused.
#[test]
fn a_kernel_with_a_declared_1d_block_is_refused_a_2d_grid() {
    let (_g, gpu) = gpu();
    let poison = random_u32(12);
    let mut out = gpu.upload(&poison).unwrap();
    let err =
        berth_fixtures::language::same_name_arrays(&gpu, Grid::new((3, 2), 64), 1, 2, &mut out)
            .map(|_| ())
            .unwrap_err();
    let berth::Error::InvalidLaunch { kernel, reason } = &err else {
        panic!("expected InvalidLaunch, got {err}");
    };
    assert_eq!(*kernel, "same_name_arrays");
    assert!(
        reason.contains("1D block") && reason.contains("Grid::new(blocks, 64)"),
        "{reason}"
    );
    gpu.synchronize().unwrap();
    assert_eq!(out.to_vec().unwrap(), poison);
}
