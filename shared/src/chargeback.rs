//! Chargeback: what each team owes for a period of whole UTC days, from the measured usage
//! (`usage` day rollups) and the flavors' rates. Pure.
//!
//! Definitions (per team, summed over the period's days and the team's flavors):
//! - cost by allocation = allocated GPU-hours × the rate in force that day. Allocation is
//!   Kueue's (else kube-state-metrics' requests of running pods, as the ingest reads them); a
//!   namespace with neither on a day is counted as allocated the device time dcgm-exporter's
//!   pod mapping names it for (its observed GPU-hours), so its idle is never negative;
//! - cost by use = busy GPU-hours × rate;
//! - idle = allocated − busy (unobserved allocation, which had no DCGM sample, is part of it and
//!   shown on its own too);
//! - the fleet's unallocated = capacity − allocated, a platform cost;
//! - unobserved capacity = per flavor and day, capacity − the device time DCGM had a sample of
//!   (hours before a source's first sample or after its last, windows the ingest never covered,
//!   GPUs whose exporter never reported): nobody can say whether it was used, so it is priced
//!   on the platform line and never shared as idle;
//! - the idle pool = observed capacity cost − the teams' cost by use: everything the fleet cost
//!   while DCGM watched that no team used (teams' idle, unallocated capacity, namespaces no team
//!   owns). Each day's pool is shared among that day's teams, in proportion to allocation, to
//!   use, evenly among teams with an allocation, or kept separate as a platform line (OpenCost's
//!   choices); a period's share is the sum of its days' (so a statement is the sum of its days,
//!   and a month of its parts), and teams' cost by use + their idle shares + the platform line
//!   = the capacity cost;
//! - lending credits (a statement's `lend_credit` percentage, 0 by default): per flavor and
//!   day, the teams' borrowing that ran on other teams' lent quota, min(Σ borrowed, Σ lent)
//!   GPU-hours, is priced at that percentage of the rate; the lending teams are credited it in
//!   proportion to the GPU-hours they lent, the borrowing teams pay it in proportion to the
//!   GPU-hours they borrowed. It moves money between teams and never changes a total.
//!
//! Invariants: GPU time is integer GPU-microseconds and money integer cents; every cent figure
//! is rounded half up once from its own exact value (GPU-µs × cents per GPU-hour, kept exact),
//! so parts may differ from a total by a cent. Rates change only at the start of a UTC day, so
//! a day is priced at one rate and a period spanning a change is priced day by day at the rate
//! in force.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{
    FieldError,
    common::{
        day::Day,
        exact::mul_div_round,
        validate::{day_window, required_day},
    },
};

/// GPU-microseconds in one GPU-hour.
pub const GPU_US_PER_GPU_HOUR: i64 = 3_600_000_000;

/// The highest rate or model price anyone may enter, in cents per GPU-hour ($100,000).
pub const MAX_CENTS_PER_GPU_HOUR: i64 = 10_000_000;
/// GPU-microseconds in one GPU-day.
pub const GPU_US_PER_GPU_DAY: i64 = 24 * GPU_US_PER_GPU_HOUR;

/// How the idle pool is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleShare {
    /// In proportion to each team's allocated GPU-hours.
    #[default]
    Allocation,
    /// In proportion to each team's busy GPU-hours.
    Use,
    /// Equally among the teams that had an allocation.
    Even,
    /// Not shared: one platform line.
    Separate,
}

impl IdleShare {
    pub const ALL: [IdleShare; 4] = [
        IdleShare::Allocation,
        IdleShare::Use,
        IdleShare::Even,
        IdleShare::Separate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            IdleShare::Allocation => "allocation",
            IdleShare::Use => "use",
            IdleShare::Even => "even",
            IdleShare::Separate => "separate",
        }
    }

    pub fn parse(text: &str) -> Option<IdleShare> {
        IdleShare::ALL.into_iter().find(|s| s.name() == text)
    }
}

/// A flavor's rate from a day on (until the next one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    pub flavor: String,
    pub effective_from: Day,
    pub cents_per_gpu_hour: i64,
}

/// `PUT /api/chargeback/rates/{flavor}`: a rate from a day on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewRate {
    pub effective_from: Day,
    pub cents_per_gpu_hour: i64,
    /// Set it although it is far from the rate before it or the catalogue's price
    /// ([`NewRate::far_from`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirm: bool,
}

/// How far from a reference a rate may be without a confirmation: within 3× either way (a
/// slipped decimal point is 10×).
pub const FAR_RATE_FACTOR: i64 = 3;

impl NewRate {
    /// Says how far the rate is from `flavor`'s rate in force the day before it and from the
    /// catalogue's price of its model (the rates' entry from 1970-01-01) where it is more than
    /// [`FAR_RATE_FACTOR`] times either or less than its fraction; `None` when it is close to
    /// both.
    pub fn far_from(&self, rates: &[Rate], flavor: &str) -> Option<String> {
        let new = self.cents_per_gpu_hour;
        let start = Day::of_unix_seconds(0);
        // the catalogue's price is the rate before the first one set: said once
        let previous = rates
            .iter()
            .filter(|r| r.flavor == flavor && r.effective_from < self.effective_from)
            .max_by_key(|r| r.effective_from)
            .filter(|r| r.effective_from != start);
        let catalogue = rates
            .iter()
            .find(|r| r.flavor == flavor && r.effective_from == start);
        let mut far = Vec::new();
        for (what, reference) in [
            ("the rate it follows", previous),
            ("the catalogue's price of its model", catalogue),
        ] {
            let Some(r) = reference else { continue };
            let old = r.cents_per_gpu_hour;
            let beyond = new > old.saturating_mul(FAR_RATE_FACTOR)
                || new.saturating_mul(FAR_RATE_FACTOR) < old;
            if old > 0 && beyond {
                far.push(format!(
                    "{} {what} ({})",
                    times(new, old),
                    crate::common::money::dollars(old)
                ));
            }
        }
        (!far.is_empty()).then(|| {
            format!(
                "{} per GPU-hour for {flavor} from {} is {}: a slipped decimal point? Send it again confirmed if it is meant.",
                crate::common::money::dollars(new),
                self.effective_from,
                far.join(" and ")
            )
        })
    }
}

/// `new` against `old` (`old > 0`): `10.0×` above it (one decimal, half up), `1/10 of` below
/// it (the nearest whole fraction), `0×` for nothing.
fn times(new: i64, old: i64) -> String {
    let (new, old) = (i128::from(new), i128::from(old));
    if new >= old {
        let tenths = (new * 20 + old) / (old * 2);
        format!("{}.{}×", tenths / 10, tenths % 10)
    } else if new == 0 {
        "0×".to_owned()
    } else {
        format!("1/{} of", (old * 2 + new) / (new * 2))
    }
}

/// The rate of `flavor` on `day`: the latest that took effect on or before it.
pub fn rate_on(rates: &[Rate], flavor: &str, day: Day) -> Option<i64> {
    rates
        .iter()
        .filter(|r| r.flavor == flavor && r.effective_from <= day)
        .max_by_key(|r| r.effective_from)
        .map(|r| r.cents_per_gpu_hour)
}

