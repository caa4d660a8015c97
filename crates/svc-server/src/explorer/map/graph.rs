//! The map's graph, read from the catalog's road indexes: a schema's neighbourhood (the
//! schemas within some hops of it, the busiest first, up to a limit), or the whole catalog
//! when it fits; every road the catalog holds between the schemas shown, each lens coloured by
//! its verifications; and what was left out.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use svc_catalog::{CatalogError, CatalogRead};
use svc_spec::QueryId;
use svc_spec::roads::{ROAD_INDEXES, Road, RoadIndex, RoadKind};

/// The most roads read at one schema from one index: a busier schema shows its busiest
/// neighbours among these, and says it has more.
pub(crate) const ROADS_READ_AT_A_SCHEMA: usize = 5_000;
/// The most roads read to find the busiest schema when none is asked for.
pub(crate) const ROADS_READ_FOR_THE_WHOLE: usize = 20_000;
/// The most roads one map reads in all: what a request may hold, whatever the catalog holds.
pub(crate) const ROADS_READ_AT_MOST: usize = 60_000;
/// The most roads one map draws (the most used first): what its page may weigh.
pub(crate) const ROADS_DRAWN_AT_MOST: usize = 6_000;

/// What the verifications of a lens found, kind by kind (a kind is the property it proves,
/// as sufficiency counts it): in how many kinds one holds, and in how many one is falsified.
/// A kind with both counts in both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Findings {
    pub holds: u32,
    pub falsified: u32,
}

impl Findings {
    /// The findings in words, as a road's title and the list say them.
    pub fn words(self) -> String {
        let kinds = |n: u32| match n {
            1 => "1 kind".to_string(),
            n => format!("{n} kinds"),
        };
        match (self.holds, self.falsified) {
            (0, 0) => "no verification holds or is falsified".into(),
            (h, 0) => format!("holds for {}, none falsified", kinds(h)),
            (0, f) => format!("falsified for {}, holds for none", kinds(f)),
            (h, f) => format!("holds for {}, falsified for {f}", kinds(h)),
        }
    }
}

impl From<&crate::lens_tally::Tally> for Findings {
    fn from(tally: &crate::lens_tally::Tally) -> Findings {
        Findings {
            holds: tally.variants_holding() as u32,
            falsified: tally.variants_falsified() as u32,
        }
    }
}

/// What the verifications of a lens say, as the map colours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Verdict {
    /// Some verification holds, none is falsified.
    Verified,
    /// Holds for some kinds, falsified for others (or for the same).
    Mixed,
    /// Falsified, and holds for no kind.
    Falsified,
    /// None holds or fails (none at all, or only inconclusive ones).
    Unverified,
    /// A lens people ask for in open bounties; none is known.
    Wanted,
}

impl Verdict {
    /// Every verdict, in the legend's order.
    pub const ALL: [Verdict; 5] = [
        Verdict::Verified,
        Verdict::Mixed,
        Verdict::Falsified,
        Verdict::Unverified,
        Verdict::Wanted,
    ];

    /// The verdict of a lens with these findings.
    pub fn of(findings: Findings) -> Verdict {
        match (findings.holds, findings.falsified) {
            (0, 0) => Verdict::Unverified,
            (_, 0) => Verdict::Verified,
            (0, _) => Verdict::Falsified,
            _ => Verdict::Mixed,
        }
    }

    pub fn class(self) -> &'static str {
        match self {
            Verdict::Verified => "verified",
            Verdict::Mixed => "mixed",
            Verdict::Falsified => "falsified",
            Verdict::Unverified => "unverified",
            Verdict::Wanted => "wanted",
        }
    }

    /// Its name, as the legend and the list say it.
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Verified => "verified",
            Verdict::Mixed => "mixed",
            Verdict::Falsified => "falsified",
            Verdict::Unverified => "unverified",
            Verdict::Wanted => "wanted",
        }
    }

    /// What it means, for the legend.
    pub fn meaning(self) -> &'static str {
        match self {
            Verdict::Verified => "holds for every kind verified; none falsified",
            Verdict::Mixed => "holds for some kinds, falsified for others",
            Verdict::Falsified => "falsified, and holds for no kind",
            Verdict::Unverified => "no verification holds or fails (none, or only inconclusive)",
            Verdict::Wanted => "dashed: no lens yet; open bounties ask for one",
        }
    }
}

