//! Bounds checks of one straight stretch made together, before it: stage 5's rewrite of the
//! *optimised* IR, between `opt` and `llc`.
//!
//! After unrolling, a loop like `for j in 0..4 { tile[..] = m[(y + j) * cols + x] }` is a
//! chain of blocks, each ending in the bounds check of the next read:
//!
//! ```text
//! b0: ...; %c0 = icmp ult i64 %i0, %len; br i1 %c0, label %b1, label %fail
//! b1: load m[%i0]; store; %i1 = ...; %c1 = icmp ult i64 %i1, %len; br i1 %c1, label %b2, label %fail
//! ...
//! ```
//!
//! Each check is a branch, and code is not moved across branches: the read after check 1
//! cannot be issued before the store of the read before it, which waits for that read's data.
//! nvcc, which checks nothing, issues all four reads and then the four stores. Here the
//! conditions of a chain whose indices are plain arithmetic on values known at its start are
//! computed at the start and tested at once: if every check passes, the stretch runs with no
//! branch left in it; if one fails, the checks are tested again in their order and the first
//! that fails reports, with its own index, length and line, as before.
//!
//! What is not the same: a thread whose check `k` fails now stops before the writes that came
//! before check `k` in the stretch, not after them. A failed check traps the whole launch and
//! leaves its outputs unspecified either way; the report is the same.
//!
//! Only checks that report an index failure (a call of berth's `index_failure`) take part,
//! only the arithmetic below is moved (no memory access, no division, nothing that can trap),
//! and each moved condition is frozen, so a value the original never computed (its chain
//! stopped earlier) cannot make the combined test undefined.

use super::module::{Function, Module};

/// Instructions whose value depends only on their operands and that cannot trap: the ones a
/// condition may be computed from ahead of its block.
pub(super) const PURE: &[&str] = &[
    "add",
    "sub",
    "mul",
    "shl",
    "lshr",
    "ashr",
    "and",
    "or",
    "xor",
    "zext",
    "sext",
    "trunc",
    "icmp",
    "select",
    "getelementptr",
    "freeze",
];

/// The most checks tested together. Each read of a combined stretch can be issued before the
/// previous one's data arrives, which is the point, and each holds a register until then:
/// a long chain (the 64 fragment reads of a tensor-core tile) can run out of registers.
/// Eight covers the unrolled loops of the plain ports (four or eight reads a step).
const MAX_CHAIN: usize = 8;

/// Combine the checks of every chain in every kernel but those `keep` names: how many checks
/// were moved to the start of their chain.
///
/// The builder keeps the kernels that declare a block shape or a register budget as they are:
/// their reads are shaped by hand, a declared shape already removes the checks it proves, and
/// reads issued together hold more registers at once, which under a budget can spill.
pub fn combine(m: &mut Module, keep: &[&str]) -> usize {
    let mut n = 0;
    let mut chain = 0;
    for f in m.functions_mut() {
        if f.is_kernel() && !keep.contains(&f.name.as_str()) {
            n += combine_in(f, &mut chain);
        }
    }
    n
}

/// A block of a function body: its label (without `%`; `None` for the entry block) and the
/// range of its lines in the body (label line excluded).
#[derive(Debug, Clone)]
pub(super) struct Block {
    pub(super) label: Option<String>,
    /// First line after the label line.
    pub(super) start: usize,
    /// One past the terminator.
    pub(super) end: usize,
}

/// A check: `br i1 %cond, label %ok, label %fail` (or with the targets the other way round,
/// `fail_first`), `fail` a block that reports an index failure.
#[derive(Debug, Clone)]
struct Check {
    cond: String,
    ok: String,
    fail: String,
    fail_first: bool,
}

pub(super) fn blocks(body: &[String]) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    let mut cur = Block {
        label: None,
        start: 0,
        end: 0,
    };
    for (i, line) in body.iter().enumerate() {
        if let Some(label) = label_of(line) {
            cur.end = i;
            out.push(cur);
            cur = Block {
                label: Some(label.to_owned()),
                start: i + 1,
                end: i + 1,
            };
        }
    }
    cur.end = body.len();
    out.push(cur);
    // Trailing blank lines belong to no instruction.
    out
}

/// `123:` or `name:` (with an optional `; preds = ...` comment): the label.
pub(super) fn label_of(line: &str) -> Option<&str> {
    if line.starts_with(' ') || line.starts_with(';') || line.is_empty() {
        return None;
    }
    let (label, rest) = line.split_once(':')?;
    let rest = rest.trim_start();
    (!label.is_empty()
        && label.bytes().all(super::module::is_ident_byte)
        && (rest.is_empty() || rest.starts_with(';')))
    .then_some(label)
}

