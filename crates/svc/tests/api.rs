//! The HTTP API of a running `svc serve`, over a catalog imported from a JSON Lines file.

use svc_testkit as common;

use common::*;
use serde_json::json;
use std::collections::HashMap;

struct Fixture {
    _dir: tempfile::TempDir,
    db: String,
    server: Server,
    uris: HashMap<&'static str, String>,
}

impl Fixture {
    fn uri(&self, name: &str) -> String {
        self.uris
            .get(name)
            .unwrap_or_else(|| panic!("no fixture {name}"))
            .clone()
    }
    fn sorted(&self, names: &[&str]) -> Vec<String> {
        let mut uris: Vec<String> = names.iter().map(|n| self.uri(n)).collect();
        uris.sort();
        uris
    }
}

fn fixture(backend: Backend) -> Option<Fixture> {
    let dir = tempfile::tempdir().unwrap();
    let db = backend.fresh_db(dir.path())?;
    let mut e = Events::new();
    let mut uris = HashMap::new();
    let (a, b) = ("did:plc:alice", "did:plc:bob");
    let mut put = |name: &'static str, did: &str, collection: &str, rkey: &str, record| {
        let uri = e.put(did, collection, rkey, "3kaaaaaaaaaa2", record);
        uris.insert(name, uri);
    };
    put(
        "b_open",
        a,
        "dev.svc.bounty",
        "3kb0000000001",
        bounty(a, want_lens(&schema(1), &schema(2)), Some("open")),
    );
    put(
        "b_claimed",
        b,
        "dev.svc.bounty",
        "3kb0000000002",
        bounty(b, want_lens(&schema(1), &schema(2)), Some("claimed")),
    );
    put(
        "b_unset",
        a,
        "dev.svc.bounty",
        "3kb0000000003",
        bounty(a, want_lens(&schema(1), &schema(3)), None),
    );
    put(
        "b_fulfilled",
        a,
        "dev.svc.bounty",
        "3kb0000000004",
        bounty(a, want_lens(&schema(1), &schema(2)), Some("fulfilled")),
    );
    put(
        "b_adapter",
        b,
        "dev.svc.bounty",
        "3kb0000000005",
        bounty(
            b,
            json!({"$type": "dev.svc.bounty#wantAdapter", "framework": "serde"}),
            None,
        ),
    );
    put(
        "a_serde",
        a,
        "dev.svc.adapter",
        "3ka0000000001",
        adapter("serde", "subprocess", Some(&lens(1))),
    );
    put(
        "a_Serde",
        b,
        "dev.svc.adapter",
        "3ka0000000002",
        adapter("Serde", "http", None),
    );
    put(
        "a_zod",
        a,
        "dev.svc.adapter",
        "3ka0000000003",
        adapter("zod", "wasm", None),
    );
    put(
        "r_one",
        a,
        "dev.svc.recommendation",
        "3kr0000000001",
        recommendation(&[&schema(1)], &[&lens(1)]),
    );
    put(
        "r_two",
        b,
        "dev.svc.recommendation",
        "3kr0000000002",
        recommendation(&[&schema(2)], &[&lens(2), &lens(1)]),
    );
    put(
        "v_rt_holds",
        a,
        "dev.svc.verification",
        "3kv0000000001",
        verification(
            json!({"uri": lens(1)}),
            "roundtrip-test",
            "lpRoundtrip",
            "holds",
        ),
    );
    put(
        "v_pt_false",
        b,
        "dev.svc.verification",
        "3kv0000000002",
        verification(
            json!({"uri": lens(1)}),
            "property-test",
            "lpGenerator",
            "falsified",
        ),
    );
    put(
        "v_other_lens",
        a,
        "dev.svc.verification",
        "3kv0000000003",
        verification(
            json!({"uri": lens(2)}),
            "formal-proof",
            "lpTheorem",
            "holds",
        ),
    );
    put(
        "v_cid_only",
        a,
        "dev.svc.verification",
        "3kv0000000004",
        verification(json!({"cid": CID}), "static-check", "lpChecker", "holds"),
    );
    put(
        "c_guild",
        "did:plc:guild",
        "dev.svc.community",
        "1",
        community("Lens Guild", &[a, b]),
    );
    put(
        "c_other",
        "did:plc:other",
        "dev.svc.community",
        "1",
        community("Schema Circle", &[b]),
    );
    put(
        "d_one",
        a,
        "dev.svc.dialect",
        "3kd0000000001",
        dialect("at://did:plc:guild/dev.svc.community/1", "guild-json"),
    );
    put(
        "d_two",
        b,
        "dev.svc.dialect",
        "3kd0000000002",
        dialect("at://did:plc:other/dev.svc.community/1", "circle"),
    );
    put(
        "bel_held",
        a,
        "dev.svc.belief",
        "3ke0000000001",
        belief("at://did:plc:alice/dev.svc.bounty/3kb0000000001", Some(b)),
    );
    put(
        "bel_unheld",
        b,
        "dev.svc.belief",
        "3ke0000000002",
        belief("at://did:plc:alice/dev.svc.bounty/3kb0000000001", None),
    );
    put(
        "voc_open",
        a,
        "dev.svc.vocab",
        "3kc0000000001",
        vocab("Colors", "open"),
    );
    put(
        "voc_closed",
        b,
        "dev.svc.vocab",
        "3kc0000000002",
        vocab("colors", "closed-with-default"),
    );
    let path = e.write(&dir.path().join("events.jsonl"));
    let server = Server::start(&db, &["--import", path.to_str().unwrap()]);
    Some(Fixture {
        _dir: dir,
        db,
        server,
        uris,
    })
}

