//! Inventory as code, applied: reads the stored inventory as a `shared::inventory::Inventory`
//! and applies a file in one transaction — validated first, written, checked against the
//! approved quota, audited, then committed (or, for a dry run, rolled back after the same
//! checks, so a dry run reports exactly what a real run would refuse).

use serde_json::json;
use shared::{audit::Kind, inventory::Inventory};
use sqlx::PgPool;

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
    let current = super::db::read_inventory(&mut tx).await?;
    let changes = wanted.changes_from(&current);
    if changes.iter().all(|c| c.starts_with("keep ")) {
        return Ok(Applied {
            changes,
            applied: false,
        });
    }
    super::db::write_inventory(&mut tx, &wanted).await.map_err(|err| match &err {
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
