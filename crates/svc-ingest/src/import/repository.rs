//! `--import FILE.car`: a repository export (`com.atproto.sync.getRepo`'s CAR, as `goat repo
//! export` writes it). Its blocks and tree are checked, and its commit's signature against the
//! key its author's DID document names (unless verification is off); then the catalog's
//! records of that repository become exactly the family records the export proves (a record
//! the catalog holds at a later revision stays).

use crate::ingest::Ingestor;
use crate::peer::MAX_REPOSITORY_BYTES;
use crate::repository_apply::apply_whole;
use crate::repository_verify::verify_repository;
use crate::signing_keys::SigningKeys;
use crate::unverified::Unverified;
use std::io::Read;
use std::path::{Path, PathBuf};
use svc_catalog::{ApplyReport, CatalogError, CatalogWrite};
use svc_syntax::{Did, Tid};

#[derive(Debug, thiserror::Error)]
pub enum RepositoryImportError {
    #[error("{path}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: larger than a repository may be ({MAX_REPOSITORY_BYTES} bytes)")]
    TooLarge { path: PathBuf },
    #[error("{path}: the repository does not verify ({}): {error}", error.reason.label())]
    Unverified { path: PathBuf, error: Unverified },
    #[error("{path}: reading its author's signing key: {message}")]
    Keys { path: PathBuf, message: String },
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

/// What importing one repository did.
#[derive(Debug, Clone)]
pub struct RepositoryImport {
    pub did: Did,
    pub rev: Tid,
    /// Family records the repository holds.
    pub records: u64,
    pub invalid: u64,
    pub report: ApplyReport,
}

/// Imports a repository export; its signature is checked with keys read through the PLC
/// directory at `plc` (`None`: not checked, only its blocks and tree), and `did:web`
/// documents where `reach` allows.
pub async fn import_repository(
    catalog: &dyn CatalogWrite,
    ingestor: &Ingestor,
    path: &Path,
    plc: Option<&str>,
    reach: svc_atproto::Reach,
) -> Result<RepositoryImport, RepositoryImportError> {
    let car = read_bounded(path)?;
    let keys = match plc {
        Some(plc) => Some(
            signing_keys(plc, reach).map_err(|e| RepositoryImportError::Keys {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?,
        ),
        None => None,
    };
    let repository = verify_repository(keys.as_ref(), car, None, |c| ingestor.wants(c))
        .await
        .map_err(|error| {
            ingestor.metrics().count_unverified(error.reason);
            RepositoryImportError::Unverified {
                path: path.to_path_buf(),
                error,
            }
        })?;
    let applied = apply_whole(
        catalog,
        ingestor,
        &repository,
        svc_catalog::SyncWrites::default(),
    )
    .await?;
    let (report, records, invalid) = (applied.report, applied.records, applied.invalid);
    ingestor.metrics().count_report(SOURCE, &report);
    ingestor.metrics().count(SOURCE, "invalid", invalid);
    Ok(RepositoryImport {
        did: repository.did,
        rev: repository.rev,
        records,
        invalid,
        report,
    })
}

const SOURCE: &str = "import";

/// The file's bytes, refused past the size a repository may have.
fn read_bounded(path: &Path) -> Result<Vec<u8>, RepositoryImportError> {
    let io = |source| RepositoryImportError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut car = Vec::new();
    file.take(MAX_REPOSITORY_BYTES as u64 + 1)
        .read_to_end(&mut car)
        .map_err(io)?;
    if car.len() > MAX_REPOSITORY_BYTES {
        return Err(RepositoryImportError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    Ok(car)
}

fn signing_keys(
    plc: &str,
    reach: svc_atproto::Reach,
) -> Result<SigningKeys, svc_atproto::AtprotoError> {
    let directory = svc_atproto::http_client(svc_atproto::REQUEST_TIMEOUT)?;
    let web = reach.client(svc_atproto::REQUEST_TIMEOUT)?;
    Ok(SigningKeys::new(
        svc_atproto::Resolver::new(directory, plc).reaching(reach, web),
    ))
}
