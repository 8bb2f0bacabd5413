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
        /// Where compiled modules are kept across restarts; default:
        /// $XDG_CACHE_HOME/kubewasm/compiled or ~/.cache/kubewasm/compiled. Must be writable
        /// by the host alone: its files are loaded as native code.
        #[arg(long)]
        compile_cache_dir: Option<PathBuf>,
        /// Compiles every module at start-up and reload instead of using the compile cache.
        #[arg(long, conflicts_with = "compile_cache_dir")]
        no_compile_cache: bool,
        /// Does not watch module files: a changed module is picked up only by a restart.
        #[arg(long)]
        no_reload: bool,
    },
    /// Checks that a module loads as the host loads it (a component of the supported contract
    /// version with a valid declaration), prints what it declares and the permissions it needs
    /// and, with --config, whether its entry's grants give them. Exits non-zero otherwise.
    Check {
        /// The module (.wasm component).
        module: PathBuf,
        /// A host configuration; the module's entry is found by path, else by name.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Runs one reconcile of an object against fixture objects, without a cluster, and prints
    /// as YAML the writes the guest asked for, its log lines and the result. Deterministic:
    /// the guest's wall clock is stopped at 2026-01-01T00:00:00Z and its random sources seeded.
    Render {
        /// The module (.wasm component).
        module: PathBuf,
        /// A YAML file holding the object to reconcile.
        #[arg(long)]
        object: PathBuf,
        /// YAML files (several documents each) or folders of them: what the host's cache holds.
        #[arg(long, num_args = 1..)]
        cache: Vec<PathBuf>,
        /// Calls finalize instead of reconcile, as the host does once the object is being
        /// deleted.
        #[arg(long)]
        finalize: bool,
    },
    /// Creates a Rust guest crate from the template guest (only Rust guests so far).
    New {
        /// The controller's name: lowercase letters, digits and '-'.
        name: String,
        /// Where to create the crate; default: ./NAME.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The Rust guest SDK (guests/rust of a kubewasm checkout); default: the one this
        /// binary was built from.
        #[arg(long)]
        sdk: Option<PathBuf>,
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
