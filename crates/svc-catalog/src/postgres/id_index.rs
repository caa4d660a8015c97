//! The records' hash index on their id, which a page's records are fetched through. It is only
//! ever built concurrently, on a thread and connection of its own, so that no write waits for
//! it: after a bulk load (which drops it while it appends), and when the writer starts and finds
//! it missing (a catalog from before it, a build that never began) or invalid (a build that was
//! interrupted). Until it is there, pages are read through the primary key: the same rows, more
//! slowly.

use super::link::connect;
use super::storage;
use crate::CatalogResult;
use std::time::Duration;
use tokio_postgres::{Client, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Held by a build for its whole length, so that two never run at once (a writer taking over
/// from one whose build is under way): a build in progress looks invalid, and a second would
/// drop it.
pub(super) const BUILD_LOCK: i64 = 0x7376_6303;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum IdIndex {
    Missing,
    /// Left by a concurrent build that did not finish (or one under way).
    Invalid,
    Valid,
}

pub(super) async fn state(client: &Client) -> CatalogResult<IdIndex> {
    let row = client
        .query_opt(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('records_id_hash')",
            &[],
        )
        .await
        .map_err(storage)?;
    Ok(match row.map(|row| row.get::<_, bool>(0)) {
        None => IdIndex::Missing,
        Some(false) => IdIndex::Invalid,
        Some(true) => IdIndex::Valid,
    })
}

/// On an empty catalog the index is made at once, on the writer's connection, before anything
/// is written: instant, and no build on a thread of its own then races a bulk load's start
/// (which drops it), where each would wait for the other. Says whether the catalog was empty.
pub(super) async fn make_if_empty(client: &Client) -> CatalogResult<bool> {
    let empty = client
        .query_one("SELECT NOT EXISTS (SELECT 1 FROM records)", &[])
        .await
        .map_err(storage)?
        .get::<_, bool>(0);
    if empty {
        client
            .batch_execute(
                "DROP INDEX IF EXISTS records_id_hash; \
                 CREATE INDEX records_id_hash ON records USING hash (id)",
            )
            .await
            .map_err(storage)?;
    }
    Ok(empty)
}

const CREATE: &str = "CREATE INDEX CONCURRENTLY records_id_hash ON records USING hash (id)";

/// Builds the index unless it is valid or another connection is building it; says whether it is
/// valid after (`false`: being built elsewhere).
async fn build(client: &Client) -> CatalogResult<bool> {
    let row = client
        .query_one(
            "SELECT pg_try_advisory_lock($1), to_regclass('records_uri') IS NULL",
            &[&BUILD_LOCK],
        )
        .await
        .map_err(storage)?;
    let (locked, loading): (bool, bool) = (row.get(0), row.get(1));
    if !locked || loading {
        // Being built elsewhere, or a bulk load is under way (its uri index is dropped while it
        // appends), which builds it when it settles.
        return Ok(false);
    }
    // Each statement on its own: a concurrent build or drop cannot share a statement string (an
    // implicit transaction) with anything. The lock goes with the connection.
    let statements: &[&str] = match state(client).await? {
        IdIndex::Valid => return Ok(true),
        IdIndex::Invalid => &["DROP INDEX CONCURRENTLY records_id_hash", CREATE],
        IdIndex::Missing => &[CREATE],
    };
    for statement in statements {
        client.batch_execute(statement).await.map_err(storage)?;
    }
    Ok(true)
}

/// A failed build is tried again this many times, this far apart: it fails on a lost connection
/// or a deadlock with a concurrent schema change, and without it pages are slower until the
/// writer's next start.
const ATTEMPTS: u32 = 3;
const BETWEEN_ATTEMPTS: Duration = Duration::from_secs(10);

/// What follows a bulk load (`vacuum`) or a writer's start finding the index unusable, on a
/// thread of its own: the records' vacuum, then the index.
///
/// The load's records are not yet marked all-visible, and the first vacuum rewrites every page
/// of the table to mark them. Left to autovacuum, it comes a minute or so later, in the middle
/// of whatever the service is answering by then; started now, it runs while the catalog is new.
/// The index, built inside the load, held its settling up by seconds (a hash build logs each of
/// a million inserts, beside the other builds). Neither takes a lock that reads or the writer's
/// changes wait for.
pub(super) fn spawn_build(config: Config, tls: MakeRustlsConnect, vacuum: bool) {
    let spawned = std::thread::Builder::new()
        .name("catalog-id-index".into())
        .spawn(move || {
            let Ok(runtime) = crate::runtime::thread_runtime() else {
                tracing::warn!("catalog id index not built: no runtime");
                return;
            };
            runtime.block_on(async {
                let started = std::time::Instant::now();
                if vacuum && let Err(error) = vacuum_records(&config, &tls).await {
                    // Autovacuum does it later.
                    tracing::warn!("catalog vacuum after the bulk load failed: {error}");
                }
                let built = build_with_retries(&config, &tls).await;
                let seconds = started.elapsed().as_secs_f64();
                match (vacuum, built) {
                    (true, true) => tracing::info!(
                        "catalog vacuumed and its id index built after the bulk load in {seconds:.1}s"
                    ),
                    (true, false) => tracing::warn!(
                        "catalog vacuumed after the bulk load in {seconds:.1}s, its id index not built"
                    ),
                    (false, true) => tracing::info!("catalog id index built in {seconds:.1}s"),
                    (false, false) => {}
                }
            });
        });
    if let Err(error) = spawned {
        tracing::warn!("catalog id index not built: {error}");
    }
}

async fn vacuum_records(config: &Config, tls: &MakeRustlsConnect) -> CatalogResult<()> {
    let client = connect(config, tls).await?;
    client
        .batch_execute("VACUUM records")
        .await
        .map_err(storage)
}

/// Says whether the index is usable at the end (built here, or already valid); a build under
/// way on another connection is left to it.
async fn build_with_retries(config: &Config, tls: &MakeRustlsConnect) -> bool {
    for attempt in 1..=ATTEMPTS {
        let outcome = match connect(config, tls).await {
            Ok(client) => build(&client).await,
            Err(error) => Err(error),
        };
        match outcome {
            Ok(built) => return built,
            Err(error) if attempt < ATTEMPTS => {
                tracing::warn!("catalog id index build failed (trying again): {error}");
                tokio::time::sleep(BETWEEN_ATTEMPTS).await;
            }
            Err(error) => tracing::warn!(
                "catalog id index build failed; pages are read through the primary key until \
                 the writer's next start: {error}"
            ),
        }
    }
    false
}