/// One namespace's usage of one flavor on one day (a day rollup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDay {
    pub day: Day,
    pub namespace: String,
    pub flavor: String,
    /// `None` when no source (Kueue, kube-state-metrics) reported it that day; a statement
    /// then counts it from DCGM ([`DayFacts::allocations`]).
    pub allocated_gpu_us: Option<i64>,
    pub busy_gpu_us: i64,
    pub observed_gpu_us: i64,
    /// Used above the queue's nominal quota, and of its unused quota what others' borrowing is
    /// attributed to (`shared::usage::lending_minutes`); 0 where Kueue reported no quota.
    pub borrowed_gpu_us: i64,
    pub lent_gpu_us: i64,
}

/// Tokens one namespace's model generated in one hour (vLLM's `generation_tokens` counter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokensHour {
    /// The hour's first instant, in Unix milliseconds.
    pub hour_ms: i64,
    pub namespace: String,
    pub model: String,
    pub generation_tokens: i64,
}

/// Tokens one namespace's model served on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokensDay {
    pub day: Day,
    pub namespace: String,
    pub model: String,
    pub prompt_tokens: i64,
    pub generation_tokens: i64,
    /// Time its requests spent in prefill and in decode, in microseconds.
    pub prefill_us: i64,
    pub decode_us: i64,
}

/// What a team's served model cost, and its cost per million tokens.
///
/// The team's cost (each basis) is attributed to its models in proportion to their serving
/// time (prefill + decode, from vLLM's histograms; in proportion to tokens where no time was
/// reported), and a model's cost to input and output in proportion to its prefill and decode
/// time. A team that also trains or fine-tunes carries that cost here too: read these figures
/// for teams that serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelLine {
    pub team: String,
    pub model: String,
    pub prompt_tokens: i64,
    pub generation_tokens: i64,
    /// The part of the team's cost the model carries, in parts per million (rounded), and
    /// what decided it: the team's models' serving time, or their tokens where none reported
    /// time.
    pub share_of_team_ppm: i64,
    pub shared_by: SharedBy,
    pub cost_by_allocation_cents: i64,
    pub cost_by_use_cents: i64,
    /// Cents per million prompt (input) tokens; `None` without any.
    pub input_cents_per_million_by_allocation: Option<i64>,
    pub input_cents_per_million_by_use: Option<i64>,
    /// Cents per million generated (output) tokens; `None` without any.
    pub output_cents_per_million_by_allocation: Option<i64>,
    pub output_cents_per_million_by_use: Option<i64>,
}

/// What divides a team's cost between the models it served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SharedBy {
    /// Prefill + decode seconds, from vLLM's histograms.
    ServingTime,
    /// Prompt + generated tokens.
    Tokens,
}

impl SharedBy {
    pub fn words(self) -> &'static str {
        match self {
            SharedBy::ServingTime => "its share of the team's serving time (prefill + decode)",
            SharedBy::Tokens => "its share of the team's tokens (no serving time reported)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    pub name: String,
    pub namespace: String,
    pub cost_centre: String,
}

/// What a statement is made from.
#[derive(Debug, Clone)]
pub struct StatementInput {
    /// The first day and the day after the last (`[from, to)`).
    pub from: Day,
    pub to: Day,
    pub idle: IdleShare,
    /// Percentage of the rate the borrowing teams pay the lending teams per GPU-hour lent.
    pub lend_credit_pct: u8,
    pub teams: Vec<Team>,
    /// GPUs per flavor (the inventory's capacity).
    pub capacity: BTreeMap<String, i64>,
    /// GPUs per flavor on days whose capacity was frozen when their month was closed.
    pub capacity_by_day: BTreeMap<Day, BTreeMap<String, i64>>,
    pub rates: Vec<Rate>,
    pub usage: Vec<UsageDay>,
    pub tokens: Vec<TokensDay>,
}

/// One team's figures for the period (or one day of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamLine {
    pub team: String,
    pub cost_centre: String,
    pub allocated_gpu_hours: Hours,
    pub busy_gpu_hours: Hours,
    pub idle_gpu_hours: Hours,
    pub unobserved_allocated_gpu_hours: Hours,
    /// busy ÷ allocated, in percent with two decimals; `None` without allocation.
    pub utilisation_pct: Option<String>,
    pub prompt_tokens: i64,
    pub generation_tokens: i64,
    pub cost_by_allocation_cents: i64,
    pub cost_by_use_cents: i64,
    /// The team's own idle: what it was allocated and did not keep busy, at the rate (cost by
    /// allocation − cost by use, as printed: within a cent of the exact figure).
    pub idle_cost_cents: i64,
    /// Its share of the idle pool, which holds every team's own idle, the capacity no one was
    /// allocated and the use of namespaces no team owns (0 when the pool is kept separate).
    #[serde(default)]
    pub idle_share_cents: i64,
    /// GPU-hours used above its nominal quota, and of its unused quota lent to others.
    #[serde(default)]
    pub borrowed_gpu_hours: Hours,
    #[serde(default)]
    pub lent_gpu_hours: Hours,
    /// What it pays the lenders for its borrowing, and is paid for its lending.
    #[serde(default)]
    pub lending_fee_cents: i64,
    #[serde(default)]
    pub lending_credit_cents: i64,
    /// cost by use + idle share + lending fee − lending credit.
    pub charge_cents: i64,
}

/// The fleet's figures for the period (or one day of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetLine {
    pub capacity_gpu_hours: Hours,
    pub allocated_gpu_hours: Hours,
    pub busy_gpu_hours: Hours,
    pub unallocated_gpu_hours: Hours,
    pub capacity_cost_cents: i64,
    pub unallocated_cost_cents: i64,
    /// Capacity DCGM had no sample of (per flavor: capacity − observed device time), and its
    /// cost, which the platform line carries.
    #[serde(default)]
    pub unobserved_gpu_hours: Hours,
    #[serde(default)]
    pub unobserved_cost_cents: i64,
    /// Observed capacity cost − the teams' cost by use.
    pub idle_pool_cents: i64,
    /// What no team is charged: the unobserved capacity's cost and the part of the idle pool
    /// not shared (all of it when kept separate).
    pub platform_cents: i64,
    /// Allocated and busy GPU-hours of namespaces and queues no team owns (in the idle pool).
    pub unattributed_allocated_gpu_hours: Hours,
    pub unattributed_busy_gpu_hours: Hours,
}

/// GPU time: exact microseconds, and hours written with six decimals (rounded half up) for
/// people and CSV. `i128`: a period's sums pass `i64` at 150,000 GPUs over two years.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Hours(pub i128);

impl Hours {
    pub fn microseconds(self) -> i128 {
        self.0
    }

    /// Hours with two decimals (rounded half up), as a page shows them; the exact figure stays
    /// in the API and the CSV.
    pub fn to_hundredths(self) -> String {
        // 10⁻² hours = 36,000,000 µs
        crate::common::money::hundredths(div_round(self.0, 36_000_000))
    }
}

impl From<Hours> for String {
    fn from(h: Hours) -> String {
        h.to_string()
    }
}

