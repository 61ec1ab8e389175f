//! The queries' parameters and their answers computed on the host, in plain Rust over the
//! same Arrow columns: what every GPU result is checked against, exactly.

use super::data::{PRIORITIES, SHIP_MODES, Tables, part_types};
use super::{Q6Params, Q12Params, Q14Params};
use std::fmt;

/// Days from 1970-01-01 to the date `y-m-d` (proleptic Gregorian).
pub fn days(y: i32, m: u32, d: u32) -> i64 {
    // Howard Hinnant's days_from_civil.
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The TPC-H queries this program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Query {
    /// Pricing summary report.
    Q1,
    /// Forecasting revenue change.
    Q6,
    /// Shipping modes and order priority (lineitem ⋈ orders).
    Q12,
    /// Promotion effect (lineitem ⋈ part).
    Q14,
}

impl Query {
    /// Every query, in order.
    pub const ALL: [Query; 4] = [Query::Q1, Query::Q6, Query::Q12, Query::Q14];

    /// The query numbered `n`.
    pub fn from_number(n: u32) -> Result<Query, String> {
        match n {
            1 => Ok(Query::Q1),
            6 => Ok(Query::Q6),
            12 => Ok(Query::Q12),
            14 => Ok(Query::Q14),
            _ => Err(format!(
                "query {n}: this program runs TPC-H queries 1, 6, 12 and 14"
            )),
        }
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = match self {
            Query::Q1 => 1,
            Query::Q6 => 6,
            Query::Q12 => 12,
            Query::Q14 => 14,
        };
        write!(f, "q{n}")
    }
}

/// Q1's ship date bound: 1998-12-01 minus 90 days.
pub fn q1_ship_until() -> i64 {
    days(1998, 12, 1) - 90
}

/// Q6's predicate, with the spec's validation parameters.
pub fn q6_params() -> Q6Params {
    Q6Params {
        date_lo: days(1994, 1, 1),
        date_hi: days(1995, 1, 1),
        discount_lo: 5,
        discount_hi: 7,
        quantity_below: 2400,
    }
}

/// The position of `s` among the sorted `values`.
fn position(values: &[&str], s: &str) -> u32 {
    values.iter().position(|v| *v == s).expect("a known value") as u32
}

/// Q12's predicate, with the spec's validation parameters.
pub fn q12_params() -> Q12Params {
    Q12Params {
        date_lo: days(1994, 1, 1),
        date_hi: days(1995, 1, 1),
        mode_a: position(&SHIP_MODES, "MAIL"),
        mode_b: position(&SHIP_MODES, "SHIP"),
        // Codes below that of 3-MEDIUM: 1-URGENT and 2-HIGH.
        high_below: position(&PRIORITIES, "3-MEDIUM"),
        reserved: 0,
    }
}

/// Q14's predicate, with the spec's validation parameters: the promotional types are the
/// codes whose (sorted) dictionary value starts with `PROMO`.
pub fn q14_params() -> Q14Params {
    let types = part_types();
    let lo = types
        .iter()
        .position(|t| t.starts_with("PROMO"))
        .expect("PROMO types");
    let hi = lo
        + types[lo..]
            .iter()
            .take_while(|t| t.starts_with("PROMO"))
            .count();
    Q14Params {
        date_lo: days(1995, 9, 1),
        date_hi: days(1995, 10, 1),
        promo_lo: lo as u32,
        promo_hi: hi as u32,
    }
}

/// One group of Q1's answer: sums of scaled integers, exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Q1Group {
    /// `l_returnflag`.
    pub returnflag: u8,
    /// `l_linestatus`.
    pub linestatus: u8,
    /// `sum(l_quantity)`, hundredths.
    pub sum_qty: i128,
    /// `sum(l_extendedprice)`, hundredths.
    pub sum_base_price: i128,
    /// `sum(l_extendedprice * (1 - l_discount))`, 10⁻⁴.
    pub sum_disc_price: i128,
    /// `sum(l_extendedprice * (1 - l_discount) * (1 + l_tax))`, 10⁻⁶.
    pub sum_charge: i128,
    /// `sum(l_discount)`, hundredths (for `avg(l_discount)`).
    pub sum_discount: i128,
    /// `count(*)`.
    pub count: i128,
}

/// One ship mode of Q12's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Q12Mode {
    /// `l_shipmode`.
    pub mode: &'static str,
    /// Lines of orders with priority 1-URGENT or 2-HIGH.
    pub high: i128,
    /// The other lines.
    pub low: i128,
}

