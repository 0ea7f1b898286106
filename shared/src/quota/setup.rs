//! The Kueue objects the effective quota renders to, and the review an approver reads.

use crate::{
    common::day::Day,
    common::yaml::to_yaml,
    kueue::{KueueVersion, Queue, Queueing, Quota, Reclaim, Setup, WithinQueue},
};

use super::*;

impl QuotaWorld {
    /// `request` as the approver weighs it on `today`: the rules and the impact against every
    /// other approval, and the team's ClusterQueue now and after, on the first day it counts.
    pub fn review(&self, request: QuotaRequest, today: Day, version: KueueVersion) -> RequestView {
        let others = QuotaWorld {
            approved: self
                .approved
                .iter()
                .filter(|a| a.id != request.id)
                .cloned()
                .collect(),
            ..self.clone()
        };
        let on = request.spec.starts_on.max(today);
        let queue_yaml = |world: &QuotaWorld| {
            self.team(&request.team)
                .and_then(|t| {
                    world
                        .kueue_setup(on)
                        .cluster_queue_of(&t.cluster_queue, version)
                })
                .map(|cq| to_yaml(&cq))
                .unwrap_or_default()
        };
        RequestView {
            checked: others.check(&request.team, &request.spec, today),
            impact: others.impact(&request.team, &request.spec, today),
            queue_now_yaml: queue_yaml(self),
            queue_after_yaml: queue_yaml(&others.with(&request.team, &request.spec)),
            request,
        }
    }

    /// The Kueue objects of the quota in force on `day`.
    pub fn kueue_setup(&self, day: Day) -> Setup {
        let effective = self.effective_on(day);
        let queues = self
            .teams
            .iter()
            .map(|t| {
                let (terms, quotas) = match effective.get(t.team.as_str()) {
                    Some(a) => (
                        Some(&a.spec),
                        a.spec
                            .lines
                            .iter()
                            .map(|l| Quota {
                                flavor: l.flavor.clone(),
                                resource: l.resource.clone(),
                                nominal: l.nominal,
                                borrowing_limit: l.borrowing_limit,
                                lending_limit: l.lending_limit,
                            })
                            .collect(),
                    ),
                    // No quota in force: nothing of its own and nothing borrowed.
                    None => (
                        None,
                        self.flavors
                            .iter()
                            .flat_map(|f| {
                                f.resources().into_iter().map(|c| Quota {
                                    flavor: f.name.clone(),
                                    resource: c.resource,
                                    nominal: 0,
                                    borrowing_limit: Some(0),
                                    lending_limit: None,
                                })
                            })
                            .collect(),
                    ),
                };
                Queue {
                    cluster_queue: t.cluster_queue.clone(),
                    namespace: t.namespace.clone(),
                    local_queue: t.local_queue.clone(),
                    cohort: t.cohort.clone(),
                    queueing: terms.map_or(Queueing::BestEffortFifo, |s| s.queueing),
                    reclaim: terms.map_or(Reclaim::default(), |s| s.reclaim_within_cohort),
                    within: terms.map_or(WithinQueue::default(), |s| s.within_cluster_queue),
                    quotas,
                }
            })
            .collect();
        Setup {
            flavors: self.flavors.iter().map(Flavor::object).collect(),
            resources: self
                .flavors
                .iter()
                .map(|f| {
                    (
                        f.name.clone(),
                        f.resources().into_iter().map(|c| c.resource).collect(),
                    )
                })
                .collect(),
            queues,
            priorities: vec![
                crate::kueue::TRAINING_PRIORITY,
                crate::kueue::INFERENCE_PRIORITY,
            ],
        }
    }
}
