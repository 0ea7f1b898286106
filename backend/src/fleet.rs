//! The fleet inventory, the one place that quota flavors and chargeback rates read from:
//! `GET /api/fleet`, and the demo fleet that `gpufleet demo` loads into an empty database.
//! Tables (see `db.rs`): `gpu_models` — which catalogue models the fleet holds and the on-demand
//! price of one GPU-hour of each; `node_pools` — groups of identical nodes of one model. The
//! models' facts (vendor, memory, MIG) come from `shared::catalogue`.

mod db;

use axum::{Json, extract::State, http::Method};
use shared::fleet::{Fleet, GpuModel, NodePool};
use sqlx::PgPool;

use crate::{
    access::Access,
    app::{Api, AppState},
    error::{Error, Result},
};

pub fn api() -> Api {
    Api::default().route(Method::GET, "/fleet", Access::SignedIn, get_fleet)
}

async fn get_fleet(State(state): State<AppState>) -> Result<Json<Fleet>> {
    let mut tx = state.pool.begin().await?;
    let rows = db::list_models(&mut *tx).await?;
    let pools = db::list_pools(&mut *tx).await?;
    tx.commit().await?;
    let models = rows
        .iter()
        .map(|row| {
            GpuModel::priced(&row.name, row.price_cents_per_gpu_hour)
                .map_err(|unknown| Error::Internal(format!("gpu_models holds {unknown}")))
        })
        .collect::<Result<_>>()?;
    Ok(Json(Fleet { models, pools }))
}

/// The demo fleet: three AWS-style pools. Prices are on-demand USD per GPU-hour from
/// `../shared/reference/gpu/accelerators.csv` (instance price / GPUs), rounded to the cent.
pub fn demo_fleet() -> Fleet {
    let model = |name: &str, price: i64| GpuModel::priced(name, price);
    let pool = |name: &str, gpu_model: &str, nodes: i32| NodePool {
        name: name.to_owned(),
        gpu_model: gpu_model.to_owned(),
        nodes,
        gpus_per_node: 8,
    };
    let models = [
        // p5en.48xlarge $63.296/h / 8
        model("H200-SXM-141GB", 791),
        // p5.48xlarge $68.80/h / 8 (us-west-1)
        model("H100-SXM5-80GB", 860),
        // g7e: top of the published $/GPU range
        model("RTX-PRO-6000-96GB", 414),
    ];
    Fleet {
        // The names are the catalogue's; a test checks that every one is found.
        models: models.into_iter().filter_map(Result::ok).collect(),
        pools: vec![
            pool("h200-train", "H200-SXM-141GB", 12),
            pool("h100-shared", "H100-SXM5-80GB", 8),
            pool("rtx-inference", "RTX-PRO-6000-96GB", 4),
        ],
    }
}

/// What [`load_demo`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum DemoLoad {
    Loaded { gpus: i64 },
    AlreadyHasFleet,
}

/// Loads [`demo_fleet`] when no GPU model exists yet; never touches a fleet that exists.
pub async fn load_demo(pool: &PgPool) -> Result<DemoLoad> {
    let mut tx = pool.begin().await?;
    // Two `gpufleet demo` at once must not both see an empty table.
    db::lock_fleet(&mut *tx).await?;
    if db::count_models(&mut *tx).await? > 0 {
        return Ok(DemoLoad::AlreadyHasFleet);
    }
    let fleet = demo_fleet();
    for model in &fleet.models {
        db::insert_model(&mut *tx, model).await?;
    }
    for pool in &fleet.pools {
        db::insert_pool(&mut *tx, pool).await?;
    }
    tx.commit().await?;
    Ok(DemoLoad::Loaded {
        gpus: fleet.total_gpus(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_fleet_names_catalogue_models() {
        // Three models are listed above; one missing from the catalogue would be dropped.
        let fleet = demo_fleet();
        assert_eq!(fleet.models.len(), 3);
        assert!(
            fleet
                .pools
                .iter()
                .all(|p| fleet.models.iter().any(|m| m.name == p.gpu_model))
        );
        // 12 + 8 + 4 nodes of 8 GPUs (the README's 192).
        assert_eq!(fleet.total_gpus(), 192);
    }
}
