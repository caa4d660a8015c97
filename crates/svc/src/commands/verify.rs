//! `svc verify roundtrip-test | property-test | static-check | coercion-law`: fetch the lens
//! and its schemas once, run the check, print the `dev.svc.verification` record, and exit 0
//! only when it holds (1 falsified or inconclusive, 2 when no verdict could be reached).

use super::identity::RecordFetcher;
use super::record::{create, new_rkey, prepare, session_for};
use super::{RunnerError, UsageError, print_json, progress_bar};
use crate::cli::{LensArgs, VerifyCommand};
use anyhow::Context;
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use svc_atproto::{FetchedRecord, SessionStore, Xrpc};
use svc_lexicon::Lexicons;
use svc_spec::{COERCION_LAW, PROPERTY_TEST, ROUNDTRIP_TEST, STATIC_CHECK, property_of_kind};
use svc_verify::{
    CorpusPlace, CorpusRecord, LensBlob, Protocol, PublishedLens, Roundtrip, SchemaBlob,
    parse_corpus, resolve_protocol, static_check,
};

const LENS_COLLECTION: &str = "dev.panproto.schema.lens";
const VERIFICATION: &str = "dev.svc.verification";
const COERCION_METHOD: svc_atproto::Method =
    svc_atproto::Method("dev.panproto.translate.verifyCoercionLaws");

/// What a runner concluded, and what stderr should say about it.
struct Verdict {
    property: Value,
    result: &'static str,
    notes: Vec<String>,
}

pub async fn run(command: &VerifyCommand) -> anyhow::Result<ExitCode> {
    run_checked(command).await.map_err(|error| {
        if error.is::<UsageError>() {
            error
        } else {
            RunnerError(format!("{error:#}")).into()
        }
    })
}

fn lens_args(command: &VerifyCommand) -> (&LensArgs, &'static str) {
    match command {
        VerifyCommand::RoundtripTest { lens, .. } => (lens, ROUNDTRIP_TEST),
        VerifyCommand::PropertyTest { lens, .. } => (lens, PROPERTY_TEST),
        VerifyCommand::StaticCheck { lens, .. } => (lens, STATIC_CHECK),
        VerifyCommand::CoercionLaw { lens, .. } => (lens, COERCION_LAW),
    }
}

async fn run_checked(command: &VerifyCommand) -> anyhow::Result<ExitCode> {
    let (args, kind) = lens_args(command);
    let verifier = verifier_did(args.verifier_did.as_deref())?;
    check_lens_uri(&args.lens)?;
    let fetcher = RecordFetcher::new(args.pds_url.as_deref())?;
    let (lens, verdict) = check(command, &fetcher).await?;
    report(args, kind, &verifier, &lens, verdict).await
}

/// Runs the command's check: the fetched lens record, and the verdict.
async fn check(
    command: &VerifyCommand,
    fetcher: &RecordFetcher,
) -> anyhow::Result<(FetchedRecord, Verdict)> {
    let (args, kind) = lens_args(command);
    Ok(match command {
        VerifyCommand::RoundtripTest { corpus, .. } => {
            roundtrip_command(fetcher, &args.lens, kind, corpus.as_deref()).await?
        }
        VerifyCommand::PropertyTest { corpus, budget, .. } => {
            property_command(fetcher, &args.lens, kind, corpus, *budget).await?
        }
        VerifyCommand::StaticCheck { protocol, .. } => {
            let supplied = protocol.as_deref().map(read_protocol).transpose()?;
            let published = Published::fetch(fetcher, &args.lens).await?;
            let verdict = static_verdict(&published, supplied.as_ref())?;
            (published.lens, verdict)
        }
        VerifyCommand::CoercionLaw {
            vcs_url,
            standard,
            standard_version,
            violation_threshold,
            ..
        } => {
            let law = CoercionLaw {
                standard,
                version: standard_version.as_deref(),
                threshold: *violation_threshold,
            };
            law.check_flags()?;
            let lens = fetcher.fetch(&args.lens).await?;
            let verdict = law.ask(vcs_url, &args.lens).await?;
            (lens, verdict)
        }
    })
}

