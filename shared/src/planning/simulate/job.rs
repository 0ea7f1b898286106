//! The work of the week: batch jobs (training, fine-tuning, batch inference) that arrive at the
//! rate their demand profile implies (Little's law), and inference replicas that an
//! [`Autoscaler`] adds and removes.

use crate::{
    common::rng::Rng,
    planning::{
        isolation::IsolationPlan,
        scenario::{Scenario, Workload, WorkloadKind},
    },
};

use super::{MINUTES_PER_WEEK, SLICES_PER_GPU, autoscale::Autoscaler, slices};

/// What one job of `gpus` GPUs holds when `per_card` of its class's jobs share a card.
fn job_slices(gpus: u32, per_card: u32) -> u64 {
    if per_card > 1 {
        SLICES_PER_GPU / u64::from(per_card)
    } else {
        slices(gpus)
    }
}

/// What a job is, with what only that kind has.
#[derive(Debug, Clone)]
pub(super) enum Kind {
    Batch {
        /// Minutes of work left.
        remaining_min: u32,
        /// Minutes between checkpoints; 0: none.
        checkpoint_min: u32,
        /// Minutes an evicted job needs, once placed again, before it works again.
        restart_min: u32,
        /// Evicted since it last worked: its next placement starts with a restart.
        restarting: bool,
        /// GPUs' worth of work it keeps busy while it works: its GPUs × their busy share,
        /// whether it has its cards to itself or shares one.
        busy_gpus: f64,
    },
    /// Runs until scaled down; serves once its cold start is over.
    Replica {
        cold_start_min: u32,
        /// Its cold start from object storage: longer than `cold_start_min` when a warm
        /// node-local cache holds its weights.
        storage_cold_start_min: u32,
        /// When it can serve; `None` until admitted.
        ready_at: Option<u32>,
    },
}

#[derive(Debug, Clone)]
pub(super) struct Job {
    pub team: usize,
    /// Its class's flavor until admitted, then the flavor of its model it was admitted on.
    pub flavor: usize,
    /// What it holds of its flavor's cards, in slices ([`super::SLICES_PER_GPU`] a card): its
    /// GPUs, or its share of one where its class's jobs share cards.
    pub slices: u64,
    pub kind: Kind,
    /// The class's priority, as its WorkloadPriorityClass in the export: higher goes first
    /// and may preempt lower in the same queue.
    pub priority: i32,
    pub arrival: u32,
    pub first_admit: Option<u32>,
    pub started: u32,
    /// The number of its latest admission (later admissions have higher numbers).
    pub admission: u64,
    /// While admitted: its place among its queue's admitted workloads of its priority on its
    /// flavor ([`super::running::Running`]).
    pub place: usize,
    /// When its work begins: after a preemption, once the victims have terminated (it holds
    /// their GPUs meanwhile, as they would).
    pub work_from: u32,
    /// Admitted: holds its quota.
    pub running: bool,
    /// Its pods are on nodes (admitted work may wait for them when quota exceeds the fleet).
    pub placed: bool,
    /// Bumped on every start and eviction, so stale completion events are ignored; a job that
    /// takes a finished one's place carries its count on.
    pub generation: u32,
    /// The order jobs were made in (the week's draws first): ties between jobs go to the
    /// earlier.
    pub seq: u64,
    pub part: Part,
}

/// Which part of the week's admitted GPU-minutes a job counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// Arrived this week, from a demand profile.
    Arrival,
    /// Already running when the week starts.
    WarmStart,
    /// Backlog work: when it completes, the next job of this length takes its place.
    Backlog {
        renew_min: u32,
    },
    Replica,
}

impl Job {
    pub fn is_replica(&self) -> bool {
        matches!(self.kind, Kind::Replica { .. })
    }

