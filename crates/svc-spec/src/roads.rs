//! The roads between schemas that records state: a lens published as a record, from its
//! source schema to its target, with its round-trip class; a lens an encounter used, with the
//! schemas it read from and wrote to; and a lens an open bounty wants between two schemas. Each is
//! kept by two of the service's own indexes, one keyed from the source and one from the
//! target, so that a schema's roads both ways are two ranges of keys. An index's count under
//! a key is how many records state that road, so reading the counts reads the roads already
//! grouped, however many records stand behind each.

use crate::keys::{decode_key, key_prefix};

/// What a road is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RoadKind {
    /// A lens published as a `dev.panproto.schema.lens` record.
    Published,
    /// A lens known only from the encounters that used it.
    Lens,
    /// A lens asked for by open bounties; it has no uri.
    Wanted,
}

/// One of the indexes that keep roads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoadIndex {
    /// The index's name (a [`crate::QueryId`]).
    pub name: &'static str,
    pub kind: RoadKind,
    /// Whether its keys begin with the road's source (else with its target).
    pub keyed_by_source: bool,
}

/// The six road indexes: published lenses, used lenses and wanted lenses, each from and into
/// a schema.
pub const ROAD_INDEXES: [RoadIndex; 6] = [
    RoadIndex {
        name: "publishedRoadsFrom",
        kind: RoadKind::Published,
        keyed_by_source: true,
    },
    RoadIndex {
        name: "publishedRoadsInto",
        kind: RoadKind::Published,
        keyed_by_source: false,
    },
    RoadIndex {
        name: "lensRoadsFrom",
        kind: RoadKind::Lens,
        keyed_by_source: true,
    },
    RoadIndex {
        name: "lensRoadsInto",
        kind: RoadKind::Lens,
        keyed_by_source: false,
    },
    RoadIndex {
        name: "wantedRoadsFrom",
        kind: RoadKind::Wanted,
        keyed_by_source: true,
    },
    RoadIndex {
        name: "wantedRoadsInto",
        kind: RoadKind::Wanted,
        keyed_by_source: false,
    },
];

/// A road, and how many records state it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Road {
    pub source: String,
    pub target: String,
    pub kind: RoadKind,
    /// The lens's uri; none for a wanted road.
    pub lens: Option<String>,
    /// A published lens's round-trip class, when its record gives one.
    pub class: Option<String>,
    pub records: u64,
}

impl RoadIndex {
    /// The name of the index keyed from the source that this one mirrors (itself, when it is
    /// that one).
    pub(crate) fn keyed_from_source_name(&self) -> &'static str {
        ROAD_INDEXES
            .iter()
            .find(|other| other.kind == self.kind && other.keyed_by_source)
            .map_or(self.name, |other| other.name)
    }

    /// The key prefix of every road of this index at `schema` (its source or its target).
    pub fn prefix(&self, schema: &str) -> String {
        key_prefix(schema)
    }

    /// The road a key of this index files, with its count; `None` for a key whose values
    /// are too long to have been kept whole (stored as a digest).
    pub fn road(&self, key: &str, records: u64) -> Option<Road> {
        let parts = decode_key(key)?;
        let (first, second, lens, class) = match (self.kind, parts.as_slice()) {
            (RoadKind::Published, [Some(a), Some(b), Some(lens), class]) => {
                (a, b, Some(lens.to_string()), class.map(str::to_string))
            }
            (RoadKind::Lens, [Some(a), Some(b), Some(lens)]) => {
                (a, b, Some(lens.to_string()), None)
            }
            (RoadKind::Wanted, [Some(a), Some(b)]) => (a, b, None, None),
            _ => return None,
        };
        let (source, target) = match self.keyed_by_source {
            true => (first, second),
            false => (second, first),
        };
        Some(Road {
            source: source.to_string(),
            target: target.to_string(),
            kind: self.kind,
            lens,
            class,
            records,
        })
    }
}

