//! The multi-GPU section of `BENCHMARKS.md`, from `multigpu.jsonl` (`.gpu/run.sh multigpu` on
//! the 2-GPU machine: `bench_multigpu` and `bench/multigpu/reference.cu`, same run), and the multi-GPU
//! tests' outcome from `multigpu.log`.

use std::fmt::Write as _;

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

use crate::stats::median;

/// `1 MiB`, `1 GiB`.
fn size_name(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

fn mark(ok: bool) -> &'static str {
    if ok { "✓" } else { "✗" }
}

/// The median of `field` over the CUDA C++ lines of `bench` on `devices` GPUs with host memory
/// from `host` (NaN where there are none).
fn cuda_of(rows: &[serde_json::Value], bench: &str, devices: u64, host: &str, field: &str) -> f64 {
    median(
        &rows
            .iter()
            .filter(|r| {
                r["impl"] == "cuda"
                    && r["bench"] == bench
                    && r["devices"] == devices
                    && r["host"] == host
            })
            .filter_map(|r| r[field].as_f64())
            .collect::<Vec<_>>(),
    )
}

/// A one-row table of berth's time against C++'s, in µs, and their ratio.
fn time_table(md: &mut String, berth_us: f64, cuda_us: f64) -> Result {
    writeln!(md, "| berth µs | C++ µs | ratio (time) |")?;
    writeln!(md, "|---:|---:|---:|")?;
    writeln!(
        md,
        "| {berth_us:.1} | {cuda_us:.1} | **{:.2}** |\n",
        cuda_us / berth_us
    )?;
    Ok(())
}

