//! Statements as FinOps FOCUS 1.2 CSV (the FinOps Foundation's open billing format, column
//! facts in `shared/data/focus_1_2_columns.csv` with their source), so FinOps tools take them.
//!
//! Rows, per day of the period (the charge period is the day, the billing period the
//! statement's):
//! - `Usage`: one per team and flavor, its GPU-hours at the flavor's rate that day. Basis
//!   `allocation`: the GPU-hours Kueue allocated it (the team's rows add up to its cost by
//!   allocation); basis `use`: the GPU-hours DCGM saw its devices busy (its cost by use).
//!   `ConsumedQuantity` is the busy GPU-hours either way.
//! - basis `use` only, one per team where not zero: its share of the idle pool
//!   (`Adjustment`), its lending fee (`Adjustment`) and its lending credit (`Credit`,
//!   negative), so a team's rows add up to its charge (use + idle share + fee − credit).
//!
//! Choices the spec leaves to the provider: gpufleet is provider, publisher and invoice issuer
//! (`gpufleet`), the fleet is the billing account, a team the sub account (its namespace the
//! id), a team's quota of a flavor the resource (`<namespace>/<flavor>`); the currency is USD
//! (rates are entered in US cents); GPU time is `Compute` / `Containers`, priced in
//! `GPU-Hours` (the spec's unit format). Costs are whole cents: a team's rows carry its running
//! total, each row the total rounded half up less what its rows before carried, so a team's
//! rows of a period add up to its statement figure to the cent (its charge, or its cost by
//! allocation) and each row is within a cent of its own exact figure; quantities have six
//! decimals, so `PricingQuantity × ListUnitPrice` is the cost to within about a cent. The
//! idle pool's part no team is charged (the `(platform)` line) is not a FOCUS row.

use std::collections::BTreeMap;

use super::{DayFacts, DayStatement, ExactShares, Hours, IdleShare, Team, cents, field};
use crate::common::day::Day;
use std::collections::BTreeSet;

#[cfg(test)]
mod tests;

/// The FOCUS version the export follows.
pub const VERSION: &str = "1.2";

/// The columns written, FOCUS's in the spec's (alphabetical) order: its Mandatory columns and
/// the Conditional and Recommended ones that apply to a GPU fleet.
pub const HEADER: [&str; 33] = [
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SubAccountId",
    "SubAccountName",
    "Tags",
];

/// What a team's FOCUS rows add up to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Basis {
    /// The GPU-hours allocated at the rate: the statement's cost by allocation.
    Allocation,
    /// The busy GPU-hours at the rate, the idle share and the lending fee and credit: the
    /// statement's charge.
    #[default]
    Use,
}

impl Basis {
    pub fn parse(text: &str) -> Option<Basis> {
        match text {
            "allocation" => Some(Basis::Allocation),
            "use" => Some(Basis::Use),
            _ => None,
        }
    }
}

/// The header line, CRLF-terminated.
pub fn header() -> String {
    format!("{}\r\n", HEADER.join(","))
}

/// What every row of one export repeats, and each team's running total so far.
#[derive(Debug, Clone)]
pub struct FocusHead {
    /// The statement's first day and the day after its last.
    from: Day,
    to: Day,
    basis: Basis,
    idle: IdleShare,
    /// Per team: its rows' exact total so far, and the cents they carried.
    carried: BTreeMap<String, (i128, i64)>,
}

/// One row's own fields (the rest come from the head).
struct Row<'a> {
    /// Exact: GPU-µs × cents per GPU-hour.
    value: i128,
    category: &'a str,
    description: String,
    quantity: Option<(Hours, i64)>,
    consumed: Option<Hours>,
    resource: Option<(String, String)>,
    team: &'a Team,
    flavor: Option<&'a str>,
}

impl FocusHead {
    /// The head of an export of `[from, to)`.
    pub fn new(from: Day, to: Day, basis: Basis, idle: IdleShare) -> FocusHead {
        FocusHead {
            from,
            to,
            basis,
            idle,
            carried: BTreeMap::new(),
        }
    }