each_backend!(
    every_query_answers_at_both_paths_with_its_filter,
    bad_parameters_are_400_with_a_json_body_naming_them,
    paging_by_limit_offset_and_cursor,
    unknown_paths_and_methods_answer_json,
    sufficiency_counts_holding_verifications_per_kind,
    stats_health_readiness_metrics_openapi_and_cors,
    list_answers_are_gzipped_for_clients_that_accept_it,
    concurrent_misses_on_one_key_share_one_build,
    without_the_cache_every_answer_is_built_and_goes_out_plain,
);

fn every_query_answers_at_both_paths_with_its_filter(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let s = &f.server;
    let cases: Vec<(&str, &str, String, Vec<&str>)> = vec![
        (
            "/v1/bounties/open",
            "openBounties",
            String::new(),
            vec!["b_open", "b_claimed", "b_unset", "b_adapter"],
        ),
        (
            "/v1/bounties/want-lens",
            "bountiesForWantLens",
            format!("source_uri={}&target_uri={}", schema(1), schema(2)),
            vec!["b_open", "b_claimed"],
        ),
        (
            "/v1/bounties/by-requester",
            "bountiesByRequester",
            "requester_did=did:plc:alice".into(),
            vec!["b_open", "b_unset", "b_fulfilled"],
        ),
        (
            "/v1/adapters",
            "adaptersForFramework",
            "framework=SERDE".into(),
            vec!["a_serde", "a_Serde"],
        ),
        (
            "/v1/adapters/by-invocation-protocol",
            "adaptersByInvocationProtocol",
            "kind=wasm".into(),
            vec!["a_zod"],
        ),
        (
            "/v1/adapters/with-verification",
            "adaptersWithVerification",
            String::new(),
            vec!["a_serde"],
        ),
        (
            "/v1/recommendations",
            "recommendationsStartingFrom",
            String::new(),
            vec!["r_one", "r_two"],
        ),
        (
            "/v1/recommendations",
            "recommendationsStartingFrom",
            format!("source_uri={}", schema(2)),
            vec!["r_two"],
        ),
        (
            "/v1/verifications",
            "verificationsForLens",
            format!("lens_uri={}", lens(1)),
            vec!["v_rt_holds", "v_pt_false"],
        ),
        (
            "/v1/verifications/by-kind",
            "verificationsByKind",
            "kind=static-check".into(),
            vec!["v_cid_only"],
        ),
        (
            "/v1/communities",
            "communitiesForMember",
            "member_did=did:plc:bob".into(),
            vec!["c_guild", "c_other"],
        ),
        (
            "/v1/communities/by-name",
            "communitiesByName",
            "name=lens%20guild".into(),
            vec!["c_guild"],
        ),
        (
            "/v1/dialects/for-community",
            "dialectsForCommunity",
            "community_uri=at://did:plc:guild/dev.svc.community/1".into(),
            vec!["d_one"],
        ),
        (
            "/v1/beliefs/about",
            "beliefsAboutRecord",
            "subject_uri=at://did:plc:alice/dev.svc.bounty/3kb0000000001".into(),
            vec!["bel_held", "bel_unheld"],
        ),
        (
            "/v1/beliefs/by-holder",
            "beliefsByHolder",
            "holder_did=did:plc:bob".into(),
            vec!["bel_held"],
        ),
        (
            "/v1/vocabularies/by-world",
            "vocabulariesWithWorld",
            "world=open".into(),
            vec!["voc_open"],
        ),
        (
            "/v1/vocabularies/by-name",
            "vocabulariesByName",
            "name=colors".into(),
            vec!["voc_closed"],
        ),
    ];
    for (rest, name, query, expected) in cases {
        let rest_answer = s.get(&format!("{rest}?{query}"));
        let xrpc_answer = s.get(&format!("/xrpc/dev.svc.query.{name}?{query}"));
        assert_eq!(
            rest_answer, xrpc_answer,
            "{name} differs between its two paths"
        );
        assert_eq!(
            s.uris(&format!("{rest}?{query}")),
            f.sorted(&expected),
            "{name}?{query}"
        );
        let first = &rest_answer.1["items"][0];
        assert_eq!(
            first["record"]["$type"]
                .as_str()
                .map(|t| t.starts_with("dev.svc.")),
            Some(true)
        );
        assert!(first["author"].as_str().unwrap().starts_with("did:"));
        assert_eq!(first["rev"], "3kaaaaaaaaaa2");
        assert_eq!(
            (
                rest_answer.1["limit"].as_u64(),
                rest_answer.1["offset"].as_u64()
            ),
            (Some(100), Some(0))
        );
    }
    // Nothing matches: an empty page, not an error.
    assert!(s.uris("/v1/vocabularies/by-name?name=COLORS").is_empty());
    assert!(
        s.uris(&format!("/v1/verifications?lens_uri={}", lens(7)))
            .is_empty()
    );
}