/// The index of the same roads as `from` (keyed from their source), keyed from their target:
/// the same filter, its first two parameters (source, target) swapped.
pub(crate) fn keyed_by_target(from: &crate::IndexDef, name: &str) -> crate::IndexDef {
    let mut mirror = from.clone();
    mirror.name = name.to_string();
    mirror.params.swap(0, 1);
    mirror
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Json, QuerySet};

    fn keys_of(collection: &str, record: &str) -> Vec<(String, String)> {
        let set = QuerySet::embedded();
        let record: serde_json::Value = serde_json::from_str(record).expect("test record");
        let tree = Json::from_value(&record);
        set.index_keys(collection, "at://did:plc:a/x.y.z/k", &tree)
            .into_iter()
            .filter(|(query, _)| ROAD_INDEXES.iter().any(|r| r.name == query.as_str()))
            .map(|(query, key)| (query.as_str().to_string(), key))
            .collect()
    }

    #[test]
    fn an_encounter_files_its_road_both_ways_and_reads_back() {
        let keys = keys_of(
            "dev.svc.encounter",
            r#"{"lens":{"uri":"at://l/x/1"},"sourceSchema":{"uri":"at://s/x/1"},
                "targetSchema":{"uri":"at://t/x/1"}}"#,
        );
        assert_eq!(keys.len(), 2);
        for (query, key) in keys {
            let index = ROAD_INDEXES.iter().find(|r| r.name == query).expect("road");
            let road = index.road(&key, 3).expect("readable");
            assert_eq!(
                (
                    road.source.as_str(),
                    road.target.as_str(),
                    road.lens.as_deref()
                ),
                ("at://s/x/1", "at://t/x/1", Some("at://l/x/1"))
            );
            let end = if index.keyed_by_source {
                "at://s/x/1"
            } else {
                "at://t/x/1"
            };
            assert!(key.starts_with(&index.prefix(end)));
        }
    }

    #[test]
    fn only_open_bounties_wanting_a_lens_and_encounters_with_both_ends_file_roads() {
        let without_target = keys_of(
            "dev.svc.encounter",
            r#"{"lens":{"uri":"at://l/x/1"},"sourceSchema":{"uri":"at://s/x/1"}}"#,
        );
        assert!(without_target.is_empty());
        let wanted = r#""wants":{"$type":"dev.svc.bounty#wantLens","source":{"uri":"at://s/x/1"},
            "target":{"uri":"at://t/x/1"}}"#;
        assert_eq!(keys_of("dev.svc.bounty", &format!("{{{wanted}}}")).len(), 2);
        let done = format!("{{{wanted},\"status\":\"fulfilled\"}}");
        assert!(keys_of("dev.svc.bounty", &done).is_empty());
    }

    #[test]
    fn a_published_lens_files_itself_with_its_class_or_without_one() {
        let lens =
            r#"{"sourceSchema":"at://s/x/1","targetSchema":"at://t/x/1","roundTripClass":"iso"}"#;
        let keys = keys_of("dev.panproto.schema.lens", lens);
        assert_eq!(keys.len(), 2, "{keys:?}");
        for (query, key) in &keys {
            let index = ROAD_INDEXES.iter().find(|r| r.name == query).expect("road");
            let road = index.road(key, 1).expect("readable");
            assert_eq!(road.kind, RoadKind::Published);
            assert_eq!(road.lens.as_deref(), Some("at://did:plc:a/x.y.z/k"));
            assert_eq!(road.class.as_deref(), Some("iso"));
            assert_eq!(
                (road.source.as_str(), road.target.as_str()),
                ("at://s/x/1", "at://t/x/1")
            );
        }
        let classless = lens.replace(r#","roundTripClass":"iso""#, "");
        let keys = keys_of("dev.panproto.schema.lens", &classless);
        assert_eq!(
            keys.len(),
            2,
            "one key each way, never a wildcard beside it"
        );
        let (query, key) = &keys[0];
        let index = ROAD_INDEXES.iter().find(|r| r.name == query).expect("road");
        assert_eq!(index.road(key, 1).expect("readable").class, None);
    }
}
