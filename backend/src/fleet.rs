//! The fleet inventory, the one place that quota flavors and chargeback rates read from:
//! `GET /api/fleet`; inventory as code (`GET`/`POST /api/inventory`, `gpufleet fleet export |
//! import`, in `inventory.rs` and `cli.rs`); and the demo inventory that `gpufleet demo` applies
//! to an empty database.
//! Tables (see `db.rs`): `gpu_models` — which catalogue models the fleet holds and the on-demand
//! price of one GPU-hour of each; `node_pools` — groups of identical nodes of one model. The
//! models' facts (vendor, memory, MIG) come from `shared::fleet::catalogue`.

pub mod cli;
pub mod db;
pub mod inventory;

use axum::{
    Extension, Json,
    extract::{Query, State},
    http::Method,
};
use shared::{
    accounts::Role,
    fleet::{Fleet, GpuModel, NodePool},
    inventory::Inventory,
};
use sqlx::PgPool;

use crate::{
    access::{Access, Caller},
    app::{Api, AppState},
    audit::Actor,
    error::{Error, Result},
    json::ApiJson,
};

pub fn api() -> Api {
    Api::default()
        .route(Method::GET, "/fleet", Access::SignedIn, get_fleet)
        .route(
            Method::GET,
            "/inventory",
            Access::Roles(&[Role::Admin]),
            get_inventory,
        )
        .route(
            Method::POST,
            "/inventory",
            Access::Roles(&[Role::Admin]),
            put_inventory,
        )
}

async fn get_inventory(State(state): State<AppState>) -> Result<Json<Inventory>> {
    let mut tx = state.pool.begin().await?;
    let inventory = db::read_inventory(&mut tx).await?;
    tx.commit().await?;
    Ok(Json(inventory))
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportQuery {
    #[serde(default)]
    dry_run: bool,
}

/// The whole inventory from a JSON body (`?dry_run=true`: what it would change, nothing
/// written).
async fn put_inventory(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<ImportQuery>,
    ApiJson(wanted): ApiJson<Inventory>,
) -> Result<Json<inventory::Applied>> {
    let applied =
        inventory::apply(&state.pool, &wanted, Actor::User(&caller), query.dry_run).await?;
    if applied.applied {
        tracing::info!(
            by = caller.username,
            changes = applied.changes.len(),
            "inventory imported"
        );
    }
    Ok(Json(applied))
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

/// The demo inventory (`backend/demo/inventory.yaml`): three AWS-style pools and two teams,
/// kept as platform teams keep theirs.
pub fn demo_inventory() -> std::result::Result<Inventory, String> {
    inventory::parse(
        "backend/demo/inventory.yaml",
        include_str!("../demo/inventory.yaml"),
    )
}

/// The demo inventory's fleet, as `GET /api/fleet` shows it.
pub fn demo_fleet() -> Fleet {
    let inventory = demo_inventory().unwrap_or_default();
    Fleet {
        models: inventory
            .models
            .iter()
            .filter_map(|m| GpuModel::priced(&m.name, m.price_cents_per_gpu_hour).ok())
            .collect(),
        pools: inventory
            .pools
            .iter()
            .map(|p| NodePool {
                name: p.name.clone(),
                gpu_model: p.gpu_model.clone(),
                nodes: p.nodes,
                gpus_per_node: p.gpus_per_node,
            })
            .collect(),
    }
}

/// What [`load_demo`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum DemoLoad {
    Loaded { gpus: i64 },
    AlreadyHasFleet,
}

/// Applies [`demo_inventory`] when no GPU model exists yet; never touches a fleet that exists.
pub async fn load_demo(pool: &PgPool) -> Result<DemoLoad> {
    let mut tx = pool.begin().await?;
    // Two `gpufleet demo` at once must not both see an empty table.
    db::lock_fleet(&mut *tx).await?;
    if db::count_models(&mut *tx).await? > 0 {
        return Ok(DemoLoad::AlreadyHasFleet);
    }
    let demo = demo_inventory().map_err(Error::Internal)?;
    // The teams already there stay; the file adds its own beside them.
    let mut wanted = db::read_inventory(&mut tx).await?;
    tx.commit().await?;
    wanted.models = demo.models;
    wanted.flavors = demo.flavors;
    wanted.pools = demo.pools;
    for team in demo.teams {
        if !wanted
            .teams
            .iter()
            .any(|t| t.name == team.name || t.namespace == team.namespace)
        {
            wanted.teams.push(team);
        }
    }
    inventory::apply(pool, &wanted, Actor::Console, false).await?;
    Ok(DemoLoad::Loaded {
        gpus: demo_fleet().total_gpus(),
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
        // 12 + 8 + 4 + 1 nodes of 8 GPUs (the README's 200).
        assert_eq!(fleet.total_gpus(), 200);
        let inventory = demo_inventory().expect("the demo file reads");
        assert_eq!(inventory.validate(), vec![]);
        assert_eq!(inventory.teams.len(), 2);
    }
}
