//! The simulator's warps: the lanes of a warp meet in lock-step at each warp call.
//!
//! A thread reaching a warp call records it and yields (as at a block barrier). Once no
//! thread of the block can run, [`release`] looks at every warp: a group of lanes that all
//! wait at the same kind of call with the same mask exchanges values
//! ([`berth_device::host::warp::exchange`]) and runs on. A group that can never meet — its
//! mask names a lane that has returned, waits at a block barrier or at a different warp call
//! — is reported when nothing else can move, with the waiting lane's call site.

use berth_device::host::warp::{Call, exchange};
use std::panic::Location;

/// Where a simulated thread of a coroutine-mode block stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Wait {
    /// Runnable.
    No,
    /// In `sync_threads`.
    Barrier,
    /// In a warp call (its call is in the block's `warp_calls`).
    Warp,
    /// Returned.
    Done,
}

/// A thread's pending warp call and its call site.
pub(crate) type Pending = Option<(Call, &'static Location<'static>)>;

/// The lanes of warp `w` (of a block of `n` threads) that exist.
pub(crate) fn existing_lanes(w: usize, n: usize) -> u32 {
    let live = n.saturating_sub(w * 32).min(32);
    if live == 32 {
        u32::MAX
    } else {
        (1u32 << live) - 1
    }
}

/// Release every group of lanes that can meet: store their results, clear their calls and
/// make them runnable. `Ok(true)` if any group was released, `Ok(false)` if no thread waits
/// at a warp call, `Err((thread, problem))` if some do and none can be released.
pub(crate) fn release(
    wait: &mut [Wait],
    calls: &mut [Pending],
    results: &mut [u64],
) -> Result<bool, (usize, String)> {
    let n = wait.len();
    let mut progress = false;
    let mut problem: Option<(usize, String)> = None;
    for w in 0..n.div_ceil(32) {
        let base = w * 32;
        let exists = existing_lanes(w, n);
        for lane in 0..32 {
            let t = base + lane;
            // A lane released by an earlier group this pass no longer waits.
            if t >= n || wait[t] != Wait::Warp {
                continue;
            }
            let (call, at) = calls[t].expect("a thread waiting at a warp call has one");
            let group = call.mask & exists;
            match meet(wait, calls, base, lane, call, at, group) {
                Err(p) => {
                    problem.get_or_insert((t, p));
                }
                Ok(lanes) => {
                    let got = exchange(&lanes, group, exists).map_err(|(l, p)| {
                        let at = calls[base + l].map_or(at, |c| c.1);
                        (base + l, format!("{p}, at {}:{}", at.file(), at.line()))
                    })?;
                    for l in (0..32).filter(|l| group & (1 << l) != 0) {
                        results[base + l] = got[l];
                        calls[base + l] = None;
                        wait[base + l] = Wait::No;
                    }
                    progress = true;
                }
            }
        }
    }
    match problem {
        Some(p) if !progress => Err(p),
        _ => Ok(progress),
    }
}

