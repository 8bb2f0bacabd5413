//! The `kubewasm` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cluster::leader::LeaseTimings;
use crate::cluster::selector::{is_dns1123_label, is_dns1123_subdomain};
use crate::cmd::scaffold::Language;
pub use crate::config::BindAddress;
use crate::config::{ManagerConfig, parse_duration, parse_quantity};
use crate::control::queue::Lanes;
use crate::wasm::compile_cache::CompileCache;
use crate::wasm::oci::RegistrySettings;

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
    Run(RunArgs),
    /// Checks that a module loads as the host loads it (a component of the supported contract
    /// version with a valid declaration), prints what it declares and the permissions it needs
    /// and, with --config, whether its entry's grants give them. Exits non-zero otherwise.
    Check {
        /// The module: a .wasm file, or an OCI reference (registry/repository:tag or @digest)
        /// pulled as the host pulls it.
        module: String,
        /// A host configuration; the module's entry is found by path, else by name.
        #[arg(long)]
        config: Option<PathBuf>,
        /// How the module is pulled and where it is kept compiled.
        #[command(flatten)]
        loading: LoadArgs,
    },
    /// Runs one reconcile of an object against fixture objects, without a cluster, and prints
    /// as YAML the writes the guest asked for, its log lines and the result. Deterministic:
    /// the guest's wall clock is stopped at 2026-01-01T00:00:00Z and its random sources seeded.
    Render {
        /// The module: a .wasm file, or an OCI reference pulled as the host pulls it.
        module: String,
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
        /// Prints, instead of the writes, what each did to the objects of the cache: whether
        /// it creates, changes, leaves unchanged or deletes its object, or is refused, and each
        /// field it changes with its value before and after.
        #[arg(long)]
        diff: bool,
        /// Keeps the wasm backtrace in the message of a trap (the trap alone otherwise).
        #[arg(long)]
        backtrace: bool,
        /// How the module is pulled and where it is kept compiled.
        #[command(flatten)]
        loading: LoadArgs,
    },
    /// Runs test cases against a module: each case file (YAML: the object, the cache around
    /// it, whether to finalize, and what to expect of the writes, logs and result that
    /// `render` prints) is one call through the host's own call path. Prints one line per case
    /// and a diff per failure; exits non-zero unless every case passed.
    Test {
        /// The module: a .wasm file, or an OCI reference pulled as the host pulls it.
        module: String,
        /// Case files, or folders of them (.yaml and .yml).
        #[arg(required = true)]
        cases: Vec<PathBuf>,
        /// Writes what each call renders into its case's `expect` instead of comparing.
        #[arg(long)]
        update: bool,
        /// Keeps the wasm backtrace in the message of a trap (the trap alone otherwise).
        #[arg(long)]
        backtrace: bool,
        /// How the module is pulled and where it is kept compiled.
        #[command(flatten)]
        loading: LoadArgs,
    },
    /// Publishes a module to an OCI registry as a WebAssembly artifact (config
    /// application/vnd.wasm.config.v0+json, one application/wasm layer) and prints the
    /// reference pinned to its digest. Refuses a file that is not a component exporting the
    /// contract. Credentials: --username with the password on standard input, else the
    /// `auths` of $DOCKER_CONFIG/config.json or ~/.docker/config.json, else none.
    Push {
        /// The module (.wasm component).
        module: PathBuf,
        /// Where to publish it: registry/repository:tag.
        reference: String,
        /// The registry user; the password is read from standard input.
        #[arg(long)]
        username: Option<String>,
        /// How registries are reached.
        #[command(flatten)]
        registries: RegistryArgs,
    },
    /// Prints, as YAML, the RBAC the host's service account needs to run a configuration's
    /// modules and nothing more: a ClusterRole, plus a Role and RoleBinding in each namespace
    /// that modules are restricted to. Exits non-zero if a module does not load or is not
    /// granted what it declares.
    Rbac {
        /// The host configuration.
        #[arg(long)]
        config: PathBuf,
        /// The module files, when the configuration's paths are where the host will find them
        /// rather than here; each is matched to its entry as `check` does (by path, else by
        /// name). Default: the configuration's paths.
        modules: Vec<PathBuf>,
        /// Name of the ClusterRole and of every Role and RoleBinding.
        #[arg(long, default_value = "kubewasm")]
        name: String,
        /// The host's ServiceAccount, as NAMESPACE/NAME, bound by the RoleBindings.
        #[arg(long, default_value = "kubewasm-system/kubewasm", value_parser = service_account)]
        service_account: (String, String),
        /// For hosts run with `--sharded`: also `patch` on the guests' primary and owned kinds,
        /// where the shard labels are written.
        #[arg(long)]
        sharded: bool,
    },
    /// Creates a guest project from the template guest of its language: a Rust crate, or a
    /// JavaScript, Python or Go project whose `build` writes dist/NAME.wasm.
    New {
        /// The controller's name: lowercase letters, digits and '-'.
        name: String,
        /// The project's language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: Language,
        /// Where to create the project; default: ./NAME.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The language's guest SDK (guests/<language> of a kubewasm checkout); default: the one
        /// this binary was built from.
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
}

