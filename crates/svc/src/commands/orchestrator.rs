//! `svc orchestrator ...`: subcommands and flags generated from the query specification, so a
//! query added there is reachable here without code. Several queries may share a subcommand
//! (`bounties`, `bounties --requester_did`): the flags given pick the query.

use super::{UsageError, print_json};
use anyhow::Context;
use clap::{Arg, ArgMatches, Command};
use std::collections::BTreeMap;
use svc_spec::ParamType;
use svc_spec::{Query, QuerySet};

/// The largest answer of a catalog read: a page of 1,000 records of 150 KiB each (the most the
/// reference PDS takes) fits, and a server cannot make the command hold more.
const MAX_ANSWER_BYTES: usize = 256 << 20;

fn command_name(query: &Query) -> String {
    query
        .def()
        .cli
        .as_ref()
        .map(|c| c.command.clone())
        .unwrap_or_else(|| query.name().to_string())
}

/// Queries by subcommand, in specification order.
fn by_command(queries: &QuerySet) -> BTreeMap<String, Vec<&Query>> {
    let mut map: BTreeMap<String, Vec<&Query>> = BTreeMap::new();
    for (_, query) in queries.public() {
        map.entry(command_name(query)).or_default().push(query);
    }
    map
}

/// The `orchestrator` subcommands of a specification, and `watch` with the same ones.
pub fn subcommands(orchestrator: Command, queries: &QuerySet) -> Command {
    let mut orchestrator = orchestrator
        .subcommand(Command::new("stats").about("Record counts per kind (GET /v1/stats)"))
        .subcommand(sufficiency_command())
        .subcommand(search_command())
        .subcommand(route_command());
    let mut watch = Command::new("watch")
        .about(
            "Follow changes as they happen (GET /v1/changes): every record's, or a \
             subcommand's answer's; one JSON line per message, resuming after a dropped \
             connection, until Ctrl-C",
        )
        .arg(Arg::new("cursor").long("cursor").global(true).help(
            "Start after this change (the `seq` of the last message held); default: from now",
        ));
    for (name, group) in by_command(queries) {
        watch = watch.subcommand(query_command(&name, &group, false));
        orchestrator = orchestrator.subcommand(query_command(&name, &group, true));
    }
    orchestrator.subcommand(watch)
}

/// One subcommand of a group of queries, with each parameter as a flag (and the paging flags
/// when `paging`).
fn query_command(name: &str, group: &[&Query], paging: bool) -> Command {
    let about: Vec<String> = group
        .iter()
        .map(|q| format!("{} (GET {})", q.def().description, q.def().path))
        .collect();
    let mut command = Command::new(name.to_string()).about(about.join("; "));
    let mut seen = Vec::new();
    for query in group {
        for param in query.params() {
            if seen.contains(&param.name) {
                continue;
            }
            seen.push(param.name.clone());
            // Written kebab-case, as every other flag is; the parameter's own name is taken too.
            let kebab = param.name.replace('_', "-");
            let mut arg = Arg::new(param.name.clone())
                .long(kebab.clone())
                .help(param.description.clone());
            if kebab != param.name {
                arg = arg.alias(param.name.clone());
            }
            if param.param_type == ParamType::Enum {
                arg = arg.value_parser(clap::builder::PossibleValuesParser::new(
                    param.values.clone().unwrap_or_default(),
                ));
            }
            command = command.arg(arg);
        }
    }
    if paging {
        for (name, help) in svc_spec::paging_parameters() {
            command = command.arg(Arg::new(name).long(name).help(help));
        }
    }
    command
}

/// The query the given flags ask for: every flag is one of its parameters and every required
/// parameter is given; the one using most of the flags wins.
fn pick<'q>(group: &[&'q Query], given: &[&str]) -> Option<&'q Query> {
    group
        .iter()
        .copied()
        .filter(|q| {
            given
                .iter()
                .all(|g| q.params().iter().any(|p| p.name == *g))
                && q.params()
                    .iter()
                    .filter(|p| p.required)
                    .all(|p| given.contains(&p.name.as_str()))
        })
        .max_by_key(|q| std::cmp::Reverse(q.params().len() - given.len()))
}

