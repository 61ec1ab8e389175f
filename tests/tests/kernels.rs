//! Whole-crate checks of the example and fixture kernels that need no GPU: every kernel's launcher passes
//! exactly the parameters its PTX entry declares, every PTX entry has a launcher, and every
//! PTX module is accepted by ptxas for its own target (`sm_90`, or `sm_90a` where the builder
//! raised it; with `CI=true` a missing ptxas fails), and the builder embedded SASS for the
//! build's architecture next to the PTX.

use berth::ptx;
use std::collections::BTreeSet;

/// The architecture to assemble a PTX file for: `sm_90`, or its own `.target` where that is an
/// architecture-specific variant (`sm_90a`, which the builder writes for a crate whose inline
/// PTX uses the warpgroup instructions, and which ptxas assembles for that target only).
fn target_of(file: &std::path::Path) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let target = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(".target "))
        .map(|t| t.split(',').next().unwrap_or(t).trim().to_owned())
        .unwrap_or_else(|| panic!("{}: no .target line", file.display()));
    if target.ends_with('a') {
        target
    } else {
        "sm_90".to_owned()
    }
}

fn kernels() -> Vec<&'static berth::__private::Kernel> {
    // Referencing a descriptor keeps each kernel crate (and its registrations) linked.
    std::hint::black_box(&berth_examples::__BERTH_KERNEL_saxpy);
    std::hint::black_box(&berth_examples::compute::__BERTH_KERNEL_sgemm_reg8);
    std::hint::black_box(&berth_examples::tensor::__BERTH_KERNEL_hgemm_f16);
    std::hint::black_box(&berth_examples::tpch::__BERTH_KERNEL_q6_raw);
    std::hint::black_box(&berth_fixtures::__BERTH_KERNEL_mul_add);
    std::hint::black_box(&berth_fixtures::async_copy::__BERTH_KERNEL_stage_sums);
    berth::__private::registered_kernels().collect()
}

/// A descriptor names its crate with the crate's version: the module cache, the SASS lookup
/// and the launcher check go by it, so two versions of one kernel crate never share a module.
#[test]
fn descriptors_name_their_crate_and_its_version() {
    let crates = [
        "berth_examples",
        "berth_examples_compute",
        "berth_examples_tensor",
        "berth_examples_tpch",
    ];
    let want: Vec<String> = crates
        .iter()
        .map(|c| format!("{c}@{}", env!("CARGO_PKG_VERSION")))
        .collect();
    let ks = kernels();
    for k in ks
        .iter()
        .filter(|k| k.crate_name.starts_with("berth_examples"))
    {
        assert!(
            want.iter().any(|w| w == k.crate_name),
            "`{}`: {}",
            k.name,
            k.crate_name
        );
    }
    for w in &want {
        assert!(ks.iter().any(|k| k.crate_name == w), "no kernel of `{w}`");
    }
    assert!(
        berth::__private::crate_sass("berth_examples").is_none(),
        "a bare crate name must not find a versioned crate's SASS"
    );
}

#[test]
fn every_example_kernel_is_registered() {
    let names: BTreeSet<&str> = kernels().iter().map(|k| k.name).collect();
    for k in ["saxpy", "block_sum", "unchecked_copy"] {
        assert!(
            names.contains(k),
            "kernel `{k}` not registered (have {names:?})"
        );
    }
}

#[test]
fn launchers_match_ptx_entries() {
    for k in kernels() {
        ptx::check_kernel(k).unwrap_or_else(|e| panic!("{e}"));
        // Slices lower to (pointer, length) pairs of 8 bytes each.
        for w in k.params.windows(2) {
            if w[0].part == berth::__private::Part::Ptr {
                assert_eq!(w[1].part, berth::__private::Part::Len);
            }
        }
    }
}

#[test]
fn every_ptx_entry_has_a_launcher() {
    let ks = kernels();
    let crates: BTreeSet<&str> = ks.iter().map(|k| k.crate_name).collect();
    for c in crates {
        let ptx_text = ks.iter().find(|k| k.crate_name == c).unwrap().ptx();
        for e in ptx::entries(ptx_text) {
            // A kernel's specialised entries belong to its launcher too.
            assert!(
                ks.iter()
                    .any(|k| k.crate_name == c && k.entries().any(|(_, n)| n == e.name)),
                "PTX entry `{}` of crate `{c}` has no launcher",
                e.name
            );
        }
    }
}

