//! Reads that stop when nobody waits for them. A request that is dropped (its client left, its
//! time ran out) drops its read's future, but the statement it sent goes on running in the
//! database, and the connection, back in the pool, makes the next read wait for it. So the
//! connections a read takes are handed back only when the read completes; when it is dropped
//! before, each is taken out of the pool, its statement cancelled, and the connection closed.

use super::{CONNECT_TIMEOUT, storage};
use crate::{CatalogError, CatalogResult};
use deadpool_postgres::{Object, Pool, PoolError};
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The pool of read connections, and what cancelling a statement on one takes.
pub struct ReadPool {
    pool: Pool,
    tls: MakeRustlsConnect,
}

/// One read's access to the pool: the connections it took are held until it completes.
pub(super) struct Reads {
    pool: Pool,
    taken: Taken,
}

/// The connections a read has finished with, held until it completes.
type Taken = Arc<Mutex<Vec<Object>>>;

/// A connection lent to a read.
pub(super) struct Reading {
    object: Option<Object>,
    taken: Taken,
}

impl ReadPool {
    /// A pool of at most `size` connections, made when reads need them.
    pub(super) fn new(
        config: &Config,
        tls: &MakeRustlsConnect,
        size: usize,
    ) -> CatalogResult<ReadPool> {
        let manager = deadpool_postgres::Manager::from_config(
            config.clone(),
            tls.clone(),
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        Ok(ReadPool {
            pool,
            tls: tls.clone(),
        })
    }

    /// Runs `read`; when the returned future is dropped before it completes, the statements
    /// of the connections `read` took are cancelled.
    pub(super) fn reading<'a, T, F>(
        &'a self,
        read: impl FnOnce(Reads) -> F,
    ) -> impl Future<Output = CatalogResult<T>> + Send + 'a
    where
        F: Future<Output = CatalogResult<T>> + Send + 'a,
        T: Send + 'a,
    {
        let taken = Taken::default();
        let reads = Reads {
            pool: self.pool.clone(),
            taken: taken.clone(),
        };
        Completing {
            read: Some(Box::pin(read(reads))),
            taken,
            tls: self.tls.clone(),
        }
    }
}

/// A connection from the pool, lent to one read.
pub(super) async fn connection(reads: &Reads) -> CatalogResult<Reading> {
    let object = reads.pool.get().await.map_err(|error| match error {
        PoolError::Backend(error) => storage(error),
        other => CatalogError::Unavailable(other.to_string()),
    })?;
    Ok(Reading {
        object: Some(object),
        taken: reads.taken.clone(),
    })
}

impl Deref for Reading {
    type Target = Object;

    fn deref(&self) -> &Object {
        self.object
            .as_ref()
            .expect("a lent connection is held until dropped")
    }
}

impl DerefMut for Reading {
    fn deref_mut(&mut self) -> &mut Object {
        self.object
            .as_mut()
            .expect("a lent connection is held until dropped")
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        if let Some(object) = self.object.take() {
            lock(&self.taken).push(object);
        }
    }
}

fn lock(taken: &Taken) -> std::sync::MutexGuard<'_, Vec<Object>> {
    taken.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A read's future; `read` is `None` once it has completed.
struct Completing<F> {
    read: Option<Pin<Box<F>>>,
    taken: Taken,
    tls: MakeRustlsConnect,
}

impl<T, F: Future<Output = T>> Future for Completing<F> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let Some(read) = self.read.as_mut() else {
            panic!("a read polled after it completed");
        };
        let answer = std::task::ready!(read.as_mut().poll(cx));
        // Its connections go back to the pool.
        self.read = None;
        lock(&self.taken).clear();
        Poll::Ready(answer)
    }
}

impl<F> Drop for Completing<F> {
    fn drop(&mut self) {
        if self.read.take().is_none() {
            return;
        }
        for object in lock(&self.taken).drain(..) {
            cancel(object, self.tls.clone());
        }
    }
}

/// Takes `object` out of the pool, cancels what it runs, and closes it.
fn cancel(object: Object, tls: MakeRustlsConnect) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let token = object.cancel_token();
    let client = Object::take(object);
    runtime.spawn(async move {
        if let Err(error) = token.cancel_query(tls).await {
            tracing::debug!("cancelling an abandoned read: {error}");
        }
        drop(client);
    });
}

#[cfg(test)]
mod tests {
    use super::{ReadPool, connection};
    use std::time::Duration;

    /// The statements that are still sleeping.
    const SLEEPING: &str = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(%' AND state = 'active' \
     AND datname = current_database()";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_whose_caller_left_is_cancelled_and_frees_its_connection() {
        let Some(url) = crate::testing::fresh_database().await else {
            return;
        };
        let crate::Location::Postgres(url) = url.parse().expect("a postgres URL") else {
            panic!("not a postgres URL")
        };
        let (config, tls) = super::super::settings(&url).expect("settings");
        let reads = ReadPool::new(&config, &tls, 1).expect("a pool of one");
        let sleeping = reads.reading(|reads| async move {
            let client = connection(&reads).await?;
            client
                .batch_execute("SELECT pg_sleep(60)")
                .await
                .map_err(super::storage)
        });
        let left = tokio::time::timeout(Duration::from_millis(300), sleeping).await;
        assert!(left.is_err(), "the sleep answered: {left:?}");
        let count = |sql: &'static str| {
            reads.reading(move |reads| async move {
                let client = connection(&reads).await?;
                let row = client.query_one(sql, &[]).await.map_err(super::storage)?;
                Ok(row.get::<_, i64>(0))
            })
        };
        // The cancel travels on a connection of its own: give it the second it is allowed.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let mut still = i64::MAX;
        while still > 0 && tokio::time::Instant::now() < deadline {
            let next = tokio::time::timeout(Duration::from_secs(1), count(SLEEPING)).await;
            let answer = next.expect("the only connection was busy a second after its caller left");
            still = answer.expect("a count");
        }
        assert_eq!(
            still, 0,
            "the abandoned statement ran on a second after its caller left"
        );
    }
}
