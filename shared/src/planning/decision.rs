//! The decision matrix over the four sharing architectures, with the manager's weights, the
//! rules that fired as reasons, and a sensitivity series over fleet size.
//!
//! Criteria are scored 0-5 per architecture (base scores from the table in
//! `docs/planning-rules.md`); rules then exclude options or adjust scores, and each rule that
//! fires is listed.

use serde::{Deserialize, Serialize};

use crate::{
    common::label::Labelled,
    common::money::thousands,
    fleet::catalogue::Vendor,
    planning::scenario::{Scenario, Weights},
    planning::sizing::{Fit, HOURS_PER_YEAR, Sizing},
    planning::{
        isolation,
        terms::Architecture::{self, A, B, C, D},
    },
};

impl Architecture {
    fn index(self) -> usize {
        self as usize
    }

    /// Base scores (0-5): arbitration, granularity, isolation, cost to maintain (5 = cheap),
    /// typical utilisation.
    fn base(self) -> [f64; 5] {
        match self {
            Architecture::A => [0.0, 1.0, 5.0, 4.0, 1.0],
            Architecture::B => [5.0, 5.0, 3.0, 1.0, 5.0],
            Architecture::C => [4.0, 3.0, 4.0, 3.0, 4.0],
            Architecture::D => [3.0, 4.0, 5.0, 5.0, 3.0],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    pub architecture: Architecture,
    pub title: String,
    /// Σ weight × criterion score, or None when a rule excluded the option.
    pub score: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub options: Vec<Scored>,
    pub recommendation: Architecture,
    /// The rules that fired: first those that decided, then those that were outweighed.
    pub reasons: Vec<Reason>,
    /// Yearly value of the utilisation gain: extra busy GPUs on the baseline × the fleet's mean
    /// price × hours, in cents.
    pub gain_value_cents_per_year: i64,
    /// The GPUs the gain is counted on: the separate pools' (where the starting utilisation
    /// was measured).
    pub baseline_gpus: u64,
    /// The recommendation as the fleet size varies (other inputs fixed).
    pub sensitivity: Vec<SensitivityPoint>,
    /// What would have to change for each other option to win.
    pub changes: Vec<Change>,
}

impl Decision {
    /// Each option that scores above the recommendation with these weights but that no rule
    /// nominated, and why it is still not the answer, in words: the weights rank only what the
    /// rules nominate. Derived from the decision (its nominating reasons), so the planner's
    /// worker does not carry it.
    pub fn outscored_unnominated(&self) -> Vec<String> {
        let Some(winning) = self
            .options
            .iter()
            .find(|o| o.architecture == self.recommendation)
            .and_then(|o| o.score)
        else {
            return Vec::new();
        };
        let nominated = |arch: Architecture| {
            self.reasons
                .iter()
                .any(|r| r.architecture == arch && r.effect == Effect::Nominates)
        };
        self.options
            .iter()
            .filter_map(|o| Some((o, o.score?)))
            .filter(|(o, score)| *score > winning && !nominated(o.architecture))
            .map(|(o, score)| {
                format!(
                    "{} scores {score:.1} with your weights, above {}'s {winning:.1}, but no rule nominates it: the weights rank only the options a rule nominates.",
                    o.architecture.label(),
                    self.recommendation.label()
                )
            })
            .collect()
    }
}

/// One rule that fired, in words, with the option it speaks for or against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    pub text: String,
    pub architecture: Architecture,
    pub effect: Effect,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Makes the option a candidate (and adds to its score).
    Nominates,
    /// Lowers its score.
    Counts,
    /// Rules it out.
    Excludes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// It speaks for the recommendation or against an option that lost.
    Decided,
    /// It spoke for an option that lost, or against the one that won.
    Outweighed,
}

impl Labelled for Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Decided => "decided",
            Verdict::Outweighed => "outweighed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensitivityPoint {
    pub gpus: u64,
    pub recommendation: Architecture,
}

