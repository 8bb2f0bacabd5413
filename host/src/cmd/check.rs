//! Checking a module before running it: it loads as the host loads it (a component of the
//! supported contract version whose declaration is valid), what it declares, the permissions it
//! needs and, given a configuration, whether the grants of its entry give them and what its
//! cache drops.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use kube::api::GroupVersionKind;

use crate::cluster::selection::Selection;
use crate::cluster::transform::Transform;
use crate::cmd::source::{ModuleSource, SourceError};
use crate::cmd::{fail, out};
use crate::config::{Config, ConfigError, DropRule, ModuleConfig};
use crate::wasm::declaration::{Mapping, Metadata};
use crate::wasm::limits::CallLimits;
use crate::wasm::module::{self, LoadError, Module};
use crate::wasm::oci::{self, RegistrySettings};
use crate::wasm::permissions::{self, Permissions, Requirement};
use crate::wasm::runtime::{Runtime, RuntimeError};

/// Why a module could not be checked, or failed the check.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The WebAssembly runtime could not be created.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The configuration is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The module could not be read or pulled.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The module does not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The module is a component, but not of the contract this host implements.
    #[error(
        "{error}; the component exports {}",
        if exports.is_empty() { "nothing".to_owned() } else { exports.join(", ") }
    )]
    World {
        /// The load error.
        error: LoadError,
        /// The names the component exports.
        exports: Vec<String>,
    },
    /// The configuration has no entry for the module.
    #[error(
        "{} has no module with path {module} or named {name}",
        config.display(),
    )]
    NoEntry {
        /// The configuration file.
        config: PathBuf,
        /// The module.
        module: String,
        /// The name the module declares.
        name: String,
    },
}

/// How a configuration entry was found for a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The entry's path is the module's file.
    Path,
    /// The entry's `name`, or without one its file name without `.wasm`, is the declared name.
    Name,
}

/// The entry of a configuration that runs the module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The configuration file.
    pub config: PathBuf,
    /// Index of the entry in `modules`.
    pub index: usize,
    /// How it was found.
    pub by: Match,
    /// The entry.
    pub module: ModuleConfig,
}

/// What a check found about a module that loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Where the module comes from: its path, or its reference pinned to the manifest digest.
    pub module: String,
    /// SHA-256 of its bytes, hex.
    pub digest: String,
    /// The contract interface it implements, with its version.
    pub contract: String,
    /// What it declares, validated.
    pub metadata: Metadata,
    /// The configuration entry, when a configuration was given.
    pub entry: Option<Entry>,
    /// The permissions it needs in the namespaces of its entry (or, without one, in the
    /// namespace it declares).
    pub required: Vec<Requirement>,
    /// The part of `required` the entry's grants do not give; empty without a configuration.
    pub missing: Vec<Requirement>,
    /// The writes the entry's grants let the host make for it (see [`permissions::writes`]);
    /// empty without a configuration.
    pub writes: Vec<Requirement>,
    /// Each kind it reads whose objects the entry's `cache.drop` rules change, with what they
    /// drop, in the order of the declaration; empty without a configuration.
    pub drops: Vec<(GroupVersionKind, Transform)>,
}

/// `kubewasm check`: prints the [`Report`] of `module` (a file or an OCI reference), with the
/// entry of `config` if given. Fails when it cannot be checked, or when its entry's grants do
/// not give it what it needs.
pub async fn command(
    module: &str,
    config: Option<&Path>,
    loading: (RegistrySettings, Option<PathBuf>),
) -> ExitCode {
    let source = ModuleSource::parse(module);
    let report = match check(&source, config, loading).await {
        Ok(report) => report,
        Err(error) => return fail(error),
    };
    out(&report);
    if let Some(entry) = report.entry.filter(|_| !report.missing.is_empty()) {
        return fail(format!(
            "the grants of modules[{}] in {} do not give {} what it needs (see missing)",
            entry.index,
            entry.config.display(),
            report.module
        ));
    }
    ExitCode::SUCCESS
}

/// Loads the module as the host would (with the limits of its configuration entry, if any) and,
/// with `config`, finds its entry (by path for a file, else by name) and compares the entry's
/// grants with what the module needs. An artifact is pulled as the host pulls it; with a
/// compile cache folder in `loading`, a module compiled before is read from it.
pub async fn check(
    source: &ModuleSource,
    config: Option<&Path>,
    loading: (RegistrySettings, Option<PathBuf>),
) -> Result<Report, CheckError> {
    let config = config
        .map(|file| Ok::<_, ConfigError>((file, Config::load(file)?)))
        .transpose()?;
    let by_path = config
        .as_ref()
        .and_then(|(file, config)| entry_by_path(source, file, config));
    let limits = by_path
        .as_ref()
        .map_or_else(Default::default, |entry| entry.module.limits);
    let (origin, module) = load(source, loading, limits).await?;
    let metadata = module.metadata.clone();
    let entry = match (by_path, &config) {
        (Some(entry), _) => Some(entry),
        (None, Some((file, config))) => Some(entry_by_name(file, config, &origin, &metadata)?),
        (None, None) => None,
    };
    Ok(report(origin, &module, metadata, entry))
}

