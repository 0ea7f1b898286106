//! The fleet inventory: accelerator models and the node pools that hold them.
//!
//! Invariants: counts are non-negative; a pool's GPUs are `nodes * gpus_per_node`; prices are
//! whole cents per GPU-hour (rounded to the cent when entered).

use serde::{Deserialize, Serialize};

/// An accelerator model, e.g. `H200-SXM-141GB`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuModel {
    pub name: String,
    pub vendor: String,
    /// Device memory as sold, in MiB.
    pub mem_mib: i64,
    /// Maximum MIG instances per GPU; 0 when the model has no MIG.
    pub mig_max_instances: i32,
    /// On-demand price of one GPU for one hour, in cents.
    pub price_cents_per_gpu_hour: i64,
}

impl GpuModel {
    pub fn supports_mig(&self) -> bool {
        self.mig_max_instances > 0
    }
}

/// A group of identical nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePool {
    pub name: String,
    pub gpu_model: String,
    pub nodes: i32,
    pub gpus_per_node: i32,
}

impl NodePool {
    pub fn gpus(&self) -> i64 {
        i64::from(self.nodes) * i64::from(self.gpus_per_node)
    }
}

/// `GET /api/fleet`: the whole inventory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fleet {
    pub models: Vec<GpuModel>,
    pub pools: Vec<NodePool>,
}

/// One line of the fleet summary: a model's GPU count and what an hour of all of them costs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelTotal {
    pub gpu_model: String,
    pub gpus: i64,
    pub cost_cents_per_hour: i64,
}

impl Fleet {
    pub fn total_gpus(&self) -> i64 {
        self.pools.iter().map(NodePool::gpus).sum()
    }

    /// GPUs and hourly cost per model, in the order the models are listed. Pools naming an
    /// unknown model are counted under their own name at price zero.
    pub fn totals_by_model(&self) -> Vec<ModelTotal> {
        let mut totals: Vec<ModelTotal> = self
            .models
            .iter()
            .map(|m| ModelTotal {
                gpu_model: m.name.clone(),
                gpus: 0,
                cost_cents_per_hour: 0,
            })
            .collect();
        for pool in &self.pools {
            let price = self
                .models
                .iter()
                .find(|m| m.name == pool.gpu_model)
                .map_or(0, |m| m.price_cents_per_gpu_hour);
            let index = match totals.iter().position(|t| t.gpu_model == pool.gpu_model) {
                Some(i) => i,
                None => {
                    totals.push(ModelTotal {
                        gpu_model: pool.gpu_model.clone(),
                        gpus: 0,
                        cost_cents_per_hour: 0,
                    });
                    totals.len() - 1
                }
            };
            totals[index].gpus += pool.gpus();
            totals[index].cost_cents_per_hour += pool.gpus() * price;
        }
        totals
    }

    /// What one hour of the whole fleet costs at on-demand prices, in cents.
    pub fn cost_cents_per_hour(&self) -> i64 {
        self.totals_by_model()
            .iter()
            .map(|t| t.cost_cents_per_hour)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str, price: i64) -> GpuModel {
        GpuModel {
            name: name.into(),
            vendor: "NVIDIA".into(),
            mem_mib: 1024,
            mig_max_instances: 0,
            price_cents_per_gpu_hour: price,
        }
    }

    fn pool(name: &str, model: &str, nodes: i32, per_node: i32) -> NodePool {
        NodePool {
            name: name.into(),
            gpu_model: model.into(),
            nodes,
            gpus_per_node: per_node,
        }
    }

    #[test]
    fn totals_add_pools_of_one_model_and_price_them() {
        let fleet = Fleet {
            models: vec![model("H200", 791), model("L4", 80)],
            pools: vec![
                pool("a", "H200", 2, 8),
                pool("b", "H200", 1, 8),
                pool("c", "X", 1, 4),
            ],
        };
        assert_eq!(fleet.total_gpus(), 28);
        let totals = fleet.totals_by_model();
        assert_eq!(
            totals,
            vec![
                ModelTotal {
                    gpu_model: "H200".into(),
                    gpus: 24,
                    cost_cents_per_hour: 24 * 791
                },
                ModelTotal {
                    gpu_model: "L4".into(),
                    gpus: 0,
                    cost_cents_per_hour: 0
                },
                ModelTotal {
                    gpu_model: "X".into(),
                    gpus: 4,
                    cost_cents_per_hour: 0
                },
            ]
        );
        assert_eq!(fleet.cost_cents_per_hour(), 18_984);
    }

    #[test]
    fn an_empty_fleet_costs_nothing() {
        let fleet = Fleet::default();
        assert_eq!(fleet.total_gpus(), 0);
        assert!(fleet.totals_by_model().is_empty());
        assert_eq!(fleet.cost_cents_per_hour(), 0);
    }
}
