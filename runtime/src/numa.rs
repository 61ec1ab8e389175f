//! Host memory near a device: which NUMA node a GPU's PCI link hangs off (Linux's sysfs), and
//! running an allocation on a thread bound to that node's CPUs, so that the pages it pins come
//! from the node's own memory rather than from wherever the calling thread runs.
//!
//! On a machine with one GPU per socket, a pipeline streaming through both GPUs at once moves
//! four streams of host memory (each GPU's copies in and out). Pages on the other socket cross
//! the link between the sockets on their way to the GPU; pages on the GPU's own node do not.
//! Nothing here calls the driver: the backend reads the device's PCI address, this module
//! turns it into a node and the node into CPUs.

use std::path::Path;

/// The sysfs name of a PCI function: `0000:1b:00.0`.
pub(crate) fn pci_name(domain: u32, bus: u32, device: u32) -> String {
    format!("{domain:04x}:{bus:02x}:{device:02x}.0")
}

/// The NUMA node of the PCI function `pci` (as [`pci_name`] writes it), read under `sysfs`
/// (`/sys` on a live system); `None` where the system does not say (no file, or `-1` on a
/// machine with one node).
pub(crate) fn node_of(sysfs: &Path, pci: &str) -> Option<u32> {
    let text =
        std::fs::read_to_string(sysfs.join("bus/pci/devices").join(pci).join("numa_node")).ok()?;
    text.trim()
        .parse::<i64>()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
}

/// The CPUs of NUMA node `node`, read under `sysfs`; `None` where the node is unknown or its
/// list cannot be read.
pub(crate) fn cpus_of(sysfs: &Path, node: u32) -> Option<Vec<usize>> {
    let path = sysfs.join(format!("devices/system/node/node{node}/cpulist"));
    parse_cpulist(std::fs::read_to_string(path).ok()?.trim())
}

/// A kernel CPU list (`0-31,64-95`, `3`, `0,2,4-7`) as the CPUs it names; `None` if malformed
/// or empty.
pub(crate) fn parse_cpulist(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (a, b): (usize, usize) = match part.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let a = part.parse().ok()?;
                (a, a)
            }
        };
        if b < a {
            return None;
        }
        cpus.extend(a..=b);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// Run `f` on a thread bound to `cpus` and return what it returns (a panic in `f` goes on to
/// the caller). Under Linux's default memory policy, pages the thread allocates and touches
/// come from the node those CPUs belong to. Where the thread cannot be bound, `f` still runs
/// there, unbound.
pub(crate) fn on_cpus<R: Send>(cpus: &[usize], f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            bind_current_thread(cpus);
            f()
        });
        match worker.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(target_os = "linux")]
fn bind_current_thread(cpus: &[usize]) {
    // SAFETY: `cpu_set_t` is plain data for which all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let room = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus.iter().filter(|&&c| c < room) {
        // SAFETY: `c` is below the set's capacity in bits, checked above.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid CPU set of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        tracing::debug!(
            error = %std::io::Error::last_os_error(),
            "could not bind the allocating thread to its device's NUMA node; allocating unbound"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn bind_current_thread(_cpus: &[usize]) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cpulist("0-3"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpulist("0-1,64-65"), Some(vec![0, 1, 64, 65]));
        assert_eq!(parse_cpulist("5"), Some(vec![5]));
        assert_eq!(parse_cpulist("0,2,4-5"), Some(vec![0, 2, 4, 5]));
        assert_eq!(parse_cpulist(""), None);
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("a-b"), None);
    }

    #[test]
    fn a_device_node_and_its_cpus_are_read_from_sysfs() {
        let root = std::env::temp_dir().join(format!("berth-numa-{}", std::process::id()));
        let dev = root.join("bus/pci/devices").join(pci_name(0, 0x1b, 0));
        let single = root.join("bus/pci/devices").join(pci_name(0, 0x9a, 0));
        let node = root.join("devices/system/node/node1");
        for d in [&dev, &single, &node] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(dev.join("numa_node"), "1\n").unwrap();
        std::fs::write(single.join("numa_node"), "-1\n").unwrap();
        std::fs::write(node.join("cpulist"), "32-33,96\n").unwrap();
        assert_eq!(pci_name(0, 0x1b, 0), "0000:1b:00.0");
        assert_eq!(node_of(&root, "0000:1b:00.0"), Some(1));
        assert_eq!(
            node_of(&root, "0000:9a:00.0"),
            None,
            "-1: the system does not say"
        );
        assert_eq!(node_of(&root, "0000:00:00.0"), None, "no such device");
        assert_eq!(cpus_of(&root, 1), Some(vec![32, 33, 96]));
        assert_eq!(cpus_of(&root, 0), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn work_on_bound_cpus_returns_its_value_and_its_panic() {
        // The CPUs this process may run on, so that binding succeeds.
        let cpus: Vec<usize> =
            (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        assert_eq!(on_cpus(&cpus, || 6 * 7), 42);
        let r = std::panic::catch_unwind(|| on_cpus(&cpus, || panic!("inside")));
        assert!(r.is_err());
    }
}
