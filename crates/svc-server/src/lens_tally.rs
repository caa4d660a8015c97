//! What the verifications of lenses found, read where sufficiency counts them: the
//! sufficiency index's counts by lens, property variant (a verification's kind, as
//! sufficiency counts it) and result, counts alone and never the verifications. The map colours
//! its roads by them and the routes weigh their hops by them.

use std::collections::HashMap;
use svc_catalog::{CatalogError, CatalogRead};
use svc_spec::{QueryId, SUFFICIENCY_INDEX, VERIFICATION_KINDS, decode_key, key_prefix};

/// Lenses read in one call to the catalog.
const LENSES_A_CALL: usize = 1024;
/// Counts read for one lens (variants by results: a handful).
const KEYS_A_LENS: usize = 256;

/// One property variant's verifications of a lens: how many hold, how many are falsified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VariantTally {
    pub variant: String,
    pub held: u64,
    pub failed: u64,
}

/// What the verifications of one lens found, variant by variant, in byte order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub by_variant: Vec<VariantTally>,
}

impl Tally {
    /// In how many variants a verification holds.
    pub fn variants_holding(&self) -> usize {
        self.by_variant.iter().filter(|v| v.held > 0).count()
    }

    /// In how many variants a verification is falsified.
    pub fn variants_falsified(&self) -> usize {
        self.by_variant.iter().filter(|v| v.failed > 0).count()
    }

    /// With `kinds` (positions in [`VERIFICATION_KINDS`]), whether each has a verification
    /// that holds, as sufficiency decides; without, whether some holds and none is falsified.
    pub fn suffices(&self, kinds: &[usize]) -> bool {
        let held = |variant: &str| {
            self.by_variant
                .iter()
                .any(|v| v.variant == variant && v.held > 0)
        };
        match kinds.is_empty() {
            false => kinds.iter().all(|kind| held(VERIFICATION_KINDS[*kind].1)),
            true => self.variants_holding() > 0 && self.variants_falsified() == 0,
        }
    }
}

/// Each lens's tally.
pub(crate) async fn tallies(
    catalog: &dyn CatalogRead,
    lenses: &[String],
) -> Result<HashMap<String, Tally>, CatalogError> {
    let mut tallies = HashMap::new();
    for chunk in lenses.chunks(LENSES_A_CALL) {
        let prefixes = chunk.iter().map(|lens| key_prefix(lens)).collect();
        let read = catalog
            .keys_under(QueryId::new(SUFFICIENCY_INDEX), prefixes, KEYS_A_LENS)
            .await?;
        for (lens, keys) in chunk.iter().zip(read) {
            tallies.insert(lens.clone(), tally_of(&keys));
        }
    }
    Ok(tallies)
}

/// A lens's counts under (lens, variant, result) keys, read into its tally.
fn tally_of(keys: &[(String, u64)]) -> Tally {
    let mut by_variant: Vec<VariantTally> = Vec::new();
    for (key, count) in keys {
        let Some(parts) = decode_key(key) else {
            continue;
        };
        let [_, Some(variant), Some(result)] = parts.as_slice() else {
            continue;
        };
        let at = match by_variant.iter().position(|v| v.variant == *variant) {
            Some(at) => at,
            None => {
                by_variant.push(VariantTally {
                    variant: variant.to_string(),
                    held: 0,
                    failed: 0,
                });
                by_variant.len() - 1
            }
        };
        match *result {
            "holds" => by_variant[at].held += count,
            "falsified" => by_variant[at].failed += count,
            _ => {}
        }
    }
    by_variant.sort_by(|a, b| a.variant.cmp(&b.variant));
    Tally { by_variant }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(variants: &[(usize, u64, u64)]) -> Tally {
        Tally {
            by_variant: variants
                .iter()
                .map(|&(kind, held, failed)| VariantTally {
                    variant: VERIFICATION_KINDS[kind].1.to_string(),
                    held,
                    failed,
                })
                .collect(),
        }
    }

    #[test]
    fn sufficiency_asks_each_kind_or_a_clean_record() {
        let tally = tally(&[(0, 2, 0), (1, 0, 1)]);
        assert!(tally.suffices(&[0]));
        assert!(!tally.suffices(&[0, 1]));
        assert!(!tally.suffices(&[]), "a falsified kind spoils it");
        assert!(!Tally::default().suffices(&[]));
    }

    #[test]
    fn counts_are_read_by_variant_and_result() {
        let index = svc_spec::QuerySet::embedded();
        let index = index
            .indexes()
            .get(&QueryId::new(SUFFICIENCY_INDEX))
            .expect("the sufficiency index")
            .clone();
        let variant = VERIFICATION_KINDS[0].1;
        let keys = [
            (
                index.lookup_key(&[Some("at://l/x/1"), Some(variant), None]),
                5,
            ),
            (
                index.lookup_key(&[Some("at://l/x/1"), Some(variant), Some("holds")]),
                3,
            ),
            (
                index.lookup_key(&[Some("at://l/x/1"), Some(variant), Some("falsified")]),
                1,
            ),
        ];
        let read = tally_of(&keys);
        assert_eq!(read, tally(&[(0, 3, 1)]));
        assert_eq!((read.variants_holding(), read.variants_falsified()), (1, 1));
    }
}