    /// A batch job someone submitted (this week, or running at its start): its waits, counts
    /// and evictions are the week's job figures. Backlog filler and replicas are not.
    pub fn is_submitted(&self) -> bool {
        matches!(self.part, Part::Arrival | Part::WarmStart)
    }

    pub fn replica(
        team: usize,
        flavor: usize,
        slices: u64,
        priority: i32,
        (cold_start_min, storage_cold_start_min): (u32, u32),
        minute: u32,
    ) -> Self {
        Job::queued(
            team,
            flavor,
            slices,
            Kind::Replica {
                cold_start_min,
                storage_cold_start_min,
                ready_at: None,
            },
            priority,
            Part::Replica,
            minute,
        )
    }

    /// A job of `kind` that joins its queue at `minute`, not yet admitted.
    pub fn queued(
        team: usize,
        flavor: usize,
        slices: u64,
        kind: Kind,
        priority: i32,
        part: Part,
        minute: u32,
    ) -> Self {
        Job {
            team,
            flavor,
            slices,
            kind,
            priority,
            arrival: minute,
            first_admit: None,
            started: minute,
            admission: 0,
            place: 0,
            work_from: minute,
            running: false,
            placed: false,
            generation: 0,
            seq: 0,
            part,
        }
    }

    /// The next backlog job after this one, queued at `minute`.
    pub fn renewed(&self, minute: u32) -> Option<Self> {
        let Part::Backlog { renew_min: length } = self.part else {
            return None;
        };
        let Kind::Batch {
            checkpoint_min,
            restart_min,
            busy_gpus,
            ..
        } = self.kind
        else {
            return None;
        };
        Some(Job::queued(
            self.team,
            self.flavor,
            self.slices,
            Kind::Batch {
                remaining_min: length,
                checkpoint_min,
                restart_min,
                restarting: false,
                busy_gpus,
            },
            self.priority,
            self.part,
            minute,
        ))
    }
}

/// What the scenario brings to the week before it starts.
pub(super) struct Plan {
    /// One job per batch class, as its backlog's jobs are when they arrive ([`Plan::job`] gives
    /// each job its arrival, length and part).
    pub classes: Vec<Job>,
    /// Every batch job of the week, by the minute it arrives (each minute's in the order they
    /// were drawn).
    pub arrivals: Vec<Vec<Arrival>>,
    /// How many were drawn.
    pub drawn: u32,
    pub autoscalers: Vec<Autoscaler>,
    /// Per team: batch GPU-minutes of the profiles, inference traffic GPU-minutes, each in the
    /// cards' worth its jobs hold (a class whose jobs share cards wants a share of one each).
    pub wanted: Vec<(f64, f64)>,
}

/// A batch job before it arrives, in 12 bytes: the week's jobs are drawn before it starts,
/// and made whole only as they arrive (a finished job's place is taken by the next), so the
/// week holds what is queued or running at once, not every job of the week.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    /// Its place in the order the jobs were drawn: ties in the queues go to the earlier.
    pub seq: u32,
    /// Its batch class, in [`Plan::classes`].
    pub class: u16,
    /// Minutes of work.
    pub length: u32,
    pub start: Start,
}

/// How a batch job joins the week.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// Already running when the week starts.
    Warm,
    /// Backlog, renewed as it completes.
    Backlog,
    /// Arrives from its demand profile.
    Arrival,
}

impl Plan {
    /// No jobs yet, for `teams` teams.
    fn empty(teams: usize) -> Self {
        Plan {
            classes: Vec::new(),
            arrivals: vec![Vec::new(); MINUTES_PER_WEEK as usize],
            autoscalers: Vec::new(),
            wanted: vec![(0.0, 0.0); teams],
            drawn: 0,
        }
    }

