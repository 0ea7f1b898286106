//! KEDA for one inference class: from the minute's traffic, how many replicas it wants
//! (`threshold`, `activationThreshold`, `cooldownPeriod`, HPA's 5-minute scale-down
//! stabilisation), and how much of the traffic its ready replicas serve.

use crate::planning::scenario::{HOURS_PER_WEEK, Inference, Workload};

/// HPA's default scale-down stabilisation window.
const STABILISATION_MIN: u32 = 5;
/// A scale-up within this long after a scale-down counts as one flapping cycle.
const FLAP_WINDOW_MIN: u32 = 60;

pub(super) struct Autoscaler {
    pub team: usize,
    pub flavor: usize,
    /// Traffic per hour of the week, in GPUs' worth.
    hourly: Vec<f64>,
    tokens_per_gpu: f64,
    pub gpus_per_replica: u32,
    /// What one replica holds of its flavor's cards ([`super::SLICES_PER_GPU`] a card): less
    /// than its GPUs where replicas share a card.
    pub slices_per_replica: u64,
    pub priority: i32,
    /// Replica slots whose node-local cache holds the weights: a cache warms by use, so the
    /// first start beyond the most replicas run so far is a full cold start. The week starts
    /// with `min_replicas` warm (they ran last week).
    warm_slots: u32,
    min: u32,
    max: u32,
    activation: f64,
    cooldown_min: u32,
    /// Share of a serving GPU's time that is busy.
    busy_share: f64,
    /// The ScaledObject's settings (its replica rule).
    scaling: Inference,
    /// Its replicas' job ids.
    pub replicas: Vec<usize>,
    /// How many of them serve, as last counted.
    pub ready: Ready,
    /// The replicas wanted in the stabilisation window's minutes, as a ring: the newest at
    /// `(decisions - 1) % STABILISATION_MIN`.
    recent_desired: [u32; STABILISATION_MIN as usize],
    /// Decisions so far (the window holds the last of them).
    decisions: usize,
    below_activation_since: Option<u32>,
    last_scale_down: Option<u32>,
    /// Until this minute every decision is the last one again: the traffic's hour has not
    /// turned, the replicas are what it wants, and the window holds nothing else.
    steady_until: u32,
    pub demand_tokens: f64,
    pub unserved_tokens: f64,
}

/// A count of ready replicas, good while no replica has started, been placed or stopped
/// (the week's `changes` count is unchanged) and before the next one is ready (`until`).
#[derive(Clone, Copy)]
pub(super) struct Ready {
    pub changes: u64,
    pub count: usize,
    pub until: u32,
}

/// What one minute's scaling decided.
pub(super) struct Decision {
    pub target: u32,
    /// A scale-up soon after a scale-down: one flapping cycle.
    pub flapped: bool,
}

impl Autoscaler {
    pub fn new(
        team: usize,
        flavor: usize,
        w: &Workload,
        inference: &Inference,
        hourly: Vec<f64>,
        slices_per_replica: u64,
    ) -> Self {
        Self {
            team,
            flavor,
            hourly,
            tokens_per_gpu: f64::from(inference.tokens_per_s_per_gpu),
            gpus_per_replica: w.gpus_per_job,
            slices_per_replica,
            priority: w.priority,
            warm_slots: inference.min_replicas,
            min: inference.min_replicas,
            max: inference.max_replicas,
            activation: f64::from(inference.activation_threshold_pct) / 100.0,
            cooldown_min: inference.cooldown_s.div_ceil(60),
            busy_share: f64::from(w.busy_pct) / 100.0,
            scaling: inference.clone(),
            replicas: Vec::new(),
            ready: Ready {
                changes: u64::MAX,
                count: 0,
                until: 0,
            },
            recent_desired: [0; STABILISATION_MIN as usize],
            decisions: 0,
            below_activation_since: None,
            last_scale_down: None,
            steady_until: 0,
            demand_tokens: 0.0,
            unserved_tokens: 0.0,
        }
    }

    fn demand_gpus(&self, minute: u32) -> f64 {
        let hour = (minute / 60) as usize % HOURS_PER_WEEK;
        self.hourly.get(hour).copied().unwrap_or(0.0)
    }

    /// The replica count for `minute`, given `current` replicas.
    pub fn decide(&mut self, minute: u32) -> Decision {
        let current = self.replicas.len() as u32;
        if minute < self.steady_until {
            return Decision {
                target: current,
                flapped: false,
            };
        }
        let replica_capacity = self.tokens_per_gpu * f64::from(self.gpus_per_replica);
        let demand = self.demand_gpus(minute) * self.tokens_per_gpu;
        let below_activation = demand < self.activation * replica_capacity;
        let mut desired = self
            .scaling
            .replicas_for(self.demand_gpus(minute), self.gpus_per_replica);
        if below_activation {
            // The ScaledObject is inactive: it stays at zero, or drops to zero once
            // cooldownPeriod has passed (min_replicas still holds, below).
            let since = *self.below_activation_since.get_or_insert(minute);
            desired = if current > 0 && minute - since < self.cooldown_min {
                desired.max(1)
            } else {
                0
            };
        } else {
            self.below_activation_since = None;
            desired = desired.max(1);
        }
        desired = desired.clamp(self.min, self.max.max(self.min));
        let window = self.recent_desired.len();
        self.recent_desired[self.decisions % window] = desired;
        self.decisions += 1;
        let recent = &self.recent_desired[..self.decisions.min(window)];
        // Scale down to the highest recommendation of the stabilisation window; going to zero
        // is KEDA's own step once cooldownPeriod has passed, outside the HPA's window.
        let to_zero = below_activation && desired == 0;
        let target = if desired >= current || to_zero {
            desired
        } else {
            recent.iter().copied().max().unwrap_or(desired)
        };
        let mut flapped = false;
        if target > current {
            if self
                .last_scale_down
                .is_some_and(|down| minute - down <= FLAP_WINDOW_MIN)
            {
                flapped = true;
                self.last_scale_down = None;
            }
        } else if target < current {
            self.last_scale_down = Some(minute);
        }
        let window_full = recent.len() == window;
        if !below_activation
            && target == current
            && window_full
            && recent.iter().all(|&d| d == desired)
        {
            // Each minute to the hour's end would want as many, push the same into the
            // window and keep the count: the same decision, so it is not worked out again.
            self.steady_until = (minute / 60 + 1) * 60;
        }
        Decision { target, flapped }
    }

    /// The cold start of the replica taking slot `slot` (0-based), which warms its cache, and
    /// what it would be from object storage.
    pub fn cold_start_min(&mut self, slot: u32) -> (u32, u32) {
        let warm = slot < self.warm_slots;
        self.warm_slots = self.warm_slots.max(slot + 1);
        (
            self.scaling.cold_start_min(warm),
            self.scaling.cold_start_min(false),
        )
    }

    /// Serves the minute's traffic with `ready` replicas; returns the busy GPU-minutes.
    pub fn serve(&mut self, minute: u32, ready: usize) -> f64 {
        let demand = self.demand_gpus(minute) * self.tokens_per_gpu;
        let capacity = ready as f64 * f64::from(self.gpus_per_replica) * self.tokens_per_gpu;
        let served = demand.min(capacity);
        self.demand_tokens += demand * 60.0;
        self.unserved_tokens += (demand - served) * 60.0;
        served / self.tokens_per_gpu * self.busy_share
    }
}
