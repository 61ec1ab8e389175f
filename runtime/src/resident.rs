//! Hot host data kept in device memory between launches, within a byte budget
//! ([`DeviceCache`]): the columns that earlier launches read most stay on the device, the
//! others are read from host memory (streamed or mapped) as their placement says.
//!
//! The cache is keyed by the shared host memory itself ([`HostShared`]): what the host shares
//! is immutable while it is shared, so a device copy made once stays equal to it for as long
//! as the `HostShared` lives, and the cache drops the copy of memory that is no longer shared.
//!
//! The choice is a knapsack: every read of a resident column saves moving its bytes over the
//! link, so a column's value per byte of budget is the number of times it is read. The cache
//! keeps the columns read most (ties: the smaller, then the one already resident, so that
//! equals do not evict each other, then the one read last), as many as the budget holds, and
//! evicts the least valuable when a more valuable one needs the room.

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::host_shared::{HostShared, SharedHost};
use std::any::Any;
use std::collections::HashMap;
use std::sync::Weak;

/// Host memory a [`DeviceCache`] can keep in device memory: a [`HostShared`] of any owner.
/// Launches name several at once as `&[&dyn Cacheable]` (`&[&prices, &dates]`), whatever
/// their element types.
pub trait Cacheable: private::Source {}

impl<H: SharedHost> Cacheable for HostShared<H> where H::Elem: Send + Sync {}

mod private {
    use crate::error::Result;
    use crate::gpu::Gpu;
    use std::any::Any;
    use std::sync::Weak;

    /// What the cache needs of a source: a key unique while the entry lives, its size, and
    /// a device copy.
    pub trait Source {
        /// The source's liveness token: its address is the cache key (the cache's `Weak`
        /// keeps the address from being reused while the entry lives).
        fn token(&self) -> Weak<()>;
        /// Bytes a device copy takes.
        fn bytes(&self) -> usize;
        /// A device copy (a `DeviceBuffer` of the elements).
        fn upload(&self, gpu: &Gpu) -> Result<Box<dyn Any + Send + Sync>>;
    }
}

impl<H: SharedHost> private::Source for HostShared<H>
where
    H::Elem: Send + Sync,
{
    fn token(&self) -> Weak<()> {
        std::sync::Arc::downgrade(&self.alive)
    }
    fn bytes(&self) -> usize {
        HostShared::bytes(self)
    }
    fn upload(&self, gpu: &Gpu) -> Result<Box<dyn Any + Send + Sync>> {
        Ok(Box::new(gpu.upload::<H::Elem>(self)?))
    }
}

/// The cache key of a source: the address of its liveness token.
fn key(c: &dyn Cacheable) -> usize {
    c.token().as_ptr() as usize
}

/// [`key`] of a shared memory of any element type (the same address: a `Weak` points where
/// its `Arc` does).
fn key_of<H: SharedHost>(col: &HostShared<H>) -> usize {
    std::sync::Arc::as_ptr(&col.alive) as usize
}

/// What the cache knows of one shared memory.
struct Entry {
    /// Alive while the `HostShared` is; holds the key's address while the entry lives.
    alive: Weak<()>,
    bytes: usize,
    /// Reads noted so far.
    reads: u64,
    /// The cache's clock at the last read.
    last: u64,
    /// The device copy, a `DeviceBuffer` of the elements, while resident.
    device: Option<Box<dyn Any + Send + Sync>>,
}

/// The policy's order, most valuable first: reads (most first), bytes (smallest first),
/// resident first (equals do not evict each other), last read (latest first), key.
fn rank(k: usize, e: &Entry) -> impl Ord {
    (
        std::cmp::Reverse(e.reads),
        e.bytes,
        e.device.is_none(),
        std::cmp::Reverse(e.last),
        k,
    )
}

