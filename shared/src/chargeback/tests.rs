//! The figures below are worked out by hand in the comments.

use proptest::prelude::*;

use super::*;

const H: i64 = GPU_US_PER_GPU_HOUR;

fn day(s: &str) -> Day {
    Day::parse(s).unwrap_or_else(|| panic!("{s}"))
}

pub(super) fn teams() -> Vec<Team> {
    vec![
        Team {
            name: "research".into(),
            namespace: "team-research".into(),
            cost_centre: "CC-1001".into(),
        },
        Team {
            name: "search".into(),
            namespace: "team-search".into(),
            cost_centre: "CC-1002".into(),
        },
    ]
}

fn usage(d: &str, ns: &str, allocated_h: Option<i64>, busy_h: i64, observed_h: i64) -> UsageDay {
    UsageDay {
        day: day(d),
        namespace: ns.into(),
        flavor: "h100".into(),
        allocated_gpu_us: allocated_h.map(|h| h * H),
        busy_gpu_us: busy_h * H,
        observed_gpu_us: observed_h * H,
        borrowed_gpu_us: 0,
        lent_gpu_us: 0,
    }
}

/// Two H100s at $10.00 per GPU-hour for 2026-11-01: research holds one all day (24 GPU-h) and
/// keeps it 75% busy; on the other, search holds 12 GPU-h, busy 3, with 2 hours of it never
/// observed (DCGM had no sample), ml-sandbox (no team) used 1 GPU-h without an allocation, and
/// DCGM saw it idle with no pod for the other 11 hours.
fn one_day(idle: IdleShare) -> StatementInput {
    StatementInput {
        from: day("2026-11-01"),
        to: day("2026-11-02"),
        idle,
        lend_credit_pct: 0,
        teams: teams(),
        capacity: BTreeMap::from([("h100".to_owned(), 2)]),
        capacity_by_day: BTreeMap::new(),
        rates: vec![Rate {
            flavor: "h100".into(),
            effective_from: day("2026-01-01"),
            cents_per_gpu_hour: 1_000,
        }],
        usage: vec![
            usage("2026-11-01", "team-research", Some(24), 18, 24),
            usage("2026-11-01", "team-search", Some(12), 3, 10),
            usage("2026-11-01", "ml-sandbox", Some(0), 1, 1),
            usage("2026-11-01", "", None, 0, 11),
        ],
        tokens: vec![TokensDay {
            day: day("2026-11-01"),
            namespace: "team-search".into(),
            model: "llama-8b".into(),
            prompt_tokens: 1_000_000,
            generation_tokens: 250_000,
            prefill_us: 0,
            decode_us: 0,
        }],
    }
}

#[test]
fn a_day_by_allocation_and_by_use() {
    let s = statement(&one_day(IdleShare::Allocation), false);
    let fleet = s.fleet.clone().expect("the fleet");
    let [research, search] = [&s.teams[0], &s.teams[1]];
    assert_eq!(research.allocated_gpu_hours.to_string(), "24.000000");
    assert_eq!(research.idle_gpu_hours.to_string(), "6.000000");
    assert_eq!(research.utilisation_pct.as_deref(), Some("75.00"));
    // 24 GPU-h × $10 = $240.00; 18 busy GPU-h = $180.00
    assert_eq!(research.cost_by_allocation_cents, 24_000);
    assert_eq!(research.cost_by_use_cents, 18_000);
    assert_eq!(search.cost_by_allocation_cents, 12_000);
    assert_eq!(search.cost_by_use_cents, 3_000);
    // search: 12 allocated, 10 observed → 2 unobserved; 9 idle including them
    assert_eq!(
        search.unobserved_allocated_gpu_hours.to_string(),
        "2.000000"
    );
    assert_eq!(search.idle_gpu_hours.to_string(), "9.000000");
    assert_eq!(
        (search.prompt_tokens, search.generation_tokens),
        (1_000_000, 250_000)
    );
    // the fleet: 48 GPU-h = $480.00; 36 allocated, so 12 unallocated = $120.00; busy 18 + 3 +
    // the sandbox's 1; observed 24 + 10 + 1 + 11 = 46, so 2 GPU-h ($20.00) unobserved, the
    // platform's; the idle pool is $480 − $20 − $210 of the teams' use = $250.00
    assert_eq!(fleet.capacity_gpu_hours.to_string(), "48.000000");
    assert_eq!(fleet.capacity_cost_cents, 48_000);
    assert_eq!(fleet.unallocated_gpu_hours.to_string(), "12.000000");
    assert_eq!(fleet.unallocated_cost_cents, 12_000);
    assert_eq!(fleet.busy_gpu_hours.to_string(), "22.000000");
    assert_eq!(fleet.unattributed_busy_gpu_hours.to_string(), "1.000000");
    assert_eq!(fleet.unobserved_gpu_hours.to_string(), "2.000000");
    assert_eq!(fleet.unobserved_cost_cents, 2_000);
    assert_eq!(fleet.idle_pool_cents, 25_000);
    // shared by allocation, 24 : 12 → $166.666… and $83.333… → 16,667 and 8,333
    assert_eq!(
        (research.idle_share_cents, search.idle_share_cents),
        (16_667, 8_333)
    );
    // each team's own idle: research 24 − 18 = 6 GPU-hours, search 12 − 3 = 9, at $10.00
    assert_eq!(
        (research.idle_cost_cents, search.idle_cost_cents),
        (6_000, 9_000)
    );
    // charges: $180 + $166.666… = 34,667; $30 + $83.333… = 11,333; the platform keeps the
    // unobserved $20.00: 34,667 + 11,333 + 2,000 = 48,000, the capacity cost
    assert_eq!(
        (research.charge_cents, search.charge_cents),
        (34_667, 11_333)
    );
    assert_eq!(fleet.platform_cents, 2_000);
    assert!(
        s.notes.iter().any(|n| n.contains(
            "2.00 GPU-hours of capacity on 1 day(s) (2026-11-01 … 2026-11-01) had no DCGM sample"
        )),
        "{:?}",
        s.notes
    );
    // the sandbox is named: no team owns it, and its GPU-hour is in the idle pool
    assert_eq!(
        s.unattributed,
        [UnattributedLine {
            namespace: "ml-sandbox".into(),
            allocated_gpu_hours: Hours(0),
            busy_gpu_hours: Hours(H.into()),
        }]
    );
    // a requester's statement names no other namespace
    let mine = statement_for(
        &one_day(IdleShare::Allocation),
        false,
        Some(&["search".to_owned()]),
    );
    assert!(mine.unattributed.is_empty());
}

