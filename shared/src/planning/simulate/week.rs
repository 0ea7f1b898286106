//! The week's moving parts, one minute at a time: completions, arrivals, KEDA scaling,
//! Kueue's scheduling cycles with its preemption, and the traffic replicas serve.

use std::cmp::Reverse;

use crate::{
    kueue::{
        Queueing, Reclaim, WithinQueue,
        quota::{Quotas, Trial, Usage},
    },
    planning::scenario::QuotaPolicy,
};

/// Minutes a preempted workload takes to terminate before the preemptor's pods start.
const TERMINATION_MIN: u32 = 1;

use super::{
    Event, Happened, Held, MINUTES_PER_WEEK, SLICES_PER_GPU, TeamStats, Waits,
    autoscale::{Autoscaler, Ready},
    gpus,
    job::{Job, Kind, Part, Plan},
    pending::{Pending, Queued},
    running::{Admitted, Running},
};

/// One of Kueue's preemption attempts for a head: whom of the borrowing queues it may evict
/// (`None`: no one; `Some(bound)`: those below `bound`, or any with `Some(None)`), and whether
/// the head may borrow once they are gone.
struct Attempt {
    others: Option<Option<i32>>,
    borrow: bool,
}

/// A head's place in a scheduling cycle: (borrows, priority, creation, queue).
type HeadOrder = (bool, Reverse<i32>, u32, usize);

/// One minute's admission state per queue.
#[derive(Default)]
struct Cycle {
    /// How far into its queue the heads have gone this minute.
    cursor: Vec<usize>,
    /// No more heads this minute.
    done: Vec<bool>,
    /// Per queue and flavor (`[team * flavors + flavor]`): the fewest slices a workload found
    /// inadmissible this minute asked for.
    failed_from: Vec<u64>,
    /// The queues with heads left this minute (a done queue has none).
    active: Vec<usize>,
    /// This cycle's heads, in the order they are tried.
    heads: Vec<(HeadOrder, usize)>,
}

impl Cycle {
    /// A new minute's first cycle over `teams` queues of which `done` have no heads.
    fn start(&mut self, teams: usize, flavors: usize, done: impl Fn(usize) -> bool) {
        self.cursor.clear();
        self.cursor.resize(teams, 0);
        self.done.clear();
        self.done.extend((0..teams).map(done));
        self.failed_from.clear();
        self.failed_from.resize(teams * flavors, u64::MAX);
        self.active.clear();
        self.active.extend((0..teams).filter(|&t| !self.done[t]));
    }

    /// `team`'s head could not be admitted: the next workload of its queue heads it
    /// (BestEffortFIFO), or the queue waits for the next minute (StrictFIFO, or `exhausted`).
    fn pass(&mut self, team: usize, strict: bool, exhausted: bool) {
        if strict || exhausted {
            self.done[team] = true;
        } else {
            self.cursor[team] += 1;
        }
    }
}

/// Where a job's rework counts: its team's, or its backlog's.
fn rework(s: &mut TeamStats, submitted: bool) -> &mut f64 {
    if submitted {
        &mut s.rework_gpu_hours
    } else {
        &mut s.backlog_rework_gpu_hours
    }
}

