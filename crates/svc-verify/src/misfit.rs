//! Records that do not fit the source schema. panproto's parser is lenient (unknown keys are
//! kept aside, an array at a scalar vertex is emptied, any scalar passes for a string), so a
//! round trip alone cannot tell a lawful lens from a record outside its domain.

use panproto_schema::{Edge, Schema};
use serde_json::Value;

/// One line per misfit, each starting with the JSON path (`$.text: ...`). Empty: the record
/// fits the schema at `root`.
pub fn misfits(schema: &Schema, root: &str, record: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(schema, root, record, "$", &mut found);
    found
}

/// A vertex whose only edge is a nameless type indirection stands for that edge's target, as
/// the parser reads it.
fn resolve<'a>(schema: &'a Schema, mut vertex: &'a str) -> &'a str {
    for _ in 0..64 {
        match schema.outgoing_edges(vertex) {
            [edge] if edge.name.is_none() && matches!(&*edge.kind, "ref" | "record-schema") => {
                vertex = &edge.tgt;
            }
            _ => break,
        }
    }
    vertex
}

fn label(edge: &Edge) -> &str {
    edge.name.as_deref().unwrap_or(&edge.tgt)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a scalar fits a scalar vertex kind; kinds this check does not know fit anything.
fn scalar_fits(kind: &str, value: &Value) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "boolean" => value.is_boolean(),
        "number" | "float" => value.is_number(),
        _ => true,
    }
}

fn walk(schema: &Schema, vertex: &str, value: &Value, path: &str, found: &mut Vec<String>) {
    let vertex = resolve(schema, vertex);
    let kind = schema.vertex(vertex).map(|v| &*v.kind).unwrap_or("");
    let edges = schema.outgoing_edges(vertex);
    let wrong = |found: &mut Vec<String>| {
        found.push(format!(
            "{path}: a JSON {} where the schema declares a {kind}",
            json_kind(value)
        ));
    };
    match value {
        Value::Null => {}
        Value::Object(map) => {
            if edges.is_empty() && !matches!(kind, "object" | "record") {
                return wrong(found);
            }
            for (key, child) in map {
                if key == "$type" {
                    continue;
                }
                match edges.iter().find(|e| label(e) == key) {
                    Some(edge) => walk(schema, &edge.tgt, child, &format!("{path}.{key}"), found),
                    None => found.push(format!("{path}.{key}: a key the schema does not declare")),
                }
            }
        }
        Value::Array(items) => match edges.iter().find(|e| e.name.is_none()) {
            Some(item) => {
                for (i, child) in items.iter().enumerate() {
                    walk(schema, &item.tgt, child, &format!("{path}[{i}]"), found);
                }
            }
            None => wrong(found),
        },
        scalar => {
            if !edges.is_empty() || !scalar_fits(kind, scalar) {
                wrong(found);
            }
        }
    }
}