/// `roundtrip-test`: one case per corpus record.
async fn roundtrip_command(
    fetcher: &RecordFetcher,
    lens: &str,
    kind: &str,
    corpus: Option<&Path>,
) -> anyhow::Result<(FetchedRecord, Verdict)> {
    let corpus = match corpus {
        Some(path) => read_corpus(path)?,
        None => default_corpus(),
    };
    let property = json!({
        "$type": property_variant(kind)?,
        "domain": format!("corpus of {} record(s)", corpus.len()),
    });
    let published = Published::fetch(fetcher, lens).await?;
    let verdict = roundtrip_test(&published, &corpus, corpus.len() as u64, property)?;
    Ok((published.lens, verdict))
}

/// `property-test`: `budget` cases over the corpus.
async fn property_command(
    fetcher: &RecordFetcher,
    lens: &str,
    kind: &str,
    corpus: &Path,
    budget: u64,
) -> anyhow::Result<(FetchedRecord, Verdict)> {
    if budget == 0 {
        return Err(UsageError("--budget must be at least 1".into()).into());
    }
    let corpus = read_corpus(corpus)?;
    let property = json!({
        "$type": property_variant(kind)?,
        "spec": format!(
            "budget {budget}: case i round-trips corpus record i mod {}",
            corpus.len()
        ),
        "runner": "svc-verify",
    });
    let published = Published::fetch(fetcher, lens).await?;
    let verdict = roundtrip_test(&published, &corpus, budget, property)?;
    Ok((published.lens, verdict))
}

