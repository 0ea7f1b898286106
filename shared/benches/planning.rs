//! One week at 1-minute steps: 10,000 GPUs, 50 teams, 4 flavors, ~100,000 jobs.

use criterion::{Criterion, criterion_group, criterion_main};
use shared::{scenario::bench_scenario, simulate::simulate};

fn week(c: &mut Criterion) {
    let scenario = bench_scenario();
    let mut group = c.benchmark_group("simulate");
    group.sample_size(10);
    group.bench_function("week_10000_gpus_50_teams", |b| {
        b.iter(|| simulate(&scenario))
    });
    group.finish();
}

criterion_group!(benches, week);
criterion_main!(benches);