    /// Appends the rows of one day (days in order): `facts` priced and `day` shared its idle
    /// pool, exactly as `exact` says ([`super::Ledger::day_exact`]); rows only for the teams
    /// `day` shows.
    pub fn day_rows(
        &mut self,
        out: &mut String,
        facts: &DayFacts,
        day: &DayStatement,
        exact: &BTreeMap<String, ExactShares>,
        teams: &[Team],
    ) {
        let shown: BTreeMap<&str, &Team> = teams
            .iter()
            .filter(|t| day.teams.iter().any(|line| line.team == t.name))
            .map(|t| (t.namespace.as_str(), t))
            .collect();
        // (team, flavor) → (allocated, busy) GPU-µs
        let mut used: BTreeMap<(&str, &str), (i128, i128)> = BTreeMap::new();
        for (u, allocated) in facts.allocations() {
            if let Some(team) = shown.get(u.namespace.as_str()) {
                let sums = used.entry((&team.name, &u.flavor)).or_default();
                sums.0 += i128::from(allocated.gpu_us());
                sums.1 += i128::from(u.busy_gpu_us);
            }
        }
        let by_name: BTreeMap<&str, &Team> = teams.iter().map(|t| (t.name.as_str(), t)).collect();
        let team = |name: &str| by_name.get(name).copied();
        for ((name, flavor), (allocated, busy)) in used {
            let Some(team) = team(name) else { continue };
            let rate = facts.rates.get(flavor).copied().unwrap_or(0);
            let (priced, what) = match self.basis {
                Basis::Allocation => (allocated, "allocated"),
                Basis::Use => (busy, "busy (DCGM)"),
            };
            if priced == 0 && busy == 0 {
                continue;
            }
            self.row(
                out,
                facts.day,
                Row {
                    value: priced * i128::from(rate),
                    category: "Usage",
                    description: format!("GPU-hours {what} on {flavor}"),
                    quantity: Some((Hours(priced), rate)),
                    consumed: Some(Hours(busy)),
                    resource: Some((
                        format!("{}/{flavor}", team.namespace),
                        format!("{} on {flavor}", team.name),
                    )),
                    team,
                    flavor: Some(flavor),
                },
            );
        }
        if self.basis == Basis::Use {
            let shown: BTreeSet<&str> = day.teams.iter().map(|l| l.team.as_str()).collect();
            for (name, exact) in exact {
                let Some(team) = team(name).filter(|t| shown.contains(t.name.as_str())) else {
                    continue;
                };
                let idle = format!(
                    "{}'s share of the idle pool (idle shared by {})",
                    team.name,
                    self.idle.name()
                );
                for (value, category, description) in [
                    (exact.idle_share, "Adjustment", idle),
                    (
                        exact.lending_fee,
                        "Adjustment",
                        format!(
                            "{}'s lending fee for GPU-hours borrowed above its quota",
                            team.name
                        ),
                    ),
                    (
                        -exact.lending_credit,
                        "Credit",
                        format!(
                            "{}'s lending credit for its quota others borrowed",
                            team.name
                        ),
                    ),
                ] {
                    if value != 0 {
                        self.row(
                            out,
                            facts.day,
                            Row {
                                value,
                                category,
                                description,
                                quantity: None,
                                consumed: None,
                                resource: None,
                                team,
                                flavor: None,
                            },
                        );
                    }
                }
            }
        }
    }

    fn row(&mut self, out: &mut String, day: Day, row: Row) {
        let (exact, carried) = self.carried.entry(row.team.name.clone()).or_default();
        *exact += row.value;
        let cost_cents = cents(*exact) - *carried;
        *carried += cost_cents;
        let cost = amount(cost_cents);
        let (quantity, unit, price) = match row.quantity {
            Some((hours, rate)) => (hours.to_string(), "GPU-Hours", amount(rate)),
            None => (String::new(), "", String::new()),
        };
        let (consumed, consumed_unit) = match row.consumed {
            Some(hours) => (hours.to_string(), "GPU-Hours"),
            None => (String::new(), ""),
        };
        let (resource_id, resource_name, resource_type) = match row.resource {
            Some((id, name)) => (field(&id), field(&name), "GPU quota"),
            None => (String::new(), String::new(), ""),
        };
        let mut tags = serde_json::Map::new();
        tags.insert("team".into(), row.team.name.clone().into());
        tags.insert("cost_centre".into(), row.team.cost_centre.clone().into());
        if let Some(flavor) = row.flavor {
            tags.insert("flavor".into(), flavor.into());
        }
        let fields = [
            cost.clone(),
            "gpufleet".into(),
            "GPU fleet".into(),
            "USD".into(),
            instant(self.to),
            instant(self.from),
            row.category.into(),
            String::new(),
            field(&row.description),
            "Usage-Based".into(),
            instant(day.plus(1)),
            instant(day),
            consumed,
            consumed_unit.into(),
            cost.clone(),
            price.clone(),
            cost.clone(),
            "gpufleet".into(),
            cost.clone(),
            price,
            quantity,
            unit.into(),
            "gpufleet".into(),
            "gpufleet".into(),
            resource_id,
            resource_name,
            resource_type.into(),
            "Compute".into(),
            "GPU time".into(),
            "Containers".into(),
            field(&row.team.namespace),
            field(&row.team.name),
            field(&serde_json::Value::Object(tags).to_string()),
        ];
        out.push_str(&fields.join(","));
        out.push_str("\r\n");
    }
}

/// Whole cents as FOCUS's decimal amount (no currency sign, no grouping): `1234` → `12.34`, `-5` → `-0.05`.
fn amount(cents: i64) -> String {
    crate::common::money::hundredths(cents.into())
}

/// A day's start as FOCUS writes a moment: `YYYY-MM-DDTHH:mm:ssZ`.
fn instant(day: Day) -> String {
    format!("{day}T00:00:00Z")
}