/// A flavor no one was allocated any of in the period is named: its capacity is idle with no
/// owner.
#[test]
fn capacity_no_one_held_is_named() {
    let mut input = one_day(IdleShare::Allocation);
    input.capacity.insert("a100".to_owned(), 1);
    let s = statement(&input, false);
    assert!(
        s.notes.iter().any(|n| n
            .contains("No team or namespace was allocated any of flavor(s) a100 in the period")),
        "{:?}",
        s.notes
    );
    assert!(
        !statement(&one_day(IdleShare::Allocation), false)
            .notes
            .iter()
            .any(|n| n.contains("No team or namespace"))
    );
}

#[test]
fn each_idle_share_divides_the_same_pool() {
    let shares = |idle| {
        let s = statement(&one_day(idle), false);
        (
            s.teams[0].idle_share_cents,
            s.teams[1].idle_share_cents,
            s.fleet.expect("the fleet").platform_cents,
        )
    };
    // by use, 18 : 3 → $250 × 18/21 = $214.285714… → 21,429 and $35.714285… → 3,571; the
    // platform keeps the $20.00 nobody observed
    assert_eq!(shares(IdleShare::Use), (21_429, 3_571, 2_000));
    // evenly between the two teams with an allocation
    assert_eq!(shares(IdleShare::Even), (12_500, 12_500, 2_000));
    // kept separate: one platform line of $250.00 + $20.00
    assert_eq!(shares(IdleShare::Separate), (0, 0, 27_000));
}

#[test]
fn a_period_spanning_a_rate_change_is_priced_day_by_day() {
    let mut input = one_day(IdleShare::Separate);
    input.to = day("2026-11-03");
    input.rates.push(Rate {
        flavor: "h100".into(),
        effective_from: day("2026-11-02"),
        cents_per_gpu_hour: 1_200,
    });
    input
        .usage
        .push(usage("2026-11-02", "team-research", Some(24), 12, 24));
    let s = statement(&input, true);
    // 24 GPU-h at $10 on the 1st + 24 at $12 on the 2nd = $240 + $288
    assert_eq!(s.teams[0].cost_by_allocation_cents, 52_800);
    // busy: 18 × $10 + 12 × $12 = $180 + $144
    assert_eq!(s.teams[0].cost_by_use_cents, 32_400);
    assert_eq!(s.days.len(), 2);
    assert_eq!(s.days[1].teams[0].cost_by_allocation_cents, 28_800);
    assert_eq!(
        s.days[1].fleet.as_ref().map(|f| f.capacity_cost_cents),
        Some(48 * 1_200)
    );
    assert_eq!(s.to_inclusive, day("2026-11-02"));
}

#[test]
fn cents_round_half_up_from_their_own_exact_hours() {
    let mut input = one_day(IdleShare::Allocation);
    // 1 GPU-second at $10/h = 0.2777… cents → 0; 1.8 s = 0.5 cents → 1 (half up)
    input.usage = vec![UsageDay {
        day: day("2026-11-01"),
        namespace: "team-research".into(),
        flavor: "h100".into(),
        allocated_gpu_us: Some(1_800_000),
        busy_gpu_us: 1_000_000,
        observed_gpu_us: 1_800_000,
        borrowed_gpu_us: 0,
        lent_gpu_us: 0,
    }];
    let s = statement(&input, false);
    assert_eq!(s.teams[0].cost_by_allocation_cents, 1);
    assert_eq!(s.teams[0].cost_by_use_cents, 0);
    assert!(s.notes[0].contains("rounded half up"));
}

#[test]
fn unknown_allocation_and_missing_rates_are_said() {
    let mut input = one_day(IdleShare::Allocation);
    input.usage[0].allocated_gpu_us = None;
    input.usage.push(UsageDay {
        flavor: "a100".into(),
        ..usage("2026-11-01", "team-search", Some(1), 1, 1)
    });
    let s = statement(&input, false);
    assert!(
        s.notes.iter().any(|n| n.contains(
            "Neither Kueue nor kube-state-metrics said what was allocated on 1 day(s) (2026-11-01"
        )),
        "{:?}",
        s.notes
    );
    // research's 24 observed GPU-hours are what DCGM's pod mapping names it for: its
    // allocation, as Kueue's was, so its figures stand
    assert_eq!(s.teams[0].allocated_gpu_hours.to_string(), "24.000000");
    assert_eq!(s.teams[0].cost_by_allocation_cents, 24_000);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("No rate for flavor(s) a100")),
        "{:?}",
        s.notes
    );
}