/// How `check`, `render` and `test` pull a module and where they keep it compiled.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// How registries are reached.
    #[command(flatten)]
    pub registries: RegistryArgs,
    /// Where compiled modules are kept.
    #[command(flatten)]
    pub compiled: CompileArgs,
}

impl LoadArgs {
    /// The registries' settings and the compile cache's folder, if any.
    pub fn settings(&self) -> (RegistrySettings, Option<PathBuf>) {
        (self.registries.settings(), self.compiled.cache_dir())
    }
}

/// Where `check` and `render` keep compiled modules, so that a module checked or rendered
/// before loads in a fraction of a second.
#[derive(Debug, Clone, Args)]
pub struct CompileArgs {
    /// Where compiled modules are kept across runs; default, as the host's:
    /// $XDG_CACHE_HOME/kubewasm/compiled or ~/.cache/kubewasm/compiled. Must be writable by
    /// the user alone: its files are loaded as native code.
    #[arg(long)]
    pub compile_cache_dir: Option<PathBuf>,
    /// Compiles the module on every run instead of using the compile cache.
    #[arg(long, conflicts_with = "compile_cache_dir")]
    pub no_compile_cache: bool,
}

impl CompileArgs {
    /// The compile cache's folder: `None` without one.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_compile_cache {
            return None;
        }
        (self.compile_cache_dir.clone()).or_else(CompileCache::default_dir)
    }
}

/// How the commands reach registries.
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// A registry (HOST or HOST:PORT) spoken to in plain HTTP; loopback ones always are.
    /// Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure: Vec<String>,
    /// The largest module accepted from a registry, such as 256Mi.
    #[arg(long, default_value = "256Mi", value_parser = parse_quantity)]
    pub max_module_size: u64,
}

impl RegistryArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> RegistrySettings {
        RegistrySettings {
            insecure: self.insecure.clone(),
            max_module_bytes: self.max_module_size,
        }
    }
}

fn service_account(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((namespace, name)) if is_dns1123_label(namespace) && is_dns1123_subdomain(name) => {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(format!("{text:?} is not NAMESPACE/NAME")),
    }
}

