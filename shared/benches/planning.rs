//! One week at 1-minute steps: 10,000 GPUs, 50 teams, 4 flavors, ~100,000 jobs, and ten times
//! that; the ~10,000-card bank preset's whole evaluation; its quota suggestion (its own week
//! plus each week it tries); a scenario derived from four weeks of that fleet's recorded
//! Workloads; and a quota request's what-if over three of those weeks, as the approver's
//! browser reads and replays it.

use std::collections::BTreeMap;

use criterion::{Criterion, criterion_group, criterion_main};
use shared::{
    cluster::workload::{HistoryEntry, PodSet, RecordedWorkload, Transition},
    common::{day::Day, error::from_json, interrupt::Never},
    planning::from_history::{Measured, scenario},
    planning::replay::{WhatIfReplay, WhatIfRun},
    planning::scenario::{Scenario, Team, bench_scenario},
    planning::simulate::simulate,
    planning::{evaluate, isolation_plan, parse_scenario, suggest_quotas},
    quota::{QuotaSpec, QuotaWorld},
};

fn week(c: &mut Criterion) {
    let scenario = bench_scenario();
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    let plan = isolation_plan(&scenario);
    group.bench_function("week_10000_gpus_50_teams", |b| {
        b.iter(|| simulate(&scenario, &plan))
    });
    let large = ten_times(&scenario);
    let large_plan = isolation_plan(&large);
    group.bench_function("week_100000_gpus_500_teams", |b| {
        b.iter(|| simulate(&large, &large_plan))
    });
    let hourly = one_hour_jobs(10_000);
    let hourly_plan = isolation_plan(&hourly);
    group.bench_function("week_10000_gpus_1690000_one_hour_jobs", |b| {
        b.iter(|| simulate(&hourly, &hourly_plan))
    });
    group.finish();
}

/// The benchmark fleet ten times over: ten times the cards of each flavor and ten teams for
/// each of its teams (~950,000 jobs).
fn ten_times(s: &Scenario) -> Scenario {
    let mut large = s.clone();
    for f in &mut large.fleet {
        f.count *= 10;
    }
    large.teams = (0..10)
        .flat_map(|copy| {
            s.teams.iter().map(move |t| Team {
                name: format!("{}-{copy}", t.name),
                ..t.clone()
            })
        })
        .collect();
    large
}

/// `gpus` H100s running one-GPU, one-hour batch jobs all week, in one team's quota: at 10,000
/// GPUs, 10,000 running at the start and 10,000 arriving each hour, 1,690,000 jobs.
fn one_hour_jobs(gpus: u32) -> Scenario {
    let mut s = bench_scenario();
    s.fleet.truncate(1);
    s.fleet[0].count = gpus;
    s.teams.truncate(1);
    let flavor = s.fleet[0].flavor.clone();
    s.teams[0].nominal_gpus = [(flavor.clone(), gpus)].into_iter().collect();
    let mut w = s.teams[0].workloads[0].clone();
    w.kind = shared::planning::scenario::WorkloadKind::Batch;
    w.flavor = flavor;
    w.inference = None;
    w.demand = shared::planning::scenario::Demand::Hourly {
        hourly_gpus: vec![f64::from(gpus); shared::planning::scenario::HOURS_PER_WEEK],
    };
    w.gpus_per_job = 1;
    w.job_minutes = 60;
    w.backlog_gpus = 0.0;
    w.mem_mib_per_job = None;
    s.teams[0].workloads = vec![w];
    s.validate().expect("a valid scenario");
    s
}

/// The bank preset's whole evaluation: sizing, week, decision, isolation, waterfall.
fn evaluation(c: &mut Criterion) {
    let bank = parse_scenario(include_str!("../scenarios/bank-10000.json")).expect("the preset");
    let mut group = c.benchmark_group("evaluate");
    group.sample_size(10);
    group.bench_function("bank_10000", |b| b.iter(|| evaluate(&bank)));
    group.finish();
}

fn suggestion(c: &mut Criterion) {
    let bank = parse_scenario(include_str!("../scenarios/bank-10000.json")).expect("the preset");
    // One team's target tightened to 10 minutes: the first proposal misses it, so the search
    // moves quota and simulates again.
    let mut tight = bank.clone();
    tight.teams[3].queue_wait_target_min = 10;
    let mut group = c.benchmark_group("suggest_quotas");
    group.sample_size(10);
    group.bench_function("bank_10000", |b| b.iter(|| suggest_quotas(&bank)));
    group.bench_function("bank_10000_one_tight_target", |b| {
        b.iter(|| suggest_quotas(&tight))
    });
    group.finish();
}

/// Four weeks of the 10,000-GPU, 50-team fleet's Workloads: 400,000 jobs (about the
/// benchmark week's 100,000 a week), each team's on its flavor at three priorities, one to
/// eight GPUs, runs of 30 to 300 minutes, arriving through the day. With the quotas' world
/// (each team's own ClusterQueue in one cohort, its nominal quota the benchmark week's) and the
/// flavors' prices.
struct History {
    world: QuotaWorld,
    prices: BTreeMap<String, i64>,
    from: Day,
    entries: Vec<HistoryEntry>,
}

