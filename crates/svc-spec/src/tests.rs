use super::*;
use serde_json::json;

fn keys_of(query: &Query, record: &serde_json::Value) -> Vec<String> {
    query.index_keys("at://did:plc:a/x.y.z/k", &Json::from_value(record))
}

fn matches(query: &Query, record: &serde_json::Value, args: &[Option<&str>]) -> bool {
    query.matches("at://did:plc:a/x.y.z/k", &Json::from_value(record), args)
}

fn query(name: &str) -> Query {
    let set = QuerySet::embedded();
    set.all()[set.position(name).unwrap()].clone()
}

fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> + 'a {
    move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

#[test]
fn the_embedded_spec_declares_the_twenty_eight_queries() {
    let set = QuerySet::embedded();
    let names: Vec<&str> = set.public().map(|(_, q)| q.name()).collect();
    assert_eq!(names.len(), 28);
    assert!(
        set.indexes()
            .get(&QueryId::new(SUFFICIENCY_INDEX))
            .is_some()
    );
    assert!(set.position(SUFFICIENCY_INDEX).is_none(), "not routed");
    assert!(names.contains(&"vocabulariesByName"));
    assert!(names.contains(&"federationsForPeer"));
}

#[test]
fn a_schema_is_found_by_its_readable_name_whatever_its_case() {
    let q = query("schemasByName");
    let schema = json!({"protocol": "atproto", "blob": {"entries": ["post"], "nsids": {"post": "App.Example.Post"}}});
    let keys = keys_of(&q, &schema);
    assert_eq!(keys, vec![q.lookup_key(&[Some("app.example.post")])]);
    let unnamed = json!({"protocol": "atproto"});
    assert_eq!(keys_of(&q, &unnamed), vec![q.lookup_key(&[Some("k")])]);
}

#[test]
fn open_bounties_take_open_claimed_or_unset_status() {
    let q = query("openBounties");
    for (status, expected) in [
        (Some("open"), true),
        (Some("claimed"), true),
        (None, true),
        (Some("fulfilled"), false),
        (Some("withdrawn"), false),
    ] {
        let mut record = json!({"requester": "did:plc:a"});
        if let Some(s) = status {
            record["status"] = json!(s);
        }
        assert_eq!(!keys_of(&q, &record).is_empty(), expected, "{status:?}");
        assert_eq!(matches(&q, &record, &[]), expected);
    }
    assert_eq!(keys_of(&q, &json!({})), vec![String::new()]);
}

#[test]
fn open_changes_are_drafts_and_reviews_and_active_runs_are_under_way() {
    let cases = [
        (
            "openChangeProposals",
            &["draft", "review"][..],
            &["approved", "rejected", "released", "superseded", "Draft"][..],
        ),
        (
            "activeMigrationRuns",
            &["planned", "running", "paused"][..],
            &["completed", "failed", "rolled-back", "Running"][..],
        ),
    ];
    for (name, matching, others) in cases {
        let q = query(name);
        for status in matching {
            assert!(
                matches(&q, &json!({"status": status}), &[]),
                "{name} {status}"
            );
        }
        for status in others {
            assert!(
                !matches(&q, &json!({"status": status}), &[]),
                "{name} {status}"
            );
        }
        assert!(
            !matches(&q, &json!({}), &[]),
            "{name}: a status is required"
        );
    }
}

#[test]
fn a_community_s_changes_releases_runs_and_federations_are_found_by_its_uri() {
    let community = "at://did:plc:c/dev.svc.community/1";
    let other = "at://did:plc:c/dev.svc.community/2";
    for (name, field) in [
        ("changeProposalsForCommunity", "community"),
        ("communityReleasesForCommunity", "community"),
        ("federationsForCommunity", "community"),
        ("federationsForPeer", "peer"),
        ("migrationRunsForChange", "change"),
    ] {
        let q = query(name);
        let record = json!({ field: community, "status": "completed" });
        assert!(matches(&q, &record, &[Some(community)]), "{name}");
        assert!(!matches(&q, &record, &[Some(other)]), "{name}");
        assert!(
            q.bind(lookup(&[(q.params()[0].name.as_str(), "not a uri")]))
                .is_err(),
            "{name}"
        );
    }
}