fn bad_parameters_are_400_with_a_json_body_naming_them(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let cases = [
        ("/v1/bounties/by-requester", "requester_did"),
        (
            "/v1/bounties/by-requester?requester_did=alice",
            "requester_did",
        ),
        (
            "/v1/bounties/want-lens?source_uri=at://did:plc:a/dev.svc.x/1",
            "target_uri",
        ),
        (
            "/v1/bounties/want-lens?source_uri=http://x&target_uri=at://did:plc:a/dev.svc.x/1",
            "source_uri",
        ),
        ("/v1/adapters", "framework"),
        ("/v1/adapters/by-invocation-protocol?kind=grpc", "kind"),
        ("/v1/verifications?lens_uri=lens", "lens_uri"),
        ("/v1/verifications/by-kind?kind=vibe-check", "kind"),
        ("/v1/vocabularies/by-world?world=closed", "world"),
        ("/v1/recommendations?source_uri=nope", "source_uri"),
        ("/v1/bounties/open?limit=0", "limit"),
        ("/v1/bounties/open?limit=1001", "limit"),
        ("/v1/bounties/open?limit=-1", "limit"),
        ("/v1/bounties/open?limit=abc", "limit"),
        ("/v1/bounties/open?limit=2.5", "limit"),
        ("/v1/bounties/open?offset=-3", "offset"),
        ("/v1/bounties/open?offset=x", "offset"),
        ("/v1/bounties/open?cursor=garbage", "cursor"),
        // A misspelt filter is named with the nearest one the query takes, not ignored.
        (
            "/v1/recommendations?source_url=at://did:plc:a/dev.svc.x/1",
            "did you mean source_uri",
        ),
        (
            "/xrpc/dev.svc.query.openBounties?limt=5",
            "did you mean limit",
        ),
        ("/v1/bounties/open?%zz=1", "%zz"),
        (
            "/xrpc/dev.svc.query.bountiesByRequester?requester_did=",
            "requester_did",
        ),
        (
            "/v1/verifications/sufficient?kinds=roundtrip-test",
            "lens_uri",
        ),
        (
            "/v1/verifications/sufficient?lens_uri=at://did:plc:a/x.y.z/1",
            "kinds",
        ),
        (
            "/v1/verifications/sufficient?lens_uri=at://did:plc:a/x.y.z/1&kinds=roundtrip-test,vibes",
            "vibes",
        ),
        (
            "/v1/verifications/sufficient?lens_uri=at://did:plc:a/x.y.z/1&kinds=roundtrip-test&hold=yes",
            "hold",
        ),
    ];
    for (path, named) in cases {
        let (status, content_type, body) = f.server.get_raw(path);
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(content_type, "application/json", "{path}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], "invalid_request", "{path}");
        assert!(
            body["message"].as_str().unwrap().contains(named),
            "{path}: {body}"
        );
    }
}

fn paging_by_limit_offset_and_cursor(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let s = &f.server;
    let all = s.uris("/v1/bounties/open");
    assert_eq!(all.len(), 4);
    let (_, page) = s.get("/v1/bounties/open?limit=3&offset=1");
    let items: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        items,
        all[1..4].iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(
        (
            page["total"].as_u64(),
            page["limit"].as_u64(),
            page["offset"].as_u64()
        ),
        (Some(4), Some(3), Some(1))
    );
    assert!(page.get("cursor").is_none(), "no cursor on the last page");
    let (_, beyond) = s.get("/v1/bounties/open?offset=4");
    assert_eq!(
        (
            beyond["items"].as_array().unwrap().len(),
            beyond["total"].as_u64()
        ),
        (0, Some(4))
    );
    let (_, far) = s.get("/v1/bounties/open?offset=18446744073709551615");
    assert_eq!(far["items"].as_array().unwrap().len(), 0);
    let (_, max) = s.get("/v1/bounties/open?limit=1000");
    assert_eq!(max["limit"], 1000);
    // Keyset paging visits every item once, in order, and the last page has no cursor.
    let mut seen = Vec::new();
    let mut next = String::from("/v1/bounties/open?limit=1");
    loop {
        let (status, page) = s.get(&next);
        assert_eq!(status, 200);
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["uri"].as_str().unwrap().to_string()),
        );
        match page.get("cursor").and_then(|c| c.as_str()) {
            Some(cursor) => next = format!("/v1/bounties/open?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, all);
    let (_, first) = s.get("/v1/bounties/open?limit=1");
    let cursor = first["cursor"].as_str().unwrap();
    // `offset=0` beside a cursor is the default spelled out; any other offset is refused.
    let (status, with_zero) = s.get(&format!(
        "/v1/bounties/open?limit=1&cursor={cursor}&offset=0"
    ));
    assert_eq!(status, 200, "{with_zero}");
    assert_eq!(with_zero["items"][0]["uri"].as_str(), Some(all[1].as_str()));
    let (status, body) = s.get(&format!(
        "/v1/bounties/open?limit=1&cursor={cursor}&offset=1"
    ));
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request"))
    );
    // Paging parameters work on every list endpoint, with other parameters.
    let (_, by_requester) =
        s.get("/v1/bounties/by-requester?requester_did=did:plc:alice&limit=1&offset=2");
    assert_eq!(
        (
            by_requester["items"].as_array().unwrap().len(),
            by_requester["total"].as_u64()
        ),
        (1, Some(3))
    );
    // A parameter the query does not take is refused, not ignored.
    assert_eq!(s.get("/v1/bounties/open?colour=blue").0, 400);
}

fn unknown_paths_and_methods_answer_json(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let (status, content_type, body) = f.server.get_raw("/v2/nothing");
    assert_eq!((status, content_type.as_str()), (404, "application/json"));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"],
        "not_found"
    );
    let client = common::http().clone();
    for method in [
        reqwest::Method::POST,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
    ] {
        let response = client
            .request(method.clone(), format!("{}/v1/bounties/open", f.server.url))
            .send()
            .unwrap();
        assert_eq!(response.status(), 405, "{method}");
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: serde_json::Value = response.json().unwrap();
        assert_eq!(body["error"], "method_not_allowed");
    }
}

