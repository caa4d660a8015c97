//! Versioned, append-only schema migrations, run at start under an advisory lock so that two
//! processes starting together do not both migrate. `svc_schema.version` holds the version
//! reached. Every text compared for order is `COLLATE "C"`: uris page byte-wise, as on SQLite.

use crate::{CatalogError, CatalogResult};
use tokio_postgres::Client;

/// The advisory lock key held while migrating ("svc" and a version of this scheme).
const MIGRATION_LOCK: i64 = 0x7376_6301;

const MIGRATIONS: &[&str] = &[
    // 1: records (a bulk load drops the uri index while it appends), tombstones keep their
    // rev; per-query index keys pointing at record ids; counts; cursors; inactive accounts.
    // Query ids come from a sequence, so a redefined query's old entries never alias.
    r#"
    CREATE TABLE records (
        id BIGSERIAL PRIMARY KEY,
        uri TEXT COLLATE "C" NOT NULL,
        collection TEXT COLLATE "C" NOT NULL,
        author TEXT COLLATE "C" NOT NULL,
        rev TEXT COLLATE "C" NOT NULL,
        cid TEXT,
        record TEXT,
        keys TEXT NOT NULL,
        indexed_at BIGINT NOT NULL
    );
    CREATE UNIQUE INDEX records_uri ON records (uri);
    CREATE TABLE queries (
        qid BIGSERIAL PRIMARY KEY,
        name TEXT COLLATE "C" NOT NULL UNIQUE,
        fingerprint TEXT NOT NULL
    );
    CREATE TABLE query_keys (
        qid BIGINT NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        uri TEXT COLLATE "C" NOT NULL,
        rid BIGINT NOT NULL,
        PRIMARY KEY (qid, key, uri)
    );
    CREATE TABLE query_counts (
        qid BIGINT NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        n BIGINT NOT NULL,
        PRIMARY KEY (qid, key)
    );
    CREATE TABLE kind_counts (
        collection TEXT COLLATE "C" PRIMARY KEY,
        n BIGINT NOT NULL
    );
    CREATE TABLE cursors (
        source TEXT COLLATE "C" PRIMARY KEY,
        endpoint TEXT NOT NULL,
        cursor TEXT NOT NULL,
        event_time_us BIGINT,
        updated_at BIGINT NOT NULL
    );
    CREATE TABLE inactive_accounts (
        did TEXT COLLATE "C" PRIMARY KEY,
        status TEXT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    "#,
    // 2: index entries of a bulk load under way, out of sight until it settles. Unlogged: a
    // crash during a bulk load empties the catalog anyway.
    r#"
    CREATE UNLOGGED TABLE staged_keys (
        qid BIGINT NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        uri TEXT COLLATE "C" NOT NULL,
        rid BIGINT NOT NULL
    );
    "#,
    // 3: the replication log other processes follow to keep their answer caches exact, and the
    // indexer's heartbeat, by which they judge how current the catalog is.
    r#"
    CREATE TABLE change_log (
        seq BIGINT PRIMARY KEY,
        at_ms BIGINT NOT NULL,
        keys TEXT NOT NULL,
        uris TEXT NOT NULL,
        kinds BOOLEAN NOT NULL,
        everything BOOLEAN NOT NULL
    );
    CREATE TABLE indexer_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        heartbeat_ms BIGINT NOT NULL
    );
    "#,
    // 4: a bulk load's index entries wait in the indexer's memory, no longer in a table.
    "DROP TABLE staged_keys",
    // 5: the index entries' key carries the record's id, so that a page's ids come from the
    // index alone.
    "ALTER TABLE query_keys DROP CONSTRAINT query_keys_pkey;
     ALTER TABLE query_keys ADD PRIMARY KEY (qid, key, uri) INCLUDE (rid);",
    // 6: an index entry names its (query, key) by the number its count row carries instead of
    // repeating the key's text: a third less to write, store and compare for every entry.
    r#"
    CREATE SEQUENCE query_counts_kid_seq;
    ALTER TABLE query_counts ADD COLUMN kid BIGINT;
    UPDATE query_counts SET kid = nextval('query_counts_kid_seq');
    ALTER TABLE query_counts ALTER COLUMN kid SET NOT NULL,
        ALTER COLUMN kid SET DEFAULT nextval('query_counts_kid_seq');
    ALTER SEQUENCE query_counts_kid_seq OWNED BY query_counts.kid;
    CREATE TABLE key_entries (
        kid BIGINT NOT NULL,
        uri TEXT COLLATE "C" NOT NULL,
        rid BIGINT NOT NULL
    );
    INSERT INTO key_entries (kid, uri, rid)
        SELECT c.kid, k.uri, k.rid FROM query_keys k JOIN query_counts c USING (qid, key);
    DROP TABLE query_keys;
    ALTER TABLE key_entries RENAME TO query_keys;
    ALTER TABLE query_keys ADD PRIMARY KEY (kid, uri) INCLUDE (rid);
    "#,
    // 7: a bulk load leaves a record's keys out (NULL: they are taken from the record when
    // needed), and the author, never read (it is the uri's authority), goes.
    "ALTER TABLE records ALTER COLUMN keys DROP NOT NULL, DROP COLUMN author",
    // 8: the change stream: each visible change of a record, numbered, with the keys it was
    // filed under before and after, which clients follow from a number they hold.
    r#"
    CREATE TABLE record_changes (
        seq BIGINT PRIMARY KEY,
        at_ms BIGINT NOT NULL,
        uri TEXT COLLATE "C" NOT NULL,
        was_live BOOLEAN NOT NULL,
        is_live BOOLEAN NOT NULL,
        before_keys TEXT NOT NULL,
        after_keys TEXT NOT NULL
    );
    "#,
    // 9: what the catalog keeps of each followed repository's synchronisation: the
    // repositories owed a whole read, with their retry schedule, and each chain's head.
    r#"
    CREATE TABLE resync_queue (
        did TEXT COLLATE "C" PRIMARY KEY,
        reason TEXT NOT NULL,
        since_ms BIGINT NOT NULL,
        attempts BIGINT NOT NULL,
        due_ms BIGINT NOT NULL,
        last_error TEXT
    );
    CREATE INDEX resync_queue_due ON resync_queue (due_ms, did);
    CREATE INDEX resync_queue_since ON resync_queue (since_ms, did);
    CREATE TABLE repository_heads (
        did TEXT COLLATE "C" PRIMARY KEY,
        rev TEXT COLLATE "C" NOT NULL,
        data BYTEA NOT NULL
    );
    "#,
    // 10: the operator's takedowns: an account's DID or a record's uri, out of every answer
    // until lifted.
    r#"
    CREATE TABLE takedowns (
        subject TEXT COLLATE "C" PRIMARY KEY,
        reference TEXT,
        applied_at BIGINT NOT NULL
    );
    "#,
    // 11: labelers' labels, the latest of each (subject, labeler, value), negations kept to
    // order what follows; a takedown names who applied it (`operator`, or a labeler's DID).
    r#"
    ALTER TABLE takedowns ADD COLUMN source TEXT COLLATE "C" NOT NULL DEFAULT 'operator';
    ALTER TABLE takedowns DROP CONSTRAINT takedowns_pkey;
    ALTER TABLE takedowns ADD PRIMARY KEY (subject, source);
    ALTER TABLE takedowns ALTER COLUMN source DROP DEFAULT;
    CREATE TABLE labels (
        subject TEXT COLLATE "C" NOT NULL,
        src TEXT COLLATE "C" NOT NULL,
        val TEXT COLLATE "C" NOT NULL,
        neg BOOLEAN NOT NULL,
        cts TEXT NOT NULL,
        exp_ms BIGINT,
        PRIMARY KEY (subject, src, val)
    );
    CREATE INDEX labels_expiry ON labels (exp_ms) WHERE exp_ms IS NOT NULL;
    "#,
    // 12: search: each live record's folded words (its name weighted A, its text D), under
    // its id, with a GIN index; the definition they were read under beside them.
    r#"
    CREATE TABLE search (
        rid BIGINT PRIMARY KEY,
        kind TEXT COLLATE "C" NOT NULL,
        words tsvector NOT NULL
    );
    CREATE INDEX search_words ON search USING GIN (words);
    CREATE TABLE search_state (fingerprint TEXT);
    CREATE UNLOGGED TABLE search_staging (
        rid BIGINT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        text TEXT NOT NULL
    );
    "#,
    // 13: activity by minute for the charts: changes streamed, and each source's newest
    // event time at the end of each minute its cursor moved in.
    r#"
    CREATE TABLE activity_minutes (minute BIGINT PRIMARY KEY, changes BIGINT NOT NULL);
    CREATE TABLE source_minutes (
        source TEXT COLLATE "C" NOT NULL,
        minute BIGINT NOT NULL,
        event_us BIGINT NOT NULL,
        PRIMARY KEY (source, minute)
    );
    "#,
];