/// The entry of `config` (read from `file`) whose path is the module's file, if any.
fn entry_by_path(source: &ModuleSource, file: &Path, config: &Config) -> Option<Entry> {
    let module = source.file()?;
    let index = config
        .modules
        .iter()
        .position(|m| m.file().is_some_and(|path| same_file(path, module)))?;
    Some(Entry {
        config: file.to_path_buf(),
        index,
        by: Match::Path,
        module: config.modules[index].clone(),
    })
}

/// Reads or pulls the module and loads it with `limits`, through the compile cache if there is
/// one; returns where it came from with it. A component of another contract is refused with the
/// names it exports.
async fn load(
    source: &ModuleSource,
    (registries, compiled): (RegistrySettings, Option<PathBuf>),
    limits: crate::config::Limits,
) -> Result<(String, Arc<Module>), CheckError> {
    let runtime = Runtime::new()?.with_compile_cache_in(compiled);
    let (origin, bytes) = source.read(registries).await?;
    let exports = oci::component_names(&bytes).map_or_else(|_| Vec::new(), |(_, exports)| exports);
    match module::load_bytes(&runtime, origin.clone(), bytes, &CallLimits::from(limits)).await {
        Ok(module) => Ok((origin, module)),
        Err(error @ LoadError::World { .. }) => Err(CheckError::World { error, exports }),
        Err(error) => Err(error.into()),
    }
}

/// The entry of `config` (read from `file`) named as the module `origin` declares itself.
fn entry_by_name(
    file: &Path,
    config: &Config,
    origin: &str,
    metadata: &Metadata,
) -> Result<Entry, CheckError> {
    let index = config
        .modules
        .iter()
        .position(|m| entry_name(m) == Some(metadata.name.as_str()))
        .ok_or_else(|| CheckError::NoEntry {
            config: file.to_path_buf(),
            module: origin.to_owned(),
            name: metadata.name.clone(),
        })?;
    Ok(Entry {
        config: file.to_path_buf(),
        index,
        by: Match::Name,
        module: config.modules[index].clone(),
    })
}

/// The report on `module`, loaded from `origin`: what it needs and, with an `entry`, what the
/// entry's grants miss, the writes they allow and what its cache drops.
fn report(origin: String, module: &Module, metadata: Metadata, entry: Option<Entry>) -> Report {
    let namespaces = entry
        .as_ref()
        .map_or(&[][..], |entry| &entry.module.namespaces[..]);
    let required = permissions::required(&metadata, namespaces);
    let missing = entry.as_ref().map_or_else(Vec::new, |entry| {
        Permissions::new(entry.module.grants.clone()).missing(&required)
    });
    let writes = entry.as_ref().map_or_else(Vec::new, |entry| {
        permissions::writes(&metadata, &entry.module)
    });
    let drops = entry
        .as_ref()
        .map_or_else(Vec::new, |entry| drops(&metadata, entry));
    Report {
        module: origin,
        digest: module.digest.clone(),
        contract: module.pre.interface().into(),
        metadata,
        entry,
        required,
        missing,
        writes,
        drops,
    }
}

/// Each kind `metadata` reads whose objects the `cache.drop` rules of `entry` change, once, in
/// the order of the declaration, with what they drop.
fn drops(metadata: &Metadata, entry: &Entry) -> Vec<(GroupVersionKind, Transform)> {
    let mut drops: Vec<(GroupVersionKind, Transform)> = Vec::new();
    for kind in metadata.declared().kinds() {
        let transform = DropRule::transform(&entry.module.drops, kind);
        if !transform.is_empty() && !drops.iter().any(|(k, _)| k == kind) {
            drops.push((kind.clone(), transform));
        }
    }
    drops
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The name an entry is known by: its `name`, else its file name without `.wasm`.
fn entry_name(entry: &ModuleConfig) -> Option<&str> {
    entry
        .name
        .as_deref()
        .or_else(|| entry.file()?.file_stem()?.to_str())
}

/// Width of the label column.
const LABEL: usize = 12;

/// One `label value` line, or `label none` for no values, with further values aligned below.
fn field(f: &mut fmt::Formatter<'_>, label: &str, values: &[String]) -> fmt::Result {
    let mut values = values.iter();
    let first = values.next().map_or("none", String::as_str);
    writeln!(f, "{label:LABEL$}{first}")?;
    for value in values {
        writeln!(f, "{:LABEL$}{value}", "")?;
    }
    Ok(())
}

fn kind(kind: &GroupVersionKind) -> String {
    format!("{} {}", kind.api_version(), kind.kind)
}

fn selection(selection: &Selection) -> String {
    let mut text = kind(&selection.kind);
    match &selection.namespace {
        Some(namespace) => text.push_str(&format!(" in namespace {namespace}")),
        None => text.push_str(" in all namespaces"),
    }
    if let Some(selector) = &selection.selector {
        text.push_str(&format!(" labelled {selector}"));
    }
    text
}

/// Human-readable, one field per line: the module, its declaration, the permissions it needs
/// and, with a configuration, its entry, the entry's grants and what they miss, and the fields
/// its cache drops.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.declaration(f)?;
        if let Some(entry) = &self.entry {
            self.configured(f, entry)?;
        }
        self.permissions(f)
    }
}

