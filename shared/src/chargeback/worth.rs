//! What an approver weighs beside the quota rules (issue 33): what the quota a team asks for is
//! worth at its flavors' rates over its window, against the quota in force it would replace,
//! and what the team uses of its quota today: the review of a request (`GET
//! /api/quota/teams/{team}/requests/{id}`).

use serde::{Deserialize, Serialize};

use crate::{
    common::day::Day,
    quota::{Flavor, QuotaSpec, QuotaWorld, RequestView},
    usage::{FlavorFacts, resource_share},
};

use super::{Rate, rate_on};

/// A request's review: the quota rules' view, what it is worth and what the team uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Review {
    #[serde(flatten)]
    pub view: RequestView,
    pub worth: Worth,
    /// Per flavor, the team's use over the last day (the server reads it from the usage rows).
    pub in_use: Vec<InUse>,
}

/// The longest stretch priced: a request without an end, or one that runs longer, is priced
/// over its first year.
pub const PRICED_DAYS_AT_MOST: i32 = 365;

/// A quota's worth over the days priced: each GPU it holds (a MIG instance at its compute
/// share of a GPU, as usage counts it) for every hour of every day, at the flavor's rate of
/// that day. What the team would be charged if it used all of it, all the time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worth {
    /// The first day priced: the first day the request would count (its start, or today).
    pub from: Day,
    /// The last day priced, included.
    pub to: Day,
    /// `true` when the request runs past `to` (it has no end, or ends after a year).
    pub runs_on: bool,
    pub flavors: Vec<FlavorWorth>,
    pub asked_cents: i64,
    /// The quota asked for in a month of 30 days, on average over the days priced: what a team
    /// budgets by the month.
    pub asked_per_month_cents: i64,
    /// The same days under the team's quota in force without the request.
    pub in_force_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlavorWorth {
    pub flavor: String,
    /// The flavor's rate on the first day priced; `None` when it has none.
    pub cents_per_gpu_hour: Option<i64>,
    pub asked_cents: i64,
    pub in_force_cents: i64,
}

/// What a team used of one flavor over the last whole hours, from the usage hour rollups:
/// Kueue's nominal quota and allocation, and DCGM's busy time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InUse {
    pub flavor: String,
    pub hours: i64,
    /// `None` when Kueue did not report it in every hour (not known, which is not idle).
    pub nominal_gpu_microseconds: Option<i64>,
    pub allocated_gpu_microseconds: Option<i64>,
    pub busy_gpu_microseconds: i64,
}

/// `spec`, asked for by `team`, priced from the first day it counts (`today` at the
/// earliest) against the team's quota in force on the same days.
pub fn worth(
    world: &QuotaWorld,
    team: &str,
    spec: &QuotaSpec,
    today: Day,
    rates: &[Rate],
) -> Worth {
    let from = spec.starts_on.max(today);
    let last = from.plus(PRICED_DAYS_AT_MOST - 1);
    let to = spec.ends_on.map_or(last, |end| end.min(last)).max(from);
    // The days from which a rate or the quota in force can change: each stretch between
    // two is priced at one rate with one quota.
    let mut starts: Vec<Day> = world.change_days(from, Some(to));
    starts.extend(rates.iter().map(|r| r.effective_from));
    starts.retain(|d| (from..=to).contains(d));
    starts.push(from);
    starts.sort_unstable();
    starts.dedup();
    // Per flavor: the GPUs asked for (the same on every day), and the exact cents (fractions)
    // asked and in force.
    let mut exact: Vec<(&Flavor, Fraction, Fraction, Fraction)> = world
        .flavors
        .iter()
        .map(|f| (f, gpus_held(f, spec), Fraction::ZERO, Fraction::ZERO))
        .collect();
    for (i, start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(to.plus(1));
        let hours = i128::from(start.days_until(end)) * 24;
        let in_force = world.effective_on(*start).get(team).map(|a| &a.spec);
        for (flavor, gpus_asked, asked, held) in &mut exact {
            let cents_per_gpu =
                hours * i128::from(rate_on(rates, &flavor.name, *start).unwrap_or(0));
            *asked = asked.plus(gpus_asked.times(cents_per_gpu));
            if let Some(in_force) = in_force {
                *held = held.plus(gpus_held(flavor, in_force).times(cents_per_gpu));
            }
        }
    }
    let mut flavors: Vec<FlavorWorth> = exact
        .into_iter()
        .map(|(f, _, asked, held)| FlavorWorth {
            flavor: f.name.clone(),
            cents_per_gpu_hour: rate_on(rates, &f.name, from),
            asked_cents: asked.rounded(),
            in_force_cents: held.rounded(),
        })
        .collect();
    flavors.retain(|f| f.asked_cents != 0 || f.in_force_cents != 0);
    let asked_cents: i64 = flavors.iter().map(|f| f.asked_cents).sum();
    let days = i64::from(to.days_since_epoch() - from.days_since_epoch()) + 1;
    Worth {
        from,
        to,
        runs_on: spec.ends_on.is_none_or(|end| end > to),
        asked_cents,
        asked_per_month_cents: Fraction::new(i128::from(asked_cents) * 30, i128::from(days))
            .rounded(),
        in_force_cents: flavors.iter().map(|f| f.in_force_cents).sum(),
        flavors,
    }
}

