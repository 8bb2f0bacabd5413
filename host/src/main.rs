//! The `kubewasm` binary.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use kubewasm::cmd::cli::{Cli, Command, LogFormat};
use kubewasm::cmd::{cases, check, push, rbac, render, run, scaffold};
use tracing_subscriber::EnvFilter;

/// `run` reports errors through anyhow; the guest author's commands print `error: ...` and exit
/// with 1.
#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => {
            init_logs(cli.log_format);
            run::command(args).await
        }
        Command::Check {
            module,
            config,
            loading,
        } => {
            init_debug_logs();
            Ok(check::command(&module, config.as_deref(), loading.settings()).await)
        }
        Command::Render {
            module,
            object,
            cache,
            finalize,
            diff,
            backtrace,
            loading,
        } => {
            init_debug_logs();
            let files = (object.as_path(), cache.as_slice());
            let how = (finalize, diff, backtrace);
            Ok(render::command(&module, files, how, loading.settings()).await)
        }
        Command::Rbac {
            config,
            modules,
            name,
            service_account,
            sharded,
        } => {
            init_debug_logs();
            Ok(rbac::command(&config, &modules, name, service_account, sharded).await)
        }
        Command::Push {
            module,
            reference,
            username,
            registries,
        } => {
            init_debug_logs();
            push::command(&module, &reference, username, &registries).await
        }
        Command::Test {
            module,
            cases,
            update,
            backtrace,
            loading,
        } => {
            init_debug_logs();
            let how = (update, backtrace);
            Ok(cases::command(&module, &cases, how, loading.settings()).await)
        }
        Command::New {
            name,
            lang,
            dir,
            sdk,
        } => Ok(scaffold::command(&name, lang, dir, sdk)),
    }
}

/// The host's logs, on stdout.
fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stdout().is_terminal())
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
    }
}

/// Logs on stderr, only when `RUST_LOG` asks for them: stdout is the command's output.
fn init_debug_logs() {
    if let Ok(filter) = EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .init();
    }
}