/// The instruction lines of a block (no blank lines or comments).
pub(super) fn instructions<'a>(
    body: &'a [String],
    b: &Block,
) -> impl Iterator<Item = (usize, &'a str)> {
    (b.start..b.end).filter_map(move |i| {
        let l = body[i].trim();
        (!l.is_empty() && !l.starts_with(';')).then_some((i, l))
    })
}

/// The block's terminator: its last instruction.
pub(super) fn terminator<'a>(body: &'a [String], b: &Block) -> Option<(usize, &'a str)> {
    instructions(body, b).last()
}

/// `br i1 %c, label %a, label %b[, !prof ...]`: `(c, a, b)`.
pub(super) fn cond_branch(line: &str) -> Option<(&str, &str, &str)> {
    let rest = line.strip_prefix("br i1 ")?;
    let mut parts = rest.splitn(3, ", ");
    let cond = parts.next()?;
    let a = parts.next()?.strip_prefix("label %")?;
    let b = parts.next()?;
    let b = b.strip_prefix("label %")?;
    let b = b.split(',').next()?.trim();
    cond.starts_with('%').then_some((cond, a, b))
}

/// Every `%name` a line mentions as a branch target (`label %name`).
pub(super) fn targets(line: &str) -> impl Iterator<Item = &str> {
    line.match_indices("label %").map(move |(i, m)| {
        let rest = &line[i + m.len()..];
        let end = rest
            .bytes()
            .position(|b| !super::module::is_ident_byte(b))
            .unwrap_or(rest.len());
        &rest[..end]
    })
}

/// The `%values` an instruction line uses (not the one it defines, not labels).
pub(super) fn operands(line: &str) -> Vec<&str> {
    let rhs = line.split_once(" = ").map_or(line, |(_, r)| r);
    let mut out = Vec::new();
    let bytes = rhs.as_bytes();
    let mut i = 0;
    while let Some(at) = rhs[i..].find('%').map(|a| a + i) {
        let end = rhs[at + 1..]
            .bytes()
            .position(|b| !super::module::is_ident_byte(b))
            .map_or(rhs.len(), |e| at + 1 + e);
        let is_label = rhs[..at].ends_with("label ");
        if end > at + 1 && !is_label {
            out.push(&rhs[at..end]);
        }
        i = end.max(at + 1);
        if i >= bytes.len() {
            break;
        }
    }
    out
}

/// `%name = opcode ...`: `(name, opcode)`.
pub(super) fn definition(line: &str) -> Option<(&str, &str)> {
    let (name, rhs) = line.split_once(" = ")?;
    name.starts_with('%')
        .then(|| (name, rhs.split_whitespace().next().unwrap_or("")))
}

/// How the outlined report of a failed index check (`berth_device::panic::gpu::index_failure`)
/// ends in its symbol's mangled name, followed by its argument list.
const INDEX_FAILURE: &str = "5panic3gpu13index_failure(";

/// Whether block `b` reports an index failure: optional phis, a call of `index_failure`,
/// `unreachable`.
pub(super) fn is_index_failure(body: &[String], b: &Block) -> bool {
    let mut saw_call = false;
    for (_, l) in instructions(body, b) {
        if l.contains(" = phi ") {
            continue;
        }
        if !saw_call && l.contains("call ") && l.contains(INDEX_FAILURE) {
            saw_call = true;
            continue;
        }
        return saw_call && l == "unreachable";
    }
    false
}