/// Where ptxas is found, the builder assembled each kernel's own PTX module into a cubin for
/// the build's architecture and the crate's descriptors embed them: per kernel an ELF for
/// that SM holding the kernel's entries.
#[test]
fn example_kernels_carry_sass_for_their_arch() {
    if berth_build::find_ptxas().is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "ptxas not found and CI is set: install it with `pip install nvidia-cuda-nvcc==13.0.88`"
        );
        eprintln!("ptxas not found: skipping the SASS check (set CI=true to make this fail)");
        return;
    }
    if std::env::var("BERTH_SASS").is_ok_and(|v| v == "off") {
        return;
    }
    let arch = std::env::var("BERTH_ARCH").unwrap_or_else(|_| "sm_90".into());
    let ks = kernels();
    for k in ks.iter().filter(|k| k.crate_name != "berth_runtime") {
        let sass = berth::__private::crate_sass(k.crate_name).unwrap_or_else(|| {
            panic!(
                "crate `{}` has no SASS although ptxas is here",
                k.crate_name
            )
        });
        // Embedded once per crate, not once per kernel.
        let carriers = ks
            .iter()
            .filter(|o| {
                o.crate_name == k.crate_name && o.crate_files.is_some_and(|f| f.sass.is_some())
            })
            .count();
        assert_eq!(carriers, 1, "crate `{}`", k.crate_name);
        // Each kernel has its own cubin, holding its entries: for the `a` variant of the
        // architecture (`sm_90a`) where its own code uses the warpgroup instructions.
        let own = sass
            .kernel(k.name)
            .unwrap_or_else(|| panic!("kernel `{}` has no cubin of its own", k.name));
        let piece = berth::ptx::kernel_module(k.ptx(), &[k.name]).unwrap();
        let specific = ["wgmma.", "setmaxnreg."].iter().any(|i| piece.contains(i));
        assert_eq!(
            own.arch,
            if specific {
                format!("{arch}a")
            } else {
                arch.clone()
            },
            "kernel `{}`",
            k.name
        );
        let sm: u32 = arch
            .trim_start_matches("sm_")
            .trim_end_matches('a')
            .parse()
            .unwrap();
        assert_eq!(
            berth_build::sass::cubin_sm(own.cubin),
            Some(sm),
            "kernel `{}`",
            k.name
        );
        let has = |name: &str| own.cubin.windows(name.len()).any(|w| w == name.as_bytes());
        for (_, entry) in k.entries() {
            assert!(
                has(entry),
                "the cubin of `{}` has no symbol `{entry}`",
                k.name
            );
        }
    }
    // One cubin per kernel, no more: every cubin is a kernel's.
    for krate in ks
        .iter()
        .map(|k| k.crate_name)
        .filter(|c| *c != "berth_runtime")
    {
        let sass = berth::__private::crate_sass(krate).unwrap();
        for (name, _) in sass.kernels() {
            assert!(
                ks.iter().any(|k| k.crate_name == krate && k.name == name),
                "crate `{krate}` has a cubin for `{name}`, which is no kernel of it"
            );
        }
    }
}

