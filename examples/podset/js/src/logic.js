// The pure decision logic of the PodSet controller: which pods belong to a PodSet, which orphans
// to adopt, how many pods to create, which to delete, and the resulting status. Nothing here
// calls the host, so it is unit-tested natively with `node --test`.

import { removeCondition, setCondition } from "@kubewasm/guest/conditions";
import { gvk } from "@kubewasm/guest/kinds";
import * as meta from "@kubewasm/guest/meta";
import { ownerReferences } from "@kubewasm/guest/owner";
import * as selector from "@kubewasm/guest/selector";

/** API group of the PodSet kind. */
export const GROUP = "kubewasm.dev";
/** API version of the PodSet kind. */
export const VERSION = "v1alpha1";
/** The PodSet kind. */
export const KIND = "PodSet";
/** The PodSet kind as a gvk. */
export const PODSET_KIND = gvk(GROUP, VERSION, KIND);
/** The Pod kind. */
export const POD_KIND = gvk("", "v1", "Pod");
/** The condition set while creating or deleting pods fails, as on ReplicaSets. */
export const REPLICA_FAILURE = "ReplicaFailure";
/** Most pods created or deleted by one reconcile, like the ReplicaSet controller's burst limit. */
export const MAX_BURST = 500;

/**
 * @typedef {import("@kubewasm/guest/owner").OwnerReference} OwnerReference
 * @typedef {import("@kubewasm/guest/conditions").Condition} Condition
 *
 * @typedef {object} PodView What the controller needs to know about one pod.
 * @property {string} name
 * @property {string} uid
 * @property {string} resourceVersion the precondition of adoption
 * @property {Record<string, string>} labels
 * @property {OwnerReference[]} ownerReferences
 * @property {boolean} deleting whether `metadata.deletionTimestamp` is set
 * @property {string} phase `status.phase` (empty when unknown)
 * @property {string} nodeName `spec.nodeName` (empty when unscheduled)
 * @property {boolean} ready whether the `Ready` condition is `True`
 * @property {string} [readySince] when the pod last became ready (RFC 3339), if ready
 * @property {number} restarts the highest restart count among its containers
 * @property {string} [created] `metadata.creationTimestamp` (RFC 3339)
 *
 * @typedef {{reason: string, message: string}} Failure Why creating or deleting pods failed,
 *   for the `ReplicaFailure` condition: `FailedCreate`, `FailedDelete` or `InvalidSpec`.
 */

/** A PodSet spec the controller refuses to act on. */
export class InvalidSpec extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = "InvalidSpec";
  }
}

/**
 * The PodSet's `spec` with defaults: one replica, an empty selector and template.
 * @param {any} podset
 */
export function specOf(podset) {
  const spec = podset?.spec ?? {};
  return {
    replicas: Number.isInteger(spec.replicas) ? spec.replicas : 1,
    selector: spec.selector ?? {},
    template: {
      labels: spec.template?.metadata?.labels ?? {},
      annotations: spec.template?.metadata?.annotations ?? {},
      spec: spec.template?.spec ?? null,
    },
  };
}

/**
 * Reads a pod from its JSON; `undefined` if it has no name or uid.
 * @param {any} pod
 * @returns {PodView | undefined}
 */
export function podView(pod) {
  const name = meta.name(pod);
  const uid = meta.uid(pod);
  if (name === undefined || uid === undefined) {
    return undefined;
  }
  const status = pod.status ?? {};
  /** @type {any[]} */
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  const readyCondition = conditions.find((condition) => condition?.type === "Ready");
  const ready = readyCondition?.status === "True";
  /** @type {any[]} */
  const containers = Array.isArray(status.containerStatuses) ? status.containerStatuses : [];
  const restarts = containers.map((container) => container?.restartCount).filter(Number.isInteger);
  const since = readyCondition?.lastTransitionTime;
  return {
    name,
    uid,
    resourceVersion: meta.resourceVersion(pod) ?? "",
    labels: meta.labels(pod),
    ownerReferences: ownerReferences(pod),
    deleting: meta.isDeleting(pod),
    phase: typeof status.phase === "string" ? status.phase : "",
    nodeName: typeof pod.spec?.nodeName === "string" ? pod.spec.nodeName : "",
    ready,
    readySince: ready && typeof since === "string" ? since : undefined,
    restarts: Math.max(0, ...restarts),
    created: meta.creationTimestamp(pod),
  };
}

/**
 * The controller owner reference of a pod, if any.
 * @param {PodView} pod
 */
