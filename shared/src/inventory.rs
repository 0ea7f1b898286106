//! Inventory as code: the whole fleet — GPU models and prices, flavors, node pools, teams with
//! their namespace, cost centre and queue names — as one file (YAML or JSON) that platform
//! teams keep in git. `gpufleet fleet export` writes it, `gpufleet fleet import` (and
//! `POST /api/inventory`) applies it; this module says what a file may hold and what applying
//! it would change.
//!
//! Invariants: a valid file names only catalogue models, DNS-label flavors, teams, namespaces
//! and queues, each once; every pool's flavor is declared (or is the pool's own, by default)
//! and holds one model; applying a file twice changes nothing the second time (the changes
//! are computed between the stored inventory and the file, in a stable order). Teams are never
//! removed by a file (their requests and history stay); models, flavors and pools absent from
//! the file are.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{
    accounts::validate_cost_centre,
    chargeback::MAX_CENTS_PER_GPU_HOUR,
    common::error::FieldError,
    common::validate::{dns_label_from, validate_dns_label},
    fleet::catalogue,
    quota::{DEFAULT_COHORT, FlavorSettings},
};

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    #[serde(default)]
    pub models: Vec<ModelEntry>,
    #[serde(default)]
    pub flavors: Vec<FlavorEntry>,
    #[serde(default)]
    pub pools: Vec<PoolEntry>,
    #[serde(default)]
    pub teams: Vec<TeamEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// A catalogue name, e.g. `H100-SXM5-80GB`.
    pub name: String,
    pub price_cents_per_gpu_hour: i64,
    /// The product label its nodes carry where it is not the catalogue's (GPU Feature
    /// Discovery's `nvidia.com/gpu.product` for a board variant whose NVML name differs, e.g.
    /// `NVIDIA-H200-NVL`); absent: the catalogue's ([`catalogue::AcceleratorModel::product`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_label: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlavorEntry {
    pub name: String,
    #[serde(default)]
    pub settings: FlavorSettings,
    /// Chargeback rates from a UTC day on; without any, the model's price applies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<RateEntry>,
}

/// A flavor's rate from a day on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateEntry {
    pub effective_from: crate::common::day::Day,
    pub cents_per_gpu_hour: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolEntry {
    pub name: String,
    pub gpu_model: String,
    pub nodes: i32,
    pub gpus_per_node: i32,
    /// Default: a flavor of its own, named after the pool.
    #[serde(default)]
    pub flavor: Option<String>,
}

impl PoolEntry {
    pub fn flavor_name(&self) -> String {
        self.flavor
            .clone()
            .unwrap_or_else(|| dns_label_from(&self.name).unwrap_or_else(|| "pool".to_owned()))
    }
}

fn default_cohort() -> Option<String> {
    Some(DEFAULT_COHORT.to_owned())
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamEntry {
    pub name: String,
    pub namespace: String,
    pub cost_centre: String,
    /// Default: the team's name.
    #[serde(default)]
    pub cluster_queue: Option<String>,
    /// Default: the team's name.
    #[serde(default)]
    pub local_queue: Option<String>,
    /// Default `gpufleet`; `null`: in no cohort (hard quota).
    #[serde(default = "default_cohort")]
    pub cohort: Option<String>,
    /// Its monthly budgets (`crate::chargeback::budget`); the file's list replaces the team's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<BudgetEntry>,
}

/// A team's budget for one month, as the API's `PUT /api/chargeback/budgets/{team}/{month}`
/// takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetEntry {
    /// `YYYY-MM`.
    pub month: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_cents: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_gpu_hours: Option<i64>,
    /// `allocation` (default) or `use`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    /// Default `[80, 100]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thresholds_pct: Option<Vec<i64>>,
}