/// The number after `directive` in a PTX entry's header (`.minnctapersm 8` → 8).
fn ptx_directive(entry: &str, directive: &str) -> Option<u32> {
    let rest = entry.split(directive).nth(1)?;
    rest.trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// The threads of a block of an entry's `.reqntid x, y, z`.
fn entry_threads(entry: &str) -> Option<u32> {
    let dims = entry.split(".reqntid").nth(1)?.lines().next()?;
    Some(
        dims.split(|c: char| !c.is_ascii_digit())
            .filter_map(|d| d.parse::<u32>().ok())
            .product(),
    )
}

#[test]
fn ptx_is_for_sm_90_and_passes_ptxas() {
    let Some(ptxas) = berth_build::find_ptxas() else {
        assert!(
            std::env::var("CI").is_err(),
            "ptxas not found and CI is set: install it with `pip install nvidia-cuda-nvcc==13.0.88`"
        );
        eprintln!("ptxas not found: skipping the ptxas check (set CI=true to make this fail)");
        return;
    };
    let ks = kernels();
    let crates: BTreeSet<&str> = ks.iter().map(|k| k.crate_name).collect();
    let tmp = tempfile::Builder::new()
        .prefix("berth-ptxas-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let (mut capped, mut heavy) = (0, false);
    for c in crates {
        let text = ks.iter().find(|k| k.crate_name == c).unwrap().ptx();
        assert!(
            text.contains(".target sm_90"),
            "crate `{c}` PTX is not for sm_90"
        );
        let file = dir.join(format!("{c}.ptx"));
        std::fs::write(&file, text).unwrap();
        let usage = berth_build::ptxas_usage(&ptxas, &file, &target_of(&file))
            .unwrap_or_else(|e| panic!("{e}"));
        for k in ks.iter().filter(|k| k.crate_name == c) {
            let u = usage
                .iter()
                .find(|u| u.name == k.name)
                .unwrap_or_else(|| panic!("ptxas reported nothing for `{}`", k.name));
            // A kernel that asked for a register cap (`min_blocks_per_sm`: `.minnctapersm`)
            // may spill a few bytes to meet it; no other kernel spills.
            let entry = text
                .split(&format!(".entry {}(", k.name))
                .nth(1)
                .and_then(|rest| rest.split('{').next())
                .unwrap_or_else(|| panic!("no entry `{}` in the PTX", k.name));
            let allowed = match ptx_directive(entry, ".minnctapersm") {
                Some(blocks) => {
                    // ...and keeps to the limit the cap sets.
                    let threads = entry_threads(entry)
                        .unwrap_or_else(|| panic!("`{}` has a cap but no block shape", k.name));
                    assert!(
                        u.registers <= 65536 / (threads * blocks),
                        "`{}`: {} registers for {blocks} blocks of {threads} threads",
                        k.name,
                        u.registers
                    );
                    capped += 1;
                    16
                }
                None => 0,
            };
            assert!(
                u.spill_stores <= allowed,
                "`{}` spills {} bytes of registers (at most {allowed})",
                k.name,
                u.spill_stores
            );
            eprintln!(
                "{c}::{}: {} registers, {} B smem",
                k.name, u.registers, u.shared
            );
            // The GPU test of a launch refused for its registers (`soundness.rs`) runs
            // `register_heavy` in blocks of 512 threads, which its registers must not fit.
            if k.name == "register_heavy" {
                assert!(
                    u.registers * 512 > 65536,
                    "`register_heavy`: {} registers fit a block of 512 threads",
                    u.registers
                );
                heavy = true;
            }
        }
        if c.starts_with("berth_examples@") {
            let block_sum = usage.iter().find(|u| u.name == "block_sum").unwrap();
            assert_eq!(
                block_sum.shared, 1024,
                "block_sum's shared tile must be real .shared memory"
            );
        }
    }
    // `nbody_capped` (examples) declares `min_blocks_per_sm = 8`.
    assert!(capped >= 1, "no kernel with a register cap was checked");
    assert!(heavy, "`register_heavy` was not checked");
}

/// Where no SASS runs, the driver backend loads each kernel's own PTX module, cut out of its
/// crate's (`berth::ptx::Split`): every such piece of the examples and the fixtures must
/// assemble alone, hold exactly its kernel's entries, and be smaller than the crate's module.
#[test]
fn every_kernels_own_module_passes_ptxas() {
    let Some(ptxas) = berth_build::find_ptxas() else {
        assert!(
            std::env::var("CI").is_err(),
            "ptxas not found and CI is set: install it with `pip install nvidia-cuda-nvcc==13.0.88`"
        );
        eprintln!(
            "ptxas not found: skipping the kernel modules' check (set CI=true to make this fail)"
        );
        return;
    };
    let ks = kernels();
    let dir = std::env::temp_dir().join(format!("berth-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut pieces = Vec::new();
    for c in ks.iter().map(|k| k.crate_name).collect::<BTreeSet<_>>() {
        let text = ks.iter().find(|k| k.crate_name == c).unwrap().ptx();
        let split = ptx::Split::parse(text).unwrap_or_else(|e| panic!("crate `{c}`: {e}"));
        for k in ks.iter().filter(|k| k.crate_name == c) {
            let mut want: Vec<&str> = k.entries().map(|(_, n)| n).collect();
            let piece = split
                .module(&want)
                .unwrap_or_else(|e| panic!("`{}`: {e}", k.name));
            let mut got: Vec<String> = ptx::entries(&piece).into_iter().map(|e| e.name).collect();
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "the entries of `{}`'s module", k.name);
            assert!(
                piece.len() < text.len(),
                "`{}`'s module is the crate's",
                k.name
            );
            let file = dir.join(format!("{}.ptx", k.name));
            std::fs::write(&file, &piece).unwrap();
            pieces.push((k.name, file, piece.len(), text.len()));
        }
    }
    assert!(pieces.len() > 100, "{} kernels", pieces.len());
    // Two ptxas at a time: the pieces of both crates take a while one by one.
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, file, _, _)) = pieces.get(i) else {
                        break;
                    };
                    let usage = berth_build::ptxas_usage(&ptxas, file, &target_of(file))
                        .unwrap_or_else(|e| panic!("`{name}`'s own module: {e}"));
                    assert!(
                        usage.iter().any(|u| u.name == *name),
                        "ptxas reported nothing for `{name}`"
                    );
                }
            });
        }
    });
    // The kernel a first launch usually is: a small part of its crate's JIT.
    let (_, _, saxpy, whole) = pieces.iter().find(|p| p.0 == "saxpy").unwrap();
    assert!(
        saxpy * 20 < *whole,
        "saxpy's module: {saxpy} of {whole} bytes"
    );
    let largest = pieces.iter().map(|p| p.2).max().unwrap_or(0);
    // What a first launch without SASS spends cutting the module (the runtime keeps the parse).
    let t = std::time::Instant::now();
    let examples = berth_examples::__BERTH_KERNEL_saxpy.ptx();
    let cut = ptx::kernel_module(examples, &["saxpy"]).unwrap();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(cut.len() < examples.len());
    eprintln!(
        "{} kernel modules; saxpy's {saxpy} bytes of its crate's {whole}, cut in {ms:.1} ms; the largest {largest}",
        pieces.len()
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The PTX of one example kernel's entry, from `.entry NAME(` to the end of its body (the
/// brace that closes the body's first: inline asm opens and closes scopes of its own).
fn entry_body(name: &str) -> &'static str {
    let k = kernels().into_iter().find(|k| k.name == name).unwrap();
    let rest = k
        .ptx()
        .split(&format!(".entry {name}("))
        .nth(1)
        .unwrap_or_else(|| panic!("no entry `{name}` in the PTX"));
    let mut depth = 0;
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 1 => return &rest[..i],
            '}' => depth -= 1,
            _ => {}
        }
    }
    rest
}