fn sufficiency_counts_holding_verifications_per_kind(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let ask = |query: &str| {
        f.server.get(&format!(
            "/v1/verifications/sufficient?lens_uri={}&{query}",
            lens(1)
        ))
    };
    let (status, body) = ask("kinds=roundtrip-test");
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"sufficient": true, "required_kinds": ["roundtrip-test"], "require_holds": true})
    );
    // The property-test verification was falsified: not sufficient unless hold=false.
    assert_eq!(
        ask("kinds=roundtrip-test,%20property-test").1["sufficient"],
        false
    );
    let (_, lenient) = ask("kinds=roundtrip-test,property-test&hold=false");
    assert_eq!(
        lenient,
        json!({"sufficient": true, "required_kinds": ["roundtrip-test", "property-test"], "require_holds": false})
    );
    assert_eq!(
        ask("kinds=formal-proof").1["sufficient"],
        false,
        "that proof is about another lens"
    );
    assert_eq!(
        ask("kinds=,,").1,
        json!({"sufficient": true, "required_kinds": [], "require_holds": true})
    );
    let alias = f.server.get(&format!(
        "/xrpc/dev.svc.query.verificationsSufficient?lens_uri={}&kinds=roundtrip-test",
        lens(1)
    ));
    assert_eq!(alias, ask("kinds=roundtrip-test"));
}