/// The arguments of `kubewasm run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The host configuration (YAML).
    #[arg(long)]
    pub config: PathBuf,
    /// A kubeconfig file; without it, $KUBECONFIG, the in-cluster service account (token and
    /// CA under /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST and
    /// _PORT) or ~/.kube/config, in that order.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Where compiled modules are kept across restarts; default:
    /// $XDG_CACHE_HOME/kubewasm/compiled or ~/.cache/kubewasm/compiled. Must be writable
    /// by the host alone: its files are loaded as native code.
    #[arg(long)]
    pub compile_cache_dir: Option<PathBuf>,
    /// Where modules pulled from registries are kept, by digest, so that a reload, a rollback
    /// or a restart does not pull them again; default: $XDG_CACHE_HOME/kubewasm/modules or
    /// ~/.cache/kubewasm/modules.
    #[arg(long)]
    pub module_store_dir: Option<PathBuf>,
    /// The most the module store holds (a quantity: 2Gi); past it, the modules read least
    /// recently that no WasmController or revision names are removed.
    #[arg(long, value_parser = parse_quantity, default_value = "2Gi")]
    pub module_store_size: u64,
    /// The most the compile cache holds (a quantity: 4Gi), bounded as the module store.
    #[arg(long, value_parser = parse_quantity, default_value = "4Gi")]
    pub compile_cache_size: u64,
    /// Compiles every module at start-up and reload instead of using the compile cache.
    #[arg(long, conflicts_with = "compile_cache_dir")]
    pub no_compile_cache: bool,
    /// Does not watch module files: a changed module is picked up only by a restart.
    #[arg(long)]
    pub no_reload: bool,
    /// Where /metrics and /status are served: HOST:PORT, :PORT for every interface, or 0
    /// to serve neither. Default: the configuration's `metrics.bindAddress`, else
    /// 127.0.0.1:8080.
    #[arg(long)]
    pub metrics_bind_address: Option<BindAddress>,
    /// Where /healthz and /readyz are served: HOST:PORT, :PORT for every interface, or 0
    /// to serve neither; may equal the metrics address. Default: the configuration's
    /// `health.healthProbeBindAddress`, else 127.0.0.1:8081.
    #[arg(long)]
    pub health_probe_bind_address: Option<BindAddress>,
    /// Reconciles only while holding a coordination.k8s.io/v1 Lease, so that one replica
    /// of several reconciles; the others wait as standbys and take over when it stops.
    /// Default: the configuration's `leaderElection.leaderElect`, else false.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub leader_elect: Option<bool>,
    /// The Lease's namespace. Default: the configuration's
    /// `leaderElection.resourceNamespace`, else the in-cluster service account's
    /// namespace, else `default`.
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// The Lease's name. Default: the configuration's `leaderElection.resourceName`, else
    /// `kubewasm-leader`.
    #[arg(long)]
    pub leader_election_id: Option<String>,
    /// How long a Lease record stays valid without renewal, such as 15s: how long a standby
    /// waits before it takes over from a leader that stopped renewing. Default: the
    /// configuration's `leaderElection.leaseDuration`, else 15s.
    #[arg(long, value_parser = parse_duration)]
    pub leader_elect_lease_duration: Option<Duration>,
    /// How long the leader keeps trying to renew before it stops reconciling, such as 10s;
    /// shorter than the lease duration. Default: `leaderElection.renewDeadline`, else 10s.
    #[arg(long, value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Option<Duration>,
    /// How often candidates try to take the Lease and the leader renews it, such as 2s.
    /// Default: `leaderElection.retryPeriod`, else 2s.
    #[arg(long, value_parser = parse_duration)]
    pub leader_elect_retry_period: Option<Duration>,
    /// Shares the keys of every guest among the replicas started with --sharded and the same
    /// Lease: each holds a membership Lease `<leader-election-id>-<member>` and reconciles the
    /// objects labelled `shard.kubewasm.dev/<guest>=<member>`; the leader assigns them by
    /// consistent hashing and moves them, drained first, as replicas come and go. Implies
    /// --leader-elect.
    #[arg(long)]
    pub sharded: bool,
    /// The CPUs the guests' reconciles share: while a change waits for a worker or runs, the
    /// backlog keeps fewer reconciles in flight than these. Default: the CPUs this process may
    /// run on (its affinity and cgroup quota).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub cpus: Option<u16>,
}

/// The process settings of `kubewasm run`: each from its flag, else from the configuration
/// file, else its default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manager {
    /// Where /metrics and /status are served, if anywhere.
    pub metrics_bind_address: Option<SocketAddr>,
    /// Where /healthz and /readyz are served, if anywhere.
    pub health_probe_bind_address: Option<SocketAddr>,
    /// Whether to reconcile only while leading.
    pub leader_elect: bool,
    /// The Lease's namespace; `None`: the service account's namespace, else `default`.
    pub leader_election_namespace: Option<String>,
    /// The Lease's name.
    pub leader_election_id: String,
    /// The Lease's timings.
    pub lease: LeaseTimings,
    /// Whether the replicas share the keys (see [`RunArgs::sharded`]).
    pub sharded: bool,
    /// The CPUs the guests' reconciles share (see [`RunArgs::cpus`]).
    pub cpus: usize,
}

/// Default of `--metrics-bind-address`: loopback, as controller-runtime's.
pub const DEFAULT_METRICS_BIND_ADDRESS: &str = "127.0.0.1:8080";
/// Default of `--health-probe-bind-address`.
pub const DEFAULT_HEALTH_PROBE_BIND_ADDRESS: &str = "127.0.0.1:8081";
/// Default of `--leader-election-id`.
pub const DEFAULT_LEADER_ELECTION_ID: &str = "kubewasm-leader";

impl RunArgs {
    /// The process settings, with the flags winning over `file`; an error if the Lease's
    /// timings break client-go's rules.
    pub fn manager(&self, file: &ManagerConfig) -> Result<Manager, String> {
        let address = |flag: Option<BindAddress>, file: Option<BindAddress>, default: &str| {
            flag.or(file)
                .unwrap_or_else(|| default.parse().expect("default addresses parse"))
                .0
        };
        let defaults = LeaseTimings::default();
        let lease = LeaseTimings {
            lease_duration: self
                .leader_elect_lease_duration
                .or(file.lease_duration)
                .unwrap_or(defaults.lease_duration),
            renew_deadline: self
                .leader_elect_renew_deadline
                .or(file.renew_deadline)
                .unwrap_or(defaults.renew_deadline),
            retry_period: self
                .leader_elect_retry_period
                .or(file.retry_period)
                .unwrap_or(defaults.retry_period),
        };
        lease.validate()?;
        Ok(Manager {
            metrics_bind_address: address(
                self.metrics_bind_address,
                file.metrics_bind_address,
                DEFAULT_METRICS_BIND_ADDRESS,
            ),
            health_probe_bind_address: address(
                self.health_probe_bind_address,
                file.health_probe_bind_address,
                DEFAULT_HEALTH_PROBE_BIND_ADDRESS,
            ),
            leader_elect: self.sharded || self.leader_elect.or(file.leader_elect).unwrap_or(false),
            leader_election_namespace: self
                .leader_election_namespace
                .clone()
                .or_else(|| file.leader_election_namespace.clone()),
            leader_election_id: self
                .leader_election_id
                .clone()
                .or_else(|| file.leader_election_id.clone())
                .unwrap_or_else(|| DEFAULT_LEADER_ELECTION_ID.to_owned()),
            lease,
            sharded: self.sharded,
            cpus: self.cpus.map_or_else(Lanes::host_cpus, usize::from),
        })
    }
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

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

