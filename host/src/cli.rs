//! The `kubewasm` command line.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Runs Kubernetes controllers written as WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "kubewasm", version)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs the controllers of a configuration file against a cluster until SIGTERM or SIGINT.
    Run {
        /// The host configuration (YAML).
        #[arg(long)]
        config: PathBuf,
        /// A kubeconfig file; without it, $KUBECONFIG, ~/.kube/config or the in-cluster
        /// service account are used, in that order.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
    },
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}