/// The calls of the lanes of `group`, if every one of them waits at the same kind of call
/// with the same mask as lane `lane`; else why they cannot meet.
fn meet(
    wait: &[Wait],
    calls: &[Pending],
    base: usize,
    lane: usize,
    call: Call,
    at: &'static Location<'static>,
    group: u32,
) -> Result<[Option<Call>; 32], String> {
    let name = call.op.name();
    let here = format!(
        "{name}() at {}:{} in lane {lane} (mask {:#010x})",
        at.file(),
        at.line(),
        call.mask
    );
    if call.mask & (1 << lane) == 0 {
        return Err(format!(
            "{here}: the mask does not name the calling lane (on the GPU this is undefined)"
        ));
    }
    let mut lanes = [None; 32];
    for l in (0..32).filter(|l| group & (1 << l) != 0) {
        let t = base + l;
        let other = match wait[t] {
            Wait::Done => Some(format!("lane {l}, which has returned")),
            Wait::Barrier => Some(format!("lane {l}, which waits in sync_threads()")),
            Wait::No => Some(format!("lane {l}, which is still running")),
            Wait::Warp => {
                let (c, a) = calls[t].expect("waiting at a warp call");
                (c.op != call.op || c.mask != call.mask).then(|| {
                    format!(
                        "lane {l}, which waits at {}() at {}:{} (mask {:#010x})",
                        c.op.name(),
                        a.file(),
                        a.line(),
                        c.mask
                    )
                })
            }
        };
        if let Some(other) = other {
            return Err(format!(
                "{here} names {other}: the lanes of a mask must all reach the same kind of warp call with the same mask (on the GPU this hangs or is undefined)"
            ));
        }
        lanes[l] = calls[t].map(|c| c.0);
    }
    Ok(lanes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_device::host::warp::Op;

    #[track_caller]
    fn here() -> &'static Location<'static> {
        Location::caller()
    }

    #[test]
    fn partial_warps_have_only_their_lanes() {
        assert_eq!(existing_lanes(0, 48), u32::MAX);
        assert_eq!(existing_lanes(1, 48), 0xffff);
        assert_eq!(existing_lanes(2, 48), 0);
    }

    #[test]
    fn a_group_meets_exchanges_and_runs_on() {
        let n = 40;
        let mut wait = vec![Wait::Warp; n];
        let mut calls: Vec<Pending> = (0..n)
            .map(|t| {
                let call = Call {
                    op: Op::Xor,
                    mask: u32::MAX,
                    value: t as u64,
                    arg: 1,
                };
                Some((call, here()))
            })
            .collect();
        let mut results = vec![0; n];
        assert_eq!(release(&mut wait, &mut calls, &mut results), Ok(true));
        assert!(wait.iter().all(|&w| w == Wait::No));
        assert_eq!(
            (results[0], results[1], results[33], results[39]),
            (1, 0, 32, 38)
        );
        assert_eq!(release(&mut wait, &mut calls, &mut results), Ok(false));
    }

    fn call(op: Op, mask: u32, value: u64, arg: u32) -> Pending {
        Some((
            Call {
                op,
                mask,
                value,
                arg,
            },
            here(),
        ))
    }

    #[test]
    fn a_partial_warp_votes_with_its_lanes_and_cannot_read_past_them() {
        // A block of 40 threads: warp 1 has lanes 0..8.
        let n = 40;
        let mut wait = vec![Wait::Warp; n];
        let mut calls: Vec<Pending> = (0..n)
            .map(|t| call(Op::Ballot, u32::MAX, u64::from(t % 2 == 0), 0))
            .collect();
        let mut results = vec![0; n];
        assert_eq!(release(&mut wait, &mut calls, &mut results), Ok(true));
        assert_eq!((results[0], results[39]), (0x5555_5555, 0x55));

        let mut wait = vec![Wait::Warp; n];
        let mut calls: Vec<Pending> = (0..n).map(|_| call(Op::Down, u32::MAX, 7, 4)).collect();
        let err = release(&mut wait, &mut calls, &mut results).unwrap_err();
        assert_eq!(err.0, 36, "lane 4 of warp 1 reads lane 8: {}", err.1);
        assert!(err.1.contains("past the end of the block"), "{}", err.1);
    }

    #[test]
    fn a_mask_without_the_caller_is_reported() {
        let mut wait = vec![Wait::Warp; 2];
        let mut calls = vec![call(Op::Sync, 0b10, 0, 0), call(Op::Sync, 0b10, 0, 0)];
        // Lane 1's own group meets; lane 0 names only lane 1 and never can.
        assert_eq!(release(&mut wait, &mut calls, &mut [0, 0]), Ok(true));
        let err = release(&mut wait, &mut calls, &mut [0, 0]).unwrap_err();
        assert_eq!(err.0, 0);
        assert!(
            err.1.contains("does not name the calling lane"),
            "{}",
            err.1
        );
    }

    #[test]
    fn a_lane_that_returned_is_reported() {
        let mut wait = vec![Wait::Warp, Wait::Done];
        let call = Call {
            op: Op::Ballot,
            mask: u32::MAX,
            value: 1,
            arg: 0,
        };
        let mut calls = vec![Some((call, here())), None];
        let err = release(&mut wait, &mut calls, &mut [0, 0]).unwrap_err();
        assert_eq!(err.0, 0);
        assert!(
            err.1.contains("names lane 1, which has returned"),
            "{}",
            err.1
        );
    }
}
