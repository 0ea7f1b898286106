//! The inventory's SQL. `gpu_models`: the catalogue models the fleet holds and their price;
//! `node_pools`: groups of identical nodes of one model; and the whole inventory read and
//! written as one document (with flavors, rates and teams).

use shared::{
    fleet::NodePool,
    inventory::{BudgetEntry, FlavorEntry, Inventory, ModelEntry, PoolEntry, RateEntry, TeamEntry},
};
use sqlx::{PgConnection, PgExecutor};

use crate::error::{Error, Result};

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

/// The stored inventory, normalised (defaults written out, lists in name order).
pub async fn read_inventory(db: &mut PgConnection) -> Result<Inventory> {
    let models = sqlx::query_as!(
        ModelEntry,
        "select name, price_cents_per_gpu_hour, product_label from gpu_models order by name"
    )
    .fetch_all(&mut *db)
    .await?;
    Ok(Inventory {
        models,
        flavors: read_flavors(db).await?,
        pools: read_pools(db).await?,
        teams: read_teams(db).await?,
    }
    .normalised())
}

/// The flavors in name order, each with its rates by effective day.
async fn read_flavors(db: &mut PgConnection) -> Result<Vec<FlavorEntry>> {
    let mut flavors: Vec<FlavorEntry> = sqlx::query!(
        r#"select name, settings as "settings!: sqlx::types::Json<shared::quota::FlavorSettings>"
           from flavors order by name"#
    )
    .fetch_all(&mut *db)
    .await?
    .into_iter()
    .map(|row| FlavorEntry {
        name: row.name,
        settings: row.settings.0,
        rates: Vec::new(),
    })
    .collect();
    let rates = sqlx::query!(
        r#"select f.name, r.effective_from::text as "from!", r.cents_per_gpu_hour
           from flavor_rates r join flavors f on f.id = r.flavor_id
           order by f.name, r.effective_from"#
    )
    .fetch_all(&mut *db)
    .await?;
    for rate in rates {
        if let (Some(flavor), Some(day)) = (
            flavors.iter_mut().find(|f| f.name == rate.name),
            shared::common::day::Day::parse(&rate.from),
        ) {
            flavor.rates.push(RateEntry {
                effective_from: day,
                cents_per_gpu_hour: rate.cents_per_gpu_hour,
            });
        }
    }
    Ok(flavors)
}

async fn read_pools(db: &mut PgConnection) -> Result<Vec<PoolEntry>> {
    let pools = sqlx::query!(
        r#"select p.name, m.name as gpu_model, p.nodes, p.gpus_per_node, f.name as flavor
           from node_pools p join gpu_models m on m.id = p.gpu_model_id
           join flavors f on f.id = p.flavor_id order by p.name"#
    )
    .fetch_all(&mut *db)
    .await?
    .into_iter()
    .map(|row| PoolEntry {
        name: row.name,
        gpu_model: row.gpu_model,
        nodes: row.nodes,
        gpus_per_node: row.gpus_per_node,
        flavor: Some(row.flavor),
    })
    .collect();
    Ok(pools)
}

/// The teams in name order, each with its budgets.
async fn read_teams(db: &mut PgConnection) -> Result<Vec<TeamEntry>> {
    let mut teams: Vec<TeamEntry> = sqlx::query!(
        "select name, namespace, cost_centre, cluster_queue, local_queue, cohort from teams order by name"
    )
    .fetch_all(&mut *db)
    .await?
    .into_iter()
    .map(|row| TeamEntry {
        name: row.name,
        namespace: row.namespace,
        cost_centre: row.cost_centre,
        cluster_queue: Some(row.cluster_queue),
        local_queue: Some(row.local_queue),
        cohort: row.cohort,
        budgets: Vec::new(),
    })
    .collect();
    for (team, month, budget) in crate::chargeback::budget::every(&mut *db).await? {
        if let Some(t) = teams.iter_mut().find(|t| t.name == team) {
            t.budgets.push(BudgetEntry::of(month, &budget));
        }
    }
    Ok(teams)
}

/// Upserts everything in `wanted` (normalised) and removes the models, flavors and pools it
/// does not list; teams are only upserted.
pub async fn write_inventory(db: &mut PgConnection, wanted: &Inventory) -> Result<()> {
    for m in &wanted.models {
        write_model(db, m).await?;
    }
    for f in &wanted.flavors {
        write_flavor(db, wanted, f).await?;
        write_rates(db, f).await?;
    }
    for p in &wanted.pools {
        write_pool(db, p).await?;
    }
    delete_unlisted(db, wanted).await?;
    for t in &wanted.teams {
        write_team(db, t).await?;
    }
    Ok(())
}

async fn write_model(db: &mut PgConnection, m: &ModelEntry) -> Result<()> {
    sqlx::query!(
        "insert into gpu_models (name, price_cents_per_gpu_hour, product_label) values ($1, $2, $3)
         on conflict (name) do update set price_cents_per_gpu_hour = excluded.price_cents_per_gpu_hour,
                                          product_label = excluded.product_label
         where (gpu_models.price_cents_per_gpu_hour, gpu_models.product_label)
               is distinct from (excluded.price_cents_per_gpu_hour, excluded.product_label)",
        m.name,
        m.price_cents_per_gpu_hour,
        m.product_label.as_deref()
    )
    .execute(&mut *db)
    .await?;
    Ok(())
}