impl TryFrom<String> for Hours {
    type Error = String;
    fn try_from(text: String) -> Result<Hours, String> {
        let micro = crate::usage::parse_micro(&text)
            .ok_or_else(|| format!("{text:?} is not a number of hours"))?;
        // hours in 10⁻⁶ → µs: × 3,600
        Ok(Hours(i128::from(micro) * 3_600))
    }
}

impl std::fmt::Display for Hours {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // 10⁻⁶ hours = 3,600 µs
        let millionths = div_round(self.0, 3_600);
        let sign = if millionths < 0 { "-" } else { "" };
        let m = millionths.abs();
        write!(f, "{sign}{}.{:06}", m / 1_000_000, m % 1_000_000)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayStatement {
    pub day: Day,
    pub teams: Vec<TeamLine>,
    /// Left out for callers who see only their own teams.
    pub fleet: Option<FleetLine>,
}

/// A team's idle share, lending fee and lending credit for a day, exact (GPU-µs × cents per
/// GPU-hour, as [`cents`] reads them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExactShares {
    pub idle_share: i128,
    pub lending_fee: i128,
    pub lending_credit: i128,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    pub from: Day,
    /// The last day included.
    pub to_inclusive: Day,
    pub idle: IdleShare,
    /// The lending credit chosen, in percent of the rate.
    #[serde(default)]
    pub lend_credit_pct: u8,
    pub teams: Vec<TeamLine>,
    /// Left out for callers who see only their own teams.
    pub fleet: Option<FleetLine>,
    /// Per team and served model: cost and cost per million tokens.
    #[serde(default)]
    pub models: Vec<ModelLine>,
    /// Per day, when asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<DayStatement>,
    /// Namespaces that used GPUs without a team (their time is in the idle pool), largest
    /// first; left out for callers who see only their own teams.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unattributed: Vec<UnattributedLine>,
    /// Months of the period that are closed (`YYYY-MM`): their figures are the frozen ones.
    #[serde(default)]
    pub closed_months: Vec<String>,
    /// What changed in closed months since they were closed (late ingests), charged here, in
    /// the first open month after them.
    #[serde(default)]
    pub adjustments: Vec<Adjustment>,
    /// What a reader must know: rounding, days whose allocation was unknown, unpriced flavors.
    pub notes: Vec<String>,
}

/// A namespace no team owns, and the GPU time it was allocated and kept busy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnattributedLine {
    pub namespace: String,
    pub allocated_gpu_hours: Hours,
    pub busy_gpu_hours: Hours,
}

/// A statement's period and choices as a query string or the command line gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementQuery {
    /// The first day, `YYYY-MM-DD` (UTC).
    pub from: Option<String>,
    /// The last day, included.
    pub to: Option<String>,
    /// `day` for a statement per day as well.
    pub by: Option<String>,
    /// `allocation` (default), `use`, `even` or `separate`.
    pub idle: Option<String>,
    /// Lending credit, 0 (default) to 100: the percentage of the rate borrowing teams pay the
    /// lending ones per GPU-hour lent.
    pub lend_credit: Option<String>,
    /// `json` (default), `csv` or `focus` (FinOps FOCUS 1.2 CSV, [`focus`]).
    pub format: Option<String>,
    /// With `format=focus`: what a team's rows add up to, `use` (default: its charge) or
    /// `allocation` (its cost by allocation).
    pub basis: Option<String>,
}

/// How a statement is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Json,
    Csv,
    Focus(focus::Basis),
}

/// A checked [`StatementQuery`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub from: Day,
    /// The day after the last.
    pub to: Day,
    pub by_day: bool,
    pub idle: IdleShare,
    pub lend_credit_pct: u8,
    pub format: Format,
}

/// The longest statement, in days.
pub const MAX_DAYS: i32 = 731;

impl StatementQuery {
    pub fn checked(&self) -> Result<Period, Vec<FieldError>> {
        let mut errors = Vec::new();
        let from = required_day("from", self.from.as_deref(), &mut errors);
        let to = required_day("to", self.to.as_deref(), &mut errors);
        let mut bad = |path: &str, message: String| {
            errors.push(FieldError {
                path: path.into(),
                message,
            })
        };
        let by_day = match self.by.as_deref() {
            None | Some("") => false,
            Some("day") => true,
            Some(other) => {
                bad("by", format!("{other:?}: leave it out, or by=day"));
                false
            }
        };
        let idle = match self.idle.as_deref() {
            None | Some("") => IdleShare::default(),
            Some(text) => IdleShare::parse(text).unwrap_or_else(|| {
                bad(
                    "idle",
                    format!("{text:?}: allocation, use, even or separate"),
                );
                IdleShare::default()
            }),
        };
        let lend_credit_pct = match self.lend_credit.as_deref() {
            None | Some("") => 0,
            Some(text) => text
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= 100)
                .unwrap_or_else(|| {
                    bad(
                        "lend_credit",
                        format!("{text:?}: a whole percentage of the rate, 0 to 100"),
                    );
                    0
                }),
        };
        let basis = match self.basis.as_deref() {
            None | Some("") => None,
            Some(text) => Some(focus::Basis::parse(text).unwrap_or_else(|| {
                bad("basis", format!("{text:?}: use or allocation"));
                focus::Basis::default()
            })),
        };
        let format = match (self.format.as_deref(), basis) {
            (None | Some("") | Some("json"), None) => Format::Json,
            (Some("csv"), None) => Format::Csv,
            (Some("focus"), basis) => Format::Focus(basis.unwrap_or_default()),
            (None | Some("") | Some("json") | Some("csv"), Some(_)) => {
                bad("basis", "a basis is for format=focus".to_owned());
                Format::Json
            }
            (Some(other), _) => {
                bad("format", format!("{other:?}: json, csv or focus"));
                Format::Json
            }
        };
        let end = match (from, to) {
            (Some(from), Some(to)) => day_window(from, to, MAX_DAYS, "a statement", &mut errors),
            _ => None,
        };
        match (from, end, errors.is_empty()) {
            (Some(from), Some(to), true) => Ok(Period {
                from,
                to,
                by_day,
                idle,
                lend_credit_pct,
                format,
            }),
            _ => Err(errors),
        }
    }
}

/// `num / den` rounded half away from zero (`den > 0`).
fn div_round(num: i128, den: i128) -> i128 {
    let half = den / 2;
    if num >= 0 {
        (num + half) / den
    } else {
        -((-num + half) / den)
    }
}

fn cents(value: i128) -> i64 {
    // value is GPU-µs × cents per GPU-hour
    i64::try_from(div_round(value, i128::from(GPU_US_PER_GPU_HOUR))).unwrap_or(i64::MAX)
}

/// A team's exact sums: GPU-µs, cents × GPU-µs per GPU-hour, tokens.
#[derive(Default, Clone, Copy)]
struct Sums {
    allocated: i128,
    busy: i128,
    observed_of_allocated: i128,
    allocated_value: i128,
    busy_value: i128,
    prompt: i64,
    generation: i64,
    borrowed: i128,
    lent: i128,
    /// Lending fee paid and credit received, exact (GPU-µs × cents per GPU-hour).
    fee_value: i128,
    credit_value: i128,
    /// Its share of the idle pool, exact: each day's, summed.
    idle_share: i128,
}