/// The GPUs `spec` holds of `flavor`, exactly: a MIG instance at its compute share of a GPU
/// (1/7 for a `1g` profile on a 7-slice GPU), as usage counts it.
fn gpus_held(flavor: &Flavor, spec: &QuotaSpec) -> Fraction {
    let facts = FlavorFacts {
        name: flavor.name.clone(),
        gpu_model: flavor.gpu_model.clone(),
        mig: !flavor.settings.mig_layout.is_empty(),
        sharing: flavor.settings.sharing,
    };
    spec.lines
        .iter()
        .filter(|l| l.flavor == flavor.name)
        .filter_map(|l| {
            let (num, den) = resource_share(&l.resource, Some(&facts))?;
            Some(Fraction::new(
                i128::from(l.nominal) * i128::from(num),
                i128::from(den),
            ))
        })
        .fold(Fraction::ZERO, Fraction::plus)
}

/// An exact non-negative quantity `n / d` (`d` > 0), kept in lowest terms: its denominators
/// are the GPUs' compute slices, so the cents are rounded once, at the end.
#[derive(Debug, Clone, Copy)]
struct Fraction {
    n: i128,
    d: i128,
}

impl Fraction {
    const ZERO: Fraction = Fraction { n: 0, d: 1 };

    fn new(n: i128, d: i128) -> Fraction {
        let g = gcd(n, d).max(1);
        Fraction { n: n / g, d: d / g }
    }

    fn plus(self, other: Fraction) -> Fraction {
        Fraction::new(self.n * other.d + other.n * self.d, self.d * other.d)
    }

    fn times(self, k: i128) -> Fraction {
        Fraction::new(self.n * k, self.d)
    }

    /// To the nearest whole, half up.
    fn rounded(self) -> i64 {
        i64::try_from((2 * self.n + self.d) / (2 * self.d)).unwrap_or(i64::MAX)
    }
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 { a.abs() } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::quota::{
        QuotaLine,
        tests::{TODAY, day, flavor, spec, world},
    };

    fn rate(flavor: &str, from: &str, cents: i64) -> Rate {
        Rate {
            flavor: flavor.into(),
            effective_from: day(from),
            cents_per_gpu_hour: cents,
        }
    }

    /// Hand arithmetic: research asks 16 H100s from 2026-12-10 to 2026-12-19 (10 days, 240 h); the
    /// rate is $8.60 until the 15th, $9.00 from it: 16 × 120 h × 860 + 16 × 120 h × 900 =
    /// 1,651,200 + 1,728,000 = 3,379,200 cents. search's quota in force (24 GPUs) over the same
    /// days: 24 × (120 × 860 + 120 × 900) = 5,068,800 cents.
    #[test]
    fn a_request_is_worth_its_gpus_every_hour_at_each_days_rate() {
        let w = world();
        let rates = [
            rate("h100", "1970-01-01", 860),
            rate("h100", "2026-12-15", 900),
        ];
        let mut asked = spec(&[("h100", 16, None, None)], "2026-12-10");
        asked.ends_on = Some(day("2026-12-19"));
        let priced = worth(&w, "research", &asked, day(TODAY), &rates);
        assert_eq!(
            (priced.from, priced.to, priced.runs_on),
            (day("2026-12-10"), day("2026-12-19"), false)
        );
        assert_eq!(priced.asked_cents, 3_379_200);
        assert_eq!(priced.in_force_cents, 0, "research holds nothing today");
        assert_eq!(priced.flavors[0].cents_per_gpu_hour, Some(860));
        let search = worth(&w, "search", &asked, day(TODAY), &rates);
        assert_eq!(search.in_force_cents, 5_068_800);
    }

    /// Open-ended, started in the past: priced from today over a year (365 × 24 = 8,760 h);
    /// search's 24-GPU quota ends after 100 days of it when it has an end.
    #[test]
    fn an_open_ended_request_is_priced_over_its_first_year_from_today() {
        let mut w = world();
        w.approved[0].spec.ends_on = Some(day(TODAY).plus(99));
        let rates = [rate("h100", "1970-01-01", 100)];
        let asked = spec(&[("h100", 2, None, None)], "2026-01-01");
        let priced = worth(&w, "search", &asked, day(TODAY), &rates);
        assert_eq!((priced.from, priced.to), (day(TODAY), day(TODAY).plus(364)));
        assert!(priced.runs_on);
        assert_eq!(priced.asked_cents, 2 * 8_760 * 100);
        // a month of it: 2 GPUs × 24 h × 30 days × $1.00 = $1,440.00
        assert_eq!(priced.asked_per_month_cents, 2 * 24 * 30 * 100);
        assert_eq!(priced.in_force_cents, 24 * 100 * 24 * 100);
    }

    /// A MIG instance counts at its compute share of the GPU, as usage does: 3 × `3g.71gb` on a
    /// 7-slice H200 are 9/7 GPU; 9/7 × 24 h × 1,000 cents = 30,857.14… → 30,857 cents (one day).
    #[test]
    fn mig_instances_are_priced_at_their_share_of_a_gpu_exactly() {
        let mut w = world();
        let mut mig = flavor("h200-mig", 8);
        mig.gpu_model = "H200-SXM-141GB".into();
        mig.settings.mig_layout = BTreeMap::from([("3g.71gb".to_owned(), 2)]);
        w.flavors.push(mig);
        let mut asked = spec(&[], "2026-12-05");
        asked.ends_on = Some(day("2026-12-05"));
        asked.lines.push(QuotaLine {
            flavor: "h200-mig".into(),
            resource: "nvidia.com/mig-3g.71gb".into(),
            nominal: 3,
            borrowing_limit: None,
            lending_limit: None,
        });
        let priced = worth(
            &w,
            "research",
            &asked,
            day(TODAY),
            &[rate("h200-mig", "2026-01-01", 1000)],
        );
        assert_eq!(priced.asked_cents, 30_857);
        assert_eq!(
            priced.flavors.len(),
            1,
            "flavors worth nothing either way are left out"
        );
    }
}