impl BudgetEntry {
    /// The month's first day and the checked budget; errors name the entry's fields.
    pub fn checked(
        &self,
    ) -> Result<(crate::common::day::Day, crate::chargeback::budget::Budget), Vec<FieldError>> {
        let new = crate::chargeback::budget::NewBudget {
            limit_cents: self.limit_cents,
            limit_gpu_hours: self.limit_gpu_hours,
            basis: self.basis.clone(),
            thresholds_pct: self.thresholds_pct.clone(),
        };
        let month = crate::chargeback::parse_month(&self.month);
        match (month, new.checked()) {
            (Some(month), Ok(budget)) => Ok((month, budget)),
            (month, result) => {
                let mut errors = result.err().unwrap_or_default();
                if month.is_none() {
                    errors.insert(
                        0,
                        error(
                            "month".into(),
                            format!("{:?} is not a month written YYYY-MM", self.month),
                        ),
                    );
                }
                Err(errors)
            }
        }
    }

    /// The entry with its defaults written out, as the database gives it back.
    pub fn of(month: crate::common::day::Day, budget: &crate::chargeback::budget::Budget) -> Self {
        let (limit_cents, limit_gpu_hours) = budget.limit.split();
        BudgetEntry {
            month: month.month_name(),
            limit_cents,
            limit_gpu_hours,
            basis: Some(budget.basis.name().to_owned()),
            thresholds_pct: Some(
                budget
                    .thresholds_pct
                    .iter()
                    .map(|p| i64::from(*p))
                    .collect(),
            ),
        }
    }
}

impl TeamEntry {
    pub fn cluster_queue(&self) -> &str {
        self.cluster_queue.as_deref().unwrap_or(&self.name)
    }

    pub fn local_queue(&self) -> &str {
        self.local_queue.as_deref().unwrap_or(&self.name)
    }
}

fn error(path: String, message: String) -> FieldError {
    FieldError { path, message }
}

/// Pushes an error for every name after its first.
fn unique<'a>(
    what: &str,
    names: impl Iterator<Item = &'a str>,
    path: impl Fn(usize) -> String,
    errors: &mut Vec<FieldError>,
) {
    let mut seen = BTreeSet::new();
    for (i, name) in names.enumerate() {
        if !seen.insert(name) {
            errors.push(error(path(i), format!("{what} {name:?} is listed twice")));
        }
    }
}

/// The most nodes one pool holds, and GPUs the whole fleet: with rates of at most
/// [`MAX_CENTS_PER_GPU_HOUR`], a statement's cents stay far inside `i64` (10⁶ GPUs × 731 days
/// × 24 h × 10⁷ cents ≈ 1.8 × 10¹⁷).
pub const MAX_NODES_PER_POOL: i32 = 100_000;
pub const MAX_FLEET_GPUS: i64 = 1_000_000;