pub(super) struct Week {
    policy: QuotaPolicy,
    pub quotas: Quotas,
    usage: Usage,
    /// The week's batch jobs, not yet arrived.
    plan: Plan,
    /// The jobs queued or running (and finished ones, until another takes their place), by id.
    pub jobs: Vec<Job>,
    /// Ids of finished jobs, whose places new jobs take.
    free: Vec<usize>,
    /// The next new job's `seq`.
    next_seq: u64,
    /// Pending jobs per team, in their queue's order.
    pending: Vec<Pending>,
    /// Running jobs per team and flavor (`[team * flavors + flavor]`), in Kueue's order of
    /// preemption victims.
    running: Vec<Running>,
    /// Admissions so far: each admission's number orders the victims.
    admissions: u64,
    /// Per queue and model (`[team * flavors + model]`, a model by its first flavor): the
    /// fewest slices any of its workloads asks for.
    smallest: Vec<u64>,
    /// Replicas started, placed or stopped so far: what a scaler's count of ready replicas
    /// was taken at.
    replica_changes: u64,
    /// Per team: the minute its pending preemptor's victims have terminated; until then the
    /// queue admits nothing else.
    blocked_until: Vec<u32>,
    /// Slices of each flavor's nodes that admitted work runs on.
    placed: Vec<u64>,
    /// Per flavor: admitted jobs whose pods wait for nodes (Kueue admits on quota, so when
    /// nominal quotas add up to more than a flavor's cards, admitted pods stay Pending).
    unplaced: Vec<Vec<usize>>,
    /// Batch completions due in each minute of the week: (job, generation); a job evicted or
    /// restarted since has another generation, and its old entry is passed over.
    ends: Vec<Vec<(usize, u32)>>,
    pub stats: Vec<TeamStats>,
    /// Per team: what its jobs held, in slice-minutes.
    pub held: Vec<Held>,
    /// Slice-minutes no admitted work was on.
    pub idle: u64,
    /// Minutes from arrival to first admission, per team (batch jobs).
    pub waits: Vec<Waits>,
    /// A preemption's candidates, its own queue's and the others', in lists kept between
    /// preemptions: a week tries millions.
    candidates: (Vec<Admitted>, Vec<Admitted>),
    /// The scheduling cycles' lists, kept from minute to minute.
    cycle: Cycle,
    /// Every admission, eviction and finish, when asked for (a replay set beside Kueue's).
    pub trace: Option<Vec<Event>>,
}

impl Week {
    pub fn new(policy: QuotaPolicy, quotas: Quotas, plan: Plan, stats: Vec<TeamStats>) -> Self {
        let (teams, flavors) = (stats.len(), quotas.capacity.len());
        Self {
            policy,
            usage: Usage::new(teams, flavors),
            quotas,
            next_seq: u64::from(plan.drawn),
            plan,
            jobs: Vec::new(),
            free: Vec::new(),
            pending: vec![Pending::default(); teams],
            running: vec![Running::default(); teams * flavors],
            admissions: 0,
            replica_changes: 0,
            smallest: vec![u64::MAX; teams * flavors],
            blocked_until: vec![0; teams],
            placed: vec![0; flavors],
            unplaced: vec![Vec::new(); flavors],
            ends: vec![Vec::new(); MINUTES_PER_WEEK as usize],
            stats,
            held: vec![Held::default(); teams],
            idle: 0,
            waits: vec![Waits::default(); teams],
            candidates: (Vec::new(), Vec::new()),
            cycle: Cycle::default(),
            trace: None,
        }
    }

    /// Adds `job`'s step to the trace, when one is kept.
    fn record(&mut self, job: usize, minute: u32, happened: Happened) {
        if let Some(trace) = &mut self.trace {
            trace.push(Event {
                job: self.jobs[job].seq,
                minute,
                happened,
            });
        }
    }

    /// Step 1: batch jobs whose work is done leave.
    pub fn complete(&mut self, minute: u32) {
        for (job, generation) in std::mem::take(&mut self.ends[minute as usize]) {
            if self.jobs[job].generation == generation && self.jobs[job].running {
                self.stop(job, minute);
                self.record(job, minute, Happened::Finished);
                if let Kind::Batch { remaining_min, .. } = &mut self.jobs[job].kind {
                    *remaining_min = 0;
                }
                if let Some(next) = self.jobs[job].renewed(minute) {
                    let seq = self.next_seq();
                    let id = self.make(Job { seq, ..next });
                    self.enqueue(id);
                }
                self.free.push(job);
            }
        }
    }

    /// A place for `job` among the jobs: a finished one's (the generation counting on, so that
    /// the finished job's stale completion events stay stale) or a new one.
    fn make(&mut self, mut job: Job) -> usize {
        match self.free.pop() {
            Some(id) => {
                job.generation = self.jobs[id].generation + 1;
                self.jobs[id] = job;
                id
            }
            None => {
                self.jobs.push(job);
                self.jobs.len() - 1
            }
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq - 1
    }

    /// Step 2: batch jobs arriving at `minute` join their team's queue.
    pub fn arrive(&mut self, minute: u32) {
        let arrivals = std::mem::take(&mut self.plan.arrivals[minute as usize]);
        for arrival in &arrivals {
            let job = self.plan.job(arrival, minute);
            if job.is_submitted() {
                self.stats[job.team].jobs_submitted += 1;
            }
            let id = self.make(job);
            self.enqueue(id);
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
                let replica = Job {
                    seq: self.next_seq(),
                    ..Job::replica(
                        scaler.team,
                        scaler.flavor,
                        scaler.slices_per_replica,
                        scaler.priority,
                        cold_start_min,
                        minute,
                    )
                };
                let id = self.make(replica);
                scaler.replicas.push(id);
                self.enqueue(id);
            }
        } else if target < current {
            let jobs = &self.jobs;
            scaler.replicas.sort_unstable_by_key(|&r| {
                (jobs[r].running, Reverse(jobs[r].started), jobs[r].seq)
            });
            for r in scaler
                .replicas
                .drain(..(current - target) as usize)
                .collect::<Vec<_>>()
            {
                if self.jobs[r].running {
                    self.stop(r, minute);
                } else if let Some(at) = self.pending[self.jobs[r].team].position(r) {
                    self.pending[self.jobs[r].team].remove(at);
                }
                self.free.push(r);
            }
        }
    }