    /// The job `arrival` stands for, arriving at `minute`.
    pub fn job(&self, arrival: &Arrival, minute: u32) -> Job {
        let mut job = self.classes[usize::from(arrival.class)].clone();
        job.arrival = minute;
        job.seq = u64::from(arrival.seq);
        if let Kind::Batch { remaining_min, .. } = &mut job.kind {
            *remaining_min = arrival.length;
        }
        match arrival.start {
            Start::Warm => job.part = Part::WarmStart,
            Start::Backlog => {}
            Start::Arrival => job.part = Part::Arrival,
        }
        job
    }
}

/// Every batch job of the week (the work already running at its start, then arrivals spread
/// over each hour, lengths ±50% around the mean), and one autoscaler per inference class; each
/// job and replica holds its share of a card as `isolation` packs its class.
pub(super) fn plan(scenario: &Scenario, isolation: &IsolationPlan) -> Plan {
    let flavor_of = |name: &str| {
        scenario
            .fleet
            .iter()
            .position(|a| a.flavor == name)
            .unwrap_or(0)
    };
    let mut rng = Rng::new(scenario.seed);
    let mut plan = Plan::empty(scenario.teams.len());
    let classes = scenario
        .teams
        .iter()
        .enumerate()
        .flat_map(|(team, t)| t.workloads.iter().map(move |w| (team, w)));
    for (i, (team, w)) in classes.enumerate() {
        // The plan lists the classes in the scenario's order.
        let per_card = isolation
            .classes
            .get(i)
            .map_or(1, |c| c.jobs_per_card.max(1));
        let slices = job_slices(w.gpus_per_job, per_card);
        let hourly = w.demand.hourly();
        let gpu_minutes = hourly.iter().sum::<f64>() * 60.0 / f64::from(per_card);
        if w.kind == WorkloadKind::Inference {
            plan.wanted[team].1 += gpu_minutes;
        } else {
            plan.wanted[team].0 += gpu_minutes;
        }
        let flavor = flavor_of(&w.flavor);
        if let (WorkloadKind::Inference, Some(inference)) = (w.kind, &w.inference) {
            let scaler = Autoscaler::new(team, flavor, w, inference, hourly, slices);
            plan.autoscalers.push(scaler);
            continue;
        }
        // At most MAX_WORKLOADS classes, MAX_JOBS jobs, and minutes of a week: all fit.
        let class = plan.classes.len() as u16;
        plan.classes
            .push(batch_class(team, flavor, w, w.gpus_per_job, slices));
        let (arrivals, drawn) = (&mut plan.arrivals, &mut plan.drawn);
        let mut draw = |minute: u32, length: u32, start: Start| {
            arrivals[minute as usize].push(Arrival {
                seq: *drawn,
                class,
                length,
                start,
            });
            *drawn += 1;
        };
        // Warm start: the work already running at the start of the week.
        let initial =
            (hourly.first().copied().unwrap_or(0.0) / f64::from(w.gpus_per_job)).floor() as u32;
        for _ in 0..initial {
            draw(0, 1 + rng.below(w.job_minutes as usize) as u32, Start::Warm);
        }
        // The backlog: enough queued jobs to hold its GPUs, each renewed when it ends.
        let backlog_jobs = (w.backlog_gpus / f64::from(w.gpus_per_job)).ceil() as u32;
        for _ in 0..backlog_jobs {
            draw(
                0,
                1 + rng.below(w.job_minutes as usize) as u32,
                Start::Backlog,
            );
        }
        let job_gpu_hours = f64::from(w.gpus_per_job) * f64::from(w.job_minutes) / 60.0;
        let mut carry = 0.0;
        for (h, gpus) in hourly.iter().enumerate() {
            carry += gpus / job_gpu_hours;
            while carry >= 1.0 {
                carry -= 1.0;
                let arrival = h as u32 * 60 + rng.below(60) as u32;
                let length = (f64::from(w.job_minutes) * (0.5 + rng.below(1001) as f64 / 1000.0))
                    .round()
                    .max(1.0) as u32;
                draw(arrival, length, Start::Arrival);
            }
        }
    }
    plan
}

