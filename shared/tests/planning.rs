//! The planning core on the shipped example scenarios: the decision each reaches, isolation,
//! warnings, validation with field paths, determinism (the manifests against the real CRD
//! schemas: `tests/crds.rs`).

// Reading fixtures is the test's job; the library never touches files (clippy.toml).
#![allow(clippy::disallowed_methods)]

use serde_json::{Value, json};
use shared::{
    fleet::sharing::Mechanism,
    planning::decision::Verdict,
    planning::isolation::{AllocationBase, WarningCode},
    planning::manifests,
    planning::scenario::{Accelerator, Scenario, Team, Workload, WorkloadKind},
    planning::sizing::Lever,
    planning::terms::Architecture,
    planning::{self, Evaluation},
};
use std::collections::BTreeMap;

fn scenario(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    planning::parse_scenario(&text).unwrap_or_else(|err| panic!("{path}: {err:?}"))
}

fn evaluate(s: &Scenario) -> Evaluation {
    planning::evaluate(s).unwrap_or_else(|err| panic!("{}: {err:?}", s.name))
}

#[test]
fn each_example_reaches_its_architecture() {
    for (name, want) in [
        ("startup-40", Architecture::A),
        ("aws-300", Architecture::C),
        ("bank-10000", Architecture::B),
        ("no-own-model", Architecture::D),
    ] {
        let e = evaluate(&scenario(name));
        assert_eq!(
            e.decision.recommendation, want,
            "{name}: {:?}",
            e.decision.reasons
        );
        assert!(!e.decision.reasons.is_empty());
        assert_eq!(
            e.decision.sensitivity.len(),
            shared::planning::decision::SENSITIVITY_GPUS.len()
        );
    }
}

#[test]
fn sharing_pays_on_every_example_and_the_simulation_holds_its_invariants() {
    for name in ["startup-40", "aws-300", "bank-10000", "no-own-model"] {
        let e = evaluate(&scenario(name));
        let s = &e.sizing;
        assert!(s.shared_pool.gpus <= s.separate_pools.gpus, "{name}");
        assert!(
            s.shared_pool.mean_busy_pct >= s.separate_pools.mean_busy_pct,
            "{name}"
        );
        let sim = &e.simulation;
        let capacity = sim.capacity_gpus as f64 * f64::from(sim.minutes);
        assert_eq!(
            sim.total.admitted_gpu_minutes + sim.idle_gpu_minutes,
            capacity,
            "{name}: GPU-minutes conserved"
        );
        assert_eq!(sim.total.peak_over_limit_gpus, 0, "{name}");
    }
}

#[test]
fn the_bank_gets_mig_for_tenants_hami_for_ascend_and_dra() {
    let e = evaluate(&scenario("bank-10000"));
    let class = |w: &str| {
        e.isolation
            .classes
            .iter()
            .find(|c| c.team == "bu-00" && c.workload == w)
            .expect("class")
    };
    assert_eq!(class("customer-llm").mechanism, Mechanism::Mig);
    assert_eq!(class("pretrain").mechanism, Mechanism::WholeGpu);
    // Risk evaluation takes 4 Ascend cards per job: whole cards; backtests take 16 GiB of one.
    assert_eq!(class("risk-eval").mechanism, Mechanism::WholeGpu);
    assert_eq!(
        class("backtests").mechanism,
        Mechanism::HamiFractions,
        "Ascend speaks only HAMi"
    );
    assert_eq!(class("lora").mechanism, Mechanism::HamiFractions);
    // Single-tenant OCR on the L20 (no MIG): MPS among one team's trusted workloads; the
    // archive backlog asks for throughput.
    assert_eq!(class("doc-ocr").mechanism, Mechanism::Mps);
    assert_eq!(class("archive-ocr").mechanism, Mechanism::Mps);
    assert!(
        e.isolation
            .classes
            .iter()
            .all(|c| c.allocation_base == AllocationBase::Dra)
    );
    // The gain's yearly value, by hand, on the baseline the sizing used (the separate pools'
    // cards): baseline × the busy gain in points / 100 × the fleet's mean price
    // (4,000×500 + 2,600×250 + 1,400×120 + 2,000×200 cents / 10,000 = 321.8 cents) × 8,760 h.
    let gain = &e.sizing.gain;
    assert_eq!(gain.gpus, e.sizing.separate_pools.gpus);
    assert_eq!(e.decision.baseline_gpus, gain.gpus);
    let by_hand = gain.gpus as f64 * (gain.to_pct - gain.from_pct) / 100.0 * 321.8 * 8_760.0;
    assert!((e.decision.gain_value_cents_per_year as f64 - by_hand).abs() < 1.0);
    // At ~10,000 cards that is far more than one engineer ($200,000 a year): ten times over.
    assert!(e.decision.gain_value_cents_per_year > 10 * 20_000_000);
}

#[test]
fn the_isolation_plan_reads_once_per_mechanism_and_reason() {
    let s = scenario("bank-10000");
    let e = evaluate(&s);
    let groups = e.isolation.groups();
    // Every class is in exactly one group, with its own mechanism.
    let mut seen: Vec<&str> = groups
        .iter()
        .flat_map(|g| g.classes.iter().map(String::as_str))
        .collect();
    assert_eq!(seen.len(), e.isolation.classes.len());
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), e.isolation.classes.len());
    for g in &groups {
        for (name, &per_card) in g.classes.iter().zip(&g.jobs_per_card) {
            let c = e
                .isolation
                .classes
                .iter()
                .find(|c| format!("{}/{}", c.team, c.workload) == *name)
                .expect("a class of the plan");
            assert_eq!((c.mechanism, &c.reasons), (g.mechanism, &g.reasons));
            assert_eq!(per_card, c.jobs_per_card, "{name}");
        }
    }
    // The business units repeat the same classes: each unit's customer LLM is in one group.
    let units = s
        .teams
        .iter()
        .filter(|t| t.workloads.iter().any(|w| w.name == "customer-llm"))
        .count();
    assert_eq!(units, 10, "the preset has ten business units");
    let llm = groups
        .iter()
        .find(|g| g.classes.contains(&"bu-00/customer-llm".to_owned()))
        .expect("a group holds bu-00's customer LLM");
    assert_eq!(
        llm.classes
            .iter()
            .filter(|c| c.ends_with("/customer-llm"))
            .count(),
        units
    );
    assert!(
        groups.len() * 5 < e.isolation.classes.len(),
        "{} groups of {} classes",
        groups.len(),
        e.isolation.classes.len()
    );
}

/// The bank's customer LLM (MIG for its five tenants) at its peak: 110 GPUs of traffic at a
/// 70% threshold is ⌈110 ÷ 0.7⌉ = 158 replicas per business unit, 1,580 in all, each 40 GiB.
/// NVIDIA's H100 table gives two 3g.40gb per GPU (start slices 0 and 4): 790 GPUs, the bound.
#[test]
fn mig_classes_are_laid_out_per_gpu_at_their_peak() {
    let e = evaluate(&scenario("bank-10000"));
    assert_eq!(
        e.mig.len(),
        1,
        "only the H100 flavor holds MIG classes: {:?}",
        e.mig.iter().map(|m| &m.flavor).collect::<Vec<_>>()
    );
    let h800 = &e.mig[0];
    assert_eq!(h800.flavor, "h800");
    let plan = h800.layout.as_ref().expect("laid out");
    for unit in 0..10 {
        let name = format!("bu-{unit:02}/customer-llm");
        let placed = plan
            .gpus
            .iter()
            .flat_map(|g| &g.instances)
            .filter(|i| i.replica == name)
            .count();
        assert_eq!(placed, 158, "{name}");
    }
    assert_eq!((plan.gpus.len(), plan.lower_bound_gpus), (790, 790));
    assert!(
        plan.gpus
            .iter()
            .flat_map(|g| &g.instances)
            .all(|i| i.profile == "3g.40gb")
    );
    assert!(
        plan.mig_parted_yaml.contains("\"3g.40gb\": 2"),
        "{}",
        plan.mig_parted_yaml
    );
}

/// What would make another option win, by the decision rules in docs/planning-rules.md: the AWS-only company
/// of 300 cards gets managed governance (C, 41-2,000 cards on AWS only); above 2,000 cards it
/// would run Kueue itself (B), as it would off AWS (B's "heterogeneous or non-AWS fleet") or
/// needing software fractions;
/// at 40 cards or fewer, separate pools (A); without a model of its own, a managed API (D).
#[test]
fn the_decision_says_what_would_change_it() {
    let e = evaluate(&scenario("aws-300"));
    assert_eq!(e.decision.recommendation, Architecture::C);
    let change = |arch: Architecture| {
        e.decision
            .changes
            .iter()
            .find(|c| c.architecture == arch)
            .map(|c| c.would_win.clone())
            .unwrap_or_else(|| panic!("no change listed for {arch:?}"))
    };
    assert!(
        e.decision
            .changes
            .iter()
            .all(|c| c.architecture != Architecture::C)
    );
    let b = change(Architecture::B);
    for want in [
        "from 2,001 GPUs",
        "if the fleet were not on AWS only",
        "if software GPU fractions were required",
    ] {
        assert!(b.iter().any(|t| t == want), "B: {b:?}");
    }
    assert!(
        change(Architecture::A).iter().any(|t| t == "up to 40 GPUs"),
        "{:?}",
        change(Architecture::A)
    );
    assert!(
        change(Architecture::D)
            .iter()
            .any(|t| t == "if you ran no model of your own"),
        "{:?}",
        change(Architecture::D)
    );
}

/// The walk-through's fleet: 200 cards and one team needing 4 GPUs, "Runs its own models"
/// ticked. A fully managed API wins (the fleet is far larger than the work), and its adoption
/// step speaks of the organisation's own models instead of saying it has none.
#[test]
fn the_adoption_plan_never_contradicts_the_constraints() {
    let mut s = Scenario::blank();
    s.fleet[0].count = 200;
    s.teams[0].nominal_gpus.insert("h100".into(), 200);
    s.teams[0].workloads[0].demand = Demand::Preset {
        preset: shared::planning::scenario::Preset::BusinessHoursDiurnal,
        peak_gpus: 4.0,
    };
    assert!(s.constraints.runs_own_models);
    let e = evaluate(&s);
    assert_eq!(e.decision.recommendation, Architecture::D);
    let step = &e.adoption[1];
    assert!(
        step.why
            .starts_with("Your own models' work is too small here"),
        "{step:?}"
    );
    assert!(
        e.adoption
            .iter()
            .all(|step| !step.why.contains("no model of your own"))
    );
}