/// The facts the rules read (fleet size varies in the sensitivity series).
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub gpus: u64,
    /// The GPUs the utilisation gain is counted on (separate pools).
    pub baseline_gpus: u64,
    pub platform_team: u32,
    pub aws_only: bool,
    pub heterogeneous: bool,
    /// Software sharing (HAMi, MPS or time-slicing) is required: by the constraints, or by a
    /// class that needs it; the first such class, for the reason's words.
    pub software_fractions: bool,
    pub fractions_class: Option<String>,
    pub runs_own_models: bool,
    /// Utilisation gain from sharing, in percentage points (busy).
    pub gain_points: f64,
    pub price_cents_per_gpu_hour: f64,
    pub engineer_cents_per_year: i64,
    /// Flavors whose fleet is short for separate pools but enough for a shared one.
    pub short_for_separate: Vec<String>,
}

impl Facts {
    pub fn of(scenario: &Scenario, sizing: &Sizing) -> Self {
        let gpus = scenario.total_gpus();
        let price = if gpus > 0 {
            scenario
                .fleet
                .iter()
                .map(|a| a.price_cents_per_gpu_hour as f64 * f64::from(a.count))
                .sum::<f64>()
                / gpus as f64
        } else {
            0.0
        };
        let vendors = scenario
            .fleet
            .iter()
            .map(|a| a.vendor())
            .collect::<std::collections::BTreeSet<_>>();
        let c = &scenario.constraints;
        let fractions_class = isolation::needs_software_sharing(scenario);
        Self {
            gpus,
            baseline_gpus: sizing.gain.gpus,
            platform_team: c.platform_team_size,
            aws_only: c.aws_only,
            heterogeneous: c.heterogeneous
                || vendors.len() > 1
                || vendors.iter().any(|v| *v != Vendor::Nvidia),
            software_fractions: c.needs_software_fractions || fractions_class.is_some(),
            fractions_class,
            runs_own_models: c.runs_own_models,
            gain_points: sizing.gain.to_pct - sizing.gain.from_pct,
            price_cents_per_gpu_hour: price,
            engineer_cents_per_year: c.platform_engineer_cost_cents_per_year,
            short_for_separate: sizing
                .by_flavor
                .iter()
                .filter(|f| f.separate_fit == Fit::Short && f.shared_fit != Fit::Short)
                .map(|f| f.flavor.clone())
                .collect(),
        }
    }

    /// The same organisation with `gpus` cards (the baseline scaled alike).
    fn at_size(&self, gpus: u64) -> Self {
        let baseline = if self.gpus > 0 {
            (self.baseline_gpus as f64 * gpus as f64 / self.gpus as f64).round() as u64
        } else {
            gpus
        };
        Self {
            gpus,
            baseline_gpus: baseline,
            ..self.clone()
        }
    }

    /// Big enough, with enough platform engineers, to run B yourself.
    fn own_platform(&self) -> bool {
        self.gpus > OWN_PLATFORM_FROM && self.platform_team >= OWN_PLATFORM_TEAM
    }

    pub fn gain_value_cents_per_year(&self) -> i64 {
        (self.baseline_gpus as f64 * self.gain_points / 100.0
            * self.price_cents_per_gpu_hour
            * HOURS_PER_YEAR as f64)
            .round() as i64
    }
}

/// Thresholds of the rules, in cards (the decision rules in `docs/planning-rules.md`). "Up to
/// ~40 cards" includes 40; the managed window starts where that ends, so every size falls
/// under some rule.
pub const SMALL_FLEET: u64 = 40;
pub const MANAGED_TO: u64 = 2_000;
pub const OWN_PLATFORM_FROM: u64 = 500;
/// Platform engineers from which running B yourself is realistic.
pub const OWN_PLATFORM_TEAM: u32 = 4;

/// Score adjustments of the rules, in weighted points (a criterion scores 0-5 at weight 1, so
/// the five criteria span 0-25). A rule that makes an option the expected choice outweighs any
/// base-score gap; a fitting rule outweighs most; a supporting one tips close calls.
pub const DECISIVE: f64 = 10.0;
pub const STRONG_FIT: f64 = 6.0;
pub const SUPPORTING: f64 = 4.0;

/// The rules as they fire: score adjustments, exclusions, and the reasons in order.
struct Tally {
    adjust: [f64; 4],
    excluded: [bool; 4],
    nominated: [bool; 4],
    fired: Vec<(Architecture, Effect, String)>,
}

impl Tally {
    fn nominate(&mut self, arch: Architecture, points: f64, text: String) {
        self.adjust[arch.index()] += points;
        self.nominated[arch.index()] = true;
        self.fired.push((arch, Effect::Nominates, text));
    }

