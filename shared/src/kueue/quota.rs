//! Kueue's quota arithmetic, the one model of it (the planner's week and the demo's metrics
//! both admit through it): one ClusterQueue per team with a nominal quota per flavor and, in
//! one cohort, lending up to each lender's `lendingLimit` and borrowing up to each borrower's
//! `borrowingLimit` (Kueue's cluster_queue.md, "Cohort", "BorrowingLimit", "LendingLimit").
//! [`Quotas`] holds the fixed limits, [`Usage`] what is held now, per team and flavor, in any
//! whole unit the caller counts in (the week: slices of a card; the demo: GPUs). A team in no
//! cohort is one with borrowing and lending limits of 0.

pub struct Quotas {
    /// Per flavor: its capacity.
    pub capacity: Vec<u64>,
    /// Per team and flavor (`[team * flavors + flavor]`), side by side so that a quota check
    /// reads one place.
    quota: Vec<Quota>,
    /// Σ lendable quota per flavor.
    pub pool_cap: Vec<u64>,
    /// Per flavor: the flavors of its GPU model, in the fleet's order. The exported
    /// ClusterQueues list every flavor of a device resource in one resource group, and a pod
    /// selects its model's node label, so Kueue may admit it on any of them, tried in that
    /// order (cluster_queue.md, "FlavorFungibility").
    pub alike: Vec<Vec<usize>>,
}

/// One team's quota of one flavor.
#[derive(Debug, Clone, Copy)]
struct Quota {
    nominal: u64,
    /// Nominal plus the borrowing limit (`u64::MAX`: no limit).
    limit: u64,
    /// Nominal quota that is not lendable (nominal − lendingLimit).
    guaranteed: u64,
}

impl Quotas {
    /// Quotas from the capacity per flavor and, per `[team][flavor]`, nominal quotas and
    /// borrowing and lending limits (`None`: no limit); each flavor a model of its own.
    pub fn new(
        capacity: Vec<u64>,
        nominal: Vec<Vec<u64>>,
        borrow_limit: Vec<Vec<Option<u64>>>,
        lending_limit: Vec<Vec<Option<u64>>>,
    ) -> Self {
        let flavors = capacity.len();
        let quota: Vec<Quota> = (0..nominal.len())
            .flat_map(|t| (0..flavors).map(move |f| (t, f)))
            .map(|(t, f)| {
                let n = nominal[t][f];
                Quota {
                    nominal: n,
                    limit: n.saturating_add(borrow_limit[t][f].unwrap_or(u64::MAX)),
                    guaranteed: n - lending_limit[t][f].unwrap_or(n).min(n),
                }
            })
            .collect();
        let pool_cap = (0..flavors)
            .map(|f| {
                quota[f..]
                    .iter()
                    .step_by(flavors)
                    .map(|q| q.nominal - q.guaranteed)
                    .sum()
            })
            .collect();
        Self {
            alike: (0..flavors).map(|f| vec![f]).collect(),
            capacity,
            quota,
            pool_cap,
        }
    }

    // `inline(always)` on these reads: a week makes millions of them, and the planner's
    // size-optimised wasm would otherwise call each (docs/performance.md, what-if in V8).
    #[inline(always)]
    fn quota(&self, team: usize, f: usize) -> &Quota {
        &self.quota[team * self.capacity.len() + f]
    }

    #[inline(always)]
    pub fn nominal(&self, team: usize, f: usize) -> u64 {
        self.quota(team, f).nominal
    }

    /// What `team` cannot lend of flavor `f`: nominal less its lending limit.
    #[inline(always)]
    fn guaranteed(&self, team: usize, f: usize) -> u64 {
        self.quota(team, f).guaranteed
    }

    /// The model of flavor `f`, as the index of its model's first flavor.
    pub fn model(&self, f: usize) -> usize {
        self.alike[f][0]
    }

    /// The most `team` may hold of flavor `f`: nominal plus its borrowing limit.
    #[inline(always)]
    pub fn limit(&self, team: usize, f: usize) -> u64 {
        self.quota(team, f).limit
    }

    /// Whether `slices` more on `f` for `team` fit its limit and the cohort's lendable pool,
    /// given the team's usage and the pool's use. Quota only, as Kueue admits: whether the
    /// flavor's nodes have room is the week's placement, not admission.
    pub fn fits(&self, team: usize, f: usize, slices: u64, usage: u64, pool: u64) -> bool {
        let new = usage + slices;
        if new > self.limit(team, f) {
            return false;
        }
        self.pool_after(team, f, pool, usage, new) <= self.pool_cap[f]
    }