/// Prints the verification record and the verdict's notes, publishes it when asked; the exit
/// status follows the result.
async fn report(
    args: &LensArgs,
    kind: &str,
    verifier: &str,
    lens: &FetchedRecord,
    verdict: Verdict,
) -> anyhow::Result<ExitCode> {
    let record = prepare(
        Lexicons::embedded(),
        VERIFICATION,
        json!({
            "lens": {"uri": lens.uri, "cid": {"$link": lens.cid}},
            "kind": kind,
            "verifier": verifier,
            "tool": {"name": format!("svc-verify/{kind}"), "version": env!("CARGO_PKG_VERSION")},
            "property": verdict.property,
            "result": verdict.result,
            "occurredAt": svc_syntax::format_unix_micros(svc_syntax::now_unix_micros()),
        }),
    )?;
    match print_json(&record) {
        // The verdict stands, and is still published and told by the exit status.
        Err(error) if error.is::<super::StdoutClosed>() => {}
        printed => printed?,
    }
    for note in &verdict.notes {
        eprintln!("{kind}: {note}");
    }
    if args.publish {
        let store = SessionStore::from_env();
        let session = session_for(&store, Some(verifier))?;
        let collection = svc_syntax::Nsid::new(VERIFICATION)?;
        let created = create(&store, session, &collection, &new_rkey(), &record).await?;
        eprintln!("{}", serde_json::to_string(&created)?);
    }
    Ok(if verdict.result == "holds" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--verifier-did`, else the only stored session's DID.
fn verifier_did(flag: Option<&str>) -> anyhow::Result<String> {
    if let Some(did) = flag {
        svc_syntax::check_did(did).map_err(|e| UsageError(format!("--verifier-did {did}: {e}")))?;
        return Ok(did.to_string());
    }
    let sessions = SessionStore::from_env().list()?;
    match sessions.as_slice() {
        [only] => Ok(only.did.clone()),
        [] => Err(UsageError(
            "--verifier-did is required: no session is stored (`svc oauth login`)".into(),
        )
        .into()),
        _ => Err(UsageError(format!(
            "--verifier-did is required: {} sessions are stored",
            sessions.len()
        ))
        .into()),
    }
}

fn check_lens_uri(uri: &str) -> Result<(), UsageError> {
    let parsed =
        svc_syntax::check_at_uri(uri).map_err(|e| UsageError(format!("--lens {uri}: {e}")))?;
    match (parsed.collection, parsed.rkey) {
        (Some(LENS_COLLECTION), Some(_)) => Ok(()),
        _ => Err(UsageError(format!(
            "--lens {uri}: not the at-uri of a {LENS_COLLECTION} record"
        ))),
    }
}

fn read_corpus(path: &Path) -> anyhow::Result<Vec<CorpusRecord>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the corpus {}", path.display()))?;
    let corpus = parse_corpus(&text).with_context(|| path.display().to_string())?;
    if corpus.is_empty() {
        return Err(UsageError(format!("the corpus {} holds no records", path.display())).into());
    }
    Ok(corpus)
}

/// Without `--corpus`, one record of the simplest text shape.
fn default_corpus() -> Vec<CorpusRecord> {
    vec![CorpusRecord {
        place: CorpusPlace {
            index: 0,
            line: None,
        },
        value: json!({"text": ""}),
    }]
}

fn read_protocol(path: &Path) -> anyhow::Result<Protocol> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the protocol {}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        UsageError(format!(
            "--protocol {}: not a panproto Protocol: {e}",
            path.display()
        ))
        .into()
    })
}

/// The lens record and the two schema records it names: three requests in all.
struct Published {
    lens: FetchedRecord,
    source: FetchedRecord,
    target: FetchedRecord,
}

impl Published {
    async fn fetch(fetcher: &RecordFetcher, uri: &str) -> anyhow::Result<Published> {
        let lens = fetcher
            .fetch(uri)
            .await
            .with_context(|| format!("fetching the lens {uri}"))?;
        let source = Self::schema(fetcher, &lens, "sourceSchema").await?;
        let target = Self::schema(fetcher, &lens, "targetSchema").await?;
        Ok(Published {
            lens,
            source,
            target,
        })
    }

    /// The schema record a lens record names in `field`.
    async fn schema(
        fetcher: &RecordFetcher,
        lens: &FetchedRecord,
        field: &str,
    ) -> anyhow::Result<FetchedRecord> {
        let at = lens
            .value
            .get(field)
            .and_then(Value::as_str)
            .with_context(|| format!("the lens record has no {field} at-uri"))?;
        fetcher
            .fetch(at)
            .await
            .with_context(|| format!("fetching the lens's {field} {at}"))
    }
}

/// Misfit notes are capped: a corpus of another schema would otherwise flood stderr.
const MISFIT_NOTES: usize = 10;

/// How many corpus records do not fit the source schema, and a note for each of the first few.
fn misfit_notes(roundtrip: &Roundtrip, corpus: &[CorpusRecord]) -> (usize, Vec<String>) {
    let mut count = 0;
    let mut notes = Vec::new();
    for record in corpus {
        let found = roundtrip.misfits(&record.value);
        if found.is_empty() {
            continue;
        }
        count += 1;
        if count <= MISFIT_NOTES {
            notes.push(format!(
                "{} does not fit the source schema: {}",
                record.place,
                found.join("; ")
            ));
        }
    }
    if count > MISFIT_NOTES {
        notes.push(format!(
            "... and {} more such record(s)",
            count - MISFIT_NOTES
        ));
    }
    (count, notes)
}

/// Runs `cases` round trips, case i on `corpus[i mod len]`.
fn roundtrip_test(
    published: &Published,
    corpus: &[CorpusRecord],
    cases: u64,
    property: Value,
) -> anyhow::Result<Verdict> {
    if corpus.is_empty() {
        return Err(UsageError("the corpus holds no records".into()).into());
    }
    let source = SchemaBlob::decode(&published.source.value, "source")?;
    let target = SchemaBlob::decode(&published.target.value, "target")?;
    // A protocol not known here changes nothing of a round trip: instances are the schema's.
    let protocol = resolve_protocol(&source.protocol, None).unwrap_or_default();
    let roundtrip = Roundtrip::new(
        &LensBlob::from_record(&published.lens.value)?,
        &source,
        &target,
        &protocol,
    )?;
    let checked = corpus
        .len()
        .min(usize::try_from(cases).unwrap_or(usize::MAX));
    let (misfit_records, mut notes) = misfit_notes(&roundtrip, &corpus[..checked]);
    let (ran, falsified) = run_cases(&roundtrip, corpus, cases)?;
    notes.insert(
        0,
        format!(
            "{ran} of {cases} case(s) run over {} corpus record(s)",
            corpus.len()
        ),
    );
    let result = match falsified {
        Some(reason) => {
            notes.insert(1, reason);
            "falsified"
        }
        None if misfit_records > 0 => {
            notes.push(format!(
                "inconclusive: {misfit_records} corpus record(s) are outside the lens's source schema"
            ));
            "inconclusive"
        }
        None => "holds",
    };
    Ok(Verdict {
        property,
        result,
        notes,
    })
}

/// Runs the cases until one falsifies the round trip: how many ran, and what falsified it.
fn run_cases(
    roundtrip: &Roundtrip,
    corpus: &[CorpusRecord],
    cases: u64,
) -> anyhow::Result<(u64, Option<String>)> {
    let progress = Progress::new(cases);
    let mut falsified = None;
    let mut ran = 0;
    for case in 0..cases {
        let record = &corpus[(case % corpus.len() as u64) as usize];
        ran += 1;
        if let Some(difference) = roundtrip.check(record.place, &record.value)? {
            falsified = Some(format!(
                "falsified by {} (case {case}): {difference}",
                record.place
            ));
            break;
        }
        progress.tick(ran);
    }
    progress.finish();
    Ok((ran, falsified))
}

fn property_variant(kind: &str) -> anyhow::Result<&'static str> {
    property_of_kind(kind).with_context(|| format!("no lensProperty variant for {kind}"))
}

fn static_verdict(published: &Published, supplied: Option<&Protocol>) -> anyhow::Result<Verdict> {
    let report = static_check(
        PublishedLens {
            lens: &published.lens.value,
            source: &published.source.value,
            target: &published.target.value,
        },
        supplied,
    )?;
    Ok(Verdict {
        property: json!({
            "$type": property_variant(STATIC_CHECK)?,
            "checker": "svc-verify/static-check",
            "ruleset": "derived target schema digest, objectHash, protocol validation",
            "version": env!("CARGO_PKG_VERSION"),
        }),
        result: report.result(),
        notes: report.failures.into_iter().chain(report.unknowns).collect(),
    })
}

struct CoercionLaw<'a> {
    standard: &'a str,
    version: Option<&'a str>,
    threshold: Option<u64>,
}

impl CoercionLaw<'_> {
    /// The lexicon's limits, checked before anything is sent.
    fn check_flags(&self) -> Result<(), UsageError> {
        if self.standard.is_empty() || self.standard.chars().count() > 256 {
            return Err(UsageError(
                "--standard must have 1 to 256 characters".into(),
            ));
        }
        if self.version.is_some_and(|v| v.chars().count() > 64) {
            return Err(UsageError(
                "--version must have at most 64 characters".into(),
            ));
        }
        if self.threshold.is_some_and(|t| t > i64::MAX as u64) {
            return Err(UsageError("--violation-threshold is too large".into()));
        }
        Ok(())
    }

    async fn ask(&self, vcs_url: &str, lens: &str) -> anyhow::Result<Verdict> {
        let mut input = json!({"lens": lens, "standard": self.standard});
        let mut property = json!({
            "$type": property_variant(COERCION_LAW)?,
            "standard": self.standard,
        });
        if let Some(version) = self.version {
            input["version"] = json!(version);
            property["version"] = json!(version);
        }
        if let Some(threshold) = self.threshold {
            property["violationThreshold"] = json!(threshold);
        }
        let answer = Xrpc::new(super::http()?)
            .procedure(vcs_url, COERCION_METHOD, &input, None)
            .await?;
        let violations = answer
            .get("violations")
            .and_then(Value::as_array)
            .with_context(|| format!("{vcs_url}: the answer has no violations array"))?;
        let allowed = self.threshold.unwrap_or(0);
        let mut notes = Vec::new();
        if let Some(first) = violations.first() {
            notes.push(format!(
                "{} violation(s) ({allowed} tolerated); the first: {first}",
                violations.len()
            ));
        }
        Ok(Verdict {
            property,
            result: if violations.len() as u64 > allowed {
                "falsified"
            } else {
                "holds"
            },
            notes,
        })
    }
}

/// A progress bar that appears on a terminal only once a run has taken a second.
struct Progress {
    total: u64,
    started: Instant,
    bar: std::cell::OnceCell<indicatif::ProgressBar>,
}

impl Progress {
    fn new(total: u64) -> Progress {
        Progress {
            total,
            started: Instant::now(),
            bar: std::cell::OnceCell::new(),
        }
    }

    fn tick(&self, done: u64) {
        if let Some(bar) = self.bar.get() {
            bar.set_position(done);
        } else if done.is_multiple_of(256) && self.started.elapsed() > Duration::from_secs(1) {
            let bar = progress_bar(
                "{msg} [{bar:40}] {pos}/{len} cases, eta {eta}",
                "round trips".into(),
            );
            bar.set_length(self.total);
            bar.set_position(done);
            let _ = self.bar.set(bar);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
    }
}