/// A query's answer, exact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Q1: the groups present, by return flag then line status.
    Q1(Vec<Q1Group>),
    /// Q6: the revenue, 10⁻⁴.
    Q6 {
        /// `sum(l_extendedprice * l_discount)`.
        revenue: i128,
    },
    /// Q12: MAIL then SHIP.
    Q12(Vec<Q12Mode>),
    /// Q14: the promotional and total revenue, 10⁻⁴.
    Q14 {
        /// Revenue of promotional parts.
        promo: i128,
        /// All revenue.
        total: i128,
    },
}

impl Answer {
    /// The exact values, one line per row, as SQL prints them (decimals at their scale): what
    /// another engine's answer is compared with (`bench/tpch/anchor.py` prints DuckDB's so).
    /// Q1: `rf ls sum_qty sum_base_price sum_disc_price sum_charge sum_disc count`; Q6:
    /// `revenue`; Q12: `mode high low`; Q14: `promo total`.
    pub fn exact_lines(&self) -> Vec<String> {
        match self {
            Answer::Q1(groups) => groups
                .iter()
                .map(|g| {
                    format!(
                        "{} {} {} {} {} {} {} {}",
                        g.returnflag as char,
                        g.linestatus as char,
                        decimal(g.sum_qty, 2),
                        decimal(g.sum_base_price, 2),
                        decimal(g.sum_disc_price, 4),
                        decimal(g.sum_charge, 6),
                        decimal(g.sum_discount, 2),
                        g.count
                    )
                })
                .collect(),
            Answer::Q6 { revenue } => vec![decimal(*revenue, 4)],
            Answer::Q12(modes) => modes
                .iter()
                .map(|m| format!("{} {} {}", m.mode, m.high, m.low))
                .collect(),
            Answer::Q14 { promo, total } => {
                vec![format!("{} {}", decimal(*promo, 4), decimal(*total, 4))]
            }
        }
    }
}

/// `v` scaled by `10^scale` as a decimal.
pub fn decimal(v: i128, scale: u32) -> String {
    let p = 10i128.pow(scale);
    let sign = if v < 0 { "-" } else { "" };
    let (w, f) = (v.abs() / p, v.abs() % p);
    if scale == 0 {
        format!("{sign}{w}")
    } else {
        format!("{sign}{w}.{f:0width$}", width = scale as usize)
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Q1(groups) => {
                writeln!(
                    f,
                    "rf ls sum_qty sum_base_price sum_disc_price sum_charge avg_qty avg_price avg_disc count"
                )?;
                for g in groups {
                    let avg = |s: i128, scale: u32| {
                        format!(
                            "{:.4}",
                            s as f64 / 10f64.powi(scale as i32) / g.count as f64
                        )
                    };
                    writeln!(
                        f,
                        "{} {} {} {} {} {} {} {} {} {}",
                        g.returnflag as char,
                        g.linestatus as char,
                        decimal(g.sum_qty, 2),
                        decimal(g.sum_base_price, 2),
                        decimal(g.sum_disc_price, 4),
                        decimal(g.sum_charge, 6),
                        avg(g.sum_qty, 2),
                        avg(g.sum_base_price, 2),
                        avg(g.sum_discount, 2),
                        g.count
                    )?;
                }
                Ok(())
            }
            Answer::Q6 { revenue } => writeln!(f, "revenue {}", decimal(*revenue, 4)),
            Answer::Q12(modes) => {
                writeln!(f, "shipmode high_line_count low_line_count")?;
                for m in modes {
                    writeln!(f, "{} {} {}", m.mode, m.high, m.low)?;
                }
                Ok(())
            }
            Answer::Q14 { promo, total } => {
                let pct = if *total == 0 {
                    0.0
                } else {
                    100.0 * *promo as f64 / *total as f64
                };
                writeln!(
                    f,
                    "promo_revenue {pct:.4} (promotional {} of {})",
                    decimal(*promo, 4),
                    decimal(*total, 4)
                )
            }
        }
    }
}

/// The Q1 groups from per-group sums laid out as the kernels lay them out: group
/// `rf * 2 + ls` (rf: A, N, R; ls: F, O), six sums each. Groups without rows are left out.
pub fn q1_groups(sums: &[i128]) -> Vec<Q1Group> {
    let mut groups = Vec::new();
    for (g, s) in sums.chunks(super::Q1_SUMS).enumerate() {
        if s[5] == 0 {
            continue;
        }
        groups.push(Q1Group {
            returnflag: [b'A', b'N', b'R'][g / 2],
            linestatus: [b'F', b'O'][g % 2],
            sum_qty: s[0],
            sum_base_price: s[1],
            sum_disc_price: s[2],
            sum_charge: s[3],
            sum_discount: s[4],
            count: s[5],
        });
    }
    groups
}