    /// Step 4: admission, as Kueue's scheduler runs its cycles within the minute
    /// (pkg/scheduler/scheduler.go, `schedule`): each cycle takes one head per ClusterQueue,
    /// sorts the heads as [`Week::head_order`] says, and admits each that fits or can make room
    /// by preemption; cycles repeat until none has a head left. A head that can do neither is
    /// inadmissible for the rest of the minute: under BestEffortFIFO the queue's next workload
    /// heads it in the next cycle, under StrictFIFO the queue waits for the next minute. A
    /// preemptor stays its queue's head until its victims have terminated (Kueue requeues it
    /// with `RequeueReasonPendingPreemption`, sticky at the head: pkg/cache/queue/
    /// cluster_queue.go, `requeueIfNotPresent`), so its queue admits nothing else meanwhile.
    pub fn admit(&mut self, minute: u32) {
        let waiting = |t: usize| !self.pending[t].is_empty() && self.blocked_until[t] <= minute;
        if !(0..self.pending.len()).any(waiting) {
            return;
        }
        let mut cycle = std::mem::take(&mut self.cycle);
        let flavors = self.quotas.capacity.len();
        cycle.start(self.pending.len(), flavors, |t| !waiting(t));
        self.cycles(&mut cycle, minute);
        self.cycle = cycle;
    }

    /// Whether `team`'s queue is StrictFIFO.
    fn strict(&self, _team: usize) -> bool {
        self.policy.queueing == Queueing::StrictFifo
    }

    /// The minute's scheduling cycles, from `cycle`'s start until no queue has a head left.
    fn cycles(&mut self, cycle: &mut Cycle, minute: u32) {
        let flavors = self.quotas.capacity.len();
        let mut heads = std::mem::take(&mut cycle.heads);
        loop {
            heads.clear();
            for i in 0..cycle.active.len() {
                let t = cycle.active[i];
                if let Some(head) = self.head(t, cycle, self.strict(t), flavors) {
                    heads.push((self.head_order(head), t));
                }
            }
            if heads.is_empty() {
                cycle.heads = heads;
                return;
            }
            heads.sort_unstable();
            for &(_, team) in &heads {
                let at = cycle.cursor[team];
                let head = *self.pending[team].get(at).expect("the cycle's head");
                // Its model's flavors share one slot: the first of them.
                let (slices, model) = (head.slices, head.model);
                if let Some(f) = self.fitting_flavor(&head) {
                    self.pending[team].remove(at);
                    self.start(head.job, f, minute, 0);
                } else if let Some(f) = (slices < cycle.failed_from[team * flavors + model])
                    .then(|| self.preempting_flavor(&head, minute))
                    .flatten()
                {
                    self.pending[team].remove(at);
                    self.start(head.job, f, minute, TERMINATION_MIN);
                    self.blocked_until[team] = minute + TERMINATION_MIN;
                    cycle.done[team] = true;
                } else {
                    // No room and no victims: none of its queue's later workloads (no higher
                    // priority) asking as much of this model can be admitted this minute.
                    let failed = &mut cycle.failed_from[team * flavors + model];
                    *failed = (*failed).min(slices);
                    // Nothing of its queue is smaller than what failed, on any model: it is
                    // done for the minute.
                    let slots = team * flavors..(team + 1) * flavors;
                    let exhausted = cycle.failed_from[slots.clone()]
                        .iter()
                        .zip(&self.smallest[slots])
                        .all(|(failed, smallest)| failed <= smallest);
                    cycle.pass(team, self.strict(team), exhausted);
                }
            }
            let done = &cycle.done;
            cycle.active.retain(|&t| !done[t]);
        }
    }

