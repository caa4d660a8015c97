//! For tests of this crate and of the crates above it: the PostgreSQL clusters scripts/test
//! starts, and a fresh database on them per test.

/// The URL in `variable` (set by scripts/test: `SVC_TEST_POSTGRES`,
/// `SVC_TEST_POSTGRES_STANDBY`). Without it a test says it skipped; under CI that is a failure.
pub fn test_cluster(variable: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{variable} is not set: scripts/test starts PostgreSQL and sets it")
        }
        _ => {
            eprintln!("SKIPPED: no PostgreSQL (set {variable}, or run scripts/test)");
            None
        }
    }
}

/// A fresh, empty database on the test cluster: its URL.
pub async fn fresh_database() -> Option<String> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let admin = test_cluster("SVC_TEST_POSTGRES")?;
    let name = format!(
        "svc_test_{}_{}_{}",
        std::process::id(),
        svc_syntax::now_unix_micros(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .expect("connect to the test cluster");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create a test database");
    let base = admin
        .rsplit_once('/')
        .map(|(base, _)| base)
        .expect("URL with a database");
    Some(format!("{base}/{name}"))
}

/// Makes the store refuse, from now on, every record whose text holds `needle`, as a database
/// refuses a value it cannot hold: triggers on SQLite, a check constraint on PostgreSQL.
pub async fn refuse_records_holding(location: &crate::Location, needle: &str) {
    let pattern = format!("%{needle}%");
    match location {
        crate::Location::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).expect("open the catalog file");
            conn.busy_timeout(std::time::Duration::from_secs(10))
                .expect("busy timeout");
            for event in ["INSERT", "UPDATE"] {
                let name = format!("refuse_{}", event.to_lowercase());
                conn.execute_batch(&format!(
                    "CREATE TRIGGER {name} BEFORE {event} ON records WHEN NEW.record LIKE '{pattern}'
                     BEGIN SELECT RAISE(ABORT, 'a refused record'); END;"
                ))
                .expect("create a trigger");
            }
        }
        crate::Location::Postgres(url) => {
            let (client, connection) = tokio_postgres::connect(url.expose(), tokio_postgres::NoTls)
                .await
                .expect("connect to the catalog");
            tokio::spawn(connection);
            client
                .batch_execute(&format!(
                    "ALTER TABLE records ADD CONSTRAINT refused \
                     CHECK (record IS NULL OR record NOT LIKE '{pattern}') NOT VALID"
                ))
                .await
                .expect("add the constraint");
        }
    }
}