    fn count_against(&mut self, arch: Architecture, points: f64, text: String) {
        self.adjust[arch.index()] -= points;
        self.fired.push((arch, Effect::Counts, text));
    }

    fn exclude(&mut self, arch: Architecture, text: String) {
        self.excluded[arch.index()] = true;
        self.fired.push((arch, Effect::Excludes, text));
    }
}

/// The options' scores, the recommendation and the reasons. Rules nominate options; the
/// recommendation is the best-scoring nominee that no rule excluded (the weights rank
/// nominees, they never pick an option no rule speaks for).
pub fn decide(facts: &Facts, weights: &Weights) -> (Vec<Scored>, Architecture, Vec<Reason>) {
    let mut tally = Tally {
        adjust: [0.0; 4],
        excluded: [false; 4],
        nominated: [false; 4],
        fired: Vec::new(),
    };
    for rule in RULES {
        rule(facts, &mut tally);
    }
    let options = scored(&tally, weights);
    let recommendation = recommend(&options, &mut tally);
    let reasons = reasons(tally, recommendation);
    (options, recommendation, reasons)
}

/// The rules of `docs/planning-rules.md`, in the order they fire. A rule that does not apply
/// does nothing; only the first speaks when the organisation runs no model of its own.
const RULES: [fn(&Facts, &mut Tally); 7] = [
    no_model_of_your_own,
    own_models_count_against_d,
    separate_pools_for_small_fleets,
    separate_pools_short,
    managed_governance_on_aws,
    run_b_yourself,
    the_gain_pays_for_an_engineer,
];

fn no_model_of_your_own(facts: &Facts, t: &mut Tally) {
    if facts.runs_own_models {
        return;
    }
    t.nominate(
        D,
        DECISIVE,
        "No model of your own: a fully managed per-token or per-job service (D) fits.".to_owned(),
    );
    for arch in [A, B, C] {
        t.exclude(
            arch,
            format!(
                "No model of your own to run: {} would run nothing.",
                arch.label()
            ),
        );
    }
}

fn own_models_count_against_d(facts: &Facts, t: &mut Tally) {
    if facts.runs_own_models {
        t.count_against(
            D,
            STRONG_FIT,
            "You run models of your own: per-token services cover only part of that work (D)."
                .to_owned(),
        );
    }
}

fn separate_pools_for_small_fleets(facts: &Facts, t: &mut Tally) {
    if !facts.runs_own_models {
        return;
    }
    let gpus = thousands(facts.gpus as i64);
    if facts.gpus <= SMALL_FLEET || facts.platform_team == 0 {
        let why = if facts.platform_team == 0 {
            format!("{gpus} cards and no platform team")
        } else {
            format!("{gpus} cards (up to {SMALL_FLEET})")
        };
        t.nominate(
            A,
            DECISIVE,
            format!("{why}: separate pools (A) are enough; sharing machinery would cost more than it saves."),
        );
    } else {
        t.exclude(
            A,
            format!("{gpus} cards with a platform team: separate pools (A) would idle at 30-40%."),
        );
    }
}

fn separate_pools_short(facts: &Facts, t: &mut Tally) {
    if facts.runs_own_models && !facts.short_for_separate.is_empty() && !t.excluded[A.index()] {
        t.count_against(
            A,
            DECISIVE,
            format!(
                "The fleet is short for separate pools on {} but enough shared: separate pools (A) would leave work waiting.",
                facts.short_for_separate.join(", ")
            ),
        );
    }
}

fn managed_governance_on_aws(facts: &Facts, t: &mut Tally) {
    if !facts.runs_own_models {
        return;
    }
    if !facts.aws_only {
        t.exclude(
            C,
            "Not AWS-only: the managed HyperPod-style option (C) is not available.".to_owned(),
        );
    } else if facts.software_fractions {
        let why = match &facts.fractions_class {
            Some(class) => format!("{class} can share its cards only in software"),
            _ => "Software GPU fractions are required".to_owned(),
        };
        t.exclude(
            C,
            format!("{why}: managed governance (C) has fractions through MIG only."),
        );
    } else if facts.gpus > SMALL_FLEET
        && facts.gpus <= MANAGED_TO
        && facts.platform_team > 0
        && !facts.own_platform()
    {
        t.nominate(
            C,
            STRONG_FIT,
            format!(
                "{}-{} cards on AWS only, below the scale to run B yourself (over {} cards with {OWN_PLATFORM_TEAM}+ platform engineers): managed Kueue governance (C) fits.",
                SMALL_FLEET + 1,
                thousands(MANAGED_TO as i64),
                thousands(OWN_PLATFORM_FROM as i64)
            ),
        );
    }
}

