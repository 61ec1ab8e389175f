//! The tables read from Parquet files (`lineitem.parquet`, `orders.parquet`, `part.parquet`
//! in one folder, as `tpchgen-cli parquet` writes them), converted column by column to the
//! representation of [`data`](super::data): decimals to `i64` hundredths, dates kept as
//! `Date32`, strings to dictionary codes. Only the columns the queries read are decoded.
//!
//! A file that is not Parquet, a missing column, a column of an unexpected type or with
//! nulls, and a value outside what the queries know, are errors naming the file and column.

use super::data::{Lineitem, Orders, PRIORITIES, Part, SHIP_MODES, Tables, part_types};
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Decimal128Type, Int32Type, Int64Type, UInt8Type};
use arrow_array::{
    Array, ArrayRef, Date32Array, DictionaryArray, Int64Array, RecordBatch, StringArray, UInt8Array,
};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::path::Path;
use std::sync::Arc;

type Result<T> = std::result::Result<T, String>;

/// The batches of `columns` of the Parquet file `path`.
fn read(path: &Path, columns: &[&str]) -> Result<Vec<RecordBatch>> {
    let file = path.display();
    let f = std::fs::File::open(path).map_err(|e| format!("{file}: {e}"))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(f)
        .map_err(|e| format!("{file}: not a readable Parquet file: {e}"))?;
    let schema = builder.parquet_schema();
    let mut leaves = Vec::new();
    for name in columns {
        let i = (0..schema.num_columns())
            .find(|&i| schema.column(i).name() == *name)
            .ok_or_else(|| format!("{file}: no column `{name}`"))?;
        leaves.push(i);
    }
    let mask = ProjectionMask::leaves(schema, leaves);
    builder
        .with_projection(mask)
        .with_batch_size(1 << 16)
        .build()
        .map_err(|e| format!("{file}: {e}"))?
        .map(|b| b.map_err(|e| format!("{file}: malformed data: {e}")))
        .collect()
}

/// Column `name` of every batch, converted by `conv` and concatenated.
fn column<T>(
    path: &Path,
    batches: &[RecordBatch],
    name: &str,
    conv: impl Fn(&ArrayRef, &mut Vec<T>) -> Result<()>,
) -> Result<Vec<T>> {
    let mut v = Vec::new();
    for b in batches {
        let a = b
            .column_by_name(name)
            .ok_or_else(|| format!("{}: no column `{name}`", path.display()))?;
        if a.null_count() > 0 {
            return Err(format!(
                "{}: column `{name}` has nulls, which TPC-H's does not",
                path.display()
            ));
        }
        conv(a, &mut v).map_err(|e| format!("{}: column `{name}`: {e}", path.display()))?;
    }
    Ok(v)
}

/// Integers (`Int64` or `Int32`).
fn ints(a: &ArrayRef, v: &mut Vec<i64>) -> Result<()> {
    if let Some(a) = a.as_primitive_opt::<Int64Type>() {
        v.extend_from_slice(a.values());
    } else if let Some(a) = a.as_primitive_opt::<Int32Type>() {
        v.extend(a.values().iter().map(|&x| i64::from(x)));
    } else {
        return Err(format!("expected integers, found {}", a.data_type()));
    }
    Ok(())
}

/// Decimals in hundredths (`Decimal128` of scale 2, or integers, which are whole units).
fn hundredths(a: &ArrayRef, v: &mut Vec<i64>) -> Result<()> {
    if let Some(d) = a.as_primitive_opt::<Decimal128Type>() {
        let scale = d.scale();
        if !(0..=2).contains(&scale) {
            return Err(format!(
                "expected a decimal of scale 2, found scale {scale}"
            ));
        }
        let mult = 10i128.pow((2 - scale) as u32);
        for &x in d.values() {
            v.push(i64::try_from(x * mult).map_err(|_| format!("value {x} does not fit in i64"))?);
        }
        Ok(())
    } else {
        let start = v.len();
        ints(a, v).map_err(|_| format!("expected decimals, found {}", a.data_type()))?;
        for x in &mut v[start..] {
            *x *= 100;
        }
        Ok(())
    }
}

/// Dates (`Date32`).
fn dates(a: &ArrayRef, v: &mut Vec<i32>) -> Result<()> {
    let d = a
        .as_primitive_opt::<Date32Type>()
        .ok_or_else(|| format!("expected dates (Date32), found {}", a.data_type()))?;
    v.extend_from_slice(d.values());
    Ok(())
}

