//! Signals and mailboxes between the host and a running kernel: flag round trips, ten
//! thousand mailbox rounds, a kernel whose host never answers.

use super::*;

fn job(id: u32) -> berth_examples::Job {
    berth_examples::Job {
        id,
        stop: 0,
        value: (id % 1000) as f32 * 0.25,
    }
}

#[test]
fn flag_round_trips_answer_every_ping_in_order() {
    use berth_examples::ping_pong;
    use std::time::Duration;
    let t = Duration::from_secs(20);
    let (_g, gpu) = gpu();
    let cells = gpu.signals(2).unwrap();
    let stream = gpu.stream().unwrap();
    let rounds = 2000;
    let pending = ping_pong(&stream, Grid::new(1, 1), rounds, 20_000, &cells).unwrap();
    for n in 1..=rounds {
        // The kernel has answered the previous ping and nothing else.
        assert_eq!(cells.load(1), n - 1);
        cells.store(0, n);
        assert_eq!(
            cells.wait(1, |v| v >= n, t).unwrap(),
            n,
            "answer to ping {n}"
        );
    }
    pending.wait().unwrap();
    assert_eq!(cells.load(1), rounds);
}

#[test]
fn mailboxes_carry_ten_thousand_rounds_each_way_without_loss() {
    use berth_examples::{Job, square_worker, worker_ctl};
    use std::time::Duration;
    let t = Duration::from_secs(20);
    let (_g, gpu) = gpu();
    let inbox = gpu.inbox::<Job>(64).unwrap();
    let outbox = gpu.outbox::<berth_examples::Reply>(64).unwrap();
    let ctl = gpu.signals(2).unwrap();
    let stream = gpu.stream().unwrap();
    let pending = square_worker(&stream, Grid::new(1, 1), 20_000, &inbox, &outbox, &ctl).unwrap();
    let check = |id: u32, r: berth_examples::Reply| {
        let j = job(id);
        assert_eq!((r.id, r.value), (id, j.value * j.value + 1.0), "reply {id}");
    };
    // 10 000 strict round trips, then 10 000 with the ring kept full.
    for id in 0..10_000 {
        inbox.send(job(id), t).unwrap();
        check(id, outbox.recv(t).unwrap());
    }
    let mut next = 10_000;
    for id in 10_000..20_000u32 {
        while id - next >= 63 {
            check(next, outbox.recv(t).unwrap());
            next += 1;
        }
        inbox.send(job(id), t).unwrap();
    }
    while next < 20_000 {
        check(next, outbox.recv(t).unwrap());
        next += 1;
    }
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
    pending.wait().unwrap();
    assert_eq!(ctl.load(worker_ctl::STATE), worker_ctl::STOPPED);
    assert_eq!(
        ctl.load(worker_ctl::ANSWERED),
        20_000,
        "no job lost or duplicated"
    );
    // Nothing more arrives.
    assert!(matches!(
        outbox.recv(Duration::from_millis(20)),
        Err(Error::Timeout { .. })
    ));
}

#[test]
fn a_kernel_whose_host_never_answers_ends_with_an_error() {
    in_child_on_the_gpu!("a_kernel_whose_host_never_answers_ends_with_an_error");
    use berth_examples::{Job, Reply, square_worker, worker_ctl};
    let (_g, gpu) = gpu();
    let inbox = gpu.inbox::<Job>(4).unwrap();
    let outbox = gpu.outbox::<Reply>(4).unwrap();
    let ctl = gpu.signals(2).unwrap();
    let stream = gpu.stream().unwrap();
    let started = std::time::Instant::now();
    // 50 ms of patience, and the host posts nothing.
    let err = square_worker(&stream, Grid::new(1, 1), 50, &inbox, &outbox, &ctl)
        .unwrap()
        .wait()
        .unwrap_err();
    let Error::KernelPanic { kernel, report, .. } = &err else {
        panic!("expected the worker's failure, got {err}");
    };
    assert_eq!(kernel, "square_worker");
    assert_eq!(report.message, "the host posted no job in time");
    assert_eq!(ctl.load(worker_ctl::STATE), worker_ctl::HOST_GONE);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "gave up in time"
    );
    println!("reported: {err}");
}