/// One field of a single value.
fn one(value: String) -> Vec<String> {
    vec![value]
}

/// How a watch's objects map to keys of the primary kind.
fn mapping(mapping: &Mapping) -> String {
    match mapping {
        Mapping::Owner => "mapped to its owners".to_owned(),
        Mapping::Label(label) => format!("mapped by its label {label}"),
        Mapping::Guest => "mapped by the guest's map-keys".to_owned(),
    }
}

impl Report {
    /// The module and what it declares: `module` to `resync`.
    fn declaration(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let metadata = &self.metadata;
        field(f, "module", &one(self.module.clone()))?;
        field(f, "sha256", &one(self.digest.clone()))?;
        field(f, "contract", &one(self.contract.clone()))?;
        field(f, "name", &one(metadata.name.clone()))?;
        field(f, "primary", &one(selection(&metadata.primary)))?;
        let owns: Vec<String> = metadata.owns.iter().map(kind).collect();
        field(f, "owns", &owns)?;
        let watches: Vec<String> = metadata
            .watches
            .iter()
            .map(|watch| {
                let mapping = mapping(&watch.mapping);
                format!("{}, {mapping}", selection(&watch.selection))
            })
            .collect();
        field(f, "watches", &watches)?;
        field(
            f,
            "finalizer",
            &metadata.finalizer.iter().cloned().collect::<Vec<_>>(),
        )?;
        field(f, "concurrency", &one(metadata.max_concurrency.to_string()))?;
        let resync: Vec<String> = metadata
            .resync
            .iter()
            .map(|period| format!("every {}s", period.as_secs()))
            .collect();
        field(f, "resync", &resync)
    }

    /// The configuration `entry`: `config` to `drops`.
    fn configured(&self, f: &mut fmt::Formatter<'_>, entry: &Entry) -> fmt::Result {
        let by = match entry.by {
            Match::Path => "path",
            Match::Name => "name",
        };
        field(
            f,
            "config",
            &one(format!(
                "{}, modules[{}], matched by {by}",
                entry.config.display(),
                entry.index
            )),
        )?;
        let namespaces = if entry.module.namespaces.is_empty() {
            "as declared".to_owned()
        } else {
            entry.module.namespaces.join(", ")
        };
        field(f, "namespaces", &one(namespaces))?;
        let grants = match &entry.module.grants {
            None => "none configured: every declared kind is allowed".to_owned(),
            Some(grants) if grants.len() == 1 => "1 rule".to_owned(),
            Some(grants) => format!("{} rules", grants.len()),
        };
        field(f, "grants", &one(grants))?;
        let drops: Vec<String> = match &self.drops[..] {
            [] => vec!["nothing".into()],
            drops => drops
                .iter()
                .map(|(k, transform)| format!("{}: {transform}", kind(k)))
                .collect(),
        };
        field(f, "drops", &drops)
    }

    /// What the module needs and may write and, with an entry, whether it is granted it.
    fn permissions(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let required: Vec<String> = self.required.iter().map(ToString::to_string).collect();
        field(f, "needs", &required)?;
        let writes: Vec<String> = match &self.entry {
            Some(_) => self.writes.iter().map(ToString::to_string).collect(),
            None => vec!["what the grants of its entry allow (give --config to list them)".into()],
        };
        field(f, "writes", &writes)?;
        if self.entry.is_some() {
            if self.missing.is_empty() {
                field(f, "granted", &one("everything it needs".into()))?;
            } else {
                let missing: Vec<String> = self.missing.iter().map(ToString::to_string).collect();
                field(f, "missing", &missing)?;
            }
        }
        Ok(())
    }
}