/// Each of B's conditions that holds nominates it; none holding excludes it.
fn run_b_yourself(facts: &Facts, t: &mut Tally) {
    if !facts.runs_own_models {
        return;
    }
    let mut b_fits = false;
    if facts.gpus > MANAGED_TO && facts.platform_team > 0 {
        b_fits = true;
        t.nominate(
            B,
            STRONG_FIT,
            format!(
                "Over {} cards: beyond managed governance's range; run Kueue+KEDA+HAMi+Fluid yourself (B).",
                thousands(MANAGED_TO as i64)
            ),
        );
    }
    if facts.own_platform() {
        b_fits = true;
        t.nominate(
            B,
            STRONG_FIT,
            format!(
                "Over {} cards with a platform team of {OWN_PLATFORM_TEAM} or more: run Kueue+KEDA+HAMi+Fluid yourself (B).",
                thousands(OWN_PLATFORM_FROM as i64)
            ),
        );
    }
    if facts.software_fractions {
        b_fits = true;
        let why = match &facts.fractions_class {
            Some(class) => format!("{class} can share its cards only in software"),
            _ => "Software GPU fractions (HAMi) are required".to_owned(),
        };
        t.nominate(B, STRONG_FIT, format!("{why}: only B offers them."));
    }
    if facts.heterogeneous || !facts.aws_only {
        b_fits = true;
        t.nominate(
            B,
            SUPPORTING,
            "A heterogeneous or non-AWS fleet needs an open scheduler stack (B).".to_owned(),
        );
    }
    if !b_fits {
        t.exclude(
            B,
            format!(
                "None of B's conditions holds (over {} cards; over {} with {OWN_PLATFORM_TEAM}+ platform engineers; software fractions; a heterogeneous or non-AWS fleet): running it yourself does not pay.",
                thousands(MANAGED_TO as i64),
                thousands(OWN_PLATFORM_FROM as i64)
            ),
        );
    }
}

fn the_gain_pays_for_an_engineer(facts: &Facts, t: &mut Tally) {
    let value = facts.gain_value_cents_per_year();
    if !facts.runs_own_models || value >= facts.engineer_cents_per_year || t.excluded[B.index()] {
        return;
    }
    t.exclude(
        B,
        format!(
            "The utilisation gain is worth ${}/year on {} cards, less than one platform engineer (${}/year): running B yourself does not pay.",
            thousands(value / 100),
            thousands(facts.baseline_gpus as i64),
            thousands(facts.engineer_cents_per_year / 100),
        ),
    );
    for arch in [C, D] {
        if !t.excluded[arch.index()] {
            t.nominate(
                arch,
                SUPPORTING,
                format!(
                    "The gain does not pay for an engineer: a managed option ({}) instead.",
                    arch.label()
                ),
            );
        }
    }
}

/// Each option's weighted base score plus what the rules added; `None` when excluded.
fn scored(tally: &Tally, weights: &Weights) -> Vec<Scored> {
    let w = [
        weights.arbitration,
        weights.granularity,
        weights.isolation,
        weights.cost_to_maintain,
        weights.utilisation,
    ];
    Architecture::ALL
        .into_iter()
        .map(|arch| {
            let base: f64 = arch.base().iter().zip(&w).map(|(s, w)| s * w).sum();
            Scored {
                architecture: arch,
                title: arch.label().to_owned(),
                score: (!tally.excluded[arch.index()]).then_some(base + tally.adjust[arch.index()]),
            }
        })
        .collect()
}