/// Where a shared memory is for a launch: its device copy, or host memory.
#[derive(Debug)]
pub enum Placed<'a, H: SharedHost> {
    /// Resident in device memory (pass it to a plain `&[T]` argument).
    Resident(&'a DeviceBuffer<H::Elem>),
    /// Not resident: read from host memory (a `#[pinned_async]`, `#[mapped]` or `#[auto]`
    /// argument).
    Host(&'a HostShared<H>),
}

/// Device copies of shared host memory that launches read again and again, within a byte
/// budget, chosen from what earlier launches read ([`Gpu::device_cache`]).
///
/// Each launch says what it reads: [`note`](DeviceCache::note) only counts the reads (a launch
/// that streams anyway); [`admit`](DeviceCache::admit) counts them and brings into device
/// memory those of them the policy keeps (the module's knapsack), evicting less valuable
/// copies to make room; [`require`](DeviceCache::require) makes them all resident or says
/// how much they need. Then [`get`](DeviceCache::get) or [`place`](DeviceCache::place) gives
/// each argument its device copy or its host memory.
///
/// ```
/// # fn main() -> berth_runtime::Result<()> {
/// use std::sync::Arc;
/// let gpu = berth_runtime::Gpu::simulator();
/// let hot = gpu.share(Arc::<[u32]>::from(vec![7u32; 1024]))?; // 4 KiB
/// let cold = gpu.share(Arc::<[u32]>::from(vec![1u32; 2048]))?; // 8 KiB
/// let mut cache = gpu.device_cache(8 << 10);
/// cache.note(&[&hot, &cold]);
/// assert!(cache.admit(&[&hot])?); // read twice: it stays on the device
/// assert!(!cache.admit(&[&cold])?); // read twice too, but larger: no room left beside `hot`
/// assert_eq!(cache.get(&hot).unwrap().to_vec()?, vec![7u32; 1024]);
/// assert!(cache.get(&cold).is_none());
/// # Ok(())
/// # }
/// ```
pub struct DeviceCache {
    gpu: Gpu,
    budget: usize,
    entries: HashMap<usize, Entry>,
    clock: u64,
}

impl Gpu {
    /// A cache that keeps device copies of shared host memory within `budget` bytes of device
    /// memory ([`DeviceCache`]). A budget of 0 keeps nothing: every launch reads host memory.
    pub fn device_cache(&self, budget: usize) -> DeviceCache {
        DeviceCache {
            gpu: self.clone(),
            budget,
            entries: HashMap::new(),
            clock: 0,
        }
    }
}

impl std::fmt::Debug for DeviceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCache")
            .field("budget", &self.budget)
            .field("resident_bytes", &self.resident_bytes())
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl DeviceCache {
    /// The budget, bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes of device copies held now (never above the budget).
    pub fn resident_bytes(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.device.is_some())
            .map(|e| e.bytes)
            .sum()
    }

    /// Reads of `col` noted so far.
    pub fn reads(&self, col: &dyn Cacheable) -> u64 {
        self.entries.get(&key(col)).map_or(0, |e| e.reads)
    }

    /// Whether `col` has a device copy now.
    pub fn is_resident(&self, col: &dyn Cacheable) -> bool {
        self.entries
            .get(&key(col))
            .is_some_and(|e| e.device.is_some())
    }

    /// The device copy of `col`, if it is resident.
    pub fn get<H: SharedHost>(&self, col: &HostShared<H>) -> Option<&DeviceBuffer<H::Elem>> {
        self.entries
            .get(&key_of(col))?
            .device
            .as_ref()?
            .downcast_ref::<DeviceBuffer<H::Elem>>()
    }

    /// Where a launch finds `col`: its device copy if resident, else its host memory.
    pub fn place<'a, H: SharedHost>(&'a self, col: &'a HostShared<H>) -> Placed<'a, H> {
        match self.get(col) {
            Some(d) => Placed::Resident(d),
            None => Placed::Host(col),
        }
    }

    /// Count one read of each of `cols` (a launch reads them from wherever they are);
    /// nothing moves.
    pub fn note(&mut self, cols: &[&dyn Cacheable]) {
        self.prune();
        self.clock += 1;
        for &c in cols {
            let e = self.entries.entry(key(c)).or_insert_with(|| Entry {
                alive: c.token(),
                bytes: c.bytes(),
                reads: 0,
                last: 0,
                device: None,
            });
            // A launch that names a column twice reads it once.
            if e.last != self.clock {
                e.reads += 1;
                e.last = self.clock;
            }
        }
    }

    /// Count one read of each of `cols`, then bring into device memory those of them that
    /// the policy keeps (the columns read most, as many as the budget holds), evicting
    /// copies the policy no longer keeps where room is needed. Returns whether every one of
    /// `cols` is resident now. A column larger than the budget always stays in host memory.
    ///
    /// # Errors
    /// A failed device allocation or copy (`Error::OutOfMemory` when the device has less free
    /// memory than the budget promised); the cache stays consistent (the copy is not made).
    pub fn admit(&mut self, cols: &[&dyn Cacheable]) -> Result<bool> {
        self.note(cols);
        let wanted = self.wanted(&[]);
        self.bring(cols, &wanted)?;
        Ok(cols.iter().all(|&c| self.is_resident(c)))
    }

    /// Count one read of each of `cols` and make them all resident, evicting whatever
    /// else is needed to make room (they come first, then the columns read most).
    ///
    /// # Errors
    /// `Error::DeviceBudget` when `cols` together take more than the budget (nothing is
    /// evicted or copied then); a failed device allocation or copy as for
    /// [`admit`](DeviceCache::admit).
    pub fn require(&mut self, cols: &[&dyn Cacheable]) -> Result<()> {
        let mut keys: Vec<usize> = cols.iter().map(|&c| key(c)).collect();
        keys.sort_unstable();
        keys.dedup();
        let needed: usize = keys
            .iter()
            .map(|k| {
                cols.iter()
                    .find(|&&c| key(c) == *k)
                    .map_or(0, |c| c.bytes())
            })
            .sum();
        if needed > self.budget {
            return Err(Error::DeviceBudget {
                what: format!("{} columns required resident", keys.len()),
                needed,
                budget: self.budget,
            });
        }
        self.note(cols);
        let wanted = self.wanted(&keys);
        self.bring(cols, &wanted)
    }

    /// Drop the device copy of `col` (its read count stays).
    pub fn evict(&mut self, col: &dyn Cacheable) {
        if let Some(e) = self.entries.get_mut(&key(col)) {
            e.device = None;
        }
    }

    /// Drop every device copy and every read count.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Forget the entries of memory no longer shared: its copy could never be asked for
    /// again.
    fn prune(&mut self) {
        self.entries.retain(|_, e| e.alive.strong_count() > 0);
    }

    /// The keys the policy keeps: `first`, then in [`rank`] order, each kept if it fits in
    /// what is left.
    fn wanted(&self, first: &[usize]) -> Vec<usize> {
        let mut order: Vec<(&usize, &Entry)> = self
            .entries
            .iter()
            .filter(|(k, _)| !first.contains(k))
            .collect();
        order.sort_by_key(|(k, e)| rank(**k, e));
        let mut left = self.budget;
        let mut keep = Vec::new();
        for k in first.iter().chain(order.iter().map(|(k, _)| *k)) {
            let bytes = self.entries[k].bytes;
            if bytes <= left {
                left -= bytes;
                keep.push(*k);
            }
        }
        keep
    }

    /// Copy to the device the columns of `cols` in `wanted` that are not resident, evicting
    /// resident columns not in `wanted` (the least valuable first) until they fit.
    fn bring(&mut self, cols: &[&dyn Cacheable], wanted: &[usize]) -> Result<()> {
        for &c in cols {
            let k = key(c);
            if !wanted.contains(&k) || self.entries[&k].device.is_some() {
                continue;
            }
            let need = self.entries[&k].bytes;
            while self.budget - self.resident_bytes() < need {
                // Resident and not kept: the last of the policy's order goes first.
                let victim = self
                    .entries
                    .iter()
                    .filter(|(k, e)| e.device.is_some() && !wanted.contains(k))
                    .max_by_key(|(k, e)| rank(**k, e))
                    .map(|(k, _)| *k)
                    .expect("the kept columns fit in the budget together");
                self.entries.get_mut(&victim).expect("present").device = None;
            }
            let copy = c.upload(&self.gpu)?;
            self.entries.get_mut(&k).expect("noted").device = Some(copy);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;
    use crate::gpu::Gpu;
    use std::sync::Arc;

    fn column(gpu: &Gpu, len: usize, v: u32) -> crate::HostShared<Arc<[u32]>> {
        gpu.share(Arc::<[u32]>::from(vec![v; len])).unwrap()
    }

    /// The columns read most stay within the budget; a more-read column evicts a less-read
    /// one; copies equal the host memory; memory no longer shared leaves the cache.
    #[test]
    fn keeps_the_columns_read_most_within_the_budget() {
        let gpu = Gpu::simulator();
        let (a, b, c) = (
            column(&gpu, 1000, 1),
            column(&gpu, 1000, 2),
            column(&gpu, 2000, 3),
        );
        let mut cache = gpu.device_cache(8000);
        // a and b (4000 bytes each) fill the budget; c is read once and does not fit.
        assert!(cache.admit(&[&a, &b]).unwrap());
        assert!(!cache.admit(&[&c]).unwrap());
        assert_eq!(cache.resident_bytes(), 8000);
        assert_eq!(cache.get(&b).unwrap().to_vec().unwrap(), vec![2; 1000]);
        assert!(matches!(cache.place(&c), super::Placed::Host(_)));
        assert!(matches!(cache.place(&a), super::Placed::Resident(_)));
        // c read three times more: now read most, it takes the room of both (8000 bytes).
        cache.note(&[&c]);
        cache.note(&[&c]);
        assert!(cache.admit(&[&c]).unwrap());
        assert_eq!(cache.reads(&c), 4);
        assert!(!cache.is_resident(&a) && !cache.is_resident(&b));
        assert_eq!(cache.get(&c).unwrap().to_vec().unwrap(), vec![3; 2000]);
        assert!(cache.resident_bytes() <= cache.budget());
        // Ties in reads: the smaller first.
        let mut tie = gpu.device_cache(4000);
        assert!(!tie.admit(&[&c, &a]).unwrap());
        assert!(tie.is_resident(&a) && !tie.is_resident(&c));
        // Memory no longer shared is forgotten at the next read noted.
        drop(c);
        cache.note(&[&a]);
        assert_eq!(cache.resident_bytes(), 0);
        assert!(format!("{cache:?}").contains("entries: 2"), "{cache:?}");
    }

    /// `require` makes a group resident ahead of more-read columns, or refuses a group larger
    /// than the budget with the bytes it needs, evicting nothing; a budget of 0 keeps nothing.
    #[test]
    fn require_makes_room_or_says_what_it_needs() {
        let gpu = Gpu::simulator();
        let (a, b) = (column(&gpu, 1000, 1), column(&gpu, 1000, 2));
        let mut cache = gpu.device_cache(4000);
        for _ in 0..3 {
            assert!(cache.admit(&[&a]).unwrap());
        }
        cache.require(&[&b]).unwrap();
        assert!(cache.is_resident(&b) && !cache.is_resident(&a));
        let e = cache.require(&[&a, &b]).unwrap_err();
        match &e {
            Error::DeviceBudget { needed, budget, .. } => {
                assert_eq!((*needed, *budget), (8000, 4000))
            }
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains("8000"), "{e}");
        assert!(cache.is_resident(&b), "a refused group evicts nothing");
        // The same column twice counts once.
        cache.require(&[&a, &a]).unwrap();
        assert_eq!(cache.reads(&a), 4);
        let mut none = gpu.device_cache(0);
        assert!(!none.admit(&[&a]).unwrap());
        assert_eq!(none.resident_bytes(), 0);
        none.evict(&a);
        cache.evict(&a);
        assert!(!cache.is_resident(&a));
        cache.clear();
        assert_eq!((cache.resident_bytes(), cache.reads(&a)), (0, 0));
    }
}