#[test]
fn csv_has_one_row_per_team_and_the_platform_line() {
    let s = statement(&one_day(IdleShare::Separate), false);
    let text = csv(&s);
    let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines[0], CSV_HEADER);
    assert_eq!(
        lines[1],
        "2026-11-01,2026-11-01,,research,CC-1001,24.000000,18.000000,6.000000,0.000000,75.00,0,0,24000,18000,6000,0,0.000000,0.000000,0,0,18000,separate,0"
    );
    assert_eq!(
        lines[3],
        "2026-11-01,2026-11-01,,(platform),,,,,,,,,,,,27000,,,,,27000,separate,0"
    );
    assert_eq!(lines.len(), 4);
    // a requester's view: their team's row, no platform line
    let mine = csv(&statement_for(
        &one_day(IdleShare::Separate),
        false,
        Some(&["search".to_owned()]),
    ));
    assert_eq!(mine.split("\r\n").filter(|l| !l.is_empty()).count(), 2);
    assert!(mine.contains(",search,"));
    assert_eq!(field("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
    assert_eq!(field("a,\"b\""), "\"a,\"\"b\"\"\"");
}

#[test]
fn hours_print_and_read_back() {
    let h = i128::from(H);
    assert_eq!(Hours(h / 3).to_hundredths(), "0.33");
    assert_eq!(Hours(h * 2 / 3).to_hundredths(), "0.67");
    assert_eq!(Hours(-h * 3 / 2).to_hundredths(), "-1.50");
    assert_eq!(Hours(h * 1234 + h / 200).to_hundredths(), "1234.01");
    assert_eq!(Hours(h / 3).to_string(), "0.333333");
    assert_eq!(Hours(2 * h / 3).to_string(), "0.666667");
    assert_eq!(Hours::try_from("1.5".to_owned()), Ok(Hours(3 * h / 2)));
    assert_eq!(IdleShare::parse("use"), Some(IdleShare::Use));
    assert_eq!(IdleShare::parse("weighted"), None);
}

proptest! {
    /// Whatever the usage and the choice, the teams' charges and the platform line recover the
    /// capacity cost, give or take a cent per figure; and the by-day statements add up to the
    /// period's, give or take a cent per day.
    #[test]
    fn charges_recover_the_capacity_cost(
        rows in proptest::collection::vec((0i32..3, 0usize..3, 0i64..=24, 0i64..=100, 0i64..=100, 1i64..2_000), 1..20),
        gpus in 3i64..10,
        idle in 0usize..4,
        lend_credit_pct in 0u8..=100,
        lending in proptest::collection::vec((0i64..=12, 0i64..=12), 9),
    ) {
        let namespaces = ["team-research", "team-search", "ml-sandbox"];
        let from = day("2026-11-01");
        let mut input = StatementInput {
            from,
            to: from.plus(3),
            idle: IdleShare::ALL[idle],
            lend_credit_pct,
            teams: teams(),
            capacity: BTreeMap::from([("h100".to_owned(), gpus)]),
            capacity_by_day: BTreeMap::new(),
            rates: Vec::new(),
            usage: Vec::new(),
            tokens: Vec::new(),
        };
        let mut seen = std::collections::BTreeSet::new();
        for (d, ns, allocated_h, busy_pct, observed_pct, rate) in rows {
            if !seen.insert((d, ns)) {
                continue;
            }
            let allocated = allocated_h * H;
            input.usage.push(UsageDay {
                day: from.plus(d),
                namespace: namespaces[ns].into(),
                flavor: "h100".into(),
                allocated_gpu_us: Some(allocated),
                busy_gpu_us: allocated * busy_pct / 100,
                observed_gpu_us: allocated * observed_pct / 100,
                borrowed_gpu_us: lending[d as usize * 3 + ns].0 * H / 7,
                lent_gpu_us: lending[d as usize * 3 + ns].1 * H / 3,
            });
            input.rates.push(Rate { flavor: "h100".into(), effective_from: from.plus(d), cents_per_gpu_hour: rate });
        }
        input.rates.push(Rate { flavor: "h100".into(), effective_from: day("2026-01-01"), cents_per_gpu_hour: 500 });
        let s = statement(&input, true);
        let fleet = s.fleet.clone().expect("the fleet");
        let charged: i64 = s.teams.iter().map(|t| t.charge_cents).sum::<i64>() + fleet.platform_cents;
        prop_assert!((charged - fleet.capacity_cost_cents).abs() <= 3, "{charged} vs {}", fleet.capacity_cost_cents);
        let shared: i64 = s.teams.iter().map(|t| t.idle_share_cents).sum::<i64>() + fleet.platform_cents;
        for t in &s.teams {
            prop_assert_eq!(t.idle_cost_cents, t.cost_by_allocation_cents - t.cost_by_use_cents);
        }
        prop_assert!((shared - fleet.idle_pool_cents - fleet.unobserved_cost_cents).abs() <= 3);
        // lending moves money between teams and never changes a total
        let fees: i64 = s.teams.iter().map(|t| t.lending_fee_cents).sum();
        let credits: i64 = s.teams.iter().map(|t| t.lending_credit_cents).sum();
        prop_assert!((fees - credits).abs() <= 2, "{fees} vs {credits}");
        for (i, t) in s.teams.iter().enumerate() {
            let by_day: i64 = s.days.iter().map(|d| d.teams[i].cost_by_allocation_cents).sum();
            prop_assert!((by_day - t.cost_by_allocation_cents).abs() <= 3);
            // idle is shared day by day: the period's share is its days'
            let shared_by_day: i64 = s.days.iter().map(|d| d.teams[i].idle_share_cents).sum();
            prop_assert!((shared_by_day - t.idle_share_cents).abs() <= 3);
            prop_assert_eq!(t.idle_gpu_hours.0, t.allocated_gpu_hours.0 - t.busy_gpu_hours.0);
            prop_assert!(t.cost_by_use_cents <= t.cost_by_allocation_cents);
        }
    }
}

/// Two teams on one H100 flavor at $10.00 per GPU-hour, a 50% lending credit. On 2026-11-01
/// research borrowed 6 GPU-hours and search lent 4 (a Cohort's own quota covered the other
/// 2): 4 GPU-hours × $10 × 50% = $20.00 moves from research to search. On 2026-11-02 both
/// borrowed (research 3, search 1) from what research lent (2) and search lent (2) — 4 lent
/// against 4 borrowed: $20.00, paid 3:1 ($15.00, $5.00) and credited 2:2 ($10.00 each).
#[test]
fn lending_credits_move_money_from_borrowers_to_lenders() {
    let mut input = one_day(IdleShare::Separate);
    input.to = day("2026-11-03");
    input.lend_credit_pct = 50;
    let lend = |d: &str, ns: &str, borrowed_h: i64, lent_h: i64| UsageDay {
        borrowed_gpu_us: borrowed_h * H,
        lent_gpu_us: lent_h * H,
        ..usage(d, ns, Some(0), 0, 0)
    };
    input.usage = vec![
        lend("2026-11-01", "team-research", 6, 0),
        lend("2026-11-01", "team-search", 0, 4),
        lend("2026-11-02", "team-research", 3, 2),
        lend("2026-11-02", "team-search", 1, 2),
    ];
    let s = statement(&input, true);
    let [research, search] = [&s.teams[0], &s.teams[1]];
    assert_eq!(s.lend_credit_pct, 50);
    assert_eq!(research.borrowed_gpu_hours.to_string(), "9.000000");
    assert_eq!(research.lent_gpu_hours.to_string(), "2.000000");
    assert_eq!(search.lent_gpu_hours.to_string(), "6.000000");
    assert_eq!(
        (research.lending_fee_cents, research.lending_credit_cents),
        (3_500, 1_000)
    );
    assert_eq!(
        (search.lending_fee_cents, search.lending_credit_cents),
        (500, 3_000)
    );
    // kept separate, the teams pay their use (none here) and the lending: +$25.00 and −$25.00
    assert_eq!(
        (research.charge_cents, search.charge_cents),
        (2_500, -2_500)
    );
    let first = &s.days[0].teams;
    assert_eq!(
        (first[0].lending_fee_cents, first[1].lending_credit_cents),
        (2_000, 2_000)
    );
    // at 0% nothing moves
    input.lend_credit_pct = 0;
    let none = statement(&input, false);
    assert!(
        none.teams
            .iter()
            .all(|t| t.lending_fee_cents == 0 && t.lending_credit_cents == 0)
    );
}

/// Lending settled at the limits: a day of a million GPUs at the highest rate. Research
/// borrows 600,000 GPU-days and lends 100,000; search borrows 200,000 and lends 500,000. At 50%
/// the transfer is min(800,000, 600,000) × 24 h × 10,000,000 cents × 50% =
/// 72,000,000,000,000 cents: fees 3/4 and 1/4 of it (54 and 18 × 10¹²), credits 1/6 and 5/6
/// (12 and 60 × 10¹²).
#[test]
fn lending_at_the_limits_is_exact() {
    let mut input = one_day(IdleShare::Separate);
    input.capacity = BTreeMap::from([("h100".to_owned(), 1_000_000)]);
    input.rates[0].cents_per_gpu_hour = MAX_CENTS_PER_GPU_HOUR;
    input.lend_credit_pct = 50;
    input.tokens.clear();
    let lend = |ns: &str, borrowed: i64, lent: i64| UsageDay {
        borrowed_gpu_us: borrowed * 24 * H,
        lent_gpu_us: lent * 24 * H,
        ..usage("2026-11-01", ns, Some(0), 0, 0)
    };
    input.usage = vec![
        lend("team-research", 600_000, 100_000),
        lend("team-search", 200_000, 500_000),
    ];
    let s = statement(&input, false);
    let [research, search] = [&s.teams[0], &s.teams[1]];
    assert_eq!(
        (research.lending_fee_cents, research.lending_credit_cents),
        (54_000_000_000_000, 12_000_000_000_000)
    );
    assert_eq!(
        (search.lending_fee_cents, search.lending_credit_cents),
        (18_000_000_000_000, 60_000_000_000_000)
    );
    assert_eq!(research.charge_cents + search.charge_cents, 0);
}

#[test]
fn queries_are_checked_field_by_field() {
    let q = |from: &str, to: &str, by: &str, idle: &str, format: &str| StatementQuery {
        from: Some(from.into()),
        to: Some(to.into()),
        by: Some(by.into()),
        idle: Some(idle.into()),
        lend_credit: None,
        format: Some(format.into()),
        basis: None,
    };
    assert_eq!(
        StatementQuery {
            lend_credit: Some("25".into()),
            ..q("2026-11-01", "2026-11-30", "day", "use", "csv")
        }
        .checked(),
        Ok(Period {
            from: day("2026-11-01"),
            to: day("2026-12-01"),
            by_day: true,
            idle: IdleShare::Use,
            lend_credit_pct: 25,
            format: Format::Csv,
        })
    );
    // FOCUS takes a basis (use by default); the basis is for FOCUS alone
    let focus = |basis: Option<&str>| StatementQuery {
        basis: basis.map(String::from),
        ..q("2026-11-01", "2026-11-30", "", "", "focus")
    };
    let format = |q: StatementQuery| q.checked().map(|p| p.format);
    assert_eq!(format(focus(None)), Ok(Format::Focus(focus::Basis::Use)));
    assert_eq!(
        format(focus(Some("allocation"))),
        Ok(Format::Focus(focus::Basis::Allocation))
    );
    let paths = |q: StatementQuery| -> Vec<String> {
        q.checked()
            .expect_err("refused")
            .into_iter()
            .map(|e| e.path)
            .collect()
    };
    assert_eq!(paths(focus(Some("charge"))), ["basis"]);
    assert_eq!(
        paths(StatementQuery {
            basis: Some("use".into()),
            ..q("2026-11-01", "2026-11-30", "", "", "csv")
        }),
        ["basis"]
    );
    let errors = StatementQuery {
        lend_credit: Some("101".into()),
        ..q("2026-11-31", "2026-10-01", "week", "weighted", "xml")
    }
    .checked()
    .expect_err("all wrong");
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, vec!["from", "by", "idle", "lend_credit", "format"]);
    let backwards = q("2026-11-02", "2026-11-01", "", "", "")
        .checked()
        .expect_err("backwards");
    assert_eq!(backwards[0].message, "2026-11-01 is before 2026-11-02");
    let missing = StatementQuery::default().checked().expect_err("missing");
    assert_eq!(missing.len(), 2);
    assert!(q("2020-01-01", "2026-01-01", "", "", "").checked().is_err());
}

