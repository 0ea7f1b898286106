//! The scenario's quotas in Kueue's quota arithmetic ([`crate::kueue::quota`]), in slices of a
//! card ([`super::SLICES_PER_GPU`] a card, so work smaller than a GPU counts its share).

use std::collections::BTreeMap;

use crate::{
    kueue::quota::Quotas,
    planning::scenario::{Scenario, Team},
};

use super::slices;

/// The scenario's quotas, in slices.
pub(super) fn of(scenario: &Scenario) -> Quotas {
    let cohort = scenario.quota.cohort;
    let per_flavor = |map: &BTreeMap<String, u32>, unset: Option<u64>| -> Vec<Option<u64>> {
        scenario
            .fleet
            .iter()
            .map(|a| map.get(&a.flavor).map(|&g| slices(g)).or(unset))
            .collect()
    };
    let teams = &scenario.teams;
    // Without a cohort there is no one to borrow from or lend to.
    let limits = |limit: fn(&Team) -> &BTreeMap<String, u32>| -> Vec<Vec<Option<u64>>> {
        teams
            .iter()
            .map(|t| match cohort {
                true => per_flavor(limit(t), None),
                false => vec![Some(0); scenario.fleet.len()],
            })
            .collect()
    };
    let mut quotas = Quotas::new(
        scenario.fleet.iter().map(|a| slices(a.count)).collect(),
        teams
            .iter()
            .map(|t| {
                per_flavor(&t.nominal_gpus, Some(0))
                    .into_iter()
                    .flatten()
                    .collect()
            })
            .collect(),
        limits(|t| &t.borrowing_limit_gpus),
        limits(|t| &t.lending_limit_gpus),
    );
    let fleet = &scenario.fleet;
    quotas.alike = fleet
        .iter()
        .map(|a| {
            (0..fleet.len())
                .filter(|&g| fleet[g].gpu_model == a.gpu_model)
                .collect()
        })
        .collect();
    quotas
}
