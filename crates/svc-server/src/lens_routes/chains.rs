//! Chains of schemas from the source to the target through the roads read, and the best
//! lens for each hop. Pure: what the catalog holds was read before.
//!
//! Order (best first): chains whose every lens suffices, then fewer hops, then the weakest
//! hop's round-trip class (iso before a lens that keeps a complement before a lossy or
//! unknown one), then the lenses' uris, so that the same catalog gives the same answer.

use super::explore::Explored;
use crate::lens_tally::Tally;
use std::collections::{HashMap, HashSet};
use svc_spec::roads::{Road, RoadKind};

/// The most chains one question weighs.
pub(crate) const CHAINS_WEIGHED_AT_MOST: usize = 10_000;
/// The most steps the search for chains takes.
const STEPS_AT_MOST: usize = 500_000;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("more than {CHAINS_WEIGHED_AT_MOST} chains of schemas lie within max_hops: ask fewer")]
pub(crate) struct TooManyChains;

/// A round-trip class's rank: what a chain is as good as is its weakest hop's.
pub(crate) fn class_rank(class: Option<&str>) -> u8 {
    match class {
        Some("iso") => 0,
        Some("retraction" | "projection" | "lens") => 1,
        _ => 2,
    }
}

/// Every simple chain of schemas from `from` to `to` within `hops`, each a list of schemas.
pub(crate) fn schema_chains(
    explored: &Explored,
    from: &str,
    to: &str,
    hops: u32,
) -> Result<Vec<Vec<String>>, TooManyChains> {
    let mut search = Search {
        explored,
        to,
        chains: Vec::new(),
        path: vec![from.to_string()],
        on_path: HashSet::from([from.to_string()]),
        steps: 0,
    };
    search.from(from, hops)?;
    Ok(search.chains)
}

struct Search<'e> {
    explored: &'e Explored,
    to: &'e str,
    chains: Vec<Vec<String>>,
    path: Vec<String>,
    on_path: HashSet<String>,
    steps: usize,
}

impl Search<'_> {
    fn from(&mut self, schema: &str, left: u32) -> Result<(), TooManyChains> {
        if left == 0 {
            return Ok(());
        }
        let Some(ways) = self.explored.next.get(schema) else {
            return Ok(());
        };
        for next in ways.keys() {
            self.steps += 1;
            if self.steps > STEPS_AT_MOST {
                return Err(TooManyChains);
            }
            if self.on_path.contains(next) || !self.may_arrive(next, left - 1) {
                continue;
            }
            self.path.push(next.clone());
            if next == self.to {
                self.chains.push(self.path.clone());
                if self.chains.len() > CHAINS_WEIGHED_AT_MOST {
                    return Err(TooManyChains);
                }
            } else {
                self.on_path.insert(next.clone());
                self.from(next, left - 1)?;
                self.on_path.remove(next);
            }
            self.path.pop();
        }
        Ok(())
    }

    /// Whether the target can be `left` hops or fewer from `schema`: exactly known near the
    /// target, else only when more hops are left than were read backward.
    fn may_arrive(&self, schema: &str, left: u32) -> bool {
        match self.explored.to_target.get(schema) {
            Some(distance) => *distance <= left,
            None => left > self.explored.backward_hops,
        }
    }
}

/// One hop of a chain: the lens taken, and what is known of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hop {
    pub road: Road,
    pub tally: Tally,
    pub sufficient: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chain {
    pub hops: Vec<Hop>,
    pub sufficient: bool,
}

impl Chain {
    fn weakest(&self) -> u8 {
        self.hops
            .iter()
            .map(|hop| class_rank(hop.road.class.as_deref()))
            .max()
            .unwrap_or(0)
    }

    fn lenses(&self) -> impl Iterator<Item = &str> {
        self.hops.iter().filter_map(|hop| hop.road.lens.as_deref())
    }
}

/// The lenses of the roads between consecutive schemas of `chains`.
pub(crate) fn lenses_of(explored: &Explored, chains: &[Vec<String>]) -> Vec<String> {
    let mut lenses: Vec<String> = chains
        .iter()
        .flat_map(|chain| chain.windows(2))
        .filter_map(|pair| explored.next.get(&pair[0])?.get(&pair[1]))
        .flatten()
        .filter_map(|road| road.lens.clone())
        .collect();
    lenses.sort_unstable();
    lenses.dedup();
    lenses
}