    /// `team`'s head for this cycle: the next workload of its queue, past those of the minute
    /// already known inadmissible (they ask as much of a flavor as one that was). `None` once
    /// the queue has none left this minute.
    fn head(
        &self,
        team: usize,
        cycle: &mut Cycle,
        strict: bool,
        flavors: usize,
    ) -> Option<&Queued> {
        if cycle.done[team] {
            return None;
        }
        // One walk over the queue's rest (a long queue's known-failing entries are passed
        // every minute it stays blocked): StrictFIFO looks at its first only. A plain loop:
        // a predicate given to `position` stays a call per entry in the size-optimised wasm.
        let queue = self.pending[team].rest(cycle.cursor[team]);
        let failed = &cycle.failed_from[team * flavors..(team + 1) * flavors];
        let walked = if strict {
            queue.len().min(1)
        } else {
            queue.len()
        };
        let mut at = None;
        for (i, q) in queue[..walked].iter().enumerate() {
            if q.slices < failed[q.model] {
                at = Some(i);
                break;
            }
        }
        match at {
            Some(at) => {
                cycle.cursor[team] += at;
                Some(&queue[at])
            }
            None => {
                if !strict {
                    cycle.cursor[team] += queue.len();
                }
                cycle.done[team] = true;
                None
            }
        }
    }

    /// Where a head sorts among the cycle's heads (Kueue's `makeClassicalIterator`): one that
    /// fits within its queue's nominal quota before one that would borrow, then higher
    /// priority, then earlier creation.
    fn head_order(&self, head: &Queued) -> HeadOrder {
        let within_nominal = self.quotas.alike[head.model]
            .iter()
            .any(|&f| self.within_nominal(head.team, f, head.slices));
        (
            !within_nominal,
            Reverse(head.priority),
            head.arrival,
            head.team,
        )
    }

    fn within_nominal(&self, team: usize, f: usize, slices: u64) -> bool {
        self.usage.held(team, f) + slices <= self.quotas.nominal(team, f)
    }

    /// The flavor Kueue's flavor assigner gives `head` without preemption: its model's flavors
    /// in order, the first where it fits, within nominal quota or by borrowing
    /// (`flavorFungibility` defaults: `whenCanBorrow: MayStopSearch`, so a flavor that fits
    /// by borrowing ends the search; cluster_queue.md, "FlavorFungibility").
    fn fitting_flavor(&self, head: &Queued) -> Option<usize> {
        self.quotas.alike[head.model]
            .iter()
            .copied()
            .find(|&f| self.usage.fits(&self.quotas, head.team, f, head.slices))
    }

    /// Preemption on the flavor Kueue would choose for it (`whenCanPreempt: TryNextFlavor`:
    /// every flavor of the model is considered, then one that needs preemption chosen, one
    /// where the job lands within nominal quota preferred): the first where victims make
    /// room, evicted.
    fn preempting_flavor(&mut self, head: &Queued, minute: u32) -> Option<usize> {
        for within in [true, false] {
            for i in 0..self.quotas.alike[head.model].len() {
                let f = self.quotas.alike[head.model][i];
                // A failed attempt evicts nothing, so the others see the same usage.
                if self.within_nominal(head.team, f, head.slices) == within
                    && self.preempt_for(head, f, minute)
                {
                    return Some(f);
                }
            }
        }
        None
    }

    /// Step 6: the inference traffic that ready replicas serve this minute.
    pub fn serve(&mut self, scaler: &mut Autoscaler, minute: u32) {
        let ready = match scaler.ready {
            // No replica started, was placed or stopped since, and none has become ready.
            Ready {
                changes,
                count,
                until,
            } if changes == self.replica_changes && minute < until => count,
            _ => {
                let (mut count, mut until) = (0, u32::MAX);
                for &r in &scaler.replicas {
                    let j = &self.jobs[r];
                    if let (
                        true,
                        Kind::Replica {
                            ready_at: Some(at), ..
                        },
                    ) = (j.running, &j.kind)
                    {
                        if *at <= minute {
                            count += 1;
                        } else {
                            until = until.min(*at);
                        }
                    }
                }
                scaler.ready = Ready {
                    changes: self.replica_changes,
                    count,
                    until,
                };
                count
            }
        };
        self.stats[scaler.team].busy_gpu_minutes += scaler.serve(minute, ready);
    }