/// The answer to `q` over `t`, computed on the host.
pub fn answer(q: Query, t: &Tables) -> Answer {
    let l = &t.lineitem;
    let (ship, price, disc) = (l.shipdate.values(), l.price.values(), l.discount.values());
    match q {
        Query::Q1 => {
            let until = q1_ship_until();
            let mut sums = vec![0i128; super::Q1_GROUPS * super::Q1_SUMS];
            for i in 0..t.rows() {
                if i64::from(ship[i]) > until {
                    continue;
                }
                let rf = match l.returnflag.value(i) {
                    b'A' => 0,
                    b'N' => 1,
                    _ => 2,
                };
                let ls = usize::from(l.linestatus.value(i) == b'O');
                let (q, p, d, x) = (
                    l.quantity.value(i) as i128,
                    price[i] as i128,
                    disc[i] as i128,
                    l.tax.value(i) as i128,
                );
                let s = &mut sums[(rf * 2 + ls) * super::Q1_SUMS..][..super::Q1_SUMS];
                s[0] += q;
                s[1] += p;
                s[2] += p * (100 - d);
                s[3] += p * (100 - d) * (100 + x);
                s[4] += d;
                s[5] += 1;
            }
            Answer::Q1(q1_groups(&sums))
        }
        Query::Q6 => {
            let p = q6_params();
            let qty = l.quantity.values();
            let mut revenue = 0i128;
            for i in 0..t.rows() {
                let d = i64::from(ship[i]);
                if d >= p.date_lo
                    && d < p.date_hi
                    && disc[i] >= p.discount_lo
                    && disc[i] <= p.discount_hi
                    && qty[i] < p.quantity_below
                {
                    revenue += price[i] as i128 * disc[i] as i128;
                }
            }
            Answer::Q6 { revenue }
        }
        Query::Q12 => {
            let p = q12_params();
            let by_key = t.priority_by_orderkey().expect("order keys");
            let modes = l.shipmode.keys().values();
            let (commit, receipt) = (l.commitdate.values(), l.receiptdate.values());
            let mut counts = [0i128; 4];
            for i in 0..t.rows() {
                let m = u32::from(modes[i]);
                let m = if m == p.mode_a {
                    0
                } else if m == p.mode_b {
                    1
                } else {
                    continue;
                };
                let (s, c, r) = (
                    i64::from(ship[i]),
                    i64::from(commit[i]),
                    i64::from(receipt[i]),
                );
                if r < p.date_lo || r >= p.date_hi || c >= r || s >= c {
                    continue;
                }
                let prio = by_key[l.orderkey.value(i) as usize];
                let high = u32::from(prio) < p.high_below;
                counts[m * 2 + usize::from(!high)] += 1;
            }
            q12_modes(&counts)
        }
        Query::Q14 => {
            let p = q14_params();
            let types = t.part.ptype.keys().values();
            let (mut promo, mut total) = (0i128, 0i128);
            for i in 0..t.rows() {
                let d = i64::from(ship[i]);
                if d < p.date_lo || d >= p.date_hi {
                    continue;
                }
                let rev = price[i] as i128 * (100 - disc[i] as i128);
                total += rev;
                let ty = u32::from(types[(l.partkey.value(i) - 1) as usize]);
                if ty >= p.promo_lo && ty < p.promo_hi {
                    promo += rev;
                }
            }
            Answer::Q14 { promo, total }
        }
    }
}

/// Q12's answer from its four counts (MAIL high, MAIL low, SHIP high, SHIP low).
pub fn q12_modes(counts: &[i128]) -> Answer {
    let p = q12_params();
    Answer::Q12(vec![
        Q12Mode {
            mode: SHIP_MODES[p.mode_a as usize],
            high: counts[0],
            low: counts[1],
        },
        Q12Mode {
            mode: SHIP_MODES[p.mode_b as usize],
            high: counts[2],
            low: counts[3],
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_days_from_the_epoch() {
        assert_eq!(days(1970, 1, 1), 0);
        assert_eq!(days(1992, 1, 1), 8035);
        assert_eq!(days(1998, 9, 2), q1_ship_until());
        assert_eq!(days(2000, 3, 1) - days(2000, 2, 28), 2);
    }

    #[test]
    fn decimals_print_their_scale() {
        assert_eq!(decimal(12_301_136_360_101, 4), "1230113636.0101");
        assert_eq!(decimal(-5, 2), "-0.05");
        assert_eq!(decimal(7, 0), "7");
    }

    #[test]
    fn query_numbers_outside_the_four_are_refused() {
        assert_eq!(Query::from_number(14), Ok(Query::Q14));
        assert!(
            Query::from_number(3)
                .unwrap_err()
                .contains("1, 6, 12 and 14")
        );
    }
}
