//! Bounds checks taken out of counted loops: stage 5's rewrite of the optimised IR, after the
//! checks of each straight stretch are combined ([`super::checks`]).
//!
//! A loop like the main loop of a register-blocked SGEMM ported line by line,
//!
//! ```text
//! for t in (0..n).step_by(16) {
//!     va[l] = a[(row0 + e / 16) * n + t + e % 16];   // four of these
//!     vb[l] = b[(t + e / 64) * n + col0 + e % 64];   // and four of these
//!     ...
//! }
//! ```
//!
//! checks eight indices in every step. Each check keeps its index and its slice's length in
//! registers for the whole loop, beside the addresses the reads use: 32 more registers than
//! the same loop without checks, and half the occupancy. Every index there grows with the
//! loop's counter, so all of them pass in every step if they pass in the last; and the
//! number of steps is known before the loop starts.
//!
//! So, before such a loop, the builder computes each index as it will be in the last step (each
//! sum and product tested for overflow, so that nothing wraps unnoticed) and compares it with
//! its length. If every one
//! passes, the loop runs with those checks removed. If one does not, the loop's index
//! arithmetic alone (no reads, no writes) is run step by step, the checks in their order, and
//! the first that fails reports, with its own index, length and line, as the loop would
//! have; the loop runs without the checks if none fails (the bound is above the last step's
//! index where a mask stands in for what it masks, or where the arithmetic overflows). The
//! scan is a function of its own, called only then: a call, or a trap, on a way into the loop
//! that the threads of a warp may take differently costs the loop registers (ptxas keeps
//! fewer of its warp-wide values in uniform registers), and a call costs them wherever it is;
//! a function called on the rare way costs the least (79 registers for the 4×4 SGEMM, 127 for
//! the 8×8, where nvcc's take 63 and 127).
//!
//! What is not the same: a thread whose check fails in step `k` now stops before the loop,
//! not after its first `k` steps. The builder takes a loop only when nothing else in it can
//! stop or leave it: its only ways out are the checks taken out and its counter's end, and it
//! calls nothing but LLVM intrinsics. A failed check traps the whole launch and leaves its
//! outputs unspecified either way; the report is the same.
//!
//! The loops taken: one latch, whose branch ends the loop when a counter that starts at a
//! value known before the loop and steps down by one reaches zero (how `step_by` loops
//! compile); checks whose blocks run in every step, each comparing an index with a length
//! known before the loop, the index computed from values known before the loop and the
//! loop's induction variables (each adding a step known before the loop) by additions,
//! multiplications, divisions by constants, shifts, disjoint `or`s and masks.

use super::checks::{
    PURE, blocks, cond_branch, definition, instructions, is_index_failure, label_of, operands,
    phi_value, terminator,
};
use super::module::{Function, Item, Module};
use std::collections::{HashMap, HashSet};

/// Take the checks out of every loop that qualifies, in every kernel but those `keep` names:
/// how many loops changed.
pub fn hoist(m: &mut Module, keep: &[&str]) -> usize {
    let mut n = 0;
    let mut scans = Vec::new();
    for f in m.functions_mut() {
        if !f.is_kernel() || keep.contains(&f.name.as_str()) {
            continue;
        }
        // One loop at a time; the body is re-read after each change. Each change turns at
        // least one check into a constant branch, so this ends.
        while let Some((body, scan)) = hoist_one(&f.body, n + 1) {
            f.body = body;
            scans.push(scan);
            n += 1;
        }
    }
    m.items.extend(scans.into_iter().map(Item::Function));
    n
}

/// A header phi: its name, type and `(value, label)` pairs.
type Phi<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);

/// One test of a check site, in the order the loop makes them: the `i1` that is true when it
/// passes (`pass_is` says which value passes), the block reporting its failure, and the
/// label whose value that block's phis take.
#[derive(Debug, Clone)]
struct Test {
    cond: String,
    pass_is: bool,
    fail: String,
    edge: String,
}

/// A check site in the loop: its block's position, and its tests in order.
#[derive(Debug, Clone)]
struct Site {
    block: usize,
    tests: Vec<Test>,
}

/// An instruction line's parts: opcode, the type after the flags, the operands (`%v` or
/// literals). `None` for what this reading does not know.
fn parse_op(line: &str) -> Option<(&str, &str, Vec<&str>)> {
    let (_, rhs) = line.split_once(" = ")?;
    let rhs = rhs.split(", !").next()?;
    let mut words = rhs.split_whitespace();
    let op = words.next()?;
    let mut rest = &rhs[op.len()..];
    loop {
        let t = rest.trim_start();
        let w = t.split_whitespace().next()?;
        if matches!(
            w,
            "nuw" | "nsw" | "disjoint" | "exact" | "nneg" | "samesign"
        ) {
            rest = &t[w.len()..];
            continue;
        }
        rest = t;
        break;
    }
    if op == "icmp" {
        let (_, r) = rest.split_once(' ')?;
        let (ty, r) = r.trim_start().split_once(' ')?;
        let ops: Vec<&str> = r.split(", ").map(str::trim).collect();
        return (ops.len() == 2).then_some((op, ty, ops));
    }
    let (ty, r) = rest.split_once(' ')?;
    let ops: Vec<&str> = r.split(", ").map(str::trim).collect();
    Some((op, ty, ops))
}