    /// Counts this minute's slices that no admitted work is on.
    pub fn count_idle(&mut self) {
        let capacity = &self.quotas.capacity;
        let idle: u64 = capacity.iter().zip(&self.placed).map(|(c, p)| c - p).sum();
        self.idle += idle;
    }

    /// Closes the intervals still open at `minute` (the end of the week), and counts the work
    /// of this week's arrivals that is left.
    pub fn close(&mut self, minute: u32) {
        // Finished jobs still in their places add nothing: not running, no work left.
        for job in 0..self.jobs.len() {
            if self.jobs[job].running {
                self.account(job, minute);
            }
            let j = &self.jobs[job];
            // A restart that runs past the week's end counts only up to it.
            if j.running && j.placed && j.work_from > minute {
                let beyond = gpus(j.slices) * f64::from(j.work_from - minute) / 60.0;
                *rework(&mut self.stats[j.team], j.is_submitted()) -= beyond;
            }
            if let (Part::Arrival, Kind::Batch { remaining_min, .. }) = (j.part, &j.kind) {
                let done = if j.running && j.placed {
                    minute.saturating_sub(j.work_from)
                } else {
                    0
                };
                let left = remaining_min.saturating_sub(done);
                self.held[j.team].unfinished += j.slices * u64::from(left);
            }
        }
    }

    /// Where a team's figure for a flavor (or a model) is kept in the per-team-and-flavor lists.
    fn slot(&self, team: usize, f: usize) -> usize {
        team * self.quotas.capacity.len() + f
    }

    fn enqueue(&mut self, job: usize) {
        let j = &self.jobs[job];
        let model = self.quotas.model(j.flavor);
        let slot = self.slot(j.team, model);
        self.smallest[slot] = self.smallest[slot].min(j.slices);
        let queued = Queued {
            team: j.team,
            priority: j.priority,
            arrival: j.arrival,
            seq: j.seq,
            slices: j.slices,
            model,
            job,
        };
        self.pending[j.team].insert(queued);
    }

    /// Kueue's preemption for `head` (`classicalPreemptions` and its candidate iterator, pkg/
    /// scheduler/preemption/preemption.go and classical/, v0.17): candidates are the workloads
    /// of its own queue that `withinClusterQueue` lets it evict and those of the queues
    /// borrowing the flavor that `reclaimWithinCohort` lets it evict (`Any`: whatever their
    /// priority, Kueue having no per-workload protection; `LowerPriority`: those below its own),
    /// as `SatisfiesPreemptionPolicy` (pkg/scheduler/preemption/common/preemption_policy.go)
    /// decides; other queues' first, then lowest priority, then most recently admitted. Kueue
    /// makes at most two attempts, one letting the job borrow and one not, in the order
    /// [`Week::attempts`] gives; in each the fewest victims that make it fit are evicted.
    /// `false` (and nothing evicted) if no attempt makes it fit.
    fn preempt_for(&mut self, head: &Queued, f: usize, minute: u32) -> bool {
        let (mut own, mut others) = std::mem::take(&mut self.candidates);
        let (team, slices, priority) = (head.team, head.slices, head.priority);
        // Freeing as many slices of its own queue's work as the job asks for always makes room
        // (it takes their place), so no more of them are ever needed.
        own.clear();
        let within = self.policy.within_cluster_queue;
        if within != WithinQueue::Never {
            // `LowerOrNewerEqualPriority`: of its own priority, those created after it.
            let jobs = &self.jobs;
            let newer = |j: usize| (jobs[j].arrival, jobs[j].seq) > (head.arrival, head.seq);
            let equal = (within == WithinQueue::LowerOrNewerEqualPriority)
                .then_some(&newer as &dyn Fn(usize) -> bool);
            self.running[self.slot(team, f)].first(Some(priority), equal, slices, &mut own);
        }
        let own_slices: u64 = own.iter().map(|&(_, _, j)| self.jobs[j].slices).sum();
        let mut targets = None;
        for attempt in self.attempts(head, f, own_slices).into_iter().flatten() {
            // A borrowing queue's workloads are candidates while it is still borrowing: its
            // first ones in victim order up to what it borrows, the last taking it to nominal.
            // No more than the job's own size of them is ever evicted: those already free that
            // much of the lending pool, which is all the job can need of it (the pool is within
            // its cap, and the job adds at most its size), so any later one of that queue is
            // given back when the victims are trimmed, and no earlier decision depended on it.
            others.clear();
            if let Some(of) = attempt.others {
                // (Its own queue's are its own candidates, even while it borrows.)
                for &t in self.usage.borrowing[f].iter().filter(|&&t| t != team) {
                    let borrowed = self.usage.held(t, f) - self.quotas.nominal(t, f);
                    let running = &self.running[self.slot(t, f)];
                    running.first(of, None, borrowed.min(slices), &mut others);
                }
                others.sort_unstable_by_key(|&(p, a, _)| (p, Reverse(a)));
            }
            if others.is_empty() && (!attempt.borrow || own.is_empty()) {
                // Without other queues' candidates Kueue makes only the borrowing attempt.
                continue;
            }
            let order = others.iter().chain(&own).map(|&(_, _, j)| j);
            targets = self.fewest_victims(head, f, order, attempt.borrow);
            if targets.is_some() {
                break;
            }
        }
        self.candidates = (own, others);
        let Some(targets) = targets else {
            return false;
        };
        for v in targets {
            self.evict(v, minute);
            if self.jobs[head.job].is_replica() {
                self.stats[team].preemptions_caused_by_scale_up += 1;
            }
        }
        true
    }