#[test]
fn a_late_ingest_into_a_closed_month_is_an_adjustment() {
    let frozen = statement(&one_day(IdleShare::Allocation), false);
    let mut later = one_day(IdleShare::Allocation);
    // 2 more busy GPU-hours of research arrive after closing (allocated 24 → 26)
    later.usage[0] = usage("2026-11-01", "team-research", Some(26), 20, 26);
    let now = statement(&later, false);
    let adj = adjustments("2026-11", &frozen, &now);
    assert_eq!(
        adj,
        vec![Adjustment {
            month: "2026-11".into(),
            team: "research".into(),
            allocated_gpu_hours: Hours(2 * i128::from(H)),
            busy_gpu_hours: Hours(2 * i128::from(H)),
            cost_by_allocation_cents: 2_000,
            cost_by_use_cents: 2_000,
        }]
    );
    // frozen capacity is used for its day, the inventory's otherwise
    let mut frozen_day = one_day(IdleShare::Separate);
    frozen_day
        .capacity_by_day
        .insert(day("2026-11-01"), BTreeMap::from([("h100".to_owned(), 3)]));
    let s = statement(&frozen_day, false);
    assert_eq!(s.fleet.map(|f| f.capacity_cost_cents), Some(72_000));
}

#[test]
fn cost_per_million_tokens_follows_serving_time() {
    let mut input = one_day(IdleShare::Separate);
    // search served two models: llama-8b 1,000,000 prompt + 250,000 generated tokens with
    // 1,000 s of prefill and 3,000 s of decode; embed 4,000,000 prompt tokens, 1,000 s prefill
    input.tokens = vec![
        TokensDay {
            day: day("2026-11-01"),
            namespace: "team-search".into(),
            model: "llama-8b".into(),
            prompt_tokens: 1_000_000,
            generation_tokens: 250_000,
            prefill_us: 1_000_000_000,
            decode_us: 3_000_000_000,
        },
        TokensDay {
            day: day("2026-11-01"),
            namespace: "team-search".into(),
            model: "embed".into(),
            prompt_tokens: 4_000_000,
            generation_tokens: 0,
            prefill_us: 1_000_000_000,
            decode_us: 0,
        },
    ];
    let s = statement(&input, false);
    let line = |model: &str| {
        s.models
            .iter()
            .find(|m| m.model == model)
            .expect(model)
            .clone()
    };
    // search's cost by use $30.00 (3 busy GPU-h at $10), by allocation $120.00; llama-8b served
    // 4,000 of the 5,000 s → 4/5: $24.00 and $96.00; embed 1/5: $6.00 and $24.00
    let llama = line("llama-8b");
    assert_eq!(
        (llama.cost_by_use_cents, llama.cost_by_allocation_cents),
        (2_400, 9_600)
    );
    assert_eq!(
        (llama.share_of_team_ppm, llama.shared_by),
        (800_000, crate::chargeback::SharedBy::ServingTime)
    );
    // llama's input: 1/4 of its time → $6.00 by use over 1,000,000 prompt tokens = 600 cents
    // per million; output: $18.00 over 250,000 tokens = 7,200 cents per million
    assert_eq!(llama.input_cents_per_million_by_use, Some(600));
    assert_eq!(llama.output_cents_per_million_by_use, Some(7_200));
    // by allocation: $24.00 / 1M = 2,400; $72.00 / 0.25M = 28,800
    assert_eq!(llama.input_cents_per_million_by_allocation, Some(2_400));
    assert_eq!(llama.output_cents_per_million_by_allocation, Some(28_800));
    let embed = line("embed");
    assert_eq!(
        (embed.cost_by_use_cents, embed.cost_by_allocation_cents),
        (600, 2_400)
    );
    assert_eq!(embed.share_of_team_ppm, 200_000);
    // $6.00 over 4M prompt tokens = 150 cents per million; no output tokens → none
    assert_eq!(embed.input_cents_per_million_by_use, Some(150));
    assert_eq!(embed.output_cents_per_million_by_use, None);
    // research served nothing: no model lines
    assert!(s.models.iter().all(|m| m.team == "search"));
}