impl Inventory {
    /// Every problem, by path (`pools[2].gpus_per_node`); empty when the file can be applied.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.check_models(&mut errors);
        self.check_names(&mut errors);
        let model_of = self.check_pools(&mut errors);
        self.check_fleet_size(&mut errors);
        self.check_flavors(&model_of, &mut errors);
        self.check_teams(&mut errors);
        errors
    }

    /// Each model: in the catalogue, priced within bounds, its product label a label value.
    fn check_models(&self, errors: &mut Vec<FieldError>) {
        for (i, m) in self.models.iter().enumerate() {
            if let Err(unknown) = catalogue::find(&m.name) {
                errors.push(error(format!("models[{i}].name"), unknown.to_string()));
            }
            if !(0..=MAX_CENTS_PER_GPU_HOUR).contains(&m.price_cents_per_gpu_hour) {
                errors.push(error(
                    format!("models[{i}].price_cents_per_gpu_hour"),
                    format!("whole cents per GPU-hour, 0 to {MAX_CENTS_PER_GPU_HOUR}"),
                ));
            }
            if m.product_label
                .as_deref()
                .is_some_and(|l| !crate::quota::is_label_value(l))
            {
                errors.push(error(
                    format!("models[{i}].product_label"),
                    crate::quota::LABEL_VALUE_RULE.to_owned(),
                ));
            }
        }
    }

    /// Names that must be unique: models, pools, flavors, each flavor's rate days, teams, their
    /// namespaces and ClusterQueues; and each rate within bounds.
    fn check_names(&self, errors: &mut Vec<FieldError>) {
        unique(
            "model",
            self.models.iter().map(|m| m.name.as_str()),
            |i| format!("models[{i}].name"),
            errors,
        );
        unique(
            "pool",
            self.pools.iter().map(|p| p.name.as_str()),
            |i| format!("pools[{i}].name"),
            errors,
        );
        unique(
            "flavor",
            self.flavors.iter().map(|f| f.name.as_str()),
            |i| format!("flavors[{i}].name"),
            errors,
        );
        for (i, f) in self.flavors.iter().enumerate() {
            for (j, r) in f.rates.iter().enumerate() {
                if !(0..=MAX_CENTS_PER_GPU_HOUR).contains(&r.cents_per_gpu_hour) {
                    errors.push(error(
                        format!("flavors[{i}].rates[{j}].cents_per_gpu_hour"),
                        "whole cents per GPU-hour, 0 to 10,000,000".into(),
                    ));
                }
            }
            let days: Vec<String> = f
                .rates
                .iter()
                .map(|r| r.effective_from.to_string())
                .collect();
            unique(
                "rate day",
                days.iter().map(String::as_str),
                |j| format!("flavors[{i}].rates[{j}].effective_from"),
                errors,
            );
        }
        unique(
            "team",
            self.teams.iter().map(|t| t.name.as_str()),
            |i| format!("teams[{i}].name"),
            errors,
        );
        unique(
            "namespace",
            self.teams.iter().map(|t| t.namespace.as_str()),
            |i| format!("teams[{i}].namespace"),
            errors,
        );
        unique(
            "ClusterQueue",
            self.teams.iter().map(TeamEntry::cluster_queue),
            |i| format!("teams[{i}].cluster_queue"),
            errors,
        );
    }

    /// Each pool's fields and flavor; returns each flavor's model: the model of its pools,
    /// which must agree.
    fn check_pools(&self, errors: &mut Vec<FieldError>) -> BTreeMap<String, &str> {
        // Each flavor's model: the model of its pools, which must agree. A pool may name a
        // declared flavor or another pool's default one.
        let known: BTreeSet<String> = self
            .flavors
            .iter()
            .map(|f| f.name.clone())
            .chain(
                self.pools
                    .iter()
                    .filter(|p| p.flavor.is_none())
                    .map(PoolEntry::flavor_name),
            )
            .collect();
        let mut model_of: BTreeMap<String, &str> = BTreeMap::new();
        for (i, p) in self.pools.iter().enumerate() {
            let at = |what: &str| format!("pools[{i}].{what}");
            if p.name.trim().is_empty() || p.name.len() > 100 {
                errors.push(error(at("name"), "must be 1-100 characters".into()));
            }
            crate::common::validate::validate_visible(&at("name"), &p.name, errors);
            if !self.models.iter().any(|m| m.name == p.gpu_model) {
                errors.push(error(
                    at("gpu_model"),
                    format!("{:?} is not among the file's models", p.gpu_model),
                ));
            }
            if !(0..=MAX_NODES_PER_POOL).contains(&p.nodes) {
                errors.push(error(
                    at("nodes"),
                    format!("0 to {MAX_NODES_PER_POOL} nodes"),
                ));
            }
            if !(1..=64).contains(&p.gpus_per_node) {
                errors.push(error(at("gpus_per_node"), "must be 1-64".into()));
            }
            let flavor = p.flavor_name();
            match &p.flavor {
                Some(named) if !known.contains(named) => errors.push(error(
                    at("flavor"),
                    format!("no flavor {named:?} is declared under flavors"),
                )),
                _ => {}
            }
            match model_of.get(&flavor) {
                Some(other) if *other != p.gpu_model => errors.push(error(
                    at("flavor"),
                    format!(
                        "flavor {flavor} already holds {other} pools; one flavor holds one model"
                    ),
                )),
                _ => {
                    model_of.insert(flavor, &p.gpu_model);
                }
            }
        }
        model_of
    }

    fn check_fleet_size(&self, errors: &mut Vec<FieldError>) {
        let gpus: i64 = self
            .pools
            .iter()
            .map(|p| i64::from(p.nodes.max(0)) * i64::from(p.gpus_per_node.max(0)))
            .sum();
        if gpus > MAX_FLEET_GPUS {
            errors.push(error(
                "pools".into(),
                format!("{gpus} GPUs in all: a fleet holds at most {MAX_FLEET_GPUS}"),
            ));
        }
    }

    /// Each flavor: a DNS label, holding some pool, its settings valid for its pools' model.
    fn check_flavors(&self, model_of: &BTreeMap<String, &str>, errors: &mut Vec<FieldError>) {
        for (i, f) in self.flavors.iter().enumerate() {
            validate_dns_label(&format!("flavors[{i}].name"), &f.name, errors);
            match model_of.get(&f.name) {
                None => errors.push(error(
                    format!("flavors[{i}].name"),
                    format!(
                        "no pool is in flavor {}: give a pool `flavor: {}` or remove it",
                        f.name, f.name
                    ),
                )),
                Some(model) => {
                    if let Err(problems) = f.settings.validate(model) {
                        errors.extend(problems.into_iter().map(|e| {
                            error(format!("flavors[{i}].settings.{}", e.path), e.message)
                        }));
                    }
                }
            }
        }
    }

    /// Each team's names, cost centre, cohort and budgets.
    fn check_teams(&self, errors: &mut Vec<FieldError>) {
        for (i, t) in self.teams.iter().enumerate() {
            let at = |what: &str| format!("teams[{i}].{what}");
            validate_dns_label(&at("name"), &t.name, errors);
            validate_dns_label(&at("namespace"), &t.namespace, errors);
            validate_cost_centre(&at("cost_centre"), &t.cost_centre, errors);
            validate_dns_label(&at("cluster_queue"), t.cluster_queue(), errors);
            validate_dns_label(&at("local_queue"), t.local_queue(), errors);
            if let Some(cohort) = &t.cohort {
                validate_dns_label(&at("cohort"), cohort, errors);
            }
            for (j, b) in t.budgets.iter().enumerate() {
                if let Err(problems) = b.checked() {
                    errors.extend(
                        problems.into_iter().map(|e| {
                            error(format!("teams[{i}].budgets[{j}].{}", e.path), e.message)
                        }),
                    );
                }
            }
            unique(
                "budget month",
                t.budgets.iter().map(|b| b.month.as_str()),
                |j| format!("teams[{i}].budgets[{j}].month"),
                errors,
            );
        }
    }

    /// The file with every default written out and every list in name order: what export
    /// prints, and what two inventories are compared as.
    pub fn normalised(&self) -> Inventory {
        let mut inv = self.clone();
        let declared: BTreeSet<String> = inv.flavors.iter().map(|f| f.name.clone()).collect();
        for p in &mut inv.pools {
            let name = p.flavor_name();
            if !declared.contains(&name) {
                inv.flavors.push(FlavorEntry {
                    name: name.clone(),
                    settings: FlavorSettings::default(),
                    rates: Vec::new(),
                });
            }
            p.flavor = Some(name);
        }
        for t in &mut inv.teams {
            t.cluster_queue = Some(t.cluster_queue().to_owned());
            t.local_queue = Some(t.local_queue().to_owned());
            for b in &mut t.budgets {
                if let Ok((month, budget)) = b.checked() {
                    *b = BudgetEntry::of(month, &budget);
                }
            }
            t.budgets.sort_by(|a, b| a.month.cmp(&b.month));
        }
        inv.models.sort_by(|a, b| a.name.cmp(&b.name));
        inv.flavors.sort_by(|a, b| a.name.cmp(&b.name));
        inv.flavors.dedup_by(|a, b| a.name == b.name);
        for f in &mut inv.flavors {
            f.rates.sort_by_key(|r| r.effective_from);
        }
        inv.pools.sort_by(|a, b| a.name.cmp(&b.name));
        inv.teams.sort_by(|a, b| a.name.cmp(&b.name));
        inv
    }

    /// What applying `self` to `current` changes, one line each, in a stable order; empty when
    /// nothing would.
    pub fn changes_from(&self, current: &Inventory) -> Vec<String> {
        let (want, have) = (self.normalised(), current.normalised());
        let mut changes = Vec::new();
        diff(
            "model",
            &have.models,
            &want.models,
            |m| &m.name,
            model_changes,
            true,
            &mut changes,
        );
        diff(
            "flavor",
            &have.flavors,
            &want.flavors,
            |f| &f.name,
            flavor_changes,
            true,
            &mut changes,
        );
        diff(
            "pool",
            &have.pools,
            &want.pools,
            |p| &p.name,
            pool_changes,
            true,
            &mut changes,
        );
        diff(
            "team",
            &have.teams,
            &want.teams,
            |t| &t.name,
            team_changes,
            false,
            &mut changes,
        );
        changes
    }
}

