//! Property: for random catalogs built by random upserts and deletes (stale ones included),
//! every index lookup returns exactly the records that a direct evaluation of the query's
//! filter selects from the model of the catalog, in uri order, with the same total; and every
//! search for a word of the catalog (or a word's start) finds exactly the records whose
//! searched fields hold it: so both engines give the same answers, for ordinary values and
//! hostile ones alike.

use super::{Fresh, at, delete, sqlite, upsert};
use crate::{Change, PageRequest};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use svc_spec::ParamType;

/// Values drawn for records and parameters: ordinary ones, and what a hostile author can
/// publish (a NUL, right-to-left text, astral characters, the longest DIDs and at-uris, long
/// strings), which every engine must store, index and answer alike.
struct Pools {
    dids: Vec<&'static str>,
    refs: Vec<&'static str>,
    names: Vec<&'static str>,
    /// Repository DIDs of record uris: a uri may be 2048 bytes long.
    authorities: Vec<&'static str>,
}

fn leak(value: String) -> &'static str {
    Box::leak(value.into_boxed_str())
}

static POOLS: std::sync::LazyLock<Pools> = std::sync::LazyLock::new(|| {
    let long_did = leak(format!("did:plc:{}", "q".repeat(2040)));
    let long_ref = leak(format!(
        "at://{long_did}/dev.panproto.schema.schema/{}",
        "k".repeat(490)
    ));
    Pools {
        dids: vec!["did:plc:a", "did:plc:b", "did:plc:c", long_did],
        refs: vec![
            "at://did:plc:a/dev.panproto.schema.schema/1",
            "at://did:plc:a/dev.panproto.schema.schema/2",
            "at://did:plc:b/dev.panproto.schema.lens/1",
            long_ref,
        ],
        names: vec![
            "Serde",
            "serde",
            "zod",
            "Colors",
            "poison\u{0}pill",
            "\u{202e}\u{5d0}\u{5d1} \u{1F600}\u{10FFFF}",
            leak("long ".repeat(700)),
        ],
        authorities: vec!["did:plc:a", leak(format!("did:plc:{}", "w".repeat(1990)))],
    }
});

const KINDS: &[&str] = &[
    "dev.svc.bounty",
    "dev.svc.adapter",
    "dev.svc.recommendation",
    "dev.svc.verification",
    "dev.svc.community",
    "dev.svc.dialect",
    "dev.svc.belief",
    "dev.svc.vocab",
    "dev.svc.changeProposal",
    "dev.svc.communityRelease",
    "dev.svc.migrationRun",
    "dev.svc.federation",
];
/// Statuses of every kind that has one, and one no query knows.
const STATUSES: &[&str] = &[
    "open",
    "claimed",
    "fulfilled",
    "withdrawn",
    "draft",
    "review",
    "released",
    "planned",
    "running",
    "paused",
    "completed",
    "rolled-back",
    "custom",
];
const REVS: &[&str] = &["3a", "3b", "3c", "3d"];

struct Picker(u64);

impl Picker {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
    fn chance(&mut self) -> bool {
        self.next().is_multiple_of(2)
    }
    fn some<'a>(&mut self, from: &[&'a str]) -> Vec<&'a str> {
        from.iter().copied().filter(|_| self.chance()).collect()
    }
}

fn schema_ref(p: &mut Picker) -> Value {
    if p.next().is_multiple_of(5) {
        json!({"cid": "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"})
    } else {
        json!({"uri": p.pick(&POOLS.refs)})
    }
}