pub async fn run(base_url: &str, queries: &QuerySet, matches: &ArgMatches) -> anyhow::Result<()> {
    let Some((name, sub)) = matches.subcommand() else {
        return Err(
            UsageError("a subcommand is required; see `svc help orchestrator`".into()).into(),
        );
    };
    if name == "watch" {
        return watch(base_url, queries, sub).await;
    }
    let (path, mut pairs) = match name {
        "stats" => ("/v1/stats".to_string(), Vec::new()),
        "sufficiency" => (
            "/v1/verifications/sufficient".to_string(),
            given_pairs(sub, &["lens_uri", "kinds", "hold"]),
        ),
        "search" => ("/v1/search".to_string(), given_pairs(sub, &["q", "kind"])),
        "route" => (
            "/v1/routes".to_string(),
            given_pairs(sub, &["from", "to", "max_hops", "kinds"]),
        ),
        _ => query_request(queries, name, sub)?,
    };
    for (name, _) in svc_spec::paging_parameters() {
        if let Some(value) = matches
            .subcommand()
            .and_then(|(_, sub)| sub.try_get_one::<String>(name).ok().flatten())
        {
            pairs.push((name.to_string(), value.clone()));
        }
    }
    let body = get_json(base_url, &path, &pairs).await?;
    print_json(&body)
}

/// `sufficiency`: whether a lens has verifications of the kinds asked for.
fn sufficiency_command() -> Command {
    Command::new("sufficiency")
        .about(
            "Whether a lens has a verification that holds (or any, with --hold false) of each kind asked for (GET /v1/verifications/sufficient)",
        )
        .arg(
            Arg::new("lens_uri")
                .long("lens-uri")
                .alias("lens_uri")
                .required(true)
                .help("AT-URI of the lens."),
        )
        .arg(
            Arg::new("kinds")
                .long("kinds")
                .required(true)
                .help("Verification kinds, comma-separated (roundtrip-test,property-test,...)."),
        )
        .arg(
            Arg::new("hold")
                .long("hold")
                .value_parser(["true", "false"])
                .help("Count only verifications that hold (default true)."),
        )
}

/// The flags among `names` that were given, as query parameters.
fn given_pairs(matches: &ArgMatches, names: &[&str]) -> Vec<(String, String)> {
    names
        .iter()
        .filter_map(|name| {
            let value = matches.get_one::<String>(name)?;
            Some((name.to_string(), value.clone()))
        })
        .collect()
}

/// `search`: the records whose words match a query.
fn search_command() -> Command {
    Command::new("search")
        .about(
            "Records whose words match TEXT: words in any order, any case, accents or not; \"a phrase\" in double quotes; the last word also as a word's start; best match first (GET /v1/search)",
        )
        .arg(
            Arg::new("q")
                .value_name("TEXT")
                .required(true)
                .help("The words to find (1 to 256 characters)."),
        )
        .arg(
            Arg::new("kind")
                .long("kind")
                .help("Only records of this kind: its NSID or its name (vocab, bounty...)."),
        )
        .arg(Arg::new("limit").long("limit").help("Records per page (1-1000)."))
        .arg(
            Arg::new("cursor")
                .long("cursor")
                .help("The `cursor` of a previous answer: the page after it."),
        )
}

/// `route`: the best chains of lenses from one schema to another.
fn route_command() -> Command {
    Command::new("route")
        .about(
            "The best chains of lenses from one schema to another, each hop with its lens, round-trip class and verifications (GET /v1/routes)",
        )
        .arg(
            Arg::new("from")
                .long("from")
                .required(true)
                .help("AT-URI of the schema the records are in."),
        )
        .arg(
            Arg::new("to")
                .long("to")
                .required(true)
                .help("AT-URI of the schema they should reach."),
        )
        .arg(
            Arg::new("max_hops")
                .long("max-hops")
                .alias("max_hops")
                .help("Lenses a chain may take (1-6, default 4)."),
        )
        .arg(Arg::new("kinds").long("kinds").help(
            "Verification kinds each lens must have one holding verification of, comma-separated.",
        ))
        .arg(Arg::new("limit").long("limit").help("Chains listed (1-100, default 10)."))
}

