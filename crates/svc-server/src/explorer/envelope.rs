//! A list answer as a page reads it: the envelope, and of each record only the fields the page
//! shows ([`bounded::Pick`]). Parsed whole, twenty records of a million values each made a
//! page hold hundreds of MB of `serde_json::Value`; picked, each holds a few fields.

use super::bounded::{self, Bounds, Json, Wanted};
use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// The list envelope, as the API writes it.
pub(crate) struct Envelope {
    pub items: Vec<EnvelopeItem>,
    pub total: u64,
    pub cursor: Option<String>,
}

pub(crate) struct EnvelopeItem {
    pub uri: String,
    pub author: String,
    /// The fields wanted, each within the bounds given.
    pub record: Json,
}

/// The answer `json`, each record read for the fields `wanted`, each within `bounds`.
pub(crate) fn parse(json: &[u8], wanted: &Wanted, bounds: Bounds) -> serde_json::Result<Envelope> {
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let envelope = Reader { wanted, bounds }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(envelope)
}

/// What each record is read for: the seed of the envelope, of its items and of each item.
#[derive(Clone, Copy)]
struct Reader<'w> {
    wanted: &'w Wanted,
    bounds: Bounds,
}

impl<'de> DeserializeSeed<'de> for Reader<'_> {
    type Value = Envelope;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Envelope, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Reader<'_> {
    type Value = Envelope;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list answer")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        let (mut items, mut total, mut cursor) = (None, None, None);
        while let Some(name) = map.next_key::<String>()? {
            match name.as_str() {
                "items" => items = Some(map.next_value_seed(Items(self))?),
                "total" => total = Some(map.next_value()?),
                "cursor" => cursor = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Envelope {
            items: items.ok_or_else(|| A::Error::missing_field("items"))?,
            total: total.ok_or_else(|| A::Error::missing_field("total"))?,
            cursor,
        })
    }
}

/// The answer's items.
struct Items<'w>(Reader<'w>);

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = Vec<EnvelopeItem>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = Vec<EnvelopeItem>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Item(self.0))? {
            items.push(item);
        }
        Ok(items)
    }
}

/// One item: its uri, author and record.
struct Item<'w>(Reader<'w>);

impl<'de> DeserializeSeed<'de> for Item<'_> {
    type Value = EnvelopeItem;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<EnvelopeItem, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Item<'_> {
    type Value = EnvelopeItem;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list item")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EnvelopeItem, A::Error> {
        let (mut uri, mut author, mut record) = (None, None, None);
        let Reader { wanted, bounds } = self.0;
        while let Some(name) = map.next_key::<String>()? {
            match name.as_str() {
                "uri" => uri = Some(map.next_value()?),
                "author" => author = Some(map.next_value()?),
                "record" => record = Some(map.next_value_seed(bounded::Pick { wanted, bounds })?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(EnvelopeItem {
            uri: uri.ok_or_else(|| A::Error::missing_field("uri"))?,
            author: author.ok_or_else(|| A::Error::missing_field("author"))?,
            record: record.ok_or_else(|| A::Error::missing_field("record"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_with_only_the_fields_wanted() {
        let zeros = vec!["0"; 10_000].join(",");
        let answer = format!(
            "{{\"items\":[{{\"uri\":\"at://did:plc:a/dev.svc.vocab/1\",\"author\":\"did:plc:a\",\
             \"rev\":\"3l\",\"record\":{{\"aaa\":[{zeros}],\"name\":\"Huge\"}}}}],\
             \"total\":7,\"limit\":1,\"offset\":0,\"cursor\":\"abc\"}}"
        );
        let wanted = Wanted::of(["name"]);
        let bounds = super::super::fields::ROW_FIELD;
        let envelope = parse(answer.as_bytes(), &wanted, bounds).expect("an answer");
        assert_eq!(
            (envelope.total, envelope.cursor.as_deref()),
            (7, Some("abc"))
        );
        let item = &envelope.items[0];
        assert_eq!(item.uri, "at://did:plc:a/dev.svc.vocab/1");
        assert_eq!(item.author, "did:plc:a");
        assert_eq!(item.record.to_string(), "{\"name\":\"Huge\",…}");
        let without_total = "{\"items\":[]}";
        assert!(parse(without_total.as_bytes(), &wanted, bounds).is_err());
    }
}
