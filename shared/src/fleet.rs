//! The fleet inventory: which accelerator models the organisation owns, at what price, and
//! the node pools that hold them. Quota flavors and chargeback rates read from here.
//!
//! Invariants: every model is a catalogue model (`shared::catalogue`), whose facts (vendor,
//! memory, MIG) come from the catalogue and nowhere else; counts are non-negative; a pool's
//! GPUs are `nodes * gpus_per_node`; prices are whole cents per GPU-hour.

pub mod catalogue;
pub mod sharing;

use serde::{Deserialize, Serialize};

use catalogue::{UnknownModel, Vendor};

/// An accelerator model of the fleet, e.g. `H200-SXM-141GB`, with its price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuModel {
    pub name: String,
    pub vendor: Vendor,
    /// Device memory, in MiB (the catalogue's).
    pub mem_mib: u32,
    /// Most MIG instances per GPU; 0 when the model has no MIG.
    pub mig_max_instances: u8,
    /// On-demand price of one GPU for one hour, in cents.
    pub price_cents_per_gpu_hour: i64,
}

impl GpuModel {
    /// The catalogue model `name` at a price; unknown names are refused with the known ones.
    pub fn priced(name: &str, price_cents_per_gpu_hour: i64) -> Result<Self, UnknownModel> {
        let model = catalogue::find(name)?;
        Ok(Self {
            name: model.name.clone(),
            vendor: model.vendor,
            mem_mib: model.mem_mib,
            mig_max_instances: model.mig.as_ref().map_or(0, |g| g.max_instances),
            price_cents_per_gpu_hour,
        })
    }

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
        GpuModel::priced(name, price).expect("catalogue model")
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
            models: vec![model("H200-SXM-141GB", 791), model("L4-24GB", 80)],
            pools: vec![
                pool("a", "H200-SXM-141GB", 2, 8),
                pool("b", "H200-SXM-141GB", 1, 8),
                pool("c", "X", 1, 4),
            ],
        };
        assert_eq!(fleet.total_gpus(), 28);
        let totals = fleet.totals_by_model();
        assert_eq!(
            totals,
            vec![
                ModelTotal {
                    gpu_model: "H200-SXM-141GB".into(),
                    gpus: 24,
                    cost_cents_per_hour: 24 * 791
                },
                ModelTotal {
                    gpu_model: "L4-24GB".into(),
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
    fn models_take_their_facts_from_the_catalogue() {
        let h200 = model("H200-SXM-141GB", 791);
        assert_eq!(
            (h200.vendor, h200.mem_mib, h200.mig_max_instances),
            (Vendor::Nvidia, 143_771, 7)
        );
        assert!(!model("L4-24GB", 80).supports_mig());
        assert!(GpuModel::priced("H200", 1).is_err());
    }

    #[test]
    fn the_inventory_becomes_a_scenario_fleet_one_flavor_per_pool() {
        let fleet = Fleet {
            models: vec![model("H200-SXM-141GB", 791), model("L4-24GB", 80)],
            pools: vec![
                pool("H200 rack A", "H200-SXM-141GB", 2, 8),
                pool("h200-rack-a", "H200-SXM-141GB", 1, 8),
                pool("L4 (spare)", "L4-24GB", 0, 4),
                pool("inference L4", "L4-24GB", 3, 4),
            ],
        };
        let got: Vec<(String, String, u32, u32, i64)> =
            crate::planning::scenario::inventory_fleet(&fleet)
                .into_iter()
                .map(|a| {
                    (
                        a.flavor,
                        a.gpu_model,
                        a.count,
                        a.gpus_per_node,
                        a.price_cents_per_gpu_hour,
                    )
                })
                .collect();
        let want = [
            ("h200-rack-a", "H200-SXM-141GB", 16, 8, 791),
            ("h200-rack-a-2", "H200-SXM-141GB", 8, 8, 791),
            ("inference-l4", "L4-24GB", 12, 4, 80),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(f, m, c, n, p)| ((*f).to_owned(), (*m).to_owned(), *c, *n, *p))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn an_empty_fleet_costs_nothing() {
        let fleet = Fleet::default();
        assert_eq!(fleet.total_gpus(), 0);
        assert!(fleet.totals_by_model().is_empty());
        assert_eq!(fleet.cost_cents_per_hour(), 0);
    }
}
