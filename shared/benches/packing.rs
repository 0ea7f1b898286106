//! One replay of the openb `default` list on its 1,213 GPU nodes (seed 42, 130% arrivals), per
//! policy. The data is the project's copy in shared/tests/fixtures/openb/.

// Reading fixtures is the test's job; the library never touches files (clippy.toml).
#![allow(clippy::disallowed_methods)]

use criterion::{Criterion, criterion_group, criterion_main};
use shared::packing::{Policy, csv, protocol};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/openb/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

fn replay(c: &mut Criterion) {
    let nodes = csv::parse_nodes(&fixture("openb_node_list_gpu_node.csv")).expect("nodes");
    let pods = csv::parse_pods(&fixture("openb_pod_list_default.csv")).expect("pods");
    let mut group = c.benchmark_group("openb_default_replay");
    group.sample_size(10);
    for policy in Policy::ALL {
        group.bench_function(policy.name(), |b| {
            b.iter(|| {
                protocol::replay(&nodes, &pods, policy, 42, protocol::PAPER_INFLATE)
                    .expect("replay")
            })
        });
    }
    group.finish();
    // Where pods are pinned to GPU models, the pinned-pressure term is at work.
    let pods = csv::parse_pods(&fixture("openb_pod_list_gpuspec33.csv")).expect("pods");
    let mut group = c.benchmark_group("openb_gpuspec33_replay");
    group.sample_size(10);
    for policy in [Policy::Fgd, Policy::FgdStranding] {
        group.bench_function(policy.name(), |b| {
            b.iter(|| {
                protocol::replay(&nodes, &pods, policy, 42, protocol::PAPER_INFLATE)
                    .expect("replay")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