/// `%x = phi T [ a, %l1 ], [ b, %l2 ]`: `(T, [(a, l1), (b, l2)])`.
fn parse_phi(line: &str) -> Option<(&str, Vec<(&str, &str)>)> {
    let (_, rhs) = line.split_once(" = phi ")?;
    let (ty, rest) = rhs.split_once(' ')?;
    let mut pairs = Vec::new();
    for part in rest.split("], ") {
        let part = part
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim();
        let (v, l) = part.rsplit_once(", ")?;
        pairs.push((v.trim(), l.trim().strip_prefix('%')?));
    }
    Some((ty, pairs))
}

/// An integer literal of an `i64` operand, as the unsigned value it stands for.
fn literal(v: &str) -> Option<u64> {
    v.parse::<i64>()
        .ok()
        .map(|x| x as u64)
        .or_else(|| v.parse::<u64>().ok())
}

/// `line` with every `%name` that `map` knows renamed.
fn rename(line: &str, map: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(line.len() + 32);
    let mut rest = line;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let end = after
            .bytes()
            .position(|b| !super::module::is_ident_byte(b))
            .unwrap_or(after.len());
        let name = &rest[at..at + 1 + end];
        match map(name) {
            Some(new) if end > 0 => out.push_str(&new),
            _ => out.push_str(name),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The rewritten body when a loop of `body` qualifies (the first found), else `None`.
fn hoist_one(body: &[String], id: usize) -> Option<(Vec<String>, Function)> {
    let bs = blocks(body);
    let index: HashMap<&str, usize> = bs
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.label.as_deref().map(|l| (l, i)))
        .collect();
    let succs: Vec<Vec<usize>> = bs
        .iter()
        .map(|b| {
            let mut s = Vec::new();
            for (_, l) in instructions(body, b) {
                if l.contains(" = phi ") {
                    continue;
                }
                for t in super::checks::targets(l) {
                    if let Some(&j) = index.get(t)
                        && !s.contains(&j)
                    {
                        s.push(j);
                    }
                }
            }
            s
        })
        .collect();
    let mut preds = vec![Vec::new(); bs.len()];
    for (i, s) in succs.iter().enumerate() {
        for &j in s {
            preds[j].push(i);
        }
    }
    // The entry: the first block with instructions (a body that opens with a label leaves an
    // empty block before it).
    let entry = bs
        .iter()
        .position(|b| instructions(body, b).next().is_some())?;
    let (idom, depth) = dominators(&succs, &preds, entry);
    let dominates = |a: usize, mut b: usize| -> bool {
        if idom[b].is_none() {
            return false;
        }
        loop {
            if a == b {
                return true;
            }
            match idom[b] {
                Some(p) if p != b => b = p,
                _ => return false,
            }
        }
    };
    for h in 0..bs.len() {
        let latches: Vec<usize> = preds[h]
            .iter()
            .copied()
            .filter(|&p| dominates(h, p))
            .collect();
        let [latch] = latches[..] else { continue };
        let Some(rewritten) = try_loop(
            body, &bs, &index, &succs, &preds, &depth, h, latch, id, &dominates,
        ) else {
            continue;
        };
        return Some(rewritten);
    }
    None
}

/// Immediate dominators (`None` for blocks the entry does not reach; the entry its own) and
/// depths in the dominator tree, by Cooper, Harvey and Kennedy's iteration.
fn dominators(
    succs: &[Vec<usize>],
    preds: &[Vec<usize>],
    entry: usize,
) -> (Vec<Option<usize>>, Vec<usize>) {
    let n = succs.len();
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    // Post-order by an explicit stack.
    let mut stack = vec![(entry, 0usize)];
    seen[entry] = true;
    while let Some(&mut (b, ref mut k)) = stack.last_mut() {
        if *k < succs[b].len() {
            let s = succs[b][*k];
            *k += 1;
            if !seen[s] {
                seen[s] = true;
                stack.push((s, 0));
            }
        } else {
            order.push(b);
            stack.pop();
        }
    }
    let mut rpo_index = vec![usize::MAX; n];
    for (i, &b) in order.iter().rev().enumerate() {
        rpo_index[b] = i;
    }
    let mut idom: Vec<Option<usize>> = vec![None; n];
    idom[entry] = Some(entry);
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().rev().skip(1) {
            let mut new: Option<usize> = None;
            for &p in &preds[b] {
                if idom[p].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(mut x) => {
                        let mut y = p;
                        while x != y {
                            while rpo_index[x] > rpo_index[y] {
                                x = idom[x].expect("processed");
                            }
                            while rpo_index[y] > rpo_index[x] {
                                y = idom[y].expect("processed");
                            }
                        }
                        x
                    }
                });
            }
            if new.is_some() && idom[b] != new {
                idom[b] = new;
                changed = true;
            }
        }
    }
    let mut depth = vec![0usize; n];
    for &b in order.iter().rev().skip(1) {
        if let Some(p) = idom[b] {
            depth[b] = depth[p] + 1;
        }
    }
    (idom, depth)
}