async fn write_flavor(db: &mut PgConnection, wanted: &Inventory, f: &FlavorEntry) -> Result<()> {
    // A flavor's model is its pools' (validated to agree).
    let model = wanted
        .pools
        .iter()
        .find(|p| p.flavor.as_deref() == Some(&f.name))
        .map(|p| p.gpu_model.clone())
        .ok_or_else(|| Error::Internal(format!("flavor {} has no pool", f.name)))?;
    let settings = serde_json::to_value(&f.settings).map_err(|e| Error::Internal(e.to_string()))?;
    sqlx::query!(
        "insert into flavors (name, gpu_model_id, settings)
         select $1, id, $3 from gpu_models where name = $2
         on conflict (name) do update
            set gpu_model_id = excluded.gpu_model_id, settings = excluded.settings,
                version = flavors.version + 1
         where flavors.gpu_model_id <> excluded.gpu_model_id or flavors.settings <> excluded.settings",
        f.name,
        model,
        settings
    )
    .execute(&mut *db)
    .await?;
    Ok(())
}

async fn write_rates(db: &mut PgConnection, f: &FlavorEntry) -> Result<()> {
    // the file's rates are the flavor's rates (a closed month keeps its own, frozen)
    let days: Vec<String> = f
        .rates
        .iter()
        .map(|r| r.effective_from.to_string())
        .collect();
    let cents: Vec<i64> = f.rates.iter().map(|r| r.cents_per_gpu_hour).collect();
    sqlx::query!(
        "delete from flavor_rates
         where flavor_id = (select id from flavors where name = $1)
           and effective_from::text <> all($2::text[])",
        f.name,
        &days
    )
    .execute(&mut *db)
    .await?;
    sqlx::query!(
        "insert into flavor_rates (flavor_id, effective_from, cents_per_gpu_hour)
         select f.id, d::date, c from flavors f, unnest($2::text[], $3::bigint[]) as u(d, c)
         where f.name = $1
         on conflict (flavor_id, effective_from) do update
            set cents_per_gpu_hour = excluded.cents_per_gpu_hour, set_by = null, set_at = now()
         where flavor_rates.cents_per_gpu_hour <> excluded.cents_per_gpu_hour",
        f.name,
        &days,
        &cents
    )
    .execute(&mut *db)
    .await?;
    Ok(())
}

async fn write_pool(db: &mut PgConnection, p: &PoolEntry) -> Result<()> {
    sqlx::query!(
        "insert into node_pools (name, gpu_model_id, nodes, gpus_per_node, flavor_id)
         select $1, m.id, $3, $4, f.id from gpu_models m, flavors f where m.name = $2 and f.name = $5
         on conflict (name) do update
            set gpu_model_id = excluded.gpu_model_id, nodes = excluded.nodes,
                gpus_per_node = excluded.gpus_per_node, flavor_id = excluded.flavor_id
         where (node_pools.gpu_model_id, node_pools.nodes, node_pools.gpus_per_node, node_pools.flavor_id)
               is distinct from (excluded.gpu_model_id, excluded.nodes, excluded.gpus_per_node, excluded.flavor_id)",
        p.name,
        p.gpu_model,
        p.nodes,
        p.gpus_per_node,
        p.flavor_name()
    )
    .execute(&mut *db)
    .await?;
    Ok(())
}

/// The pools, flavors and models the file no longer lists.
async fn delete_unlisted(db: &mut PgConnection, wanted: &Inventory) -> Result<()> {
    let names = |items: Vec<&String>| items.into_iter().cloned().collect::<Vec<String>>();
    let pools = names(wanted.pools.iter().map(|p| &p.name).collect());
    let flavors = names(wanted.flavors.iter().map(|f| &f.name).collect());
    let models = names(wanted.models.iter().map(|m| &m.name).collect());
    sqlx::query!("delete from node_pools where name <> all($1)", &pools)
        .execute(&mut *db)
        .await?;
    sqlx::query!("delete from flavors where name <> all($1)", &flavors)
        .execute(&mut *db)
        .await?;
    sqlx::query!("delete from gpu_models where name <> all($1)", &models)
        .execute(&mut *db)
        .await?;
    Ok(())
}

async fn write_team(db: &mut PgConnection, t: &TeamEntry) -> Result<()> {
    sqlx::query!(
        "insert into teams (name, namespace, cost_centre, cluster_queue, local_queue, cohort)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (name) do update
            set namespace = excluded.namespace, cost_centre = excluded.cost_centre,
                cluster_queue = excluded.cluster_queue, local_queue = excluded.local_queue,
                cohort = excluded.cohort
         where (teams.namespace, teams.cost_centre, teams.cluster_queue, teams.local_queue, teams.cohort)
               is distinct from (excluded.namespace, excluded.cost_centre, excluded.cluster_queue,
                                 excluded.local_queue, excluded.cohort)",
        t.name,
        t.namespace,
        t.cost_centre.trim(),
        t.cluster_queue(),
        t.local_queue(),
        t.cohort
    )
    .execute(&mut *db)
    .await?;
    // the file's budgets replace the team's (each checked by `Inventory::validate`)
    let budgets: Vec<_> = t.budgets.iter().filter_map(|b| b.checked().ok()).collect();
    crate::chargeback::budget::replace(&mut *db, &t.name, &budgets).await?;
    Ok(())
}