fn record(kind: &str, p: &mut Picker) -> Value {
    let mut r = match kind {
        "dev.svc.bounty" => {
            let wants = if p.chance() {
                json!({"$type": "dev.svc.bounty#wantLens", "source": schema_ref(p), "target": schema_ref(p)})
            } else {
                json!({"$type": "dev.svc.bounty#wantAdapter", "framework": p.pick(&POOLS.names)})
            };
            json!({"requester": p.pick(&POOLS.dids), "wants": wants})
        }
        "dev.svc.adapter" => json!({
            "framework": p.pick(&POOLS.names),
            "invocationProtocol": {"kind": p.pick(&["subprocess", "http", "wasm", "grpc"])}
        }),
        "dev.svc.recommendation" => {
            let conditions: Vec<Value> = (0..p.next() % 3)
                .map(|_| {
                    let t = p.pick(&[
                        "dev.svc.recommendation#conditionSourceIs",
                        "dev.svc.recommendation#conditionTargetIs",
                        "dev.svc.recommendation#conditionAnd",
                    ]);
                    json!({"$type": t, "schema": schema_ref(p)})
                })
                .collect();
            let path: Vec<Value> = (0..p.next() % 2)
                .map(|_| json!({"uri": p.pick(&POOLS.refs)}))
                .collect();
            json!({"conditions": conditions, "lensPath": path})
        }
        "dev.svc.verification" => json!({
            "lens": schema_ref(p),
            "kind": p.pick(&["roundtrip-test", "property-test", "formal-proof", "coercion-law"]),
            "result": p.pick(&["holds", "falsified", "inconclusive"]),
            "property": {"$type": p.pick(&["dev.svc.defs#lpRoundtrip", "dev.svc.defs#lpGenerator"])}
        }),
        "dev.svc.community" => {
            json!({"name": p.pick(&POOLS.names), "members": p.some(&POOLS.dids)})
        }
        "dev.svc.dialect" => {
            json!({"owningCommunity": p.pick(&POOLS.refs), "name": p.pick(&POOLS.names)})
        }
        "dev.svc.belief" => json!({"subject": {"uri": p.pick(&POOLS.refs)}}),
        "dev.svc.changeProposal" | "dev.svc.communityRelease" => {
            json!({"community": p.pick(&POOLS.refs), "status": p.pick(STATUSES)})
        }
        "dev.svc.migrationRun" => json!({
            "community": p.pick(&POOLS.refs),
            "change": p.pick(&POOLS.refs),
            "status": p.pick(STATUSES)
        }),
        "dev.svc.federation" => {
            json!({"community": p.pick(&POOLS.refs), "peer": p.pick(&POOLS.refs)})
        }
        _ => {
            json!({"name": p.pick(&POOLS.names), "world": p.pick(&["open", "closed-with-default", "hierarchy-closed"])})
        }
    };
    // Optional fields that some queries test for presence or absence.
    if p.chance() {
        r["status"] = json!(p.pick(STATUSES));
    }
    if p.chance() {
        r["holder"] = json!(p.pick(&POOLS.dids));
    }
    if p.chance() {
        r["verification"] = json!(if p.chance() { "" } else { POOLS.refs[0] });
    }
    r
}

#[derive(Debug, Clone)]
struct Op {
    kind: usize,
    slot: u8,
    rev: usize,
    delete: bool,
    seed: u64,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0..KINDS.len(),
        0u8..6,
        0..REVS.len(),
        prop::bool::weighted(0.15),
        1u64..u64::MAX,
    )
        .prop_map(|(kind, slot, rev, delete, seed)| Op {
            kind,
            slot,
            rev,
            delete,
            seed,
        })
}

/// Every argument tuple worth asking for a query: each parameter over its pool (and absent
/// when optional).
fn argument_tuples(params: &[svc_spec::ParamDef]) -> Vec<Vec<Option<String>>> {
    let mut tuples = vec![Vec::new()];
    for param in params {
        let mut pool: Vec<Option<String>> = match param.param_type {
            ParamType::Did => POOLS.dids.iter().map(|s| Some(s.to_string())).collect(),
            ParamType::AtUri => POOLS.refs.iter().map(|s| Some(s.to_string())).collect(),
            ParamType::Enum => param
                .values
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(Some)
                .collect(),
            ParamType::String => POOLS
                .names
                .iter()
                .chain(["SERDE", "holds", "dev.svc.defs#lpRoundtrip"].iter())
                .map(|s| Some(s.to_string()))
                .collect(),
        };
        if !param.required {
            pool.push(None);
        }
        tuples = tuples
            .into_iter()
            .flat_map(|t| {
                pool.iter().map(move |v| {
                    let mut t = t.clone();
                    t.push(v.clone());
                    t
                })
            })
            .collect();
    }
    tuples
}

