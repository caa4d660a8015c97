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
use std::cell::Cell;
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

    /// What in `record` does not fit the schema it is parsed against (see [`crate::misfits`]).
    pub fn misfits(&self, record: &Value) -> Vec<String> {
        crate::misfits(&self.lens.src_schema, &self.source_root, record)
    }

    /// `None` when the record comes back unchanged, else where it first differs. A step that
    /// fails (or panics inside panproto) is an error naming the record and the step.
    pub fn check(
        &self,
        place: CorpusPlace,
        record: &Value,
    ) -> Result<Option<Difference>, VerifyError> {
        let step = Cell::new(Step::ParseSource);
        let attempt = || self.restore(record, true, &step);
        let restored = std::panic::catch_unwind(std::panic::AssertUnwindSafe(attempt))
            .unwrap_or_else(|_| Err((step.get(), "the lens runtime panicked".to_string())))
            .map_err(|(step, message)| VerifyError::Record {
                record: place,
                step,
                message,
            })?;
        Ok(first_difference(record, &restored))
    }

    /// The record after the round trip; `step` follows the step under way, so that a panic
    /// can be named by it. Without `realign`, the view read back keeps the node ids the parser
    /// gave it, which the complement does not know (kept to show why).
    fn restore(&self, record: &Value, realign: bool, step: &Cell<Step>) -> StepResult<Value> {
        let fail = |e: &dyn std::fmt::Display| (step.get(), e.to_string());
        step.set(Step::ParseSource);
        let source =
            parse_json(&self.lens.src_schema, &self.source_root, record).map_err(|e| fail(&e))?;
        step.set(Step::Get);
        let (view, complement) = panproto_lens::get(&self.lens, &source).map_err(|e| fail(&e))?;
        step.set(Step::ParseView);
        let view_json = to_json(&self.lens.tgt_schema, &view);
        let mut reparsed =
            parse_json(&self.target, &self.target_root, &view_json).map_err(|e| fail(&e))?;
        if realign {
            let first_free = source.nodes.keys().max().map_or(0, |id| id + 1);
            reparsed = align_ids(reparsed, &view, first_free);
        }
        step.set(Step::Put);
        let restored =
            panproto_lens::put(&self.lens, &reparsed, &complement).map_err(|e| fail(&e))?;
        Ok(to_json(&self.lens.src_schema, &restored))
    }
}

/// Each node's children grouped by the edge that holds them (kind, label), in arc order.
type ChildIndex<'a> = HashMap<u32, HashMap<(&'a str, &'a str), Vec<u32>>>;

/// One pass over the arcs, so that alignment looks children up instead of scanning for them.
fn child_index(instance: &WInstance) -> ChildIndex<'_> {
    let mut index: ChildIndex<'_> = HashMap::new();
    for (from, to, edge) in &instance.arcs {
        let label = edge.name.as_deref().unwrap_or(&edge.tgt);
        index
            .entry(*from)
            .or_default()
            .entry((&edge.kind, label))
            .or_default()
            .push(*to);
    }
    index
}

/// The complement is keyed by the node ids of the source instance, which `get` keeps in the
/// view; parsing the view's JSON numbers nodes afresh. This gives each re-parsed node the id
/// of its counterpart in `view`, paired from the root by (edge, position among siblings on
/// that edge); a node with no counterpart gets a fresh id from `first_free` up, clear of every
/// source id.
fn align_ids(reparsed: WInstance, view: &WInstance, first_free: u32) -> WInstance {
    let mut ids: HashMap<u32, u32> = HashMap::with_capacity(reparsed.nodes.len());
    {
        let ours = child_index(&reparsed);
        let theirs = child_index(view);
        let mut next_free = first_free;
        let mut pending = vec![(reparsed.root, Some(view.root))];
        while let Some((node, counterpart)) = pending.pop() {
            let id = counterpart.unwrap_or_else(|| {
                next_free += 1;
                next_free - 1
            });
            ids.insert(node, id);
            let their_groups = counterpart.and_then(|c| theirs.get(&c));
            for (key, children) in ours.get(&node).into_iter().flatten() {
                let matches = their_groups.and_then(|groups| groups.get(key));
                for (i, child) in children.iter().enumerate() {
                    pending.push((*child, matches.and_then(|m| m.get(i).copied())));
                }
            }
        }
    }
    renumber(reparsed, |old| ids.get(&old).copied().unwrap_or(old))
}

/// The same instance with every node id passed through `id_of`.
fn renumber(instance: WInstance, id_of: impl Fn(u32) -> u32) -> WInstance {
    let nodes = instance
        .nodes
        .into_values()
        .map(|mut node| {
            node.id = id_of(node.id);
            (node.id, node)
        })
        .collect();
    let arcs = instance
        .arcs
        .into_iter()
        .map(|(from, to, edge)| (id_of(from), id_of(to), edge))
        .collect();
    WInstance::new(
        nodes,
        arcs,
        instance.fans,
        id_of(instance.root),
        instance.schema_root,
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

    /// The instance with its non-root node ids permuted (reversed), as a parse that numbers
    /// the fields in another order would give.
    fn renumbered(instance: WInstance) -> WInstance {
        let mut ids: Vec<u32> = instance.nodes.keys().copied().collect();
        ids.retain(|id| *id != instance.root);
        ids.sort_unstable();
        let reversed: HashMap<u32, u32> =
            ids.iter().copied().zip(ids.iter().rev().copied()).collect();
        renumber(instance, |id| reversed.get(&id).copied().unwrap_or(id))
    }

    /// The pitfall the alignment exists for: the complement knows the view by node ids, and a
    /// view read back with its fields numbered otherwise gets the wrong values back; aligned,
    /// the same view restores the record.
    #[test]
    fn a_view_numbered_otherwise_breaks_put_unless_aligned() {
        let lens = LensBlob::decode(&fixture("rename-key-chain.json")).expect("lens");
        let source = SchemaBlob::decode(&fixture("lossy-source-schema-record.json"), "source")
            .expect("source");
        let lens = lens
            .instantiate(&source.schema, &Protocol::default())
            .expect("instantiates");
        let record = json!({"text": "the text", "createdAt": "2026-01-01T00:00:00Z"});
        let instance = parse_json(&lens.src_schema, "post:body", &record).expect("parses");
        let (view, complement) = panproto_lens::get(&lens, &instance).expect("get");
        let view_json = to_json(&lens.tgt_schema, &view);
        let reparsed = parse_json(&lens.tgt_schema, "post:body", &view_json).expect("parses");
        let first_free = instance.nodes.keys().max().map_or(0, |id| id + 1);
        // The parser's own numbering depends on hashing seeds: misnumber on purpose instead.
        let misnumbered = renumbered(align_ids(reparsed, &view, first_free));
        let put = |view: &WInstance| {
            let restored = panproto_lens::put(&lens, view, &complement).ok();
            restored.map(|r| to_json(&lens.src_schema, &r))
        };
        assert_ne!(put(&misnumbered).as_ref(), Some(&record));
        let aligned = align_ids(misnumbered, &view, first_free);
        assert_eq!(put(&aligned).as_ref(), Some(&record));
    }

    #[test]
    fn a_failed_step_names_the_record_its_line_and_the_step() {
        let error = VerifyError::Record {
            record: CorpusPlace {
                index: 3,
                line: Some(4),
            },
            step: Step::Put,
            message: "complement mismatch".into(),
        };
        assert_eq!(
            error.to_string(),
            "corpus record 3 (line 4): put (view and complement back to a record): complement mismatch"
        );
    }
}