#[test]
fn case_insensitive_keys_fold_both_sides() {
    let q = query("adaptersForFramework");
    let keys = keys_of(&q, &json!({"framework": "Serde"}));
    let bound = q.bind(lookup(&[("framework", "SERDE")])).unwrap();
    assert_eq!(keys, vec![q.lookup_key(&bound)]);
    assert!(matches(&q, &json!({"framework": "serde"}), &bound));
    let exact = query("vocabulariesByName");
    let bound = exact.bind(lookup(&[("name", "Colors")])).unwrap();
    assert!(!matches(&exact, &json!({"name": "colors"}), &bound));
    assert_ne!(
        keys_of(&exact, &json!({"name": "colors"})),
        vec![exact.lookup_key(&bound)]
    );
}

#[test]
fn parameters_are_checked_by_type() {
    let q = query("bountiesByRequester");
    assert_eq!(
        q.bind(lookup(&[])).unwrap_err().to_string(),
        "requester_did: required parameter missing"
    );
    assert_eq!(
        q.bind(lookup(&[("requester_did", "alice")]))
            .unwrap_err()
            .to_string(),
        "requester_did: not a did"
    );
    let q = query("verificationsForLens");
    assert_eq!(
        q.bind(lookup(&[("lens_uri", "http://x")]))
            .unwrap_err()
            .to_string(),
        "lens_uri: not an at-uri"
    );
    let q = query("adaptersByInvocationProtocol");
    assert_eq!(
        q.bind(lookup(&[("kind", "grpc")])).unwrap_err().to_string(),
        "kind: must be one of subprocess, http, wasm"
    );
}

#[test]
fn optional_parameters_index_both_ways() {
    let q = query("recommendationsStartingFrom");
    let record = json!({
        "lensPath": [{"uri": "at://did:plc:a/dev.panproto.schema.lens/1"}],
        "conditions": [
            {"$type": "dev.svc.recommendation#conditionSourceIs", "schema": {"uri": "at://did:plc:a/dev.panproto.schema.schema/1"}},
            {"$type": "dev.svc.recommendation#conditionTargetIs", "schema": {"uri": "at://did:plc:a/dev.panproto.schema.schema/2"}}
        ]
    });
    let keys = keys_of(&q, &record);
    let none = q.lookup_key(&[None]);
    let source = q.lookup_key(&[Some("at://did:plc:a/dev.panproto.schema.schema/1")]);
    let target = q.lookup_key(&[Some("at://did:plc:a/dev.panproto.schema.schema/2")]);
    assert!(keys.contains(&none) && keys.contains(&source) && !keys.contains(&target));
    let empty_path = json!({"lensPath": [], "conditions": record["conditions"].clone()});
    assert!(keys_of(&q, &empty_path).is_empty());
}

#[test]
fn keys_of_different_tuples_never_collide() {
    assert_ne!(
        encode_key(&[Some("a1:b"), Some("c")]),
        encode_key(&[Some("a"), Some("b1:c")])
    );
    assert_ne!(encode_key(&[None]), encode_key(&[Some("-")]));
    assert_eq!(encode_key(&[]), "");
}

#[test]
fn long_keys_and_keys_with_nul_are_stored_as_digests() {
    let long = "x".repeat(crate::keys::MAX_PLAIN_KEY_BYTES);
    let (nul, longer) = (
        encode_key(&[Some("poison\0pill")]),
        encode_key(&[Some(&long)]),
    );
    for key in [&nul, &longer] {
        assert!(key.starts_with('#') && key.len() == 65, "{key}");
        assert!(!key.contains('\0'));
    }
    assert_ne!(nul, encode_key(&[Some("poison\0pilL")]));
    assert_ne!(longer, encode_key(&[Some(&long[1..])]));
    // The same value gives the same key, whether a record or a request draws it.
    assert_eq!(longer, encode_key(&[Some(&long)]));
    let short = encode_key(&[Some(&long[..crate::keys::MAX_PLAIN_KEY_BYTES - 4])]);
    assert!(short.len() <= crate::keys::MAX_PLAIN_KEY_BYTES && !short.starts_with('#'));
}

