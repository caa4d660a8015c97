//! The `svc` command. Errors from every layer become one `error: <message>` line here.

mod cli;
mod serve;

use clap::Parser;

// Ingestion allocates on one thread and frees on another, at high rates; glibc's allocator
// spent a quarter of the import reader's time there. mimalloc handles that pattern well.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // Help and version go to stdout with success; usage errors exit 2.
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { 2 } else { 0 });
        }
    };
    let outcome = match cli.command {
        cli::Command::Serve(args) => serve::run(*args),
        cli::Command::Version => {
            println!("svc {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