function controllerOf(pod) {
  return pod.ownerReferences.find((ref) => ref.controller === true);
}

/**
 * Neither terminated (`Succeeded`/`Failed`) nor being deleted.
 * @param {PodView} pod
 */
export function isActive(pod) {
  return !pod.deleting && pod.phase !== "Succeeded" && pod.phase !== "Failed";
}

/**
 * Checks what the API server checks for ReplicaSets: a valid, non-empty selector that matches
 * the template's labels. Throws an {@link InvalidSpec} otherwise.
 * @param {ReturnType<typeof specOf>} spec
 */
export function validate(spec) {
  if (selector.isEmpty(spec.selector)) {
    throw new InvalidSpec("spec.selector must not be empty");
  }
  if (!selectorMatches(spec.selector, spec.template.labels)) {
    throw new InvalidSpec("spec.selector does not match spec.template.metadata.labels");
  }
}

/**
 * `selector.matches`, with an invalid selector as an {@link InvalidSpec}.
 * @param {selector.LabelSelector} labelSelector
 * @param {Record<string, string>} labels
 */
function selectorMatches(labelSelector, labels) {
  try {
    return selector.matches(labelSelector, labels);
  } catch (error) {
    if (error instanceof selector.SelectorError) {
      throw new InvalidSpec(error.message);
    }
    throw error;
  }
}

/**
 * The active pods controlled by the PodSet with uid `ownerUid`.
 * @param {string} ownerUid
 * @param {PodView[]} pods
 */
export function controlledPods(ownerUid, pods) {
  return pods.filter((pod) => isActive(pod) && controllerOf(pod)?.uid === ownerUid);
}

/**
 * The PodSets that would adopt an orphan pod with these `labels`: those not being deleted whose
 * valid selector matches. `podsets` are the PodSets of the pod's namespace.
 * @param {any[]} podsets
 * @param {Record<string, string>} labels
 * @returns {import("@kubewasm/guest/kinds").ObjectKey[]}
 */
export function adopters(podsets, labels) {
  return podsets
    .filter((podset) => !meta.isDeleting(podset) && meta.name(podset) !== undefined)
    .filter((podset) => {
      const spec = specOf(podset);
      try {
        validate(spec);
        return selector.matches(spec.selector, labels);
      } catch {
        return false;
      }
    })
    .map((podset) => ({ namespace: meta.namespace(podset), name: meta.name(podset) ?? "" }));
}

/**
 * What one reconcile should do, given the PodSet and the pods of its namespace it may act on
 * (at least those it controls and those its selector matches; the others are ignored):
 * - `adopt`: active orphans matching the selector, to adopt with {@link adoptionPatch};
 * - `owned`: the PodSet's pods once the adoptions succeed (controlled + adopted, all active);
 * - `create`: how many pods to create;
 * - `delete`: pods to delete, in order of preference.
 *
 * Pods controlled by something else are ignored, as are orphans that are being deleted or
 * terminated. At most {@link MAX_BURST} pods are created or deleted at once. Throws an
 * {@link InvalidSpec} for a spec the controller refuses.
 *
 * @param {any} podset
 * @param {PodView[]} pods
 * @returns {{adopt: PodView[], owned: PodView[], create: number, delete: PodView[]}}
 */
export function plan(podset, pods) {
  const spec = specOf(podset);
  validate(spec);
  const owned = controlledPods(meta.uid(podset) ?? "", pods);
  const adopt = pods.filter(
    (pod) => isActive(pod) && !controllerOf(pod) && selectorMatches(spec.selector, pod.labels),
  );
  owned.push(...adopt);
  const want = Math.max(0, spec.replicas);
  const create = Math.min(Math.max(0, want - owned.length), MAX_BURST);
  const surplus = Math.min(Math.max(0, owned.length - want), MAX_BURST);
  const candidates = [...owned].sort(deletionOrder).slice(0, surplus);
  return { adopt, owned, create, delete: candidates };
}

/**
 * `a` is newer than `b`, with a missing time counting as newest (Kubernetes' `afterOrZero`).
 * @param {string | undefined} a
 * @param {string | undefined} b
 */
function afterOrZero(a, b) {
  return a !== undefined && b !== undefined ? a > b : a === undefined;
}

/** @param {string} phase */
function phaseRank(phase) {
  return phase === "Unknown" ? 1 : phase === "Running" ? 2 : 0;
}

/**
 * Whether `a` should be deleted before `b`, as in Kubernetes' `ActivePods.Less`.
 * @param {PodView} a
 * @param {PodView} b
 */