/// The best-scoring nominee left, else the best option left (said as a reason), else D.
fn recommend(options: &[Scored], tally: &mut Tally) -> Architecture {
    let best_of = |nominees_only: bool| {
        options
            .iter()
            .filter(|o| !nominees_only || tally.nominated[o.architecture.index()])
            .filter_map(|o| o.score.map(|s| (s, o.architecture)))
            .fold(
                None,
                |best: Option<(f64, Architecture)>, (s, arch)| match best {
                    Some((bs, _)) if bs >= s => best,
                    _ => Some((s, arch)),
                },
            )
            .map(|(_, arch)| arch)
    };
    match best_of(true).or_else(|| best_of(false)) {
        Some(arch) => {
            if !tally.nominated[arch.index()] {
                tally.fired.push((
                    arch,
                    Effect::Nominates,
                    format!("No rule nominates an option that is left: of those, {} scores best with your weights.", arch.label()),
                ));
            }
            arch
        }
        None => {
            tally.fired.push((
                D,
                Effect::Nominates,
                "Every self-run option was ruled out: a fully managed service (D) remains."
                    .to_owned(),
            ));
            D
        }
    }
}

/// The rules that fired, each marked as deciding or outweighed by the recommendation: decided
/// first, each group in the order the rules fired.
fn reasons(tally: Tally, recommendation: Architecture) -> Vec<Reason> {
    let verdict = |arch: Architecture, effect: Effect| {
        let for_winner = arch == recommendation;
        match effect {
            Effect::Nominates if for_winner => Verdict::Decided,
            Effect::Nominates => Verdict::Outweighed,
            _ if for_winner => Verdict::Outweighed,
            _ => Verdict::Decided,
        }
    };
    let mut reasons: Vec<Reason> = tally
        .fired
        .into_iter()
        .map(|(architecture, effect, text)| Reason {
            verdict: verdict(architecture, effect),
            text,
            architecture,
            effect,
        })
        .collect();
    // Those that decided first, each group in firing order.
    let outweighed: Vec<Reason> = reasons
        .extract_if(.., |r| r.verdict == Verdict::Outweighed)
        .collect();
    reasons.extend(outweighed);
    reasons
}

/// Fleet sizes of the sensitivity series.
pub const SENSITIVITY_GPUS: [u64; 12] = [
    8, 16, 32, 40, 64, 128, 256, 500, 1_000, 2_000, 5_000, 10_000,
];

/// What would make an option that lost win: one fact changed, the rest as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub architecture: Architecture,
    /// The changes, in words ("from 2,001 GPUs", "with a platform team of 4"); empty when no
    /// single change makes it win.
    pub would_win: Vec<String>,
}

/// A constraint flipped: how, its words when it was on and when it was off, and whether it is.
type Toggle = (fn(&mut Facts), &'static str, &'static str, bool);

/// For each option but `winner`: decide again with one fact changed at a time (the fleet size,
/// the platform team, each constraint) and keep the changes under which it wins. Fleet sizes
/// are searched to the exact card where the recommendation turns.
pub fn what_would_change(facts: &Facts, weights: &Weights, winner: Architecture) -> Vec<Change> {
    Architecture::ALL
        .into_iter()
        .filter(|&arch| arch != winner)
        .map(|arch| {
            let wins = |f: &Facts| decide(f, weights).1 == arch;
            let mut would_win = Vec::new();
            would_win.extend(turning_size(facts, wins));
            would_win.extend(platform_team(facts, wins));
            flipped_constraints(facts, wins, &mut would_win);
            Change {
                architecture: arch,
                would_win,
            }
        })
        .collect()
}

/// The fleet size nearest today's at which an option `wins`, searched down to the turning card.
fn turning_size(facts: &Facts, wins: impl Fn(&Facts) -> bool) -> Option<String> {
    let far = SENSITIVITY_GPUS
        .into_iter()
        .filter(|&n| wins(&facts.at_size(n)))
        .min_by_key(|&n| n.abs_diff(facts.gpus))?;
    let (mut lose, mut win) = (facts.gpus, far);
    while lose.abs_diff(win) > 1 {
        let mid = lose.midpoint(win);
        if wins(&facts.at_size(mid)) {
            win = mid;
        } else {
            lose = mid;
        }
    }
    let n = thousands(win as i64);
    Some(if win > facts.gpus {
        format!("from {n} GPUs")
    } else {
        format!("up to {n} GPUs")
    })
}

/// The platform team's size nearest today's at which an option `wins`.
fn platform_team(facts: &Facts, wins: impl Fn(&Facts) -> bool) -> Option<String> {
    let k = (0..=2 * OWN_PLATFORM_TEAM.max(facts.platform_team))
        .filter(|&k| k != facts.platform_team)
        .filter(|&k| {
            wins(&Facts {
                platform_team: k,
                ..facts.clone()
            })
        })
        .min_by_key(|&k| k.abs_diff(facts.platform_team))?;
    Some(format!("with a platform team of {k}"))
}

