//! [`TokenStore`]: API tokens, their secrets' digests, and the grace of a rotation.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::{Backend, RowsAffected as _, SqlStore};
use super::rows::{corrupt, wide};
use super::{Result, TokenStore};
use crate::domain::token::{parse_scopes_column, scopes_column};
use crate::domain::{ApiToken, TokenCredentials, TokenId, Window, WorldId};

const COLUMNS: &str = "id, name, scopes, worlds, created_at, expires_at, last_used_at, \
                       secret_sha256, previous_sha256, previous_until, rate_per_minute";

#[derive(sqlx::FromRow)]
struct TokenRow {
    id: Uuid,
    name: String,
    scopes: String,
    worlds: Option<String>,
    created_at: DateTime<Utc>,
    expires_at: Option<DateTime<Utc>>,
    last_used_at: Option<DateTime<Utc>>,
    secret_sha256: Vec<u8>,
    previous_sha256: Option<Vec<u8>>,
    previous_until: Option<DateTime<Utc>>,
    rate_per_minute: Option<i64>,
}

fn digest(bytes: &[u8]) -> Result<[u8; 32]> {
    bytes
        .try_into()
        .map_err(|_| corrupt("api_tokens", "a secret digest is not 32 bytes".into()))
}

impl TryFrom<TokenRow> for TokenCredentials {
    type Error = super::Error;

    fn try_from(row: TokenRow) -> Result<Self> {
        let worlds = match row.worlds {
            None => None,
            Some(text) => Some(
                serde_json::from_str::<Vec<Uuid>>(&text)
                    .map_err(|e| corrupt("api_tokens", format!("worlds: {e}")))?
                    .into_iter()
                    .map(WorldId)
                    .collect(),
            ),
        };
        let previous = match (row.previous_sha256, row.previous_until) {
            (Some(hash), Some(until)) => Some((digest(&hash)?, until)),
            _ => None,
        };
        Ok(TokenCredentials {
            token: ApiToken {
                id: TokenId(row.id),
                name: row.name,
                scopes: parse_scopes_column(&row.scopes),
                worlds,
                created_at: row.created_at,
                expires_at: row.expires_at,
                last_used_at: row.last_used_at,
                rate_per_minute: row
                    .rate_per_minute
                    .map(|r| super::rows::narrow("api_tokens", r))
                    .transpose()?,
            },
            secret_sha256: digest(&row.secret_sha256)?,
            previous,
        })
    }
}

fn worlds_column(worlds: Option<&[WorldId]>) -> Option<String> {
    worlds.map(|w| serde_json::Value::from(w.iter().map(|id| id.0.to_string()).collect::<Vec<_>>()).to_string())
}

#[async_trait]
impl<DB: Backend> TokenStore for SqlStore<DB> {
    async fn insert_token(&self, token: &ApiToken, secret_sha256: &[u8; 32]) -> Result<()> {
        sqlx::query(
            "INSERT INTO api_tokens (id, name, scopes, worlds, secret_sha256, created_at, expires_at, rate_per_minute) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(token.id.0)
        .bind(&token.name)
        .bind(scopes_column(&token.scopes))
        .bind(worlds_column(token.worlds.as_deref()))
        .bind(secret_sha256.to_vec())
        .bind(token.created_at)
        .bind(token.expires_at)
        .bind(token.rate_per_minute.map(i64::from))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn token_credentials(&self, id: TokenId) -> Result<Option<TokenCredentials>> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens WHERE id = $1");
        let row: Option<TokenRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id.0)
            .fetch_optional(&self.pool)
            .await?;
        row.map(TryInto::try_into).transpose()
    }

    async fn list_tokens(&self, window: Window) -> Result<Vec<ApiToken>> {
        let sql = format!("SELECT {COLUMNS} FROM api_tokens ORDER BY created_at, id LIMIT $1 OFFSET $2");
        let rows: Vec<TokenRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(wide(window.limit))
            .bind(wide(window.offset))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|row| TokenCredentials::try_from(row).map(|c| c.token))
            .collect()
    }

    async fn delete_token(&self, id: TokenId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM api_tokens WHERE id = $1")
            .bind(id.0)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn rotate_token(&self, id: TokenId, secret_sha256: &[u8; 32], previous_until: DateTime<Utc>) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE api_tokens SET previous_sha256 = secret_sha256, previous_until = $2, secret_sha256 = $3 \
             WHERE id = $1",
        )
        .bind(id.0)
        .bind(previous_until)
        .bind(secret_sha256.to_vec())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn touch_token(&self, id: TokenId, at: DateTime<Utc>) -> Result<()> {
        // At most once a minute: a token used on every request writes once a minute.
        sqlx::query(
            "UPDATE api_tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)",
        )
        .bind(id.0)
        .bind(at)
        .bind(at - chrono::Duration::minutes(1))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn grant_world(&self, id: TokenId, world: WorldId) -> Result<()> {
        let mut tx = self.begin().await?;
        let worlds: Option<(Option<String>,)> = sqlx::query_as("SELECT worlds FROM api_tokens WHERE id = $1")
            .bind(id.0)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some((Some(text),)) = worlds {
            let mut list: Vec<String> =
                serde_json::from_str(&text).map_err(|e| corrupt("api_tokens", format!("worlds: {e}")))?;
            let world = world.0.to_string();
            if !list.contains(&world) {
                list.push(world);
                sqlx::query("UPDATE api_tokens SET worlds = $2 WHERE id = $1")
                    .bind(id.0)
                    .bind(serde_json::Value::from(list).to_string())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }
}