fn combine_in(f: &mut Function, chain_id: &mut usize) -> usize {
    let mut moved_total = 0;
    // One chain at a time; the body is re-read after each change.
    let mut skip_from = 0;
    loop {
        let body = &f.body;
        let bs = blocks(body);
        let index: std::collections::HashMap<&str, usize> = bs
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.label.as_deref().map(|l| (l, i)))
            .collect();
        // How many ways into each label: every `label %name` outside phis (branches, and the
        // lines of a switch's table, which spans several lines).
        let mut preds: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for line in body.iter().filter(|l| !l.contains(" = phi ")) {
            for l in targets(line) {
                *preds.entry(l).or_default() += 1;
            }
        }
        let check_of = |b: &Block| -> Option<Check> {
            let (_, t) = terminator(body, b)?;
            let (cond, x, y) = cond_branch(t)?;
            let fail_at = |l: &str| {
                index
                    .get(l)
                    .is_some_and(|&i| is_index_failure(body, &bs[i]))
            };
            match (fail_at(x), fail_at(y)) {
                (false, true) => Some(Check {
                    cond: cond.to_owned(),
                    ok: x.to_owned(),
                    fail: y.to_owned(),
                    fail_first: false,
                }),
                (true, false) => Some(Check {
                    cond: cond.to_owned(),
                    ok: y.to_owned(),
                    fail: x.to_owned(),
                    fail_first: true,
                }),
                _ => None,
            }
        };
        let mut found = None;
        for (bi, b) in bs.iter().enumerate().skip(skip_from) {
            // The entry block has no label to branch back to from the report blocks' phis.
            let Some(start_label) = b.label.as_deref() else {
                continue;
            };
            // A report block of a chain already combined.
            if start_label.starts_with("berth.chk.") {
                continue;
            }
            let Some(first) = check_of(b) else {
                continue;
            };
            // Walk the chain: each `ok` block has this check as its only way in and ends in a
            // check of its own.
            let mut checks = vec![(start_label.to_owned(), first)];
            // Lines to move, with their place in the chain: (block's position, line).
            let mut hoist: Vec<(usize, usize)> = Vec::new();
            let mut defined_in_chain: std::collections::HashMap<&str, (usize, usize)> =
                std::collections::HashMap::new();
            while checks.len() < MAX_CHAIN {
                let (_, last) = checks.last().expect("one check");
                let Some(&ok_i) = index.get(last.ok.as_str()) else {
                    break;
                };
                if preds.get(last.ok.as_str()).copied() != Some(1) {
                    break;
                }
                let ok = &bs[ok_i];
                if instructions(body, ok).any(|(_, l)| l.contains(" = phi ")) {
                    break;
                }
                let Some(next) = check_of(ok) else {
                    break;
                };
                // Definitions of this block, for the next conditions to find.
                let mut defs = defined_in_chain.clone();
                let position = checks.len();
                for (i, l) in instructions(body, ok) {
                    if let Some((name, _)) = definition(l) {
                        defs.insert(name, (position, i));
                    }
                }
                // What the next check's condition and its failure block's phi need from the
                // chain, all movable.
                let mut need: Vec<(usize, usize)> = Vec::new();
                let mut stack: Vec<&str> = vec![next.cond.as_str()];
                let fail_i = index[next.fail.as_str()];
                let ok_label = last.ok.as_str();
                for (_, l) in instructions(body, &bs[fail_i]) {
                    if l.contains(" = phi ") {
                        if let Some(v) = phi_value(l, ok_label) {
                            stack.push(v);
                        }
                    } else {
                        // The report's own arguments (a failure block with one way in).
                        stack.extend(operands(l));
                    }
                }
                let mut movable = true;
                let mut seen = std::collections::HashSet::new();
                while let Some(v) = stack.pop() {
                    if !seen.insert(v) {
                        continue;
                    }
                    let Some(&at) = defs.get(v) else {
                        continue;
                    };
                    if hoist.contains(&at) || need.contains(&at) {
                        continue;
                    }
                    let l = body[at.1].trim();
                    let (name, op) = definition(l).unwrap_or(("", ""));
                    // A quoted name would not survive the copy's new name.
                    if !PURE.contains(&op) || name.contains('"') {
                        movable = false;
                        break;
                    }
                    need.push(at);
                    stack.extend(operands(l));
                }
                if !movable {
                    break;
                }
                hoist.extend(need);
                defined_in_chain = defs;
                checks.push((last.ok.clone(), next));
            }
            if checks.len() >= 2 {
                // In the chain's order: a block's values before the next block's.
                hoist.sort_unstable();
                let hoist: Vec<usize> = hoist.into_iter().map(|(_, line)| line).collect();
                found = Some((bi, checks, hoist));
                break;
            }
        }
        let Some((bi, checks, hoist)) = found else {
            break;
        };
        *chain_id += 1;
        moved_total += checks.len() - 1;
        rewrite_chain(f, bi, &checks, &hoist, *chain_id);
        skip_from = bi + 1;
    }
    moved_total
}

/// In a phi line, the value coming from `label`.
pub(super) fn phi_value<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let want = format!(", %{label} ]");
    let at = line.find(&want)?;
    let open = line[..at].rfind("[ ")?;
    let v = line[open + 2..at].trim();
    v.starts_with('%').then_some(v)
}