/// One day as a statement reads it: the GPUs and rates in force that day, and its usage and
/// tokens. A long statement is read a day (or a few) at a time, so it never holds more.
#[derive(Debug, Clone)]
pub struct DayFacts {
    pub day: Day,
    /// GPUs per flavor.
    pub capacity: BTreeMap<String, i64>,
    /// How much of the day each GPU's capacity is priced for, in µs: the whole day
    /// ([`GPU_US_PER_GPU_DAY`]), up to now on today, nothing after (capacity that has not
    /// been there yet is billed to nobody).
    pub priced_us: i64,
    /// Cents per GPU-hour per flavor; a flavor missing here is unpriced that day.
    pub rates: BTreeMap<String, i64>,
    pub usage: Vec<UsageDay>,
    pub tokens: Vec<TokensDay>,
}

/// How a row's allocation is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocated {
    /// As Kueue (or kube-state-metrics) reported it.
    Reported(i64),
    /// Nothing reported it for the namespace that day: the device time dcgm-exporter's pod
    /// mapping names it for (its observed time).
    Mapped(i64),
}

impl Allocated {
    pub fn gpu_us(self) -> i64 {
        match self {
            Allocated::Reported(us) | Allocated::Mapped(us) => us,
        }
    }
}

impl DayFacts {
    /// Each usage row with its allocation as charged: reported, or where no source reported
    /// any for the row's namespace that day, mapped from DCGM (a device no pod holds, namespace
    /// `''`, is allocated to nobody).
    pub fn allocations(&self) -> impl Iterator<Item = (&UsageDay, Allocated)> {
        let known: BTreeSet<&str> = self
            .usage
            .iter()
            .filter(|u| u.allocated_gpu_us.is_some())
            .map(|u| u.namespace.as_str())
            .collect();
        self.usage.iter().map(move |u| {
            let allocated = match u.allocated_gpu_us {
                Some(us) => Allocated::Reported(us),
                None if u.namespace.is_empty() || known.contains(u.namespace.as_str()) => {
                    Allocated::Reported(0)
                }
                None => Allocated::Mapped(u.observed_gpu_us),
            };
            (u, allocated)
        })
    }
}

/// A statement built a day at a time, in day order: each day's lines come out as the day is
/// added ([`Ledger::add_day`]) and the period's at the end ([`Ledger::finish`]), so its memory
/// is one day's figures per team, whatever the period's length.
///
/// Idle shares are always the whole fleet's (every team's allocation and use count); `visible`
/// only limits the lines written, so a requester's lines are the ones finance sees, with no
/// fleet line and no other team's figures.
pub struct Ledger {
    from: Day,
    to: Day,
    idle: IdleShare,
    lend_credit_pct: u8,
    teams: Vec<Team>,
    /// namespace → team name
    team_of: BTreeMap<String, String>,
    /// `None`: every team and the fleet line.
    visible: Option<Vec<String>>,
    whole: Totals,
    unpriced: BTreeSet<String>,
    unknown_days: Vec<Day>,
    unobserved_days: Vec<Day>,
    /// The last day's exact shares, per team shown.
    day_exact: BTreeMap<String, ExactShares>,
}

impl Ledger {
    /// A ledger of `[from, to)` for `teams`, writing lines for `visible` teams only when given.
    pub fn new(
        from: Day,
        to: Day,
        idle: IdleShare,
        lend_credit_pct: u8,
        teams: Vec<Team>,
        visible: Option<&[String]>,
    ) -> Ledger {
        let team_of = teams
            .iter()
            .map(|t| (t.namespace.clone(), t.name.clone()))
            .collect();
        Ledger {
            from,
            to,
            idle,
            lend_credit_pct,
            teams,
            team_of,
            visible: visible.map(<[String]>::to_vec),
            whole: Totals::default(),
            unpriced: BTreeSet::new(),
            unknown_days: Vec::new(),
            unobserved_days: Vec::new(),
            day_exact: BTreeMap::new(),
        }
    }

    /// Adds the next day (days come in order, each once) and returns its own statement.
    pub fn add_day(&mut self, facts: &DayFacts) -> DayStatement {
        let day = Totals::of_day(self, facts);
        if day.unobserved > 0 {
            self.unobserved_days.push(facts.day);
        }
        let statement = DayStatement {
            day: facts.day,
            teams: day.team_lines(self),
            fleet: day.fleet_line(self),
        };
        self.day_exact = day.exact_shares(self);
        self.whole.add(&day);
        statement
    }

    /// The exact figures behind the last day's idle shares and lending, per team shown, for
    /// exports whose rows must add up to the period's cents ([`focus`]).
    pub fn day_exact(&self) -> &BTreeMap<String, ExactShares> {
        &self.day_exact
    }

    /// The period's statement (its `days` left empty: they came out of [`Ledger::add_day`]).
    pub fn finish(self) -> Statement {
        let mut notes = vec![
            "Every cent figure is rounded half up from its own exact GPU-hours, so parts may differ from a total by a cent.".to_owned(),
        ];
        if let Some(first) = self.unknown_days.first() {
            notes.push(format!(
                "Neither Kueue nor kube-state-metrics said what was allocated on {} day(s) ({first}…): a GPU is counted as allocated to the namespace dcgm-exporter's pod mapping names, for the minutes it names it.",
                self.unknown_days.len(),
            ));
        }
        if let (Some(first), Some(last)) =
            (self.unobserved_days.first(), self.unobserved_days.last())
        {
            notes.push(format!(
                "{} GPU-hours of capacity on {} day(s) ({first} … {last}) had no DCGM sample (before the first sample, after the last, in a gap, or GPUs that never reported): nobody can say whether they were used, so they are priced on the platform line, not shared as idle.",
                Hours(self.whole.unobserved).to_hundredths(),
                self.unobserved_days.len(),
            ));
        }
        let unheld = self.whole.unheld_flavors();
        if self.visible.is_none() && !unheld.is_empty() {
            notes.push(format!(
                "No team or namespace was allocated any of flavor(s) {} in the period: their capacity was idle with no owner (in the idle pool; no quota covers it, or none was used).",
                unheld.join(", ")
            ));
        }
        if !self.unpriced.is_empty() {
            let flavors: Vec<&str> = self.unpriced.iter().map(String::as_str).collect();
            notes.push(format!(
                "No rate for flavor(s) {}: their GPU time is shown and priced at 0.",
                flavors.join(", ")
            ));
        }
        Statement {
            from: self.from,
            to_inclusive: self.to.plus(-1),
            idle: self.idle,
            lend_credit_pct: self.lend_credit_pct,
            teams: self.whole.team_lines(&self),
            models: self.whole.model_lines(&self),
            fleet: self.whole.fleet_line(&self),
            days: Vec::new(),
            unattributed: if self.visible.is_none() {
                self.whole.unattributed_lines()
            } else {
                Vec::new()
            },
            closed_months: Vec::new(),
            adjustments: Vec::new(),
            notes,
        }
    }

    fn shows(&self, team: &str) -> bool {
        self.visible
            .as_ref()
            .is_none_or(|v| v.iter().any(|t| t == team))
    }