/// A 16-byte aligned value moves between global and shared memory in one 16-byte access each
/// way, as nvcc's `float4` does: n-body's tile copy (`tile.write(t, bodies[j])`, a struct of
/// four `f32`) is one `ld.global.v4` and one `st.shared.v4`, not two 8-byte halves.
#[test]
fn a_float4_struct_moves_to_shared_memory_in_one_access() {
    for name in ["nbody", "nbody_fast"] {
        let body = entry_body(name);
        assert!(
            body.contains("st.shared.v4.b32"),
            "`{name}` stores its tile in 16-byte accesses:\n{body}"
        );
        for narrow in ["st.shared.b64", "st.shared.v2", "ld.global.b64"] {
            assert!(
                !body.contains(narrow),
                "`{name}` moves a body in halves (`{narrow}`):\n{body}"
            );
        }
    }
}

/// A row of 16-byte units gathered by id moves in one 16-byte access each way: the embedding
/// gathers (device, mapped, `#[auto]`, and through a hot tier's `&Rows`) and bags copy their
/// `F4` field by field, which LLVM merges into `ld.global.v4` and `st.global.v4`, where a copy
/// of the whole struct is lowered to two 8-byte halves.
#[test]
fn gathered_rows_move_in_16_byte_accesses() {
    for name in [
        "embedding_gather",
        "embedding_gather_device",
        "embedding_gather_auto",
        "embedding_gather_rows",
        "embedding_bag_rows",
        "embedding_bag_plain",
        "embedding_bag_sum",
    ] {
        let body = entry_body(name);
        for wide in ["ld.global.v4.b32", "st.global.v4.b32"] {
            assert!(body.contains(wide), "`{name}` has no `{wide}`:\n{body}");
        }
        for narrow in ["ld.global.b64", "st.global.b64"] {
            assert!(
                !body.contains(narrow),
                "`{name}` moves a unit in halves (`{narrow}`):\n{body}"
            );
        }
    }
    // The bags pool four rows at a time: four 16-byte loads issued before the first add.
    for name in ["embedding_bag_rows", "embedding_bag_sum"] {
        let body = entry_body(name);
        let loads = body.matches("ld.global.v4.b32").count();
        assert!(loads >= 5, "`{name}` has {loads} 16-byte loads:\n{body}");
    }
    // The plain loop of `docs/hot-tier.md` stays rolled: one 16-byte load, one in flight.
    let body = entry_body("embedding_bag_plain");
    let loads = body.matches("ld.global.v4.b32").count();
    assert_eq!(
        loads, 1,
        "`embedding_bag_plain` has {loads} 16-byte loads:\n{body}"
    );
}

