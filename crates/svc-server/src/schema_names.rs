//! Schemas' readable names, as the catalog filed them when it indexed each schema record
//! (`svc_spec::SCHEMA_NAMES_INDEX`, keyed by the schema's uri, then its name): one short range
//! of keys per schema, many read at once. A uri the catalog holds no schema record at has no
//! name, and is shown as it is.

use std::collections::HashMap;
use svc_catalog::{CatalogError, CatalogRead};
use svc_spec::{QueryId, SCHEMA_NAMES_INDEX, decode_key, key_prefix};

/// The most uris one call asks about; any beyond have no name.
pub(crate) const NAMES_READ_AT_MOST: usize = 2_000;

/// The readable name of each of `uris` that names a schema record the catalog holds.
pub(crate) async fn names_of(
    catalog: &dyn CatalogRead,
    uris: impl IntoIterator<Item = &str>,
) -> Result<HashMap<String, String>, CatalogError> {
    let mut asked: Vec<&str> = uris.into_iter().collect();
    asked.sort_unstable();
    asked.dedup();
    asked.truncate(NAMES_READ_AT_MOST);
    if asked.is_empty() {
        return Ok(HashMap::new());
    }
    let prefixes = asked.iter().map(|uri| key_prefix(uri)).collect();
    let read = catalog
        .keys_under(QueryId::new(SCHEMA_NAMES_INDEX), prefixes, 1)
        .await?;
    Ok(asked
        .into_iter()
        .zip(read)
        .filter_map(|(uri, keys)| {
            let (key, _) = keys.first()?;
            let name = match decode_key(key)?.as_slice() {
                [_, Some(name)] => name.to_string(),
                _ => return None,
            };
            Some((uri.to_string(), name))
        })
        .collect())
}