/// A model's changed price or product label.
fn model_changes(a: &ModelEntry, b: &ModelEntry) -> Vec<String> {
    let mut c = field_change(
        "price_cents_per_gpu_hour",
        a.price_cents_per_gpu_hour,
        b.price_cents_per_gpu_hour,
    );
    let label = |m: &ModelEntry| {
        m.product_label
            .clone()
            .unwrap_or_else(|| "(the catalogue's)".to_owned())
    };
    c.extend(field_change("product_label", label(a), label(b)));
    c
}

/// A flavor's changed settings or rates.
fn flavor_changes(a: &FlavorEntry, b: &FlavorEntry) -> Vec<String> {
    let mut c: Vec<String> = (a.settings != b.settings)
        .then(|| {
            format!(
                "settings {} → {}",
                serde_json::to_string(&a.settings).unwrap_or_default(),
                serde_json::to_string(&b.settings).unwrap_or_default()
            )
        })
        .into_iter()
        .collect();
    if a.rates != b.rates {
        let text = |rates: &[RateEntry]| -> String {
            let each: Vec<String> = rates
                .iter()
                .map(|r| format!("{} from {}", r.cents_per_gpu_hour, r.effective_from))
                .collect();
            format!("[{}]", each.join(", "))
        };
        c.push(format!("rates {} → {}", text(&a.rates), text(&b.rates)));
    }
    c
}