/// `watch`: the subscription the flags ask for (a query and its parameters, or nothing for
/// every record), from `--cursor`.
async fn watch(base_url: &str, queries: &QuerySet, matches: &ArgMatches) -> anyhow::Result<()> {
    let cursor = match matches.get_one::<String>("cursor") {
        None => None,
        Some(text) => Some(
            text.parse::<i64>()
                .ok()
                .filter(|c| *c >= 0)
                .ok_or_else(|| UsageError(format!("--cursor: a change's number, not {text:?}")))?,
        ),
    };
    let mut pairs = Vec::new();
    if let Some((name, sub)) = matches.subcommand() {
        let (query, params) = picked_query(queries, name, sub)?;
        pairs.push(("query".to_string(), query.name().to_string()));
        pairs.extend(params);
    }
    super::watch::run(base_url, pairs, cursor).await
}

/// The path of the query a subcommand's flags pick, and the flags as its parameters.
fn query_request(
    queries: &QuerySet,
    name: &str,
    sub: &ArgMatches,
) -> anyhow::Result<(String, Vec<(String, String)>)> {
    let (query, pairs) = picked_query(queries, name, sub)?;
    Ok((query.def().path.clone(), pairs))
}

/// The query a subcommand's flags pick, and the flags as its parameters.
fn picked_query<'q>(
    queries: &'q QuerySet,
    name: &str,
    sub: &ArgMatches,
) -> anyhow::Result<(&'q Query, Vec<(String, String)>)> {
    let groups = by_command(queries);
    let group = groups
        .get(name)
        .with_context(|| format!("unknown subcommand {name}"))?;
    let mut given = Vec::new();
    let mut pairs = Vec::new();
    for query in group {
        for param in query.params() {
            if let Some(value) = sub.get_one::<String>(&param.name)
                && !given.contains(&param.name.as_str())
            {
                given.push(param.name.as_str());
                pairs.push((param.name.clone(), value.clone()));
            }
        }
    }
    let Some(query) = pick(group, &given) else {
        return Err(no_query_matches(name, group).into());
    };
    Ok((query, pairs))
}

/// The refusal of flags that pick no query, with the forms that would.
fn no_query_matches(name: &str, group: &[&Query]) -> UsageError {
    let forms: Vec<String> = group
        .iter()
        .map(|q| {
            let flags: Vec<String> = q
                .params()
                .iter()
                .filter(|p| p.required)
                .map(|p| format!("--{} <{}>", p.name, p.name.to_uppercase()))
                .collect();
            format!("svc orchestrator {name} {}", flags.join(" "))
                .trim_end()
                .to_string()
        })
        .collect();
    UsageError(format!(
        "these flags match no query; use one of: {}",
        forms.join(" | ")
    ))
}

/// The service's JSON answer to a GET; its error, as the service words it, when refused.
async fn get_json(
    base_url: &str,
    path: &str,
    pairs: &[(String, String)],
) -> anyhow::Result<serde_json::Value> {
    let url = svc_atproto::Url::parse_with_params(
        &format!("{}{path}", base_url.trim_end_matches('/')),
        pairs,
    )
    .map_err(|e| UsageError(format!("--url {base_url}: {e}")))?;
    let sent = super::http()?.get(url.clone()).send().await;
    answer_json(base_url, &url, sent).await
}

/// The JSON a running `svc serve` answered at `url`; its JSON error, named, when it refused.
pub(crate) async fn answer_json(
    base_url: &str,
    url: &svc_atproto::Url,
    sent: Result<reqwest::Response, reqwest::Error>,
) -> anyhow::Result<serde_json::Value> {
    let response = sent.map_err(|e| {
        anyhow::anyhow!(
            "cannot reach {base_url}: {}",
            svc_atproto::transport_failure(url.as_str(), e)
        )
    })?;
    let status = response.status();
    let text =
        svc_atproto::read_body(url.as_str(), response, "svc answer", MAX_ANSWER_BYTES).await?;
    let body: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{url}: the answer is not JSON"))?;
    if !status.is_success() {
        // The service's JSON error names what is wrong; say that, not the raw body.
        let said = |field| body.get(field).and_then(serde_json::Value::as_str);
        match (said("error"), said("message")) {
            (Some(code), Some(message)) => {
                anyhow::bail!("{} {code}: {message}", status.as_u16())
            }
            _ => anyhow::bail!("{} {body}", status.as_u16()),
        }
    }
    Ok(body)
}
