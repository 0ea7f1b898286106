//! The FOCUS export against the FOCUS 1.2 column facts (`shared/data/focus_1_2_columns.csv`,
//! copied from the spec) and against figures worked out by hand.

use std::collections::BTreeMap;

use super::*;
use crate::chargeback::{GPU_US_PER_GPU_HOUR as H, Ledger, Rate, StatementInput, UsageDay};

/// A CSV's records, quoted fields unquoted (RFC 4180).
fn records(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let (mut row, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\r') => {}
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    rows
}

/// Column → (feature level, allows nulls, data type), as the spec's tables say.
fn spec() -> BTreeMap<String, (String, bool, String)> {
    include_str!("../../../data/focus_1_2_columns.csv")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].into(), (f[1].into(), f[2] == "True", f[3].into()))
        })
        .collect()
}

fn decimal(v: &str) -> bool {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, "0"));
    !whole.is_empty()
        && !frac.is_empty()
        && whole
            .chars()
            .chain(frac.chars())
            .all(|c| c.is_ascii_digit())
}

fn date_time(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 20 && b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':' && b[19] == b'Z'
}

/// A Key-Value Format value: a JSON object of scalars.
fn key_value(v: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(v)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .is_some_and(|o| o.values().all(|v| !v.is_object() && !v.is_array()))
}

/// What breaks FOCUS 1.2 in an export: its columns, nulls and data types, and the value rules
/// the rows here touch (ChargeCategory, ChargeFrequency, ServiceCategory, PricingQuantity and
/// PricingUnit, ConsumedQuantity and ConsumedUnit, cost = quantity × unit price).
fn problems(text: &str) -> Vec<String> {
    let spec = spec();
    let rows = records(text);
    let header = &rows[0];
    let mut found = Vec::new();
    for (column, (level, _, _)) in &spec {
        if level == "Mandatory" && !header.contains(column) {
            found.push(format!("the Mandatory column {column} is missing"));
        }
    }
    for column in header {
        if !spec.contains_key(column) && !column.starts_with("x_") {
            found.push(format!("{column} is neither FOCUS 1.2's nor x_-prefixed"));
        }
    }
    for (n, row) in rows.iter().enumerate().skip(1) {
        let get = |c: &str| {
            header
                .iter()
                .position(|h| h == c)
                .map_or("", |i| row[i].as_str())
        };
        for (column, value) in header.iter().zip(row) {
            let Some((_, nulls, data_type)) = spec.get(column) else {
                continue;
            };
            let fits = match (value.is_empty(), data_type.as_str()) {
                (true, _) => *nulls,
                (false, "Decimal") => decimal(value),
                (false, "Date/Time") => date_time(value),
                (false, "JSON") => key_value(value),
                (false, _) => true,
            };
            if !fits {
                found.push(format!("row {n}: {column} = {value:?}"));
            }
        }
        let category = get("ChargeCategory");
        let usage = category == "Usage";
        let rules = [
            ["Usage", "Purchase", "Tax", "Credit", "Adjustment"].contains(&category),
            ["One-Time", "Recurring", "Usage-Based"].contains(&get("ChargeFrequency")),
            get("ServiceCategory") == "Compute" && get("ServiceSubcategory") == "Containers",
            usage != get("PricingQuantity").is_empty(),
            get("PricingQuantity").is_empty() == get("PricingUnit").is_empty(),
            usage != get("ConsumedQuantity").is_empty(),
            get("ConsumedQuantity").is_empty() == get("ConsumedUnit").is_empty(),
        ];
        if let Some(broken) = rules.iter().position(|ok| !ok) {
            found.push(format!("row {n}: value rule {broken}"));
        }
        if !get("ListUnitPrice").is_empty() {
            let number = |c: &str| get(c).parse::<f64>().unwrap_or(f64::NAN);
            let priced = number("PricingQuantity") * number("ListUnitPrice");
            // a row's cent is its team's running total's: within a cent of its own figure
            if (priced - number("ListCost")).abs() > 0.010_001 {
                found.push(format!("row {n}: quantity × unit price is not the cost"));
            }
        }
    }
    found
}

fn cents_of(amount: &str) -> i64 {
    let (whole, frac) = amount.split_once('.').expect("an amount with cents");
    let abs = whole.trim_start_matches('-').parse::<i64>().expect("whole") * 100
        + frac.parse::<i64>().expect("cents");
    if whole.starts_with('-') { -abs } else { abs }
}