    /// Kueue's attempts for `head` on flavor `f` (`classicalPreemptions`), in order. Other
    /// queues' candidates (`reclaimWithinCohort` allowing) come in two kinds in one cohort: when
    /// the job fits within its queue's nominal quota it has the "hierarchical advantage" over
    /// all of them (`collectCandidatesForHierarchicalReclaim`), and one attempt decides; when it
    /// must borrow, those `borrowWithinCohort` allows may be evicted while it borrows, the rest
    /// only if it then fits without borrowing (`classifyPreemptionVariant`). With
    /// `borrowWithinCohort: Never` Kueue first tries without borrowing (only while its queue is
    /// strictly under nominal, `queueUnderNominalInResourcesNeedingPreemption`), then its own
    /// queue's workloads alone, borrowing; otherwise borrowing first, then not.
    /// `own_slices`: what its own queue's candidates hold. An attempt without borrowing that
    /// cannot bring its queue to nominal even with them all gone is left out.
    fn attempts(&self, head: &Queued, f: usize, own_slices: u64) -> [Option<Attempt>; 2] {
        let (usage, nominal) = (
            self.usage.held(head.team, f),
            self.quotas.nominal(head.team, f),
        );
        let policy = &self.policy;
        // Whom of the borrowing queues it may evict: `Some(bound)` as `Running::first` takes it.
        let reclaimable =
            (policy.cohort && policy.reclaim_within_cohort != Reclaim::Never).then(|| {
                (policy.reclaim_within_cohort == Reclaim::LowerPriority).then_some(head.priority)
            });
        let borrowing = |others| {
            Some(Attempt {
                others,
                borrow: true,
            })
        };
        if usage + head.slices <= nominal {
            return [borrowing(reclaimable), None];
        }
        let to_nominal = usage - own_slices.min(usage) + head.slices <= nominal;
        let without = |others: Option<Option<i32>>| {
            to_nominal.then_some(Attempt {
                others,
                borrow: false,
            })
        };
        match policy.borrow_within_cohort.below(head.priority) {
            None => [
                without(reclaimable.filter(|_| usage < nominal)),
                borrowing(None),
            ],
            Some(bound) => {
                // Below both bounds (`None` in `reclaimable` is no bound).
                let both = reclaimable.map(|of| Some(of.map_or(bound, |p| p.min(bound))));
                [borrowing(both), without(reclaimable)]
            }
        }
    }

    /// The fewest of `candidates` (in order) whose eviction lets `head` fit, borrowing or not;
    /// another queue's workload counts only while that queue is still borrowing. Taken greedily
    /// in order, then trimmed: a victim is given back when the job fits without it (Kueue's
    /// `fillBackWorkloads`).
    fn fewest_victims(
        &self,
        head: &Queued,
        f: usize,
        candidates: impl Iterator<Item = usize>,
        borrow: bool,
    ) -> Option<Vec<usize>> {
        let (team, slices) = (head.team, head.slices);
        let mut trial = Trial::new(&self.quotas, &self.usage, f);
        let mut targets = Vec::new();
        for c in candidates {
            if trial.fits(team, slices, borrow) {
                break;
            }
            let ct = self.jobs[c].team;
            if ct != team && !trial.borrowing(ct) {
                continue;
            }
            trial.remove(ct, self.jobs[c].slices);
            targets.push(c);
        }
        if !trial.fits(team, slices, borrow) {
            return None;
        }
        for i in (0..targets.len().saturating_sub(1)).rev() {
            let (ct, cg) = (self.jobs[targets[i]].team, self.jobs[targets[i]].slices);
            trial.restore(ct, cg);
            if trial.fits(team, slices, borrow) {
                targets.remove(i);
            } else {
                trial.remove(ct, cg);
            }
        }
        Some(targets)
    }