fn rewrite_chain(
    f: &mut Function,
    start: usize,
    checks: &[(String, Check)],
    hoist: &[usize],
    id: usize,
) {
    let body = std::mem::take(&mut f.body);
    // The arithmetic of the conditions is copied to the start, under new names; the original
    // instructions stay where they were, for the reads that use them. (Moving them instead
    // would keep every index of the stretch live across all of it.)
    let clones: Vec<(String, String)> = hoist
        .iter()
        .filter_map(|&h| {
            let (name, _) = definition(body[h].trim())?;
            Some((name.to_owned(), format!("%berth.chk.{id}.v.{}", &name[1..])))
        })
        .collect();
    let cloned = |v: &str| -> String {
        clones
            .iter()
            .find(|(from, _)| from == v)
            .map_or(v.to_owned(), |(_, to)| to.clone())
    };
    let rename_all = |line: &str| -> String {
        let mut l = line.to_owned();
        for (from, to) in &clones {
            if l.contains(from.as_str()) {
                l = replace_value(&l, from, to);
            }
        }
        l
    };
    let bs = blocks(&body);
    let b0 = &bs[start];
    let (t0, _) = terminator(&body, b0).expect("the chain's start ends in a check");
    // Where each check's branch is, to replace: the terminator of the block named.
    let term_of = |label: &str| -> usize {
        let b = bs
            .iter()
            .find(|b| b.label.as_deref() == Some(label))
            .expect("a block of the chain");
        terminator(&body, b).expect("a terminator").0
    };
    let branch_lines: Vec<usize> = checks.iter().map(|(l, _)| term_of(l)).collect();
    // The copies, then the conditions as "passes" values, frozen.
    let mut head: Vec<String> = hoist.iter().map(|&h| rename_all(&body[h])).collect();
    let mut passes = Vec::new();
    for (j, (_, c)) in checks.iter().enumerate() {
        let cond = cloned(&c.cond);
        let pass = if c.fail_first {
            let v = format!("%berth.chk.{id}.pass.{j}");
            head.push(format!("  {v} = xor i1 {cond}, true"));
            v
        } else {
            cond
        };
        let frozen = format!("%berth.chk.{id}.ok.{j}");
        head.push(format!("  {frozen} = freeze i1 {pass}"));
        passes.push(frozen);
    }
    let mut all = passes[0].clone();
    for (j, p) in passes.iter().enumerate().skip(1) {
        let v = format!("%berth.chk.{id}.all.{j}");
        head.push(format!("  {v} = and i1 {all}, {p}"));
        all = v;
    }
    let report = |j: usize| format!("berth.chk.{id}.report.{j}");
    head.push(format!(
        "  br i1 {all}, label %{}, label %{}",
        checks[0].1.ok,
        report(0)
    ));
    // The report blocks: the checks again, in order; the first that fails reports.
    let mut tail = Vec::new();
    for (j, (_, c)) in checks.iter().enumerate() {
        tail.push(String::new());
        tail.push(format!("{}:", report(j)));
        if j + 1 == checks.len() {
            tail.push(format!("  br label %{}", c.fail));
        } else {
            tail.push(format!(
                "  br i1 {}, label %{}, label %{}",
                passes[j],
                report(j + 1),
                c.fail
            ));
        }
    }
    // The failure blocks' phis: the edge from check j's block now comes from report j, with
    // the copy of its value.
    let fail_labels: std::collections::HashSet<&str> =
        checks.iter().map(|(_, c)| c.fail.as_str()).collect();
    let mut out = Vec::with_capacity(body.len() + head.len() + tail.len());
    let mut current: Option<String> = None;
    for (i, line) in body.iter().enumerate() {
        if let Some(l) = label_of(line) {
            current = Some(l.to_owned());
        }
        if i == t0 {
            out.extend(head.iter().cloned());
            continue;
        }
        if let Some(j) = branch_lines.iter().position(|&b| b == i) {
            // Checks after the first: their blocks now run straight on.
            debug_assert!(j > 0);
            out.push(format!("  br label %{}", checks[j].1.ok));
            continue;
        }
        let fail = current.as_deref().filter(|c| fail_labels.contains(c));
        if let Some(fail) = fail.filter(|_| line.contains(" = phi ")) {
            let mut l = line.clone();
            for (j, (from, c)) in checks.iter().enumerate() {
                if c.fail != fail {
                    continue;
                }
                if let Some(v) = phi_value(&l, from) {
                    let v = v.to_owned();
                    l = l.replace(
                        &format!("[ {v}, %{from} ]"),
                        &format!("[ {}, %{} ]", cloned(&v), report(j)),
                    );
                }
            }
            out.push(l);
            continue;
        }
        if fail.is_some() {
            // Reached from the report blocks now: the values it reports are the copies.
            out.push(rename_all(line));
            continue;
        }
        out.push(line.clone());
    }
    out.extend(tail);
    f.body = out;
}