/// Two H100s at $10.00 per GPU-hour on 2026-11-01: research holds one all day, 18 of its 24
/// GPU-hours busy; search holds 12, busy 3; a sandbox no team owns used 1. Idle shared by
/// allocation: the pool is $480 − $210 of the teams' use = $270, research's share $180.00,
/// search's $90.00. Research borrowed 6 GPU-hours of search's quota at a 50% lending credit:
/// $30.00 from research to search.
fn day_of(basis: Basis) -> String {
    let d = Day::parse("2026-11-01").expect("day");
    let usage = |ns: &str, allocated: i64, busy: i64, borrowed: i64, lent: i64| UsageDay {
        day: d,
        namespace: ns.into(),
        flavor: "h100".into(),
        allocated_gpu_us: Some(allocated * H),
        busy_gpu_us: busy * H,
        observed_gpu_us: allocated * H,
        borrowed_gpu_us: borrowed * H,
        lent_gpu_us: lent * H,
    };
    // search's cost centre with a comma and quotes, to be quoted in the CSV and the tags
    let mut teams = crate::chargeback::tests::teams();
    teams[1].cost_centre = "CC-1002, \"ops\"".into();
    let input = StatementInput {
        from: d,
        to: d.plus(1),
        idle: IdleShare::Allocation,
        lend_credit_pct: 50,
        teams: teams.clone(),
        capacity: BTreeMap::from([("h100".to_owned(), 2)]),
        capacity_by_day: BTreeMap::new(),
        rates: vec![Rate {
            flavor: "h100".into(),
            effective_from: d,
            cents_per_gpu_hour: 1_000,
        }],
        usage: vec![
            usage("team-research", 24, 18, 6, 0),
            usage("team-search", 12, 3, 0, 6),
            usage("ml-sandbox", 0, 1, 0, 0),
            // DCGM saw the rest of the second GPU idle, with no pod: every hour observed
            UsageDay {
                observed_gpu_us: 12 * H,
                ..usage("", 0, 0, 0, 0)
            },
        ],
        tokens: Vec::new(),
    };
    let mut ledger = Ledger::new(d, d.plus(1), IdleShare::Allocation, 50, teams.clone(), None);
    let mut head = FocusHead::new(d, d.plus(1), basis, IdleShare::Allocation);
    let mut out = header();
    for facts in input.days() {
        let day = ledger.add_day(&facts);
        head.day_rows(&mut out, &facts, &day, ledger.day_exact(), &teams);
    }
    out
}

#[test]
fn a_days_rows_by_use_add_up_to_each_teams_charge() {
    let text = day_of(Basis::Use);
    assert_eq!(problems(&text), Vec::<String>::new());
    let rows = records(&text);
    let column = |c: &str| rows[0].iter().position(|h| h == c).expect("column");
    let pick = |cols: &[&str]| -> Vec<Vec<String>> {
        rows[1..]
            .iter()
            .map(|r| cols.iter().map(|c| r[column(c)].clone()).collect())
            .collect()
    };
    // use at $10.00 (18 and 3 GPU-hours), the idle shares, research's fee and search's credit
    // of $30.00 (6 GPU-hours × $10.00 × 50%)
    let want = [
        [
            "research",
            "Usage",
            "180.00",
            "18.000000",
            "team-research/h100",
        ],
        ["search", "Usage", "30.00", "3.000000", "team-search/h100"],
        ["research", "Adjustment", "180.00", "", ""],
        ["research", "Adjustment", "30.00", "", ""],
        ["search", "Adjustment", "90.00", "", ""],
        ["search", "Credit", "-30.00", "", ""],
    ];
    assert_eq!(
        pick(&[
            "SubAccountName",
            "ChargeCategory",
            "BilledCost",
            "PricingQuantity",
            "ResourceId"
        ]),
        want.map(|r| r.map(String::from).to_vec())
    );
    // research 180 + 180 + 30 = $390.00, search 30 + 90 − 30 = $90.00: each team's charge
    // (use + idle share + lending fee − lending credit)
    let sum = |team: &str| -> i64 {
        rows[1..]
            .iter()
            .filter(|r| r[column("SubAccountName")] == team)
            .map(|r| cents_of(&r[column("BilledCost")]))
            .sum()
    };
    assert_eq!((sum("research"), sum("search")), (39_000, 9_000));
    let tags: serde_json::Value = serde_json::from_str(&rows[2][column("Tags")]).expect("tags");
    assert_eq!(
        tags,
        serde_json::json!({"team": "search", "cost_centre": "CC-1002, \"ops\"", "flavor": "h100"})
    );
    for (c, want) in [
        ("ChargePeriodStart", "2026-11-01T00:00:00Z"),
        ("ChargePeriodEnd", "2026-11-02T00:00:00Z"),
        ("BillingPeriodStart", "2026-11-01T00:00:00Z"),
        ("BillingPeriodEnd", "2026-11-02T00:00:00Z"),
        ("ConsumedQuantity", "18.000000"),
        ("ListUnitPrice", "10.00"),
        ("PricingUnit", "GPU-Hours"),
        ("BillingCurrency", "USD"),
    ] {
        assert_eq!(rows[1][column(c)], want, "{c}");
    }
}

