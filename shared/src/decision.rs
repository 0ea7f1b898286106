//! The decision matrix over the four sharing architectures, with the manager's weights, the
//! rules that fired as reasons, and a sensitivity series over fleet size.
//!
//! Criteria are scored 0-5 per architecture (base scores from `../shared/DOMAIN.md`'s table);
//! rules then exclude options or adjust scores, and each rule that fires is listed.

use serde::{Deserialize, Serialize};

use crate::{
    catalogue::Vendor,
    label::Labelled,
    money::thousands,
    scenario::{Scenario, Weights},
    sizing::HOURS_PER_YEAR,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Architecture {
    /// Separate pools: nobody arbitrates; fixed at provisioning.
    A,
    /// Kubernetes with Kueue, KEDA, HAMi and Fluid, run by your own platform team.
    B,
    /// Managed Kueue-based governance (HyperPod task governance style).
    C,
    /// Fully managed per-token or per-job services.
    D,
}

impl Architecture {
    pub const ALL: [Architecture; 4] = [
        Architecture::A,
        Architecture::B,
        Architecture::C,
        Architecture::D,
    ];

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

impl Labelled for Architecture {
    fn label(self) -> &'static str {
        match self {
            Architecture::A => "Separate pools",
            Architecture::B => "Kueue + KEDA + HAMi + Fluid",
            Architecture::C => "Managed governance (HyperPod-style)",
            Architecture::D => "Fully managed API",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Architecture::A => "Each workload class keeps its own pool; nobody arbitrates.",
            Architecture::B => {
                "Kubernetes with Kueue, KEDA, HAMi and Fluid, run by your own platform team."
            }
            Architecture::C => "Managed Kueue-based task governance (HyperPod-style) on AWS.",
            Architecture::D => "Fully managed per-token or per-job services.",
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
    /// The rules that fired, in words.
    pub reasons: Vec<String>,
    /// Yearly value of the utilisation gain: extra busy GPUs × mean price × hours, in cents.
    pub gain_value_cents_per_year: i64,
    /// The recommendation as the fleet size varies (other inputs fixed).
    pub sensitivity: Vec<SensitivityPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensitivityPoint {
    pub gpus: u64,
    pub recommendation: Architecture,
}

/// The facts the rules read (fleet size varies in the sensitivity series).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Facts {
    pub gpus: u64,
    pub platform_team: u32,
    pub aws_only: bool,
    pub heterogeneous: bool,
    pub software_fractions: bool,
    pub runs_own_models: bool,
    /// Utilisation gain from sharing, in percentage points (busy).
    pub gain_points: f64,
    pub price_cents_per_gpu_hour: f64,
    pub engineer_cents_per_year: i64,
}

impl Facts {
    pub fn of(scenario: &Scenario, gain_points: f64) -> Self {
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
        Self {
            gpus,
            platform_team: c.platform_team_size,
            aws_only: c.aws_only,
            heterogeneous: c.heterogeneous
                || vendors.len() > 1
                || vendors.iter().any(|v| *v != Vendor::Nvidia),
            software_fractions: c.needs_software_fractions,
            runs_own_models: c.runs_own_models,
            gain_points,
            price_cents_per_gpu_hour: price,
            engineer_cents_per_year: c.platform_engineer_cost_cents_per_year,
        }
    }

    pub fn gain_value_cents_per_year(&self) -> i64 {
        (self.gpus as f64 * self.gain_points / 100.0
            * self.price_cents_per_gpu_hour
            * HOURS_PER_YEAR as f64)
            .round() as i64
    }
}

/// Thresholds of the rules, in cards (DOMAIN.md's decision rules).
pub const SMALL_FLEET: u64 = 40;
pub const MANAGED_FROM: u64 = 50;
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

/// Per-architecture adjustments and exclusions, as the rules fire.
struct Tally {
    adjust: [f64; 4],
    excluded: [bool; 4],
}

impl Tally {
    fn add(&mut self, arch: Architecture, points: f64) {
        self.adjust[arch.index()] += points;
    }

    fn exclude(&mut self, arch: Architecture) {
        self.excluded[arch.index()] = true;
    }
}

pub fn decide(facts: &Facts, weights: &Weights) -> (Vec<Scored>, Architecture, Vec<String>) {
    let w = [
        weights.arbitration,
        weights.granularity,
        weights.isolation,
        weights.cost_to_maintain,
        weights.utilisation,
    ];
    use Architecture::{A, B, C, D};
    let mut tally = Tally {
        adjust: [0.0; 4],
        excluded: [false; 4],
    };
    let mut reasons = Vec::new();

    if !facts.runs_own_models {
        for arch in [A, B, C] {
            tally.exclude(arch);
        }
        reasons.push(
            "No model of your own: a fully managed per-token or per-job service (D) fits."
                .to_owned(),
        );
    } else {
        tally.add(D, -STRONG_FIT);
        reasons.push(
            "You run models of your own: per-token services cover only part of that work (D)."
                .to_owned(),
        );
        if facts.gpus < SMALL_FLEET || facts.platform_team == 0 {
            tally.add(A, DECISIVE);
            reasons.push(format!(
                "{} cards{}: separate pools (A) are enough; sharing machinery would cost more than it saves.",
                facts.gpus,
                if facts.platform_team == 0 { " and no platform team" } else { "" }
            ));
        } else {
            tally.exclude(A);
            reasons.push(format!(
                "{} cards with a platform team: separate pools (A) would idle at 30-40%.",
                facts.gpus
            ));
        }
        // A small platform team: someone, but fewer than OWN_PLATFORM_TEAM people.
        let small_team = (1..OWN_PLATFORM_TEAM).contains(&facts.platform_team);
        if (MANAGED_FROM..=MANAGED_TO).contains(&facts.gpus) && facts.aws_only && small_team {
            tally.add(C, STRONG_FIT);
            reasons.push(format!(
                "{}-{} cards, AWS-only, small platform team: managed Kueue governance (C) fits.",
                thousands(MANAGED_FROM as i64),
                thousands(MANAGED_TO as i64)
            ));
        }
        if !facts.aws_only {
            tally.exclude(C);
            reasons.push(
                "Not AWS-only: the managed HyperPod-style option (C) is not available.".to_owned(),
            );
        }
        if facts.gpus > OWN_PLATFORM_FROM && facts.platform_team >= OWN_PLATFORM_TEAM {
            tally.add(B, STRONG_FIT);
            reasons.push(format!("Over {} cards with a platform team of {OWN_PLATFORM_TEAM} or more: run Kueue+KEDA+HAMi+Fluid yourself (B).", thousands(OWN_PLATFORM_FROM as i64)));
        }
        if facts.software_fractions {
            tally.add(B, STRONG_FIT);
            tally.exclude(C);
            reasons.push("Software GPU fractions (HAMi) are required: only B offers them; C has fractions through MIG only.".to_owned());
        }
        if facts.heterogeneous || !facts.aws_only {
            tally.add(B, SUPPORTING);
            reasons.push(
                "A heterogeneous or non-AWS fleet needs an open scheduler stack (B).".to_owned(),
            );
        }
        let value = facts.gain_value_cents_per_year();
        if value < facts.engineer_cents_per_year {
            tally.exclude(B);
            reasons.push(format!(
                "The utilisation gain is worth ${}/year, less than one platform engineer (${}/year): C or D, not B.",
                value / 100,
                facts.engineer_cents_per_year / 100
            ));
        }
    }
    let options: Vec<Scored> = Architecture::ALL
        .into_iter()
        .map(|arch| {
            let base: f64 = arch.base().iter().zip(&w).map(|(s, w)| s * w).sum();
            Scored {
                architecture: arch,
                title: arch.label().to_owned(),
                score: (!tally.excluded[arch.index()]).then_some(base + tally.adjust[arch.index()]),
            }
        })
        .collect();
    let mut best = options
        .iter()
        .filter_map(|o| o.score.map(|s| (s, o.architecture)))
        .fold(
            None,
            |best: Option<(f64, Architecture)>, (s, arch)| match best {
                Some((bs, _)) if bs >= s => best,
                _ => Some((s, arch)),
            },
        )
        .map(|(_, arch)| arch);
    if best.is_none() {
        // Every option excluded (B ruled out by value, C by the cloud): a managed service.
        reasons.push(
            "Every self-run option was ruled out: a fully managed service (D) remains.".to_owned(),
        );
        best = Some(Architecture::D);
    }
    (options, best.unwrap_or(Architecture::D), reasons)
}

/// Fleet sizes of the sensitivity series.
pub const SENSITIVITY_GPUS: [u64; 12] = [
    8, 16, 32, 40, 64, 128, 256, 500, 1_000, 2_000, 5_000, 10_000,
];

pub fn evaluate(scenario: &Scenario, gain_points: f64) -> Decision {
    let facts = Facts::of(scenario, gain_points);
    let (options, recommendation, reasons) = decide(&facts, &scenario.weights);
    let sensitivity = SENSITIVITY_GPUS
        .iter()
        .map(|&gpus| SensitivityPoint {
            gpus,
            recommendation: decide(&Facts { gpus, ..facts }, &scenario.weights).1,
        })
        .collect();
    Decision {
        options,
        recommendation,
        reasons,
        gain_value_cents_per_year: facts.gain_value_cents_per_year(),
        sensitivity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            gpus: 300,
            platform_team: 2,
            aws_only: true,
            heterogeneous: false,
            software_fractions: false,
            runs_own_models: true,
            gain_points: 25.0,
            price_cents_per_gpu_hour: 400.0,
            engineer_cents_per_year: 25_000_000,
        }
    }

    fn pick(f: Facts) -> Architecture {
        decide(&f, &Weights::default()).1
    }

    #[test]
    fn a_only_below_40_cards_or_without_a_platform_team() {
        assert_eq!(
            pick(Facts {
                gpus: 39,
                ..facts()
            }),
            Architecture::A
        );
        assert_ne!(
            pick(Facts {
                gpus: 40,
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
    fn c_from_50_to_2000_cards_aws_only_small_team() {
        assert_eq!(
            pick(Facts {
                gpus: 50,
                gain_points: 200.0,
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
        // Not AWS-only: C is out.
        assert_ne!(
            pick(Facts {
                aws_only: false,
                ..facts()
            }),
            Architecture::C
        );
        // A big team at scale: B.
        assert_eq!(
            pick(Facts {
                gpus: 2_000,
                platform_team: 6,
                ..facts()
            }),
            Architecture::B
        );
        assert_ne!(
            pick(Facts {
                gpus: 2_001,
                platform_team: 3,
                aws_only: true,
                ..facts()
            }),
            Architecture::A
        );
    }

    #[test]
    fn the_managed_window_is_50_to_2000_cards() {
        let fired = |f: Facts| {
            decide(&f, &Weights::default())
                .2
                .iter()
                .any(|r| r.starts_with("50-2,000 cards"))
        };
        assert!(!fired(Facts {
            gpus: 49,
            ..facts()
        }));
        assert!(fired(Facts {
            gpus: 50,
            ..facts()
        }));
        assert!(fired(Facts {
            gpus: 2_000,
            ..facts()
        }));
        assert!(!fired(Facts {
            gpus: 2_001,
            ..facts()
        }));
        assert!(
            !fired(Facts {
                platform_team: 4,
                ..facts()
            }),
            "a team of 4 is not small"
        );
        assert!(!fired(Facts {
            aws_only: false,
            ..facts()
        }));
    }

    #[test]
    fn b_above_500_with_a_team_of_4_and_for_fractions_or_heterogeneous_fleets() {
        assert_eq!(
            pick(Facts {
                gpus: 501,
                platform_team: 4,
                ..facts()
            }),
            Architecture::B
        );
        let fired = |f: Facts| {
            decide(&f, &Weights::default())
                .2
                .iter()
                .any(|r| r.starts_with("Over 500 cards"))
        };
        assert!(fired(Facts {
            gpus: 501,
            platform_team: 4,
            ..facts()
        }));
        assert!(!fired(Facts {
            gpus: 500,
            platform_team: 4,
            ..facts()
        }));
        assert!(!fired(Facts {
            gpus: 501,
            platform_team: 3,
            ..facts()
        }));
        assert_eq!(
            pick(Facts {
                gpus: 501,
                platform_team: 3,
                ..facts()
            }),
            Architecture::C
        );
        assert_eq!(
            pick(Facts {
                software_fractions: true,
                ..facts()
            }),
            Architecture::B
        );
        assert_eq!(
            pick(Facts {
                heterogeneous: true,
                aws_only: false,
                ..facts()
            }),
            Architecture::B
        );
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
        // 300 cards × 25 points × $4/h × 8,760 h = $2.6M: B is allowed when it fits.
        let rich = Facts {
            gpus: 600,
            platform_team: 5,
            ..facts()
        };
        assert_eq!(pick(rich), Architecture::B);
        // 600 × 0.5 points × $4 × 8,760 = $105k < $250k: C or D, not B.
        let poor = Facts {
            gain_points: 0.5,
            ..rich
        };
        assert!(matches!(pick(poor), Architecture::C | Architecture::D));
        let non_aws = Facts {
            aws_only: false,
            ..poor
        };
        assert_eq!(pick(non_aws), Architecture::D);
    }

    #[test]
    fn weights_change_scores() {
        let heavy = Weights {
            isolation: 10.0,
            ..Weights::default()
        };
        let (opts, _, _) = decide(
            &Facts {
                gpus: 20,
                ..facts()
            },
            &heavy,
        );
        let (plain, _, _) = decide(
            &Facts {
                gpus: 20,
                ..facts()
            },
            &Weights::default(),
        );
        assert!(opts[0].score > plain[0].score);
    }
}
