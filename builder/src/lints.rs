//! Performance lints of a kernel build: what in a kernel's machine code costs time that the
//! kernel's source could avoid, each with the idiom that avoids it. Read from the PTX (a bounds
//! check left inside an innermost loop) and from ptxas's report (a local-memory frame, spilled
//! registers). The build script prints a frame or spills as one cargo `warning:` per kernel
//! ([`Lint::warns_on_build`]); `cargo xtask ptx` lists every lint.

use crate::EntryUsage;
use std::collections::BTreeSet;
use std::fmt;

/// One finding about one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    /// The kernel (PTX entry).
    pub kernel: String,
    /// What was found.
    pub kind: LintKind,
}

/// What a [`Lint`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LintKind {
    /// A local-memory frame (`stack` bytes), or registers spilled to it.
    LocalFrame {
        /// Bytes of the frame.
        stack: u32,
        /// Bytes of registers stored to it.
        spill_stores: u32,
    },
    /// Conditional branches to a failed bounds check inside an innermost loop.
    CheckInLoop {
        /// How many checks the loop's body branches on.
        checks: usize,
    },
}

impl Lint {
    /// Whether a kernel crate's build script prints it as a cargo `warning:` (a local frame
    /// or spills). A check in an innermost loop may be one the data needs — an index read
    /// from memory, a gather — which the PTX does not tell apart from one the source could
    /// avoid, so those are listed by `cargo xtask ptx` only.
    pub fn warns_on_build(&self) -> bool {
        matches!(self.kind, LintKind::LocalFrame { .. })
    }
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = &self.kernel;
        match self.kind {
            LintKind::LocalFrame {
                stack,
                spill_stores,
            } => {
                write!(f, "kernel `{k}` keeps a {stack}-byte local-memory frame")?;
                if spill_stores > 0 {
                    write!(f, " ({spill_stores} bytes of spilled registers)")?;
                }
                write!(
                    f,
                    ": most often a local array indexed by the counter of a loop that stays \
                     rolled, which lives in memory (device math's argument reduction, as in \
                     `sin` of large arguments, keeps one too). Give such loops a constant trip count (`for i in 0..8`) or write them \
                     with `unroll! {{ for i in 0..8 {{ .. }} }}`; for spills, declare the block \
                     shape (`#[gpu_kernel(block = (..))]`) so ptxas knows the register budget"
                )
            }
            LintKind::CheckInLoop { checks } => write!(
                f,
                "kernel `{k}` checks {checks} index bound{} in every step of an innermost loop: \
                 index with what the loop proves (`for i in 0..s.len()`, `thread::index()`), a \
                 declared block shape (`#[gpu_kernel(block = (..))]`) for shared tiles, or a \
                 `Matrix` tile checked once (`a.matrix(n, n).tile::<R, C>(..)`)",
                if checks == 1 { "" } else { "s" }
            ),
        }
    }
}

/// The lints of a module: a local frame or spills for each entry of `usage` (ptxas's report;
/// empty when ptxas was not run) that has one, and a check left in an innermost loop of each
/// entry of `ptx`. Sorted by kernel; at most one of each kind per kernel.
pub fn lints(ptx: &str, usage: &[EntryUsage]) -> Vec<Lint> {
    let mut out = Vec::new();
    for u in usage {
        if u.stack > 0 || u.spill_stores > 0 {
            out.push(Lint {
                kernel: u.name.clone(),
                kind: LintKind::LocalFrame {
                    stack: u.stack,
                    spill_stores: u.spill_stores,
                },
            });
        }
    }
    for (kernel, body) in entries(ptx) {
        let checks = checks_in_innermost_loops(body);
        if checks > 0 {
            out.push(Lint {
                kernel: kernel.to_owned(),
                kind: LintKind::CheckInLoop { checks },
            });
        }
    }
    out.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    out
}

/// Each `.entry NAME(` of the PTX with its text up to the end of its body (`llc` closes each
/// function with a `// -- End function` comment): the functions after it are not its loops.
fn entries(ptx: &str) -> Vec<(&str, &str)> {
    ptx.split(".entry ")
        .skip(1)
        .filter_map(|rest| {
            let name = rest.split('(').next()?.trim();
            let body = rest.split("// -- End function").next().unwrap_or(rest);
            Some((name, body))
        })
        .collect()
}

/// The labels of `body` whose block calls the function that reports a failed bounds check.
fn failure_labels(body: &str) -> BTreeSet<&str> {
    let mut labels = BTreeSet::new();
    let mut current: Option<&str> = None;
    for line in body.lines() {
        let t = line.trim();
        if let Some(label) = label_of(t) {
            current = Some(label);
        } else if t.contains("index_failure")
            && t.starts_with("call")
            && let Some(l) = current
        {
            labels.insert(l);
        }
    }
    labels
}

fn label_of(line: &str) -> Option<&str> {
    let l = line.split("//").next()?.trim();
    l.strip_suffix(':').filter(|l| l.starts_with('$'))
}