/// Each string's position among the sorted `values` (`Utf8`, `LargeUtf8` or `Utf8View`).
fn codes<'a>(values: &'a [&'a str]) -> impl Fn(&ArrayRef, &mut Vec<u8>) -> Result<()> + 'a {
    move |a, v| {
        let code = |s: &str| {
            values
                .binary_search(&s)
                .map(|i| i as u8)
                .map_err(|_| format!("unexpected value `{s}`"))
        };
        if let Some(s) = a.as_string_opt::<i32>() {
            for x in s.iter().flatten() {
                v.push(code(x)?);
            }
        } else if let Some(s) = a.as_string_opt::<i64>() {
            for x in s.iter().flatten() {
                v.push(code(x)?);
            }
        } else if let Some(s) = a.as_string_view_opt() {
            for x in s.iter().flatten() {
                v.push(code(x)?);
            }
        } else {
            return Err(format!("expected strings, found {}", a.data_type()));
        }
        Ok(())
    }
}

/// One-character flags as their byte.
fn flags(a: &ArrayRef, v: &mut Vec<u8>) -> Result<()> {
    let all: Vec<String> = (b'A'..=b'Z').map(|c| (c as char).to_string()).collect();
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    codes(&refs)(a, v)?;
    let start = v.len() - a.len();
    for c in &mut v[start..] {
        *c += b'A';
    }
    Ok(())
}

fn dictionary(keys: Vec<u8>, values: &[&str]) -> DictionaryArray<UInt8Type> {
    DictionaryArray::new(
        UInt8Array::from(keys),
        Arc::new(StringArray::from(values.to_vec())),
    )
}

/// The tables in the Parquet files of `dir`; `sf` is recorded as their scale factor.
pub fn read_tables(dir: &Path, sf: f64) -> Result<Tables> {
    let path = dir.join("lineitem.parquet");
    let names = [
        "l_orderkey",
        "l_partkey",
        "l_quantity",
        "l_extendedprice",
        "l_discount",
        "l_tax",
        "l_returnflag",
        "l_linestatus",
        "l_shipdate",
        "l_commitdate",
        "l_receiptdate",
        "l_shipmode",
    ];
    let b = read(&path, &names)?;
    let p = path.as_path();
    let lineitem = Lineitem {
        orderkey: Int64Array::from(column(p, &b, "l_orderkey", ints)?),
        partkey: Int64Array::from(column(p, &b, "l_partkey", ints)?),
        quantity: Int64Array::from(column(p, &b, "l_quantity", hundredths)?),
        price: Int64Array::from(column(p, &b, "l_extendedprice", hundredths)?),
        discount: Int64Array::from(column(p, &b, "l_discount", hundredths)?),
        tax: Int64Array::from(column(p, &b, "l_tax", hundredths)?),
        returnflag: UInt8Array::from(column(p, &b, "l_returnflag", flags)?),
        linestatus: UInt8Array::from(column(p, &b, "l_linestatus", flags)?),
        shipdate: Date32Array::from(column(p, &b, "l_shipdate", dates)?),
        commitdate: Date32Array::from(column(p, &b, "l_commitdate", dates)?),
        receiptdate: Date32Array::from(column(p, &b, "l_receiptdate", dates)?),
        shipmode: dictionary(
            column(p, &b, "l_shipmode", codes(&SHIP_MODES))?,
            &SHIP_MODES,
        ),
    };
    drop(b);

    let path = dir.join("orders.parquet");
    let b = read(&path, &["o_orderkey", "o_orderpriority"])?;
    let p = path.as_path();
    let orders = Orders {
        orderkey: Int64Array::from(column(p, &b, "o_orderkey", ints)?),
        orderpriority: dictionary(
            column(p, &b, "o_orderpriority", codes(&PRIORITIES))?,
            &PRIORITIES,
        ),
    };

    let path = dir.join("part.parquet");
    let b = read(&path, &["p_partkey", "p_type"])?;
    let p = path.as_path();
    let types = part_types();
    let type_refs: Vec<&str> = types.iter().map(String::as_str).collect();
    let part = Part {
        partkey: Int64Array::from(column(p, &b, "p_partkey", ints)?),
        ptype: dictionary(column(p, &b, "p_type", codes(&type_refs))?, &type_refs),
    };
    Ok(Tables {
        sf,
        lineitem,
        orders,
        part,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpch::data;
    use arrow_array::{Decimal128Array, StringViewArray};
    use parquet::arrow::ArrowWriter;

    fn write(path: &Path, columns: Vec<(&str, ArrayRef)>) {
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None)
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    fn decimals(v: &Int64Array) -> ArrayRef {
        Arc::new(
            Decimal128Array::from_iter_values(v.values().iter().map(|&x| i128::from(x)))
                .with_precision_and_scale(15, 2)
                .unwrap(),
        )
    }

    fn strings(d: &DictionaryArray<UInt8Type>, values: &[&str]) -> ArrayRef {
        Arc::new(StringViewArray::from_iter_values(
            d.keys().values().iter().map(|&k| values[k as usize]),
        ))
    }

    fn chars(v: &UInt8Array) -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            v.values().iter().map(|&c| (c as char).to_string()),
        ))
    }

    /// Tables written to Parquet as `tpchgen-cli` writes them (decimals, dates, string views)
    /// read back equal to the generated ones; a malformed file, a missing column and a
    /// column of the wrong type are errors naming the file and the column.
    #[test]
    fn tables_round_trip_through_parquet_and_bad_files_are_named() {
        let t = data::generate(0.01, 1).unwrap();
        let dir = std::env::temp_dir().join(format!("berth-tpch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let l = &t.lineitem;
        let i64s = |a: &Int64Array| -> ArrayRef { Arc::new(a.clone()) };
        let d32 = |a: &Date32Array| -> ArrayRef { Arc::new(a.clone()) };
        write(
            &dir.join("lineitem.parquet"),
            vec![
                ("l_orderkey", i64s(&l.orderkey)),
                ("l_partkey", i64s(&l.partkey)),
                ("l_quantity", decimals(&l.quantity)),
                ("l_extendedprice", decimals(&l.price)),
                ("l_discount", decimals(&l.discount)),
                ("l_tax", decimals(&l.tax)),
                ("l_returnflag", chars(&l.returnflag)),
                ("l_linestatus", chars(&l.linestatus)),
                ("l_shipdate", d32(&l.shipdate)),
                ("l_commitdate", d32(&l.commitdate)),
                ("l_receiptdate", d32(&l.receiptdate)),
                ("l_shipmode", strings(&l.shipmode, &SHIP_MODES)),
            ],
        );
        write(
            &dir.join("orders.parquet"),
            vec![
                ("o_orderkey", i64s(&t.orders.orderkey)),
                (
                    "o_orderpriority",
                    strings(&t.orders.orderpriority, &PRIORITIES),
                ),
            ],
        );
        let types = part_types();
        let type_refs: Vec<&str> = types.iter().map(String::as_str).collect();
        write(
            &dir.join("part.parquet"),
            vec![
                ("p_partkey", i64s(&t.part.partkey)),
                ("p_type", strings(&t.part.ptype, &type_refs)),
            ],
        );
        let back = read_tables(&dir, 0.01).unwrap();
        assert_eq!(back.lineitem.price, l.price);
        assert_eq!(back.lineitem.quantity, l.quantity);
        assert_eq!(back.lineitem.returnflag, l.returnflag);
        assert_eq!(back.lineitem.receiptdate, l.receiptdate);
        assert_eq!(back.lineitem.shipmode.keys(), l.shipmode.keys());
        assert_eq!(
            back.orders.orderpriority.keys(),
            t.orders.orderpriority.keys()
        );
        assert_eq!(back.part.ptype.keys(), t.part.ptype.keys());
        use crate::tpch::reference::{Query, answer};
        for q in Query::ALL {
            assert_eq!(answer(q, &back), answer(q, &t), "{q}");
        }

        // Not Parquet.
        std::fs::write(dir.join("part.parquet"), b"not a parquet file").unwrap();
        let e = read_tables(&dir, 0.01).err().unwrap();
        assert!(
            e.contains("part.parquet") && e.contains("not a readable Parquet file"),
            "{e}"
        );
        // A missing column, and one of the wrong type.
        write(
            &dir.join("part.parquet"),
            vec![("p_partkey", i64s(&t.part.partkey))],
        );
        let e = read_tables(&dir, 0.01).err().unwrap();
        assert!(
            e.contains("part.parquet") && e.contains("no column `p_type`"),
            "{e}"
        );
        write(
            &dir.join("part.parquet"),
            vec![
                ("p_partkey", i64s(&t.part.partkey)),
                ("p_type", i64s(&t.part.partkey)),
            ],
        );
        let e = read_tables(&dir, 0.01).err().unwrap();
        assert!(e.contains("column `p_type`: expected strings"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