/// For a process that only reads (perhaps on a hot standby, where nothing can be written):
/// the schema must be the one this build reads, migrated by an indexer.
pub(super) async fn check_current(client: &Client) -> CatalogResult<()> {
    let found: Option<i32> = match client
        .query_opt("SELECT version FROM svc_schema", &[])
        .await
    {
        Ok(row) => row.map(|row| row.get(0)),
        Err(error) if error.as_db_error().is_some() => None,
        Err(error) => return Err(super::storage(error)),
    };
    let found = found.unwrap_or(0).max(0) as usize;
    if found != MIGRATIONS.len() {
        return Err(CatalogError::Storage(format!(
            "the database has schema version {found}, this build reads {} (start its indexer first)",
            MIGRATIONS.len()
        )));
    }
    Ok(())
}

pub(super) async fn migrate(client: &mut Client) -> CatalogResult<()> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(super::storage)?;
    let outcome = run(client).await;
    let unlocked = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(super::storage);
    outcome.and(unlocked.map(|_| ()))
}

async fn run(client: &mut Client) -> CatalogResult<()> {
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS svc_schema (version INTEGER NOT NULL)")
        .await
        .map_err(super::storage)?;
    let found: Option<i32> = client
        .query_opt("SELECT version FROM svc_schema", &[])
        .await
        .map_err(super::storage)?
        .map(|row| row.get(0));
    let current = found.unwrap_or(0).max(0) as usize;
    if current > MIGRATIONS.len() {
        return Err(CatalogError::Storage(format!(
            "the database has schema version {current}, newer than this build's {}",
            MIGRATIONS.len()
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let version = index as i32 + 1;
        let tx = client.transaction().await.map_err(super::storage)?;
        tx.batch_execute(sql).await.map_err(super::storage)?;
        tx.execute("DELETE FROM svc_schema", &[])
            .await
            .map_err(super::storage)?;
        tx.execute("INSERT INTO svc_schema (version) VALUES ($1)", &[&version])
            .await
            .map_err(super::storage)?;
        tx.commit().await.map_err(super::storage)?;
    }
    Ok(())
}
