//! Which kernels reach which functions: the call graph of the kernel program's IR, read from
//! the functions' bodies (calls and the addresses of functions taken alike), before `opt`
//! inlines the callees into the kernels and their names are gone.

use super::Module;
use super::module::is_ident_byte;
use std::collections::{HashMap, HashSet};

/// The kernels of `module` (their entries' names, a one-dimensional entry's under its
/// kernel's: [`berth_abi::kernel_of_entry`]) whose code reaches, directly or through
/// the functions it calls, a function that `wanted` says yes to (defined in the module or
/// only declared), in the module's order, each once.
pub fn kernels_reaching(module: &Module, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let callees: HashMap<&str, Vec<&str>> = module
        .functions()
        .map(|f| {
            let names = f.body.iter().flat_map(|l| referenced(l)).collect();
            (f.name.as_str(), names)
        })
        .collect();
    let mut out: Vec<String> = Vec::new();
    for kernel in module.functions().filter(|f| f.is_kernel()) {
        let mut seen = HashSet::new();
        let mut todo = vec![kernel.name.as_str()];
        let mut reaches = false;
        while let Some(f) = todo.pop() {
            if !seen.insert(f) {
                continue;
            }
            if f != kernel.name && wanted(f) {
                reaches = true;
                break;
            }
            todo.extend(callees.get(f).into_iter().flatten());
        }
        let name = berth_abi::kernel_of_entry(&kernel.name, |n| {
            module.functions().any(|f| f.is_kernel() && f.name == n)
        });
        if reaches && !out.iter().any(|k| k == name) {
            out.push(name.to_owned());
        }
    }
    out
}

/// Whether `name` is a function of device math: libdevice's (`__nv_*`) or the `libm` crate's,
/// which berth's device math calls where libdevice is not linked.
pub fn is_device_math(name: &str) -> bool {
    name.starts_with("__nv_") || in_crate(name, "libm")
}

/// Whether the Rust symbol `name` (v0 or legacy mangling) is a path in the crate `krate`.
fn in_crate(name: &str, krate: &str) -> bool {
    let tag = format!("{}{krate}", krate.len());
    if let Some(v0) = name.strip_prefix("_R") {
        // `_RNvNtCs<hash>_4libm4math3exp`: the crate root is `C`, a disambiguator
        // (`s<base62>_`), then the name's length and the name.
        return v0
            .match_indices('C')
            .any(|(i, _)| root_named(&v0[i + 1..], &tag));
    }
    name.strip_prefix("_ZN")
        .is_some_and(|legacy| legacy.starts_with(&tag))
}

/// Whether a v0 crate root after its `C` is `[s<base62>_]<tag>`.
fn root_named(after_c: &str, tag: &str) -> bool {
    let rest = match after_c.strip_prefix('s') {
        Some(s) => match s.split_once('_') {
            Some((hash, rest)) if hash.bytes().all(|b| b.is_ascii_alphanumeric()) => rest,
            _ => return false,
        },
        None => after_c,
    };
    rest.starts_with(tag)
}

/// The names of the globals and functions a line of IR refers to (`@name`, `@"name"`).
fn referenced(line: &str) -> impl Iterator<Item = &str> {
    line.match_indices('@').filter_map(move |(i, _)| {
        let rest = &line[i + 1..];
        if let Some(quoted) = rest.strip_prefix('"') {
            return quoted.split('"').next();
        }
        let end = rest
            .bytes()
            .position(|b| !is_ident_byte(b))
            .unwrap_or(rest.len());
        (end > 0).then(|| &rest[..end])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const IR: &str = r#"declare float @__nv_expf(float)
define internal float @_RNvNtNtCs6uohfjjD6IP_4libm4math3exp3exp(double %x) {
  ret double %x
}
define internal float @helper(float %x) {
  %r = call float @__nv_expf(float %x)
  ret float %r
}
define internal double @uses_libm(double %x) {
  %r = call double @_RNvNtNtCs6uohfjjD6IP_4libm4math3exp3exp(double %x)
  ret double %r
}
define ptx_kernel void @plain(ptr %p) {
  store float 1.0, ptr %p
  ret void
}
define ptx_kernel void @exp_kernel(ptr %p) {
  %r = call float @helper(float 1.0)
  ret void
}
define ptx_kernel void @exp_kernel__berth_1d(ptr %p) {
  %r = tail call float @helper(float 1.0)
  ret void
}
define ptx_kernel void @exp_kernel__berth_2d(ptr %p) {
  %r = tail call float @helper(float 1.0)
  ret void
}
define ptx_kernel void @"portable"(ptr %p) {
  %f = select i1 true, ptr @uses_libm, ptr null
  ret void
}
"#;

    #[test]
    fn kernels_reaching_math_are_found_through_calls_and_addresses() {
        let module = Module::parse(IR);
        assert_eq!(
            kernels_reaching(&module, is_device_math),
            ["exp_kernel", "portable"]
        );
        assert_eq!(kernels_reaching(&module, |f| f == "helper"), ["exp_kernel"]);
        assert!(kernels_reaching(&module, |_| false).is_empty());
    }

    #[test]
    fn device_math_is_libdevice_and_the_libm_crate() {
        assert!(is_device_math("__nv_powf"));
        assert!(is_device_math("_RNvNtNtCs6uohfjjD6IP_4libm4math3exp3exp"));
        assert!(is_device_math("_RNvNtCs1_4libm3pow"));
        assert!(is_device_math("_ZN4libm4math3exp3exp17h0123456789abcdefE"));
        // A crate whose name begins with `libm`, a function named `libm`, other crates.
        assert!(!is_device_math("_RNvNtCs1_7libmore3pow"));
        assert!(!is_device_math("_RNvNtCs1_12berth_device4libm"));
        assert!(!is_device_math("_ZN12berth_device4libm3expE"));
        assert!(!is_device_math("_RNvNtCs1_12berth_device4math3exp"));
        assert!(!is_device_math("expf"));
    }
}