    /// Admits `job` on `flavor` at `minute`: it holds its quota from now and its pods wait for
    /// nodes; its work can begin `delay` minutes later (victims terminating).
    fn start(&mut self, job: usize, flavor: usize, minute: u32, delay: u32) {
        self.record(job, minute, Happened::Admitted { flavor });
        self.admissions += 1;
        let j = &mut self.jobs[job];
        j.flavor = flavor;
        j.running = true;
        j.placed = false;
        j.started = minute;
        j.work_from = minute + delay;
        j.generation += 1;
        j.admission = self.admissions;
        if let Kind::Replica { ready_at, .. } = &mut j.kind {
            *ready_at = None;
            self.replica_changes += 1;
        }
        let (team, f, slices, admitted) =
            (j.team, j.flavor, j.slices, (j.priority, j.admission, job));
        self.usage.change(&self.quotas, team, f, slices, true);
        let slot = self.slot(team, f);
        self.jobs[job].place = self.running[slot].push(admitted, slices);
        // In the kube-scheduler's order: higher priority first, then admission.
        let jobs = &self.jobs;
        let at = self.unplaced[f].partition_point(|&o| jobs[o].priority >= jobs[job].priority);
        self.unplaced[f].insert(at, job);
        // Usage grows only here: the peaks of borrowing are the peaks at admissions.
        let held = self.usage.held(team, f);
        let s = &mut self.stats[team];
        // In GPUs, a share of one counting as one.
        let whole =
            |slices: u64| u32::try_from(slices.div_ceil(SLICES_PER_GPU)).unwrap_or(u32::MAX);
        s.peak_borrowed_gpus = s
            .peak_borrowed_gpus
            .max(whole(held.saturating_sub(self.quotas.nominal(team, f))));
        s.peak_over_limit_gpus = s
            .peak_over_limit_gpus
            .max(whole(held.saturating_sub(self.quotas.limit(team, f))));
    }

    /// Step 5: admitted pods go onto free nodes, as the kube-scheduler binds them: higher
    /// priority first, then in order of admission, each that fits (a smaller one may pass a
    /// larger that does not). With quotas no larger than the fleet, every admitted job is
    /// placed in the minute it is admitted.
    pub fn place(&mut self, minute: u32) {
        for f in 0..self.unplaced.len() {
            if self.unplaced[f].is_empty() {
                continue;
            }
            let mut waiting = std::mem::take(&mut self.unplaced[f]);
            waiting.retain(|&job| {
                let slices = self.jobs[job].slices;
                if self.placed[f] + slices > self.quotas.capacity[f] {
                    return true;
                }
                self.placed[f] += slices;
                self.bind(job, minute);
                false
            });
            self.unplaced[f] = waiting;
        }
    }

    /// `job`'s pods are on nodes at `minute`: its work (or a replica's cold start) begins.
    fn bind(&mut self, job: usize, minute: u32) {
        let j = &mut self.jobs[job];
        j.placed = true;
        j.work_from = j.work_from.max(minute);
        let submitted = j.is_submitted();
        let s = &mut self.stats[j.team];
        // An evicted job first pulls its image and loads its checkpoint: rework.
        if let Kind::Batch {
            restart_min,
            restarting: restarting @ true,
            ..
        } = &mut j.kind
        {
            *restarting = false;
            j.work_from += *restart_min;
            *rework(s, submitted) += gpus(j.slices) * f64::from(*restart_min) / 60.0;
        }
        let work_from = j.work_from;
        self.held[j.team].pending += j.slices * u64::from(minute - j.started);
        if j.first_admit.is_none() {
            j.first_admit = Some(work_from);
            if j.is_submitted() {
                s.jobs_admitted += 1;
                self.waits[j.team].add(work_from - j.arrival);
            }
        }
        match &mut j.kind {
            Kind::Batch { remaining_min, .. } => {
                // Work that would end after the week is closed by `close`.
                if let Some(due) = self.ends.get_mut((work_from + *remaining_min) as usize) {
                    due.push((job, j.generation));
                }
            }
            Kind::Replica {
                cold_start_min,
                ready_at,
                ..
            } => {
                *ready_at = Some(work_from + *cold_start_min);
                self.replica_changes += 1;
            }
        }
    }