#[test]
fn two_years_of_200000_gpus_at_the_highest_rate_add_up_exactly() {
    // 200,000 GPUs × 731 days × 24 h = 3,508,800,000 GPU-hours (1.26 × 10¹⁹ GPU-µs: past
    // i64); at $100,000 per GPU-hour, 3,508,800,000 × 10,000,000 = 35,088,000,000,000,000
    // cents. One team holds and uses every GPU every day.
    let (from, to) = (day("2025-01-01"), day("2025-01-01").plus(731));
    let gpu_days = 200_000 * 24 * H;
    let input = StatementInput {
        from,
        to,
        idle: IdleShare::Allocation,
        lend_credit_pct: 0,
        teams: teams(),
        capacity: BTreeMap::from([("h100".to_owned(), 200_000)]),
        capacity_by_day: BTreeMap::new(),
        rates: vec![Rate {
            flavor: "h100".into(),
            effective_from: from,
            cents_per_gpu_hour: MAX_CENTS_PER_GPU_HOUR,
        }],
        usage: (0..731)
            .map(|n| UsageDay {
                day: from.plus(n),
                namespace: "team-research".into(),
                flavor: "h100".into(),
                allocated_gpu_us: Some(gpu_days),
                busy_gpu_us: gpu_days,
                observed_gpu_us: gpu_days,
                borrowed_gpu_us: 0,
                lent_gpu_us: 0,
            })
            .collect(),
        tokens: Vec::new(),
    };
    let s = statement(&input, false);
    let fleet = s.fleet.expect("the fleet line");
    assert_eq!(fleet.capacity_gpu_hours.to_string(), "3508800000.000000");
    assert_eq!(fleet.capacity_cost_cents, 35_088_000_000_000_000);
    let research = &s.teams[0];
    assert_eq!(
        research.allocated_gpu_hours.to_string(),
        "3508800000.000000"
    );
    assert_eq!(research.charge_cents, 35_088_000_000_000_000);
    assert_eq!(fleet.platform_cents, 0);
}