/// Applies random changes and checks every answer of every query against the filter
/// evaluated directly over a model of the catalog.
async fn lookups_equal_direct_evaluation(fresh: Fresh, ops: &[Op], batch: usize, bulk: bool) {
    let mut model: BTreeMap<String, (String, Option<Value>)> = BTreeMap::new();
    let mut changes: Vec<Change> = Vec::new();
    for op in ops {
        let kind = KINDS[op.kind];
        let authority = POOLS.authorities[usize::from(op.slot) % POOLS.authorities.len()];
        let uri = format!("at://{authority}/{kind}/{}", op.slot);
        let rev = REVS[op.rev];
        let stale = model
            .get(&uri)
            .is_some_and(|(stored, _)| stored.as_str() > rev);
        if op.delete {
            changes.push(delete(&uri, rev));
            if !stale {
                model.insert(uri, (rev.to_string(), None));
            }
        } else {
            let mut body = record(kind, &mut Picker(op.seed));
            body["$type"] = json!(kind);
            changes.push(upsert(&uri, rev, body.clone()));
            if !stale {
                model.insert(uri, (rev.to_string(), Some(body)));
            }
        }
    }
    // The same changes, applied one batch at a time or as one bulk load, give the
    // same catalog.
    if bulk {
        assert!(fresh.catalog.begin_bulk().await.unwrap());
    }
    for chunk in changes.chunks(batch) {
        fresh.catalog.apply(chunk.to_vec(), None).await.unwrap();
    }
    if bulk {
        let report = fresh.catalog.finish_bulk(None).await.unwrap();
        assert_eq!(report.applied + report.stale, changes.len() as u64);
    }
    let mut expected_kinds = crate::KindCounts::new();
    for (uri, (_, record)) in &model {
        if record.is_some() {
            *expected_kinds
                .entry(uri.split('/').nth(3).unwrap_or_default().to_string())
                .or_default() += 1;
        }
    }
    let mut kinds = fresh.catalog.kind_counts().await.unwrap();
    kinds.retain(|_, n| *n > 0);
    assert_eq!(kinds, expected_kinds);
    for query in fresh.queries.all() {
        for args in argument_tuples(query.params()) {
            let args: Vec<Option<&str>> = args.iter().map(Option::as_deref).collect();
            let expected: Vec<&String> = model
                .iter()
                .filter(|(uri, (_, record))| {
                    uri.split('/').nth(3) == Some(query.kind())
                        && record.as_ref().is_some_and(|r| {
                            query.matches(uri, &svc_spec::Json::from_value(r), &args)
                        })
                })
                .map(|(uri, _)| uri)
                .collect();
            let page = fresh
                .catalog
                .list(
                    query.id().clone(),
                    query.lookup_key(&args),
                    PageRequest {
                        limit: 1000,
                        offset: 0,
                        after: None,
                    },
                )
                .await
                .unwrap();
            let got: Vec<&String> = page.items.iter().map(|i| &i.uri).collect();
            assert_eq!(got, expected, "{} {:?}", query.name(), args);
            assert_eq!(
                page.total as usize,
                expected.len(),
                "{} {:?}",
                query.name(),
                args
            );
        }
    }
    searches_equal_direct_evaluation(&fresh, &model).await;
}

/// Every word the model's records hold in their searched fields, searched as a word and by
/// its first three characters, finds exactly the records that hold it.
async fn searches_equal_direct_evaluation(
    fresh: &Fresh,
    model: &BTreeMap<String, (String, Option<Value>)>,
) {
    let indexes = fresh.queries.indexes();
    let words_of: BTreeMap<&String, Vec<String>> = model
        .iter()
        .filter_map(|(uri, (_, record))| {
            let kind = uri.split('/').nth(3)?;
            let text =
                indexes.search_text(kind, uri, &svc_spec::Json::from_value(record.as_ref()?))?;
            let words = format!("{} {}", text.name, text.text);
            Some((uri, words.split_whitespace().map(str::to_string).collect()))
        })
        .collect();
    let all: BTreeSet<&String> = words_of.values().flatten().collect();
    for word in all {
        let prefix: String = word.chars().take(3).collect();
        let searched_as_prefix = prefix.chars().count() >= svc_spec::search::MIN_PREFIX_CHARS
            && !prefix.chars().any(svc_spec::search::unspaced);
        let searches = [
            (
                format!("{word} "),
                Box::new(|w: &String| w == word) as Box<dyn Fn(&String) -> bool>,
            ),
            (
                prefix.clone(),
                Box::new(move |w: &String| w.starts_with(prefix.as_str())),
            ),
        ];
        for (q, holds) in searches
            .into_iter()
            .take(if searched_as_prefix { 2 } else { 1 })
        {
            let Ok(query) = svc_spec::search::SearchQuery::parse(&q) else {
                continue;
            };
            let expected: BTreeSet<String> = words_of
                .iter()
                .filter(|(_, words)| words.iter().any(&holds))
                .map(|(uri, _)| uri.to_string())
                .collect();
            let request = crate::SearchRequest {
                query,
                kind: None,
                offset: 0,
                limit: 1000,
                deadline: std::time::Duration::from_secs(30),
            };
            let lines = super::suite::Lines(Vec::new());
            let written = fresh
                .catalog
                .search(request, Box::new(lines))
                .await
                .unwrap();
            let (got, _) = super::suite::written_uris(&written);
            let got: BTreeSet<String> = got.into_iter().collect();
            assert_eq!(got, expected, "search {q:?}");
        }
    }
}

/// The changes the ops make, in order.
fn changes_of(ops: &[Op]) -> Vec<Change> {
    ops.iter()
        .map(|op| {
            let kind = KINDS[op.kind];
            let authority = POOLS.authorities[usize::from(op.slot) % POOLS.authorities.len()];
            let uri = format!("at://{authority}/{kind}/{}", op.slot);
            let rev = REVS[op.rev];
            if op.delete {
                return delete(&uri, rev);
            }
            let mut body = record(kind, &mut Picker(op.seed));
            body["$type"] = json!(kind);
            upsert(&uri, rev, body)
        })
        .collect()
}