    /// The lending pool's use once `team`'s usage of `f` goes from `before` to `after`: each
    /// team counts there with what it holds beyond its guaranteed (unlendable) quota.
    pub fn pool_after(&self, team: usize, f: usize, pool: u64, before: u64, after: u64) -> u64 {
        let guaranteed = self.quota(team, f).guaranteed;
        pool - before.saturating_sub(guaranteed) + after.saturating_sub(guaranteed)
    }
}

/// Quota held now.
pub struct Usage {
    /// What each team holds of each flavor (`[team * flavors + flavor]`).
    held: Vec<u64>,
    /// Σ over teams of usage beyond the guaranteed (non-lendable) part, per flavor.
    pub pool: Vec<u64>,
    /// Per flavor: the teams holding more than their nominal quota of it, ascending.
    pub borrowing: Vec<Vec<usize>>,
}

impl Usage {
    pub fn new(teams: usize, flavors: usize) -> Self {
        Self {
            held: vec![0; teams * flavors],
            pool: vec![0; flavors],
            borrowing: vec![Vec::new(); flavors],
        }
    }

    #[inline(always)]
    pub fn held(&self, team: usize, f: usize) -> u64 {
        self.held[team * self.pool.len() + f]
    }

    pub fn fits(&self, quotas: &Quotas, team: usize, f: usize, slices: u64) -> bool {
        quotas.fits(team, f, slices, self.held(team, f), self.pool[f])
    }

    /// The most `team` may add to what it holds of `f` now: [`Usage::fits`] holds for every
    /// amount up to it and for none above.
    pub fn room(&self, quotas: &Quotas, team: usize, f: usize) -> u64 {
        let held = self.held(team, f);
        let by_limit = quotas.limit(team, f).saturating_sub(held);
        // The pool counts what each team holds beyond its guaranteed quota: the team may grow
        // to its guaranteed quota plus what it already has in the pool plus the pool's room.
        let guaranteed = quotas.guaranteed(team, f);
        let pool_room = quotas.pool_cap[f] - self.pool[f];
        let by_pool = (guaranteed + held.saturating_sub(guaranteed))
            .saturating_add(pool_room)
            .saturating_sub(held);
        by_limit.min(by_pool)
    }

    /// Adds (or, with `add` false, removes) `slices` to a team's usage of a flavor, keeping the
    /// lending pool and the borrowing teams in step.
    pub fn change(&mut self, quotas: &Quotas, team: usize, f: usize, slices: u64, add: bool) {
        let held = &mut self.held[team * self.pool.len() + f];
        let before = *held;
        let after = if add {
            before + slices
        } else {
            before - slices
        };
        *held = after;
        self.pool[f] = quotas.pool_after(team, f, self.pool[f], before, after);
        let nominal = quotas.nominal(team, f);
        if (before > nominal) != (after > nominal) {
            let borrowing = &mut self.borrowing[f];
            match borrowing.binary_search(&team) {
                Ok(at) => {
                    borrowing.remove(at);
                }
                Err(at) => borrowing.insert(at, team),
            }
        }
    }
}

/// Victims tried on one flavor: the usage they would leave, without touching the real one.
pub struct Trial<'a> {
    quotas: &'a Quotas,
    usage: &'a Usage,
    f: usize,
    /// Slices freed per team so far (a few teams at most).
    freed: Vec<(usize, u64)>,
    pool: u64,
}

impl<'a> Trial<'a> {
    pub fn new(quotas: &'a Quotas, usage: &'a Usage, f: usize) -> Self {
        Self {
            quotas,
            usage,
            f,
            freed: Vec::new(),
            pool: usage.pool[f],
        }
    }

    fn held(&self, team: usize) -> u64 {
        let freed = self
            .freed
            .iter()
            .find(|(t, _)| *t == team)
            .map_or(0, |(_, g)| *g);
        self.usage.held(team, self.f) - freed
    }

    /// Whether `team` holds more than its nominal quota of the flavor.
    pub fn borrowing(&self, team: usize) -> bool {
        self.held(team) > self.quotas.nominal(team, self.f)
    }

    /// Whether `slices` more fit for `team`; without `borrow`, only within its nominal quota.
    pub fn fits(&self, team: usize, slices: u64, borrow: bool) -> bool {
        let held = self.held(team);
        (borrow || held + slices <= self.quotas.nominal(team, self.f))
            && self.quotas.fits(team, self.f, slices, held, self.pool)
    }

