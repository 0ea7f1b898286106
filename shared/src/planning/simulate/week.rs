//! The week's moving parts, one minute at a time: completions, arrivals, KEDA scaling,
//! admission with Kueue's preemption, and the minute's accounting.

use std::{cmp::Reverse, collections::BinaryHeap};

use crate::{kueue::Queueing, planning::scenario::QuotaPolicy};

/// Minutes a preempted workload takes to terminate before the preemptor's pods start.
const TERMINATION_MIN: u32 = 1;

use super::{
    TeamStats,
    autoscale::Autoscaler,
    job::{Job, Kind, Part},
    quota::{Quotas, Usage},
};

pub(super) struct Week {
    policy: QuotaPolicy,
    pub quotas: Quotas,
    usage: Usage,
    pub jobs: Vec<Job>,
    /// Pending job ids per team, ordered by (rank desc, arrival asc).
    pending: Vec<Vec<usize>>,
    /// Running job ids per (team, flavor).
    running: Vec<Vec<Vec<usize>>>,
    /// Batch completions: (minute, job, generation).
    ends: BinaryHeap<Reverse<(u32, usize, u32)>>,
    pub stats: Vec<TeamStats>,
    /// Minutes from arrival to first admission, per team (batch jobs).
    pub waits: Vec<Vec<f64>>,
}

impl Week {
    pub fn new(policy: QuotaPolicy, quotas: Quotas, jobs: Vec<Job>, stats: Vec<TeamStats>) -> Self {
        let (teams, flavors) = (stats.len(), quotas.capacity.len());
        Self {
            policy,
            usage: Usage::new(teams, flavors),
            quotas,
            jobs,
            pending: vec![Vec::new(); teams],
            running: vec![vec![Vec::new(); flavors]; teams],
            ends: BinaryHeap::new(),
            stats,
            waits: vec![Vec::new(); teams],
        }
    }

    /// Step 1: batch jobs whose work is done leave.
    pub fn complete(&mut self, minute: u32) {
        while let Some(&Reverse((end, job, generation))) = self.ends.peek() {
            if end > minute {
                break;
            }
            self.ends.pop();
            if self.jobs[job].generation == generation && self.jobs[job].running {
                self.stop(job, minute);
                if let Kind::Batch { remaining_min, .. } = &mut self.jobs[job].kind {
                    *remaining_min = 0;
                }
                if let Some(next) = self.jobs[job].renewed(minute) {
                    self.stats[next.team].jobs_submitted += 1;
                    self.jobs.push(next);
                    self.enqueue(self.jobs.len() - 1);
                }
            }
        }
    }

    /// Step 2: batch jobs arriving by `minute` join their team's queue.
    pub fn arrive(&mut self, minute: u32, arrivals: &[usize], next: &mut usize) {
        while let Some(&job) = arrivals.get(*next) {
            if self.jobs[job].arrival > minute {
                break;
            }
            *next += 1;
            self.stats[self.jobs[job].team].jobs_submitted += 1;
            self.enqueue(job);
        }
    }

    /// Step 3: KEDA adds replicas (to the queue) or removes them (pending first, then the
    /// newest running).
    pub fn scale(&mut self, scaler: &mut Autoscaler, minute: u32) {
        let current = scaler.replicas.len() as u32;
        let decision = scaler.decide(minute);
        if decision.flapped {
            self.stats[scaler.team].flapping_cycles += 1;
        }
        let target = decision.target;
        if target > current {
            for slot in current..target {
                let cold_start_min = scaler.cold_start_min(slot);
                self.jobs.push(Job::replica(
                    scaler.team,
                    scaler.flavor,
                    scaler.gpus_per_replica,
                    scaler.priority,
                    cold_start_min,
                    minute,
                ));
                let id = self.jobs.len() - 1;
                scaler.replicas.push(id);
                self.enqueue(id);
            }
        } else if target < current {
            let jobs = &self.jobs;
            scaler
                .replicas
                .sort_by_key(|&r| (jobs[r].running, Reverse(jobs[r].started), r));
            for r in scaler
                .replicas
                .drain(..(current - target) as usize)
                .collect::<Vec<_>>()
            {
                if self.jobs[r].running {
                    self.stop(r, minute);
                } else if let Some(at) =
                    self.pending[self.jobs[r].team].iter().position(|&p| p == r)
                {
                    self.pending[self.jobs[r].team].remove(at);
                }
            }
        }
    }