/// `line` with the value `from` (`%12`) renamed `to`, not touching longer names (`%123`).
pub(super) fn replace_value(line: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(line.len() + 16);
    let mut rest = line;
    while let Some(at) = rest.find(from) {
        let after = &rest[at + from.len()..];
        out.push_str(&rest[..at]);
        if after
            .bytes()
            .next()
            .is_some_and(super::module::is_ident_byte)
        {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAIN: &str = "define ptx_kernel void @k(ptr %m, i64 %len, i64 %i, i64 %w) {
  br label %1

1:
  %c0 = icmp ult i64 %i, %len
  br i1 %c0, label %2, label %9, !prof !7

2:                                                ; preds = %1
  %p0 = getelementptr inbounds nuw float, ptr %m, i64 %i
  %v0 = load float, ptr %p0, align 4
  store float %v0, ptr addrspace(3) @t, align 4
  %i1 = add nuw i64 %i, %w
  %c1 = icmp ult i64 %i1, %len
  br i1 %c1, label %3, label %9

3:                                                ; preds = %2
  %p1 = getelementptr inbounds nuw float, ptr %m, i64 %i1
  %v1 = load float, ptr %p1, align 4
  %i2 = shl i64 %i1, 1
  %c2 = icmp uge i64 %i2, %len
  br i1 %c2, label %9, label %4

4:                                                ; preds = %3
  %p2 = getelementptr inbounds nuw float, ptr %m, i64 %i2
  %v2 = load float, ptr %p2, align 4
  %i3 = load i64, ptr %m, align 8
  %c3 = icmp ult i64 %i3, %len
  br i1 %c3, label %5, label %9

5:
  ret void

9:                                                ; preds = %1, %2, %3, %4
  %x = phi i64 [ %i, %1 ], [ %i1, %2 ], [ %i2, %3 ], [ %i3, %4 ]
  tail call void @_RNvNtNtCs1_12berth_device5panic3gpu13index_failure(i64 %x, i64 %len, ptr @loc)
  unreachable
}
";

    #[test]
    fn a_chain_of_checks_is_tested_at_its_start_and_reported_in_order() {
        let mut m = Module::parse(CHAIN);
        assert_eq!(combine(&mut m, &["other"]), 2);
        let out = m.to_string();
        // Block 1 computes the three conditions (the third's arithmetic moved up with it) and
        // tests them at once.
        let b1 = &out[out.find("\n1:").unwrap()..out.find("\n2:").unwrap()];
        for want in [
            "%berth.chk.1.v.i1 = add nuw i64 %i, %w",
            "%berth.chk.1.v.c1 = icmp ult i64 %berth.chk.1.v.i1, %len",
            "%berth.chk.1.v.i2 = shl i64 %berth.chk.1.v.i1, 1",
            "%berth.chk.1.v.c2 = icmp uge i64 %berth.chk.1.v.i2, %len",
            "%berth.chk.1.pass.2 = xor i1 %berth.chk.1.v.c2, true",
            "%berth.chk.1.ok.1 = freeze i1 %berth.chk.1.v.c1",
            "br i1 %berth.chk.1.all.2, label %2, label %berth.chk.1.report.0",
        ] {
            assert!(b1.contains(want), "{want} not in\n{b1}");
        }
        // The reads run with no check between them (the indices they use computed where
        // they were); the fourth check, on a loaded index, stays where it was.
        let b2 = &out[out.find("\n2:").unwrap()..out.find("\n3:").unwrap()];
        assert!(
            b2.contains("br label %3") && b2.contains("%i1 = add nuw i64 %i, %w"),
            "{b2}"
        );
        let b3 = &out[out.find("\n3:").unwrap()..out.find("\n4:").unwrap()];
        assert!(
            b3.contains("br label %4") && b3.contains("%i2 = shl i64 %i1, 1"),
            "{b3}"
        );
        assert!(out.contains("br i1 %c3, label %5, label %9"), "{out}");
        // A failure is reported by the first check that fails, with its own index.
        for want in [
            "berth.chk.1.report.0:\n  br i1 %berth.chk.1.ok.0, label %berth.chk.1.report.1, label %9",
            "berth.chk.1.report.1:\n  br i1 %berth.chk.1.ok.1, label %berth.chk.1.report.2, label %9",
            "berth.chk.1.report.2:\n  br label %9",
            "%x = phi i64 [ %i, %berth.chk.1.report.0 ], [ %berth.chk.1.v.i1, %berth.chk.1.report.1 ], [ %berth.chk.1.v.i2, %berth.chk.1.report.2 ], [ %i3, %4 ]",
        ] {
            assert!(out.contains(want), "{want} not in\n{out}");
        }
    }

    #[test]
    fn a_check_whose_failure_is_not_an_index_failure_or_a_block_with_two_ways_in_ends_the_chain() {
        let other = CHAIN.replace("13index_failure(", "13other_failure(");
        let mut m = Module::parse(&other);
        assert_eq!(combine(&mut m, &[]), 0);
        assert_eq!(m.to_string(), other);
        // A kernel the builder keeps as written.
        let mut m = Module::parse(CHAIN);
        assert_eq!(combine(&mut m, &["k"]), 0);
        assert_eq!(m.to_string(), CHAIN);
        // Block 2 reached from elsewhere too: a chain from block 1 would skip a way into it,
        // so block 1 keeps its check and the chain starts at block 2.
        let joined = CHAIN.replace("  br label %1\n", "  br i1 true, label %1, label %2\n");
        let mut m = Module::parse(&joined);
        assert_eq!(combine(&mut m, &[]), 1);
        let out = m.to_string();
        assert!(out.contains("br i1 %c0, label %2, label %9"), "{out}");
        let b2 = &out[out.find("\n2:").unwrap()..out.find("\n3:").unwrap()];
        assert!(b2.contains("label %3, label %berth.chk.1.report.0"), "{b2}");
    }

    /// Every value the rewritten function defines, defined once.
    fn defined_once(text: &str) {
        let mut seen = std::collections::HashSet::new();
        for l in text.lines() {
            if let Some((name, _)) = definition(l.trim()) {
                assert!(
                    seen.insert(name.to_owned()),
                    "{name} defined twice in\n{text}"
                );
            }
        }
    }

    #[test]
    fn numbered_values_keep_their_numbers_and_the_copies_names_clash_with_nothing() {
        let m = "define ptx_kernel void @n(ptr %0, i64 %1, i64 %2) {
  br label %4

4:
  %5 = icmp ult i64 %2, %1
  br i1 %5, label %6, label %12

6:
  %7 = add i64 %2, 1
  %8 = icmp ult i64 %7, %1
  br i1 %8, label %9, label %12

9:
  %10 = add i64 %2, 2
  %11 = icmp ult i64 %10, %1
  br i1 %11, label %13, label %12

12:
  %14 = phi i64 [ %2, %4 ], [ %7, %6 ], [ %10, %9 ]
  call void @_RNvNtNtCs1_12berth_device5panic3gpu13index_failure(i64 %14, i64 %1, ptr null)
  unreachable

13:
  ret void
}
";
        let mut module = Module::parse(m);
        assert_eq!(combine(&mut module, &[]), 2);
        let out = module.to_string();
        defined_once(&out);
        for want in [
            "  %berth.chk.1.v.7 = add i64 %2, 1\n",
            "  %berth.chk.1.v.10 = add i64 %2, 2\n",
            "  %7 = add i64 %2, 1\n",
            "  %14 = phi i64 [ %2, %berth.chk.1.report.0 ], [ %berth.chk.1.v.7, %berth.chk.1.report.1 ], [ %berth.chk.1.v.10, %berth.chk.1.report.2 ]",
        ] {
            assert!(out.contains(want), "{want} not in\n{out}");
        }
    }

    #[test]
    fn a_block_a_switch_also_reaches_is_not_part_of_a_chain() {
        let switched = CHAIN.replace(
            "  br label %1\n",
            "  switch i64 %w, label %1 [\n    i64 0, label %3\n  ]\n",
        );
        let mut m = Module::parse(&switched);
        assert_eq!(combine(&mut m, &[]), 1, "only the checks of blocks 1 and 2");
        let out = m.to_string();
        defined_once(&out);
        assert!(out.contains("br i1 %c2, label %9, label %4"), "{out}");
    }
}