    /// The day's rate of `flavor`, remembering flavors without one.
    fn rate(&mut self, facts: &DayFacts, flavor: &str) -> i128 {
        match facts.rates.get(flavor) {
            Some(r) => i128::from(*r),
            None => {
                self.unpriced.insert(if flavor.is_empty() {
                    "(unknown)".to_owned()
                } else {
                    flavor.to_owned()
                });
                0
            }
        }
    }
}

/// The statement of `input`, for the whole period, and per day when `by_day`.
pub fn statement(input: &StatementInput, by_day: bool) -> Statement {
    statement_for(input, by_day, None)
}

/// [`statement`] with only the `visible` teams' lines, when given (what a requester sees).
pub fn statement_for(
    input: &StatementInput,
    by_day: bool,
    visible: Option<&[String]>,
) -> Statement {
    let mut ledger = Ledger::new(
        input.from,
        input.to,
        input.idle,
        input.lend_credit_pct,
        input.teams.clone(),
        visible,
    );
    let days: Vec<DayStatement> = input
        .days()
        .iter()
        .map(|facts| ledger.add_day(facts))
        .collect();
    let mut statement = ledger.finish();
    if by_day {
        statement.days = days;
    }
    statement
}

impl StatementInput {
    /// Each day of the period with its capacity, rates, usage and tokens.
    pub fn days(&self) -> Vec<DayFacts> {
        let mut days: BTreeMap<Day, DayFacts> = (0..self.from.days_until(self.to))
            .map(|n| self.from.plus(n))
            .map(|day| {
                let capacity = self.capacity_by_day.get(&day).unwrap_or(&self.capacity);
                let facts = DayFacts {
                    day,
                    capacity: capacity.clone(),
                    priced_us: GPU_US_PER_GPU_DAY,
                    rates: BTreeMap::new(),
                    usage: Vec::new(),
                    tokens: Vec::new(),
                };
                (day, facts)
            })
            .collect();
        for u in &self.usage {
            if let Some(d) = days.get_mut(&u.day) {
                d.usage.push(u.clone());
            }
        }
        for t in &self.tokens {
            if let Some(d) = days.get_mut(&t.day) {
                d.tokens.push(t.clone());
            }
        }
        for d in days.values_mut() {
            let flavors: BTreeSet<&str> = d
                .capacity
                .keys()
                .chain(d.usage.iter().map(|u| &u.flavor))
                .map(String::as_str)
                .collect();
            d.rates = flavors
                .into_iter()
                .filter_map(|f| rate_on(&self.rates, f, d.day).map(|r| (f.to_owned(), r)))
                .collect();
        }
        days.into_values().collect()
    }
}

/// The minute rows behind one team's figures on one day (`GET /api/chargeback/drill`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drill {
    pub team: String,
    pub namespace: String,
    pub day: Day,
    /// The day's month is closed: the statement shows the frozen figures in `frozen`; the
    /// minutes below are today's rows (any difference is an adjustment).
    pub closed: bool,
    pub frozen: Vec<DrillDay>,
    /// The day's rollups per flavor, as statements of open days read them.
    pub rollups: Vec<DrillDay>,
    /// Every minute row of the day, oldest first; empty past the minute retention.
    pub minutes: Vec<DrillMinute>,
    pub notes: Vec<String>,
}

/// One flavor's figures for the day, and what they cost at the day's rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillDay {
    pub flavor: String,
    pub allocated_gpu_hours: Option<Hours>,
    pub busy_gpu_hours: Hours,
    pub observed_gpu_hours: Hours,
    /// The rate in force that day (frozen at close for a closed month); `None` when the flavor
    /// has none.
    pub cents_per_gpu_hour: Option<i64>,
    /// The allocated hours at that rate: the day's cost by allocation, before idle sharing.
    pub allocated_cents: Option<i64>,
    /// The busy hours at that rate.
    pub busy_cents: Option<i64>,
}

impl DrillDay {
    /// `usage`'s figures, priced at `rate` (cents per GPU-hour).
    pub fn priced(usage: &UsageDay, rate: Option<i64>) -> DrillDay {
        let at_rate = |us: i64| rate.map(|r| cents(i128::from(us) * i128::from(r)));
        DrillDay {
            flavor: usage.flavor.clone(),
            allocated_gpu_hours: usage.allocated_gpu_us.map(|us| Hours(us.into())),
            busy_gpu_hours: Hours(usage.busy_gpu_us.into()),
            observed_gpu_hours: Hours(usage.observed_gpu_us.into()),
            cents_per_gpu_hour: rate,
            allocated_cents: usage.allocated_gpu_us.and_then(at_rate),
            busy_cents: at_rate(usage.busy_gpu_us),
        }
    }
}

/// One minute row and the sources that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillMinute {
    /// RFC 3339, UTC.
    pub minute: String,
    pub flavor: String,
    pub allocated_gpu_microseconds: Option<i64>,
    pub busy_gpu_microseconds: Option<i64>,
    pub observed_gpu_microseconds: Option<i64>,
    pub fb_used_mib: Option<i64>,
    /// `kueue` (allocation) and/or `dcgm` (busy, observed, framebuffer).
    pub sources: Vec<String>,
}

/// A closed month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClosedMonth {
    /// `YYYY-MM`.
    pub month: String,
    pub closed_at: String,
    /// `None` when closed from the command line.
    pub closed_by: Option<String>,
}

/// `POST /api/chargeback/months/{month}/reopen`: why (kept in the audit log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reopen {
    pub reason: String,
}

/// `POST /api/chargeback/months/{month}/close`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloseMonth {
    /// The month's capacity no DCGM sample covered, as its statement shows it
    /// (`fleet.unobserved_gpu_hours`): needed, and must be the same figure, when there is any,
    /// so that nobody freezes unobserved hours without having read them.
    #[serde(default)]
    pub accept_unobserved_gpu_hours: Option<Hours>,
}

/// The capacity of a period no DCGM sample covered (see the module's definitions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unobserved {
    pub gpu_hours: Hours,
    pub cost_cents: i64,
    /// The days that had any.
    pub days: Vec<Day>,
}

impl Unobserved {
    pub fn of(input: &StatementInput) -> Unobserved {
        let s = statement(input, true);
        let fleet = s
            .fleet
            .unwrap_or_else(|| unreachable!("a whole statement has its fleet"));
        Unobserved {
            gpu_hours: fleet.unobserved_gpu_hours,
            cost_cents: fleet.unobserved_cost_cents,
            days: s
                .days
                .iter()
                .filter(|d| {
                    d.fleet
                        .as_ref()
                        .is_some_and(|f| f.unobserved_gpu_hours.0 > 0)
                })
                .map(|d| d.day)
                .collect(),
        }
    }

    /// Whether closing with `accepted` confirms it: there is none, or it is the same figure.
    pub fn confirmed_by(&self, accepted: Option<Hours>) -> bool {
        self.gpu_hours.0 == 0 || accepted == Some(self.gpu_hours)
    }

    /// "2880.00 GPU-hours ($2,476.80) on 3 day(s) (2026-11-01 … 2026-11-03)".
    pub fn words(&self) -> String {
        let span = match (self.days.first(), self.days.last()) {
            (Some(first), Some(last)) => {
                format!(" on {} day(s) ({first} … {last})", self.days.len())
            }
            _ => String::new(),
        };
        format!(
            "{} GPU-hours ({}){span}",
            self.gpu_hours.to_hundredths(),
            crate::common::money::dollars(self.cost_cents)
        )
    }
}

