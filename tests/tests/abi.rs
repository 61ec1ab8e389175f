//! berth's kernel ABI (`berth_abi`) end to end, without a GPU, on a kernel with an argument of
//! every kind (`berth_fixtures::args::every_kind`): what `#[gpu_kernel]` emitted — the descriptor's
//! parameters, the entry's section and its alignment list — is what the builder read (the PTX
//! entry's parameters, their alignments, its directives, its arithmetic) and what the runtime
//! packs (a launch on the simulator, whose entry reads every argument back from its
//! parameters by the ABI's positions).

use berth::__private::{Kernel, Part, Placement};
use berth::{Gpu, Grid, HotTier, Touch, ptx};
use berth_abi::{Lowering, param_align};

fn every_kind() -> &'static Kernel {
    &berth_fixtures::args::__BERTH_KERNEL_every_kind
}

/// The kernel's arguments as its signature has them: name, how the ABI lowers it, where a
/// slice's data lives, and the alignment of what its pointer points to.
fn signature() -> [(&'static str, Lowering, Option<Placement>, u8); 7] {
    [
        ("scale", Lowering::Value, None, 0),
        (
            "x",
            Lowering::PtrLen,
            Some(Placement::Device),
            param_align::<u32>(),
        ),
        (
            "m",
            Lowering::PtrLen,
            Some(Placement::Mapped),
            param_align::<u16>(),
        ),
        (
            "w",
            Lowering::PtrLenRange,
            Some(Placement::Auto),
            param_align::<u64>(),
        ),
        (
            "cells",
            Lowering::PtrLen,
            Some(Placement::Mapped),
            param_align::<u32>(),
        ),
        (
            "t",
            Lowering::PtrLenTier,
            Some(Placement::Auto),
            param_align::<u32>(),
        ),
        (
            "out",
            Lowering::PtrLen,
            Some(Placement::Device),
            param_align::<u64>(),
        ),
    ]
}

/// The descriptor the macro wrote lists, for each argument in order, the parts its lowering
/// passes, each of the ABI's size; the pointers say where their data lives.
#[test]
fn the_macro_lowers_every_argument_as_the_abi_says() {
    let k = every_kind();
    let mut params = k.params.iter();
    for (name, lowering, placement, _) in signature() {
        for &part in lowering.parts() {
            let p = params
                .next()
                .unwrap_or_else(|| panic!("no parameter for {part:?} of `{name}`"));
            assert_eq!((p.name, p.part), (name, part));
            assert_eq!(p.size, part.size().unwrap_or(size_of::<f32>()), "{p:?}");
            assert_eq!(
                p.pointee.map(|q| q.placement),
                placement.filter(|_| part == Part::Ptr)
            );
        }
    }
    assert_eq!(
        params.next(),
        None,
        "more parameters than the arguments lower to"
    );
    assert_eq!(k.block, Some([32, 1, 1]));
    let linear = berth_abi::linear_entry(k.name).to_string();
    assert_eq!(k.linear, Some(linear.as_str()));
}

/// The header of the PTX entry `name`: from `.entry name(` to its body's `{`.
fn header<'a>(ptx: &'a str, name: &str) -> &'a str {
    let rest = ptx
        .split(&format!(".entry {name}("))
        .nth(1)
        .unwrap_or_else(|| panic!("no entry `{name}`"));
    rest.split('{').next().unwrap()
}

/// The body of the PTX entry `name`.
fn body<'a>(ptx: &'a str, name: &str) -> &'a str {
    let rest = ptx.split(&format!(".entry {name}(")).nth(1).unwrap();
    rest.split("\n}\n").next().unwrap()
}