pub fn write(md: &mut String, text: &str) -> Result {
    let mut rows: Vec<serde_json::Value> = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('{')) {
        rows.push(serde_json::from_str(line)?);
    }
    let pick = |imp: &str, bench: &str, key: &str, val: &serde_json::Value, field: &str| {
        median(
            &rows
                .iter()
                .filter(|r| r["impl"] == imp && r["bench"] == bench && &r[key] == val)
                .filter_map(|r| r[field].as_f64())
                .collect::<Vec<_>>(),
        )
    };
    let bad: u64 = rows.iter().filter_map(|r| r["bad"].as_u64()).sum();
    writeln!(md, "\n## Several GPUs\n")?;
    writeln!(
        md,
        "On the 2-GPU machine (`.gpu/run.sh multigpu`): berth (`bench/multigpu/main.rs`) against CUDA C++ and NCCL called directly (`bench/multigpu/reference.cu`), same run, medians (two rounds for the references and berth's peer and all-reduce lines; the pipeline's one- and all-GPU runs interleave in one process, five repetitions each after a warm-up).\n"
    )?;

    // The pipeline over every GPU against one.
    let devices: Vec<u64> = {
        let mut d: Vec<u64> = rows
            .iter()
            .filter(|r| r["bench"] == "multigpu_pipeline")
            .filter_map(|r| r["devices"].as_u64())
            .collect();
        d.sort_unstable();
        d.dedup();
        d
    };
    if !devices.is_empty() {
        writeln!(
            md,
            "**Elementwise pipeline, 4 GiB in + 4 GiB out** (`affine_one_pipelined`, automatic plan; over several GPUs `DeviceSet::pipelined`, shards split by measured link):\n"
        )?;
        // Where the C++ side timed the copies alone, each row's share of that ceiling (host
        // memory on each GPU's NUMA node, as berth allocates shards).
        let ceiling = |d: u64| cuda_of(&rows, "multigpu_copy_ceiling", d, "local", "gbps_in");
        let share = !ceiling(1).is_nan();
        let (head, rule) = if share {
            (" of copies alone (C++) |", "---:|")
        } else {
            ("", "")
        };
        writeln!(
            md,
            "| GPUs | median (ms) | GB/s in |{head} speed-up over 1 GPU | target |"
        )?;
        writeln!(md, "|---:|---:|---:|{rule}---:|---|")?;
        let one = pick(
            "berth",
            "multigpu_pipeline",
            "devices",
            &serde_json::json!(1),
            "median_ms",
        );
        for d in &devices {
            let key = serde_json::json!(d);
            let ms = pick("berth", "multigpu_pipeline", "devices", &key, "median_ms");
            let gbps = pick("berth", "multigpu_pipeline", "devices", &key, "gbps_in");
            let speedup = one / ms;
            let target = if *d >= 2 {
                format!("≥ 1.9 {}", mark(speedup >= 1.9))
            } else {
                String::new()
            };
            let of_ceiling = if share {
                format!(" {:.2} |", gbps / ceiling(*d))
            } else {
                String::new()
            };
            writeln!(
                md,
                "| {d} | {ms:.1} | {gbps:.1} |{of_ceiling} **{speedup:.2}** | {target} |"
            )?;
        }
        writeln!(md)?;
    }

    // The same pipeline written by hand in CUDA C++, by where its host memory lives.
    let reference: Vec<(u64, String)> = {
        let mut v: Vec<(u64, String)> = rows
            .iter()
            .filter(|r| r["impl"] == "cuda" && r["bench"] == "multigpu_pipeline")
            .filter_map(|r| Some((r["devices"].as_u64()?, r["host"].as_str()?.to_owned())))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    if !reference.is_empty() {
        // Runs that also timed the copies alone get columns for that ceiling.
        let ceiling = rows
            .iter()
            .any(|r| r["impl"] == "cuda" && r["bench"] == "multigpu_copy_ceiling");
        writeln!(
            md,
            "**The same pipeline in CUDA C++** (`bench/multigpu/reference.cu`: equal shards, 3 streams × 64 MiB per GPU, queued from one thread; host memory allocated by the main thread, or per GPU by a thread on the GPU's NUMA node, as berth does){}:\n",
            if ceiling {
                "; beside it the same passes with the kernel left out, the copies in and out alone: the ceiling of any in/out pipeline on as many GPUs, whose speed-up bounds the pipeline's"
            } else {
                ""
            }
        )?;
        let (head, rule) = if ceiling {
            (" copies alone, GB/s in | their speed-up |", "---:|---:|")
        } else {
            ("", "")
        };
        writeln!(
            md,
            "| GPUs | host memory | median (ms) | GB/s in | speed-up over 1 GPU |{head}"
        )?;
        writeln!(md, "|---:|---|---:|---:|---:|{rule}")?;
        for (d, host) in &reference {
            let of = |bench, d, field| cuda_of(&rows, bench, d, host, field);
            let ms = of("multigpu_pipeline", *d, "median_ms");
            let speedup = of("multigpu_pipeline", 1, "median_ms") / ms;
            let gbps = of("multigpu_pipeline", *d, "gbps_in");
            let place = if host == "local" {
                "each GPU's NUMA node"
            } else {
                "main thread"
            };
            let alone = if ceiling {
                let c = of("multigpu_copy_ceiling", *d, "median_ms");
                format!(
                    " {:.1} | {:.2} |",
                    of("multigpu_copy_ceiling", *d, "gbps_in"),
                    of("multigpu_copy_ceiling", 1, "median_ms") / c
                )
            } else {
                String::new()
            };
            writeln!(
                md,
                "| {d} | {place} | {ms:.1} | {gbps:.1} | {speedup:.2} |{alone}"
            )?;
        }
        writeln!(md)?;
    }

    // A kernel reading a peer GPU's buffer.
    let peer = serde_json::json!("peer");
    let local = serde_json::json!("local");
    let (bp, cp) = (
        pick("berth", "peer_read", "where", &peer, "gbps"),
        pick("cuda", "peer_read", "where", &peer, "gbps"),
    );
    if !bp.is_nan() || !cp.is_nan() {
        writeln!(
            md,
            "**Kernel reading a peer GPU's buffer** (`block_sum` over 1 GiB of f32 on GPU 0; the buffer on GPU 1 read in place through a peer view, against the same kernel in CUDA C++ after `cudaDeviceEnablePeerAccess`; the local read for scale):\n"
        )?;
        writeln!(md, "| read | berth GB/s | CUDA C++ GB/s | ratio | target |")?;
        writeln!(md, "|---|---:|---:|---:|---|")?;
        writeln!(
            md,
            "| peer (NVLink) | {bp:.1} | {cp:.1} | **{:.2}** | ≥ 0.95 {} |",
            bp / cp,
            mark(bp / cp >= 0.95)
        )?;
        let (bl, cl) = (
            pick("berth", "peer_read", "where", &local, "gbps"),
            pick("cuda", "peer_read", "where", &local, "gbps"),
        );
        writeln!(md, "| local | {bl:.1} | {cl:.1} | {:.2} | |", bl / cl)?;
        writeln!(md)?;
    }

    // A step across devices: a write on one, a read of it in place on the other.
    let step_bytes = serde_json::json!(1 << 20);
    let (bs, cs) = (
        pick("berth", "peer_step", "bytes", &step_bytes, "median_us"),
        pick("cuda", "peer_step", "bytes", &step_bytes, "median_us"),
    );
    if !bs.is_nan() || !cs.is_nan() {
        writeln!(
            md,
            "**A step across devices, 1 MiB** (`saxpy` writing a buffer on GPU 1, then `block_sum` on GPU 0 reading it in place, ordered after the write on the GPU, waited for; berth: the write detached in a scope on GPU 1 and a peer view made after it; C++: an event after the write and `cudaStreamWaitEvent` on GPU 0's stream):\n"
        )?;
        time_table(md, bs, cs)?;
    }

    // All-reduce bus bandwidth.
    let mut sizes: Vec<u64> = rows
        .iter()
        .filter(|r| r["bench"] == "allreduce")
        .filter_map(|r| r["bytes"].as_u64())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    if !sizes.is_empty() {
        writeln!(
            md,
            "**All-reduce** (f32 sum, in place, every GPU; berth's `DeviceSet::all_reduce` on `DeviceBuffer`s through cudarc's NCCL against `ncclAllReduce` from C++, both one thread with a group per collective and the streams synchronised after each; bus bandwidth = bytes × 2(n−1)/n / time):\n"
        )?;
        // Runs that timed the queueing part apart (`submit_us`) get a column for it.
        let queueing = rows
            .iter()
            .any(|r| r["bench"] == "allreduce" && r["submit_us"].is_number());
        let (head, rule) = if queueing {
            (" queueing µs (berth / NCCL) |", "---:|")
        } else {
            ("", "")
        };
        writeln!(
            md,
            "| size | berth bus GB/s | NCCL bus GB/s | ratio | berth µs | NCCL µs |{head} target |"
        )?;
        writeln!(md, "|---:|---:|---:|---:|---:|---:|{rule}---|")?;
        for b in sizes {
            let key = serde_json::json!(b);
            let (bb, nb) = (
                pick("berth", "allreduce", "bytes", &key, "busbw_gbps"),
                pick("cuda", "allreduce", "bytes", &key, "busbw_gbps"),
            );
            let (bu, nu) = (
                pick("berth", "allreduce", "bytes", &key, "median_us"),
                pick("cuda", "allreduce", "bytes", &key, "median_us"),
            );
            let (bs, ns) = (
                pick("berth", "allreduce", "bytes", &key, "submit_us"),
                pick("cuda", "allreduce", "bytes", &key, "submit_us"),
            );
            let size = size_name(b);
            writeln!(
                md,
                "| {size} | {bb:.1} | {nb:.1} | **{:.2}** | {bu:.1} | {nu:.1} |{} ≥ 0.95 {} |",
                bb / nb,
                if queueing {
                    format!(" {bs:.1} / {ns:.1} |")
                } else {
                    String::new()
                },
                mark(bb / nb >= 0.95)
            )?;
        }
        writeln!(md)?;
    }

    // The same all-reduce waited for on every stream of each device.
    let mut whole: Vec<u64> = rows
        .iter()
        .filter(|r| r["bench"] == "allreduce_devsync")
        .filter_map(|r| r["bytes"].as_u64())
        .collect();
    whole.sort_unstable();
    whole.dedup();
    if !whole.is_empty() {
        writeln!(
            md,
            "**The same all-reduce waited for on the whole device** (berth: the guard detached, then `DeviceSet::synchronize`, a `cuCtxSynchronize` per member; NCCL: `cudaDeviceSynchronize` per device), beside the stream waits above:\n"
        )?;
        writeln!(
            md,
            "| size | berth µs | NCCL µs | ratio (time) | berth µs, guard | NCCL µs, streams |"
        )?;
        writeln!(md, "|---:|---:|---:|---:|---:|---:|")?;
        for b in whole {
            let key = serde_json::json!(b);
            let (bu, nu) = (
                pick("berth", "allreduce_devsync", "bytes", &key, "median_us"),
                pick("cuda", "allreduce_devsync", "bytes", &key, "median_us"),
            );
            let (bs, ns) = (
                pick("berth", "allreduce", "bytes", &key, "median_us"),
                pick("cuda", "allreduce", "bytes", &key, "median_us"),
            );
            writeln!(
                md,
                "| {} | {bu:.1} | {nu:.1} | {:.2} | {bs:.1} | {ns:.1} |",
                size_name(b),
                nu / bu
            )?;
        }
        writeln!(md)?;
    }
    // A data-parallel step's tail: the all-reduce, then a launch reading its result.
    let step: Vec<u64> = rows
        .iter()
        .filter(|r| r["bench"] == "allreduce_step")
        .filter_map(|r| r["bytes"].as_u64())
        .collect();
    if let Some(&b) = step.first() {
        let key = serde_json::json!(b);
        let (bu, nu) = (
            pick("berth", "allreduce_step", "bytes", &key, "median_us"),
            pick("cuda", "allreduce_step", "bytes", &key, "median_us"),
        );
        writeln!(
            md,
            "**A data-parallel step's tail, {}** (the all-reduce, then on every GPU `saxpy` reading its result on another stream, ordered after it on the GPU, and waited for; berth: `all_reduce(..)?.detach()` and a launch on each device's default stream; C++: an event recorded on each collective stream and `cudaStreamWaitEvent` before the launch):\n",
            size_name(b)
        )?;
        time_table(md, bu, nu)?;
    }
    writeln!(md, "Results checked against the host: {bad} wrong.")?;
    Ok(())
}