/// The job a batch class's jobs of `gpus` GPUs each are made from (as its backlog's jobs are).
fn batch_class(team: usize, flavor: usize, w: &Workload, gpus: u32, slices: u64) -> Job {
    Job {
        team,
        flavor,
        slices,
        kind: Kind::Batch {
            remaining_min: w.job_minutes,
            checkpoint_min: w.checkpoint_minutes,
            restart_min: w.restart_minutes,
            restarting: false,
            busy_gpus: f64::from(gpus) * f64::from(w.busy_pct) / 100.0,
        },
        priority: w.priority,
        arrival: 0,
        first_admit: None,
        started: 0,
        admission: 0,
        place: 0,
        work_from: 0,
        running: false,
        placed: false,
        generation: 0,
        seq: 0,
        part: Part::Backlog {
            renew_min: w.job_minutes,
        },
    }
}

/// One recorded batch job to replay: which of the scenario's classes it belongs to (in the
/// order the scenario lists them, team by team), its own GPUs (whole cards, as recorded), when
/// it joins the week and how long it works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    pub class: usize,
    pub gpus: u32,
    pub minute: u32,
    pub length_min: u32,
    /// Already running when the week starts (admitted before it).
    pub running: bool,
}

/// The most distinct (class, GPUs) pairs one replay holds (an arrival names its template in 16
/// bits).
pub const MAX_REPLAY_TEMPLATES: usize = u16::MAX as usize;

/// The week of `recorded` jobs, in their order (earlier first on ties), and nothing drawn:
/// no backlog, no inference, each job on whole cards of its class's flavor. None when a job
/// names no batch class of `scenario`, or more than [`MAX_REPLAY_TEMPLATES`] (class, GPUs)
/// pairs are named.
pub(super) fn replay_plan(scenario: &Scenario, recorded: &[Recorded]) -> Option<Plan> {
    let workloads: Vec<(usize, &Workload)> = scenario
        .teams
        .iter()
        .enumerate()
        .flat_map(|(team, t)| t.workloads.iter().map(move |w| (team, w)))
        .collect();
    let mut plan = Plan::empty(scenario.teams.len());
    // Each class's sizes seen so far, by GPUs, with their template.
    let mut templates: Vec<Vec<(u32, u16)>> = vec![Vec::new(); workloads.len()];
    for r in recorded {
        let &(team, w) = workloads.get(r.class)?;
        if w.kind == WorkloadKind::Inference || r.minute >= MINUTES_PER_WEEK || r.gpus == 0 {
            return None;
        }
        let sizes = &mut templates[r.class];
        let class = match sizes.binary_search_by_key(&r.gpus, |&(gpus, _)| gpus) {
            Ok(at) => sizes[at].1,
            Err(at) => {
                let next = u16::try_from(plan.classes.len()).ok()?;
                let flavor = scenario.fleet.iter().position(|a| a.flavor == w.flavor)?;
                plan.classes
                    .push(batch_class(team, flavor, w, r.gpus, slices(r.gpus)));
                sizes.insert(at, (r.gpus, next));
                next
            }
        };
        let in_week = r.length_min.min(MINUTES_PER_WEEK - r.minute);
        plan.wanted[team].0 += f64::from(r.gpus) * f64::from(in_week);
        plan.arrivals[r.minute as usize].push(Arrival {
            seq: plan.drawn,
            class,
            length: r.length_min.max(1),
            start: if r.running {
                Start::Warm
            } else {
                Start::Arrival
            },
        });
        plan.drawn = plan.drawn.checked_add(1)?;
    }
    Some(plan)
}

#[cfg(test)]
mod tests {
    use super::Arrival;

    /// What a job costs the week before it arrives (20,000,000 jobs: 240 MB).
    #[test]
    fn an_arrival_takes_twelve_bytes() {
        assert_eq!(std::mem::size_of::<Arrival>(), 12);
    }
}