    /// Step 4: admission. Queues take their turn in the order Kueue's scheduler sorts the
    /// cycle's heads: a head that fits within its queue's nominal quota before one that would
    /// borrow, then higher priority, then earlier creation.
    pub fn admit(&mut self, minute: u32) {
        let mut order: Vec<usize> = (0..self.pending.len())
            .filter(|&t| !self.pending[t].is_empty())
            .collect();
        order.sort_by_cached_key(|&t| self.head_order(t));
        for team in order {
            self.admit_team(team, minute);
        }
    }

    /// Where `team`'s queue head sorts among the cycle's heads.
    fn head_order(&self, team: usize) -> (bool, Reverse<i32>, u32, usize) {
        let job = &self.jobs[self.pending[team][0]];
        let within_nominal =
            self.usage.team[team][job.flavor] + job.gpus <= self.quotas.nominal[team][job.flavor];
        (!within_nominal, Reverse(job.priority), job.arrival, team)
    }

    /// Step 5: the minute's busy GPU-minutes of batch work, and the peaks of borrowing.
    pub fn account_minute(&mut self, minute: u32) {
        for team in 0..self.stats.len() {
            for f in 0..self.quotas.capacity.len() {
                for &job in &self.running[team][f] {
                    let j = &self.jobs[job];
                    if let (Kind::Batch { busy_share, .. }, true) = (&j.kind, minute >= j.work_from)
                    {
                        self.stats[team].busy_gpu_minutes += f64::from(j.gpus) * busy_share;
                    }
                }
                let held = self.usage.team[team][f];
                let borrowed = held.saturating_sub(self.quotas.nominal[team][f]);
                let over = held.saturating_sub(self.quotas.limit(team, f));
                let s = &mut self.stats[team];
                s.peak_borrowed_gpus = s.peak_borrowed_gpus.max(borrowed);
                s.peak_over_limit_gpus = s.peak_over_limit_gpus.max(over);
            }
        }
    }

    /// Step 6: the inference traffic that ready replicas serve this minute.
    pub fn serve(&mut self, scaler: &mut Autoscaler, minute: u32) {
        let ready = scaler
            .replicas
            .iter()
            .filter(|&&r| {
                let j = &self.jobs[r];
                j.running
                    && matches!(j.kind, Kind::Replica { ready_at: Some(at), .. } if at <= minute)
            })
            .count();
        self.stats[scaler.team].busy_gpu_minutes += scaler.serve(minute, ready);
    }

    /// GPUs no one holds this minute.
    pub fn idle_gpus(&self) -> f64 {
        self.quotas
            .capacity
            .iter()
            .zip(&self.usage.total)
            .map(|(c, u)| f64::from(c - u))
            .sum()
    }

    /// Closes the intervals still open at `minute` (the end of the week), and counts the work
    /// of this week's arrivals that is left.
    pub fn close(&mut self, minute: u32) {
        for job in 0..self.jobs.len() {
            if self.jobs[job].running {
                self.account(job, minute);
            }
            let j = &self.jobs[job];
            if let (Part::Arrival, Kind::Batch { remaining_min, .. }) = (j.part, &j.kind) {
                let done = if j.running {
                    minute.saturating_sub(j.work_from)
                } else {
                    0
                };
                let left = remaining_min.saturating_sub(done);
                self.stats[j.team].unfinished_gpu_minutes += f64::from(j.gpus) * f64::from(left);
            }
        }
    }

    fn enqueue(&mut self, job: usize) {
        let key = |j: &Job| (Reverse(j.priority), j.arrival);
        let k = key(&self.jobs[job]);
        let queue = &self.pending[self.jobs[job].team];
        let at = queue.partition_point(|&other| (key(&self.jobs[other]), other) < (k, job));
        self.pending[self.jobs[job].team].insert(at, job);
    }