#[allow(clippy::too_many_arguments)]
fn try_loop(
    body: &[String],
    bs: &[super::checks::Block],
    index: &HashMap<&str, usize>,
    succs: &[Vec<usize>],
    preds: &[Vec<usize>],
    depth: &[usize],
    h: usize,
    latch: usize,
    id: usize,
    dominates: &dyn Fn(usize, usize) -> bool,
) -> Option<(Vec<String>, Function)> {
    let header = bs[h].label.as_deref()?;
    // The scan of a loop already rewritten.
    if header.starts_with("berth.hoist.") {
        return None;
    }
    // The loop's blocks: those that reach the latch without passing the header.
    let mut in_loop = vec![false; bs.len()];
    in_loop[h] = true;
    let mut stack = vec![latch];
    while let Some(b) = stack.pop() {
        if !in_loop[b] {
            in_loop[b] = true;
            stack.extend(preds[b].iter().copied());
        }
    }
    let outside: Vec<usize> = preds[h].iter().copied().filter(|&p| !in_loop[p]).collect();
    let [pre] = outside[..] else { return None };
    let pre_label = bs[pre].label.as_deref()?;
    let loop_blocks: Vec<usize> = (0..bs.len()).filter(|&b| in_loop[b]).collect();
    // Nothing in it may stop or leave it but what this rewrite accounts for.
    for &b in &loop_blocks {
        for (_, l) in instructions(body, &bs[b]) {
            if (l.contains("call ") || l.contains("invoke ")) && !l.contains("@llvm.") {
                return None;
            }
            if l.contains(" asm ") || l.contains("%\"") {
                return None;
            }
        }
    }
    // Values defined in the loop.
    let mut def_at: HashMap<&str, (usize, usize)> = HashMap::new();
    for &b in &loop_blocks {
        for (i, l) in instructions(body, &bs[b]) {
            if let Some((name, _)) = definition(l) {
                def_at.insert(name, (b, i));
            }
        }
    }
    // The latch: a branch back to the header or out.
    let (_, latch_term) = terminator(body, &bs[latch])?;
    let (exit_cond, lx, ly) = cond_branch(latch_term)?;
    let continue_if = if lx == header && ly != header {
        true
    } else if ly == header && lx != header {
        false
    } else {
        return None;
    };
    let exit_to = if continue_if { ly } else { lx };
    // The counter: `%c = phi [C0, pre], [%cn, latch]`, `%cn = add %c, -1`, the loop ending
    // when `%cn` is zero.
    let header_phis: Vec<Phi> = instructions(body, &bs[h])
        .filter_map(|(_, l)| {
            let (name, _) = definition(l)?;
            let (ty, pairs) = parse_phi(l)?;
            Some((name, ty, pairs))
        })
        .collect();
    let latch_label = bs[latch].label.as_deref()?;
    let phi_in = |name: &str| -> Option<(String, String)> {
        let (_, _, pairs) = header_phis.iter().find(|(n, _, _)| *n == name)?;
        if pairs.len() != 2 {
            return None;
        }
        let from = |label: &str| {
            pairs
                .iter()
                .find(|(_, l)| *l == label)
                .map(|(v, _)| v.to_string())
        };
        Some((from(pre_label)?, from(latch_label)?))
    };
    let def_line = |v: &str| -> Option<&str> {
        let &(_, i) = def_at.get(v)?;
        Some(body[i].trim())
    };
    let (cn, zero_ends) = {
        let (op, ty, ops) = parse_op(def_line(exit_cond)?)?;
        if op != "icmp" || ty != "i64" || ops[1] != "0" {
            return None;
        }
        match op_pred(def_line(exit_cond)?)? {
            "eq" => (ops[0], !continue_if),
            "ne" => (ops[0], continue_if),
            _ => return None,
        }
    };
    if !zero_ends {
        return None;
    }
    let (op, ty, ops) = parse_op(def_line(cn)?)?;
    if op != "add" || ty != "i64" || ops[1] != "-1" {
        return None;
    }
    let counter = ops[0];
    let (c0, c_next) = phi_in(counter)?;
    if c_next != cn {
        return None;
    }
    // Induction variables: `%t = phi [T0, pre], [%tn, latch]`, `%tn = add %t, s`, the step `s`
    // a literal or a value known before the loop (unsigned: the last step's value, computed
    // without overflow, bounds every step's).
    let mut ivs: HashMap<&str, (String, String)> = HashMap::new();
    for (name, ty, _) in &header_phis {
        if *ty != "i64" {
            continue;
        }
        let Some((start, next)) = phi_in(name) else {
            continue;
        };
        let Some((op, ty, ops)) = def_line(&next).and_then(parse_op) else {
            continue;
        };
        let step = ops.get(1).copied().unwrap_or_default();
        let known = step.parse::<i64>().is_ok_and(|s| s >= 0)
            || (step.starts_with('%') && !def_at.contains_key(step) && !step.contains('"'));
        if op == "add" && ty == "i64" && ops[0] == *name && known {
            ivs.insert(name, (start, step.to_owned()));
        }
    }
    // The check sites: blocks of the loop ending in a check, each running in every step.
    let mut sites: Vec<Site> = Vec::new();
    let mut site_exits: HashSet<(usize, usize)> = HashSet::new();
    for &b in &loop_blocks {
        let Some((_, t)) = terminator(body, &bs[b]) else {
            continue;
        };
        let Some((cond, x, y)) = cond_branch(t) else {
            continue;
        };
        let is_fail = |l: &str| {
            index
                .get(l)
                .is_some_and(|&i| is_index_failure(body, &bs[i]))
        };
        let label = bs[b].label.clone().unwrap_or_default();
        let site = if let Some(report0) = combined_report(cond, y) {
            // A combined check: its tests are the report blocks' conditions, in order.
            let mut tests = Vec::new();
            let mut j = 0;
            loop {
                let r = format!("{report0}{j}");
                let &ri = index.get(r.as_str())?;
                let (_, rt) = terminator(body, &bs[ri])?;
                let ok = format!("%{report0}").replace("report.", "ok.") + &j.to_string();
                if let Some((c, next, fail)) = cond_branch(rt) {
                    if c != ok {
                        return None;
                    }
                    tests.push(Test {
                        cond: c.to_owned(),
                        pass_is: true,
                        fail: fail.to_owned(),
                        edge: r.clone(),
                    });
                    if next != format!("{report0}{}", j + 1) {
                        return None;
                    }
                    j += 1;
                } else {
                    let fail = rt.strip_prefix("br label %")?.trim();
                    tests.push(Test {
                        cond: ok,
                        pass_is: true,
                        fail: fail.to_owned(),
                        edge: r.clone(),
                    });
                    break;
                }
            }
            if !tests.iter().all(|t| is_fail(&t.fail)) {
                return None;
            }
            site_exits.insert((b, *index.get(y)?));
            Site { block: b, tests }
        } else if is_fail(y) && !is_fail(x) {
            site_exits.insert((b, *index.get(y)?));
            Site {
                block: b,
                tests: vec![Test {
                    cond: cond.to_owned(),
                    pass_is: true,
                    fail: y.to_owned(),
                    edge: label,
                }],
            }
        } else if is_fail(x) && !is_fail(y) {
            site_exits.insert((b, *index.get(x)?));
            Site {
                block: b,
                tests: vec![Test {
                    cond: cond.to_owned(),
                    pass_is: false,
                    fail: x.to_owned(),
                    edge: label,
                }],
            }
        } else {
            continue;
        };
        if !dominates(b, latch) {
            return None;
        }
        sites.push(site);
    }
    if sites.is_empty() {
        return None;
    }
    // Its only ways out: the sites' failures and the latch's end.
    let exit_block = *index.get(exit_to)?;
    for &b in &loop_blocks {
        for &s in &succs[b] {
            if in_loop[s] || (b == latch && s == exit_block) || site_exits.contains(&(b, s)) {
                continue;
            }
            return None;
        }
    }
    sites.sort_by_key(|s| depth[s.block]);

    // The bound of every test: the index in the last step against its length.
    let mut e = Emit {
        id,
        fresh: 0,
        lines: Vec::new(),
        ovf: Vec::new(),
        memo: HashMap::new(),
    };
    let mut flags: Vec<String> = vec![e.val(format!("icmp ne i64 {c0}, 0"))];
    let steps_less_one = e.val(format!("add i64 {c0}, -1"));
    let loop_bounds = LoopBounds {
        def_at: &def_at,
        def_line: &def_line,
        ivs: &ivs,
        counter,
        c0: &c0,
        steps_less_one: &steps_less_one,
    };
    for site in &sites {
        for test in &site.tests {
            let (x, len) = bounded_test(&test.cond, test.pass_is, &def_line)?;
            if def_at.contains_key(len.as_str()) {
                return None;
            }
            let bound = loop_bounds.bound(&x, &mut e, 0)?;
            flags.push(e.val(format!("icmp ult i64 {bound}, {len}")));
        }
    }
    for o in std::mem::take(&mut e.ovf) {
        flags.push(e.val(format!("xor i1 {o}, true")));
    }
    let mut all = flags[0].clone();
    for f in &flags[1..] {
        all = e.val(format!("and i1 {all}, {f}"));
    }
    let pre_lines = e.lines;

    // The scan: the loop's index arithmetic step by step, the tests in order.
    let lbl = |n: &str| format!("berth.hoist.{id}.{n}");
    let clone_name = |v: &str| format!("%berth.hoist.{id}.s.{}", &v[1..]);
    let mut state: Vec<String> = Vec::new();
    let mut emitted: HashSet<String> = HashSet::new();
    // The loop-defined values `roots` need, in an order that defines each before its uses;
    // header phis are collected in `state`.
    let need = |roots: Vec<String>,
                state: &mut Vec<String>,
                emitted: &mut HashSet<String>|
     -> Option<Vec<String>> {
        let mut stack = roots;
        let mut lines: Vec<(usize, usize, String)> = Vec::new();
        while let Some(v) = stack.pop() {
            if emitted.contains(&v) || !def_at.contains_key(v.as_str()) {
                continue;
            }
            let &(b, i) = def_at.get(v.as_str())?;
            let l = body[i].trim();
            if b == h && l.contains(" = phi ") {
                if !state.contains(&v) {
                    state.push(v.clone());
                }
                emitted.insert(v);
                continue;
            }
            let (_, op) = definition(l)?;
            if !PURE.contains(&op) {
                return None;
            }
            emitted.insert(v.clone());
            lines.push((depth[b], i, l.to_owned()));
            stack.extend(operands(l).into_iter().map(str::to_owned));
        }
        lines.sort();
        Some(lines.into_iter().map(|(_, _, l)| l).collect())
    };
    let map =
        |name: &str| -> Option<String> { def_at.contains_key(name).then(|| clone_name(name)) };
    let mut scan_blocks: Vec<String> = Vec::new();
    let mut fail_blocks: Vec<String> = Vec::new();
    let tests: Vec<&Test> = sites.iter().flat_map(|s| s.tests.iter()).collect();
    for (j, test) in tests.iter().enumerate() {
        // The failure block's report, its phis' values taken from the test's edge.
        let fi = *index.get(test.fail.as_str())?;
        let mut phis: HashMap<String, String> = HashMap::new();
        let mut call = None;
        for (_, l) in instructions(body, &bs[fi]) {
            if l.contains(" = phi ") {
                let (name, _) = definition(l)?;
                let v = phi_value(l, &test.edge)
                    .map(str::to_owned)
                    .or_else(|| phi_literal(l, &test.edge))?;
                phis.insert(name.to_owned(), v);
            } else if call.is_none() {
                call = Some(l.to_owned());
            }
        }
        let call = call?;
        let call = rename(&call, &|n| phis.get(n).cloned());
        let mut roots: Vec<String> = operands(&call).into_iter().map(str::to_owned).collect();
        roots.push(test.cond.clone());
        let lines = need(roots, &mut state, &mut emitted)?;
        scan_blocks.push(String::new());
        scan_blocks.push(format!("{}:", lbl(&format!("test.{j}"))));
        scan_blocks.extend(lines.iter().map(|l| format!("  {}", rename(l, &map))));
        let next = if j + 1 < tests.len() {
            lbl(&format!("test.{}", j + 1))
        } else {
            lbl("next")
        };
        let cond = rename(&test.cond, &map);
        let fail = lbl(&format!("fail.{j}"));
        scan_blocks.push(if test.pass_is {
            format!("  br i1 {cond}, label %{next}, label %{fail}")
        } else {
            format!("  br i1 {cond}, label %{fail}, label %{next}")
        });
        fail_blocks.push(String::new());
        fail_blocks.push(format!("{fail}:"));
        fail_blocks.push(format!("  {}", rename(&call, &map)));
        fail_blocks.push("  unreachable".to_owned());
    }
    // The step: the state's next values and the latch's test.
    let mut roots = vec![exit_cond.to_owned()];
    let mut k = 0;
    let mut state_next: Vec<(String, String, String, String)> = Vec::new();
    let mut next_lines: Vec<String> = Vec::new();
    loop {
        let more = need(roots.clone(), &mut state, &mut emitted)?;
        next_lines.extend(more);
        roots.clear();
        while k < state.len() {
            let v = state[k].clone();
            let (start, next) = phi_in(&v)?;
            let (_, ty, _) = header_phis.iter().find(|(n, _, _)| **n == v)?;
            roots.push(next.clone());
            state_next.push((v, ty.to_string(), start, next));
            k += 1;
        }
        if roots.is_empty() {
            break;
        }
    }
    let mut scan = vec![String::new(), format!("{}:", lbl("scan"))];
    for (v, ty, start, next) in &state_next {
        let start = rename(start, &map);
        let next = rename(next, &map);
        scan.push(format!(
            "  {} = phi {ty} [ {start}, %{} ], [ {next}, %{} ]",
            clone_name(v),
            lbl("pre"),
            lbl("next")
        ));
    }
    scan.push(format!("  br label %{}", lbl("test.0")));
    scan.extend(scan_blocks);
    scan.push(String::new());
    scan.push(format!("{}:", lbl("next")));
    scan.extend(next_lines.iter().map(|l| format!("  {}", rename(l, &map))));
    let exit_cond_c = rename(exit_cond, &map);
    scan.push(if continue_if {
        format!(
            "  br i1 {exit_cond_c}, label %{}, label %{}",
            lbl("scan"),
            lbl("go")
        )
    } else {
        format!(
            "  br i1 {exit_cond_c}, label %{}, label %{}",
            lbl("go"),
            lbl("scan")
        )
    });
    scan.extend(fail_blocks);

    // The rewrite: the preheader enters through the bounds, the sites run straight on.
    let site_lines: HashSet<usize> = sites
        .iter()
        .map(|s| {
            terminator(body, &bs[s.block])
                .expect("a site ends in a branch")
                .0
        })
        .collect();
    let mut out: Vec<String> = Vec::with_capacity(body.len() + pre_lines.len() + scan.len() + 8);
    let mut current: Option<usize> = Some(0);
    for (i, line) in body.iter().enumerate() {
        if let Some(l) = label_of(line) {
            current = index.get(l).copied();
        }
        let here = current;
        if site_lines.contains(&i) {
            let (cond, x, _) = cond_branch(line.trim())?;
            let keep_ok = if in_loop[*index.get(x)?] {
                "true"
            } else {
                "false"
            };
            out.push(line.replacen(&format!("br i1 {cond},"), &format!("br i1 {keep_ok},"), 1));
            continue;
        }
        if here == Some(pre)
            && !line.contains(" = phi ")
            && line.contains(&format!("label %{header}"))
        {
            out.push(rename(line, &|n| {
                (n == format!("%{header}")).then(|| format!("%{}", lbl("pre")))
            }));
            continue;
        }
        if here == Some(h) && line.contains(" = phi ") {
            out.push(rename(line, &|n| {
                (n == format!("%{pre_label}")).then(|| format!("%{}", lbl("go")))
            }));
            continue;
        }
        out.push(line.clone());
    }
    // The scan, a function of its own, called only when a bound fails: inline, its loop of
    // checks (each a way to a trap) before the main loop costs that loop more registers than
    // the call does (see the module's notes).
    let (scan_fn, args) = outline(&scan, id, &lbl("pre"), &lbl("go"))?;
    out.push(String::new());
    out.push(format!("{}:", lbl("pre")));
    out.extend(pre_lines);
    out.push(format!(
        "  br i1 {all}, label %{}, label %{}",
        lbl("go"),
        lbl("slow")
    ));
    out.push(String::new());
    out.push(format!("{}:", lbl("slow")));
    out.push(format!("  call void @berth.hoist.scan.{id}({args})"));
    out.push(format!("  br label %{}", lbl("go")));
    out.push(String::new());
    out.push(format!("{}:", lbl("go")));
    out.push(format!("  br label %{header}"));
    Some((out, scan_fn))
}

