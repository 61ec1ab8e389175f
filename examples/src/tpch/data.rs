//! The TPC-H tables the queries read, generated with `tpchgen` into Arrow arrays in host
//! memory, as an application that hands them to the GPU would hold them: decimals as `i64`
//! hundredths, dates as Arrow `Date32` (days since 1970-01-01), flags as `u8`, and the string
//! columns the queries filter on as Arrow dictionaries with `u8` keys over sorted values (so
//! a prefix or a set of strings is a range or a set of codes).

use arrow_array::types::UInt8Type;
use arrow_array::{Date32Array, DictionaryArray, Int64Array, StringArray, UInt8Array};
use std::sync::Arc;
use tpchgen::generators::{LineItemGenerator, OrderGenerator, PartGenerator};

/// The lineitem columns the queries read.
pub struct Lineitem {
    /// `l_orderkey`.
    pub orderkey: Int64Array,
    /// `l_partkey`.
    pub partkey: Int64Array,
    /// `l_quantity`, in hundredths.
    pub quantity: Int64Array,
    /// `l_extendedprice`, in hundredths.
    pub price: Int64Array,
    /// `l_discount`, in hundredths.
    pub discount: Int64Array,
    /// `l_tax`, in hundredths.
    pub tax: Int64Array,
    /// `l_returnflag` (`A`, `N`, `R`).
    pub returnflag: UInt8Array,
    /// `l_linestatus` (`F`, `O`).
    pub linestatus: UInt8Array,
    /// `l_shipdate`.
    pub shipdate: Date32Array,
    /// `l_commitdate`.
    pub commitdate: Date32Array,
    /// `l_receiptdate`.
    pub receiptdate: Date32Array,
    /// `l_shipmode`, a dictionary over the sorted modes.
    pub shipmode: DictionaryArray<UInt8Type>,
}

/// The orders columns Q12 reads.
pub struct Orders {
    /// `o_orderkey`.
    pub orderkey: Int64Array,
    /// `o_orderpriority`, a dictionary over the sorted priorities.
    pub orderpriority: DictionaryArray<UInt8Type>,
}

/// The part columns Q14 reads.
pub struct Part {
    /// `p_partkey`: 1, 2, … (the generator's keys are dense).
    pub partkey: Int64Array,
    /// `p_type`, a dictionary over the sorted types.
    pub ptype: DictionaryArray<UInt8Type>,
}

/// The tables of one scale factor.
pub struct Tables {
    /// The scale factor they were generated at.
    pub sf: f64,
    /// `lineitem`.
    pub lineitem: Lineitem,
    /// `orders`.
    pub orders: Orders,
    /// `part`.
    pub part: Part,
}

/// `l_shipmode`'s values, sorted.
pub const SHIP_MODES: [&str; 7] = ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"];

/// `o_orderpriority`'s values, sorted.
pub const PRIORITIES: [&str; 5] = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"];

/// `p_type`'s values, sorted: the spec's three syllables, combined.
pub fn part_types() -> Vec<String> {
    let mut v = Vec::with_capacity(150);
    for a in ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"] {
        for b in ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"] {
            for c in ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"] {
                v.push(format!("{a} {b} {c}"));
            }
        }
    }
    v.sort();
    v
}

/// Bytes of host memory one lineitem row takes here: the twelve columns above, plus the
/// packed copies the queries make of them (at most 8 bytes a row).
pub const LINEITEM_ROW_BYTES: u64 = 6 * 8 + 2 + 3 * 4 + 1 + 8;

/// Rows of each table per unit of scale factor (lineitem's is the spec's approximation).
const LINEITEM_ROWS: f64 = 6_001_215.0;
const ORDERS_ROWS: f64 = 1_500_000.0;
const PART_ROWS: f64 = 200_000.0;

/// Bytes of host memory the tables of scale factor `sf` take here, with the queries' packed
/// copies and lookup tables (an estimate within a few percent: lineitem's row count varies).
pub fn bytes_needed(sf: f64) -> u64 {
    let lineitem = LINEITEM_ROWS * sf * LINEITEM_ROW_BYTES as f64;
    // o_orderkey, the priority code, and the priority by key (4 keys per order).
    let orders = ORDERS_ROWS * sf * (8.0 + 1.0 + 4.0);
    let part = PART_ROWS * sf * (8.0 + 1.0);
    (lineitem + orders + part) as u64
}

