//! The `svc` command. Errors from every layer become one `error: <message>` line here; usage
//! errors exit 2, failures 1. A reader of standard output that goes away (`svc ... | head`)
//! ends the command quietly, with 0.

mod admin_password;
mod cli;
mod commands;
mod listening;
mod loading;
mod process;
mod roles;
mod serve;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use commands::{RunnerError, StdoutClosed, UsageError, block_on};
use std::process::ExitCode;
use svc_spec::QuerySet;

// Ingestion allocates on one thread and frees on another, at high rates; glibc's allocator
// spent a quarter of the import reader's time there. mimalloc handles that pattern well.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The whole command tree, with `orchestrator` filled from the query specification.
fn command(queries: &QuerySet) -> clap::Command {
    cli::Cli::command().mut_subcommand("orchestrator", |o| {
        commands::orchestrator::subcommands(o, queries)
    })
}

fn run(queries: &QuerySet) -> anyhow::Result<ExitCode> {
    let matches = match command(queries).try_get_matches() {
        Ok(matches) => matches,
        Err(error) => {
            // Help and version go to stdout with success; usage errors exit 2.
            let _ = error.print();
            std::process::exit(if error.use_stderr() { 2 } else { 0 });
        }
    };
    let url_before_command = matches
        .try_get_one::<String>(cli::URL_BEFORE_COMMAND)
        .ok()
        .flatten();
    if let Some(("orchestrator", sub)) = matches.subcommand() {
        let url = service_url(sub, url_before_command);
        return block_on(commands::orchestrator::run(&url, queries, sub))
            .map(|()| ExitCode::SUCCESS);
    }
    let cli = parsed(&matches, url_before_command)?;
    let done = |outcome: anyhow::Result<()>| outcome.map(|()| ExitCode::SUCCESS);
    match cli.command {
        // The one command whose exit status says more than success or failure.
        cli::Command::Verify(command) => block_on(commands::verify::run(&command)),
        cli::Command::Serve(args) => done(serve::run(*args, queries)),
        cli::Command::Resolve { did } => done(block_on(commands::identity::resolve(&did))),
        cli::Command::Fetch { uri } => done(block_on(commands::identity::fetch(&uri))),
        cli::Command::Oauth(cli::OauthCommand::Login {
            handle,
            app_password,
            pds_url,
        }) => done(block_on(commands::oauth::login(
            &handle,
            app_password,
            pds_url,
        ))),
        cli::Command::Oauth(cli::OauthCommand::List) => done(commands::oauth::list()),
        cli::Command::Oauth(cli::OauthCommand::Logout { did }) => {
            done(commands::oauth::logout(&did))
        }
        cli::Command::Publish(args) => done(block_on(commands::publish::publish(&args))),
        cli::Command::Admin(command) => done(block_on(commands::admin::run(&command))),
        cli::Command::Encounter(cli::EncounterCommand::Record(args)) => {
            done(block_on(commands::encounter::record(&args)))
        }
        cli::Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command(queries), "svc", &mut script);
            done(commands::print_bytes(&script))
        }
        cli::Command::Orchestrator(_) => Ok(ExitCode::SUCCESS),
        cli::Command::Version => done(commands::print_bytes(
            format!("svc {}\n", env!("CARGO_PKG_VERSION")).as_bytes(),
        )),
    }
}

/// The command line as parsed, `svc admin`'s address settled as `service_url` says; `--url`
/// before any other command is a usage error.
fn parsed(matches: &clap::ArgMatches, url_before: Option<&String>) -> anyhow::Result<cli::Cli> {
    let admin_leaf = match matches.subcommand() {
        Some(("admin", admin)) => admin.subcommand().map(|(_, leaf)| leaf),
        _ => None,
    };
    if url_before.is_some() && admin_leaf.is_none() {
        return Err(UsageError(
            "--url is an option of the commands that ask a running svc: `svc orchestrator` and `svc admin`".into(),
        )
        .into());
    }
    let mut cli = cli::Cli::from_arg_matches(matches).map_err(|e| UsageError(e.to_string()))?;
    if let (cli::Command::Admin(command), Some(leaf)) = (&mut cli.command, admin_leaf) {
        command.access_mut().url = service_url(leaf, url_before);
    }
    Ok(cli)
}

/// The running svc a command asks: `--url` after the command (or its subcommand) first, then
/// before it, then `SVC_URL` and the default.
fn service_url(sub: &clap::ArgMatches, before_command: Option<&String>) -> String {
    let given_after = sub.value_source("url") == Some(ValueSource::CommandLine);
    match (given_after, before_command) {
        (false, Some(before)) => Some(before),
        _ => sub.try_get_one::<String>("url").ok().flatten(),
    }
    .cloned()
    .unwrap_or_else(|| cli::DEFAULT_URL.to_string())
}

fn main() -> ExitCode {
    // The orchestrator's subcommands follow the same specification as the server's routes
    // (`SVC_SPEC` names another file).
    let queries = match std::env::var_os("SVC_SPEC") {
        Some(path) => match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| QuerySet::load(&t).map_err(|e| e.to_string()))
        {
            Ok(queries) => queries,
            Err(error) => {
                eprintln!(
                    "error: SVC_SPEC {}: {error}",
                    std::path::Path::new(&path).display()
                );
                return ExitCode::from(2);
            }
        },
        None => QuerySet::embedded(),
    };
    match run(&queries) {
        Ok(code) => code,
        Err(error) if error.is::<StdoutClosed>() => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            let usage_or_no_verdict = error.is::<UsageError>() || error.is::<RunnerError>();
            ExitCode::from(if usage_or_no_verdict { 2 } else { 1 })
        }
    }
}