fn stats_health_readiness_metrics_openapi_and_cors(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let s = &f.server;
    let (_, stats) = s.get("/v1/stats");
    for (name, n) in [
        ("bounties", 5),
        ("adapters", 3),
        ("recommendations", 2),
        ("verifications", 4),
        ("communities", 2),
        ("dialects", 2),
        ("beliefs", 2),
        ("vocabularies", 2),
        ("encounters", 0),
        ("deliberationVotes", 0),
        ("lenses", 0),
        ("schemas", 0),
        ("total", 22),
    ] {
        assert_eq!(stats[name], n, "{name}");
    }
    assert_eq!(stats.as_object().unwrap().len(), 23);
    assert_eq!(
        s.get_raw("/healthz"),
        (200, "text/plain; charset=utf-8".into(), "ok\n".into())
    );
    assert_eq!(s.get_raw("/readyz").2, "ready\n");
    assert_eq!(s.get_raw("/v1/bounties/open?limit=0").0, 400);
    assert_eq!(s.get_raw("/no/such/route").0, 404);
    let (_, content_type, metrics) = s.get_raw("/metrics");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert!(metrics.contains("# TYPE svc_ingest_events_total counter\n"));
    assert!(!metrics.contains("# EOF"));
    let openmetrics = common::http()
        .get(format!("{}/metrics", s.url))
        .header(
            "Accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )
        .send()
        .unwrap();
    assert_eq!(
        openmetrics.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(openmetrics.text().unwrap().ends_with("# EOF\n"));
    for line in [
        "svc_orchestrator_ready 1",
        "svc_orchestrator_catalog_records{kind=\"bounty\"} 5",
        "svc_orchestrator_catalog_records{kind=\"encounter\"} 0",
        "svc_orchestrator_catalog_total 22",
        "svc_ingest_events_total{source=\"import\",outcome=\"applied\"} 22",
        "svc_http_requests_total{route=\"/v1/bounties/open\",status=\"400\"} 1",
        "svc_http_requests_total{route=\"unmatched\",status=\"404\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line}:\n{metrics}"
        );
    }
    assert!(metrics.contains("svc_http_request_duration_seconds_bucket{"));
    let (_, openapi) = s.get("/openapi.json");
    assert_eq!(openapi["openapi"], "3.2.0");
    let paths = openapi["paths"].as_object().unwrap();
    for path in [
        "/v1/bounties/open",
        "/xrpc/dev.svc.query.vocabulariesByName",
        "/v1/verifications/sufficient",
        "/v1/stats",
        "/v1/changes/open",
        "/xrpc/dev.svc.query.federationsForPeer",
        "/v1/routes",
        "/xrpc/dev.svc.query.routes",
        "/v1/lenses/between",
    ] {
        assert!(paths.contains_key(path), "{path}");
    }
    // The 28 list queries, the sufficiency question, search and routes.
    assert_eq!(
        paths
            .keys()
            .filter(|p| p.starts_with("/xrpc/dev.svc.query."))
            .count(),
        31
    );
    // The change stream follows a query by its name: one of the 28, nothing else.
    let follows = &paths["/v1/changes"]["get"]["parameters"][0];
    assert_eq!(follows["name"], "query");
    let names = follows["schema"]["enum"]
        .as_array()
        .expect("the query names");
    assert_eq!(names.len(), 28);
    assert!(names.contains(&serde_json::json!("openBounties")));
    let response = common::http()
        .clone()
        .get(format!("{}/v1/stats", s.url))
        .header("Origin", "https://example.org")
        .send()
        .unwrap();
    assert_eq!(response.headers()["access-control-allow-origin"], "*");
}

fn list_answers_are_gzipped_for_clients_that_accept_it(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let s = &f.server;
    let url = format!("{}/v1/bounties/open", s.url);
    let (_, _, plain) = s.get_raw("/v1/bounties/open");
    assert!(plain.len() > 1024, "a long enough answer: {}", plain.len());
    let fetch = |accept: Option<&str>| {
        let mut request = common::http().get(&url);
        if let Some(accept) = accept {
            request = request.header("accept-encoding", accept);
        }
        let response = request.send().unwrap();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        let (encoding, vary) = (header("content-encoding"), header("vary"));
        (encoding, vary, response.bytes().unwrap().to_vec())
    };
    // Twice: the first answer fills the cache, the second comes from it.
    for _ in 0..2 {
        let (encoding, vary, body) = fetch(Some("br, gzip;q=0.8"));
        assert_eq!(encoding.as_deref(), Some("gzip"));
        assert_eq!(vary.as_deref(), Some("accept-encoding"));
        let mut inflated = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut inflated)
            .unwrap();
        assert_eq!(inflated, plain);
        assert!(body.len() < plain.len() / 2);
    }
    for accept in [None, Some("gzip;q=0"), Some("br")] {
        let (encoding, vary, body) = fetch(accept);
        assert_eq!(encoding, None, "{accept:?}");
        assert_eq!(vary.as_deref(), Some("accept-encoding"));
        assert_eq!(String::from_utf8(body).unwrap(), plain);
    }
    // Short answers stay plain whatever the client accepts.
    let short = format!(
        "{}/v1/vocabularies/by-name?name=nothing-by-this-name",
        s.url
    );
    let response = common::http()
        .get(short)
        .header("accept-encoding", "gzip")
        .send()
        .unwrap();
    assert!(response.headers().get("content-encoding").is_none());
    assert_eq!(response.json::<serde_json::Value>().unwrap()["total"], 0);
}

