//! The `kubewasm` command line.

use std::net::{AddrParseError, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

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
        /// Where /metrics and /status are served: HOST:PORT, :PORT for every interface, or 0
        /// to serve neither.
        #[arg(long, default_value = "127.0.0.1:8080")]
        metrics_bind_address: BindAddress,
        /// Where /healthz and /readyz are served: HOST:PORT, :PORT for every interface, or 0
        /// to serve neither. May equal --metrics-bind-address.
        #[arg(long, default_value = "127.0.0.1:8081")]
        health_probe_bind_address: BindAddress,
        /// Reconciles only while holding a coordination.k8s.io/v1 Lease, so that one replica
        /// of several reconciles; the others wait as standbys and take over when it stops.
        #[arg(long)]
        leader_elect: bool,
        /// The Lease's namespace; default: the in-cluster service account's namespace, else
        /// `default`.
        #[arg(long)]
        leader_election_namespace: Option<String>,
        /// The Lease's name.
        #[arg(long, default_value = "kubewasm-leader")]
        leader_election_id: String,
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

/// An address to listen on, or none (`0`). `:PORT` means every IPv4 interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

impl FromStr for BindAddress {
    type Err = AddrParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "0" {
            return Ok(Self(None));
        }
        let address = match text.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}").parse(),
            None => text.parse(),
        };
        address.map(|a| Self(Some(a)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_follow_controller_runtime() {
        let parse = |text: &str| {
            text.parse::<BindAddress>()
                .map(|a| a.0.map(|a| a.to_string()))
        };
        assert_eq!(parse("0"), Ok(None));
        assert_eq!(parse(":8080"), Ok(Some("0.0.0.0:8080".into())));
        assert_eq!(parse("127.0.0.1:9"), Ok(Some("127.0.0.1:9".into())));
        assert_eq!(parse("[::1]:9"), Ok(Some("[::1]:9".into())));
        assert!(parse("localhost").is_err());
    }

    #[test]
    fn run_serves_on_the_default_addresses() {
        let cli = Cli::try_parse_from(["kubewasm", "run", "--config", "c.yaml"]).unwrap();
        let Command::Run {
            metrics_bind_address,
            health_probe_bind_address,
            leader_elect,
            leader_election_namespace,
            leader_election_id,
            ..
        } = cli.command
        else {
            panic!("not run");
        };
        assert_eq!(
            metrics_bind_address.0,
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            health_probe_bind_address.0,
            Some("127.0.0.1:8081".parse().unwrap())
        );
        assert!(!leader_elect);
        assert_eq!(leader_election_namespace, None);
        assert_eq!(leader_election_id, "kubewasm-leader");
    }
}