/// What the map is asked to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ask {
    /// The schema at the centre; none for the whole catalog (or its busiest schema's
    /// neighbourhood when the whole does not fit).
    pub centre: Option<String>,
    pub hops: u32,
    pub nodes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    pub uri: String,
    /// Hops from the centre; components apart from the centre's count from their own first.
    pub hop: u32,
    /// Records stating roads at it, among those read.
    pub weight: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edge {
    /// Positions in [`Graph::nodes`].
    pub source: usize,
    pub target: usize,
    pub lens: Option<String>,
    pub records: u64,
    pub verdict: Verdict,
    /// The lens's findings; none for a wanted road.
    pub findings: Findings,
}

impl Edge {
    /// The road between the schemas at these positions, with its lens's verdict.
    fn of(source: usize, target: usize, road: &Road, found: &HashMap<String, Findings>) -> Edge {
        let findings = road
            .lens
            .as_ref()
            .and_then(|lens| found.get(lens).copied())
            .unwrap_or_default();
        Edge {
            source,
            target,
            verdict: match &road.lens {
                Some(_) => Verdict::of(findings),
                None => Verdict::Wanted,
            },
            findings,
            lens: road.lens.clone(),
            records: road.records,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Graph {
    /// The centre first, then by hop, busiest first.
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    /// Whether this is the neighbourhood of one schema (else the whole catalog).
    pub centred: bool,
    /// Schemas next to those shown that the node limit left out.
    pub schemas_left_out: usize,
    /// Whether some schema had more roads than were read at it.
    pub roads_cut: bool,
    /// Roads among the schemas shown that were not drawn, past the most a map draws.
    pub roads_left_out: usize,
    /// Roads not drawn because their uris are too long to have been kept whole.
    pub unreadable: u64,
    /// The readable names of the schemas shown that the catalog holds records of.
    pub names: HashMap<String, String>,
}

impl Graph {
    /// Whether this neighbourhood's centre is a schema no road the catalog holds names.
    pub fn centre_unknown(&self) -> bool {
        self.centred && self.edges.is_empty() && self.unreadable == 0 && !self.roads_cut
    }
}

/// Builds the graph the ask names.
pub(crate) async fn read(catalog: &dyn CatalogRead, ask: &Ask) -> Result<Graph, CatalogError> {
    match &ask.centre {
        Some(centre) => neighbourhood(catalog, centre, ask.hops, ask.nodes).await,
        None => whole_or_busiest(catalog, ask).await,
    }
}

/// Roads read at some schemas, each once (a road is found from both its ends).
#[derive(Default)]
struct Found {
    roads: BTreeSet<Road>,
    /// Keys read, found twice or not.
    read: usize,
    cut: bool,
    unreadable: u64,
}

impl Found {
    /// How many more roads may be read at each of `schemas`, within what a map reads.
    fn room_at_each(&self, schemas: usize) -> usize {
        let left = ROADS_READ_AT_MOST.saturating_sub(self.read);
        (left / schemas.max(1)).min(ROADS_READ_AT_A_SCHEMA)
    }

    fn add(&mut self, index: &RoadIndex, keys: Vec<(String, u64)>, room: usize) {
        self.cut |= keys.len() >= room;
        self.read += keys.len();
        for (key, records) in keys {
            match index.road(&key, records) {
                Some(road) => {
                    self.roads.insert(road);
                }
                None => self.unreadable += records,
            }
        }
    }
}

/// The roads at each schema, from `indexes` (both ways, or only from the sources).
async fn roads_at(
    catalog: &dyn CatalogRead,
    schemas: &[String],
    indexes: &[RoadIndex],
    found: &mut Found,
) -> Result<(), CatalogError> {
    if schemas.is_empty() {
        return Ok(());
    }
    for index in indexes {
        let room = found.room_at_each(schemas.len());
        if room == 0 {
            found.cut = true;
            return Ok(());
        }
        let prefixes = schemas.iter().map(|s| index.prefix(s)).collect();
        let read = catalog
            .keys_under(QueryId::new(index.name), prefixes, room)
            .await?;
        for keys in read {
            found.add(index, keys, room);
        }
    }
    Ok(())
}

async fn neighbourhood(
    catalog: &dyn CatalogRead,
    centre: &str,
    hops: u32,
    limit: usize,
) -> Result<Graph, CatalogError> {
    let mut hop_of: BTreeMap<String, u32> = BTreeMap::from([(centre.to_string(), 0)]);
    let mut order = vec![centre.to_string()];
    let mut frontier = vec![centre.to_string()];
    let mut found = Found::default();
    let mut left_out = 0;
    for hop in 1..=hops {
        roads_at(catalog, &frontier, &ROAD_INDEXES, &mut found).await?;
        let outermost: HashSet<&str> = frontier.iter().map(String::as_str).collect();
        let mut candidates: HashMap<&str, u64> = HashMap::new();
        for road in &found.roads {
            for (end, other) in [(&road.source, &road.target), (&road.target, &road.source)] {
                if outermost.contains(end.as_str()) && !hop_of.contains_key(other) {
                    *candidates.entry(other.as_str()).or_default() += road.records;
                }
            }
        }
        let mut ranked: Vec<(&str, u64)> = candidates.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let room = limit.saturating_sub(order.len());
        left_out = ranked.len().saturating_sub(room);
        frontier = ranked
            .into_iter()
            .take(room)
            .map(|(uri, _)| uri.to_string())
            .collect();
        for uri in &frontier {
            hop_of.insert(uri.clone(), hop);
            order.push(uri.clone());
        }
        if frontier.is_empty() {
            break;
        }
    }
    // The roads among the outermost schemas: each has its source among them.
    let sources_only: Vec<RoadIndex> = ROAD_INDEXES
        .into_iter()
        .filter(|i| i.keyed_by_source)
        .collect();
    roads_at(catalog, &frontier, &sources_only, &mut found).await?;
    let mut graph = assemble(catalog, order, &hop_of, found).await?;
    graph.centred = true;
    graph.schemas_left_out = left_out;
    Ok(graph)
}

/// The whole catalog when its schemas fit; else the busiest schema's neighbourhood.
async fn whole_or_busiest(catalog: &dyn CatalogRead, ask: &Ask) -> Result<Graph, CatalogError> {
    let mut found = Found::default();
    let mut complete = true;
    for index in ROAD_INDEXES.iter().filter(|i| i.keyed_by_source) {
        let read = catalog
            .keys_under(
                QueryId::new(index.name),
                vec![String::new()],
                ROADS_READ_FOR_THE_WHOLE,
            )
            .await?;
        for keys in read {
            complete &= keys.len() < ROADS_READ_FOR_THE_WHOLE;
            found.add(index, keys, ROADS_READ_FOR_THE_WHOLE);
        }
    }
    let mut weight: BTreeMap<&str, u64> = BTreeMap::new();
    for road in &found.roads {
        *weight.entry(&road.source).or_default() += road.records;
        *weight.entry(&road.target).or_default() += road.records;
    }
    let busiest = weight
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(uri, _)| uri.to_string());
    match busiest {
        Some(busiest) if !complete || weight.len() > ask.nodes => {
            neighbourhood(catalog, &busiest, ask.hops, ask.nodes).await
        }
        _ => whole(catalog, found).await,
    }
}

/// Every schema and road read, each connected part counted in hops from its busiest schema.
async fn whole(catalog: &dyn CatalogRead, found: Found) -> Result<Graph, CatalogError> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut weight: HashMap<&str, u64> = HashMap::new();
    for road in &found.roads {
        next.entry(&road.source).or_default().insert(&road.target);
        next.entry(&road.target).or_default().insert(&road.source);
        *weight.entry(&road.source).or_default() += road.records;
        *weight.entry(&road.target).or_default() += road.records;
    }
    let mut by_weight: Vec<&str> = next.keys().copied().collect();
    by_weight.sort_by(|a, b| weight[b].cmp(&weight[a]).then(a.cmp(b)));
    let mut hop_of: BTreeMap<String, u32> = BTreeMap::new();
    let mut order = Vec::new();
    for start in by_weight {
        if hop_of.contains_key(start) {
            continue;
        }
        // Breadth first from the part's busiest schema.
        let mut ring = vec![start];
        hop_of.insert(start.to_string(), 0);
        let mut hop = 0;
        while !ring.is_empty() {
            order.extend(ring.iter().map(|s| s.to_string()));
            hop += 1;
            let mut outer: Vec<&str> = Vec::new();
            for schema in &ring {
                for other in &next[schema] {
                    if !hop_of.contains_key(*other) {
                        hop_of.insert(other.to_string(), hop);
                        outer.push(other);
                    }
                }
            }
            outer.sort_by(|a, b| weight[b].cmp(&weight[a]).then(a.cmp(b)));
            ring = outer;
        }
    }
    assemble(catalog, order, &hop_of, found).await
}

/// A lens both published and used by encounters is one road: its record's, counting the
/// encounters' records too.
fn merge_used_into_published(roads: BTreeSet<Road>) -> BTreeSet<Road> {
    type Ends = (String, String, Option<String>);
    let ends = |road: &Road| (road.source.clone(), road.target.clone(), road.lens.clone());
    let published: HashSet<Ends> = roads
        .iter()
        .filter(|road| road.kind == RoadKind::Published)
        .map(ends)
        .collect();
    let mut used: HashMap<Ends, u64> = HashMap::new();
    let mut kept = Vec::with_capacity(roads.len());
    for road in roads {
        match road.kind == RoadKind::Lens && published.contains(&ends(&road)) {
            true => *used.entry(ends(&road)).or_default() += road.records,
            false => kept.push(road),
        }
    }
    kept.into_iter()
        .map(|mut road| {
            if road.kind == RoadKind::Published {
                road.records += used.get(&ends(&road)).copied().unwrap_or(0);
            }
            road
        })
        .collect()
}

/// Roads among the schemas at these positions, as (source, target, road), the most used
/// ones when more than a map draws; each schema's weight; how many were left out.
type Shown<'r> = (Vec<(usize, usize, &'r Road)>, Vec<u64>, usize);