/// The multi-GPU tests and example as the run reported them (`multigpu.log`).
pub fn write_tests(md: &mut String, text: &str) -> Result {
    writeln!(md, "\n## Several GPUs: tests\n")?;
    writeln!(
        md,
        "The device-set tests (`tests/tests/multigpu.rs`) and the `data_parallel` example in the same run:\n"
    )?;
    writeln!(md, "```")?;
    for line in text.lines().filter(|l| {
        l.starts_with("test ")
            || l.starts_with("===")
            || l.starts_with("skipped")
            || l.starts_with("data_parallel:")
    }) {
        writeln!(md, "{line}")?;
    }
    writeln!(md, "```")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_the_ratios_and_targets() {
        let lines = r#"{"impl":"cuda","bench":"peer_read","where":"peer","bytes":1073741824,"median_ms":3.0,"gbps":360.0,"reps":5,"bad":0,"round":1}
{"impl":"cuda","bench":"peer_read","where":"local","bytes":1073741824,"median_ms":0.3,"gbps":3600.0,"reps":5,"bad":0,"round":1}
{"impl":"berth","bench":"peer_read","where":"peer","path":"Direct","bytes":1073741824,"median_ms":3.1,"gbps":350.0,"reps":5,"bad":0,"round":1}
{"impl":"berth","bench":"peer_read","where":"local","path":"Local","bytes":1073741824,"median_ms":0.3,"gbps":3500.0,"reps":5,"bad":0,"round":1}
{"impl":"cuda","bench":"allreduce","devices":2,"bytes":1048576,"iters":200,"median_us":30.0,"busbw_gbps":35.0,"reps":5,"bad":0,"round":1}
{"impl":"berth","bench":"allreduce","devices":2,"bytes":1048576,"iters":200,"median_us":40.0,"busbw_gbps":26.2,"reps":5,"bad":0,"round":1}
{"impl":"berth","bench":"multigpu_pipeline","devices":1,"bytes_in":4294967296,"median_ms":160.0,"gbps_in":26.8,"reps":5,"bad":0}
{"impl":"berth","bench":"multigpu_pipeline","devices":2,"bytes_in":4294967296,"median_ms":82.0,"gbps_in":52.4,"reps":5,"bad":0}"#;
        let mut md = String::new();
        super::write(&mut md, lines).unwrap();
        assert!(
            md.contains("| 2 | 82.0 | 52.4 | **1.95** | ≥ 1.9 ✓ |"),
            "{md}"
        );
        assert!(
            md.contains("| peer (NVLink) | 350.0 | 360.0 | **0.97** | ≥ 0.95 ✓ |"),
            "{md}"
        );
        assert!(md.contains("| 1 MiB | 26.2 | 35.0 | **0.75** |"), "{md}");
        assert!(md.contains("≥ 0.95 ✗"), "{md}");
        assert!(md.contains("0 wrong"), "{md}");
        // Without queueing times, C++ pipeline or whole-device lines, no column or table.
        assert!(
            !md.contains("queueing")
                && !md.contains("The same pipeline in CUDA C++")
                && !md.contains("whole device")
                && !md.contains("step's tail")
                && !md.contains("step across devices"),
            "{md}"
        );
    }

    #[test]
    fn renders_the_queueing_time_and_the_cuda_pipeline_by_host_memory() {
        let lines = r#"{"impl":"cuda","bench":"allreduce","devices":2,"bytes":1048576,"iters":200,"median_us":30.0,"submit_us":4.0,"busbw_gbps":35.0,"reps":5,"bad":0}
{"impl":"berth","bench":"allreduce","devices":2,"bytes":1048576,"iters":200,"median_us":40.0,"submit_us":9.5,"busbw_gbps":26.2,"reps":5,"bad":0}
{"impl":"cuda","bench":"allreduce_devsync","devices":2,"bytes":1048576,"iters":200,"median_us":36.0,"submit_us":4.0,"busbw_gbps":29.1,"reps":5,"bad":0}
{"impl":"berth","bench":"allreduce_devsync","devices":2,"bytes":1048576,"iters":200,"median_us":45.0,"submit_us":9.5,"busbw_gbps":23.3,"reps":5,"bad":0}
{"impl":"cuda","bench":"multigpu_pipeline","devices":1,"host":"main","median_ms":90.0,"gbps_in":47.7,"reps":5,"bad":0}
{"impl":"cuda","bench":"multigpu_pipeline","devices":2,"host":"main","median_ms":60.0,"gbps_in":71.6,"reps":5,"bad":0}
{"impl":"cuda","bench":"multigpu_pipeline","devices":1,"host":"local","median_ms":90.0,"gbps_in":47.7,"reps":5,"bad":0}
{"impl":"cuda","bench":"multigpu_pipeline","devices":2,"host":"local","median_ms":45.0,"gbps_in":95.4,"reps":5,"bad":0}
{"impl":"cuda","bench":"multigpu_copy_ceiling","devices":1,"host":"main","median_ms":85.0,"gbps_in":50.5,"reps":5}
{"impl":"cuda","bench":"multigpu_copy_ceiling","devices":2,"host":"main","median_ms":56.0,"gbps_in":76.7,"reps":5}
{"impl":"cuda","bench":"multigpu_copy_ceiling","devices":1,"host":"local","median_ms":85.0,"gbps_in":50.5,"reps":5}
{"impl":"cuda","bench":"multigpu_copy_ceiling","devices":2,"host":"local","median_ms":44.0,"gbps_in":97.6,"reps":5}
{"impl":"berth","bench":"multigpu_pipeline","devices":1,"bytes_in":4294967296,"median_ms":95.0,"gbps_in":45.2,"reps":5,"bad":0}
{"impl":"berth","bench":"multigpu_pipeline","devices":2,"bytes_in":4294967296,"median_ms":48.8,"gbps_in":88.0,"reps":5,"bad":0}
{"impl":"cuda","bench":"allreduce_step","devices":2,"bytes":1048576,"iters":200,"median_us":33.0,"reps":5,"bad":0}
{"impl":"cuda","bench":"peer_step","bytes":1048576,"iters":200,"median_us":20.0,"reps":5,"bad":0}
{"impl":"berth","bench":"peer_step","bytes":1048576,"iters":200,"median_us":25.0,"reps":5,"bad":0}
{"impl":"berth","bench":"allreduce_step","devices":2,"bytes":1048576,"iters":200,"median_us":44.0,"reps":5,"bad":0}"#;
        let mut md = String::new();
        super::write(&mut md, lines).unwrap();
        assert!(
            md.contains("| 1 MiB | 26.2 | 35.0 | **0.75** | 40.0 | 30.0 | 9.5 / 4.0 | ≥ 0.95 ✗ |"),
            "{md}"
        );
        assert!(
            md.contains("| 1 MiB | 45.0 | 36.0 | 0.80 | 40.0 | 30.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| 2 | main thread | 60.0 | 71.6 | 1.50 | 76.7 | 1.52 |"),
            "{md}"
        );
        assert!(
            md.contains("| 2 | each GPU's NUMA node | 45.0 | 95.4 | 2.00 | 97.6 | 1.93 |"),
            "{md}"
        );
        // berth's rows against the NUMA-local ceiling of as many GPUs.
        assert!(md.contains("| 1 | 95.0 | 45.2 | 0.90 | **1.00** |"), "{md}");
        assert!(
            md.contains("| 2 | 48.8 | 88.0 | 0.90 | **1.95** | ≥ 1.9 ✓ |"),
            "{md}"
        );
        assert!(md.contains("step's tail, 1 MiB"), "{md}");
        assert!(md.contains("A step across devices, 1 MiB"), "{md}");
        assert!(md.contains("| 25.0 | 20.0 | **0.80** |"), "{md}");
        assert!(md.contains("| 44.0 | 33.0 | **0.75** |"), "{md}");
    }
}