/// The adoption plan follows the practitioners' order, and names the export's files.
#[test]
fn the_adoption_plan_measures_first_and_names_what_each_step_needs() {
    let titles = |e: &Evaluation| {
        e.adoption
            .iter()
            .map(|s| s.title.clone())
            .collect::<Vec<_>>()
    };
    let bank = evaluate(&scenario("bank-10000"));
    assert_eq!(
        titles(&bank),
        [
            "Measure real utilisation (DCGM, not requests)",
            "Split the workloads by isolation need",
            "Choose the sharing mechanism per class",
            "Quotas and queues per team",
            "Pack fractional work",
        ]
    );
    // Ten business units of nine classes each.
    assert!(
        bank.adoption[1].why.contains("of 90 workload classes"),
        "{}",
        bank.adoption[1].why
    );
    // Most classes first, ties by name: per business unit four whole-card classes (pretrain,
    // risk-eval, research, lora-sweeps), two HAMi (lora, backtests), two MPS (the OCRs), one
    // MIG (customer-llm).
    assert!(
        bank.adoption[2].why.starts_with(
            "Whole GPU for 40, HAMi fractions for 20, MPS for 20, MIG for 10 (the isolation plan above)."
        ),
        "{}",
        bank.adoption[2].why
    );
    let needs = bank.adoption[2].needs.join(" | ");
    assert!(
        needs.contains("mig-parted-h800.yaml") && needs.contains("hami-limits.yaml"),
        "{needs}"
    );
    assert!(
        bank.adoption[3]
            .why
            .starts_with("A queue with a nominal quota per flavor for each of the 10 teams,"),
        "{}",
        bank.adoption[3].why
    );
    let needs = bank.adoption[3].needs.join(" | ");
    assert!(
        needs.contains("kueue.yaml") && needs.contains("keda.yaml"),
        "{needs}"
    );
    // Forty cards keep separate pools; no own model moves to an API; both measure first.
    let startup = evaluate(&scenario("startup-40"));
    assert_eq!(
        titles(&startup)[1],
        "Keep separate pools, sized from the measurements"
    );
    assert_eq!(startup.adoption.len(), 2);
    let api = evaluate(&scenario("no-own-model"));
    assert_eq!(titles(&api)[1], "Move the work to a managed API");
    // Utilisation read off pod requests is called unproven.
    let mut guessed = scenario("aws-300");
    guessed.constraints.utilisation_measured_by =
        shared::planning::scenario::UtilisationSource::Requests;
    assert!(evaluate(&guessed).adoption[0].why.contains("pod requests"));
}

/// The case study: ~10,000 accelerators, separate pools at ~35% real utilisation, the same
/// fleet shared at 60%+, cost per million tokens down sharply.
#[test]
fn the_bank_preset_tells_the_case_studys_story() {
    let e = evaluate(&scenario("bank-10000"));
    let (sep, shared) = (&e.sizing.separate_pools, &e.sizing.shared_pool);
    assert!(
        (33.0..=37.0).contains(&sep.mean_busy_pct),
        "separate pools at ~35%: {}",
        sep.mean_busy_pct
    );
    assert!(
        shared.mean_busy_pct >= 60.0,
        "shared at 60%+: {}",
        shared.mean_busy_pct
    );
    // Where it comes from: the bars run from the separate pools' figure to the shared one's,
    // and the case's lever (training backlog borrowing the idle quota of others) is the largest.
    // Then the week takes it on: its cold starts and rework held on top of the work, less
    // what warm caches cut (the bank's replicas load from node caches).
    let w = &e.waterfall;
    assert_eq!(
        (w.from_pct, w.sized_pct),
        (sep.mean_busy_pct, shared.mean_busy_pct)
    );
    let sum = |bars: &[planning::sizing::Bar]| bars.iter().map(|b| b.points).sum::<f64>();
    let (sized, week) = w.bars.split_at(3);
    assert!(sized.iter().all(|b| !b.lever.in_week()) && week.iter().all(|b| b.lever.in_week()));
    assert!(
        (w.from_pct + sum(sized) - w.sized_pct).abs() < 1e-9,
        "{w:?}"
    );
    assert!((w.sized_pct + sum(week) - w.to_pct).abs() < 1e-9, "{w:?}");
    let points = |lever: Lever| {
        w.bars
            .iter()
            .find(|b| b.lever == lever)
            .map_or(0.0, |b| b.points)
    };
    assert!(points(Lever::PoolingPeaks) > 0.0, "{w:?}");
    assert!(
        points(Lever::Fractions) > 0.0,
        "the bank packs LoRA, backtests and OCR: {w:?}"
    );
    assert!(
        points(Lever::BacklogBorrowing) > points(Lever::PoolingPeaks).max(points(Lever::Fractions)),
        "{w:?}"
    );
    assert!(
        points(Lever::ColdStarts) < 0.0
            && points(Lever::WarmCaches) > 0.0
            && points(Lever::Rework) < 0.0,
        "{w:?}"
    );
    assert!(
        points(Lever::WarmCaches) <= -points(Lever::ColdStarts),
        "{w:?}"
    );
    // The separate pools are the fleet the bank had: within 1% of its 10,000 cards.
    let fleet = scenario("bank-10000").total_gpus();
    assert_eq!(fleet, 10_000);
    // 500 cards are in no business unit's nominal quota (9,500 of 10,000), and it says so.
    let outside: u64 = e
        .sizing
        .by_flavor
        .iter()
        .map(|f| f.outside_quota_gpus)
        .sum();
    assert_eq!(outside, 500);
    assert!(sep.gpus.abs_diff(fleet) <= fleet / 100, "{}", sep.gpus);
    // Sharing alone halves inference's cost per million tokens (the case's −60% also counts
    // five LoRA tenants on one base model, which this model does not credit).
    let (before, after) = (
        sep.cost_cents_per_million_tokens.expect("inference"),
        shared.cost_cents_per_million_tokens.expect("inference"),
    );
    assert!(after <= before * 0.55, "{before} → {after}");
    // The backlog is what fills the troughs: without it the same fleet barely moves.
    let mut dry = scenario("bank-10000");
    for w in dry.teams.iter_mut().flat_map(|t| &mut t.workloads) {
        w.backlog_gpus = 0.0;
    }
    let dry = evaluate(&dry);
    assert!(dry.sizing.shared_pool.mean_busy_pct < 50.0);
    // The week on the real fleet, under Kueue: well above the separate pools' 35%, with the
    // backlog's admitted GPU-hours reported on their own.
    let sim = &e.simulation.total;
    assert!(sim.busy_pct.expect("fleet") > 50.0, "{:?}", sim.busy_pct);
    assert!(sim.backlog_gpu_minutes > 0.0);
    assert_eq!(dry.simulation.total.backlog_gpu_minutes, 0.0);
}

/// Admitted and wanted count different things; each part is reported on its own and they
/// reconcile: this week's batch work admitted, less its rework, plus what is left at the end,
/// is what the profiles asked for (up to the random job lengths, ±50% around the mean).
#[test]
fn admitted_and_wanted_reconcile_part_by_part() {
    for name in ["startup-40", "aws-300", "bank-10000"] {
        let t = evaluate(&scenario(name)).simulation.total;
        let parts = t.batch_gpu_minutes
            + t.warm_start_gpu_minutes
            + t.backlog_gpu_minutes
            + t.replica_gpu_minutes;
        assert_eq!(parts, t.admitted_gpu_minutes, "{name}");
        let batch = t.batch_gpu_minutes - t.rework_gpu_hours * 60.0 + t.unfinished_gpu_minutes;
        let off = (batch - t.wanted_batch_gpu_minutes).abs() / t.wanted_batch_gpu_minutes;
        assert!(
            off < 0.05,
            "{name}: {batch} vs {}",
            t.wanted_batch_gpu_minutes
        );
        // Replicas hold more than the traffic they serve (KEDA's threshold is below 100%).
        assert!(
            t.replica_gpu_minutes > t.wanted_traffic_gpu_minutes,
            "{name}"
        );
    }
}

#[test]
fn at_40_cards_sharing_buys_little_and_says_so() {
    let e = evaluate(&scenario("startup-40"));
    assert!(
        e.sizing.gain.work_per_cost_factor < 1.2,
        "{:?}",
        e.sizing.gain
    );
    assert_eq!(e.decision.recommendation, Architecture::A);
    // The gain is worth less than an engineer, and the reason says so on the baseline.
    assert!(e.decision.gain_value_cents_per_year < 25_000_000);
}

#[test]
fn the_decision_and_the_isolation_plan_agree() {
    // aws-300 gets managed governance (C): no class may be planned on software fractions,
    // and a class that would have been says why it is on MIG instead.
    let e = evaluate(&scenario("aws-300"));
    assert_eq!(e.decision.recommendation, Architecture::C);
    assert!(
        e.isolation
            .classes
            .iter()
            .all(|c| !c.mechanism.is_software()),
        "{:?}",
        e.isolation.classes
    );
    let lora = e
        .isolation
        .classes
        .iter()
        .find(|c| c.workload == "lora")
        .expect("lora");
    assert_eq!(lora.mechanism, Mechanism::Mig);
    assert!(
        lora.reasons
            .iter()
            .any(|r| r.contains("fractions through MIG only"))
    );
    // A class on a GPU without MIG that needs sharing forces B, and the reason names it.
    let mut s = scenario("aws-300");
    s.fleet[1].gpu_model = "L40S-48GB".into();
    let e = evaluate(&s);
    assert_eq!(e.decision.recommendation, Architecture::B);
    let named = e
        .decision
        .reasons
        .iter()
        .filter(|r| r.verdict == Verdict::Decided)
        .any(|r| r.text.contains("foundation/eval (h200") && r.architecture == Architecture::C);
    assert!(named, "{:?}", e.decision.reasons);
}

#[test]
fn a_short_fleet_is_flagged_per_flavor() {
    // Cut the 300-card company's H100s from 236 to 120.
    let mut s = scenario("aws-300");
    s.fleet[0].count = 120;
    let e = evaluate(&s);
    let h100 = &e.sizing.by_flavor[0];
    assert_eq!(h100.fleet_gpus, 120);
    assert_eq!(h100.shared_fit, shared::planning::sizing::Fit::Short);
    let verdicts = h100.verdicts();
    assert!(
        verdicts[0].starts_with("h100: 120 cards are short for either option"),
        "{verdicts:?}"
    );
}