/// A pool's changed model, size or flavor.
fn pool_changes(a: &PoolEntry, b: &PoolEntry) -> Vec<String> {
    let mut c = Vec::new();
    if a.gpu_model != b.gpu_model {
        c.push(format!("gpu_model {} → {}", a.gpu_model, b.gpu_model));
    }
    c.extend(field_change("nodes", a.nodes, b.nodes));
    c.extend(field_change(
        "gpus_per_node",
        a.gpus_per_node,
        b.gpus_per_node,
    ));
    if a.flavor != b.flavor {
        c.push(format!("flavor {} → {}", a.flavor_name(), b.flavor_name()));
    }
    c
}

/// A team's changed namespace, queues, cohort or budgets.
fn team_changes(a: &TeamEntry, b: &TeamEntry) -> Vec<String> {
    let mut c = Vec::new();
    for (what, x, y) in [
        ("namespace", &a.namespace, &b.namespace),
        ("cost_centre", &a.cost_centre, &b.cost_centre),
    ] {
        if x != y {
            c.push(format!("{what} {x} → {y}"));
        }
    }
    for (what, x, y) in [
        ("cluster_queue", a.cluster_queue(), b.cluster_queue()),
        ("local_queue", a.local_queue(), b.local_queue()),
    ] {
        if x != y {
            c.push(format!("{what} {x} → {y}"));
        }
    }
    if a.cohort != b.cohort {
        let show = |c: &Option<String>| c.clone().unwrap_or_else(|| "none".into());
        c.push(format!("cohort {} → {}", show(&a.cohort), show(&b.cohort)));
    }
    if a.budgets != b.budgets {
        let text = |budgets: &[BudgetEntry]| -> String {
            let each: Vec<String> = budgets
                .iter()
                .filter_map(|e| {
                    let (_, budget) = e.checked().ok()?;
                    let key = crate::chargeback::budget::limit_key(&budget);
                    let pct = &budget.thresholds_pct;
                    Some(format!("{} {key} alerting at {pct:?}%", e.month))
                })
                .collect();
            format!("[{}]", each.join(", "))
        };
        c.push(format!(
            "budgets {} → {}",
            text(&a.budgets),
            text(&b.budgets)
        ));
    }
    c
}