#[test]
fn bad_specifications_are_refused_with_a_reason() {
    let wrap = |q: serde_json::Value| json!({"version": 1, "queries": [q]}).to_string();
    let base = json!({"name": "x", "kind": "dev.svc.bounty", "path": "/v1/x", "params": [{"name": "a", "type": "string", "required": true}], "filter": [{"op": "eq", "path": "requester", "param": "a"}]});
    QuerySet::load(&wrap(base.clone())).unwrap();
    let mut unused = base.clone();
    unused["filter"] = json!([]);
    assert!(
        QuerySet::load(&wrap(unused))
            .unwrap_err()
            .to_string()
            .contains("parameter a is not used")
    );
    let mut undeclared = base.clone();
    undeclared["filter"] = json!([{"op": "eq", "path": "requester", "param": "b"}, {"op": "eq", "path": "x", "param": "a"}]);
    assert!(
        QuerySet::load(&wrap(undeclared))
            .unwrap_err()
            .to_string()
            .contains("undeclared parameter b")
    );
    let mut reserved = base.clone();
    reserved["params"][0]["name"] = json!("limit");
    assert!(QuerySet::load(&wrap(reserved)).is_err());
    let mut bad_op = base;
    bad_op["filter"] = json!([{"op": "regex", "path": "requester", "param": "a"}]);
    assert!(QuerySet::load(&wrap(bad_op)).is_err());
}

#[test]
fn a_record_is_keyed_under_every_tuple_of_its_values() {
    let spec = json!({"version": 1, "queries": [{
        "name": "x", "kind": "dev.svc.community", "path": "/v1/x",
        "params": [
            {"name": "member", "type": "string", "required": true},
            {"name": "name", "type": "string", "required": false}
        ],
        "filter": [
            {"op": "contains", "path": "members", "param": "member"},
            {"op": "eq_ascii_ci", "path": "name", "param": "name"}
        ]
    }]});
    let set = QuerySet::load(&spec.to_string()).unwrap();
    let q = &set.all()[set.position("x").unwrap()];
    let record = json!({"name": "Geo", "members": ["did:plc:b", "did:plc:a", "did:plc:b"]});
    let mut expected: Vec<String> = [
        [Some("did:plc:a"), None],
        [Some("did:plc:a"), Some("geo")],
        [Some("did:plc:b"), None],
        [Some("did:plc:b"), Some("GEO")],
    ]
    .iter()
    .map(|args| q.lookup_key(args))
    .collect();
    expected.sort();
    assert_eq!(keys_of(q, &record), expected);
    assert_eq!(
        q.lookup_key(&[Some("did:plc:b"), Some("GEO")]),
        encode_key(&[Some("did:plc:b"), Some("geo")])
    );
    assert!(keys_of(q, &json!({"name": "Geo", "members": []})).is_empty());
}

#[test]
fn a_record_with_too_many_values_is_keyed_under_the_first_ones() {
    let q = query("communitiesForMember");
    let members: Vec<String> = (0..5000)
        .rev()
        .map(|i| format!("did:plc:m{i:05}"))
        .collect();
    let keys = keys_of(&q, &json!({"name": "Many", "members": members}));
    let first: Vec<String> = (0..4096)
        .map(|i| q.lookup_key(&[Some(&format!("did:plc:m{i:05}"))]))
        .collect();
    assert_eq!(keys, first);
}

/// The embedded specification with `edit` applied to each query's JSON.
fn edited(edit: impl Fn(&mut serde_json::Value)) -> QuerySet {
    let mut spec: serde_json::Value = serde_json::from_str(EMBEDDED_SPEC).unwrap();
    for query in spec["queries"].as_array_mut().unwrap() {
        edit(query);
    }
    QuerySet::load(&spec.to_string()).unwrap()
}

fn fingerprints(set: &QuerySet) -> Vec<String> {
    set.indexes().all().iter().map(Index::fingerprint).collect()
}

#[test]
fn only_an_index_definition_moves_its_fingerprint() {
    let shipped = fingerprints(&QuerySet::embedded());
    let presented_otherwise = edited(|query| {
        query["description"] = json!("another description");
        query["path"] = json!(format!("/v2{}", query["path"].as_str().unwrap()));
        query["cli"] = json!({"command": "elsewhere"});
        for param in query["params"].as_array_mut().unwrap() {
            param["description"] = json!("another description");
        }
    });
    assert_eq!(fingerprints(&presented_otherwise), shipped);
    let filtered_otherwise = edited(|query| {
        if query["name"] == "openBounties" {
            query["filter"] = json!([{"op": "present", "path": "status"}]);
        }
    });
    let moved: Vec<bool> = fingerprints(&filtered_otherwise)
        .iter()
        .zip(&shipped)
        .map(|(edited, shipped)| edited != shipped)
        .collect();
    assert_eq!(moved.iter().filter(|m| **m).count(), 1);
}