#[test]
fn a_days_rows_by_allocation_are_its_cost_by_allocation() {
    let text = day_of(Basis::Allocation);
    assert_eq!(problems(&text), Vec::<String>::new());
    let rows = records(&text);
    let column = |c: &str| rows[0].iter().position(|h| h == c).expect("column");
    // 24 and 12 GPU-hours at $10.00, busy 18 and 3 as consumed; no shares, no lending
    let got: Vec<[&str; 3]> = rows[1..]
        .iter()
        .map(|r| {
            [
                r[column("BilledCost")].as_str(),
                r[column("PricingQuantity")].as_str(),
                r[column("ConsumedQuantity")].as_str(),
            ]
        })
        .collect();
    assert_eq!(
        got,
        [
            ["240.00", "24.000000", "18.000000"],
            ["120.00", "12.000000", "3.000000"]
        ]
    );
}

#[test]
fn the_check_sees_what_breaks_focus() {
    let good = day_of(Basis::Use);
    let dropped = good.replacen("BilledCost,", "", 1);
    assert!(
        problems(&dropped)
            .iter()
            .any(|p| p.contains("BilledCost is missing"))
    );
    let dateless = good.replacen("2026-11-02T00:00:00Z", "2026-11-02 00:00:00", 1);
    assert!(
        problems(&dateless)
            .iter()
            .any(|p| p.contains("BillingPeriodEnd"))
    );
    let costless = good.replacen("\r\n180.00,", "\r\n,", 1);
    assert!(problems(&costless).iter().any(|p| p.contains("BilledCost")));
    assert_eq!(amount(-5), "-0.05");
    assert_eq!(amount(123_456), "1234.56");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// Over a period of days with any usage, rates, lending and idle share, a team's FOCUS rows
    /// add up to its statement's charge (basis use) or its cost by allocation (basis
    /// allocation) to the cent, and every export follows FOCUS 1.2.
    #[test]
    fn a_teams_rows_add_up_to_its_statement_to_the_cent(
        rows in proptest::collection::vec((0i32..5, 0usize..3, 0i64..=40_000, 0i64..=100, 1i64..3_000), 1..30),
        idle in 0usize..4,
        lend_credit_pct in 0u8..=100,
        by_allocation in proptest::prelude::any::<bool>(),
    ) {
        let namespaces = ["team-research", "team-search", "ml-sandbox"];
        let from = Day::parse("2026-11-01").expect("day");
        let idle = IdleShare::ALL[idle];
        let mut input = StatementInput {
            from,
            to: from.plus(5),
            idle,
            lend_credit_pct,
            teams: crate::chargeback::tests::teams(),
            capacity: BTreeMap::from([("h100".to_owned(), 3)]),
            capacity_by_day: BTreeMap::new(),
            rates: vec![Rate { flavor: "h100".into(), effective_from: from, cents_per_gpu_hour: 987 }],
            usage: Vec::new(),
            tokens: Vec::new(),
        };
        for (d, ns, allocated_s, busy_pct, rate) in rows {
            // odd microseconds, so every figure has fractions of a cent
            let allocated = allocated_s * 1_000_003;
            input.usage.push(UsageDay {
                day: from.plus(d),
                namespace: namespaces[ns].into(),
                flavor: "h100".into(),
                allocated_gpu_us: Some(allocated),
                busy_gpu_us: allocated * busy_pct / 100,
                observed_gpu_us: allocated,
                borrowed_gpu_us: allocated / 3 * i64::from(ns == 0),
                lent_gpu_us: allocated / 2 * i64::from(ns == 1),
            });
            input.rates.push(Rate { flavor: "h100".into(), effective_from: from.plus(d), cents_per_gpu_hour: rate });
        }
        input.rates.sort_by_key(|r| r.effective_from);
        input.rates.dedup_by_key(|r| r.effective_from);
        let basis = if by_allocation { Basis::Allocation } else { Basis::Use };
        let teams = input.teams.clone();
        let mut ledger = Ledger::new(input.from, input.to, idle, lend_credit_pct, teams.clone(), None);
        let mut head = FocusHead::new(input.from, input.to, basis, idle);
        let mut out = header();
        for facts in input.days() {
            let day = ledger.add_day(&facts);
            head.day_rows(&mut out, &facts, &day, ledger.day_exact(), &teams);
        }
        let statement = ledger.finish();
        proptest::prop_assert_eq!(problems(&out), Vec::<String>::new());
        let records = records(&out);
        let column = |c: &str| records[0].iter().position(|h| h == c).expect("column");
        for line in &statement.teams {
            let sum: i64 = records[1..]
                .iter()
                .filter(|r| r[column("SubAccountName")] == line.team)
                .map(|r| cents_of(&r[column("BilledCost")]))
                .sum();
            let want = if by_allocation { line.cost_by_allocation_cents } else { line.charge_cents };
            proptest::prop_assert_eq!(sum, want, "{} by {:?}, idle {:?}", line.team, basis, idle);
        }
    }
}