    /// Closes the job's running interval: admitted GPU-minutes, a batch job's busy ones (from
    /// when its work began), a replica's cold start and what a warm cache cut from it.
    fn account(&mut self, job: usize, minute: u32) {
        let j = &self.jobs[job];
        let slice_minutes = j.slices * u64::from(minute - j.started);
        let held = &mut self.held[j.team];
        match j.kind {
            _ if !j.placed => held.pending += slice_minutes,
            Kind::Batch { busy_gpus, .. } => {
                self.stats[j.team].busy_gpu_minutes +=
                    busy_gpus * f64::from(minute.saturating_sub(j.work_from));
            }
            Kind::Replica {
                cold_start_min,
                storage_cold_start_min,
                ready_at: Some(ready),
            } => {
                // Loading its weights until it serves; from object storage it would have
                // loaded for longer, as far as it ran.
                let loading = ready.min(minute).saturating_sub(j.work_from);
                let cut =
                    (storage_cold_start_min - cold_start_min).min(minute.saturating_sub(ready));
                held.cold_start += j.slices * u64::from(loading);
                held.cold_start_cut_by_cache += j.slices * u64::from(cut);
            }
            Kind::Replica { ready_at: None, .. } => {}
        }
        held.admitted += slice_minutes;
        *match j.part {
            Part::Arrival => &mut held.batch,
            Part::WarmStart => &mut held.warm_start,
            Part::Backlog { .. } => &mut held.backlog,
            Part::Replica => &mut held.replica,
        } += slice_minutes;
    }

    fn stop(&mut self, job: usize, minute: u32) {
        self.account(job, minute);
        let j = &mut self.jobs[job];
        j.running = false;
        if j.is_replica() {
            self.replica_changes += 1;
        }
        let (team, f, slices, placed) = (j.team, j.flavor, j.slices, j.placed);
        let (priority, place) = (j.priority, j.place);
        self.usage.change(&self.quotas, team, f, slices, false);
        let slot = self.slot(team, f);
        let jobs = &mut self.jobs;
        self.running[slot].remove(priority, place, |moved, to| jobs[moved].place = to);
        if placed {
            self.placed[f] -= slices;
        } else if let Some(at) = self.unplaced[f].iter().position(|&u| u == job) {
            self.unplaced[f].remove(at);
        }
    }

    /// Eviction: the work since the last checkpoint is lost and the job queues again.
    fn evict(&mut self, job: usize, minute: u32) {
        self.stop(job, minute);
        self.record(job, minute, Happened::Evicted);
        let j = &mut self.jobs[job];
        j.generation += 1;
        let ran = if j.placed {
            minute.saturating_sub(j.work_from)
        } else {
            0
        };
        let (team, slices) = (j.team, j.slices);
        // Evicted during its restart: the rest of that restart was never spent.
        let mut lost_gpu_hours = if j.placed {
            -gpus(slices) * f64::from(j.work_from.saturating_sub(minute)) / 60.0
        } else {
            0.0
        };
        if let Kind::Batch {
            remaining_min,
            checkpoint_min,
            restarting,
            ..
        } = &mut j.kind
        {
            // Work up to the last checkpoint is kept; with no checkpoints, nothing is. Its
            // restart is owed at its next placement.
            let kept = ran
                .checked_div(*checkpoint_min)
                .map_or(0, |n| n * *checkpoint_min);
            *remaining_min -= kept;
            lost_gpu_hours += gpus(slices) * f64::from(ran - kept) / 60.0;
            *restarting = true;
        }
        // Elastic backlog filler is reclaimed by design: reported on its own.
        let submitted = j.is_submitted() || j.is_replica();
        let s = &mut self.stats[team];
        *if submitted {
            &mut s.preemptions
        } else {
            &mut s.backlog_reclaims
        } += 1;
        *rework(s, submitted) += lost_gpu_hours;
        self.enqueue(job);
    }
}