/// `YYYY-MM` → its first day.
pub fn parse_month(text: &str) -> Option<Day> {
    (text.len() == 7)
        .then(|| Day::parse(&format!("{text}-01")))
        .flatten()
}

/// A closed month's figures as they are now, less the frozen ones, per team.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Adjustment {
    /// The closed month, `YYYY-MM`.
    pub month: String,
    pub team: String,
    pub allocated_gpu_hours: Hours,
    pub busy_gpu_hours: Hours,
    pub cost_by_allocation_cents: i64,
    pub cost_by_use_cents: i64,
}

/// The adjustments of a closed `month`: its statement from today's usage (at the frozen rates
/// and capacity) against the frozen one; teams whose figures did not change are left out.
pub fn adjustments(month: &str, frozen: &Statement, now: &Statement) -> Vec<Adjustment> {
    now.teams
        .iter()
        .filter_map(|t| {
            let before = frozen.teams.iter().find(|f| f.team == t.team);
            let (alloc, busy, by_alloc, by_use) = before.map_or((0, 0, 0, 0), |f| {
                (
                    f.allocated_gpu_hours.0,
                    f.busy_gpu_hours.0,
                    f.cost_by_allocation_cents,
                    f.cost_by_use_cents,
                )
            });
            let a = Adjustment {
                month: month.to_owned(),
                team: t.team.clone(),
                allocated_gpu_hours: Hours(t.allocated_gpu_hours.0 - alloc),
                busy_gpu_hours: Hours(t.busy_gpu_hours.0 - busy),
                cost_by_allocation_cents: t.cost_by_allocation_cents - by_alloc,
                cost_by_use_cents: t.cost_by_use_cents - by_use,
            };
            (a.allocated_gpu_hours.0 != 0 || a.busy_gpu_hours.0 != 0).then_some(a)
        })
        .collect()
}

/// Exact sums of a day or of the whole period.
#[derive(Default)]
struct Totals {
    teams: BTreeMap<String, Sums>,
    /// (team, model) → [prompt, generation, prefill µs, decode µs]
    served: BTreeMap<(String, String), [i64; 4]>,
    capacity: i128,
    capacity_value: i128,
    allocated: i128,
    unattributed_allocated: i128,
    unattributed_busy: i128,
    unallocated_value: i128,
    unobserved: i128,
    unobserved_value: i128,
    /// Per namespace no team owns: allocated and busy GPU-µs.
    unattributed_by_namespace: BTreeMap<String, (i128, i128)>,
    /// Per flavor: the capacity priced and the GPU-µs allocated.
    held_by_flavor: BTreeMap<String, (i128, i128)>,
}

/// Per flavor: the allocated and the observed GPU-µs.
type Seen<'f> = BTreeMap<&'f str, (i128, i128)>;

/// Per flavor: each team's borrowed and lent GPU-µs.
type Lending<'f> = BTreeMap<&'f str, BTreeMap<String, (i128, i128)>>;

impl Totals {
    fn of_day(ledger: &mut Ledger, facts: &DayFacts) -> Totals {
        let mut p = Totals::default();
        let (seen, lending) = p.add_usage(ledger, facts);
        p.settle_lending(ledger, facts, lending);
        p.add_tokens(ledger, facts);
        p.add_capacity(ledger, facts, &seen);
        p.share_idle(ledger.idle);
        p
    }