#[test]
fn anti_patterns_are_warned_about() {
    let mut s = scenario("aws-300");
    // The codes as clients read them: the JSON values.
    let codes = |s: &Scenario| -> Vec<String> {
        evaluate(s)
            .isolation
            .warnings
            .into_iter()
            .map(|w| {
                serde_json::to_value(w.code)
                    .expect("json")
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect()
    };
    // The preset keeps 12 H100s and 8 H200s outside every quota: no one can run on them.
    assert_eq!(
        codes(&s),
        vec!["outside_nominal_quota", "outside_nominal_quota"],
        "{:?}",
        codes(&s)
    );
    {
        let w = &mut s.teams[0].workloads[0];
        w.checkpoint_minutes = 0;
    }
    s.teams[1].workloads[0].checkpoint_minutes = 60;
    let inf = s.teams[2].workloads[0]
        .inference
        .as_mut()
        .expect("inference");
    inf.cooldown_s = 30;
    inf.activation_threshold_pct = 0;
    s.teams[2].workloads[0].current_isolation = Some(Mechanism::TimeSlicing);
    s.constraints.utilisation_measured_by = shared::planning::scenario::UtilisationSource::Requests;
    // The assistant scales to 80 GPUs: on a nominal quota of 60, 20 of them are borrowed;
    // and the quotas then add up to 8 more than the H100 fleet.
    s.teams[2].nominal_gpus.insert("h100".into(), 60);
    s.teams[1]
        .nominal_gpus
        .insert("h100".into(), 236 - 96 - 60 + 8);
    let got = codes(&s);
    for code in [
        "preemption_without_checkpoint",
        "rework_over_15_min",
        "keda_cooldown_in_seconds",
        "keda_activation_zero",
        "time_slicing_across_tenants",
        "utilisation_from_requests",
        "quota_above_capacity",
        "inference_on_borrowed_quota",
    ] {
        assert!(got.iter().any(|c| c == code), "{code} missing from {got:?}");
    }
    // startup-40's quotas hold 36 of 40 cards: with or without a cohort the other 4 are
    // unreachable.
    for cohort in [true, false] {
        let mut hard = scenario("startup-40");
        hard.quota.cohort = cohort;
        assert!(
            codes(&hard).iter().any(|c| c == "outside_nominal_quota"),
            "{:?}",
            codes(&hard)
        );
    }
}

#[test]
fn spot_advice_follows_replicas_checkpoints_and_cold_start() {
    let e = evaluate(&scenario("aws-300"));
    let spot = |w: &str| {
        e.isolation
            .spot
            .iter()
            .find(|s| s.workload == w)
            .expect("advice")
            .fits_spot
    };
    assert!(spot("assistant"), "4 replicas, 15 s warm start");
    assert!(spot("eval"));
    assert!(spot("lora"), "15-minute checkpoints");
    assert!(spot("pretrain"), "30-minute checkpoints");
    assert!(!spot("embeddings"), "2 replicas");
}

#[test]
fn bad_scenarios_are_refused_with_field_paths() {
    let mut s = scenario("aws-300");
    s.fleet[1].flavor = "H200!".into();
    s.teams[0].workloads[1].flavor = "nope".into();
    s.teams[1].workloads[0].gpus_per_job = 0;
    s.teams[0].workloads[0].restart_minutes = 1_441;
    s.teams[2].workloads[0].demand = shared::planning::scenario::Demand::Hourly {
        hourly_gpus: vec![1.0; 10],
    };
    s.constraints.kubernetes_version = "latest".into();
    let errors = planning::evaluate(&s).expect_err("invalid");
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    for want in [
        "fleet[1].flavor",
        "teams[0].workloads[1].flavor",
        "teams[1].workloads[0].gpus_per_job",
        "teams[0].workloads[0].restart_minutes",
        "teams[2].workloads[0].demand.hourly_gpus",
        "constraints.kubernetes_version",
    ] {
        assert!(paths.contains(&want), "{want} missing from {paths:?}");
    }
}

#[test]
fn job_memory_and_backlogs_are_checked_against_the_class() {
    let mut s = scenario("aws-300");
    // The pre-training job spans 16 GPUs: no per-job memory; the assistant's 200 GiB is
    // more than an H100 holds; inference has no backlog.
    s.teams[0].workloads[0].mem_mib_per_job = Some(20_480);
    s.teams[2].workloads[0].mem_mib_per_job = Some(200 * 1024);
    s.teams[2].workloads[0].backlog_gpus = 10.0;
    s.teams[1].workloads[0].backlog_gpus = -1.0;
    let errors = planning::evaluate(&s).expect_err("invalid");
    let message = |path: &str| {
        errors
            .iter()
            .find(|e| e.path == path)
            .unwrap_or_else(|| panic!("{path} missing from {errors:?}"))
            .message
            .clone()
    };
    assert!(message("teams[0].workloads[0].mem_mib_per_job").contains("spans GPUs"));
    assert!(
        message("teams[2].workloads[0].mem_mib_per_job").contains("the card's"),
        "{errors:?}"
    );
    assert!(message("teams[2].workloads[0].backlog_gpus").contains("only batch kinds"));
    assert!(message("teams[1].workloads[0].backlog_gpus").contains("between 0"));
}

#[test]
fn unknown_fields_and_wrong_types_are_refused_with_their_path() {
    // A complete, valid scenario: only the one change below can make it fail.
    let valid = serde_json::to_value(scenario("aws-300")).expect("json");
    assert!(planning::parse_scenario(&valid.to_string()).is_ok());
    let with = |change: &dyn Fn(&mut Value)| {
        let mut v = valid.clone();
        change(&mut v);
        planning::parse_scenario(&v.to_string()).expect_err("refused")[0].clone()
    };
    let err = with(&|v| v["colour"] = 1.into());
    assert_eq!(err.path, "colour");
    assert!(err.message.starts_with("unknown field `colour`"), "{err:?}");
    // Version 1's memory field: the catalogue supplies memory now.
    let err = with(&|v| v["fleet"][0]["mem_gib"] = 80.into());
    assert_eq!(err.path, "fleet[0].mem_gib");
    assert!(
        err.message.starts_with("unknown field `mem_gib`"),
        "{err:?}"
    );
    let err = with(&|v| v["fleet"][1]["count"] = (-3).into());
    assert_eq!(err.path, "fleet[1].count");
    assert!(err.message.contains("expected a whole number"), "{err:?}");
    assert!(!err.message.contains("u32"), "{err:?}");
    let err = with(&|v| v["teams"][0]["workloads"][0]["kind"] = "training".into());
    assert_eq!(err.path, "teams[0].workloads[0].kind");
    // A demand is one of its two shapes, each read back as written; both at once, or a preset
    // without its peak, is neither.
    let demand = |d: Value| with(&move |v| v["teams"][0]["workloads"][0]["demand"] = d.clone());
    for d in [
        json!({"preset": "flat", "peak_gpus": 8.0, "hourly_gpus": [1.0]}),
        json!({"preset": "flat"}),
    ] {
        let err = demand(d);
        assert_eq!(err.path, "teams[0].workloads[0].demand");
        assert!(err.message.contains("either hourly_gpus"), "{err:?}");
    }
    let err = demand(json!({"peak_gpus": 8.0, "shape": "flat"}));
    assert!(err.message.starts_with("unknown field `shape`"), "{err:?}");
    for d in [
        json!({"preset": "weekly_batch", "peak_gpus": 8.5}),
        json!({"hourly_gpus": vec![2.0; 168]}),
    ] {
        let mut v = valid.clone();
        v["teams"][0]["workloads"][0]["demand"] = d.clone();
        let read = planning::parse_scenario(&v.to_string()).expect("a demand as written");
        let back = serde_json::to_value(&read.teams[0].workloads[0].demand).expect("json");
        assert_eq!(back, d);
    }
}

#[test]
fn scenarios_over_the_cost_limits_are_refused_before_the_week_runs() {
    // One-minute, one-GPU jobs at 10,000 GPUs all week: 10,000 × 60 jobs an hour × 168 hours
    // (+ 10,000 running at the start) = 100,810,000 jobs.
    let mut s = scenario("aws-300");
    let w = &mut s.teams[0].workloads[0];
    w.gpus_per_job = 1;
    w.job_minutes = 1;
    w.demand = shared::planning::scenario::Demand::Preset {
        preset: shared::planning::scenario::Preset::Flat,
        peak_gpus: 10_000.0,
    };
    assert_eq!(s.estimated_jobs(), 100_810_000 + jobs_of_the_rest(&s));
    let errors = planning::evaluate(&s).expect_err("too much work");
    let too_many = errors
        .iter()
        .find(|e| e.message.contains("batch jobs in the week"))
        .expect("the job limit");
    assert_eq!(too_many.path, "teams");
    assert!(
        too_many.message.contains("at most 20,000,000"),
        "{}",
        too_many.message
    );

    // 10,000 teams are refused at once (validation is linear in the teams).
    let mut s = scenario("aws-300");
    let team = s.teams[0].clone();
    s.teams = (0..10_000)
        .map(|i| shared::planning::scenario::Team {
            name: format!("t{i}"),
            ..team.clone()
        })
        .collect();
    let errors = s.validate().expect_err("too many teams");
    assert!(
        errors
            .iter()
            .any(|e| e.path == "teams" && e.message == "at most 500 teams")
    );
}

/// A real 10,000-card fleet has millions of jobs a week: 10,000 H100s running one-GPU,
/// one-hour batch jobs all week are 10,000 running at the start plus 10,000 arriving each of
/// the 168 hours, 1,690,000 jobs, and the week runs every one of them.
#[test]
fn a_ten_thousand_card_fleet_of_one_hour_jobs_evaluates() {
    let mut s = scenario("startup-40");
    s.fleet[0].count = 10_000;
    s.teams.truncate(1);
    s.teams[0].nominal_gpus = [("h100".to_owned(), 10_000)].into_iter().collect();
    let w = &mut s.teams[0].workloads[0];
    w.kind = WorkloadKind::Batch;
    w.demand = shared::planning::scenario::Demand::Preset {
        preset: shared::planning::scenario::Preset::Flat,
        peak_gpus: 10_000.0,
    };
    w.gpus_per_job = 1;
    w.job_minutes = 60;
    s.teams[0].workloads.truncate(1);
    assert_eq!(s.estimated_jobs(), 1_690_000);
    let week = evaluate(&s).simulation.total;
    assert_eq!(week.jobs_submitted, 1_690_000);
}

/// The jobs the preset's other classes imply (unchanged by the test above).
fn jobs_of_the_rest(s: &Scenario) -> u64 {
    let mut rest = s.clone();
    rest.teams[0].workloads.remove(0);
    rest.estimated_jobs()
}

#[test]
fn a_fired_interrupt_stops_the_evaluation() {
    let stop = std::sync::atomic::AtomicBool::new(true);
    assert_eq!(
        planning::evaluate_until(&scenario("aws-300"), &stop).map(|_| ()),
        Err(planning::EvaluateError::Interrupted)
    );
}

#[test]
fn a_blank_scenario_and_every_new_entry_evaluate_as_they_are() {
    let mut s = Scenario::blank();
    assert_eq!(s.total_gpus(), 8);
    // One team holds the whole fleet as quota, so nothing sits outside every quota.
    let e = evaluate(&s);
    assert_eq!(e.sizing.by_flavor[0].outside_quota_gpus, 0);
    // Each entry the wizard adds is valid with its defaults.
    let flavor = s.free_flavor("h100");
    assert_eq!(flavor, "h100-2");
    s.fleet.push(Accelerator::new(&flavor, "L4-24GB", 80));
    let team = s.free_team("team-a");
    assert_eq!(team, "team-a-2");
    let mut t = Team::new(&team);
    for kind in WorkloadKind::ALL {
        t.workloads
            .push(Workload::new(&format!("w-{kind:?}"), kind, &flavor));
    }
    s.teams.push(t);
    assert_eq!(s.validate(), Ok(()));
    let e = evaluate(&s);
    assert_eq!(e.simulation.teams.len(), 2);
    // The new team holds no quota: its inference runs on borrowed quota, and is warned of.
    assert!(
        e.isolation
            .warnings
            .iter()
            .any(|w| w.message.contains("team-a-2")),
        "{:?}",
        e.isolation.warnings
    );
}

#[test]
fn renaming_a_flavor_follows_it_everywhere_and_removing_one_leaves_its_work_in_sight() {
    let mut s = scenario("startup-40");
    s.fleet.push(Accelerator::new("l4", "L4-24GB", 80));
    let before = s.clone();
    assert_eq!(
        s.rename_flavor("l4", "h100"),
        Err("another accelerator type is called h100".to_owned())
    );
    assert_eq!(s, before, "a refused rename changes nothing");
    s.rename_flavor("h100", "hopper").expect("a free name");
    s.fleet.pop();
    assert_eq!(s.validate(), Ok(()));
    assert_eq!(s.fleet[0].flavor, "hopper");
    assert!(
        s.teams
            .iter()
            .all(|t| t.nominal_gpus.contains_key("hopper") && !t.nominal_gpus.contains_key("h100"))
    );
    assert!(
        s.teams
            .iter()
            .flat_map(|t| &t.workloads)
            .all(|w| w.flavor == "hopper")
    );
    s.remove_flavor(0);
    assert!(s.teams.iter().all(|t| t.nominal_gpus.is_empty()));
    let errors = s.validate().expect_err("work on a removed flavor");
    assert!(errors.iter().any(|e| e.path == "fleet"));
    assert!(
        errors
            .iter()
            .any(|e| e.path == "teams[0].workloads[0].flavor"
                && e.message == "no such flavor in fleet"),
        "{errors:?}"
    );
}

/// Kueue's CRD rejects `borrowWithinCohort` with `reclaimWithinCohort: Never`; a scenario that
/// states both is refused by name, not exported to fail on apply.
#[test]
fn borrow_within_cohort_needs_a_cohort_that_reclaims() {
    let mut s = scenario("startup-40");
    s.quota.borrow_within_cohort.policy = shared::kueue::BorrowPolicy::LowerPriority;
    assert_eq!(s.validate(), Ok(()));
    for breaks in [
        |s: &mut Scenario| s.quota.reclaim_within_cohort = shared::kueue::Reclaim::Never,
        |s: &mut Scenario| s.quota.cohort = false,
    ] {
        let mut bad = s.clone();
        breaks(&mut bad);
        let errors = bad.validate().expect_err("refused");
        assert_eq!(
            errors[0].path, "quota.borrow_within_cohort.policy",
            "{errors:?}"
        );
    }
}

#[test]
fn accelerators_must_be_catalogue_models() {
    let mut s = scenario("aws-300");
    s.fleet[0].gpu_model = "H100-80GB".into();
    let errors = planning::evaluate(&s).expect_err("unknown model");
    assert_eq!(errors[0].path, "fleet[0].gpu_model");
    assert!(
        errors[0].message.contains("known models: "),
        "{:?}",
        errors[0]
    );
    assert!(
        errors[0].message.contains("H100-SXM5-80GB"),
        "{:?}",
        errors[0]
    );
}

#[test]
fn evaluation_is_deterministic_per_seed() {
    let s = scenario("aws-300");
    let a = serde_json::to_string(&evaluate(&s)).expect("json");
    let b = serde_json::to_string(&evaluate(&s)).expect("json");
    assert_eq!(a, b, "same seed, same bytes");
    let other = Scenario { seed: 7, ..s };
    assert_ne!(
        evaluate(&other).simulation,
        serde_json::from_str::<Evaluation>(&a)
            .expect("decode")
            .simulation
    );
}

// ---- The simulation's semantics on small hand-made weeks ----

use shared::{kueue::Queueing, planning::scenario::Demand};

/// Two teams on 16 GPUs: `owner` (nominal 16) runs bursts of inference; `borrower` (nominal 0)
/// trains on whatever the owner leaves idle.
fn two_teams(checkpoint_minutes: u32, cooldown_s: u32) -> Scenario {
    let mut s = scenario("startup-40");
    s.fleet[0].count = 16;
    s.teams.truncate(2);
    s.teams[0].name = "owner".into();
    s.teams[0].nominal_gpus.insert("h100".into(), 16);
    s.teams[1].name = "borrower".into();
    s.teams[1].nominal_gpus.insert("h100".into(), 0);
    let mut serve = s.teams[1].workloads[0].clone();
    // Traffic on for one hour, off for one hour, all week.
    serve.demand = Demand::Hourly {
        hourly_gpus: (0..168)
            .map(|h| if h % 2 == 0 { 8.0 } else { 0.0 })
            .collect(),
    };
    let inference = serve.inference.as_mut().expect("inference");
    inference.min_replicas = 0;
    inference.cooldown_s = cooldown_s;
    let mut train = s.teams[0].workloads[0].clone();
    train.demand = Demand::Preset {
        preset: shared::planning::scenario::Preset::Flat,
        peak_gpus: 16.0,
    };
    train.gpus_per_job = 8;
    train.job_minutes = 600;
    train.checkpoint_minutes = checkpoint_minutes;
    train.preemptible = true;
    s.teams[0].workloads = vec![serve];
    s.teams[1].workloads = vec![train];
    s
}

/// Kueue sorts each cycle's queue heads: within nominal quota first, then priority, then
/// creation; the team's index and the minute of the day do not matter.
#[test]
fn a_head_within_nominal_quota_goes_before_one_that_would_borrow() {
    // 8 cards; one team owns them all, the other owns none. Both have one 8-GPU job waiting at
    // the start of the week, and the borrower's cannot be evicted.
    let mut s = two_teams(30, 600);
    s.fleet[0].count = 8;
    s.teams[0].nominal_gpus.insert("h100".into(), 8);
    let mut train = s.teams[1].workloads[0].clone();
    train.demand = Demand::Hourly {
        hourly_gpus: std::iter::once(8.0).chain([0.0; 167]).collect(),
    };
    // Long jobs: the first hour's demand is the one job running at the start, no arrivals.
    train.job_minutes = 600;
    let mut borrowers = train.clone();
    borrowers.preemptible = false;
    // The borrower is listed first, so a rotation starting at team 0 would favour it.
    s.teams[0].name = "borrower".into();
    s.teams[0].nominal_gpus.insert("h100".into(), 0);
    s.teams[0].workloads = vec![borrowers];
    s.teams[1].name = "owner".into();
    s.teams[1].nominal_gpus.insert("h100".into(), 8);
    s.teams[1].workloads = vec![train];
    let sim = evaluate(&s).simulation;
    let (borrower, owner) = (&sim.teams[0], &sim.teams[1]);
    assert_eq!(
        owner.queue_wait_p50_min,
        Some(0.0),
        "the owner's head goes first"
    );
    assert!(
        borrower.queue_wait_p50_min.expect("admitted later") > 0.0,
        "{borrower:?}"
    );
}

/// One hour of `gpus` GPUs' worth of a class whose jobs take `job_gpus` for 600 minutes: the
/// demand that makes exactly one job arrive in `hour` (hour 0: one job running at the start).
fn one_job_in_hour(hour: usize, job_gpus: u32) -> Demand {
    let gpus = if hour == 0 {
        f64::from(job_gpus)
    } else {
        f64::from(job_gpus) * 600.0 / 60.0
    };
    Demand::Hourly {
        hourly_gpus: (0..168)
            .map(|h| if h == hour { gpus } else { 0.0 })
            .collect(),
    }
}

/// A team of one batch class holding `gpus` per job for 600 minutes (30 days when it starts
/// the week running), at `priority`.
fn batch_team(
    name: &str,
    nominal: u32,
    jobs: Vec<(u32, i32, usize)>,
) -> shared::planning::scenario::Team {
    let template = scenario("startup-40").teams[0].workloads[0].clone();
    shared::planning::scenario::Team {
        name: name.into(),
        nominal_gpus: [("h100".to_owned(), nominal)].into_iter().collect(),
        borrowing_limit_gpus: Default::default(),
        lending_limit_gpus: Default::default(),
        queue_wait_target_min: shared::planning::scenario::DEFAULT_QUEUE_WAIT_TARGET_MIN,
        workloads: jobs
            .into_iter()
            .enumerate()
            .map(
                |(i, (gpus, priority, hour))| shared::planning::scenario::Workload {
                    name: format!("w{i}"),
                    kind: WorkloadKind::Batch,
                    demand: one_job_in_hour(hour, gpus),
                    gpus_per_job: gpus,
                    job_minutes: if hour == 0 { 43_200 } else { 600 },
                    checkpoint_minutes: 30,
                    priority,
                    preemptible: true,
                    ..template.clone()
                },
            )
            .collect(),
    }
}

fn week_of(
    fleet_gpus: u32,
    teams: Vec<shared::planning::scenario::Team>,
) -> Vec<shared::planning::simulate::TeamStats> {
    week_under(fleet_gpus, teams, |_| {})
}

/// [`week_of`] with the quota policy as `policy` leaves it.
fn week_under(
    fleet_gpus: u32,
    teams: Vec<shared::planning::scenario::Team>,
    policy: impl FnOnce(&mut shared::planning::scenario::QuotaPolicy),
) -> Vec<shared::planning::simulate::TeamStats> {
    let mut s = scenario("startup-40");
    s.fleet[0].count = fleet_gpus;
    s.teams = teams;
    policy(&mut s.quota);
    evaluate(&s).simulation.teams
}

/// Kueue has no per-workload protection: `reclaimWithinCohort: Any` evicts whatever uses
/// borrowed quota, inference replicas included, whatever their priority.
#[test]
fn an_owner_reclaims_quota_from_borrowing_inference_replicas() {
    let mut s = two_teams(30, 600);
    s.fleet[0].count = 8;
    // Serving owns 4 cards and scales to 8 one-GPU replicas (5.6 GPUs' worth ÷ 70%), all
    // week, at priority 1000; training owns the other 4 and wants them from hour 2.
    let mut serve = s.teams[0].workloads[0].clone();
    serve.demand = Demand::Preset {
        preset: shared::planning::scenario::Preset::Flat,
        peak_gpus: 5.6,
    };
    serve.priority = 1000;
    let inference = serve.inference.as_mut().expect("inference");
    inference.max_replicas = 8;
    inference.threshold_pct = 70;
    s.teams[0].name = "serving".into();
    s.teams[0].nominal_gpus.insert("h100".into(), 4);
    s.teams[0].workloads = vec![serve];
    s.teams[1] = batch_team("training", 4, vec![(4, 10, 2)]);
    let sim = evaluate(&s).simulation;
    let (serving, training) = (&sim.teams[0], &sim.teams[1]);
    assert_eq!(
        serving.peak_borrowed_gpus, 4,
        "serving borrowed training's idle quota"
    );
    assert!(serving.preemptions >= 4, "{serving:?}");
    assert_eq!(
        training.queue_wait_p95_min,
        Some(1.0),
        "the owner's job within its nominal quota is admitted once the replicas terminate"
    );
    assert!(serving.unserved_inference_pct.expect("traffic") > 0.0);
    // And the advice says what would protect it.
    assert!(
        evaluate(&s)
            .isolation
            .warnings
            .iter()
            .any(|w| w.code == shared::planning::isolation::WarningCode::InferenceOnBorrowedQuota),
        "{:?}",
        evaluate(&s).isolation.warnings
    );
}

/// Victims from other queues: those of queues that are borrowing, lowest priority first,
/// whatever the queue's place in the list.
#[test]
fn reclaim_takes_the_lowest_priority_borrower_first() {
    // 8 cards, all the owner's; two borrowers each run one 4-GPU job from the start, the
    // first at priority 10, the second at priority 1. The owner's 4-GPU job comes in hour 1.
    let teams = week_of(
        8,
        vec![
            batch_team("important", 0, vec![(4, 10, 0)]),
            batch_team("cheap", 0, vec![(4, 1, 0)]),
            batch_team("owner", 8, vec![(4, 5, 1)]),
        ],
    );
    assert_eq!(teams[0].preemptions, 0, "{:?}", teams[0]);
    assert_eq!(teams[1].preemptions, 1, "{:?}", teams[1]);
    // Admitted a minute later, when the victim has terminated.
    assert_eq!(teams[2].queue_wait_p95_min, Some(1.0));
}

/// `reclaimWithinCohort: LowerPriority` takes back lent quota only from borrowers of lower
/// priority than the reclaiming job (`SatisfiesPreemptionPolicy`, Kueue's
/// pkg/scheduler/preemption/common/preemption_policy.go: `preemptorPriority >
/// candidatePriority`).
#[test]
fn reclaim_lower_priority_evicts_only_borrowers_below_the_owner() {
    // 8 cards. The borrower (nominal 4) runs two 4-GPU priority-10 jobs all week, the second on
    // the owner's lent quota; the owner's (nominal 4) 4-GPU job comes in hour 1.
    let teams = |owner_priority| {
        vec![
            batch_team("borrower", 4, vec![(4, 10, 0), (4, 10, 0)]),
            batch_team("owner", 4, vec![(4, owner_priority, 1)]),
        ]
    };
    let lower = |p: &mut shared::planning::scenario::QuotaPolicy| {
        p.reclaim_within_cohort = shared::kueue::Reclaim::LowerPriority;
    };
    // Priority 5 is below the borrower's 10: nothing is evicted, the owner waits until a
    // borrowed job ends (days), not for a termination.
    let below = week_under(8, teams(5), lower);
    assert_eq!(below[0].preemptions, 0, "{:?}", below[0]);
    let waited = below[1]
        .queue_wait_p95_min
        .expect("admitted once a job ends");
    assert!(waited > 24.0 * 60.0, "{:?}", below[1]);
    // Priority 20 is above it: one borrowed job goes, the owner starts a minute later.
    let above = week_under(8, teams(20), lower);
    assert_eq!(above[0].preemptions, 1, "{:?}", above[0]);
    assert_eq!(above[1].queue_wait_p95_min, Some(1.0), "{:?}", above[1]);
    // `Any` evicts it whatever the priorities.
    let any = week_under(8, teams(5), |p| {
        p.reclaim_within_cohort = shared::kueue::Reclaim::Any
    });
    assert_eq!(any[0].preemptions, 1, "{:?}", any[0]);
}

/// `borrowWithinCohort`: a job that must borrow evicts another queue's borrowed work only as
/// the policy allows (Kueue's `classifyPreemptionVariant` and `isAboveBorrowingThreshold`,
/// pkg/scheduler/preemption/classical/hierarchical_preemption.go: a candidate of lower
/// priority than the preemptor and at most `maxPriorityThreshold` may be evicted while it
/// borrows; with `Never` a queue at or over its nominal quota tries its own workloads alone,
/// `classicalPreemptions` in pkg/scheduler/preemption/preemption.go).
#[test]
fn a_borrowing_job_evicts_borrowed_work_only_as_borrow_within_cohort_allows() {
    // 9 cards. The lender (nominal 5) runs one 1-GPU job all week; the borrower (nominal 4)
    // runs two 4-GPU priority-1 jobs all week, the second on the lender's quota; the newcomer
    // (nominal 0) brings one 4-GPU priority-10 job in hour 1: it can only borrow.
    let teams = || {
        vec![
            batch_team("lender", 5, vec![(1, 0, 0)]),
            batch_team("borrower", 4, vec![(4, 1, 0), (4, 1, 0)]),
            batch_team("newcomer", 0, vec![(4, 10, 1)]),
        ]
    };
    let under = |policy, threshold| {
        week_under(9, teams(), |p| {
            p.borrow_within_cohort = shared::kueue::BorrowWithinCohort {
                policy,
                max_priority_threshold: threshold,
            };
        })
    };
    use shared::kueue::BorrowPolicy::{LowerPriority, Never};
    // Never: nothing is evicted; the newcomer waits until a borrowed job ends (days), not for
    // a termination.
    let never = under(Never, None);
    assert_eq!(never[1].preemptions, 0, "{:?}", never[1]);
    let waited = never[2]
        .queue_wait_p95_min
        .expect("admitted once a job ends");
    assert!(waited > 24.0 * 60.0, "{:?}", never[2]);
    // LowerPriority: the borrowed job (priority 1 < 10) goes; admitted a minute later.
    let lower = under(LowerPriority, None);
    assert_eq!(lower[1].preemptions, 1, "{:?}", lower[1]);
    assert_eq!(lower[2].queue_wait_p95_min, Some(1.0), "{:?}", lower[2]);
    // A threshold of 0 protects priority 1: as with Never. Of 1 it does not.
    assert_eq!(under(LowerPriority, Some(0))[1].preemptions, 0);
    assert_eq!(under(LowerPriority, Some(1))[1].preemptions, 1);
}

/// `withinClusterQueue: LowerOrNewerEqualPriority` lets a job evict its queue's jobs of its
/// own priority created after it (`SatisfiesPreemptionPolicy`: equal priority and
/// `preemptorTS.Before(candidateTS)`, the queue-order timestamp being the Workload's creation);
/// `LowerPriority` does not.
#[test]
fn an_older_job_evicts_a_newer_one_of_its_priority_only_under_lower_or_newer_equal() {
    // 8 cards, one queue, all at priority 0: a 4-GPU job in hour 1 (600 minutes), an 8-GPU job
    // in hour 2 that does not fit beside it, a 4-GPU job in hour 3 that does (BestEffortFIFO
    // lets it pass). When the first ends the 8-GPU job still needs the newer one's cards.
    let team = || vec![batch_team("team", 8, vec![(4, 0, 1), (8, 0, 2), (4, 0, 3)])];
    let newer = week_under(8, team(), |p| {
        p.within_cluster_queue = shared::kueue::WithinQueue::LowerOrNewerEqualPriority;
    });
    assert_eq!(
        newer[0].preemptions, 1,
        "the newer job goes: {:?}",
        newer[0]
    );
    let lower = week_under(8, team(), |p| {
        p.within_cluster_queue = shared::kueue::WithinQueue::LowerPriority;
    });
    assert_eq!(
        lower[0].preemptions, 0,
        "it waits for the newer one: {:?}",
        lower[0]
    );
}

/// Victims in the own queue are trimmed to the fewest needed: greedy in order (lowest
/// priority first), then each given back if the job fits without it.
#[test]
fn preemption_evicts_the_fewest_workloads_needed() {
    // 5 cards, one team: a 1-GPU job at priority 0 and a 4-GPU job at priority 1 run from the
    // start; a 4-GPU job at priority 10 comes in hour 1. Evicting the 1-GPU job alone frees
    // too little; with the 4-GPU job gone it is not needed: one eviction, not two.
    let teams = week_of(
        5,
        vec![batch_team(
            "team",
            5,
            vec![(1, 0, 0), (4, 1, 0), (4, 10, 1)],
        )],
    );
    assert_eq!(teams[0].preemptions, 1, "{:?}", teams[0]);
    // The two jobs running at the start waited 0; the preemptor waited one minute, for its
    // victim to terminate (Kueue admits it once the evicted pods are gone).
    assert_eq!(teams[0].queue_wait_p95_min, Some(1.0));
}

/// Kueue v0.19's classical preemption (pkg/scheduler/preemption/preemption.go,
/// `classicalPreemptions`; candidates from classical/candidate_generator.go): a ClusterQueue
/// strictly under its nominal quota whose workload would take it over nominal tries first,
/// without borrowing, the borrowing queues' workloads (`reclaimWithinCohort`) and then its own
/// lower-priority ones (`withinClusterQueue: LowerPriority`), in that order; a borrowing queue's
/// workload stops being a candidate once that queue is back within nominal; the set is then
/// filled back to the fewest that still make room.
#[test]
fn a_queue_under_nominal_reclaims_and_preempts_its_own_lower_priority_work_together() {
    // 16 cards. A (nominal 8) runs a 4-GPU priority-10 job; B (nominal 8) runs three 4-GPU
    // jobs, borrowing 4. In hour 1 an 8-GPU priority-100 job arrives for A: 4 + 8 > 8, so it
    // cannot land within nominal by reclaiming alone. Removing B's newest job takes B back to
    // nominal (its other jobs are then no candidates); removing A's own job lets the new one
    // fit within nominal: both are evicted, and it is admitted.
    let teams = week_of(
        16,
        vec![
            batch_team("a", 8, vec![(4, 10, 0), (8, 100, 1)]),
            batch_team("b", 8, vec![(4, 10, 0), (4, 10, 0), (4, 10, 0)]),
        ],
    );
    assert_eq!(
        teams[1].preemptions, 1,
        "one of B's borrowed jobs: {:?}",
        teams[1]
    );
    assert_eq!(
        teams[0].preemptions, 1,
        "and A's own lower-priority job: {:?}",
        teams[0]
    );
    // Its victims terminate within the minute; the job is admitted the minute after it came.
    assert_eq!(teams[0].queue_wait_p95_min, Some(1.0), "{:?}", teams[0]);
}

/// Kueue's scheduling cycle (pkg/scheduler/scheduler.go, `schedule`) takes one head per
/// ClusterQueue (`queues.Heads`), orders them (`makeClassicalIterator`: within nominal quota
/// before borrowing, then priority, then FIFO) and admits those that fit; the next head of a
/// queue waits for the next cycle. A queue's second workload therefore never borrows ahead of
/// another queue's first.
#[test]
fn each_scheduling_cycle_takes_one_head_per_cluster_queue() {
    // 8 cards. X (nominal 4) has two 4-GPU jobs, Y (nominal 4) one, all queued at minute 0.
    // Cycle 1: X's first and Y's fit within nominal and are admitted. Cycle 2: X's second would
    // borrow, nothing is free, and it may not preempt work of its own priority: it waits.
    let teams = week_of(
        8,
        vec![
            batch_team("x", 4, vec![(4, 10, 0), (4, 10, 0)]),
            batch_team("y", 4, vec![(4, 10, 0)]),
        ],
    );
    assert_eq!(teams[0].preemptions + teams[1].preemptions, 0, "{teams:?}");
    assert_eq!(
        teams[1].queue_wait_p95_min,
        Some(0.0),
        "Y's head goes in cycle 1"
    );
    assert!(
        teams[0].queue_wait_p95_min.expect("X's second") > 0.0,
        "{:?}",
        teams[0]
    );
}

/// A preemptor is admitted only once its victims have terminated, and meanwhile it stays the
/// head of its ClusterQueue: the scheduler requeues it with `RequeueReasonPendingPreemption`
/// (pkg/scheduler/scheduler.go, `processEntry`), which puts it straight back and makes it
/// sticky at the head of a BestEffortFIFO queue (pkg/cache/queue/cluster_queue.go,
/// `requeueIfNotPresent`, Kueue#12740). A queue that must reclaim for sixteen replicas
/// therefore reclaims one termination at a time.
#[test]
fn replicas_reclaim_one_termination_at_a_time() {
    let mut s = two_teams(30, 300);
    s.teams[0].name = "serving".into();
    s.teams[0].nominal_gpus.insert("h100".into(), 16);
    let serve = &mut s.teams[0].workloads[0];
    serve.gpus_per_job = 1;
    // 11.2 GPUs' worth in hour 1 only: ⌈11.2 ÷ 70%⌉ = 16 one-GPU replicas from minute 60.
    serve.demand = Demand::Hourly {
        hourly_gpus: (0..168).map(|h| if h == 1 { 11.2 } else { 0.0 }).collect(),
    };
    let inference = serve.inference.as_mut().expect("inference");
    inference.threshold_pct = 70;
    inference.min_replicas = 0;
    inference.max_replicas = 16;
    inference.cold_start_s = 60;
    inference.warm_cache_cold_start_s = None;
    // The borrower holds all 16 cards with elastic one-GPU work all week.
    let borrow = &mut s.teams[1].workloads[0];
    borrow.gpus_per_job = 1;
    borrow.job_minutes = 43_200;
    borrow.demand = Demand::Hourly {
        hourly_gpus: vec![0.0; 168],
    };
    borrow.backlog_gpus = 16.0;
    let sim = evaluate(&s).simulation;
    // Replica k (0-15) evicts one borrower at minute 60 + k, starts at 61 + k once it has
    // terminated, and serves from 62 + k after its one-minute cold start. Unserved, in GPUs'
    // worth × minutes: 11.2 at minutes 60 and 61, then 11.2 − r with r ready (r = 1..11) until
    // minute 72: 22.4 + 11 × 11.2 − 66 = 79.6 of the hour's 11.2 × 60 = 672.
    let unserved = sim.teams[0].unserved_inference_pct.expect("traffic");
    assert!(
        (unserved - 79.6 / 672.0 * 100.0).abs() < 1e-9,
        "{unserved}% unserved"
    );
}

/// The message of the evaluation's warning with `code`.
fn warning(e: &Evaluation, code: WarningCode) -> String {
    e.isolation
        .warnings
        .iter()
        .find(|w| w.code == code)
        .unwrap_or_else(|| panic!("no {code:?} in {:?}", e.isolation.warnings))
        .message
        .clone()
}

/// Kueue admits on quota, not on nodes: with nominal quotas adding up to more than a flavor's
/// cards, a workload within its queue's nominal quota is admitted and its pods wait Pending
/// for a node; the other queue is within its own nominal quota, so there is nothing to
/// preempt (cluster_queue.md: quota is the only admission check; the pods are the
/// kube-scheduler's).
#[test]
fn quota_above_the_cards_leaves_admitted_pods_pending_and_preempts_nothing() {
    // 8 cards; A and B each hold a nominal quota of 8 and queue one 8-GPU job at minute 0.
    let job = |name: &str| {
        let mut t = batch_team(name, 8, vec![(8, 10, 0)]);
        t.workloads[0].job_minutes = 600;
        t
    };
    let mut s = scenario("startup-40");
    s.fleet[0].count = 8;
    s.teams = vec![job("a"), job("b")];
    let e = evaluate(&s);
    let (a, b) = (&e.simulation.teams[0], &e.simulation.teams[1]);
    assert_eq!(a.preemptions + b.preemptions, 0, "{a:?} {b:?}");
    // Both are admitted at minute 0; A's pods take the 8 cards, B's wait until A's job ends.
    assert_eq!(
        (a.queue_wait_p95_min, a.pending_gpu_minutes),
        (Some(0.0), 0.0)
    );
    let waited = b.queue_wait_p95_min.expect("B's job ran");
    assert!(waited > 0.0);
    assert_eq!(b.pending_gpu_minutes, 8.0 * waited, "{b:?}");
    let warning = warning(&e, WarningCode::QuotaAboveCapacity);
    assert!(
        warning.contains("add up to 16 of 8 GPUs") && warning.contains("lower the quotas by 8"),
        "{warning}"
    );
}

/// A ClusterQueue borrows only what other ClusterQueues of its cohort leave unused of their
/// nominal quota ("a ClusterQueue can borrow up to the sum of nominal quotas from all the
/// ClusterQueues in the cohort", Kueue's cluster_queue.md): cards in no quota serve no one
/// unless a Cohort holds quota for them.
#[test]
fn cards_outside_every_quota_serve_no_one() {
    // 16 cards, one team with a nominal quota of 8 and 16 GPUs' worth of one-GPU work.
    let mut s = scenario("startup-40");
    s.fleet[0].count = 16;
    let mut team = batch_team("only", 8, vec![(1, 10, 0)]);
    team.workloads[0].demand = Demand::Hourly {
        hourly_gpus: vec![16.0; 168],
    };
    team.workloads[0].job_minutes = 60;
    s.teams = vec![team];
    let e = evaluate(&s);
    let only = &e.simulation.teams[0];
    assert_eq!(only.peak_borrowed_gpus, 0, "{only:?}");
    let allocated = e.simulation.total.allocated_pct.expect("a fleet");
    assert!(allocated <= 50.0 + 1e-9, "{allocated}% of the fleet");
    let warning = warning(&e, WarningCode::OutsideNominalQuota);
    assert!(
        warning.contains("8 of 16 GPUs on h100 are in no team's nominal quota")
            && warning.contains("A Cohort with a nominalQuota of 8 for h100"),
        "{warning}"
    );
}

/// A scenario of 8 + 8 H100s as two flavors, `a` and `b`, in that order.
fn two_h100_flavors(teams: Vec<Team>) -> Scenario {
    let mut s = scenario("startup-40");
    s.fleet[0].flavor = "a".into();
    s.fleet[0].count = 8;
    let mut b = s.fleet[0].clone();
    b.flavor = "b".into();
    s.fleet.push(b);
    s.teams = teams;
    for w in s.teams.iter_mut().flat_map(|t| &mut t.workloads) {
        w.flavor = "a".into();
    }
    s
}

/// `team` with nominal quotas of `a` and `b` GPUs on the flavors of [`two_h100_flavors`].
fn on_two_flavors(mut team: Team, a: u32, b: u32) -> Team {
    team.nominal_gpus = [("a".to_owned(), a), ("b".to_owned(), b)].into();
    team
}

/// Kueue's flavor fungibility (cluster_queue.md, "FlavorFungibility"): a workload may take any
/// flavor of its ClusterQueue's resource group that its pods' node selector allows, tried in
/// order; the first where it fits is taken. The exported queues list both H100 flavors in one
/// resource group and the pods select the model, so two flavors of one model serve as one pool.
#[test]
fn two_flavors_of_one_model_serve_as_one_pool() {
    // One team, nominal 8 on each flavor, two 8-GPU jobs queued at minute 0 (the class names
    // flavor a): the first fits a within nominal, the second fits b within nominal.
    let s = two_h100_flavors(vec![on_two_flavors(
        batch_team("t", 0, vec![(8, 10, 0), (8, 10, 0)]),
        8,
        8,
    )]);
    let t = &evaluate(&s).simulation.teams[0];
    assert_eq!(t.queue_wait_p95_min, Some(0.0), "both start at once: {t:?}");
    assert_eq!((t.peak_borrowed_gpus, t.preemptions), (0, 0), "{t:?}");
    // The export: each flavor also pins its own nodes, the queues list both in one resource
    // group, and a pod that selects the model is admissible there (on a, the first).
    let setup = manifests::kueue_setup(&s, &shared::planning::isolation_plan(&s));
    for flavor in &setup.flavors {
        assert_eq!(
            flavor.node_labels.get(manifests::FLAVOR_LABEL),
            Some(&flavor.name)
        );
    }
    let acc = &s.fleet[0];
    let pod = shared::kueue::PodRequest {
        namespace: "t".into(),
        queue_name: Some("t".into()),
        requests: [(acc.resource().to_owned(), 8)].into(),
        node_selector: [(
            acc.vendor().product_label().to_owned(),
            "NVIDIA-H100-80GB-HBM3".to_owned(),
        )]
        .into(),
        tolerations: Vec::new(),
    };
    assert_eq!(
        setup.admits(&pod, &shared::kueue::ManagerConfig::default()),
        Ok("a".to_owned())
    );
}

/// With Kueue's defaults the search stops at the first flavor where the workload fits by
/// borrowing (`whenCanBorrow: MayStopSearch`), even when a later flavor holds the queue's own
/// nominal quota; and a flavor that needs preemption is passed for a later one that fits by
/// borrowing (`whenCanPreempt: TryNextFlavor`; "out of the considered ResourceFlavors, Kueue
/// selects a one that fits the workload using borrowing (without preemptions)",
/// cluster_queue.md, "FlavorFungibility").
#[test]
fn a_flavor_that_fits_by_borrowing_ends_the_search() {
    // X owns b, Y owns a and is idle until hour 1. X's 8-GPU job at minute 0 fits a by
    // borrowing Y's idle quota and is admitted there. Y's own job then needs preemption on a,
    // but fits b by borrowing X's idle quota: it is admitted on b and nobody is evicted.
    let s = two_h100_flavors(vec![
        on_two_flavors(batch_team("x", 0, vec![(8, 10, 0)]), 0, 8),
        on_two_flavors(batch_team("y", 0, vec![(8, 10, 1)]), 8, 0),
    ]);
    let sim = evaluate(&s).simulation;
    let (x, y) = (&sim.teams[0], &sim.teams[1]);
    assert_eq!(
        x.peak_borrowed_gpus, 8,
        "X borrowed a rather than use b: {x:?}"
    );
    assert_eq!(
        y.peak_borrowed_gpus, 8,
        "Y borrowed b rather than reclaim a: {y:?}"
    );
    assert_eq!(x.preemptions + y.preemptions, 0, "{x:?} {y:?}");
    assert_eq!(y.queue_wait_p95_min, Some(0.0), "{y:?}");
}

/// An evicted job, once admitted again, pulls its image and loads its checkpoint before it
/// works: that restart is rework on top of the work lost since the checkpoint.
#[test]
fn a_restart_after_eviction_is_rework() {
    // 4 cards. A borrower runs one 4-GPU job from the start; the owner's 4-GPU job comes in
    // hour 1 and evicts it; the borrower's job runs again once the owner's ends.
    let rework = |restart_minutes: u32| {
        let mut borrower = batch_team("borrower", 0, vec![(4, 10, 0)]);
        borrower.workloads[0].restart_minutes = restart_minutes;
        let teams = week_of(4, vec![borrower, batch_team("owner", 4, vec![(4, 10, 1)])]);
        assert_eq!(teams[0].preemptions, 1, "{:?}", teams[0]);
        teams[0].rework_gpu_hours
    };
    // The same eviction, the same work lost; 10 minutes of restart on 4 GPUs more.
    let (none, ten) = (rework(0), rework(10));
    assert!(
        (ten - none - 4.0 * 10.0 / 60.0).abs() < 1e-9,
        "{none} → {ten}"
    );
}

#[test]
fn owners_reclaim_lent_quota_and_borrowers_pay_in_rework() {
    let with = evaluate(&two_teams(30, 600)).simulation;
    let (owner, borrower) = (&with.teams[0], &with.teams[1]);
    assert!(
        borrower.peak_borrowed_gpus > 0,
        "the borrower ran on lent quota"
    );
    assert!(
        borrower.preemptions > 0,
        "and was evicted when the owner's traffic came back"
    );
    assert!(owner.preemptions_caused_by_scale_up > 0);
    // Without checkpoints every eviction loses the whole run so far: more rework.
    let without = evaluate(&two_teams(0, 600)).simulation;
    assert!(without.teams[1].rework_gpu_hours > with.teams[1].rework_gpu_hours);
    // Checkpoints every 30 minutes bound the loss per eviction (8 GPUs × under 30 minutes).
    assert!(with.teams[1].rework_gpu_hours <= with.teams[1].preemptions as f64 * 8.0 * 0.5);
}

#[test]
fn bursts_flap_and_scale_to_zero_leaves_traffic_unserved() {
    // Traffic comes and goes every hour: replicas go down and up again each time (flapping).
    // A 30-second cooldown drops to zero in every gap, so each burst starts with a cold start;
    // a 90-minute cooldown keeps one replica warm through the hour-long gaps.
    let to_zero = evaluate(&two_teams(30, 30)).simulation.teams[0].clone();
    let warm_one = evaluate(&two_teams(30, 90 * 60)).simulation.teams[0].clone();
    assert!(to_zero.flapping_cycles >= 80, "{}", to_zero.flapping_cycles);
    assert!(
        warm_one.flapping_cycles >= 80,
        "{}",
        warm_one.flapping_cycles
    );
    let unserved =
        |s: &shared::planning::simulate::TeamStats| s.unserved_inference_pct.expect("inference");
    assert!(
        unserved(&to_zero) > unserved(&warm_one),
        "{} vs {}",
        unserved(&to_zero),
        unserved(&warm_one)
    );
}

#[test]
fn strict_fifo_lets_a_big_head_block_the_queue() {
    let mut s = scenario("startup-40");
    s.teams.truncate(1);
    s.quota.cohort = false;
    // withinClusterQueue: Never, so the big job cannot evict the small ones (Kueue has no
    // per-workload protection: only the queue's policy keeps them).
    s.quota.within_cluster_queue = shared::kueue::WithinQueue::Never;
    s.teams[0].nominal_gpus.insert("h100".into(), 24);
    // The big job heads the queue (higher priority).
    let mut big = s.teams[0].workloads[0].clone();
    big.kind = WorkloadKind::PreTraining;
    big.gpus_per_job = 24;
    big.priority = 30;
    big.demand = Demand::Preset {
        preset: shared::planning::scenario::Preset::Flat,
        peak_gpus: 12.0,
    };
    let mut small = s.teams[0].workloads[1].clone();
    small.gpus_per_job = 1;
    small.priority = 0;
    small.demand = Demand::Preset {
        preset: shared::planning::scenario::Preset::Flat,
        peak_gpus: 8.0,
    };
    s.teams[0].workloads = vec![big, small];
    let p95 = |queueing| {
        let mut s = s.clone();
        s.quota.queueing = queueing;
        evaluate(&s)
            .simulation
            .total
            .queue_wait_p95_min
            .expect("waits")
    };
    assert!(p95(Queueing::StrictFifo) > p95(Queueing::BestEffortFifo));
}

#[test]
fn an_inactive_scaled_object_drops_to_zero_after_cooldown_even_with_trickle_traffic() {
    // A trickle below activationThreshold (5% of a replica) all week after a busy first hour.
    let mut s = two_teams(30, 300);
    s.teams[0].workloads[0].demand = Demand::Hourly {
        hourly_gpus: (0..168).map(|h| if h == 0 { 4.0 } else { 0.01 }).collect(),
    };
    let sim = evaluate(&s).simulation;
    // Replicas were admitted for the first hour only: far fewer GPU-minutes than a week of one
    // replica (10,080) would be, and the trickle goes unserved.
    assert!(
        sim.teams[0].admitted_gpu_minutes < 2_000.0,
        "{}",
        sim.teams[0].admitted_gpu_minutes
    );
    assert!(sim.teams[0].unserved_inference_pct.expect("inference") > 0.0);
}

/// A node-local cache helps only once it holds the weights: the first start of each replica
/// slot fetches them from object storage.
#[test]
fn a_warm_cache_helps_only_after_it_has_been_filled() {
    let unserved = |cold_start_s: u32, warm: Option<u32>| {
        let mut s = two_teams(30, 600);
        let inference = s.teams[0].workloads[0]
            .inference
            .as_mut()
            .expect("inference");
        inference.cold_start_s = cold_start_s;
        inference.warm_cache_cold_start_s = warm;
        evaluate(&s).simulation.teams[0]
            .unserved_inference_pct
            .expect("traffic")
    };
    let (slow, cached, fast) = (
        unserved(600, None),
        unserved(600, Some(60)),
        unserved(60, None),
    );
    assert!(
        cached < slow,
        "a warm cache shortens restarts: {cached} vs {slow}"
    );
    assert!(
        cached > fast,
        "but the first start of each replica is a full cold start: {cached} vs {fast}"
    );
}

/// Two bursts of 4 GPUs' traffic (hours 0 and 2): six one-GPU replicas each (⌈4 ÷ 0.7⌉), a
/// 5-minute cold start from object storage and 1 minute from a warm node cache. The first burst
/// fills six replica slots' caches from storage: 6 × 5 = 30 GPU-minutes loading; the second
/// loads from those caches: 6 × 1 = 6, and the caches cut 6 × 4 = 24. The waterfall's week bars
/// hold those on top of the pool's work, as shares of the fleet's 16 × 10,080 GPU-minutes.
#[test]
fn cold_starts_and_what_warm_caches_cut_are_counted_by_hand() {
    let mut s = two_teams(30, 300);
    let serve = &mut s.teams[0].workloads[0];
    serve.demand = Demand::Hourly {
        hourly_gpus: (0..168)
            .map(|h| if h == 0 || h == 2 { 4.0 } else { 0.0 })
            .collect(),
    };
    let inference = serve.inference.as_mut().expect("inference");
    inference.cold_start_s = 300;
    inference.warm_cache_cold_start_s = Some(60);
    let e = evaluate(&s);
    let owner = &e.simulation.teams[0];
    assert_eq!(
        (
            owner.cold_start_gpu_minutes,
            owner.cold_start_cut_by_cache_gpu_minutes
        ),
        (36.0, 24.0)
    );
    let total = &e.simulation.total;
    let fleet = 16.0 * 10_080.0;
    let rework = (total.rework_gpu_hours + total.backlog_rework_gpu_hours) * 60.0;
    let w = &e.waterfall;
    let at = |extra: f64| w.sized_pct / (1.0 + extra / fleet);
    let week: Vec<(Lever, f64)> = w.bars[3..].iter().map(|b| (b.lever, b.points)).collect();
    assert_eq!(
        week,
        [
            (Lever::ColdStarts, at(60.0) - w.sized_pct),
            (Lever::WarmCaches, at(36.0) - at(60.0)),
            (Lever::Rework, at(36.0 + rework) - at(36.0)),
        ]
    );
    assert_eq!(w.to_pct, at(36.0 + rework));
}

/// KEDA scales to zero itself once cooldownPeriod has passed; the HPA's 5-minute scale-down
/// window applies only between non-zero counts.
#[test]
fn scale_to_zero_follows_cooldown_not_the_stabilisation_window() {
    let mut s = two_teams(30, 300);
    s.teams[0].workloads[0].demand = Demand::Hourly {
        hourly_gpus: (0..168).map(|h| if h == 0 { 4.0 } else { 0.01 }).collect(),
    };
    let sim = evaluate(&s).simulation;
    // Hour 0: 4 GPUs' worth at threshold 70% is ⌈5.71⌉ = 6 one-GPU replicas from minute 0.
    // From minute 60 the trickle (1% of a replica) is below activation (5%): the HPA keeps 6
    // through its window (minutes 60-63) and drops to 1 at minute 64; cooldown (300 s) ends at
    // minute 65, when KEDA scales to 0. 5 replicas × 64 min + 1 × 65 min = 385 GPU-minutes.
    assert_eq!(sim.teams[0].replica_gpu_minutes, 385.0);
}

/// The check over every preset: each class's typical pod (its device limits by the isolation
/// plan, 8 CPUs, 64 GiB, its team's queue-name label, its flavor's product label as node
/// selector) is admitted by Kueue's rules on its own flavor and lands on a node GPU Feature
/// Discovery labels as the flavor selects. The one class that starts unlike the plan is
/// startup-40's MPS chat, on a flavor whose other classes hold whole cards and HAMi vGPUs:
/// nodes that share by MPS carry `…-SHARED`, which that flavor cannot also select.
#[test]
fn every_presets_pods_start_where_the_export_puts_them() {
    use shared::kueue::Admissible;
    for name in ["startup-40", "aws-300", "bank-10000", "no-own-model"] {
        let s = scenario(name);
        let plan = shared::planning::isolation_plan(&s);
        let verdicts = manifests::admission(&s, &plan);
        let classes: usize = s.teams.iter().map(|t| t.workloads.len()).sum();
        assert_eq!(verdicts.len(), classes, "{name}");
        for (v, (team, w)) in verdicts.iter().zip(
            s.teams
                .iter()
                .flat_map(|t| t.workloads.iter().map(move |w| (t, w))),
        ) {
            assert_eq!(v.subject, format!("{}/{}", team.name, w.name));
            let expected = if v.subject == "product/chat" {
                Admissible::Unlike
            } else {
                Admissible::Yes
            };
            assert_eq!(v.admissible, expected, "{name}: {v:?}");
            assert_eq!(
                v.flavor.as_deref(),
                Some(w.flavor.as_str()),
                "{name}: {v:?}"
            );
        }
        // Without the manager's configuration the header asks for, Kueue's own refusal.
        let setup = manifests::kueue_setup(&s, &plan);
        let unconfigured = shared::kueue::ManagerConfig::default();
        let pod = shared::kueue::PodRequest {
            namespace: s.teams[0].name.clone(),
            queue_name: Some(s.teams[0].name.clone()),
            requests: [
                ("cpu".to_owned(), 8_000),
                (s.fleet[0].resource().to_owned(), 1),
            ]
            .into(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
        };
        assert_eq!(
            setup.admits(&pod, &unconfigured),
            Err(format!(
                "resource cpu unavailable in ClusterQueue {}",
                s.teams[0].name
            )),
            "{name}"
        );
    }
}

/// What the check catches, on the bank preset's export as it was: flavors selecting the
/// catalogue's name (`H100-SXM5-80GB`, which no node carries: GFD writes
/// `NVIDIA-H100-80GB-HBM3`), queues covering only `nvidia.com/gpu` and `huawei.com/Ascend910`
/// while the HAMi classes ask for `gpumem`/`gpucores` and `Ascend910B`, and a manager that
/// excludes only cpu, memory and ephemeral storage.
#[test]
fn the_check_fails_the_bank_export_as_it_was() {
    use shared::kueue::{Admissible, ManagerConfig, Quota, Trial};
    let s = scenario("bank-10000");
    let plan = shared::planning::isolation_plan(&s);
    let mut old = manifests::kueue_setup(&s, &plan);
    for (flavor, acc) in old.flavors.iter_mut().zip(&s.fleet) {
        let key = acc.vendor().product_label().to_owned();
        flavor.node_labels = BTreeMap::from([(key, acc.gpu_model.clone())]);
    }
    let old_resource = |acc: &shared::planning::scenario::Accelerator| {
        if acc.vendor() == shared::fleet::catalogue::Vendor::Huawei {
            "huawei.com/Ascend910".to_owned()
        } else {
            acc.resource().to_owned()
        }
    };
    old.resources = s
        .fleet
        .iter()
        .map(|acc| (acc.flavor.clone(), vec![old_resource(acc)]))
        .collect();
    for queue in &mut old.queues {
        let team = s
            .teams
            .iter()
            .find(|t| t.name == queue.cluster_queue)
            .expect("team");
        queue.quotas = s
            .fleet
            .iter()
            .map(|acc| Quota {
                flavor: acc.flavor.clone(),
                resource: old_resource(acc),
                nominal: i64::from(team.nominal_gpus.get(&acc.flavor).copied().unwrap_or(0)),
                borrowing_limit: None,
                lending_limit: None,
            })
            .collect();
    }
    let config = ManagerConfig::accelerators_only();
    let team = &s.teams[0];
    let trial = |w: &str, requests: &[(&str, i64)], node: &BTreeMap<String, String>| {
        let w = team.workloads.iter().find(|x| x.name == w).expect("class");
        let acc = s.accelerator(&w.flavor).expect("flavor");
        let product = acc.vendor().product_label().to_owned();
        let selector = [(product, node.values().next().cloned().unwrap_or_default())];
        old.check(
            &Trial {
                subject: w.name.clone(),
                pod: shared::kueue::PodRequest {
                    namespace: team.name.clone(),
                    queue_name: Some(team.name.clone()),
                    requests: requests
                        .iter()
                        .map(|(r, n)| ((*r).to_owned(), *n))
                        .collect(),
                    node_selector: selector.into(),
                    tolerations: Vec::new(),
                },
                node_labels: node.clone(),
                unshared: None,
            },
            &config,
        )
    };
    let node =
        |value: &str| BTreeMap::from([("nvidia.com/gpu.product".to_owned(), value.to_owned())]);
    // Pre-training on whole H100s: the flavor selects a label no node carries.
    let v = trial(
        "pretrain",
        &[("nvidia.com/gpu", 32)],
        &node("NVIDIA-H100-80GB-HBM3"),
    );
    assert_eq!(v.admissible, Admissible::Never, "{v:?}");
    // HAMi LoRA on an A100: nvidia.com/gpumem is covered by no queue.
    let v = trial(
        "lora",
        &[
            ("nvidia.com/gpu", 1),
            ("nvidia.com/gpumem", 40_960),
            ("nvidia.com/gpucores", 50),
        ],
        &BTreeMap::new(),
    );
    assert_eq!(v.admissible, Admissible::Never, "{v:?}");
    assert!(v.message.contains("unavailable in ClusterQueue"), "{v:?}");
    // HAMi backtests on the 910B: huawei.com/Ascend910B is covered by no queue.
    let ascend = BTreeMap::from([(
        "gpufleet.io/accelerator".to_owned(),
        "Ascend-910B-64GB".to_owned(),
    )]);
    let v = trial(
        "backtests",
        &[
            ("huawei.com/Ascend910B", 1),
            ("huawei.com/Ascend910B-memory", 16_384),
        ],
        &ascend,
    );
    assert_eq!(v.admissible, Admissible::Never, "{v:?}");
    assert!(v.message.contains("huawei.com/Ascend910B"), "{v:?}");
}

/// Kueue's transformations by its own example ("Using HAMi"): a pod asking 2 vGPUs, 20 cores
/// and 1,024 MiB each counts as 2 `nvidia.com/gpu`, 40 `total-gpucores` and 2,048
/// `total-gpumem`; cpu is excluded.
#[test]
fn hami_requests_count_as_kueues_using_hami_page_says() {
    let s = scenario("startup-40");
    let config = manifests::manager_config(&s, &shared::planning::isolation_plan(&s));
    let requests = Vec::from([
        ("cpu".to_owned(), 4_000),
        ("nvidia.com/gpu".to_owned(), 2),
        ("nvidia.com/gpucores".to_owned(), 20),
        ("nvidia.com/gpumem".to_owned(), 1_024),
    ]);
    assert_eq!(
        config
            .quota_requests(&requests)
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        BTreeMap::from([
            ("nvidia.com/gpu".to_owned(), 2),
            ("nvidia.com/total-gpucores".to_owned(), 40),
            ("nvidia.com/total-gpumem".to_owned(), 2_048),
        ])
    );
    let note = config.note();
    assert!(note.contains("#     - input: nvidia.com/gpumem\n#       strategy: Replace\n#       multiplyBy: nvidia.com/gpu\n#       outputs:\n#         nvidia.com/total-gpumem: \"1\"\n"), "{note}");
}

#[test]
fn kueue_refuses_what_its_rules_refuse() {
    use shared::kueue::{
        FlavorObject, PodRequest, Queue, Quota, Reclaim, Setup, Taint, TaintEffect, Toleration,
        TolerationOperator, WithinQueue,
    };
    let setup = Setup {
        flavors: vec![FlavorObject {
            name: "h100".into(),
            node_labels: BTreeMap::from([(
                "nvidia.com/gpu.product".into(),
                "H100-SXM5-80GB".into(),
            )]),
            node_taints: vec![Taint {
                key: "dedicated".into(),
                value: "ml".into(),
                effect: TaintEffect::NoSchedule,
            }],
            tolerations: Vec::new(),
        }],
        resources: vec![("h100".into(), vec!["nvidia.com/gpu".into()])],
        queues: vec![Queue {
            cluster_queue: "cq".into(),
            namespace: "ns".into(),
            local_queue: "lq".into(),
            cohort: None,
            queueing: shared::kueue::Queueing::BestEffortFifo,
            reclaim: Reclaim::Never,
            within: WithinQueue::Never,
            borrow: shared::kueue::BorrowWithinCohort::default(),
            quotas: vec![Quota {
                flavor: "h100".into(),
                resource: "nvidia.com/gpu".into(),
                nominal: 4,
                borrowing_limit: None,
                lending_limit: None,
            }],
            held: false,
        }],
        priorities: Vec::new(),
    };
    let pod = |gpus: i64, selector: &str, tolerate: bool| PodRequest {
        namespace: "ns".into(),
        queue_name: Some("lq".into()),
        requests: vec![("nvidia.com/gpu".into(), gpus)],
        node_selector: BTreeMap::from([("nvidia.com/gpu.product".into(), selector.into())]),
        tolerations: if tolerate {
            vec![Toleration {
                key: "dedicated".into(),
                operator: TolerationOperator::Equal,
                value: "ml".into(),
                effect: None,
            }]
        } else {
            Vec::new()
        },
    };
    assert_eq!(
        setup.admits(
            &pod(4, "H100-SXM5-80GB", true),
            &shared::kueue::ManagerConfig::default()
        ),
        Ok("h100".to_owned())
    );
    let refused = |p: PodRequest| {
        setup
            .admits(&p, &shared::kueue::ManagerConfig::default())
            .expect_err("refused")
    };
    assert!(refused(pod(4, "H100-SXM5-80GB", false)).contains("untolerated taint dedicated"));
    assert!(refused(pod(4, "A100-SXM4-80GB", true)).contains("the pod selects another"));
    // No cohort: 5 GPUs on a nominal quota of 4 can never be admitted.
    assert!(
        refused(pod(5, "H100-SXM5-80GB", true)).contains("more than the ClusterQueue may hold")
    );
    let mut elsewhere = pod(1, "H100-SXM5-80GB", true);
    elsewhere.namespace = "other".into();
    assert_eq!(refused(elsewhere), "LocalQueue lq doesn't exist in other");
    let mut unlabelled = pod(1, "H100-SXM5-80GB", true);
    unlabelled.queue_name = None;
    assert!(refused(unlabelled).contains("queue-name"));
}

/// A fleet of two H100s and one team whose nominal quota is `nominal` of them, running one
/// batch class of small jobs (8 GiB, busy 10% of a card each) with a standing backlog of 30,
/// so its queue is never empty; `tenants` business tenants share the class, and compliance
/// asks for hardware isolation between them when `compliance`.
fn small_jobs(nominal: u32, tenants: u32, compliance: bool) -> Scenario {
    let mut s = scenario("startup-40");
    s.fleet[0].count = 2;
    s.constraints.hardware_isolation_between_tenants = compliance;
    let mut team = batch_team("small", nominal, vec![(1, 10, 0)]);
    let w = &mut team.workloads[0];
    w.demand = Demand::Hourly {
        hourly_gpus: vec![0.0; 168],
    };
    w.backlog_gpus = 30.0;
    w.mem_mib_per_job = Some(8_192);
    w.busy_pct = 10;
    w.tenants = tenants;
    w.job_minutes = 600;
    s.teams = vec![team];
    s
}

/// Sub-GPU work holds the share of a card its isolation packs it to, as Kueue counts it. Under
/// compliance the plan puts the 8 GiB jobs on MIG `1g.10gb`, of which an H100 holds seven
/// (NVIDIA's MIG profile table, `shared/data/mig_profiles.csv`: `max_instances` 7); each pod
/// asks for one `nvidia.com/mig-1g.10gb`. So two cards run 14 jobs at once: the cards are
/// always held and busy 14 × 10% ÷ 2 = 70% of the time. Held a whole card per job, as the week
/// did before, they were busy 2 × 10% ÷ 2 = 10%.
#[test]
fn mig_jobs_run_seven_to_a_card() {
    let s = small_jobs(2, 2, true);
    let e = evaluate(&s);
    let class = &e.isolation.classes[0];
    assert_eq!(class.mechanism, Mechanism::Mig);
    assert_eq!(class.limits, vec![("nvidia.com/mig-1g.10gb".to_owned(), 1)]);
    assert_eq!(class.jobs_per_card, 7);
    fleet_is(&e.simulation.total, 100.0, 70.0);
}

/// The fleet's allocated and busy utilisation, in %, as worked out by hand.
fn fleet_is(t: &shared::planning::simulate::TeamStats, allocated_pct: f64, busy_pct: f64) {
    let near = |figure: Option<f64>, want: f64| (figure.expect("fleet") - want).abs() < 1e-6;
    assert!(near(t.allocated_pct, allocated_pct), "{t:?}");
    assert!(near(t.busy_pct, busy_pct), "{t:?}");
}

/// HAMi offers ten vGPUs a card by default (`devicePlugin.deviceSplitCount`, HAMi's chart), and
/// an H100's 80 GiB holds ten 8 GiB jobs each busy 10% of it: several business tenants without
/// compliance get HAMi fractions, ten jobs to a card, the two cards busy 20 × 10% ÷ 2 = 100%.
#[test]
fn hami_jobs_run_ten_to_a_card() {
    let e = evaluate(&small_jobs(2, 2, false));
    let class = &e.isolation.classes[0];
    assert_eq!(class.mechanism, Mechanism::HamiFractions);
    assert_eq!(class.jobs_per_card, 10);
    fleet_is(&e.simulation.total, 100.0, 100.0);
}

/// A team's quota in GPUs holds the shares: with a nominal quota of one H100 it runs seven MIG
/// jobs at a time (one card's worth), and the other card, outside every quota, serves no one:
/// allocated 50%, busy 7 × 10% ÷ 2 = 35% of the fleet.
#[test]
fn a_quota_of_one_gpu_holds_seven_mig_jobs() {
    fleet_is(
        &evaluate(&small_jobs(1, 2, true)).simulation.total,
        50.0,
        35.0,
    );
}

/// The simulated week and the sizing agree on how busy the fleet is: on every preset the week's
/// busy utilisation is within 3 points of the sizing's for the same fleet in one shared pool
/// (`Sizing::fleet_pool`: the cards the scenario has, work reaching only those within a nominal
/// quota). What the week sees and the hourly sizing does not keeps it at or below: queue waits
/// and the work left at the week's end, KEDA's replicas cold-starting and scaling by the
/// minute, evictions; and the sizing packs every class smaller than a card, the week only those
/// the isolation plan shares. (The sizing's `shared_pool` is another pool: sized to the peak of
/// the summed demand, 8,683 cards on the bank where the fleet has 10,000.)
#[test]
fn the_weeks_busy_fleet_agrees_with_the_sizing_within_three_points() {
    for name in ["startup-40", "aws-300", "no-own-model", "bank-10000"] {
        let e = evaluate(&scenario(name));
        let week = e.simulation.total.busy_pct.expect("fleet");
        let sized = e.sizing.fleet_pool.mean_busy_pct;
        assert!(
            week <= sized + 0.5 && sized - week <= 3.0,
            "{name}: week {week:.1}% vs sizing {sized:.1}%"
        );
    }
}
