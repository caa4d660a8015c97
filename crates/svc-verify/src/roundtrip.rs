//! One record through the lens and back: parse against the source schema, `get` the view and
//! complement, write the view as JSON and read it back against the target schema (as a
//! consumer of the view would), `put` it with the complement, and compare with the record.

use crate::blob::{LensBlob, SchemaBlob};
use crate::diff::{Difference, first_difference};
use crate::{CorpusPlace, VerifyError};
use panproto_inst::{WInstance, parse_json, to_json};
use panproto_lens::Lens;
use panproto_schema::{Protocol, Schema};
use serde_json::Value;
use std::collections::HashMap;

/// The step of a round trip that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    ParseSource,
    Get,
    ParseView,
    Put,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::ParseSource => "parsing the record against the source schema",
            Step::Get => "get (record to view and complement)",
            Step::ParseView => "parsing the view's JSON against the target schema",
            Step::Put => "put (view and complement back to a record)",
        })
    }
}

/// A lens instantiated on its source schema, ready to round-trip records.
pub struct Roundtrip {
    lens: Lens,
    source_root: String,
    target: Schema,
    target_root: String,
}

type StepResult<T> = Result<T, (Step, String)>;

impl Roundtrip {
    pub fn new(
        lens: &LensBlob,
        source: &SchemaBlob,
        target: &SchemaBlob,
        protocol: &Protocol,
    ) -> Result<Roundtrip, VerifyError> {
        Ok(Roundtrip {
            lens: lens.instantiate(&source.schema, protocol)?,
            source_root: source.entry("source")?,
            target: target.schema.clone(),
            target_root: target.entry("target")?,
        })
    }

    /// `None` when the record comes back unchanged, else where it first differs. A step that
    /// fails (or panics inside panproto) is an error naming the record and the step.
    pub fn check(
        &self,
        place: CorpusPlace,
        record: &Value,
    ) -> Result<Option<Difference>, VerifyError> {
        let restored =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.restore(record, true)))
                .unwrap_or_else(|_| Err((Step::Put, "the lens runtime panicked".to_string())))
                .map_err(|(step, message)| VerifyError::Record {
                    record: place,
                    step,
                    message,
                })?;
        Ok(first_difference(record, &restored))
    }

    /// The record after the round trip. Without `realign`, the view read back keeps the node
    /// ids the parser gave it, which the complement does not know (kept to show why).
    fn restore(&self, record: &Value, realign: bool) -> StepResult<Value> {
        let fail = |step: Step| move |e: &dyn std::fmt::Display| (step, e.to_string());
        let source = parse_json(&self.lens.src_schema, &self.source_root, record)
            .map_err(|e| fail(Step::ParseSource)(&e))?;
        let (view, complement) =
            panproto_lens::get(&self.lens, &source).map_err(|e| fail(Step::Get)(&e))?;
        let view_json = to_json(&self.lens.tgt_schema, &view);
        let mut reparsed = parse_json(&self.target, &self.target_root, &view_json)
            .map_err(|e| fail(Step::ParseView)(&e))?;
        if realign {
            let first_free = source.nodes.keys().max().map_or(0, |id| id + 1);
            reparsed = align_ids(reparsed, &view, first_free);
        }
        let restored = panproto_lens::put(&self.lens, &reparsed, &complement)
            .map_err(|e| fail(Step::Put)(&e))?;
        Ok(to_json(&self.lens.src_schema, &restored))
    }
}

/// Children of a node grouped by the edge that holds them, in arc order.
fn children_by_edge(instance: &WInstance, parent: u32) -> HashMap<(&str, &str), Vec<u32>> {
    let mut groups: HashMap<(&str, &str), Vec<u32>> = HashMap::new();
    for (from, to, edge) in &instance.arcs {
        if *from == parent {
            let label = edge.name.as_deref().unwrap_or(&edge.tgt);
            groups.entry((&edge.kind, label)).or_default().push(*to);
        }
    }
    groups
}

/// The complement is keyed by the node ids of the source instance, which `get` keeps in the
/// view; parsing the view's JSON numbers nodes afresh. This gives each re-parsed node the id
/// of its counterpart in `view`, paired from the root by (edge, position among siblings on
/// that edge); a node with no counterpart gets a fresh id from `first_free` up, clear of every
/// source id.
fn align_ids(reparsed: WInstance, view: &WInstance, first_free: u32) -> WInstance {
    let mut ids: HashMap<u32, u32> = HashMap::with_capacity(reparsed.nodes.len());
    let mut next_free = first_free;
    let mut pending = vec![(reparsed.root, Some(view.root))];
    while let Some((node, counterpart)) = pending.pop() {
        let id = counterpart.unwrap_or_else(|| {
            next_free += 1;
            next_free - 1
        });
        ids.insert(node, id);
        let theirs = counterpart.map(|c| children_by_edge(view, c));
        for (key, children) in children_by_edge(&reparsed, node) {
            let matches = theirs.as_ref().and_then(|t| t.get(&key));
            for (i, child) in children.into_iter().enumerate() {
                pending.push((child, matches.and_then(|m| m.get(i).copied())));
            }
        }
    }
    let id_of = |old: u32| ids.get(&old).copied().unwrap_or(old);
    let nodes = reparsed
        .nodes
        .into_values()
        .map(|mut node| {
            node.id = id_of(node.id);
            (node.id, node)
        })
        .collect();
    let arcs = reparsed
        .arcs
        .into_iter()
        .map(|(from, to, edge)| (id_of(from), id_of(to), edge))
        .collect();
    WInstance::new(
        nodes,
        arcs,
        reparsed.fans,
        id_of(reparsed.root),
        reparsed.schema_root,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(path).expect("fixture");
        serde_json::from_str(&text).expect("fixture JSON")
    }

    /// The pitfall the alignment exists for: reading the view back without it gives the
    /// complement the wrong nodes, and a lawful rename looks broken.
    #[test]
    fn without_alignment_a_two_field_rename_is_falsified() {
        let lens = LensBlob::decode(&fixture("rename-key-chain.json")).expect("lens");
        let source = SchemaBlob::decode(&fixture("lossy-source-schema-record.json"), "source")
            .expect("source");
        let derived = lens
            .instantiate(&source.schema, &Protocol::default())
            .expect("instantiates")
            .tgt_schema;
        let target = SchemaBlob {
            schema: derived,
            protocol: String::new(),
        };
        let roundtrip =
            Roundtrip::new(&lens, &source, &target, &Protocol::default()).expect("lens");
        let record = json!({"text": "the text", "createdAt": "2026-01-01T00:00:00Z"});
        assert_eq!(roundtrip.restore(&record, true).expect("aligned"), record);
        let broken = (0..20)
            .filter(|_| roundtrip.restore(&record, false).ok().as_ref() != Some(&record))
            .count();
        assert!(broken > 0);
    }
}