fn four_weeks_of_history() -> History {
    let bench = bench_scenario();
    let world: QuotaWorld = serde_json::from_value(serde_json::json!({
        "flavors": bench.fleet.iter().map(|a| serde_json::json!({"name": a.flavor,
            "gpu_model": a.gpu_model, "pools": ["p"], "gpus": a.count, "settings": {}})).collect::<Vec<_>>(),
        "teams": bench.teams.iter().map(|t| serde_json::json!({"team": t.name,
            "namespace": format!("ns-{}", t.name), "cluster_queue": t.name, "local_queue": t.name,
            "cohort": "all"})).collect::<Vec<_>>(),
        "approved": bench.teams.iter().enumerate().map(|(i, t)| serde_json::json!({
            "id": i + 1, "team": t.name, "order": i + 1, "spec": {
                "lines": t.nominal_gpus.iter().map(|(flavor, n)| serde_json::json!({
                    "flavor": flavor, "resource": "nvidia.com/gpu", "nominal": n})).collect::<Vec<_>>(),
                "justification": "the bench's quota", "starts_on": "2026-01-01"}})).collect::<Vec<_>>()
    }))
    .expect("the bench's quota world");
    let prices = bench
        .fleet
        .iter()
        .map(|a| (a.flavor.clone(), a.price_cents_per_gpu_hour))
        .collect();
    let from = Day::parse("2026-11-02").expect("a day");
    let start_ms = i64::from(from.days_since_epoch()) * 86_400_000;
    let resource = "nvidia.com/gpu".to_owned();
    let entries = (0..400_000u32)
        .map(|i| {
            let team = &bench.teams[(i % 50) as usize];
            let flavor = team.workloads[0].flavor.clone();
            let (gpus, minutes) = (u64::from(1 + i % 8), i64::from(30 + (i * 7) % 271));
            let created = start_ms + i64::from(i) * (28 * 86_400_000 / 400_000);
            let admitted = created + i64::from(i % 20) * 60_000;
            HistoryEntry {
                workload: RecordedWorkload {
                    uid: format!("uid-{i}"),
                    namespace: format!("ns-{}", team.name),
                    name: format!("job-{i}"),
                    local_queue: team.name.clone(),
                    cluster_queue: Some(team.name.clone()),
                    priority: (i % 3) as i32 * 100,
                    priority_class: None,
                    pod_sets: vec![PodSet {
                        name: "main".to_owned(),
                        count: 1,
                        resources: [(resource.clone(), gpus)].into(),
                        flavors: [(resource.clone(), flavor)].into(),
                    }],
                    created_at_ms: created,
                    quota_reserved_at_ms: Some(admitted),
                    admitted_at_ms: Some(admitted),
                    evicted: None,
                    finished: Some(Transition {
                        at_ms: admitted + minutes * 60_000,
                        reason: "Succeeded".to_owned(),
                        detail: None,
                    }),
                    evictions: Vec::new(),
                    problems: Vec::new(),
                },
                team: Some(team.name.clone()),
                evictions_seen: Vec::new(),
                last_admitted_at_ms: Some(admitted),
                gone_at_ms: None,
                demo: false,
            }
        })
        .collect();
    History {
        world,
        prices,
        from,
        entries,
    }
}

impl History {
    /// What the derivation reads besides the Workloads, over `days` from the first.
    fn measured(&self, days: i32) -> Measured<'_> {
        Measured {
            world: &self.world,
            prices: &self.prices,
            usage: &[],
            tokens: &[],
            from: self.from,
            end: self.from.plus(days),
        }
    }
}

fn from_history(c: &mut Criterion) {
    let history = four_weeks_of_history();
    let measured = history.measured(28);
    let mut group = c.benchmark_group("from_history");
    group.sample_size(10);
    group.bench_function("4_weeks_10000_gpus_50_teams_400000_workloads", |b| {
        b.iter(|| scenario(&measured, &history.entries))
    });
    group.finish();
}

/// The what-if of a request doubling the first team's quota, over the last three of those
/// weeks (the first is the week before them, as the what-if reads it): what the approver's
/// browser does, reading the server's input, then replaying it.
#[allow(
    clippy::print_stdout,
    reason = "the size the browser downloads, beside its times"
)]
#[allow(
    clippy::disallowed_methods,
    reason = "a bench, not the crate's code: it leaves its input for the wasm bench"
)]
fn what_if(c: &mut Criterion) {
    let history = four_weeks_of_history();
    let measured = history.measured(29);
    let first = history.from.plus(7);
    let mut run = WhatIfRun::new(first, 3, &history.world);
    for entry in &history.entries {
        run.add(entry);
    }
    let derived = scenario(&measured, &history.entries);
    let team = &derived.scenario.teams[0];
    let lines: Vec<serde_json::Value> = team
        .nominal_gpus
        .iter()
        .map(|(flavor, n)| serde_json::json!({"flavor": flavor, "resource": "nvidia.com/gpu", "nominal": 2 * n + 8}))
        .collect();
    let spec: QuotaSpec = serde_json::from_value(serde_json::json!({
        "lines": lines, "justification": "twice", "starts_on": "2026-12-01"}))
    .expect("a request's spec");
    let input = run.prepare(&derived, (1, &team.name.clone(), &spec));
    let json = serde_json::to_string(&input).expect("JSON");
    // For the same input timed in the planner's wasm (frontend/planner/bench.mjs).
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/bench/what-if-input.json"
    );
    std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench"))
        .and_then(|()| std::fs::write(file, &json))
        .expect("the what-if input for the wasm bench");
    println!(
        "what-if input: {} jobs in {} weeks, {} bytes of JSON",
        input.workloads,
        input.replay.weeks.0.len(),
        json.len()
    );
    // As the planner's worker reads it: the replay's part, by path.
    let read = || from_json::<WhatIfReplay>(&json).expect("reads");
    let replay = read();
    let mut group = c.benchmark_group("what_if");
    group.sample_size(10);
    group.bench_function("read_3_weeks_10000_gpus_50_teams", |b| b.iter(read));
    group.bench_function("replay_3_weeks_10000_gpus_50_teams", |b| {
        b.iter(|| replay.replay(&Never).expect("never stopped"))
    });
    group.finish();
}

criterion_group!(benches, week, evaluation, suggestion, from_history, what_if);
criterion_main!(benches);
