//! One week at 1-minute steps: 10,000 GPUs, 50 teams, 4 flavors, ~100,000 jobs; and the quota
//! suggestion on the ~10,000-card bank preset (its own week plus each week it tries).

use criterion::{Criterion, criterion_group, criterion_main};
use shared::{
    planning::scenario::bench_scenario,
    planning::simulate::simulate,
    planning::{parse_scenario, suggest_quotas},
};

fn week(c: &mut Criterion) {
    let scenario = bench_scenario();
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    group.bench_function("week_10000_gpus_50_teams", |b| {
        b.iter(|| simulate(&scenario))
    });
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

criterion_group!(benches, week, suggestion);
criterion_main!(benches);