    /// Frees `slices` of `team`'s.
    pub fn remove(&mut self, team: usize, slices: u64) {
        self.shift(team, slices, false);
    }

    /// Gives `slices` back to `team`.
    pub fn restore(&mut self, team: usize, slices: u64) {
        self.shift(team, slices, true);
    }

    fn shift(&mut self, team: usize, slices: u64, back: bool) {
        let before = self.held(team);
        let after = if back {
            before + slices
        } else {
            before - slices
        };
        self.pool = self
            .quotas
            .pool_after(team, self.f, self.pool, before, after);
        let freed = self.usage.held(team, self.f) - after;
        match self.freed.iter_mut().find(|(t, _)| *t == team) {
            Some(entry) => entry.1 = freed,
            None => self.freed.push((team, freed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Kueue's own example (site/content/en/docs/concepts/cluster_queue.md, "LendingLimit"):
    /// team-a-cq with a nominal quota of 9, team-b-cq with 12 and `lendingLimit: 1`, in one
    /// cohort. With team-b idle, team-a admits up to 9 + 1 = 10; without the limit team-b could
    /// use 9 + 12.
    #[test]
    fn kueues_lending_limit_example() {
        let quotas = Quotas::new(
            vec![21],
            vec![vec![9], vec![12]],
            vec![vec![None], vec![None]],
            vec![vec![None], vec![Some(1)]],
        );
        let usage = Usage::new(2, 1);
        assert!(usage.fits(&quotas, 0, 0, 10));
        assert!(!usage.fits(&quotas, 0, 0, 11));
        assert!(usage.fits(&quotas, 1, 0, 21));
        let mut busy_b = Usage::new(2, 1);
        busy_b.change(&quotas, 1, 0, 11, true);
        assert!(
            busy_b.fits(&quotas, 0, 0, 10),
            "b's 11 leave its lendable 1"
        );
        busy_b.change(&quotas, 1, 0, 1, true);
        assert!(!busy_b.fits(&quotas, 0, 0, 10), "b uses all 12");
        assert!(busy_b.fits(&quotas, 0, 0, 9));
    }

    proptest! {
        /// Whatever is admitted through `fits`: no team above nominal + borrowingLimit, the
        /// cohort within the sum of its nominal quotas, and what the borrowers hold above
        /// nominal within what the others leave unused and may lend (each at most its
        /// lendingLimit).
        #[test]
        fn admissions_through_fits_keep_kueues_limits(
            teams in prop::collection::vec((0u64..20, prop::option::of(0u64..10), prop::option::of(0u64..20)), 1..5),
            capacity in 1u64..60,
            steps in prop::collection::vec((0usize..5, 1u64..8, any::<bool>()), 1..200),
        ) {
            let n = teams.len();
            let quotas = Quotas::new(
                vec![capacity],
                teams.iter().map(|t| vec![t.0]).collect(),
                teams.iter().map(|t| vec![t.1]).collect(),
                teams.iter().map(|t| vec![t.2]).collect(),
            );
            let mut usage = Usage::new(n, 1);
            let mut held: Vec<Vec<u64>> = vec![Vec::new(); n];
            for (team, gpus, add) in steps {
                let team = team % n;
                if add {
                    if usage.fits(&quotas, team, 0, gpus) {
                        usage.change(&quotas, team, 0, gpus, true);
                        held[team].push(gpus);
                    }
                } else if let Some(g) = held[team].pop() {
                    usage.change(&quotas, team, 0, g, false);
                }
                // `room` is where `fits` turns.
                for t in 0..n {
                    let room = usage.room(&quotas, t, 0);
                    prop_assert!(usage.fits(&quotas, t, 0, room), "team {t}: {room}");
                    prop_assert!(!usage.fits(&quotas, t, 0, room + 1), "team {t}: {room} + 1");
                }
                let u: Vec<u64> = (0..n).map(|t| usage.held(t, 0)).collect();
                prop_assert!(u.iter().sum::<u64>() <= teams.iter().map(|t| t.0).sum());
                let mut borrowed = 0;
                let mut lendable = 0;
                for (t, &(nominal, borrow, lend)) in teams.iter().enumerate() {
                    prop_assert!(u[t] <= nominal + borrow.unwrap_or(u64::MAX - nominal));
                    borrowed += u[t].saturating_sub(nominal);
                    lendable += nominal.saturating_sub(u[t]).min(lend.unwrap_or(nominal));
                }
                prop_assert!(borrowed <= lendable, "{u:?} borrowed {borrowed} > lendable {lendable}");
            }
        }
    }
}