/// The builder read the macro's sections: both entries (the general one and the linear one)
/// have the descriptor's parameters, every pointer (a slice's, a hot tier's slot table and
/// rows) declared with its target's alignment from
/// the entry's alignment list, the declared block shape and register cap as PTX directives,
/// and arithmetic left unfused; no section of berth's is left in the module.
#[test]
fn the_builder_reads_what_the_macro_wrote() {
    let k = every_kind();
    ptx::check_kernel(k).unwrap_or_else(|e| panic!("{e}"));
    let aligns: Vec<Option<u8>> = signature()
        .iter()
        .flat_map(|(_, lowering, _, align)| {
            lowering.parts().iter().map(move |part| match part {
                Part::Ptr => Some(*align),
                // A table's hot tier: its slot table of `u32` and its rows (`u32` here).
                Part::Slots | Part::Tier => Some(param_align::<u32>()),
                _ => None,
            })
        })
        .collect();
    for name in [k.name, k.linear.unwrap()] {
        let header = header(k.ptx(), name);
        let params: Vec<&str> = header
            .lines()
            .filter(|l| l.trim_start().starts_with(".param"))
            .collect();
        assert_eq!(params.len(), aligns.len(), "{header}");
        for (p, align) in params.iter().zip(&aligns) {
            match align {
                Some(a) => assert!(
                    p.contains(&format!(".ptr .align {a} ")),
                    "`{name}`: a pointer to {a}-byte elements is declared `{p}`"
                ),
                None => assert!(!p.contains(".ptr"), "`{name}`: `{p}` is no pointer"),
            }
        }
        assert!(header.contains(".reqntid 32, 1, 1"), "{header}");
        assert!(header.contains(".minnctapersm 4"), "{header}");
        let body = body(k.ptx(), name);
        assert!(
            body.contains("mul.rn.f32") && !body.contains("fma.rn.f32"),
            "`{name}` asked for exact arithmetic:\n{body}"
        );
    }
    // The same `a * b + c` in a kernel that did not ask fuses (so the check above can fail).
    let fused = body(berth_fixtures::__BERTH_KERNEL_mul_add.ptx(), "mul_add");
    assert!(fused.contains("fma.rn.f32"), "{fused}");
    assert!(
        !k.ptx().contains("berth:"),
        "a section of berth's is left in the PTX"
    );
}

/// A launch on the simulator: the runtime packs each argument part by part, checked against
/// the descriptor, and the simulator's entry rebuilds every argument from them; the kernel
/// reports what it received.
#[test]
fn the_runtime_packs_what_the_kernel_reads() {
    let gpu = Gpu::simulator();
    let x = gpu.upload(&[7u32, 8, 9]).unwrap();
    let m = gpu.mapped_from(&[1u16; 5]).unwrap();
    let w = gpu.mapped_from(&[0u64; 7]).unwrap();
    let cells = gpu.signals(6).unwrap();
    // 8 rows of 4; the budget holds the slot table and 2 rows.
    let table: Vec<u32> = (0..32).map(|v| v * 10).collect();
    let mut t = gpu
        .hot_tier(gpu.mapped_from(&table).unwrap(), 4, 8 * 4 + 2 * 16)
        .unwrap();
    let scale = 1.5f32;
    // What the kernel received, through the tier `t` as it is.
    let launch = |t: &HotTier<u32>| {
        let mut out = gpu.alloc_zeroed::<u64>(12).unwrap();
        berth_fixtures::args::every_kind(
            &gpu,
            Grid::new(1, 32),
            Touch::Range { start: 2, end: 5 },
            scale,
            &x,
            &m,
            &w,
            &cells,
            t,
            &mut out,
        )
        .unwrap()
        .wait()
        .unwrap();
        out.to_vec().unwrap()
    };
    let mut expected = vec![
        u64::from(scale.to_bits()),
        3,
        5,
        7,
        2,
        5,
        6,
        u64::from((scale * 5.0 + scale).to_bits()),
        8,
        4,
        40,
        0,
    ];
    assert_eq!(launch(&t), expected);
    // Row 1 read, counted, admitted: the same launch now reads it from the tier's slot.
    t.note_reads(&gpu, &[1]).unwrap();
    t.refresh(&gpu).unwrap();
    assert!(t.is_resident(1));
    expected[11] = 1;
    assert_eq!(launch(&t), expected);
}
