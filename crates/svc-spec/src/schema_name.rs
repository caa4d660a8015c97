//! A schema's readable name, derived from its record once, when it is filed: the NSID its
//! blob names (an atproto lexicon's schema), else its entry vertices (`post:body`), else its
//! record key. A person reads it on the map, on pages, in search and from the command line.

use svc_json::Json;
use svc_syntax::Nsid;

/// The longest name kept, in bytes; a longer one is cut at a character boundary.
pub const MAX_NAME_BYTES: usize = 128;

/// Entry vertices named before the rest are counted (`a, b, c +2`).
const ENTRIES_NAMED: usize = 3;

/// The readable name of the schema record `record` stored at `uri`.
pub fn readable_name(uri: &str, record: &Json) -> String {
    let blob = record.get("blob");
    let name = blob
        .and_then(named_nsid)
        .or_else(|| blob.and_then(entry_vertices))
        .unwrap_or_else(|| record_key(uri).to_string());
    cut(name)
}

/// The NSID of the first entry vertex that names one, else the first the blob names.
fn named_nsid(blob: &Json) -> Option<String> {
    let nsid_of = |vertex: &str| -> Option<String> {
        let from_map = blob.get("nsids").and_then(|m| m.get(vertex));
        let from_vertex = blob
            .get("vertices")
            .and_then(|v| v.get(vertex))
            .and_then(|v| v.get("nsid"));
        [from_map, from_vertex]
            .into_iter()
            .flatten()
            .filter_map(Json::as_str)
            .find(|text| Nsid::new(*text).is_ok())
            .map(str::to_string)
    };
    let entries = blob.get("entries").and_then(Json::as_array).unwrap_or(&[]);
    if let Some(found) = entries.iter().filter_map(Json::as_str).find_map(nsid_of) {
        return Some(found);
    }
    let mapped = blob.get("nsids").and_then(Json::as_object)?;
    mapped
        .iter()
        .filter_map(|(_, nsid)| nsid.as_str())
        .find(|text| Nsid::new(*text).is_ok())
        .map(str::to_string)
}

fn entry_vertices(blob: &Json) -> Option<String> {
    let entries: Vec<&str> = blob
        .get("entries")?
        .as_array()?
        .iter()
        .filter_map(Json::as_str)
        .filter(|entry| !entry.trim().is_empty())
        .collect();
    if entries.is_empty() {
        return None;
    }
    let mut name = entries[..entries.len().min(ENTRIES_NAMED)].join(", ");
    if entries.len() > ENTRIES_NAMED {
        name.push_str(&format!(" +{}", entries.len() - ENTRIES_NAMED));
    }
    Some(name)
}

fn record_key(uri: &str) -> &str {
    uri.rsplit('/').next().unwrap_or(uri)
}

fn cut(mut name: String) -> String {
    name.retain(|c| !c.is_control());
    if name.len() > MAX_NAME_BYTES {
        let mut end = MAX_NAME_BYTES;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn name(record: serde_json::Value) -> String {
        readable_name(
            "at://did:plc:a/dev.panproto.schema.schema/key1",
            &Json::from_value(&record),
        )
    }

    #[test]
    fn an_nsid_first_then_entries_then_the_record_key() {
        let lexicon =
            json!({"blob": {"entries": ["post"], "nsids": {"post": "app.bsky.feed.post"}}});
        assert_eq!(name(lexicon), "app.bsky.feed.post");
        let on_vertex = json!({"blob": {"entries": ["v"], "vertices": {"v": {"nsid": "a.b.c"}}}});
        assert_eq!(name(on_vertex), "a.b.c");
        let entries = json!({"blob": {"entries": ["post:body"], "nsids": {}}});
        assert_eq!(name(entries), "post:body");
        let many = json!({"blob": {"entries": ["a", "b", "c", "d", "e"]}});
        assert_eq!(name(many), "a, b, c +2");
        assert_eq!(name(json!({"protocol": "x"})), "key1");
        let not_an_nsid = json!({"blob": {"entries": [], "nsids": {"v": "not an nsid"}}});
        assert_eq!(name(not_an_nsid), "key1");
    }

    #[test]
    fn a_hostile_name_is_cut_and_loses_control_characters() {
        let long = "x".repeat(500) + "é";
        let record = json!({"blob": {"entries": [format!("a\u{7}b{long}")]}});
        let named = name(record);
        assert!(named.len() <= MAX_NAME_BYTES);
        assert!(named.starts_with("abx"));
    }
}