/// The scan's blocks as a function of the values they use from the kernel: the function,
/// and the arguments of its call.
fn outline(scan: &[String], id: usize, entry: &str, done: &str) -> Option<(Function, String)> {
    let defined: HashSet<&str> = scan
        .iter()
        .filter_map(|l| definition(l.trim()).map(|(n, _)| n))
        .collect();
    let labels: HashSet<String> = scan
        .iter()
        .filter_map(|l| label_of(l).map(|l| format!("%{l}")))
        .chain([format!("%{entry}"), format!("%{done}")])
        .collect();
    let mut params: Vec<(String, String)> = Vec::new();
    for l in scan {
        let l = l.trim();
        for v in operands(l) {
            if defined.contains(v) || labels.contains(v) || params.iter().any(|(p, _)| p == v) {
                continue;
            }
            params.push((v.to_owned(), type_of_use(l, v)?));
        }
    }
    let param = |v: &str| format!("%berth.hoist.{id}.in.{}", &v[1..]);
    let map = |n: &str| -> Option<String> { params.iter().any(|(p, _)| p == n).then(|| param(n)) };
    let mut body = vec![
        format!("{entry}:"),
        format!("  br label %{}", scan[1].trim_end_matches(':')),
    ];
    for l in scan {
        // Attached metadata (scoped aliasing, locations) names the kernel's scopes.
        let l = match l.find(", !") {
            Some(at) => l[..at].to_owned(),
            None => l.clone(),
        };
        body.push(rename(&l, &map));
    }
    body.push(String::new());
    body.push(format!("{done}:"));
    body.push("  ret void".to_owned());
    let name = format!("berth.hoist.scan.{id}");
    let header = format!(
        "define internal void @{name}({}) unnamed_addr cold noinline nounwind {{",
        params
            .iter()
            .map(|(v, ty)| format!("{ty} {}", param(v)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let args = params
        .iter()
        .map(|(v, ty)| format!("{ty} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    Some((Function { name, header, body }, args))
}

/// The type of value `v` where instruction `line` uses it.
fn type_of_use(line: &str, v: &str) -> Option<String> {
    let is_type = |t: &str| {
        t == "ptr"
            || t == "float"
            || t == "double"
            || t == "half"
            || (t.len() > 1 && t.starts_with('i') && t[1..].bytes().all(|b| b.is_ascii_digit()))
    };
    // The word before it, when that is a type (`i64 noundef %2` in a call: the one before
    // the attributes).
    let at = line.match_indices(v).map(|(i, _)| i).find(|&i| {
        !line[i + v.len()..]
            .bytes()
            .next()
            .is_some_and(super::module::is_ident_byte)
    })?;
    let words: Vec<&str> = line[..at].split_whitespace().collect();
    for w in words.iter().rev() {
        let w = w.trim_end_matches(',');
        if is_type(w) {
            return Some(w.to_owned());
        }
        if matches!(w, "noundef" | "nonnull" | "signext" | "zeroext" | "inreg") {
            continue;
        }
        break;
    }
    if line.contains(" = phi ") {
        return parse_phi(line).map(|(ty, _)| ty.to_owned());
    }
    let (op, ty, _) = parse_op(line)?;
    (PURE.contains(&op) && op != "select" && op != "getelementptr").then(|| ty.to_owned())
}

/// In a phi line, a literal value coming from `label`.
fn phi_literal(line: &str, label: &str) -> Option<String> {
    let (_, pairs) = parse_phi(line)?;
    pairs
        .iter()
        .find(|(_, l)| *l == label)
        .map(|(v, _)| v.to_string())
}

/// The predicate of an `icmp` line.
fn op_pred(line: &str) -> Option<&str> {
    let (_, rhs) = line.split_once(" = icmp ")?;
    rhs.split_whitespace().find(|w| *w != "samesign")
}

/// For `br i1 %berth.chk.N.all.K, label %ok, label %berth.chk.N.report.0`: the report
/// blocks' common prefix, `berth.chk.N.report.`.
fn combined_report<'a>(cond: &str, fail: &'a str) -> Option<&'a str> {
    let rest = cond.strip_prefix("%berth.chk.")?;
    let (n, _) = rest.split_once(".all.")?;
    let prefix = fail.strip_suffix('0')?;
    (prefix == format!("berth.chk.{n}.report.")).then_some(prefix)
}

/// For a test's condition: `(index, length)` when it passes exactly if `index < length`
/// (unsigned).
fn bounded_test<'a>(
    cond: &str,
    pass_is: bool,
    def_line: &dyn Fn(&str) -> Option<&'a str>,
) -> Option<(String, String)> {
    let mut cond = cond.to_owned();
    let mut pass_is = pass_is;
    // Through the combined checks' `freeze` and `xor ..., true`.
    loop {
        let l = def_line(&cond)?;
        let (op, _, ops) = parse_op(l)?;
        match op {
            "freeze" => cond = ops[0].to_owned(),
            "xor" if ops[1] == "true" => {
                cond = ops[0].to_owned();
                pass_is = !pass_is;
            }
            "icmp" => {
                let (a, b) = (ops[0].to_owned(), ops[1].to_owned());
                let (_, ty, _) = parse_op(l)?;
                if ty != "i64" {
                    return None;
                }
                return match (op_pred(l)?, pass_is) {
                    ("ult", true) | ("uge", false) => Some((a, b)),
                    ("ugt", true) | ("ule", false) => Some((b, a)),
                    _ => None,
                };
            }
            _ => return None,
        }
    }
}

/// The lines computing the bounds, before the loop.
struct Emit {
    id: usize,
    fresh: usize,
    lines: Vec<String>,
    /// Flags of intermediate values past 64 bits.
    ovf: Vec<String>,
    /// The bound of each value already computed.
    memo: HashMap<String, String>,
}

impl Emit {
    /// A new value computed by `rhs`: its name.
    fn val(&mut self, rhs: String) -> String {
        self.fresh += 1;
        let v = format!("%berth.hoist.{}.b.{}", self.id, self.fresh);
        self.lines.push(format!("  {v} = {rhs}"));
        v
    }

    /// `a op b` (`add` or `mul`, unsigned), its overflow noted.
    fn checked(&mut self, op: &str, a: &str, b: &str) -> String {
        let r = self.val(format!(
            "call {{ i64, i1 }} @llvm.u{op}.with.overflow.i64(i64 {a}, i64 {b})"
        ));
        let o = self.val(format!("extractvalue {{ i64, i1 }} {r}, 1"));
        self.ovf.push(o);
        self.val(format!("extractvalue {{ i64, i1 }} {r}, 0"))
    }
}

/// What bounds a loop's values: its definitions, induction variables and counter.
struct LoopBounds<'a, 'b> {
    def_at: &'b HashMap<&'a str, (usize, usize)>,
    def_line: &'b dyn Fn(&str) -> Option<&'a str>,
    ivs: &'b HashMap<&'a str, (String, String)>,
    counter: &'b str,
    /// The counter's start (the number of steps).
    c0: &'b str,
    /// The number of steps less one.
    steps_less_one: &'b str,
}

impl LoopBounds<'_, '_> {
    /// Emit the computation (in `i128`) of a bound of `v` over every step of the loop: the
    /// name or literal of the bound. Intermediate values past 64 bits are flagged in `e.ovf`.
    fn bound(&self, v: &str, e: &mut Emit, depth: usize) -> Option<String> {
        if depth > 32 {
            return None;
        }
        if literal(v).is_some() {
            return Some(v.to_owned());
        }
        if !v.starts_with('%') {
            return None;
        }
        if let Some(b) = e.memo.get(v) {
            return Some(b.clone());
        }
        let b = if !self.def_at.contains_key(v) {
            // Known before the loop.
            v.to_owned()
        } else if v == self.counter {
            // It counts down from its start.
            self.c0.to_owned()
        } else if let Some((start, step)) = self.ivs.get(v) {
            let d = e.checked("mul", self.steps_less_one, step);
            e.checked("add", start, &d)
        } else {
            let l = (self.def_line)(v)?;
            if l.contains(" = phi ") {
                return None;
            }
            let (op, ty, ops) = parse_op(l)?;
            if ty != "i64" || ops.len() != 2 {
                return None;
            }
            match op {
                // `a | b <= a + b`.
                "add" | "or" | "mul" => {
                    let a = self.bound(ops[0], e, depth + 1)?;
                    let b = self.bound(ops[1], e, depth + 1)?;
                    e.checked(if op == "mul" { "mul" } else { "add" }, &a, &b)
                }
                "shl" => {
                    let k = literal(ops[1]).filter(|&k| k < 64)?;
                    let a = self.bound(ops[0], e, depth + 1)?;
                    e.checked("mul", &a, &(1u64 << k).to_string())
                }
                "lshr" => {
                    let k = literal(ops[1]).filter(|&k| k < 64)?;
                    let a = self.bound(ops[0], e, depth + 1)?;
                    e.val(format!("lshr i64 {a}, {k}"))
                }
                "udiv" => {
                    let d = literal(ops[1]).filter(|&d| d > 0)?;
                    let a = self.bound(ops[0], e, depth + 1)?;
                    e.val(format!("udiv i64 {a}, {d}"))
                }
                // `a & m <= m`.
                "and" => literal(ops[1])?.to_string(),
                _ => return None,
            }
        };
        e.memo.insert(v.to_owned(), b.clone());
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `step_by(16)` loop (a counter of steps down to zero) reading `a[t + base]`, checked.
    const LOOP: &str = "target triple = \"nvptx64-nvidia-cuda\"
@loc = private constant [24 x i8] zeroinitializer, align 8
declare void @_RNvNtNtCs1_12berth_device5panic3gpu13index_failure(i64, i64, ptr)
define ptx_kernel void @k(ptr %a, i64 %len, i64 %n, i64 %base) {
start:
  %c0 = lshr i64 %n, 4
  %z = icmp eq i64 %c0, 0
  br i1 %z, label %exit, label %pre

pre:
  br label %head

head:
  %t = phi i64 [ 0, %pre ], [ %tn, %body ]
  %c = phi i64 [ %c0, %pre ], [ %cn, %body ]
  %acc = phi float [ 0.0, %pre ], [ %acc2, %body ]
  %tn = add nuw i64 %t, 16
  %cn = add i64 %c, -1
  %i = add nuw i64 %t, %base
  %ok = icmp ult i64 %i, %len
  br i1 %ok, label %body, label %fail, !prof !1

body:
  %p = getelementptr inbounds float, ptr %a, i64 %i
  %v = load float, ptr %p, align 4
  %acc2 = fadd float %acc, %v
  %e = icmp eq i64 %cn, 0
  br i1 %e, label %exit, label %head

fail:
  %x = phi i64 [ %i, %head ]
  tail call void @_RNvNtNtCs1_12berth_device5panic3gpu13index_failure(i64 %x, i64 %len, ptr @loc)
  unreachable

exit:
  %r = phi float [ 0.0, %start ], [ %acc2, %body ]
  store float %r, ptr %a, align 4
  ret void
}
!1 = !{!\"branch_weights\", i32 2000, i32 1}
";

    #[test]
    fn a_counted_loop_checks_its_last_step_before_it_and_runs_without_the_check() {
        let mut m = Module::parse(LOOP);
        assert_eq!(hoist(&mut m, &[]), 1);
        let out = m.to_string();
        // The loop's check branch runs straight on; the failure block is still reachable in
        // the text (its phi keeps its way in), from nowhere.
        assert!(
            out.contains("br i1 true, label %body, label %fail, !prof !1"),
            "{out}"
        );
        // The preheader enters through the bound: the last step's index, `base + 16 (c0 - 1)`,
        // against the length, every sum and product checked for overflow.
        for want in [
            "br label %berth.hoist.1.pre",
            "%t = phi i64 [ 0, %berth.hoist.1.go ], [ %tn, %body ]",
            "%berth.hoist.1.b.1 = icmp ne i64 %c0, 0",
            "%berth.hoist.1.b.2 = add i64 %c0, -1",
            "call { i64, i1 } @llvm.umul.with.overflow.i64(i64 %berth.hoist.1.b.2, i64 16)",
            "call { i64, i1 } @llvm.uadd.with.overflow.i64(i64 0, i64 %berth.hoist.1.b.5)",
            "label %berth.hoist.1.go, label %berth.hoist.1.slow",
            "berth.hoist.1.go:\n  br label %head",
        ] {
            assert!(out.contains(want), "{want} not in\n{out}");
        }
        // The scan: the loop's arithmetic alone, its check, and the report with the scan's
        // index; a function of the values it needs, called on the rare way.
        let scan = &out[out
            .find("define internal void @berth.hoist.scan.1(")
            .unwrap()..];
        for want in [
            "i64 %berth.hoist.1.in.c0",
            "%berth.hoist.1.s.t = phi i64 [ 0, %berth.hoist.1.pre ], [ %berth.hoist.1.s.tn, %berth.hoist.1.next ]",
            "%berth.hoist.1.s.i = add nuw i64 %berth.hoist.1.s.t, %berth.hoist.1.in.base",
            "%berth.hoist.1.s.ok = icmp ult i64 %berth.hoist.1.s.i, %berth.hoist.1.in.len",
            "index_failure(i64 %berth.hoist.1.s.i, i64 %berth.hoist.1.in.len, ptr @loc)",
            "br i1 %berth.hoist.1.s.e, label %berth.hoist.1.go, label %berth.hoist.1.scan",
        ] {
            assert!(scan.contains(want), "{want} not in\n{scan}");
        }
        assert!(!scan.contains("load "), "{scan}");
        assert!(out.contains("call void @berth.hoist.scan.1("), "{out}");
        // Nothing is taken twice.
        let mut again = Module::parse(&out);
        assert_eq!(hoist(&mut again, &[]), 0);
        // A step known before the loop (`step_by(s)`) bounds it as a literal does.
        let mut m = Module::parse(&LOOP.replace("add nuw i64 %t, 16", "add nuw i64 %t, %n"));
        assert_eq!(hoist(&mut m, &[]), 1);
        let out = m.to_string();
        assert!(
            out.contains("@llvm.umul.with.overflow.i64(i64 %berth.hoist.1.b.2, i64 %n)"),
            "{out}"
        );
    }

    #[test]
    fn a_loop_that_may_stop_or_leave_otherwise_or_index_by_memory_keeps_its_checks() {
        for (what, from, to) in [
            (
                "a call",
                "  %acc2 = fadd float %acc, %v\n",
                "  %acc2 = fadd float %acc, %v\n  call void @other()\n",
            ),
            (
                "an end that is not a counter's",
                "  %e = icmp eq i64 %cn, 0\n",
                "  %e = fcmp olt float %v, 0.0\n",
            ),
            (
                "another way out",
                "body:\n  %p",
                "body:\n  %q = icmp eq i64 %t, 32\n  br i1 %q, label %exit, label %more\n\nmore:\n  %p",
            ),
            (
                "an index read from memory",
                "  %i = add nuw i64 %t, %base\n",
                "  %b = load i64, ptr %a, align 8\n  %i = add nuw i64 %t, %b\n",
            ),
            (
                "an index that steps down",
                "  %i = add nuw i64 %t, %base\n",
                "  %i = sub i64 %base, %t\n",
            ),
        ] {
            let text = LOOP.replace(from, to);
            assert_ne!(text, LOOP, "{what}");
            let mut m = Module::parse(&text);
            assert_eq!(hoist(&mut m, &[]), 0, "{what}");
            assert_eq!(m.to_string(), text, "{what}");
        }
        // A kernel the builder keeps as written.
        let mut m = Module::parse(LOOP);
        assert_eq!(hoist(&mut m, &["k"]), 0);
    }
}
