//! The fleet inventory: `GET /api/fleet`, and the demo fleet that `gpufleet demo` loads into an
//! empty database.

mod db;

use axum::{Json, extract::State, http::Method};
use shared::fleet::{Fleet, GpuModel, NodePool};
use sqlx::PgPool;

use crate::{
    app::{Api, AppState},
    auth::Access,
    error::Result,
};

pub fn api() -> Api {
    Api::default().route(Method::GET, "/fleet", Access::SignedIn, get_fleet)
}

async fn get_fleet(State(state): State<AppState>) -> Result<Json<Fleet>> {
    let mut tx = state.pool.begin().await?;
    let models = db::list_models(&mut *tx).await?;
    let pools = db::list_pools(&mut *tx).await?;
    tx.commit().await?;
    Ok(Json(Fleet { models, pools }))
}

/// The demo fleet: three AWS-style pools. Prices are on-demand USD per GPU-hour from
/// `../shared/reference/gpu/accelerators.csv` (instance price / GPUs), rounded to the cent.
pub fn demo_fleet() -> Fleet {
    let model = |name: &str, mem_mib: i64, mig: i32, price: i64| GpuModel {
        name: name.to_owned(),
        vendor: "NVIDIA".to_owned(),
        mem_mib,
        mig_max_instances: mig,
        price_cents_per_gpu_hour: price,
    };
    let pool = |name: &str, gpu_model: &str, nodes: i32| NodePool {
        name: name.to_owned(),
        gpu_model: gpu_model.to_owned(),
        nodes,
        gpus_per_node: 8,
    };
    Fleet {
        models: vec![
            // p5en.48xlarge $63.296/h / 8; 141 GB
            model("H200-SXM-141GB", 141 * 1024, 7, 791),
            // p5.48xlarge $68.80/h / 8 (us-west-1); 80 GB
            model("H100-SXM5-80GB", 80 * 1024, 7, 860),
            // g7e: top of the published $/GPU range; 96 GB
            model("RTX-PRO-6000-96GB", 96 * 1024, 4, 414),
        ],
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