    /// The day's allocated and busy time per team at its flavor's rate (what no team owns
    /// apart); the allocated and observed time per flavor, and each team's borrowed and lent
    /// time per flavor.
    fn add_usage<'f>(
        &mut self,
        ledger: &mut Ledger,
        facts: &'f DayFacts,
    ) -> (Seen<'f>, Lending<'f>) {
        let (day, p) = (facts.day, self);
        let mut seen = Seen::new();
        let mut lending = Lending::new();
        for (u, allocated) in facts.allocations() {
            let r = ledger.rate(facts, &u.flavor);
            let team = ledger.team_of.get(&u.namespace);
            if let (Allocated::Mapped(_), Some(_)) = (allocated, team)
                && ledger.unknown_days.last() != Some(&day)
            {
                ledger.unknown_days.push(day);
            }
            let allocated = i128::from(allocated.gpu_us());
            let busy = i128::from(u.busy_gpu_us);
            let flavor = seen.entry(&u.flavor).or_default();
            flavor.0 += allocated;
            flavor.1 += i128::from(u.observed_gpu_us);
            p.allocated += allocated;
            match team {
                Some(team) => {
                    let s = p.teams.entry(team.clone()).or_default();
                    s.allocated += allocated;
                    s.busy += busy;
                    s.observed_of_allocated += i128::from(u.observed_gpu_us).min(allocated);
                    s.allocated_value += allocated * r;
                    s.busy_value += busy * r;
                    let l = lending
                        .entry(&u.flavor)
                        .or_default()
                        .entry(team.clone())
                        .or_default();
                    l.0 += i128::from(u.borrowed_gpu_us);
                    l.1 += i128::from(u.lent_gpu_us);
                }
                None => {
                    p.unattributed_allocated += allocated;
                    p.unattributed_busy += busy;
                    if !u.namespace.is_empty() {
                        let n = p
                            .unattributed_by_namespace
                            .entry(u.namespace.clone())
                            .or_default();
                        n.0 += allocated;
                        n.1 += busy;
                    }
                }
            }
        }
        (seen, lending)
    }

    /// The borrowing that ran on teams' lent quota, at the credit's share of the rate: a fee
    /// to each borrower and a credit to each lender, in proportion.
    fn settle_lending(&mut self, ledger: &mut Ledger, facts: &DayFacts, lending: Lending) {
        let p = self;
        for (flavor, teams) in lending {
            let borrowed: i128 = teams.values().map(|l| l.0).sum();
            let lent: i128 = teams.values().map(|l| l.1).sum();
            // the borrowing that ran on teams' lent quota, at the credit's share of the rate
            let transfer = div_round(
                borrowed.min(lent)
                    * ledger.rate(facts, flavor)
                    * i128::from(ledger.lend_credit_pct),
                100,
            );
            for (team, (b, l)) in teams {
                let s = p.teams.entry(team).or_default();
                s.borrowed += b;
                s.lent += l;
                if transfer != 0 {
                    s.fee_value += mul_div_round(transfer, b, borrowed);
                    s.credit_value += mul_div_round(transfer, l, lent);
                }
            }
        }
    }

    /// The tokens each team's models served.
    fn add_tokens(&mut self, ledger: &Ledger, facts: &DayFacts) {
        let p = self;
        for t in &facts.tokens {
            if let Some(team) = ledger.team_of.get(&t.namespace) {
                let s = p.teams.entry(team.clone()).or_default();
                s.prompt += t.prompt_tokens;
                s.generation += t.generation_tokens;
                let m = p.served.entry((team.clone(), t.model.clone())).or_default();
                m[0] += t.prompt_tokens;
                m[1] += t.generation_tokens;
                m[2] += t.prefill_us;
                m[3] += t.decode_us;
            }
        }
    }

    /// The capacity priced, what of it no one held and what of it DCGM never saw.
    fn add_capacity(&mut self, ledger: &mut Ledger, facts: &DayFacts, seen: &Seen) {
        let p = self;
        for (flavor, gpus) in &facts.capacity {
            let r = ledger.rate(facts, flavor);
            let capacity = i128::from(*gpus) * i128::from(facts.priced_us);
            p.capacity += capacity;
            p.capacity_value += capacity * r;
            let (allocated, observed) = seen.get(flavor.as_str()).copied().unwrap_or((0, 0));
            let held = p.held_by_flavor.entry(flavor.clone()).or_default();
            held.0 += capacity;
            held.1 += allocated;
            p.unallocated_value += (capacity - allocated).max(0) * r;
            let unobserved = (capacity - observed).max(0);
            p.unobserved += unobserved;
            p.unobserved_value += unobserved * r;
        }
    }

    fn add(&mut self, other: &Totals) {
        for (team, s) in &other.teams {
            let t = self.teams.entry(team.clone()).or_default();
            t.allocated += s.allocated;
            t.busy += s.busy;
            t.observed_of_allocated += s.observed_of_allocated;
            t.allocated_value += s.allocated_value;
            t.busy_value += s.busy_value;
            t.prompt += s.prompt;
            t.generation += s.generation;
            t.borrowed += s.borrowed;
            t.lent += s.lent;
            t.fee_value += s.fee_value;
            t.credit_value += s.credit_value;
            t.idle_share += s.idle_share;
        }
        for (key, m) in &other.served {
            let t = self.served.entry(key.clone()).or_default();
            for (sum, add) in t.iter_mut().zip(m) {
                *sum += add;
            }
        }
        self.capacity += other.capacity;
        self.capacity_value += other.capacity_value;
        self.allocated += other.allocated;
        self.unattributed_allocated += other.unattributed_allocated;
        self.unattributed_busy += other.unattributed_busy;
        self.unallocated_value += other.unallocated_value;
        self.unobserved += other.unobserved;
        self.unobserved_value += other.unobserved_value;
        for (namespace, (allocated, busy)) in &other.unattributed_by_namespace {
            let n = self
                .unattributed_by_namespace
                .entry(namespace.clone())
                .or_default();
            n.0 += allocated;
            n.1 += busy;
        }
        for (flavor, (capacity, allocated)) in &other.held_by_flavor {
            let h = self.held_by_flavor.entry(flavor.clone()).or_default();
            h.0 += capacity;
            h.1 += allocated;
        }
    }

    /// The namespaces no team owns, largest use first.
    fn unattributed_lines(&self) -> Vec<UnattributedLine> {
        let mut lines: Vec<UnattributedLine> = self
            .unattributed_by_namespace
            .iter()
            .filter(|(_, (allocated, busy))| *allocated > 0 || *busy > 0)
            .map(|(namespace, (allocated, busy))| UnattributedLine {
                namespace: namespace.clone(),
                allocated_gpu_hours: Hours(*allocated),
                busy_gpu_hours: Hours(*busy),
            })
            .collect();
        lines.sort_by(|a, b| {
            (b.busy_gpu_hours.0, b.allocated_gpu_hours.0)
                .cmp(&(a.busy_gpu_hours.0, a.allocated_gpu_hours.0))
        });
        lines
    }

    /// Flavors with capacity in the period that no one was allocated any of.
    fn unheld_flavors(&self) -> Vec<&str> {
        self.held_by_flavor
            .iter()
            .filter(|(_, (capacity, allocated))| *capacity > 0 && *allocated == 0)
            .map(|(flavor, _)| flavor.as_str())
            .collect()
    }

    /// Observed capacity cost − the teams' cost by use, exact.
    fn idle_pool(&self) -> i128 {
        self.capacity_value
            - self.unobserved_value
            - self.teams.values().map(|s| s.busy_value).sum::<i128>()
    }

    /// Shares a day's idle pool among the teams of the day, exactly.
    fn share_idle(&mut self, idle: IdleShare) {
        let pool = self.idle_pool();
        let weight = |s: &Sums| -> i128 {
            match idle {
                IdleShare::Allocation => s.allocated,
                IdleShare::Use => s.busy,
                IdleShare::Even => i128::from(s.allocated > 0),
                IdleShare::Separate => 0,
            }
        };
        let total: i128 = self.teams.values().map(weight).sum();
        if total == 0 {
            return;
        }
        for s in self.teams.values_mut() {
            // kept exact: pool × weight / total, in the pool's units × 1 (rounded at 1
            // GPU-µs·cent/h, a billionth of a cent); the product, up to ~10⁴⁶ at the limits, in
            // 256 bits
            s.idle_share = mul_div_round(pool, weight(s), total);
        }
    }

    fn team_lines(&self, ledger: &Ledger) -> Vec<TeamLine> {
        ledger
            .teams
            .iter()
            .filter(|team| ledger.shows(&team.name))
            .map(|team| {
                let s = self.teams.get(&team.name).copied().unwrap_or_default();
                let share = s.idle_share;
                TeamLine {
                    team: team.name.clone(),
                    cost_centre: team.cost_centre.clone(),
                    allocated_gpu_hours: Hours(s.allocated),
                    busy_gpu_hours: Hours(s.busy),
                    idle_gpu_hours: Hours(s.allocated - s.busy),
                    unobserved_allocated_gpu_hours: Hours(s.allocated - s.observed_of_allocated),
                    utilisation_pct: (s.allocated > 0).then(|| {
                        crate::common::money::hundredths(div_round(s.busy * 10_000, s.allocated))
                    }),
                    prompt_tokens: s.prompt,
                    generation_tokens: s.generation,
                    cost_by_allocation_cents: cents(s.allocated_value),
                    cost_by_use_cents: cents(s.busy_value),
                    // the difference of the two printed figures, so they add up on the page
                    idle_cost_cents: cents(s.allocated_value) - cents(s.busy_value),
                    idle_share_cents: cents(share),
                    borrowed_gpu_hours: Hours(s.borrowed),
                    lent_gpu_hours: Hours(s.lent),
                    lending_fee_cents: cents(s.fee_value),
                    lending_credit_cents: cents(s.credit_value),
                    charge_cents: cents(s.busy_value + share + s.fee_value - s.credit_value),
                }
            })
            .collect()
    }

    fn exact_shares(&self, ledger: &Ledger) -> BTreeMap<String, ExactShares> {
        self.teams
            .iter()
            .filter(|(team, _)| ledger.shows(team))
            .map(|(team, s)| {
                let exact = ExactShares {
                    idle_share: s.idle_share,
                    lending_fee: s.fee_value,
                    lending_credit: s.credit_value,
                };
                (team.clone(), exact)
            })
            .collect()
    }

    fn model_lines(&self, ledger: &Ledger) -> Vec<ModelLine> {
        let mut lines = Vec::new();
        for team in ledger.teams.iter().filter(|t| ledger.shows(&t.name)) {
            let s = self.teams.get(&team.name).copied().unwrap_or_default();
            let models: Vec<(&String, &[i64; 4])> = self
                .served
                .range((team.name.clone(), String::new())..)
                .take_while(|((t, _), _)| *t == team.name)
                .map(|((_, model), m)| (model, m))
                .collect();
            // serving time, else tokens, decides each model's share of the team's cost
            let timed = models.iter().any(|(_, m)| m[2] + m[3] > 0);
            let weight = |m: &[i64; 4]| -> i128 {
                i128::from(if timed { m[2] + m[3] } else { m[0] + m[1] })
            };
            let total: i128 = models.iter().map(|(_, m)| weight(m)).sum();
            for (model, m) in models {
                let share = |value: i128| {
                    if total == 0 {
                        0
                    } else {
                        mul_div_round(value, weight(m), total)
                    }
                };
                let (by_allocation, by_use) = (share(s.allocated_value), share(s.busy_value));
                // input and output by prefill and decode time, else by tokens
                let (input_w, output_w) = if m[2] + m[3] > 0 {
                    (m[2], m[3])
                } else {
                    (m[0], m[1])
                };
                let per_million = |value: i128, part: i64, tokens: i64| -> Option<i64> {
                    (tokens > 0 && input_w + output_w > 0).then(|| {
                        let part_value =
                            mul_div_round(value, i128::from(part), i128::from(input_w + output_w));
                        i64::try_from(div_round(
                            part_value * 1_000_000,
                            i128::from(GPU_US_PER_GPU_HOUR) * i128::from(tokens),
                        ))
                        .unwrap_or(i64::MAX)
                    })
                };
                lines.push(ModelLine {
                    team: team.name.clone(),
                    model: model.clone(),
                    prompt_tokens: m[0],
                    generation_tokens: m[1],
                    share_of_team_ppm: i64::try_from(share(1_000_000)).unwrap_or(0),
                    shared_by: if timed {
                        SharedBy::ServingTime
                    } else {
                        SharedBy::Tokens
                    },
                    cost_by_allocation_cents: cents(by_allocation),
                    cost_by_use_cents: cents(by_use),
                    input_cents_per_million_by_allocation: per_million(
                        by_allocation,
                        input_w,
                        m[0],
                    ),
                    input_cents_per_million_by_use: per_million(by_use, input_w, m[0]),
                    output_cents_per_million_by_allocation: per_million(
                        by_allocation,
                        output_w,
                        m[1],
                    ),
                    output_cents_per_million_by_use: per_million(by_use, output_w, m[1]),
                });
            }
        }
        lines
    }

    /// The fleet's line, for callers who see every team.
    fn fleet_line(&self, ledger: &Ledger) -> Option<FleetLine> {
        ledger.visible.is_none().then(|| self.fleet())
    }

    fn fleet(&self) -> FleetLine {
        let shared: i128 = self.teams.values().map(|s| s.idle_share).sum();
        let busy: i128 = self.teams.values().map(|s| s.busy).sum::<i128>() + self.unattributed_busy;
        FleetLine {
            capacity_gpu_hours: Hours(self.capacity),
            allocated_gpu_hours: Hours(self.allocated),
            busy_gpu_hours: Hours(busy),
            unallocated_gpu_hours: Hours((self.capacity - self.allocated).max(0)),
            capacity_cost_cents: cents(self.capacity_value),
            unallocated_cost_cents: cents(self.unallocated_value),
            unobserved_gpu_hours: Hours(self.unobserved),
            unobserved_cost_cents: cents(self.unobserved_value),
            idle_pool_cents: cents(self.idle_pool()),
            platform_cents: cents(self.unobserved_value + self.idle_pool() - shared),
            unattributed_allocated_gpu_hours: Hours(self.unattributed_allocated),
            unattributed_busy_gpu_hours: Hours(self.unattributed_busy),
        }
    }
}