    fn manager(args: &[&str], file: &str) -> Result<Manager, String> {
        let cli = Cli::try_parse_from(["kubewasm", "run", "--config", "c.yaml"].iter().chain(args))
            .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run");
        };
        let config = Config::from_yaml(
            &format!("modules: [{{path: a.wasm}}]\n{file}"),
            std::path::Path::new(""),
        )
        .unwrap();
        run.manager(&config.manager)
    }

    #[test]
    fn run_settings_come_from_flags_then_the_file_then_defaults() {
        let defaults = manager(&[], "").unwrap();
        assert_eq!(
            defaults,
            Manager {
                metrics_bind_address: Some("127.0.0.1:8080".parse().unwrap()),
                health_probe_bind_address: Some("127.0.0.1:8081".parse().unwrap()),
                leader_elect: false,
                leader_election_namespace: None,
                leader_election_id: "kubewasm-leader".into(),
                lease: LeaseTimings::default(),
                sharded: false,
                cpus: Lanes::host_cpus(),
            }
        );
        let file = "metrics: {bindAddress: ':9090'}
health: {healthProbeBindAddress: '0'}
leaderElection: {leaderElect: true, resourceNamespace: ops, resourceName: lease,
  leaseDuration: 1m, renewDeadline: 40s, retryPeriod: 5s}
";
        let from_file = manager(&[], file).unwrap();
        assert_eq!(
            from_file,
            Manager {
                metrics_bind_address: Some("0.0.0.0:9090".parse().unwrap()),
                health_probe_bind_address: None,
                leader_elect: true,
                leader_election_namespace: Some("ops".into()),
                leader_election_id: "lease".into(),
                lease: LeaseTimings {
                    lease_duration: Duration::from_secs(60),
                    renew_deadline: Duration::from_secs(40),
                    retry_period: Duration::from_secs(5),
                },
                sharded: false,
                cpus: Lanes::host_cpus(),
            }
        );
        let flags = [
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            ":8081",
            "--leader-elect=false",
            "--leader-election-namespace",
            "other",
            "--leader-election-id",
            "mine",
            "--leader-elect-lease-duration",
            "8s",
            "--leader-elect-renew-deadline",
            "6s",
            "--leader-elect-retry-period",
            "1.5s",
            "--cpus",
            "8",
        ];
        assert_eq!(
            manager(&flags, file).unwrap(),
            Manager {
                metrics_bind_address: None,
                health_probe_bind_address: Some("0.0.0.0:8081".parse().unwrap()),
                leader_elect: false,
                leader_election_namespace: Some("other".into()),
                leader_election_id: "mine".into(),
                lease: LeaseTimings {
                    lease_duration: Duration::from_secs(8),
                    renew_deadline: Duration::from_secs(6),
                    retry_period: Duration::from_millis(1500),
                },
                sharded: false,
                cpus: 8,
            }
        );
        assert!(manager(&["--leader-elect"], "").unwrap().leader_elect);
        let zero = Cli::try_parse_from(["kubewasm", "run", "--config", "c", "--cpus", "0"]);
        assert!(zero.is_err(), "a host has one CPU at least");
    }

    #[test]
    fn lease_timings_follow_client_go_rules() {
        // The leader must give up before a standby may take over, and retry within the deadline.
        let error = manager(&["--leader-elect-renew-deadline", "15s"], "").unwrap_err();
        assert!(
            error.contains("lease duration 15s must be longer than the renew deadline 15s"),
            "{error}"
        );
        let error = manager(&["--leader-elect-retry-period", "9s"], "").unwrap_err();
        assert!(
            error.contains("renew deadline 10s must be longer than 1.2 times the retry period 9s"),
            "{error}"
        );
        assert!(
            Cli::try_parse_from([
                "kubewasm",
                "run",
                "--config",
                "c",
                "--leader-elect-retry-period",
                "2"
            ])
            .is_err(),
            "a duration has a unit"
        );
    }
}