/// Adds to `would_win` each constraint that, flipped, lets an option win, in words.
fn flipped_constraints(facts: &Facts, wins: impl Fn(&Facts) -> bool, would_win: &mut Vec<String>) {
    let toggles: [Toggle; 4] = [
        (
            |f| f.runs_own_models ^= true,
            "if you ran no model of your own",
            "if you ran models of your own",
            facts.runs_own_models,
        ),
        (
            |f| f.aws_only ^= true,
            "if the fleet were not on AWS only",
            "on AWS only",
            facts.aws_only,
        ),
        (
            |f| f.heterogeneous ^= true,
            "with a homogeneous NVIDIA fleet",
            "with a heterogeneous or on-prem fleet",
            facts.heterogeneous,
        ),
        (
            |f| f.software_fractions ^= true,
            "without software GPU fractions",
            "if software GPU fractions were required",
            facts.software_fractions,
        ),
    ];
    for (flip, when_on, when_off, on) in toggles {
        let mut changed = facts.clone();
        flip(&mut changed);
        if wins(&changed) {
            would_win.push((if on { when_on } else { when_off }).to_owned());
        }
    }
}

pub fn evaluate(scenario: &Scenario, sizing: &Sizing) -> Decision {
    let facts = Facts::of(scenario, sizing);
    let (options, recommendation, reasons) = decide(&facts, &scenario.weights);
    let sensitivity = SENSITIVITY_GPUS
        .iter()
        .map(|&gpus| SensitivityPoint {
            gpus,
            recommendation: decide(&facts.at_size(gpus), &scenario.weights).1,
        })
        .collect();
    Decision {
        changes: what_would_change(&facts, &scenario.weights, recommendation),
        options,
        recommendation,
        reasons,
        gain_value_cents_per_year: facts.gain_value_cents_per_year(),
        baseline_gpus: facts.baseline_gpus,
        sensitivity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            gpus: 300,
            baseline_gpus: 300,
            platform_team: 2,
            aws_only: true,
            heterogeneous: false,
            software_fractions: false,
            fractions_class: None,
            runs_own_models: true,
            gain_points: 25.0,
            price_cents_per_gpu_hour: 400.0,
            engineer_cents_per_year: 25_000_000,
            short_for_separate: Vec::new(),
        }
    }

    fn pick(f: Facts) -> Architecture {
        decide(&f, &Weights::default()).1
    }

    fn reasons(f: Facts) -> Vec<Reason> {
        decide(&f, &Weights::default()).2
    }

    fn fired(f: Facts, start: &str) -> bool {
        reasons(f).iter().any(|r| r.text.starts_with(start))
    }

    #[test]
    fn a_up_to_40_cards_or_without_a_platform_team() {
        // "Up to ~40 cards" includes 40.
        for gpus in [1, 39, 40] {
            assert_eq!(pick(Facts { gpus, ..facts() }), Architecture::A, "{gpus}");
        }
        assert_ne!(
            pick(Facts {
                gpus: 41,
                ..facts()
            }),
            Architecture::A
        );
        assert_eq!(
            pick(Facts {
                gpus: 300,
                platform_team: 0,
                ..facts()
            }),
            Architecture::A
        );
    }

    #[test]
    fn c_on_aws_only_from_41_to_2000_cards_below_bs_scale() {
        let c_rule = "41-2,000 cards on AWS only";
        assert!(!fired(
            Facts {
                gpus: 40,
                ..facts()
            },
            c_rule
        ));
        assert!(fired(
            Facts {
                gpus: 41,
                ..facts()
            },
            c_rule
        ));
        assert!(fired(
            Facts {
                gpus: 2_000,
                ..facts()
            },
            c_rule
        ));
        assert!(!fired(
            Facts {
                gpus: 2_001,
                ..facts()
            },
            c_rule
        ));
        assert!(!fired(
            Facts {
                aws_only: false,
                ..facts()
            },
            c_rule
        ));
        // A team of 4 below 500 cards cannot justify B: still C.
        assert_eq!(
            pick(Facts {
                platform_team: 4,
                ..facts()
            }),
            Architecture::C
        );
        // At B's scale with a team of 4+, C's rule does not fire and B wins.
        assert!(!fired(
            Facts {
                gpus: 501,
                platform_team: 4,
                ..facts()
            },
            c_rule
        ));
        assert_eq!(
            pick(Facts {
                gpus: 50,
                ..facts()
            }),
            Architecture::C
        );
        assert_eq!(
            pick(Facts {
                gpus: 2_000,
                ..facts()
            }),
            Architecture::C
        );
        assert_ne!(
            pick(Facts {
                aws_only: false,
                ..facts()
            }),
            Architecture::C
        );
    }

    #[test]
    fn b_only_when_one_of_its_conditions_holds() {
        let b = |f: Facts| pick(f) == Architecture::B;
        // None holds: a small AWS-only fleet, a few platform engineers, NVIDIA only. Even
        // weights that favour B's base scores cannot pick an option no rule nominates.
        let none = Facts {
            gpus: 300,
            platform_team: 3,
            ..facts()
        };
        let favour_b = Weights {
            arbitration: 10.0,
            granularity: 10.0,
            utilisation: 10.0,
            isolation: 0.0,
            cost_to_maintain: 0.0,
        };
        let (_, pick_b, why) = decide(&none, &favour_b);
        assert_ne!(pick_b, Architecture::B);
        assert!(
            why.iter()
                .any(|r| r.architecture == Architecture::B && r.effect == Effect::Excludes),
            "{why:?}"
        );
        // Each condition on its own.
        assert!(b(Facts {
            gpus: 2_001,
            ..facts()
        }));
        assert!(b(Facts {
            gpus: 501,
            platform_team: 4,
            ..facts()
        }));
        assert!(!b(Facts {
            gpus: 500,
            platform_team: 4,
            ..facts()
        }));
        assert!(b(Facts {
            software_fractions: true,
            ..facts()
        }));
        assert!(b(Facts {
            heterogeneous: true,
            aws_only: false,
            ..facts()
        }));
        assert!(b(Facts {
            aws_only: false,
            ..facts()
        }));
    }

    /// The walk-through's case: cost to maintain weighted up, the managed API (D, never
    /// nominated while you run models of your own) outscores the recommendation; the decision
    /// says why it is still not the answer.
    #[test]
    fn an_option_that_outscores_the_recommendation_unnominated_is_explained() {
        let weights = Weights {
            cost_to_maintain: 10.0,
            arbitration: 0.0,
            granularity: 0.0,
            utilisation: 0.0,
            isolation: 0.0,
        };
        let (options, recommendation, reasons) = decide(&facts(), &weights);
        let score = |a: Architecture| {
            options
                .iter()
                .find(|o| o.architecture == a)
                .and_then(|o| o.score)
        };
        assert_ne!(recommendation, Architecture::D);
        assert!(
            score(Architecture::D) > score(recommendation),
            "{options:?}"
        );
        let decision = Decision {
            options,
            recommendation,
            reasons,
            gain_value_cents_per_year: 0,
            baseline_gpus: 0,
            sensitivity: Vec::new(),
            changes: Vec::new(),
        };
        let said = decision.outscored_unnominated();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with("Fully managed API scores")
                && said[0].contains("but no rule nominates it"),
            "{}",
            said[0]
        );
    }

    #[test]
    fn every_recommendation_is_nominated_by_a_rule_that_decided() {
        let sizes = [8u64, 40, 41, 100, 500, 501, 2_000, 2_001, 10_000];
        for gpus in sizes {
            for team in [0u32, 2, 4, 10] {
                for (aws_only, software_fractions, runs_own_models) in [
                    (true, false, true),
                    (false, false, true),
                    (true, true, true),
                    (true, false, false),
                ] {
                    for gain_points in [0.1, 25.0] {
                        let f = Facts {
                            gpus,
                            baseline_gpus: gpus,
                            platform_team: team,
                            aws_only,
                            software_fractions,
                            runs_own_models,
                            gain_points,
                            ..facts()
                        };
                        let (_, rec, why) = decide(&f, &Weights::default());
                        let named = why.iter().any(|r| {
                            r.architecture == rec
                                && r.effect == Effect::Nominates
                                && r.verdict == Verdict::Decided
                        });
                        assert!(named, "{f:?} → {rec:?}: {why:?}");
                        // Decided reasons come first; none contradicts the recommendation.
                        let first_outweighed = why
                            .iter()
                            .position(|r| r.verdict == Verdict::Outweighed)
                            .unwrap_or(why.len());
                        assert!(
                            why[first_outweighed..]
                                .iter()
                                .all(|r| r.verdict == Verdict::Outweighed)
                        );
                        for r in &why[..first_outweighed] {
                            let against_winner =
                                r.architecture == rec && r.effect != Effect::Nominates;
                            let for_loser = r.architecture != rec && r.effect == Effect::Nominates;
                            assert!(!against_winner && !for_loser, "{f:?}: {r:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn d_without_a_model_of_your_own() {
        assert_eq!(
            pick(Facts {
                runs_own_models: false,
                ..facts()
            }),
            Architecture::D
        );
        assert_eq!(
            pick(Facts {
                runs_own_models: false,
                gpus: 10_000,
                platform_team: 20,
                ..facts()
            }),
            Architecture::D
        );
    }

    #[test]
    fn b_is_ruled_out_when_the_gain_is_worth_less_than_one_engineer() {
        // 600 cards × 25 points × $4/h × 8,760 h = $5.3M: B is allowed when it fits.
        let rich = Facts {
            gpus: 600,
            baseline_gpus: 600,
            platform_team: 5,
            ..facts()
        };
        assert_eq!(pick(rich.clone()), Architecture::B);
        // 600 × 0.5 points × $4 × 8,760 = $105,120 < $250,000: C or D, not B.
        let poor = Facts {
            gain_points: 0.5,
            ..rich
        };
        assert_eq!(poor.gain_value_cents_per_year(), 10_512_000);
        assert_eq!(pick(poor.clone()), Architecture::C);
        let why = reasons(poor.clone());
        let rule = why
            .iter()
            .find(|r| r.text.starts_with("The utilisation gain is worth"))
            .expect("the value rule");
        assert_eq!(rule.verdict, Verdict::Decided);
        assert!(
            rule.text.contains("$105,120/year on 600 cards"),
            "{}",
            rule.text
        );
        // B's own rule fired too, and is marked as outweighed, not shown as deciding.
        let own = why
            .iter()
            .find(|r| r.text.starts_with("Over 500 cards"))
            .expect("B's rule");
        assert_eq!(own.verdict, Verdict::Outweighed);
        let non_aws = Facts {
            aws_only: false,
            ..poor
        };
        assert_eq!(pick(non_aws), Architecture::D);
    }

    #[test]
    fn the_gain_is_valued_on_the_baseline_not_the_fleet() {
        // 10,000 cards in the fleet, the gain measured on 8,000 cards of separate pools.
        let f = Facts {
            gpus: 10_000,
            baseline_gpus: 8_000,
            gain_points: 25.0,
            price_cents_per_gpu_hour: 300.0,
            ..facts()
        };
        // 8,000 × 0.25 × 300 cents × 8,760 h.
        assert_eq!(f.gain_value_cents_per_year(), 5_256_000_000);
        assert_eq!(f.at_size(5_000).baseline_gpus, 4_000);
    }

    #[test]
    fn a_fleet_short_for_separate_pools_counts_against_a() {
        let f = Facts {
            gpus: 30,
            short_for_separate: vec!["h100".into()],
            ..facts()
        };
        let why = reasons(f.clone());
        assert!(
            why.iter().any(|r| r.architecture == Architecture::A
                && r.effect == Effect::Counts
                && r.text.contains("short for separate pools on h100")),
            "{why:?}"
        );
        let plain = decide(&facts_at(30), &Weights::default()).0[0].score;
        let short = decide(&f, &Weights::default()).0[0].score;
        assert_eq!(short, plain.map(|s| s - DECISIVE));
    }

    fn facts_at(gpus: u64) -> Facts {
        Facts { gpus, ..facts() }
    }

    #[test]
    fn weights_change_scores() {
        let heavy = Weights {
            isolation: 10.0,
            ..Weights::default()
        };
        let (opts, _, _) = decide(&facts_at(20), &heavy);
        let (plain, _, _) = decide(&facts_at(20), &Weights::default());
        assert!(opts[0].score > plain[0].score);
    }
}