    fn admit_team(&mut self, team: usize, minute: u32) {
        let strict = self.policy.queueing == Queueing::StrictFifo;
        // Every head gets its preemption attempt, as Kueue retries each pending workload; a
        // request that could not be made to fit this minute skips the ones no smaller on the
        // same flavor (they have no more candidates: the queue is in priority order).
        let mut failed_from: Vec<u32> = vec![u32::MAX; self.quotas.capacity.len()];
        let mut i = 0;
        while i < self.pending[team].len() {
            let job = self.pending[team][i];
            let (f, gpus) = (self.jobs[job].flavor, self.jobs[job].gpus);
            let mut ok = self.usage.fits(&self.quotas, team, f, gpus);
            let mut delay = 0;
            if !ok && gpus < failed_from[f] {
                ok = self.preempt_for(job, minute);
                if ok {
                    delay = TERMINATION_MIN;
                } else {
                    failed_from[f] = gpus;
                }
            }
            if ok {
                self.pending[team].remove(i);
                self.start(job, minute, delay);
            } else if strict {
                break;
            } else {
                i += 1;
            }
        }
    }

    /// Kueue's preemption for `job`: candidates are the lower-priority workloads of its own
    /// queue (`withinClusterQueue: LowerPriority`) and, with `reclaimWithinCohort: Any`, every
    /// workload of a queue that is borrowing the flavor, whatever its priority (Kueue has no
    /// per-workload protection). Ordered other queues first, then lowest priority, then most
    /// recently admitted; other queues' workloads are used only while the job's queue is under
    /// its nominal quota and so that it then fits within it; last, its own queue's candidates
    /// with borrowing. The fewest victims that make it fit are evicted; `false` (and nothing
    /// evicted) if none do.
    fn preempt_for(&mut self, job: usize, minute: u32) -> bool {
        let (team, f, gpus, priority) = (
            self.jobs[job].team,
            self.jobs[job].flavor,
            self.jobs[job].gpus,
            self.jobs[job].priority,
        );
        let jobs = &self.jobs;
        // Other queues' workloads help only a job that then fits within its nominal quota.
        let reclaim = self.policy.cohort
            && self.policy.reclaim_within_cohort
            && self.usage.team[team][f] + gpus <= self.quotas.nominal[team][f];
        let mut own: Vec<usize> = Vec::new();
        if self.policy.preempt_lower_priority {
            own.extend(
                self.running[team][f]
                    .iter()
                    .copied()
                    .filter(|&j| jobs[j].priority < priority),
            );
        }
        let order = |j: &usize| (jobs[*j].priority, Reverse(jobs[*j].started), *j);
        own.sort_by_key(order);
        let mut targets = None;
        if reclaim {
            let mut others: Vec<usize> = (0..self.usage.team.len())
                .filter(|&t| t != team && self.usage.team[t][f] > self.quotas.nominal[t][f])
                .flat_map(|t| self.running[t][f].iter().copied())
                .collect();
            if !others.is_empty() {
                others.sort_by_key(order);
                others.extend_from_slice(&own);
                targets = self.fewest_victims(job, &others, false);
            }
        }
        if targets.is_none() && !own.is_empty() {
            targets = self.fewest_victims(job, &own, true);
        }
        let Some(targets) = targets else {
            return false;
        };
        for v in targets {
            self.evict(v, minute);
            if self.jobs[job].is_replica() {
                self.stats[team].preemptions_caused_by_scale_up += 1;
            }
        }
        true
    }