/// Every (query, key) worth asking, with its answer's uris now.
async fn answers(fresh: &Fresh) -> BTreeMap<(svc_spec::QueryId, String), BTreeSet<String>> {
    let mut answers = BTreeMap::new();
    for query in fresh.queries.all() {
        for args in argument_tuples(query.params()) {
            let args: Vec<Option<&str>> = args.iter().map(Option::as_deref).collect();
            let key = query.lookup_key(&args);
            let page = fresh
                .catalog
                .list(
                    query.id().clone(),
                    key.clone(),
                    PageRequest {
                        limit: 1000,
                        offset: 0,
                        after: None,
                    },
                )
                .await
                .unwrap();
            let uris = page.items.into_iter().map(|item| item.uri).collect();
            answers.insert((query.id().clone(), key), uris);
        }
    }
    answers
}

/// Applies the batches, hiding and showing one account between some of them.
async fn apply_batches(fresh: &Fresh, batches: &[&[Change]], first: usize) {
    for (n, chunk) in batches.iter().enumerate() {
        fresh.catalog.apply(chunk.to_vec(), None).await.unwrap();
        let status = match (first + n) % 3 {
            1 => crate::AccountStatus::Inactive("deactivated".into()),
            2 => crate::AccountStatus::Active,
            _ => continue,
        };
        let did = svc_syntax::Did::new(POOLS.authorities[1]).unwrap();
        fresh.catalog.set_account(did, status).await.unwrap();
    }
}

/// A subscriber that held every answer at some change and applies every change after it
/// (entering records that are still stored, as the stream sends them) holds every answer of
/// the present.
async fn the_stream_leads_from_any_cursor_to_the_present(
    fresh: Fresh,
    ops: &[Op],
    batch: usize,
    cut: usize,
) {
    let changes = changes_of(ops);
    let batches: Vec<&[Change]> = changes.chunks(batch).collect();
    let cut = cut % (batches.len() + 1);
    apply_batches(&fresh, &batches[..cut], 0).await;
    let cursor = fresh.catalog.change_bounds().await.unwrap().newest;
    let mut held = answers(&fresh).await;
    apply_batches(&fresh, &batches[cut..], cut).await;
    let stream = fresh.catalog.changes_after(cursor, 100_000).await.unwrap();
    for change in &stream {
        let stored = fresh.catalog.get(at(&change.uri)).await.unwrap().is_some();
        for ((query, key), uris) in held.iter_mut() {
            match change.op(Some((query, key))) {
                Some(crate::StreamOp::Enter) if stored => {
                    uris.insert(change.uri.clone());
                }
                Some(crate::StreamOp::Leave) => {
                    uris.remove(&change.uri);
                }
                _ => {}
            }
        }
    }
    assert_eq!(held, answers(&fresh).await);
}

/// A fresh catalog of `backend` (none when PostgreSQL is not there outside CI), on a runtime
/// of its own.
fn on_backend<F: std::future::Future<Output = ()>>(backend: &str, test: impl FnOnce(Fresh) -> F) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let fresh = match backend {
            "sqlite" => Some(sqlite()),
            _ => super::postgres().await,
        };
        if let Some(fresh) = fresh {
            test(fresh).await;
        }
    });
}

fn run_on(backend: &str, ops: &[Op], batch: usize, bulk: bool) {
    on_backend(backend, |fresh| {
        lookups_equal_direct_evaluation(fresh, ops, batch, bulk)
    });
}

fn stream_on(backend: &str, ops: &[Op], batch: usize, cut: usize) {
    on_backend(backend, |fresh| {
        the_stream_leads_from_any_cursor_to_the_present(fresh, ops, batch, cut)
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn the_change_stream_leads_to_the_present_on_sqlite(ops in prop::collection::vec(op(), 1..60), batch in 1usize..8, cut in 0usize..16) {
        stream_on("sqlite", &ops, batch, cut);
    }

    #[test]
    fn the_change_stream_leads_to_the_present_on_postgres(ops in prop::collection::vec(op(), 1..60), batch in 1usize..8, cut in 0usize..16) {
        stream_on("postgres", &ops, batch, cut);
    }

    #[test]
    fn index_lookups_equal_direct_evaluation_on_sqlite(ops in prop::collection::vec(op(), 1..60), batch in 1usize..8, bulk in any::<bool>()) {
        run_on("sqlite", &ops, batch, bulk);
    }

    #[test]
    fn index_lookups_equal_direct_evaluation_on_postgres(ops in prop::collection::vec(op(), 1..60), batch in 1usize..8, bulk in any::<bool>()) {
        run_on("postgres", &ops, batch, bulk);
    }
}