/// The CSV columns of a statement, units in their names.
pub const CSV_HEADER: &str = "period_from,period_to,day,team,cost_centre,allocated_gpu_hours,busy_gpu_hours,idle_gpu_hours,unobserved_allocated_gpu_hours,utilisation_pct,prompt_tokens,generation_tokens,cost_by_allocation_cents,cost_by_use_cents,idle_cost_cents,idle_share_cents,borrowed_gpu_hours,lent_gpu_hours,lending_fee_cents,lending_credit_cents,charge_cents,idle_share,lend_credit_pct";

/// The statement as CSV: one row per team (each day's first when the statement has days, then
/// the period's), and after each block a `(platform)` row holding the idle pool's part no team
/// is charged, so a block's `charge_cents` add up to the capacity cost (give or take a cent).
pub fn csv(statement: &Statement) -> String {
    let head = CsvHead::of(statement);
    let mut out = String::from(CSV_HEADER);
    out.push_str("\r\n");
    for d in &statement.days {
        head.block(&mut out, Some(d.day), &d.teams, d.fleet.as_ref());
    }
    head.block(&mut out, None, &statement.teams, statement.fleet.as_ref());
    out
}

/// What every CSV row repeats: the period and the statement's choices.
#[derive(Debug, Clone, Copy)]
pub struct CsvHead {
    pub from: Day,
    pub to_inclusive: Day,
    pub idle: IdleShare,
    pub lend_credit_pct: u8,
}

impl CsvHead {
    pub fn of(statement: &Statement) -> CsvHead {
        CsvHead {
            from: statement.from,
            to_inclusive: statement.to_inclusive,
            idle: statement.idle,
            lend_credit_pct: statement.lend_credit_pct,
        }
    }

    /// Appends one block of rows: a day's (or, without a day, the period's) teams, then the
    /// platform row when the fleet line is shown.
    pub fn block(
        &self,
        out: &mut String,
        day: Option<Day>,
        teams: &[TeamLine],
        fleet: Option<&FleetLine>,
    ) {
        use std::fmt::Write;
        let day = day.map(|d| d.to_string()).unwrap_or_default();
        let (from, to, idle, pct) = (
            self.from,
            self.to_inclusive,
            self.idle.name(),
            self.lend_credit_pct,
        );
        for t in teams {
            // writing to a String cannot fail
            let _ = write!(
                out,
                "{from},{to},{day},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{idle},{pct}\r\n",
                field(&t.team),
                field(&t.cost_centre),
                t.allocated_gpu_hours,
                t.busy_gpu_hours,
                t.idle_gpu_hours,
                t.unobserved_allocated_gpu_hours,
                t.utilisation_pct.as_deref().unwrap_or_default(),
                t.prompt_tokens,
                t.generation_tokens,
                t.cost_by_allocation_cents,
                t.cost_by_use_cents,
                t.idle_cost_cents,
                t.idle_share_cents,
                t.borrowed_gpu_hours,
                t.lent_gpu_hours,
                t.lending_fee_cents,
                t.lending_credit_cents,
                t.charge_cents,
            );
        }
        if let Some(fleet) = fleet {
            let platform = fleet.platform_cents;
            let _ = write!(
                out,
                "{from},{to},{day},(platform),,,,,,,,,,,,{platform},,,,,{platform},{idle},{pct}\r\n"
            );
        }
    }
}

/// A CSV field: quoted when it holds a comma, quote or line break; a leading `=`, `+`, `-` or
/// `@` is defused so spreadsheets read text, not a formula.
fn field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if text.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

pub mod budget;
pub mod focus;
pub mod worth;

#[cfg(test)]
mod tests;
