//! A throwaway PostgreSQL database for an example run: created on the server an admin URL names,
//! dropped afterwards. Shared by `bench_kept` and `chaos`.

use sqlx::Connection as _;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Creates `{prefix}_{uuid}` on the server of `admin`; returns its URL and its name.
pub async fn create(admin: &str, prefix: &str) -> Result<(String, String)> {
    let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(admin).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await?;
    let after_scheme = admin.find("://").map_or(0, |i| i + 3);
    let base = match admin[after_scheme..].find('/') {
        Some(i) => &admin[..after_scheme + i],
        None => admin,
    };
    Ok((format!("{base}/{name}"), name))
}

/// Drops database `name` on the server of `admin`, closing its connections.
pub async fn drop(admin: &str, name: &str) -> Result<()> {
    let mut conn = sqlx::PgConnection::connect(admin).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut conn)
    .await?;
    Ok(())
}