/// A statement at the limits the API admits (a million GPUs, two years, the highest rate) over
/// two teams of uneven allocation, with half the fleet's time idle: their idle shares are the
/// pool divided exactly, and the platform line is 0.
#[test]
fn idle_shares_at_the_limits_are_exact_team_by_team() {
    // 1,000,000 GPUs × 24 h × 731 days × 10,000,000 cents = 175,440,000,000,000,000 cents of
    // capacity. Research holds 700,001 GPUs every day, 350,000 of them busy; search 299,999,
    // 29,999 busy. Busy: 379,999 × 175,440,000,000 cents; the idle pool is the other 620,001 ×
    // 175,440,000,000 = 108,772,975,440,000,000 cents, shared by allocation, 700,001 :
    // 299,999 of 1,000,000: research 108,772,975,440 × 700,001 = 76,141,191,580,975,440,
    // search 108,772,975,440 × 299,999 = 32,631,783,859,024,560.
    let (from, to) = (day("2025-01-01"), day("2025-01-01").plus(731));
    let held = |namespace: &str, gpus: i64, busy: i64, n: i32| UsageDay {
        day: from.plus(n),
        namespace: namespace.into(),
        flavor: "h100".into(),
        allocated_gpu_us: Some(gpus * 24 * H),
        busy_gpu_us: busy * 24 * H,
        observed_gpu_us: gpus * 24 * H,
        borrowed_gpu_us: 0,
        lent_gpu_us: 0,
    };
    let input = StatementInput {
        from,
        to,
        idle: IdleShare::Allocation,
        lend_credit_pct: 0,
        teams: teams(),
        capacity: BTreeMap::from([("h100".to_owned(), 1_000_000)]),
        capacity_by_day: BTreeMap::new(),
        rates: vec![Rate {
            flavor: "h100".into(),
            effective_from: from,
            cents_per_gpu_hour: MAX_CENTS_PER_GPU_HOUR,
        }],
        usage: (0..731)
            .flat_map(|n| {
                [
                    held("team-research", 700_001, 350_000, n),
                    held("team-search", 299_999, 29_999, n),
                ]
            })
            .collect(),
        tokens: Vec::new(),
    };
    let s = statement(&input, false);
    let (research, search) = (&s.teams[0], &s.teams[1]);
    assert_eq!(research.idle_share_cents, 76_141_191_580_975_440);
    assert_eq!(search.idle_share_cents, 32_631_783_859_024_560);
    assert_eq!(
        research.charge_cents,
        350_000 * 175_440_000_000 + 76_141_191_580_975_440
    );
    assert_eq!(
        search.charge_cents,
        29_999 * 175_440_000_000 + 32_631_783_859_024_560
    );
    assert_eq!(s.fleet.expect("the fleet line").platform_cents, 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Each team's idle share, by allocation and by use, is the sum over days of the day's pool
    /// × its weight ÷ the day's weights' total, exactly (by arbitrary-precision arithmetic), at
    /// any fleet size, rate and period the API admits.
    #[test]
    fn each_teams_idle_share_is_exact_at_any_size(
        gpus in 1i64..=1_000_000,
        rate in 1i64..=MAX_CENTS_PER_GPU_HOUR,
        days in 1i32..=MAX_DAYS,
        // per team: share of the fleet allocated and busy, in thousandths, and the days held
        held in proptest::collection::vec((0i64..=500, 0i64..=1_000, 1usize..=3), 2),
        by_use in any::<bool>(),
    ) {
        use num_bigint::BigInt;
        let from = day("2024-01-01");
        let namespaces = ["team-research", "team-search"];
        let mut usage = Vec::new();
        for (t, &(allocated, busy, held_days)) in held.iter().enumerate() {
            let allocated_us = gpus * allocated / 1_000 * 24 * H;
            for n in 0..held_days.min(days as usize) {
                usage.push(UsageDay {
                    day: from.plus(n as i32),
                    namespace: namespaces[t].into(),
                    flavor: "h100".into(),
                    allocated_gpu_us: Some(allocated_us),
                    busy_gpu_us: allocated_us / 1_000 * busy,
                    observed_gpu_us: allocated_us,
                    borrowed_gpu_us: 0,
                    lent_gpu_us: 0,
                });
            }
        }
        let input = StatementInput {
            from,
            to: from.plus(days),
            idle: if by_use { IdleShare::Use } else { IdleShare::Allocation },
            lend_credit_pct: 0,
            teams: teams(),
            capacity: BTreeMap::from([("h100".to_owned(), gpus)]),
            capacity_by_day: BTreeMap::new(),
            rates: vec![Rate { flavor: "h100".into(), effective_from: from, cents_per_gpu_hour: rate }],
            usage,
            tokens: Vec::new(),
        };
        let s = statement(&input, false);
        // By hand: value = GPU-µs × cents per GPU-hour. DCGM observed only the allocated GPUs
        // (the rest is unobserved, the platform's), so a day's pool is what its holders held
        // and did not keep busy, shared among that day's holders by their weights.
        let big = |n: i64| BigInt::from(n);
        let on = |d: usize| input.usage.iter().filter(move |u| u.day == from.plus(d as i32));
        let weight = |u: &UsageDay| big(if by_use { u.busy_gpu_us } else { u.allocated_gpu_us.unwrap_or(0) });
        // Half up, as the statement rounds (every figure here is ≥ 0).
        let round = |n: BigInt, d: BigInt| (n * 2 + &d) / (d * 2);
        let mut exact = [big(0), big(0)];
        for d in 0..3 {
            let pool: BigInt = on(d).map(|u| big(u.allocated_gpu_us.unwrap_or(0) - u.busy_gpu_us) * big(rate)).sum();
            let total: BigInt = on(d).map(weight).sum();
            if total == big(0) {
                continue;
            }
            for u in on(d) {
                let t = namespaces.iter().position(|ns| *ns == u.namespace).unwrap_or(0);
                exact[t] += round(&pool * weight(u), total.clone());
            }
        }
        for (t, line) in s.teams.iter().enumerate() {
            let expected = round(exact[t].clone(), big(H));
            prop_assert_eq!(big(line.idle_share_cents), expected, "{}", line.team);
        }
    }
}

#[test]
fn capacity_is_priced_only_for_the_part_of_a_day_that_has_been() {
    // one_day's 2 H100s at $10.00, priced up to noon: 2 × 12 = 24 GPU-hours = $240.00; the
    // teams used 18 + 3 GPU-hours ($210.00), so the idle pool kept apart is $30.00.
    let input = one_day(IdleShare::Separate);
    let mut days = input.days();
    days[0].priced_us = 12 * H;
    let mut ledger = Ledger::new(
        input.from,
        input.to,
        input.idle,
        0,
        input.teams.clone(),
        None,
    );
    ledger.add_day(&days[0]);
    let fleet = ledger.finish().fleet.expect("the fleet line");
    assert_eq!(fleet.capacity_gpu_hours.to_string(), "24.000000");
    assert_eq!(fleet.capacity_cost_cents, 24_000);
    assert_eq!(fleet.platform_cents, 3_000);
}

/// Ten H100s at $1.00 per GPU-hour from 2026-11-28 to 2026-11-30; the history starts on the
/// 30th, when research holds 4 GPUs all day, 2 of them busy, and DCGM sees all ten.
#[test]
fn capacity_nobody_measured_is_the_platforms_not_idle() {
    let (from, to) = (day("2026-11-28"), day("2026-12-01"));
    let mut input = one_day(IdleShare::Allocation);
    (input.from, input.to) = (from, to);
    input.capacity = BTreeMap::from([("h100".to_owned(), 10)]);
    input.rates[0].cents_per_gpu_hour = 100;
    input.tokens.clear();
    input.usage = vec![
        usage("2026-11-30", "team-research", Some(96), 48, 96),
        usage("2026-11-30", "", None, 0, 144),
    ];
    let s = statement(&input, true);
    let fleet = s.fleet.clone().expect("the fleet");
    // capacity 10 × 72 h = 720 GPU-h = $720.00; the 28th and 29th, 480 GPU-h, were never
    // observed: $480.00 on the platform line. The 30th's pool: $240 − $48 of use = $192.00,
    // all research's (the only team allocated): charge $48 + $192 = $240.00.
    assert_eq!(fleet.capacity_cost_cents, 72_000);
    assert_eq!(fleet.unobserved_gpu_hours.to_string(), "480.000000");
    assert_eq!(fleet.unobserved_cost_cents, 48_000);
    assert_eq!(fleet.idle_pool_cents, 19_200);
    assert_eq!(s.teams[0].idle_share_cents, 19_200);
    assert_eq!(s.teams[0].charge_cents, 24_000);
    assert_eq!(fleet.platform_cents, 48_000);
    let unobserved: Vec<String> = s
        .days
        .iter()
        .map(|d| {
            d.fleet
                .as_ref()
                .map(|f| f.unobserved_gpu_hours.to_string())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(unobserved, ["240.000000", "240.000000", "0.000000"]);
    assert!(
        s.notes
            .iter()
            .any(|n| n
                .contains("480.00 GPU-hours of capacity on 2 day(s) (2026-11-28 … 2026-11-29)")),
        "{:?}",
        s.notes
    );
}

/// One H100 at $10.00 per GPU-hour, observed both days, idle shared by allocation. On the 1st
/// research holds it all day (busy 12 h); on the 2nd search holds it for 12 h (busy 6 h) and it
/// stands idle with no pod for the rest.
#[test]
fn idle_is_shared_among_each_days_teams() {
    let mut input = one_day(IdleShare::Allocation);
    input.to = day("2026-11-03");
    input.capacity = BTreeMap::from([("h100".to_owned(), 1)]);
    input.tokens.clear();
    input.usage = vec![
        usage("2026-11-01", "team-research", Some(24), 12, 24),
        usage("2026-11-02", "team-search", Some(12), 6, 12),
        usage("2026-11-02", "", None, 0, 12),
    ];
    let s = statement(&input, false);
    // the 1st's pool: $240 − $120 = $120.00, research's; the 2nd's: $240 − $60 = $180.00,
    // search's (the only team allocated that day). Shared over the period instead, 24 : 12,
    // research would have paid $200.00 of the $300.00.
    let (research, search) = (&s.teams[0], &s.teams[1]);
    assert_eq!(
        (research.idle_share_cents, search.idle_share_cents),
        (12_000, 18_000)
    );
    assert_eq!(
        (research.charge_cents, search.charge_cents),
        (24_000, 24_000)
    );
    assert_eq!(s.fleet.expect("the fleet").platform_cents, 0);
}

/// A rate typed ten times too high (the issue's $86.00 for $8.60) or a tenth of it asks for a
/// confirmation naming each comparison; 3× either way does not.
#[test]
fn a_rate_far_from_the_one_before_or_the_catalogue_asks_first() {
    let rate = |from: &str, cents| Rate {
        flavor: "h100".into(),
        effective_from: day(from),
        cents_per_gpu_hour: cents,
    };
    let rates = [rate("1970-01-01", 860), rate("2026-11-01", 900)];
    let new = |from: &str, cents| NewRate {
        effective_from: day(from),
        cents_per_gpu_hour: cents,
        confirm: false,
    };
    // 8,600 ÷ 900 = 9.55… → 9.6×; 8,600 ÷ 860 = 10.0×
    assert_eq!(
        new("2026-12-01", 8_600).far_from(&rates, "h100").as_deref(),
        Some(
            "$86.00 per GPU-hour for h100 from 2026-12-01 is 9.6× the rate it follows ($9.00) and 10.0× the catalogue's price of its model ($8.60): a slipped decimal point? Send it again confirmed if it is meant."
        )
    );
    // before the first rate set, the catalogue's price is the rate it follows: said once
    assert_eq!(
        new("2026-10-01", 86).far_from(&rates, "h100").as_deref(),
        Some(
            "$0.86 per GPU-hour for h100 from 2026-10-01 is 1/10 of the catalogue's price of its model ($8.60): a slipped decimal point? Send it again confirmed if it is meant."
        )
    );
    // 3× and a third are close enough: 2,580 = 3 × 860 (and under 3 × 900); 300 × 3 = 900;
    // 299 × 3 = 897 is under the $9.00 it follows (though not under a third of $8.60)
    assert_eq!(new("2026-12-01", 2_580).far_from(&rates, "h100"), None);
    assert_eq!(new("2026-12-01", 300).far_from(&rates, "h100"), None);
    assert_eq!(
        new("2026-12-01", 299).far_from(&rates, "h100").as_deref(),
        Some(
            "$2.99 per GPU-hour for h100 from 2026-12-01 is 1/3 of the rate it follows ($9.00): a slipped decimal point? Send it again confirmed if it is meant."
        )
    );
    // a flavor no rate names has nothing to compare with
    assert_eq!(new("2026-12-01", 1).far_from(&rates, "a100"), None);
}

/// A serving fleet whose pods neither Kueue nor kube-state-metrics report, only dcgm-exporter
/// (the 143 pods in one day, in small): search's pods hold two H100s for 12 h (24
/// GPU-h observed), busy 9; a sandbox's pod holds one for 6 h, busy 6; DCGM sees the rest of the
/// four idle with no pod (96 − 30 = 66 GPU-h). Allocation is what the pod mapping names: search
/// 24 GPU-h ($240.00), idle 15, never negative; the sandbox's 6 unattributed; 66 unallocated.
#[test]
fn where_only_dcgm_reports_the_pod_mapping_is_the_allocation() {
    let mut input = one_day(IdleShare::Allocation);
    input.capacity = BTreeMap::from([("h100".to_owned(), 4)]);
    input.tokens.clear();
    input.usage = vec![
        usage("2026-11-01", "team-search", None, 9, 24),
        usage("2026-11-01", "ml-sandbox", None, 6, 6),
        usage("2026-11-01", "", None, 0, 66),
    ];
    let s = statement(&input, false);
    let search = &s.teams[1];
    assert_eq!(search.allocated_gpu_hours.to_string(), "24.000000");
    assert_eq!(search.idle_gpu_hours.to_string(), "15.000000");
    assert_eq!(search.cost_by_allocation_cents, 24_000);
    let fleet = s.fleet.expect("the fleet");
    assert_eq!(
        fleet.unattributed_allocated_gpu_hours.to_string(),
        "6.000000"
    );
    assert_eq!(fleet.unallocated_gpu_hours.to_string(), "66.000000");
    assert_eq!(fleet.unobserved_gpu_hours.to_string(), "0.000000");
}
