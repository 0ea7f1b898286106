//! Inventory as code, applied: reads the stored inventory as a `shared::inventory::Inventory`
//! and applies a file in one transaction — validated first, written, checked against the
//! approved quota, audited, then committed (or, for a dry run, rolled back after the same
//! checks, so a dry run reports exactly what a real run would refuse).

use serde_json::json;
use shared::{
    audit::Kind,
    inventory::{FlavorEntry, Inventory, ModelEntry, PoolEntry, RateEntry, TeamEntry},
};
use sqlx::{PgConnection, PgPool};

use crate::{
    audit::{self, Actor},
    error::{Error, Result},
    quota,
};

/// Reads an inventory file (YAML, of which JSON is a part); a problem names the file, the
/// path and, for syntax, the line and column.
pub fn parse(file: &str, text: &str) -> std::result::Result<Inventory, String> {
    let deserializer = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            format!("{file}: {inner}")
        } else {
            format!("{file}: {path}: {inner}")
        }
    })
}

/// The stored inventory, normalised (defaults written out, lists in name order).
pub async fn read(db: &mut PgConnection) -> Result<Inventory> {
    let models = sqlx::query_as!(
        ModelEntry,
        "select name, price_cents_per_gpu_hour from gpu_models order by name"
    )
    .fetch_all(&mut *db)
    .await?;
    let flavors = sqlx::query!(
        r#"select name, settings as "settings!: sqlx::types::Json<shared::quota::FlavorSettings>"
           from flavors order by name"#
    )
    .fetch_all(&mut *db)
    .await?
    .into_iter()
    .map(|row| {
        Ok(FlavorEntry {
            name: row.name,
            settings: row.settings.0,
            rates: Vec::new(),
        })
    })
    .collect::<Result<Vec<FlavorEntry>>>()?;
    let mut flavors = flavors;
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
    let teams = sqlx::query!(
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
    })
    .collect();
    Ok(Inventory {
        models,
        flavors,
        pools,
        teams,
    }
    .normalised())
}

/// What [`apply`] found and did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Applied {
    /// One line per change, in a stable order; empty when the file matches the database.
    pub changes: Vec<String>,
    /// `false` for a dry run (and when there was nothing to change).
    pub applied: bool,
}

/// Applies `wanted` as the whole inventory (see the module doc and `shared::inventory`).
pub async fn apply(
    pool: &PgPool,
    wanted: &Inventory,
    actor: Actor<'_>,
    dry_run: bool,
) -> Result<Applied> {
    let errors = wanted.validate();
    if !errors.is_empty() {
        return Err(Error::Invalid(errors));
    }
    let wanted = wanted.normalised();
    let mut tx = pool.begin().await?;
    super::db::lock_fleet(&mut *tx).await?;
    quota::db::lock_quota(&mut *tx).await?;
    let current = read(&mut tx).await?;
    let changes = wanted.changes_from(&current);
    if changes.iter().all(|c| c.starts_with("keep ")) {
        return Ok(Applied {
            changes,
            applied: false,
        });
    }
    write(&mut tx, &wanted).await.map_err(|err| match &err {
        Error::Database(sqlx::Error::Database(e)) if e.is_unique_violation() => Error::Conflict(
            "two teams would share a namespace or a ClusterQueue name while the file is applied; rename them in two steps"
                .to_owned(),
        ),
        _ => err,
    })?;
    let world = quota::world(&mut tx).await?;
    let problems = world.overcommitted(crate::clock::today());
    if !problems.is_empty() {
        return Err(Error::Conflict(format!(
            "{}; revoke or supersede that quota first",
            problems.join("; ")
        )));
    }
    if dry_run {
        tx.rollback().await?;
        return Ok(Applied {
            changes,
            applied: false,
        });
    }
    let to_value = |inv: &Inventory| serde_json::to_value(inv).unwrap_or_default();
    audit::record(
        &mut *tx,
        actor,
        Kind::Inventory,
        "import",
        "inventory",
        None,
        Some(&to_value(&current)),
        Some(&json!({"inventory": to_value(&wanted), "changes": changes})),
    )
    .await?;
    tx.commit().await?;
    Ok(Applied {
        changes,
        applied: true,
    })
}

/// Upserts everything in `wanted` (normalised) and removes the models, flavors and pools it
/// does not list; teams are only upserted.
async fn write(db: &mut PgConnection, wanted: &Inventory) -> Result<()> {
    for m in &wanted.models {
        sqlx::query!(
            "insert into gpu_models (name, price_cents_per_gpu_hour) values ($1, $2)
             on conflict (name) do update set price_cents_per_gpu_hour = excluded.price_cents_per_gpu_hour
             where gpu_models.price_cents_per_gpu_hour <> excluded.price_cents_per_gpu_hour",
            m.name,
            m.price_cents_per_gpu_hour
        )
        .execute(&mut *db)
        .await?;
    }
    for f in &wanted.flavors {
        // A flavor's model is its pools' (validated to agree).
        let model = wanted
            .pools
            .iter()
            .find(|p| p.flavor.as_deref() == Some(&f.name))
            .map(|p| p.gpu_model.clone())
            .ok_or_else(|| Error::Internal(format!("flavor {} has no pool", f.name)))?;
        let settings =
            serde_json::to_value(&f.settings).map_err(|e| Error::Internal(e.to_string()))?;
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
    }
    for p in &wanted.pools {
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
    }
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
    for t in &wanted.teams {
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
    }
    Ok(())
}