/// The target of a branch line (`@%p1 bra $L__BB0_3;`, `bra.uni $L__BB0_4;`).
fn branch_of(line: &str) -> Option<&str> {
    let t = line.trim();
    let t = t
        .strip_prefix('@')
        .map_or(t, |p| p.split_once(' ').map_or(p, |(_, r)| r.trim()));
    let rest = t.strip_prefix("bra")?;
    let rest = rest.strip_prefix(".uni").unwrap_or(rest);
    let target = rest.trim().trim_end_matches(';').trim();
    target.starts_with('$').then_some(target)
}

/// Branches to a bounds-check failure inside the innermost loop of an entry's body that has
/// the most (llc branches to the failure either on the check's predicate or, after a
/// conditional branch to the continuation, unconditionally): a loop is the lines from a label
/// to the last branch back to it; innermost when no other loop lies inside it.
fn checks_in_innermost_loops(body: &str) -> usize {
    let lines: Vec<&str> = body.lines().collect();
    let failures = failure_labels(body);
    let mut at = std::collections::BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(label) = label_of(l.trim()) {
            at.insert(label, i);
        }
    }
    // (start, end) of each loop: a label and the last branch back to it.
    let mut loops: Vec<(usize, usize)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(target) = branch_of(l)
            && let Some(&start) = at.get(target)
            && start < i
        {
            match loops.iter_mut().find(|(s, _)| *s == start) {
                Some(found) => found.1 = found.1.max(i),
                None => loops.push((start, i)),
            }
        }
    }
    let innermost = loops.iter().filter(|(s, e)| {
        !loops
            .iter()
            .any(|(s2, e2)| (s2, e2) != (s, e) && s < s2 && e2 <= e)
    });
    innermost
        .map(|&(s, e)| {
            lines[s..=e]
                .iter()
                .filter(|l| branch_of(l).is_some_and(|t| failures.contains(t)))
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(name: &str, stack: u32, spill_stores: u32) -> EntryUsage {
        EntryUsage {
            name: name.into(),
            registers: 40,
            stack,
            spill_stores,
            spill_loads: spill_stores,
            shared: 0,
        }
    }

    #[test]
    fn a_local_frame_or_spills_is_one_warning_naming_the_kernel_and_the_idiom() {
        let found = lints(
            "",
            &[
                usage("clean", 0, 0),
                usage("framed", 256, 0),
                usage("spilling", 8, 8),
            ],
        );
        let kernels: Vec<_> = found.iter().map(|l| l.kernel.as_str()).collect();
        assert_eq!(kernels, ["framed", "spilling"]);
        let text = found[0].to_string();
        assert!(
            text.contains("`framed` keeps a 256-byte local-memory frame"),
            "{text}"
        );
        assert!(text.contains("unroll!"), "{text}");
        assert!(
            found[1]
                .to_string()
                .contains("8 bytes of spilled registers"),
            "{}",
            found[1]
        );
    }

    /// The shape llc gives a loop with a check: the loop's blocks, a conditional branch out to
    /// a block that calls the failure function, and a branch back to the loop's label.
    const CHECKED_LOOP: &str = "
.visible .entry checked(
)
{
\tmov.b64 \t%rd1, 0;
$L__BB0_1:                              // =>This Inner Loop Header: Depth=1
\tsetp.lt.u64 \t%p1, %rd1, %rd9;
\t@%p1 bra \t$L__BB0_2;
\tbra.uni \t$L__BB0_4;
$L__BB0_2:
\tadd.s64 \t%rd1, %rd1, 1;
\tsetp.ne.b64 \t%p2, %rd1, %rd8;
\t@%p2 bra \t$L__BB0_1;
\tret;
$L__BB0_4:
\t{ // callseq 0, 0
\tcall.uni _RNvNtNtCs1_12berth_device5panic3gpu13index_failure, (param0, param1, param2);
\t} // callseq 0
}
.visible .entry outside(
)
{
\tsetp.lt.u64 \t%p1, %rd1, %rd9;
\t@%p1 bra \t$L__BB1_3;
$L__BB1_1:
\tadd.s64 \t%rd1, %rd1, 1;
\tsetp.ne.b64 \t%p2, %rd1, %rd8;
\t@%p2 bra \t$L__BB1_1;
\tret;
$L__BB1_3:
\tcall.uni _RNvNtNtCs1_12berth_device5panic3gpu13index_failure, (param0, param1, param2);
}
";

    #[test]
    fn a_check_in_an_innermost_loop_is_one_warning_and_a_check_before_it_none() {
        let found = lints(CHECKED_LOOP, &[]);
        assert_eq!(
            found,
            [Lint {
                kernel: "checked".into(),
                kind: LintKind::CheckInLoop { checks: 1 }
            }]
        );
        let text = found[0].to_string();
        assert!(
            text.contains("kernel `checked` checks 1 index bound in every step"),
            "{text}"
        );
        assert!(text.contains("block = (..)"), "{text}");
        assert!(!found[0].warns_on_build());
        assert!(lints("", &[usage("framed", 16, 0)])[0].warns_on_build());
    }
}
