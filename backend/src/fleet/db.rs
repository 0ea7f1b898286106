//! The inventory's SQL. `gpu_models`: the catalogue models the fleet holds and their price;
//! `node_pools`: groups of identical nodes of one model.

use shared::fleet::NodePool;
use sqlx::PgExecutor;

/// A `gpu_models` row: the model's facts come from the catalogue, not the database.
pub struct GpuModelRow {
    pub name: String,
    pub price_cents_per_gpu_hour: i64,
}

pub async fn list_models(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<GpuModelRow>> {
    sqlx::query_as!(
        GpuModelRow,
        "select name, price_cents_per_gpu_hour from gpu_models order by name"
    )
    .fetch_all(db)
    .await
}

pub async fn list_pools(db: impl PgExecutor<'_>) -> sqlx::Result<Vec<NodePool>> {
    sqlx::query_as!(
        NodePool,
        "select p.name, m.name as gpu_model, p.nodes, p.gpus_per_node
         from node_pools p join gpu_models m on m.id = p.gpu_model_id
         order by p.name"
    )
    .fetch_all(db)
    .await
}

pub async fn count_models(db: impl PgExecutor<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"select count(*) as "count!" from gpu_models"#)
        .fetch_one(db)
        .await
}

pub async fn lock_fleet(db: impl PgExecutor<'_>) -> sqlx::Result<()> {
    sqlx::query!("lock table gpu_models in share row exclusive mode")
        .execute(db)
        .await?;
    Ok(())
}
