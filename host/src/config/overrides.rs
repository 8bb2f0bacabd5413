//! What a module entry of the file and a WasmController's spec override of a module's
//! declaration: the fields both write alike, declared once, and their validation.

use serde::Deserialize;

use super::grant::{RawGrant, validate_grant};
use super::limits::validate_limits;
use super::queue::validate_queue;
use super::{
    ConfigError, DropRule, Grant, Limits, MAX_CONCURRENCY, ModuleConfig, QueueConfig, Source,
    invalid, namespace_list,
};
use crate::cluster::selector::is_dns1123_label;

/// Declares a struct as written that holds the override fields, or [`Overrides`].
///
/// `with_overrides! { #[attrs] struct Raw { BEFORE } + overrides(NAME) + { AFTER } }` declares
/// `Raw` with the fields BEFORE, the override fields, then the fields AFTER (in this order in
/// serde's "expected one of" list), refusing unknown fields; and `Raw::overrides`, which takes
/// the override fields out, with its field NAME as the module's name.
/// `with_overrides! { Overrides }` declares [`Overrides`].
///
/// A macro rather than serde's `flatten`: flattened fields are buffered before they are read,
/// so a value of the wrong type would be refused without its field's path and position, a plain
/// YAML scalar such as `123` would no longer read as a string, and `deny_unknown_fields` would
/// not apply.
macro_rules! with_overrides {
    (@fields [$($(#[$doc:meta])* $field:ident: $ty:ty,)*] Overrides) => {
        /// What a module entry or a controller object's spec overrides of a module's
        /// declaration, as written.
        pub(super) struct Overrides {
            /// The module's name: `name` in the file, `controllerName` in a spec.
            pub(super) name: Option<String>,
            $($(#[$doc])* pub(super) $field: $ty,)*
        }
    };
    (
        @fields [$($(#[$doc:meta])* $field:ident: $ty:ty,)*]
        $(#[$attr:meta])*
        struct $raw:ident { $($before:tt)* } + overrides($name:ident) $(+ { $($after:tt)* })?
    ) => {
        $(#[$attr])*
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        struct $raw {
            $($before)*
            $($(#[$doc])* $field: $ty,)*
            $($($after)*)?
        }

        impl $raw {
            /// Takes out what it overrides of the module's declaration.
            fn overrides(&mut self) -> $crate::config::overrides::Overrides {
                $crate::config::overrides::Overrides {
                    name: self.$name.take(),
                    $($field: self.$field.take(),)*
                }
            }
        }
    };
    ($($input:tt)*) => {
        with_overrides! {
            @fields [
                /// Replaces the module's declared max-concurrency.
                max_concurrency: Option<u32>,
                /// Replaces the module's declared resync period.
                resync_seconds: Option<u32>,
                /// Namespaces the primary watch is restricted to.
                namespaces: Option<Vec<String>>,
                /// Limits of the module's instances.
                limits: Option<$crate::config::limits::RawLimits>,
                /// What the module may do.
                grants: Option<Vec<$crate::config::grant::RawGrant>>,
                /// Its workqueue's retries.
                queue: Option<$crate::config::queue::RawQueue>,
                /// What is dropped from the objects it reads.
                cache: Option<$crate::config::overrides::RawCache>,
            ]
            $($input)*
        }
    };
}

pub(super) use with_overrides;

with_overrides! { Overrides }

/// `cache` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawCache {
    #[serde(default)]
    drop: Vec<RawDrop>,
}

/// A rule of `cache.drop` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct RawDrop {
    #[serde(default)]
    api_groups: Vec<String>,
    #[serde(default)]
    kinds: Vec<String>,
    fields: Vec<String>,
}

/// Validates `raw` (the name's field is `name_field` under `at`) for a module from `source`.
pub(super) fn validate_overrides(
    source: Source,
    raw: Overrides,
    at: &str,
    name_field: &str,
    queue: &QueueConfig,
) -> Result<ModuleConfig, ConfigError> {
    check_scalars(&raw, at, name_field)?;
    let namespaces = namespace_list(
        raw.namespaces.unwrap_or_default(),
        &format!("{at}.namespaces"),
    )?;
    let limits = match raw.limits {
        Some(limits) => validate_limits(limits, &format!("{at}.limits"))?,
        None => Limits::default(),
    };
    let grants = raw.grants.map(|g| validate_grants(g, at)).transpose()?;
    let queue = raw
        .queue
        .map(|raw| validate_queue(raw, queue, &format!("{at}.queue")))
        .transpose()?;
    let drops = validate_drops(raw.cache, at)?;
    Ok(ModuleConfig {
        source,
        name: raw.name,
        max_concurrency: raw.max_concurrency,
        resync_seconds: raw.resync_seconds,
        namespaces,
        limits,
        grants,
        queue,
        drops,
        confined: false,
        maxima: None,
    })
}

/// Checks the name, `maxConcurrency` and `resyncSeconds` of `raw` at `at`.
fn check_scalars(raw: &Overrides, at: &str, name_field: &str) -> Result<(), ConfigError> {
    if let Some(name) = &raw.name
        && !is_dns1123_label(name)
    {
        return Err(invalid(
            format!("{at}.{name_field}"),
            format!(
                "{name:?} is not a DNS-1123 label (at most 63 lowercase letters, digits and '-', \
                 starting and ending with a letter or digit)"
            ),
        ));
    }
    if let Some(n) = raw.max_concurrency
        && !(1..=MAX_CONCURRENCY).contains(&n)
    {
        return Err(invalid(
            format!("{at}.maxConcurrency"),
            format!("{n} is outside 1..={MAX_CONCURRENCY}"),
        ));
    }
    if raw.resync_seconds == Some(0) {
        return Err(invalid(
            format!("{at}.resyncSeconds"),
            "0 is not at least 1",
        ));
    }
    Ok(())
}

/// The `grants` at `at`, each validated.
fn validate_grants(grants: Vec<RawGrant>, at: &str) -> Result<Vec<Grant>, ConfigError> {
    grants
        .into_iter()
        .enumerate()
        .map(|(i, grant)| validate_grant(grant, &format!("{at}.grants[{i}]")))
        .collect()
}

/// The rules of `cache.drop` at `at`, each validated; none without `cache`.
fn validate_drops(cache: Option<RawCache>, at: &str) -> Result<Vec<DropRule>, ConfigError> {
    cache
        .map_or_else(Vec::new, |c| c.drop)
        .into_iter()
        .enumerate()
        .map(|(i, drop)| validate_drop(drop, &format!("{at}.cache.drop[{i}]")))
        .collect()
}

/// `raw`, the rule of `cache.drop` at `at`: at least one field, each a JSON pointer the host
/// does not read.
fn validate_drop(raw: RawDrop, at: &str) -> Result<DropRule, ConfigError> {
    if raw.fields.is_empty() {
        return Err(invalid(
            format!("{at}.fields"),
            "at least one field is required",
        ));
    }
    if let Some(i) = raw.kinds.iter().position(String::is_empty) {
        return Err(invalid(
            format!("{at}.kinds[{i}]"),
            "a kind must not be empty",
        ));
    }
    let fields = raw
        .fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            field
                .parse()
                .map_err(|message| invalid(format!("{at}.fields[{i}]"), message))
        })
        .collect::<Result<_, _>>()?;
    Ok(DropRule {
        api_groups: raw.api_groups,
        kinds: raw.kinds,
        fields,
    })
}