function deleteFirst(a, b) {
  // Unscheduled before scheduled.
  if (a.nodeName !== b.nodeName && (a.nodeName === "" || b.nodeName === "")) {
    return a.nodeName === "";
  }
  // Pending < Unknown < Running.
  if (phaseRank(a.phase) !== phaseRank(b.phase)) {
    return phaseRank(a.phase) < phaseRank(b.phase);
  }
  // Not ready before ready.
  if (a.ready !== b.ready) {
    return !a.ready;
  }
  // Ready for a shorter time first.
  if (a.ready && a.readySince !== b.readySince) {
    return afterOrZero(a.readySince, b.readySince);
  }
  // More restarts first.
  if (a.restarts !== b.restarts) {
    return a.restarts > b.restarts;
  }
  // Newer first.
  if (a.created !== b.created) {
    return afterOrZero(a.created, b.created);
  }
  return false;
}

/**
 * Deletion preference, as a comparator: negative means `a` goes first. Ties break by name.
 * @param {PodView} a
 * @param {PodView} b
 */
export function deletionOrder(a, b) {
  if (deleteFirst(a, b)) {
    return -1;
  }
  if (deleteFirst(b, a)) {
    return 1;
  }
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/**
 * The controller owner reference of a pod adopted by `podset`.
 * @param {any} podset
 * @returns {OwnerReference}
 */
export function ownerReference(podset) {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: KIND,
    name: meta.name(podset) ?? "",
    uid: meta.uid(podset) ?? "",
    controller: true,
    blockOwnerDeletion: true,
  };
}

/**
 * The JSON patch adopting `pod`: adds a controller owner reference to `podset`, with the
 * resourceVersion the cache saw as precondition, so that a concurrent change (another
 * controller adopting it first) fails with 409 Conflict instead of overwriting it.
 * @param {any} podset
 * @param {PodView} pod
 */
export function adoptionPatch(podset, pod) {
  const ours = ownerReference(podset);
  const references = [...pod.ownerReferences.filter((ref) => ref.uid !== ours.uid), ours];
  return [
    { op: "replace", path: "/metadata/resourceVersion", value: pod.resourceVersion },
    { op: "add", path: "/metadata/ownerReferences", value: references },
  ];
}

/**
 * The pod to server-side apply for a new replica called `name`. The host adds the controller
 * owner reference (`owned: true`).
 * @param {any} podset
 * @param {string} name
 */
export function podManifest(podset, name) {
  const { template } = specOf(podset);
  /** @type {Record<string, unknown>} */
  const metadata = { name };
  const namespace = meta.namespace(podset);
  if (namespace !== undefined) {
    metadata.namespace = namespace;
  }
  if (Object.keys(template.labels).length > 0) {
    metadata.labels = template.labels;
  }
  if (Object.keys(template.annotations).length > 0) {
    metadata.annotations = template.annotations;
  }
  return { apiVersion: "v1", kind: "Pod", metadata, spec: template.spec };
}

/**
 * The status after a reconcile: `live` are the PodSet's pods still there after the deletions,
 * `created` how many pods were created. `ReplicaFailure` is set when `failure` is given and
 * removed otherwise; other conditions are kept.
 * @param {any} podset
 * @param {PodView[]} live
 * @param {number} created
 * @param {Failure} [failure]
 */
export function status(podset, live, created, failure) {
  /** @type {Condition[]} */
  const conditions = structuredClone(podset?.status?.conditions ?? []);
  const generation = meta.generation(podset);
  if (failure) {
    setCondition(conditions, {
      type: REPLICA_FAILURE,
      status: "True",
      reason: failure.reason,
      message: failure.message,
      observedGeneration: generation,
    });
  } else {
    removeCondition(conditions, REPLICA_FAILURE);
  }
  /** @type {Record<string, unknown>} */
  const result = {
    replicas: live.length + created,
    readyReplicas: live.filter((pod) => pod.ready).length,
  };
  if (generation !== undefined) {
    result.observedGeneration = generation;
  }
  try {
    result.selector = selector.toQuery(specOf(podset).selector);
  } catch {
    // An invalid selector has no string form; the scale subresource then has none.
  }
  if (conditions.length > 0) {
    result.conditions = conditions;
  }
  return result;
}

/**
 * The object to apply to the status subresource.
 * @param {any} podset
 * @param {Record<string, unknown>} podsetStatus
 */
export function statusObject(podset, podsetStatus) {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: KIND,
    metadata: { name: meta.name(podset), namespace: meta.namespace(podset) },
    status: podsetStatus,
  };
}
