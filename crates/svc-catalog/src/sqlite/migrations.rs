//! Versioned, append-only schema migrations. `PRAGMA user_version` holds the version reached;
//! each step runs in its own transaction at start-up.

use rusqlite::Connection;

const MIGRATIONS: &[&str] = &[
    // 1: records in arrival order with a uri index (a bulk load appends rows and builds the
    // index once, sorted), tombstones (a deleted record keeps its rev so that an older event
    // cannot bring it back) and the record's index keys (so an update or delete knows what to
    // remove without re-reading the record); per-query index keys pointing at record rowids,
    // per-query and per-kind counts, source cursors.
    r#"
    CREATE TABLE records (
        uri TEXT NOT NULL,
        collection TEXT NOT NULL,
        author TEXT NOT NULL,
        rev TEXT NOT NULL,
        cid TEXT,
        record TEXT,
        keys TEXT NOT NULL,
        indexed_at INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX records_uri ON records (uri);
    CREATE TABLE queries (
        qid INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        fingerprint TEXT NOT NULL
    );
    CREATE TABLE query_keys (
        qid INTEGER NOT NULL,
        key TEXT NOT NULL,
        uri TEXT NOT NULL,
        rid INTEGER NOT NULL,
        PRIMARY KEY (qid, key, uri)
    ) WITHOUT ROWID;
    CREATE TABLE query_counts (
        qid INTEGER NOT NULL,
        key TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (qid, key)
    ) WITHOUT ROWID;
    CREATE TABLE kind_counts (
        collection TEXT PRIMARY KEY,
        n INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE cursors (
        source TEXT PRIMARY KEY,
        endpoint TEXT NOT NULL,
        cursor TEXT NOT NULL,
        event_time_us INTEGER,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 2: accounts the source reports inactive (deactivated, suspended, takendown): their
    // records stay stored but leave the index and the counts until the account is active again.
    r#"
    CREATE TABLE inactive_accounts (
        did TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 3: ids of queries redefined or dropped, never given out again (records' keys columns
    // may still name them).
    r#"
    CREATE TABLE retired_queries (qid INTEGER PRIMARY KEY);
    "#,
    // 4: the replication log other processes follow to keep their answer caches exact, and the
    // indexer's heartbeat, by which they judge how current the catalog is.
    r#"
    CREATE TABLE change_log (
        seq INTEGER PRIMARY KEY,
        at_ms INTEGER NOT NULL,
        keys TEXT NOT NULL,
        uris TEXT NOT NULL,
        kinds INTEGER NOT NULL,
        everything INTEGER NOT NULL
    );
    CREATE TABLE indexer_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        heartbeat_ms INTEGER NOT NULL
    );
    "#,
    // 5: the change stream: each visible change of a record, numbered, with the keys it was
    // filed under before and after, which clients follow from a number they hold.
    r#"
    CREATE TABLE record_changes (
        seq INTEGER PRIMARY KEY,
        at_ms INTEGER NOT NULL,
        uri TEXT NOT NULL,
        was_live INTEGER NOT NULL,
        is_live INTEGER NOT NULL,
        before_keys TEXT NOT NULL,
        after_keys TEXT NOT NULL
    );
    "#,
    // 6: what the catalog keeps of each followed repository's synchronisation: the
    // repositories owed a whole read, with their retry schedule, and each chain's head.
    r#"
    CREATE TABLE resync_queue (
        did TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        since_ms INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        due_ms INTEGER NOT NULL,
        last_error TEXT
    ) WITHOUT ROWID;
    CREATE INDEX resync_queue_due ON resync_queue (due_ms, did);
    CREATE INDEX resync_queue_since ON resync_queue (since_ms, did);
    CREATE TABLE repository_heads (
        did TEXT PRIMARY KEY,
        rev TEXT NOT NULL,
        data BLOB NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 7: the operator's takedowns: an account's DID or a record's uri, out of every answer
    // until lifted.
    r#"
    CREATE TABLE takedowns (
        subject TEXT PRIMARY KEY,
        reference TEXT,
        applied_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 8: labelers' labels, the latest of each (subject, labeler, value), negations kept to
    // order what follows; a takedown names who applied it (`operator`, or a labeler's DID).
    r#"
    CREATE TABLE takedowns_by_source (
        subject TEXT NOT NULL,
        source TEXT NOT NULL,
        reference TEXT,
        applied_at INTEGER NOT NULL,
        PRIMARY KEY (subject, source)
    ) WITHOUT ROWID;
    INSERT INTO takedowns_by_source (subject, source, reference, applied_at)
        SELECT subject, 'operator', reference, applied_at FROM takedowns;
    DROP TABLE takedowns;
    ALTER TABLE takedowns_by_source RENAME TO takedowns;
    CREATE TABLE labels (
        subject TEXT NOT NULL,
        src TEXT NOT NULL,
        val TEXT NOT NULL,
        neg INTEGER NOT NULL,
        cts TEXT NOT NULL,
        exp_ms INTEGER,
        PRIMARY KEY (subject, src, val)
    ) WITHOUT ROWID;
    CREATE INDEX labels_expiry ON labels (exp_ms) WHERE exp_ms IS NOT NULL;
    "#,
    // 9: search: each live record's folded words (its name, its text) and its kind, under its
    // rowid; the words are kept only in the index (contentless), with indexes of their first
    // 3 and 4 letters (a last word typed is also a prefix: without them, a short one merges
    // the lists of every word it starts), and the definition they were read under beside it.
    r#"
    CREATE VIRTUAL TABLE search USING fts5(
        name, text, kind,
        content = '', contentless_delete = 1,
        tokenize = 'unicode61 remove_diacritics 0',
        prefix = '3 4'
    );
    CREATE TABLE search_state (fingerprint TEXT);
    "#,
    // 10: activity by minute for the charts: changes streamed, and each source's newest
    // event time at the end of each minute its cursor moved in.
    r#"
    CREATE TABLE activity_minutes (minute INTEGER PRIMARY KEY, changes INTEGER NOT NULL);
    CREATE TABLE source_minutes (
        source TEXT NOT NULL,
        minute INTEGER NOT NULL,
        event_us INTEGER NOT NULL,
        PRIMARY KEY (source, minute)
    ) WITHOUT ROWID;
    "#,
    // 11: the words of the search index longer than its prefix indexes reach, so that a
    // longer start of a word is searched as the words it begins (a prefix query past the
    // prefix indexes merges every list it names in memory). Filled from the index itself.
    r#"
    CREATE TABLE search_words (word TEXT PRIMARY KEY) WITHOUT ROWID;
    CREATE VIRTUAL TABLE temp.search_terms USING fts5vocab(main, search, col);
    INSERT INTO search_words (word)
      SELECT DISTINCT term FROM temp.search_terms
      WHERE col IN ('name', 'text') AND length(term) > 4 ORDER BY term;
    DROP TABLE temp.search_terms;
    "#,
];

pub(crate) fn run(conn: &mut Connection) -> rusqlite::Result<u32> {
    let current: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = index as u32 + 1;
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
    }
    Ok(MIGRATIONS.len() as u32)
}

/// The schema version this build writes; a newer database is refused.
pub(crate) const LATEST: u32 = MIGRATIONS.len() as u32;