    /// The fewest of `candidates` (in order) whose eviction lets `job` fit, borrowing or not;
    /// another queue's workload counts only while that queue is still borrowing. Taken greedily
    /// in order, then trimmed: a victim is given back when the job fits without it.
    fn fewest_victims(&self, job: usize, candidates: &[usize], borrow: bool) -> Option<Vec<usize>> {
        let (team, f, gpus) = (
            self.jobs[job].team,
            self.jobs[job].flavor,
            self.jobs[job].gpus,
        );
        let mut trial = self.usage.clone();
        let fits = |trial: &Usage| {
            trial.fits(&self.quotas, team, f, gpus)
                && (borrow || trial.team[team][f] + gpus <= self.quotas.nominal[team][f])
        };
        let mut targets = Vec::new();
        for &c in candidates {
            if fits(&trial) {
                break;
            }
            let (ct, cg) = (self.jobs[c].team, self.jobs[c].gpus);
            if ct != team && trial.team[ct][f] <= self.quotas.nominal[ct][f] {
                continue;
            }
            trial.change(&self.quotas, ct, f, cg, false);
            targets.push(c);
        }
        if !fits(&trial) {
            return None;
        }
        for i in (0..targets.len().saturating_sub(1)).rev() {
            let (ct, cg) = (self.jobs[targets[i]].team, self.jobs[targets[i]].gpus);
            trial.change(&self.quotas, ct, f, cg, true);
            if fits(&trial) {
                targets.remove(i);
            } else {
                trial.change(&self.quotas, ct, f, cg, false);
            }
        }
        Some(targets)
    }

    /// Starts `job` at `minute`, its work `delay` minutes later (victims terminating).
    fn start(&mut self, job: usize, minute: u32, delay: u32) {
        let j = &mut self.jobs[job];
        let work_from = minute + delay;
        if j.first_admit.is_none() {
            j.first_admit = Some(work_from);
            if !j.is_replica() {
                self.stats[j.team].jobs_admitted += 1;
                self.waits[j.team].push(f64::from(work_from - j.arrival));
            }
        }
        j.running = true;
        j.started = minute;
        j.work_from = work_from;
        j.generation += 1;
        match &mut j.kind {
            Kind::Batch { remaining_min, .. } => {
                self.ends
                    .push(Reverse((work_from + *remaining_min, job, j.generation)));
            }
            Kind::Replica {
                cold_start_min,
                ready_at,
            } => *ready_at = Some(work_from + *cold_start_min),
        }
        let (team, f, gpus) = (j.team, j.flavor, j.gpus);
        self.usage.change(&self.quotas, team, f, gpus, true);
        self.running[team][f].push(job);
    }

    /// Closes the job's running interval: admitted GPU-minutes.
    fn account(&mut self, job: usize, minute: u32) {
        let j = &self.jobs[job];
        let gpu_minutes = f64::from(j.gpus) * f64::from(minute - j.started);
        let s = &mut self.stats[j.team];
        s.admitted_gpu_minutes += gpu_minutes;
        *match j.part {
            Part::Arrival => &mut s.batch_gpu_minutes,
            Part::WarmStart => &mut s.warm_start_gpu_minutes,
            Part::Backlog { .. } => &mut s.backlog_gpu_minutes,
            Part::Replica => &mut s.replica_gpu_minutes,
        } += gpu_minutes;
    }

    fn stop(&mut self, job: usize, minute: u32) {
        self.account(job, minute);
        let j = &mut self.jobs[job];
        j.running = false;
        let (team, f, gpus) = (j.team, j.flavor, j.gpus);
        self.usage.change(&self.quotas, team, f, gpus, false);
        if let Some(at) = self.running[team][f].iter().position(|&r| r == job) {
            self.running[team][f].swap_remove(at);
        }
    }

    /// Eviction: the work since the last checkpoint is lost and the job queues again.
    fn evict(&mut self, job: usize, minute: u32) {
        self.stop(job, minute);
        let j = &mut self.jobs[job];
        j.generation += 1;
        let (team, gpus, ran) = (j.team, j.gpus, minute.saturating_sub(j.work_from));
        if let Kind::Batch {
            remaining_min,
            checkpoint_min,
            ..
        } = &mut j.kind
        {
            // Work up to the last checkpoint is kept; with no checkpoints, nothing is.
            let kept = ran
                .checked_div(*checkpoint_min)
                .map_or(0, |n| n * *checkpoint_min);
            *remaining_min -= kept;
            self.stats[team].rework_gpu_hours += f64::from(gpus) * f64::from(ran - kept) / 60.0;
        }
        self.stats[team].preemptions += 1;
        self.enqueue(job);
    }
}
