//! The Kueue objects the effective quota renders to, and the review an approver reads.

use std::collections::BTreeMap;

use crate::{
    common::day::Day,
    common::yaml::to_yaml,
    fleet::{
        catalogue::{self, HamiResources},
        sharing::Mechanism,
    },
    kueue::{
        BorrowWithinCohort, KueueVersion, ManagerConfig, PodRequest, Queue, Queueing, Quota,
        Reclaim, Setup, Trial, Verdict, WithinQueue,
    },
};

use super::*;

impl QuotaWorld {
    /// The world without the approval of request `id` (a request is weighed against every
    /// other approval).
    pub fn without(&self, id: i64) -> QuotaWorld {
        QuotaWorld {
            approved: self
                .approved
                .iter()
                .filter(|a| a.id != id)
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    /// `request` as the approver weighs it on `today`: the rules and the impact against every
    /// other approval, and the team's ClusterQueue now and after, on the first day it counts.
    pub fn review(&self, request: QuotaRequest, today: Day, version: KueueVersion) -> RequestView {
        let others = self.without(request.id);
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

    /// The check on the quota in force on `day`, as the Cluster page shows it: for each team
    /// and each flavor resource its quota holds, a pod asking one of it (and cpu and memory,
    /// which the manager excludes), in the team's namespace with its queue-name label, selecting
    /// the flavor's product label — on a flavor that shares by HAMi also HAMi's per-vGPU memory
    /// and cores (half a card each), which these queues do not cover — put through Kueue's
    /// rules on these objects, and the flavor's labels against those GPU Feature Discovery
    /// writes on a node of its pools ([`Flavor::node_labels`]).
    pub fn admission(&self, day: Day) -> Vec<Verdict> {
        self.kueue_setup(day).check_all(
            &self.admission_trials(day),
            &ManagerConfig::accelerators_only(),
        )
    }

    /// The pods [`QuotaWorld::admission`] puts through Kueue's rules: per team and flavor
    /// resource its quota in force on `day` holds, one asking one of it, and on whole GPUs one
    /// more asking the team's declared largest job (`largest_job_gpus`, when over one): Kueue
    /// admits a job whole, so the one that needs the most is the one that may never start. Each
    /// subject names the count it asks.
    pub fn admission_trials(&self, day: Day) -> Vec<Trial> {
        let effective = self.effective_on(day);
        let mut trials = Vec::new();
        for team in &self.teams {
            let Some(approved) = effective.get(team.team.as_str()) else {
                continue;
            };
            for line in approved.spec.lines.iter().filter(|l| l.nominal > 0) {
                let Some(flavor) = self.flavors.iter().find(|f| f.name == line.flavor) else {
                    continue;
                };
                let model = catalogue::find(&flavor.gpu_model).ok();
                let hami = model
                    .and_then(HamiResources::of)
                    .filter(|_| flavor.settings.sharing == Some(Mechanism::HamiFractions));
                let whole_gpus = flavor.settings.mig_layout.is_empty() && hami.is_none();
                let largest = approved
                    .spec
                    .largest_job_gpus
                    .filter(|&n| n > 1 && whole_gpus)
                    .map(|n| (n, " (its largest job)"));
                for (count, what) in [(1, "")].into_iter().chain(largest) {
                    let mut requests = vec![(line.resource.clone(), i64::from(count))];
                    if let (Some(hami), Some(card)) = (&hami, model) {
                        requests.push((hami.memory.clone(), i64::from(card.mem_mib / 2)));
                        requests.extend(hami.cores.clone().map(|c| (c, 50)));
                    }
                    requests.push(("cpu".to_owned(), 8_000));
                    requests.push(("memory".to_owned(), 64 << 30));
                    trials.push(Trial {
                        subject: format!(
                            "{} {count} {} on {}{what}",
                            team.team, line.resource, flavor.name
                        ),
                        pod: PodRequest {
                            namespace: team.namespace.clone(),
                            queue_name: Some(team.local_queue.clone()),
                            requests,
                            node_selector: selector(flavor),
                            tolerations: Vec::new(),
                        },
                        node_labels: flavor.node_labels(),
                        unshared: None,
                    });
                }
            }
        }
        trials
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
                    // Quota requests do not state it yet: Kueue's default.
                    borrow: BorrowWithinCohort::default(),
                    quotas,
                    held: self.held.contains(&t.team),
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

/// The node selector of a pod on `flavor`: its own labels for the keys GPU Feature Discovery
/// writes on its nodes.
fn selector(flavor: &Flavor) -> BTreeMap<String, String> {
    let labels = flavor.object().node_labels;
    flavor
        .node_labels()
        .keys()
        .filter_map(|key| labels.get(key).map(|value| (key.clone(), value.clone())))
        .collect()
}