fn answers_metric(s: &Server, outcome: &str) -> u64 {
    let metrics = s.get_raw("/metrics").2;
    let prefix = format!("svc_http_answers_total{{outcome=\"{outcome}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in:\n{metrics}"))
        .parse()
        .unwrap()
}

fn concurrent_misses_on_one_key_share_one_build(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let s = &f.server;
    let before: Vec<u64> = ["hit", "built", "shared"]
        .iter()
        .map(|o| answers_metric(s, o))
        .collect();
    let path = "/v1/bounties/open?limit=2&offset=1";
    let clients = 16;
    let barrier = std::sync::Barrier::new(clients);
    let url = format!("{}{path}", s.url);
    let answers: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    let response = common::http().get(&url).send().unwrap();
                    (response.status().as_u16(), response.text().unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
    assert_eq!(answers[0].0, 200);
    let page: serde_json::Value = serde_json::from_str(&answers[0].1).unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    let after: Vec<u64> = ["hit", "built", "shared"]
        .iter()
        .map(|o| answers_metric(s, o))
        .collect();
    assert_eq!(after[1] - before[1], 1, "one build for {clients} requests");
    assert_eq!(
        (after[0] - before[0]) + (after[2] - before[2]),
        clients as u64 - 1,
        "the others were served by it"
    );
}

fn without_the_cache_every_answer_is_built_and_goes_out_plain(backend: Backend) {
    let Some(f) = fixture(backend) else { return };
    let uncached = Server::start(&f.db, &["--no-indexer", "--cache-mb", "0"]);
    for path in [
        "/v1/bounties/open",
        "/v1/bounties/open?limit=2&offset=1",
        "/v1/verifications/sufficient?lens_uri=at://did:plc:x/dev.panproto.schema.lens/1&kinds=roundtrip-test",
        "/v1/stats",
    ] {
        assert_eq!(uncached.get_raw(path), f.server.get_raw(path), "{path}");
    }
    let (_, _, plain) = uncached.get_raw("/v1/bounties/open");
    assert!(plain.len() > 1024);
    let built = answers_metric(&uncached, "built");
    for _ in 0..3 {
        let response = common::http()
            .get(format!("{}/v1/bounties/open", uncached.url))
            .header("accept-encoding", "gzip")
            .send()
            .unwrap();
        assert!(response.headers().get("content-encoding").is_none());
        assert_eq!(response.text().unwrap(), plain);
    }
    assert_eq!(answers_metric(&uncached, "built"), built + 3);
    assert_eq!(answers_metric(&uncached, "hit"), 0);
    assert_eq!(answers_metric(&uncached, "shared"), 0);
}