/// A mailbox item is read in ascending address order, as nvcc reads a `volatile` struct: the
/// worker's three job loads after its acquire are at offsets 4, 8, 12 of the slot. (Issued
/// last field first, ptxas let the stop check wait for every load before the release's fence,
/// which cost the H200 about 0.5 µs a message; `docs/design-notes.md`.)
#[test]
fn a_mailbox_item_is_read_in_field_order() {
    let body = entry_body("square_worker");
    let offsets: Vec<u32> = body
        .lines()
        .filter(|l| l.contains("ld.volatile.global"))
        .map(|l| {
            let at = l.split('[').nth(1).expect("an address");
            at.split('+').nth(1).map_or(0, |o| {
                o.trim_end_matches(|c: char| !c.is_ascii_digit())
                    .parse()
                    .unwrap()
            })
        })
        .collect();
    assert_eq!(offsets, [4, 8, 12], "the job's loads:\n{body}");
}

/// The warpgroup kernels wait for their products where their source does, in code every lane
/// reaches: `wgmma.wait_group` is `.aligned`, and one copied into the arms of an
/// `if lane == 0 { arrive }` (which jump threading does to inline PTX, not to LLVM's
/// convergent intrinsics) is reached by part of a warp and hangs the warpgroup. The attention
/// kernel waits at four places (the first tile's scores, the loop's scores and values, the
/// last values), the GEMM at two (the loop, after it).
#[test]
fn warpgroup_waits_are_not_copied_into_lane_divergent_branches() {
    for (name, sites) in [
        ("flash_attention_wgmma_kernel_bf16_64", 4),
        ("flash_attention_wgmma_kernel_bf16_128", 4),
        ("flash_attention_wgmma_kernel_f16_64", 4),
        ("flash_attention_wgmma_kernel_f16_128", 4),
        ("wgmma_gemm_kernel_bf16", 2),
        ("wgmma_gemm_kernel_f16", 2),
    ] {
        let body = entry_body(name);
        let waits = body
            .lines()
            .filter(|l| l.contains("wgmma.wait_group.sync.aligned"))
            .count();
        assert_eq!(waits, sites, "`{name}`'s waits:\n{body}");
        for ins in [
            "wgmma.fence.sync.aligned",
            "wgmma.commit_group.sync.aligned",
        ] {
            assert!(body.contains(ins), "`{name}` has no `{ins}`");
        }
    }
}