fn roads_shown<'r>(roads: &'r BTreeSet<Road>, position: &HashMap<&str, usize>) -> Shown<'r> {
    let mut weight = vec![0u64; position.len()];
    let mut shown = Vec::new();
    for road in roads {
        let (Some(&source), Some(&target)) = (
            position.get(road.source.as_str()),
            position.get(road.target.as_str()),
        ) else {
            continue;
        };
        weight[source] += road.records;
        weight[target] += road.records;
        shown.push((source, target, road));
    }
    let left_out = shown.len().saturating_sub(ROADS_DRAWN_AT_MOST);
    if left_out > 0 {
        shown.sort_by(|a, b| b.2.records.cmp(&a.2.records).then(a.2.cmp(b.2)));
        shown.truncate(ROADS_DRAWN_AT_MOST);
        shown.sort_by(|a, b| a.2.cmp(b.2));
    }
    (shown, weight, left_out)
}

/// Nodes in order, the roads among them as edges, and each lens's verdict.
async fn assemble(
    catalog: &dyn CatalogRead,
    order: Vec<String>,
    hop_of: &BTreeMap<String, u32>,
    mut found: Found,
) -> Result<Graph, CatalogError> {
    found.roads = merge_used_into_published(std::mem::take(&mut found.roads));
    let position: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, uri)| (uri.as_str(), i))
        .collect();
    let (shown, weight, roads_left_out) = roads_shown(&found.roads, &position);
    let lenses: Vec<String> = shown
        .iter()
        .filter_map(|(_, _, road)| road.lens.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let found_by_lens: HashMap<String, Findings> = crate::lens_tally::tallies(catalog, &lenses)
        .await?
        .into_iter()
        .map(|(lens, tally)| (lens, Findings::from(&tally)))
        .collect();
    let edges = shown
        .into_iter()
        .map(|(source, target, road)| Edge::of(source, target, road, &found_by_lens))
        .collect();
    let names = crate::schema_names::names_of(catalog, order.iter().map(String::as_str)).await?;
    let nodes = order
        .into_iter()
        .zip(weight)
        .map(|(uri, weight)| Node {
            hop: hop_of.get(&uri).copied().unwrap_or(0),
            uri,
            weight,
        })
        .collect();
    Ok(Graph {
        nodes,
        edges,
        centred: false,
        schemas_left_out: 0,
        roads_cut: found.cut,
        roads_left_out,
        unreadable: found.unreadable,
        names,
    })
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    fn road(kind: RoadKind, lens: &str, records: u64) -> Road {
        Road {
            source: "at://s/x/1".into(),
            target: "at://t/x/1".into(),
            kind,
            lens: Some(lens.into()),
            class: None,
            records,
        }
    }

    #[test]
    fn a_lens_published_and_used_is_one_road_counting_both() {
        let roads = BTreeSet::from([
            road(RoadKind::Published, "at://l/x/1", 1),
            road(RoadKind::Lens, "at://l/x/1", 3),
            road(RoadKind::Lens, "at://l/x/2", 2),
        ]);
        let merged: Vec<(RoadKind, u64)> = merge_used_into_published(roads)
            .into_iter()
            .map(|road| (road.kind, road.records))
            .collect();
        assert_eq!(merged, [(RoadKind::Published, 4), (RoadKind::Lens, 2)]);
    }
}
