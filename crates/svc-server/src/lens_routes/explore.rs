//! The roads a route may take, read from both ends at once: forward from the source schema
//! for the first half of the hops, backward from the target for the rest, so that a hub
//! schema near either end is read once rather than every schema a few hops out. Every road
//! of every chain within the hops is among those read (a chain's first half leaves schemas
//! read forward, its second half enters schemas read backward). The work is bounded: past
//! [`SCHEMAS_READ_AT_MOST`] schemas or [`ROADS_READ_AT_MOST`] roads the question is refused,
//! never answered slowly or in part.

use std::collections::{BTreeMap, HashMap, HashSet};
use svc_catalog::{CatalogError, CatalogRead};
use svc_spec::QueryId;
use svc_spec::roads::{ROAD_INDEXES, Road, RoadIndex, RoadKind};

/// The most schemas whose roads one route question reads.
pub(crate) const SCHEMAS_READ_AT_MOST: usize = 2_000;
/// The most roads one route question reads.
pub(crate) const ROADS_READ_AT_MOST: usize = 50_000;
/// Schemas read in one call to the catalog.
const SCHEMAS_A_CALL: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ExploreError {
    #[error("{0}")]
    Catalog(String),
    #[error(
        "the route would read more than {SCHEMAS_READ_AT_MOST} schemas' roads: ask fewer max_hops"
    )]
    TooManySchemas,
    #[error("the route would read more than {ROADS_READ_AT_MOST} roads: ask fewer max_hops")]
    TooManyRoads,
}

impl From<CatalogError> for ExploreError {
    fn from(error: CatalogError) -> Self {
        ExploreError::Catalog(error.to_string())
    }
}

/// What was read: each schema's roads out, by the schema they lead to, and how far the
/// schemas read backward are from the target.
#[derive(Debug, Default)]
pub(crate) struct Explored {
    pub next: HashMap<String, BTreeMap<String, Vec<Road>>>,
    pub to_target: HashMap<String, u32>,
    /// How many hops were read backward from the target.
    pub backward_hops: u32,
}

/// The roads a lens can take: published lenses and lenses known from encounters (a wanted
/// road has no lens to take).
fn lens_indexes(keyed_by_source: bool) -> Vec<RoadIndex> {
    ROAD_INDEXES
        .into_iter()
        .filter(|index| index.kind != RoadKind::Wanted && index.keyed_by_source == keyed_by_source)
        .collect()
}

/// Reads the roads of chains of at most `hops` from `from` to `to`.
pub(crate) async fn explore(
    catalog: &dyn CatalogRead,
    from: &str,
    to: &str,
    hops: u32,
) -> Result<Explored, ExploreError> {
    let forward_hops = hops.div_ceil(2);
    let mut explored = Explored {
        backward_hops: hops - forward_hops,
        ..Explored::default()
    };
    let mut budget = Budget::default();
    let mut reach = Reach::new(from);
    for _ in 0..forward_hops {
        let roads = read_level(catalog, &reach.frontier, true, &mut budget).await?;
        reach.advance(roads.iter().map(|road| road.target.as_str()));
        explored.add(roads);
    }
    let mut reach = Reach::new(to);
    explored.to_target.insert(to.to_string(), 0);
    for hop in 1..=explored.backward_hops {
        let roads = read_level(catalog, &reach.frontier, false, &mut budget).await?;
        reach.advance(roads.iter().map(|road| road.source.as_str()));
        for schema in &reach.frontier {
            explored.to_target.entry(schema.clone()).or_insert(hop);
        }
        explored.add(roads);
    }
    Ok(explored)
}

impl Explored {
    fn add(&mut self, roads: Vec<Road>) {
        for road in roads {
            let ways = self.next.entry(road.source.clone()).or_default();
            let lenses = ways.entry(road.target.clone()).or_default();
            if !lenses.contains(&road) {
                lenses.push(road);
            }
        }
    }
}

/// The schemas reached so far, and those reached last, whose roads are read next.
struct Reach {
    seen: HashSet<String>,
    frontier: Vec<String>,
}

impl Reach {
    fn new(start: &str) -> Reach {
        Reach {
            seen: HashSet::from([start.to_string()]),
            frontier: vec![start.to_string()],
        }
    }

    fn advance<'r>(&mut self, ends: impl Iterator<Item = &'r str>) {
        let mut frontier = Vec::new();
        for end in ends {
            if self.seen.insert(end.to_string()) {
                frontier.push(end.to_string());
            }
        }
        frontier.sort_unstable();
        self.frontier = frontier;
    }
}

/// What one question has read so far.
#[derive(Default)]
struct Budget {
    schemas: usize,
    roads: usize,
}

/// The roads out of (`forward`) or into each of `schemas`.
async fn read_level(
    catalog: &dyn CatalogRead,
    schemas: &[String],
    forward: bool,
    budget: &mut Budget,
) -> Result<Vec<Road>, ExploreError> {
    budget.schemas += schemas.len();
    if budget.schemas > SCHEMAS_READ_AT_MOST {
        return Err(ExploreError::TooManySchemas);
    }
    let mut roads = Vec::new();
    for index in lens_indexes(forward) {
        for chunk in schemas.chunks(SCHEMAS_A_CALL) {
            let room = ROADS_READ_AT_MOST - budget.roads;
            let prefixes = chunk.iter().map(|schema| index.prefix(schema)).collect();
            let read = catalog
                .keys_under(QueryId::new(index.name), prefixes, room + 1)
                .await?;
            for (key, records) in read.into_iter().flatten() {
                budget.roads += 1;
                if budget.roads > ROADS_READ_AT_MOST {
                    return Err(ExploreError::TooManyRoads);
                }
                roads.extend(index.road(&key, records));
            }
        }
    }
    Ok(roads)
}