fn field_change<T: PartialEq + std::fmt::Display>(what: &str, a: T, b: T) -> Vec<String> {
    if a == b {
        Vec::new()
    } else {
        vec![format!("{what} {a} → {b}")]
    }
}

/// Adds, changes and (when `removes`) removals between two name-ordered lists.
fn diff<T>(
    what: &str,
    have: &[T],
    want: &[T],
    name: impl Fn(&T) -> &String,
    fields: impl Fn(&T, &T) -> Vec<String>,
    removes: bool,
    out: &mut Vec<String>,
) {
    for w in want {
        match have.iter().find(|h| name(h) == name(w)) {
            None => out.push(format!("add {what} {}", name(w))),
            Some(h) => {
                let changed = fields(h, w);
                if !changed.is_empty() {
                    out.push(format!("change {what} {}: {}", name(w), changed.join(", ")));
                }
            }
        }
    }
    for h in have {
        if !want.iter().any(|w| name(w) == name(h)) {
            if removes {
                out.push(format!("remove {what} {}", name(h)));
            } else {
                out.push(format!(
                    "keep {what} {} (not in the file; teams are never removed by a file)",
                    name(h)
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> Inventory {
        Inventory {
            models: vec![ModelEntry {
                product_label: None,
                name: "H100-SXM5-80GB".into(),
                price_cents_per_gpu_hour: 860,
            }],
            flavors: vec![],
            pools: vec![PoolEntry {
                name: "H100 Shared".into(),
                gpu_model: "H100-SXM5-80GB".into(),
                nodes: 8,
                gpus_per_node: 8,
                flavor: None,
            }],
            teams: vec![TeamEntry {
                budgets: Vec::new(),
                name: "research".into(),
                namespace: "team-research".into(),
                cost_centre: "CC-1".into(),
                cluster_queue: None,
                local_queue: None,
                cohort: default_cohort(),
            }],
        }
    }

    #[test]
    fn defaults_are_written_out_and_a_file_applied_twice_changes_nothing() {
        let inv = demo();
        assert_eq!(inv.validate(), vec![]);
        let n = inv.normalised();
        assert_eq!(n.flavors[0].name, "h100-shared");
        assert_eq!(n.pools[0].flavor.as_deref(), Some("h100-shared"));
        assert_eq!(n.teams[0].cluster_queue.as_deref(), Some("research"));
        assert_eq!(inv.changes_from(&n), Vec::<String>::new());
        assert_eq!(
            inv.changes_from(&Inventory::default()),
            [
                "add model H100-SXM5-80GB",
                "add flavor h100-shared",
                "add pool H100 Shared",
                "add team research"
            ]
        );
    }

    #[test]
    fn changes_say_what_and_from_what() {
        let mut wanted = demo();
        wanted.pools[0].nodes = 10;
        wanted.models[0].price_cents_per_gpu_hour = 800;
        wanted.teams[0].cohort = None;
        let mut current = demo();
        current.teams.push(TeamEntry {
            budgets: Vec::new(),
            name: "old".into(),
            ..current.teams[0].clone()
        });
        assert_eq!(
            wanted.changes_from(&current),
            [
                "change model H100-SXM5-80GB: price_cents_per_gpu_hour 860 → 800",
                "change pool H100 Shared: nodes 8 → 10",
                "change team research: cohort gpufleet → none",
                "keep team old (not in the file; teams are never removed by a file)",
            ]
        );
    }

    #[test]
    fn rates_are_part_of_the_file() {
        let mut wanted = demo().normalised();
        let rate = |day: &str, cents| RateEntry {
            effective_from: crate::common::day::Day::parse(day).expect("day"),
            cents_per_gpu_hour: cents,
        };
        wanted.flavors[0].rates = vec![rate("2026-12-01", 900), rate("2026-11-01", 850)];
        let name = wanted.flavors[0].name.clone();
        assert_eq!(
            wanted.changes_from(&demo()),
            [format!(
                "change flavor {name}: rates [] → [850 from 2026-11-01, 900 from 2026-12-01]"
            )]
        );
        wanted.flavors[0].rates.push(rate("2026-12-01", -1));
        let paths: Vec<String> = wanted.validate().into_iter().map(|e| e.path).collect();
        assert_eq!(
            paths,
            [
                "flavors[0].rates[2].cents_per_gpu_hour",
                "flavors[0].rates[2].effective_from"
            ]
        );
    }

    #[test]
    fn prices_nodes_and_the_fleet_are_bounded_where_entered() {
        let mut inv = demo();
        inv.models[0].price_cents_per_gpu_hour = i64::MAX;
        inv.pools[0].nodes = 100_001;
        let errors = inv.validate();
        let messages: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.path.as_str(), e.message.as_str()))
            .collect();
        assert!(messages.contains(&(
            "models[0].price_cents_per_gpu_hour",
            "whole cents per GPU-hour, 0 to 10000000"
        )));
        assert!(messages.contains(&("pools[0].nodes", "0 to 100000 nodes")));
        // Two pools of 100,000 nodes × 8 GPUs: 1,600,000 GPUs, past 1,000,000 in all.
        let mut inv = demo();
        inv.pools[0].nodes = 100_000;
        let mut second = inv.pools[0].clone();
        second.name = "H100 More".into();
        inv.pools.push(second);
        let errors = inv.validate();
        assert!(
            errors
                .iter()
                .any(|e| e.path == "pools" && e.message.contains("at most 1000000")),
            "{errors:?}"
        );
    }

    #[test]
    fn problems_are_named_by_path() {
        let mut inv = demo();
        inv.models.push(ModelEntry {
            product_label: None,
            name: "H9000".into(),
            price_cents_per_gpu_hour: -1,
        });
        inv.pools.push(PoolEntry {
            name: "l4".into(),
            gpu_model: "L4-24GB".into(),
            nodes: -1,
            gpus_per_node: 0,
            flavor: Some("h100-shared".into()),
        });
        inv.flavors.push(FlavorEntry {
            name: "spare".into(),
            settings: FlavorSettings::default(),
            rates: Vec::new(),
        });
        inv.teams.push(demo().teams[0].clone());
        let paths: Vec<String> = inv.validate().into_iter().map(|e| e.path).collect();
        assert_eq!(
            paths,
            [
                "models[1].name",
                "models[1].price_cents_per_gpu_hour",
                "teams[1].name",
                "teams[1].namespace",
                "teams[1].cluster_queue",
                "pools[1].gpu_model",
                "pools[1].nodes",
                "pools[1].gpus_per_node",
                "pools[1].flavor",
                "flavors[0].name",
            ]
        );
    }
}
