//! One week at 1-minute steps: 10,000 GPUs, 50 teams, 4 flavors, ~100,000 jobs, and ten times
//! that; the ~10,000-card bank preset's whole evaluation; and its quota suggestion (its own
//! week plus each week it tries).

use criterion::{Criterion, criterion_group, criterion_main};
use shared::{
    planning::scenario::{Scenario, Team, bench_scenario},
    planning::simulate::simulate,
    planning::{evaluate, isolation_plan, parse_scenario, suggest_quotas},
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

criterion_group!(benches, week, evaluation, suggestion);
criterion_main!(benches);
