//! Reading `.entry` signatures out of PTX text, and checking them against launchers.

use crate::error::{Error, Result};
use crate::launch::Kernel;

/// One `.param` of an entry: its declared name and size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxParam {
    /// The PTX parameter name.
    pub name: String,
    /// Size in bytes.
    pub size: usize,
}

/// One `.entry` of a PTX module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// Entry name.
    pub name: String,
    /// Parameters in order.
    pub params: Vec<PtxParam>,
}

fn type_size(ty: &str) -> Option<usize> {
    let bits: usize = ty
        .trim_start_matches('.')
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .ok()?;
    Some(if ty.ends_with("pred") { 1 } else { bits / 8 })
}

fn parse_param(decl: &str) -> Option<PtxParam> {
    // `.param .u64 name`, `.param .align 4 .b8 name[12]`, `.param .u64 .ptr .global name`.
    let toks: Vec<&str> = decl.split_whitespace().collect();
    if toks.first() != Some(&".param") {
        return None;
    }
    let mut ty = None;
    let mut i = 1;
    while i < toks.len() {
        let t = toks[i];
        if t == ".align" {
            i += 2;
            continue;
        }
        if t.starts_with('.') {
            if ty.is_none() && t != ".ptr" {
                ty = Some(t);
            }
            i += 1;
            continue;
        }
        break;
    }
    let last = toks.get(i)?;
    let elem = type_size(ty?)?;
    let (name, count) = match last.split_once('[') {
        Some((n, rest)) => (n, rest.trim_end_matches(']').parse().ok()?),
        None => (*last, 1usize),
    };
    Some(PtxParam {
        name: name.to_owned(),
        size: elem * count,
    })
}

/// Every `.entry` in `ptx`, with its parameters.
pub fn entries(ptx: &str) -> Vec<PtxEntry> {
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(pos) = rest.find(".entry ") {
        rest = &rest[pos + ".entry ".len()..];
        let name_end = rest.find(['(', '{', ' ', '\n']).unwrap_or(rest.len());
        let name = rest[..name_end].trim().to_owned();
        let after = rest[name_end..].trim_start();
        let params = if after.starts_with('(') {
            let close = after.find(')').unwrap_or(after.len());
            after[1..close]
                .split(',')
                .filter_map(|d| parse_param(d.trim()))
                .collect()
        } else {
            Vec::new()
        };
        out.push(PtxEntry { name, params });
    }
    out
}

/// Byte-array globals with initialisers (`.global .align 1 .b8 NAME[N] = {..};`): where
/// constant strings (file names of panic locations) live. Returns (name, bytes).
pub fn byte_globals(ptx: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for line in ptx.lines() {
        let line = line.trim();
        if !(line.starts_with(".global")
            || line.starts_with(".visible .global")
            || line.starts_with(".const"))
        {
            continue;
        }
        let Some((decl, init)) = line.split_once(" = {") else {
            continue;
        };
        let Some(pos) = decl.find(".b8 ") else {
            continue;
        };
        let Some((name, count)) = decl[pos + 4..].trim().split_once('[') else {
            continue;
        };
        let Ok(count) = count.trim_end_matches(']').parse::<usize>() else {
            continue;
        };
        let mut bytes: Vec<u8> = init
            .trim_end_matches("};")
            .split(',')
            .filter_map(|b| b.trim().parse().ok())
            .collect();
        bytes.resize(count, 0);
        out.push((name.to_owned(), bytes));
    }
    out
}

/// Check that `kernel`'s PTX entry has exactly the parameters its launcher passes.
pub fn check_kernel(kernel: &Kernel) -> Result<()> {
    let fail = |reason: String| {
        Err(Error::Module {
            kernel: kernel.name,
            reason,
        })
    };
    let all = entries(kernel.ptx);
    let Some(entry) = all.iter().find(|e| e.name == kernel.name) else {
        return fail(format!(
            "no `.entry {}` in the PTX of crate `{}`; rebuild it",
            kernel.name, kernel.crate_name
        ));
    };
    if entry.params.len() != kernel.params.len() {
        return fail(format!(
            "the PTX entry has {} parameters, the launcher passes {}",
            entry.params.len(),
            kernel.params.len()
        ));
    }
    for (i, (p, l)) in entry.params.iter().zip(kernel.params).enumerate() {
        if p.size != l.size {
            return fail(format!(
                "parameter {i} (`{}`): {} bytes in the PTX, {} in the launcher",
                l.name, p.size, l.size
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_byte_globals() {
        let ptx = ".global .align 1 .b8 anon_$_1[4] = {97, 98, 99};\n.visible .global .align 8 .b8 __berth_panic_record[8];\n";
        assert_eq!(
            byte_globals(ptx),
            vec![("anon_$_1".to_owned(), vec![97, 98, 99, 0])]
        );
    }

    #[test]
    fn parses_entries_and_params() {
        let ptx = r#"
.version 7.8
.target sm_90
.address_size 64
.visible .entry saxpy(
	.param .f32 saxpy_param_0,
	.param .u64 .ptr .global .align 4 saxpy_param_1,
	.param .u64 saxpy_param_2,
	.param .align 4 .b8 saxpy_param_3[12],
	.param .u8 saxpy_param_4
)
{ ret; }
.visible .entry empty()
{ ret; }
"#;
        let e = entries(ptx);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "saxpy");
        let sizes: Vec<usize> = e[0].params.iter().map(|p| p.size).collect();
        assert_eq!(sizes, vec![4, 8, 8, 12, 1]);
        assert_eq!(e[0].params[3].name, "saxpy_param_3");
        assert_eq!(e[1].name, "empty");
        assert!(e[1].params.is_empty());
    }
}