/// The best `limit` chains, each hop's lens the best of the roads between its schemas.
pub(crate) fn best(
    explored: &Explored,
    chains: &[Vec<String>],
    tallies: &HashMap<String, Tally>,
    kinds: &[usize],
    limit: usize,
) -> Vec<Chain> {
    let mut hops_between: HashMap<(&str, &str), Option<Hop>> = HashMap::new();
    let mut weighed: Vec<Chain> = chains
        .iter()
        .filter_map(|chain| {
            let hops = chain
                .windows(2)
                .map(|pair| {
                    hops_between
                        .entry((&pair[0], &pair[1]))
                        .or_insert_with(|| best_hop(explored, &pair[0], &pair[1], tallies, kinds))
                        .clone()
                })
                .collect::<Option<Vec<Hop>>>()?;
            let sufficient = hops.iter().all(|hop| hop.sufficient);
            Some(Chain { hops, sufficient })
        })
        .collect();
    weighed.sort_by(|a, b| {
        (!a.sufficient, a.hops.len(), a.weakest())
            .cmp(&(!b.sufficient, b.hops.len(), b.weakest()))
            .then_with(|| a.lenses().cmp(b.lenses()))
    });
    weighed.truncate(limit);
    weighed
}

/// Of the lenses from `source` to `target`, the one that suffices, of the best class,
/// published rather than known from encounters, first by uri.
fn best_hop(
    explored: &Explored,
    source: &str,
    target: &str,
    tallies: &HashMap<String, Tally>,
    kinds: &[usize],
) -> Option<Hop> {
    let roads = explored.next.get(source)?.get(target)?;
    roads
        .iter()
        .filter_map(|road| {
            let tally = tallies
                .get(road.lens.as_ref()?)
                .cloned()
                .unwrap_or_default();
            let sufficient = tally.suffices(kinds);
            Some(Hop {
                road: road.clone(),
                tally,
                sufficient,
            })
        })
        .min_by(|a, b| {
            let rank = |hop: &Hop| {
                (
                    !hop.sufficient,
                    class_rank(hop.road.class.as_deref()),
                    hop.road.kind != RoadKind::Published,
                )
            };
            rank(a)
                .cmp(&rank(b))
                .then_with(|| a.road.lens.cmp(&b.road.lens))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn road(source: &str, target: &str, lens: &str, class: Option<&str>) -> Road {
        Road {
            source: source.into(),
            target: target.into(),
            kind: RoadKind::Published,
            lens: Some(lens.into()),
            class: class.map(str::to_string),
            records: 1,
        }
    }

    fn explored(roads: &[Road], to: &str, backward_hops: u32) -> Explored {
        let mut explored = Explored {
            backward_hops,
            ..Explored::default()
        };
        for road in roads {
            explored
                .next
                .entry(road.source.clone())
                .or_default()
                .entry(road.target.clone())
                .or_default()
                .push(road.clone());
        }
        explored.to_target.insert(to.into(), 0);
        explored
    }

    #[test]
    fn chains_are_simple_within_the_hops_and_ranked_sufficient_first() {
        let roads = [
            road("a", "d", "direct", Some("lossy")),
            road("a", "b", "ab", Some("iso")),
            road("b", "c", "bc", Some("iso")),
            road("c", "d", "cd", Some("projection")),
            road("b", "a", "ba", Some("iso")),
            road("c", "a", "ca", Some("iso")),
        ];
        let explored = explored(&roads, "d", 0);
        let chains = schema_chains(&explored, "a", "d", 3).expect("few chains");
        assert_eq!(chains.len(), 2, "{chains:?}");
        let verified = Tally {
            by_variant: vec![crate::lens_tally::VariantTally {
                variant: svc_spec::VERIFICATION_KINDS[0].1.to_string(),
                held: 1,
                failed: 0,
            }],
        };
        let tallies: HashMap<String, Tally> = ["ab", "bc", "cd"]
            .into_iter()
            .map(|lens| (lens.to_string(), verified.clone()))
            .collect();
        let ranked = best(&explored, &chains, &tallies, &[], 10);
        let lenses: Vec<Vec<&str>> = ranked.iter().map(|c| c.lenses().collect()).collect();
        assert_eq!(lenses, [vec!["ab", "bc", "cd"], vec!["direct"]]);
        assert!(ranked[0].sufficient && !ranked[1].sufficient);
        let unranked = best(&explored, &chains, &HashMap::new(), &[], 10);
        assert_eq!(
            unranked[0].lenses().collect::<Vec<_>>(),
            ["direct"],
            "fewer hops"
        );
        assert!(schema_chains(&explored, "a", "d", 2).expect("few").len() == 1);
    }

    #[test]
    fn the_best_lens_between_two_schemas_is_taken() {
        let roads = [
            road("a", "b", "lossy", Some("lossy")),
            road("a", "b", "iso", Some("iso")),
            road("a", "b", "unclassed", None),
        ];
        let explored = explored(&roads, "b", 0);
        let chains = schema_chains(&explored, "a", "b", 1).expect("one chain");
        let ranked = best(&explored, &chains, &HashMap::new(), &[], 10);
        assert_eq!(ranked[0].lenses().collect::<Vec<_>>(), ["iso"]);
        assert_eq!(class_rank(None), 2);
    }
}
