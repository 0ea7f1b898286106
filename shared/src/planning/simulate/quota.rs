//! Kueue's quota arithmetic: one ClusterQueue per team with a nominal quota per flavor and, in
//! a cohort, lending up to each lender's `lendingLimit` and borrowing up to each borrower's
//! `borrowingLimit`. [`Quotas`] holds the fixed limits, [`Usage`] what is held now; both in
//! whole GPUs, indexed `[team][flavor]`.

use std::collections::BTreeMap;

use crate::planning::scenario::Scenario;

pub(super) struct Quotas {
    /// GPUs per flavor.
    pub capacity: Vec<u32>,
    pub nominal: Vec<Vec<u32>>,
    /// `None`: no limit.
    pub borrow_limit: Vec<Vec<Option<u32>>>,
    /// Nominal quota that is not lendable (nominal − lendingLimit).
    pub guaranteed: Vec<Vec<u32>>,
    /// Σ lendable quota per flavor.
    pub pool_cap: Vec<u32>,
}

impl Quotas {
    pub fn of(scenario: &Scenario) -> Self {
        let flavors: Vec<&str> = scenario.fleet.iter().map(|a| a.flavor.as_str()).collect();
        let quota = |map: &BTreeMap<String, u32>, f: &str| map.get(f).copied();
        let cohort = scenario.quota.cohort;
        let nominal: Vec<Vec<u32>> = scenario
            .teams
            .iter()
            .map(|t| {
                flavors
                    .iter()
                    .map(|f| quota(&t.nominal_gpus, f).unwrap_or(0))
                    .collect()
            })
            .collect();
        let borrow_limit = scenario
            .teams
            .iter()
            .map(|t| {
                flavors
                    .iter()
                    .map(|f| {
                        if cohort {
                            quota(&t.borrowing_limit_gpus, f)
                        } else {
                            Some(0)
                        }
                    })
                    .collect()
            })
            .collect();
        let guaranteed: Vec<Vec<u32>> = scenario
            .teams
            .iter()
            .zip(&nominal)
            .map(|(t, nominal)| {
                flavors
                    .iter()
                    .zip(nominal)
                    .map(|(f, &n)| {
                        if cohort {
                            n - quota(&t.lending_limit_gpus, f).unwrap_or(n).min(n)
                        } else {
                            n
                        }
                    })
                    .collect()
            })
            .collect();
        let pool_cap = (0..flavors.len())
            .map(|f| {
                (0..scenario.teams.len())
                    .map(|t| nominal[t][f] - guaranteed[t][f])
                    .sum()
            })
            .collect();
        Self {
            capacity: scenario.fleet.iter().map(|a| a.count).collect(),
            nominal,
            borrow_limit,
            guaranteed,
            pool_cap,
        }
    }

    /// The most `team` may hold of flavor `f`: nominal plus its borrowing limit.
    pub fn limit(&self, team: usize, f: usize) -> u32 {
        self.nominal[team][f].saturating_add(self.borrow_limit[team][f].unwrap_or(u32::MAX))
    }

    /// Whether `gpus` more on `f` for `team` fit the fleet, the team's limit and the cohort's
    /// lendable pool, given the team's usage, the flavor's total and the pool's use.
    pub fn fits(
        &self,
        team: usize,
        f: usize,
        gpus: u32,
        usage: u32,
        total: u32,
        pool: u32,
    ) -> bool {
        if total + gpus > self.capacity[f] {
            return false;
        }
        let new = usage + gpus;
        if new > self.limit(team, f) {
            return false;
        }
        let guaranteed = self.guaranteed[team][f];
        pool - usage.saturating_sub(guaranteed) + new.saturating_sub(guaranteed) <= self.pool_cap[f]
    }
}

/// GPUs held now.
pub(super) struct Usage {
    pub team: Vec<Vec<u32>>,
    /// Per flavor.
    pub total: Vec<u32>,
    /// Σ over teams of usage beyond the guaranteed (non-lendable) part, per flavor.
    pub pool: Vec<u32>,
}

impl Usage {
    pub fn new(teams: usize, flavors: usize) -> Self {
        Self {
            team: vec![vec![0; flavors]; teams],
            total: vec![0; flavors],
            pool: vec![0; flavors],
        }
    }

    pub fn fits(&self, quotas: &Quotas, team: usize, f: usize, gpus: u32) -> bool {
        quotas.fits(
            team,
            f,
            gpus,
            self.team[team][f],
            self.total[f],
            self.pool[f],
        )
    }

    /// Adds (or, with `add` false, removes) `gpus` to a team's usage of a flavor, keeping the
    /// flavor total and the lending pool in step.
    pub fn change(&mut self, quotas: &Quotas, team: usize, f: usize, gpus: u32, add: bool) {
        let guaranteed = quotas.guaranteed[team][f];
        let before = self.team[team][f].saturating_sub(guaranteed);
        if add {
            self.team[team][f] += gpus;
            self.total[f] += gpus;
        } else {
            self.team[team][f] -= gpus;
            self.total[f] -= gpus;
        }
        let after = self.team[team][f].saturating_sub(guaranteed);
        self.pool[f] = self.pool[f] - before + after;
    }
}

/// Victims tried on one flavor: the usage they would leave, without touching the real one.
pub(super) struct Trial<'a> {
    quotas: &'a Quotas,
    usage: &'a Usage,
    f: usize,
    /// GPUs freed per team so far (a few teams at most).
    freed: Vec<(usize, u32)>,
    total: u32,
    pool: u32,
}

impl<'a> Trial<'a> {
    pub fn new(quotas: &'a Quotas, usage: &'a Usage, f: usize) -> Self {
        Self {
            quotas,
            usage,
            f,
            freed: Vec::new(),
            total: usage.total[f],
            pool: usage.pool[f],
        }
    }

    fn held(&self, team: usize) -> u32 {
        let freed = self
            .freed
            .iter()
            .find(|(t, _)| *t == team)
            .map_or(0, |(_, g)| *g);
        self.usage.team[team][self.f] - freed
    }

    /// Whether `team` holds more than its nominal quota of the flavor.
    pub fn borrowing(&self, team: usize) -> bool {
        self.held(team) > self.quotas.nominal[team][self.f]
    }

    /// Whether `gpus` more fit for `team`; without `borrow`, only within its nominal quota.
    pub fn fits(&self, team: usize, gpus: u32, borrow: bool) -> bool {
        let held = self.held(team);
        (borrow || held + gpus <= self.quotas.nominal[team][self.f])
            && self
                .quotas
                .fits(team, self.f, gpus, held, self.total, self.pool)
    }

    /// Frees `gpus` of `team`'s.
    pub fn remove(&mut self, team: usize, gpus: u32) {
        self.shift(team, gpus, false);
    }

    /// Gives `gpus` back to `team`.
    pub fn restore(&mut self, team: usize, gpus: u32) {
        self.shift(team, gpus, true);
    }

    fn shift(&mut self, team: usize, gpus: u32, back: bool) {
        let guaranteed = self.quotas.guaranteed[team][self.f];
        let before = self.held(team);
        let after = if back { before + gpus } else { before - gpus };
        self.total = if back {
            self.total + gpus
        } else {
            self.total - gpus
        };
        self.pool =
            self.pool - before.saturating_sub(guaranteed) + after.saturating_sub(guaranteed);
        let freed = self.usage.team[team][self.f] - after;
        match self.freed.iter_mut().find(|(t, _)| *t == team) {
            Some(entry) => entry.1 = freed,
            None => self.freed.push((team, freed)),
        }
    }
}