/// The runtime's own kernels (pipelined launches' progress flags; the random-read probe of
/// `#[auto]`'s close calls; the hot tier's gather, capture, fill and slot table update): hand-written PTX whose entries match their descriptors and which
/// ptxas accepts for sm_90.
#[test]
fn the_runtime_kernels_are_valid_ptx() {
    let k = &berth::__private::CHUNK_DONE;
    let probe = &berth::__private::RANDOM_PROBE;
    let (gather, fill) = (&berth::__private::HOT_GATHER, &berth::__private::HOT_FILL);
    let (slots, fill_u32) = (&berth::__private::HOT_SLOTS, &berth::__private::FILL_U32);
    let capture = &berth::__private::HOT_CAPTURE;
    let all = [k, probe, gather, fill, slots, fill_u32, capture];
    for other in all {
        assert_eq!(
            k.ptx(),
            other.ptx(),
            "one module for the runtime's crate name"
        );
    }
    for k in all {
        ptx::check_kernel(k).unwrap_or_else(|e| panic!("{e}"));
    }
    let Some(ptxas) = berth_build::find_ptxas() else {
        assert!(
            std::env::var("CI").is_err(),
            "ptxas not found and CI is set"
        );
        eprintln!("ptxas not found: skipping");
        return;
    };
    let tmp = tempfile::Builder::new()
        .prefix("berth-runtime-ptx-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let file = dir.join("runtime.ptx");
    std::fs::write(&file, k.ptx()).unwrap();
    let usage = berth_build::ptxas_usage(&ptxas, &file, &target_of(&file))
        .unwrap_or_else(|e| panic!("{e}"));
    for k in all {
        assert!(usage.iter().any(|u| u.name == k.name), "{usage:?}");
    }
    // The kernel stores with system-scope release semantics, nothing else.
    assert!(k.ptx().contains("st.release.sys.global.u32"));
}

/// The default build links libdevice into every module that calls device math (no
/// unresolved `__nv_` function is left for the driver), and a build without libdevice — the
/// portable `libm` math, `BERTH_LIBDEVICE=off` — compiles the same kernels and passes ptxas.
/// A build check: it needs cargo, so it stays out of the GPU bundle (which has none there).
#[cfg(not(feature = "gpu"))]
#[test]
fn device_math_builds_with_and_without_libdevice() {
    let ks = kernels();
    for k in &ks {
        assert!(
            !k.ptx().contains(".extern .func"),
            "the PTX of `{}` calls functions it does not define",
            k.crate_name
        );
    }
    let Some(ptxas) = berth_build::find_ptxas() else {
        assert!(
            std::env::var("CI").is_err(),
            "ptxas not found and CI is set"
        );
        eprintln!("ptxas not found: skipping");
        return;
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let built = berth_build::Builder::new(
        root.join("fixtures"),
        root.join("target").join("berth-nvptx-portable"),
    )
    .libdevice(None)
    .sass(false)
    .quiet(true)
    .build()
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(built.libdevice.is_none());
    // The kernels the no-libdevice warning names: those whose code calls the portable math.
    for k in ["math_f32", "math_f64"] {
        assert!(
            built.math_kernels.iter().any(|m| m == k),
            "`{k}` not among the kernels calling device math: {:?}",
            built.math_kernels
        );
    }
    for k in ["mul_add", "fill", "rotate_plain"] {
        assert!(
            !built.math_kernels.iter().any(|m| m == k),
            "`{k}` calls no device math: {:?}",
            built.math_kernels
        );
    }
    let all = ptx::entries(&std::fs::read_to_string(&built.ptx).unwrap()).len();
    eprintln!(
        "kernels calling device math: {:?} ({all} entries)",
        built.math_kernels
    );
    assert!(
        built.math_kernels.len() * 4 < all,
        "{} of {all} entries call device math: {:?}",
        built.math_kernels.len(),
        built.math_kernels
    );
    let text = std::fs::read_to_string(&built.ptx).unwrap();
    assert!(
        !text.contains("__nv_"),
        "libdevice called in the portable build"
    );
    let usage = berth_build::ptxas_usage(&ptxas, &built.ptx, &target_of(&built.ptx))
        .unwrap_or_else(|e| panic!("{e}"));
    for k in ["math_f32", "math_f64", "fast_math_f32"] {
        let u = usage
            .iter()
            .find(|u| u.name == k)
            .unwrap_or_else(|| panic!("no `{k}`"));
        eprintln!(
            "portable {k}: {} registers, {} B stack",
            u.registers, u.stack
        );
    }
}

/// The builder's rewrites, seen in real PTX of small kernels (berth-fixtures), without a GPU:
/// `a * b + c` on floats is one `fma.rn`; a shared array is reached with `ld.shared` /
/// `st.shared`; a declared block shape (`.reqntid`), or a check of the block's shape in the
/// kernel, bounds the thread index, so the checks of the shared tile's indices are gone — and
/// with neither they are there; the checks of a straight stretch of reads are tested together,
/// before the reads.
#[test]
fn the_builders_rewrites_show_in_the_ptx() {
    let fma = entry_body("mul_add");
    assert!(fma.contains("fma.rn.f32"), "mul_add:\n{fma}");
    assert!(!fma.contains("mul.rn.f32"), "mul_add:\n{fma}");

    let declared = entry_body("rotate_declared");
    assert_eq!(
        entry_threads(declared),
        Some(32),
        "rotate_declared has no .reqntid of 32 threads"
    );
    for access in ["st.shared", "ld.shared"] {
        assert!(declared.contains(access), "rotate_declared:\n{declared}");
    }
    assert!(
        !declared.contains("index_failure"),
        "a bounds check of the tile is left in rotate_declared:\n{declared}"
    );
    // A kernel that checks its block shape itself: past the check the thread index is
    // bounded as by a declaration (a thread index is below its block's size).
    let plain = entry_body("rotate_plain");
    assert!(
        !plain.contains("index_failure"),
        "a bounds check of the tile is left in rotate_plain:\n{plain}"
    );
    let unguarded = entry_body("rotate_unguarded");
    assert!(
        unguarded.contains("index_failure"),
        "rotate_unguarded lost the check nothing bounds:\n{unguarded}"
    );
    // Four checked reads in a straight stretch: their checks are tested together first, so
    // the four loads follow one another with no comparison or branch between them (each
    // issued before the previous one's data arrives), and every check still reports.
    let four = entry_body("four_reads");
    let lines: Vec<&str> = four.lines().map(str::trim).collect();
    let loads: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("ld.global"))
        .collect();
    assert_eq!(loads.len(), 4, "four_reads:\n{four}");
    let between = &lines[loads[0]..loads[3]];
    assert!(
        !between
            .iter()
            .any(|l| l.starts_with("setp") || l.contains("bra") || l.ends_with(':')),
        "a check or a branch between four_reads' loads: {between:?}"
    );
    assert_eq!(
        four.matches("index_failure").count(),
        4,
        "four_reads:\n{four}"
    );
}

/// The plain ports (`examples/compute/src/plain.rs`: `for` loops over local arrays, checked reads, no
/// declared block, no `unroll!`) compile as nvcc compiles the CUDA they port: their small
/// constant-trip loops unroll and the local arrays live in registers — no local-memory frame,
/// no spills (ptxas) — and the multiply loop between a tile step's two barriers computes no
/// bounds check per step (the checks of the shared reads depend only on the thread, and are
/// compared once, before the loop).
#[test]
fn plain_ports_keep_their_arrays_in_registers_and_checks_out_of_the_multiply_loop() {
    let ks = kernels();
    let plain: Vec<_> = ks.iter().filter(|k| k.name.starts_with("plain_")).collect();
    assert!(plain.len() >= 6, "the plain ports are not all registered");
    // Between the barriers: the tile's whole multiply, unrolled as nvcc unrolls it (tile
    // width × patch² multiply-adds), and not one comparison.
    for (name, fmas_per_tile) in [
        ("plain_sgemm_tiled", 16),
        ("plain_sgemm_reg4", 16 * 4 * 4),
        ("plain_sgemm_reg8", 8 * 8 * 8),
    ] {
        let body = entry_body(name);
        let multiply = body
            .split("bar.sync")
            .nth(1)
            .unwrap_or_else(|| panic!("`{name}` has no barrier:\n{body}"));
        let compares: Vec<&str> = multiply.lines().filter(|l| l.contains("setp.")).collect();
        assert!(
            compares.is_empty(),
            "`{name}` compares in its multiply loop: {compares:?}\n{multiply}"
        );
        let fmas = multiply.matches("fma.rn.f32").count();
        assert_eq!(
            fmas, fmas_per_tile,
            "`{name}`: multiply-adds between the barriers\n{multiply}"
        );
    }
    let Some(ptxas) = berth_build::find_ptxas() else {
        assert!(
            std::env::var("CI").is_err(),
            "ptxas not found and CI is set"
        );
        eprintln!("ptxas not found: skipping the register check");
        return;
    };
    let dir = std::env::temp_dir().join(format!("berth-plain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("examples.ptx");
    std::fs::write(&file, plain[0].ptx()).unwrap();
    let usage = berth_build::ptxas_usage(&ptxas, &file, &target_of(&file))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(&dir).unwrap();
    for k in &plain {
        let u = usage
            .iter()
            .find(|u| u.name == k.name)
            .unwrap_or_else(|| panic!("ptxas reported nothing for `{}`", k.name));
        eprintln!(
            "{}: {} registers, {} B stack, {} B spilled",
            k.name, u.registers, u.stack, u.spill_stores
        );
        assert_eq!(
            (u.stack, u.spill_stores, u.spill_loads),
            (0, 0, 0),
            "`{}` keeps a local-memory frame or spills",
            k.name
        );
    }
}

/// The build's performance lints on real kernels: `nbody_capped` (a register cap that makes
/// ptxas spill) gets the local-frame lint and the plain ports none; the idiomatic tiled
/// SGEMM's per-step checks of its global reads get the loop lint (a declared block shape keeps
/// its checks where they are written), and the idiomatic `sgemm_reg8`, whose tile walk is
/// checked once, none; nor do the plain SGEMMs, whose per-step checks the builder takes out
/// of the tile loop.
#[test]
fn the_performance_lints_name_the_kernels_that_pay() {
    use berth_build::lints::{LintKind, lints};
    let k = kernels()
        .into_iter()
        .find(|k| k.name == "sgemm_reg8")
        .unwrap();
    let of = |found: &[berth_build::Lint], name: &str| -> Vec<LintKind> {
        found
            .iter()
            .filter(|l| l.kernel == name)
            .map(|l| l.kind.clone())
            .collect()
    };
    let from_ptx = lints(k.ptx(), &[]);
    assert!(
        matches!(
            of(&from_ptx, "sgemm_tiled")[..],
            [LintKind::CheckInLoop { .. }]
        ),
        "{from_ptx:?}"
    );
    for name in [
        "sgemm_reg8",
        "plain_sgemm_tiled",
        "plain_sgemm_reg4",
        "plain_sgemm_reg8",
    ] {
        assert_eq!(of(&from_ptx, name), [], "{name}: {from_ptx:?}");
    }
    let Some(ptxas) = berth_build::find_ptxas() else {
        assert!(
            std::env::var("CI").is_err(),
            "ptxas not found and CI is set"
        );
        eprintln!("ptxas not found: skipping the local-frame lint");
        return;
    };
    let dir = std::env::temp_dir().join(format!("berth-lints-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("examples.ptx");
    std::fs::write(&file, k.ptx()).unwrap();
    let usage = berth_build::ptxas_usage(&ptxas, &file, &target_of(&file))
        .unwrap_or_else(|e| panic!("{e}"));
    let found = lints(k.ptx(), &usage);
    // `nbody_capped` fits its cap of 32 registers without a frame.
    assert_eq!(of(&found, "nbody_capped"), [], "{found:?}");
    // Device math's argument reduction keeps a local array: a frame without spills.
    let f = kernels()
        .into_iter()
        .find(|k| k.name == "math_f32")
        .unwrap();
    let file = dir.join("fixtures.ptx");
    std::fs::write(&file, f.ptx()).unwrap();
    let usage = berth_build::ptxas_usage(&ptxas, &file, &target_of(&file))
        .unwrap_or_else(|e| panic!("{e}"));
    let found_f = lints(f.ptx(), &usage);
    assert!(
        matches!(of(&found_f, "math_f32")[..], [LintKind::LocalFrame { stack, .. }] if stack > 0),
        "{found_f:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    for l in found.iter().filter(|l| l.kernel.starts_with("plain_")) {
        assert!(!l.warns_on_build(), "{l}");
    }
}

/// `thread::index_2d()` checks that the launch's grid and block have z extent 1. In a kernel
/// that declares a 2D block the launcher guarantees both (the block by `.reqntid`, the grid
/// by refusing z > 1), and the check is gone from the PTX: no read of `%nctaid.z` or
/// `%ntid.z`, one kernel-panic call fewer. Without the declaration, it is there.
#[test]
fn a_declared_2d_block_folds_the_z_check_of_index_2d_away() {
    let calls = |body: &str| body.matches("message_failure").count();
    let declared = entry_body("add_coordinates_16x16");
    let plain = entry_body("add_coordinates");
    for reg in ["%nctaid.z", "%ntid.z"] {
        assert!(
            !declared.contains(reg),
            "add_coordinates_16x16 still reads {reg}:\n{declared}"
        );
        assert!(
            plain.contains(reg),
            "add_coordinates does not read {reg}:\n{plain}"
        );
    }
    assert_eq!(
        calls(plain),
        calls(declared) + 1,
        "the z check's panic call:\n{plain}\n----\n{declared}"
    );
}

/// The tensor-core GEMM and the staging fixture copy global to shared memory with `cp.async`
/// (global to shared without registers) and wait for their groups; ptxas accepts them
/// (`ptx_is_for_sm_90_and_passes_ptxas` covers every kernel).
#[test]
fn the_pipelined_kernels_copy_with_cp_async_and_wait_for_their_groups() {
    for (name, wait) in [
        ("hgemm_f16", "cp.async.wait_group 1;"),
        ("hgemm_bf16", "cp.async.wait_group 1;"),
        ("stage_sums", "cp.async.wait_group 1;"),
    ] {
        let body = entry_body(name);
        for ins in ["cp.async.cg.shared.global", "cp.async.commit_group;", wait] {
            assert!(body.contains(ins), "`{name}` has no `{ins}`");
        }
        // The GEMM reads its slices only through the copies: no plain global loads of `a`/`b`.
        if name.starts_with("hgemm") {
            assert!(
                !body.contains("ld.global.u16") && !body.contains("ld.global.b16"),
                "`{name}` still loads its slices element by element"
            );
        }
    }
    assert!(entry_body("async_never_waited").contains("cp.async.ca.shared.global"));
}