/// Refuse a scale factor that is not a positive number, or whose tables would not fit in
/// `available` bytes of host memory (with a tenth to spare), before anything is allocated.
pub fn check_fits(sf: f64, available: Option<u64>) -> Result<(), String> {
    if !(sf.is_finite() && sf > 0.0) {
        return Err(format!(
            "--sf {sf}: the scale factor must be a positive number"
        ));
    }
    let need = bytes_needed(sf);
    match available {
        Some(avail) if need as f64 > 0.9 * avail as f64 => Err(format!(
            "--sf {sf} needs about {:.1} GiB of host memory for its tables; {:.1} GiB is \
             available here: use --sf {:.2} or less",
            need as f64 / GIB,
            avail as f64 / GIB,
            sf * 0.9 * avail as f64 / need as f64
        )),
        _ => Ok(()),
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// One generator part's lineitem columns.
#[derive(Default)]
struct LineitemPart {
    orderkey: Vec<i64>,
    partkey: Vec<i64>,
    quantity: Vec<i64>,
    price: Vec<i64>,
    discount: Vec<i64>,
    tax: Vec<i64>,
    returnflag: Vec<u8>,
    linestatus: Vec<u8>,
    shipdate: Vec<i32>,
    commitdate: Vec<i32>,
    receiptdate: Vec<i32>,
    shipmode: Vec<u8>,
}

/// The position of `s` in the sorted `values`.
fn code(values: &[&str], s: &str) -> Result<u8, String> {
    values
        .binary_search(&s)
        .map(|i| i as u8)
        .map_err(|_| format!("unexpected value `{s}` (expected one of {values:?})"))
}

fn lineitem_part(sf: f64, part: i32, parts: i32) -> Result<LineitemPart, String> {
    let mut p = LineitemPart::default();
    for r in LineItemGenerator::new(sf, part, parts).iter() {
        p.orderkey.push(r.l_orderkey);
        p.partkey.push(r.l_partkey);
        p.quantity.push(r.l_quantity * 100);
        p.price.push(r.l_extendedprice.0);
        p.discount.push(r.l_discount.0);
        p.tax.push(r.l_tax.0);
        p.returnflag.push(r.l_returnflag.as_bytes()[0]);
        p.linestatus.push(r.l_linestatus.as_bytes()[0]);
        p.shipdate.push(r.l_shipdate.to_unix_epoch());
        p.commitdate.push(r.l_commitdate.to_unix_epoch());
        p.receiptdate.push(r.l_receiptdate.to_unix_epoch());
        p.shipmode.push(code(&SHIP_MODES, r.l_shipmode)?);
    }
    Ok(p)
}

/// Concatenate one column of every part, freeing each part's column as it goes.
fn concat<T: Copy>(
    parts: &mut [LineitemPart],
    col: fn(&mut LineitemPart) -> &mut Vec<T>,
) -> Vec<T> {
    let n = parts.iter_mut().map(|p| col(p).len()).sum();
    let mut v = Vec::with_capacity(n);
    for p in parts {
        v.extend_from_slice(&std::mem::take(col(p)));
    }
    v
}

/// A dictionary array of `keys` over `values`.
fn dictionary(keys: Vec<u8>, values: &[&str]) -> DictionaryArray<UInt8Type> {
    DictionaryArray::new(
        UInt8Array::from(keys),
        Arc::new(StringArray::from(values.to_vec())),
    )
}

/// Generate the tables of scale factor `sf` on `threads` threads (the generator's parts run
/// at once).
pub fn generate(sf: f64, threads: usize) -> Result<Tables, String> {
    check_fits(sf, None)?;
    let parts = threads.clamp(1, 256) as i32;
    let mut li: Vec<LineitemPart> = std::thread::scope(|s| {
        let handles: Vec<_> = (1..=parts)
            .map(|part| s.spawn(move || lineitem_part(sf, part, parts)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("generator thread"))
            .collect::<Result<_, _>>()
    })?;
    let lineitem = Lineitem {
        orderkey: Int64Array::from(concat(&mut li, |p| &mut p.orderkey)),
        partkey: Int64Array::from(concat(&mut li, |p| &mut p.partkey)),
        quantity: Int64Array::from(concat(&mut li, |p| &mut p.quantity)),
        price: Int64Array::from(concat(&mut li, |p| &mut p.price)),
        discount: Int64Array::from(concat(&mut li, |p| &mut p.discount)),
        tax: Int64Array::from(concat(&mut li, |p| &mut p.tax)),
        returnflag: UInt8Array::from(concat(&mut li, |p| &mut p.returnflag)),
        linestatus: UInt8Array::from(concat(&mut li, |p| &mut p.linestatus)),
        shipdate: Date32Array::from(concat(&mut li, |p| &mut p.shipdate)),
        commitdate: Date32Array::from(concat(&mut li, |p| &mut p.commitdate)),
        receiptdate: Date32Array::from(concat(&mut li, |p| &mut p.receiptdate)),
        shipmode: dictionary(concat(&mut li, |p| &mut p.shipmode), &SHIP_MODES),
    };

    let mut orderkey = Vec::new();
    let mut priority = Vec::new();
    for o in OrderGenerator::new(sf, 1, 1).iter() {
        orderkey.push(o.o_orderkey);
        priority.push(code(&PRIORITIES, o.o_orderpriority)?);
    }
    let orders = Orders {
        orderkey: Int64Array::from(orderkey),
        orderpriority: dictionary(priority, &PRIORITIES),
    };

    let types = part_types();
    let type_refs: Vec<&str> = types.iter().map(String::as_str).collect();
    let mut partkey = Vec::new();
    let mut ptype = Vec::new();
    for p in PartGenerator::new(sf, 1, 1).iter() {
        partkey.push(p.p_partkey);
        ptype.push(code(&type_refs, p.p_type)?);
    }
    let part = Part {
        partkey: Int64Array::from(partkey),
        ptype: dictionary(ptype, &type_refs),
    };
    Ok(Tables {
        sf,
        lineitem,
        orders,
        part,
    })
}

impl Tables {
    /// Rows of lineitem.
    pub fn rows(&self) -> usize {
        self.lineitem.orderkey.len()
    }

    /// Q12's join index: the priority code of the order with key `k` at `k` (255 where no
    /// order has that key).
    pub fn priority_by_orderkey(&self) -> Result<Vec<u8>, String> {
        let keys = self.orders.orderkey.values();
        let codes = self.orders.orderpriority.keys().values();
        let max = keys.iter().copied().max().unwrap_or(0);
        if keys.iter().any(|&k| k < 0) {
            return Err("o_orderkey: negative key".into());
        }
        let mut by_key = vec![u8::MAX; max as usize + 1];
        for (&k, &c) in keys.iter().zip(codes.iter()) {
            by_key[k as usize] = c;
        }
        Ok(by_key)
    }

    /// Check that part keys are dense from 1 (row `i` has key `i + 1`), which lets Q14 read a
    /// part's type at `l_partkey - 1`.
    pub fn check_part_keys_dense(&self) -> Result<(), String> {
        match self
            .part
            .partkey
            .values()
            .iter()
            .enumerate()
            .find(|&(i, &k)| k != i as i64 + 1)
        {
            None => Ok(()),
            Some((i, k)) => Err(format!(
                "p_partkey: row {i} has key {k}, not {}: Q14 reads parts by dense key",
                i + 1
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_factors_that_do_not_fit_are_refused_with_the_memory_they_need() {
        let e = check_fits(1000.0, Some(16 << 30)).unwrap_err();
        assert!(
            e.contains("GiB of host memory") && e.contains("use --sf"),
            "{e}"
        );
        assert!(check_fits(0.01, Some(16 << 30)).is_ok());
        assert!(check_fits(-1.0, None).is_err());
        assert!(check_fits(f64::NAN, None).is_err());
    }

    #[test]
    fn generated_tables_have_the_spec_shape() {
        let t = generate(0.01, 2).unwrap();
        assert!((59_000..61_000).contains(&t.rows()), "{}", t.rows());
        assert_eq!(t.orders.orderkey.len(), 15_000);
        assert_eq!(t.part.partkey.len(), 2_000);
        t.check_part_keys_dense().unwrap();
        let by_key = t.priority_by_orderkey().unwrap();
        let k = t.lineitem.orderkey.value(0) as usize;
        assert!(by_key[k] < 5);
        let types = part_types();
        assert_eq!(types.len(), 150);
        assert!(types.windows(2).all(|w| w[0] < w[1]));
        // Generated in parts on two threads, the rows are those of one part: keys ascend.
        assert!(
            t.lineitem
                .orderkey
                .values()
                .windows(2)
                .all(|w| w[0] <= w[1])
        );
    }
}
