/**
 * Kinds, object keys and the controller's declaration, in the shapes of the WIT records
 * (`{group, version, kind}`, `{namespace, name}`, ...).
 */

/**
 * @typedef {{group: string, version: string, kind: string}} Gvk
 * @typedef {{namespace?: string, name: string}} ObjectKey
 * @typedef {{kind: Gvk, namespace?: string, labelSelector?: string}} Selection
 * @typedef {{tag: "owner"} | {tag: "label", val: string} | {tag: "guest"}} Mapping
 * @typedef {"generation" | "labels" | "annotations" | "any"} Change a part of a primary object
 *   whose update enqueues its key: `metadata.generation` (the spec, for kinds with a status
 *   subresource), `metadata.labels`, `metadata.annotations`, or anything at all
 */

/**
 * The changes {@link Metadata#reconcileOn} accepts, in the order of the WIT flags `changes`.
 * @type {readonly Change[]}
 */
export const CHANGES = Object.freeze(["generation", "labels", "annotations", "any"]);

/**
 * A kind from its group (`""` for the core group), version and kind.
 * @param {string} group
 * @param {string} version
 * @param {string} kind
 * @returns {Gvk}
 */
export function gvk(group, version, kind) {
  return { group, version, kind };
}

/**
 * A kind from an `apiVersion` (`apps/v1`, or `v1` for the core group) and a kind.
 * @param {string} apiVersion
 * @param {string} kind
 * @returns {Gvk}
 */
export function gvkFromApiVersion(apiVersion, kind) {
  const slash = apiVersion.indexOf("/");
  return slash < 0
    ? gvk("", apiVersion, kind)
    : gvk(apiVersion.slice(0, slash), apiVersion.slice(slash + 1), kind);
}

/**
 * The `apiVersion` of objects of `kind`: `group/version`, or `version` for the core group.
 * @param {Gvk} kind
 */
export function apiVersionOf(kind) {
  return kind.group ? `${kind.group}/${kind.version}` : kind.version;
}

/**
 * `apps/v1, Kind=Deployment`, as the API machinery prints kinds.
 * @param {Gvk} kind
 */
export function formatGvk(kind) {
  return `${apiVersionOf(kind)}, Kind=${kind.kind}`;
}

/**
 * `namespace/name`, or `name` for a cluster-scoped object.
 * @param {ObjectKey} key
 */
export function formatKey(key) {
  return key.namespace ? `${key.namespace}/${key.name}` : key.name;
}

/**
 * Objects of `kind`, optionally only in `namespace` and matching `labelSelector` (the API
 * server's syntax: `app=web,tier in (a,b)`).
 * @param {Gvk} kind
 * @param {{namespace?: string, labelSelector?: string}} [options]
 * @returns {Selection}
 */
export function selection(kind, { namespace, labelSelector } = {}) {
  return { kind, namespace, labelSelector };
}

/** How a change to a watched object turns into keys of the primary kind. */
export const Mapping = Object.freeze({
  /** Enqueue every owner in the object's `ownerReferences` whose kind is the primary kind. */
  owner: Object.freeze({ tag: "owner" }),
  /** Call the controller's `mapKeys` with the changed object. */
  guest: Object.freeze({ tag: "guest" }),
  /**
   * Enqueue the primary object, in the same namespace, named by this label's value.
   * @param {string} label
   * @returns {Mapping}
   */
  label: (label) => ({ tag: "label", val: label }),
});

/**
 * A selection from a kind or a selection.
 * @param {Gvk | Selection} kindOrSelection
 * @returns {Selection}
 */
function toSelection(kindOrSelection) {
  return "kind" in kindOrSelection && typeof kindOrSelection.kind === "object"
    ? /** @type {Selection} */ (kindOrSelection)
    : selection(/** @type {Gvk} */ (kindOrSelection));
}

/**
 * What a controller declares about itself, built step by step:
 *
 * ```js
 * new Metadata("podset", podsetKind).owns(podKind).watch(podKind, Mapping.guest).maxConcurrency(4)
 * ```
 *
 * Defaults: no owned or watched kinds, no finalizer, a concurrency of 1, no resync, and every
 * update of a primary object reconciles it.
 */
export class Metadata {
  /**
   * @param {string} name the controller's name (lowercase letters, digits and `-`): the
   *   `controller` label of its metrics and the suffix of its field manager `kubewasm-<name>`
   * @param {Gvk | Selection} primary the kind (or selection of objects) it reconciles
   */
  constructor(name, primary) {
    this.name = name;
    this.primary = toSelection(primary);
    /** @type {Gvk[]} */
    this.ownedKinds = [];
    /** @type {{selection: Selection, mapping: Mapping}[]} */
    this.watches = [];
    /** @type {string | undefined} */
    this.finalizerName = undefined;
    this.concurrency = 1;
    /** @type {number | undefined} */
    this.resyncSeconds = undefined;
    /** @type {Change[]} */
    this.changes = ["any"];
  }

  /**
   * Adds a kind this controller creates and owns; a change to one enqueues its controller owner.
   * @param {Gvk} kind
   */
  owns(kind) {
    this.ownedKinds.push(kind);
    return this;
  }

  /**
   * Adds a watched kind (or selection) whose changes enqueue keys through `mapping`.
   * @param {Gvk | Selection} kindOrSelection
   * @param {Mapping} mapping
   */
  watch(kindOrSelection, mapping) {
    this.watches.push({ selection: toSelection(kindOrSelection), mapping });
    return this;
  }

  /**
   * Sets the finalizer the host adds to every primary object and removes once `finalize`
   * returns done.
   * @param {string} finalizer
   */
  finalizer(finalizer) {
    this.finalizerName = finalizer;
    return this;
  }

  /**
   * Sets how many keys may be reconciled at the same time (values below 1 become 1).
   * @param {number} max
   */
  maxConcurrency(max) {
    this.concurrency = Math.max(1, Math.floor(max));
    return this;
  }

  /**
   * Enqueues every primary object again after `seconds` without a change (whole seconds,
   * rounded down, at least 1).
   * @param {number} seconds
   */
  resyncEvery(seconds) {
    this.resyncSeconds = Math.min(2 ** 32 - 1, Math.max(1, Math.floor(seconds)));
    return this;
  }

  /**
   * Reconciles a primary object only on updates that change one of `changes`, e.g.
   * `reconcileOn("generation", "labels")` to ignore updates of the status alone. Creation,
   * deletion, the start of deletion, a missing finalizer, resync, reload and changes of owned or
   * watched objects always enqueue it. Throws a `TypeError` for an unknown change or none.
   * @param {...Change} changes
   */
  reconcileOn(...changes) {
    const unknown = changes.filter((change) => !CHANGES.includes(change));
    if (unknown.length > 0 || changes.length === 0) {
      const what = unknown.length > 0 ? `unknown changes ${unknown.join(", ")}` : "no change";
      throw new TypeError(`reconcileOn: ${what}; use ${CHANGES.join(", ")}`);
    }
    this.changes = changes;
    return this;
  }

  /**
   * The WIT `controller-metadata` record.
   * @returns {import("kubewasm:controller/types@0.2.1").ControllerMetadata}
   */
  toWit() {
    return {
      name: this.name,
      primary: this.primary,
      owns: this.ownedKinds,
      watches: this.watches,
      finalizer: this.finalizerName,
      maxConcurrency: this.concurrency,
      resyncSeconds: this.resyncSeconds,
      reconcileOn: Object.fromEntries(
        CHANGES.map((change) => [change, this.changes.includes(change)]),
      ),
    };
  }
}
