//! The writer's connection to PostgreSQL, with its prepared statements and what a bulk load
//! under way holds beside it.

use super::staging::{Staging, UriIndexBuild};
use super::storage;
use crate::CatalogResult;
use crate::keys_column::QueryIds;
use std::collections::HashMap;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The connection and what is tied to it.
pub(super) struct Link {
    pub client: Client,
    pub statements: HashMap<&'static str, Statement>,
    pub ids: QueryIds,
    /// What the bulk load under way has staged.
    pub staging: Staging,
    /// Its uri index, when it is being built on a connection of its own.
    pub uri_index: Option<UriIndexBuild>,
    /// The open transaction appended to the replication log: followers are notified at commit.
    pub notify_on_commit: bool,
}

pub(super) async fn connect(config: &Config, tls: &MakeRustlsConnect) -> CatalogResult<Client> {
    let (client, connection) = config.connect(tls.clone()).await.map_err(storage)?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!("catalog database connection lost: {error}");
        }
    });
    Ok(client)
}

impl Link {
    pub async fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> CatalogResult<u64> {
        let statement = self.statement(sql).await?;
        self.client
            .execute(&statement, params)
            .await
            .map_err(storage)
    }

    pub async fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> CatalogResult<Vec<tokio_postgres::Row>> {
        let statement = self.statement(sql).await?;
        self.client.query(&statement, params).await.map_err(storage)
    }

    pub async fn batch(&self, sql: &str) -> CatalogResult<()> {
        self.client.batch_execute(sql).await.map_err(storage)
    }

    async fn statement(&mut self, sql: &'static str) -> CatalogResult<Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql).await.map_err(storage)?;
        self.statements.insert(sql, statement.clone());
        Ok(statement)
    }
}

/// The advisory lock an indexer holds, on its writer connection, for as long as it writes:
/// the lock goes with the connection, so a writer that lost it can write nothing more.
const WRITER_LOCK: i64 = 0x7376_6302;

impl Link {
    /// Takes the writer lock on this connection, if no one holds it; whether it did.
    pub async fn try_writer_lock(&mut self) -> CatalogResult<bool> {
        let rows = self
            .query("SELECT pg_try_advisory_lock($1)", &[&WRITER_LOCK])
            .await?;
        Ok(rows.first().is_some_and(|r| r.get::<_, bool>(0)))
    }

    /// Gives the writer lock back.
    pub async fn release_writer_lock(&mut self) -> Result<u64, tokio_postgres::Error> {
        self.client
            .execute("SELECT pg_advisory_unlock($1)", &[&WRITER_LOCK])
            .await
    }
}
