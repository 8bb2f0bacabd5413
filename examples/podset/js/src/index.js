// The Kubernetes ReplicaSet controller rebuilt as a kubewasm guest in JavaScript.
//
// A `PodSet` (`kubewasm.dev/v1alpha1`) keeps `spec.replicas` pods built from `spec.template`
// running: it adopts orphan pods matching `spec.selector`, creates missing pods, deletes surplus
// ones (unscheduled, pending and unready pods first, then the newest) and reports
// `status.replicas`, `status.readyReplicas` and a `ReplicaFailure` condition. The decisions are
// made by the pure functions of `logic.js`; this module only talks to the host.

import {
  Mapping,
  Metadata,
  PermanentError,
  ReconcileError,
  apply,
  applyStatus,
  cache,
  defineController,
  deleteObject,
  generateName,
  ignoreNotFound,
  log,
  meta,
  owner,
  patchJson,
  recordEvent,
  selector,
} from "@kubewasm/guest";

import * as logic from "./logic.js";
import { POD_KIND, PODSET_KIND } from "./logic.js";

export const guest = defineController({
  metadata: new Metadata("podset", PODSET_KIND)
    .owns(POD_KIND)
    // Orphans have no owner to enqueue; `mapKeys` finds the PodSets that would adopt them, as
    // the ReplicaSet controller does on pod events.
    .watch(POD_KIND, Mapping.guest)
    .maxConcurrency(4),

  mapKeys(_kind, pod) {
    // Controlled pods reach their PodSet through `owns`; deleting pods are not adopted.
    if (owner.controllerRef(pod) || meta.isDeleting(pod)) {
      return [];
    }
    try {
      return logic.adopters(cache.list(PODSET_KIND, meta.namespace(pod)), meta.labels(pod));
    } catch (error) {
      log.warn("cannot list PodSets", { error });
      return [];
    }
  },

  reconcile(request) {
    const podset = request.object;
    // Gone, or going: the garbage collector deletes the pods it owned.
    if (podset === undefined || meta.isDeleting(podset)) {
      return;
    }
    const { namespace } = request;
    const pods = readPods(podset, namespace);

    let plan;
    try {
      plan = logic.plan(podset, pods);
    } catch (error) {
      if (!(error instanceof logic.InvalidSpec)) {
        throw error;
      }
      const failure = { reason: "InvalidSpec", message: error.message };
      const live = logic.controlledPods(meta.uid(podset) ?? "", pods);
      writeStatus(podset, logic.status(podset, live, 0, failure));
      throw new PermanentError(error.message);
    }

    for (const pod of plan.adopt) {
      try {
        patchJson(POD_KIND, namespace, pod.name, logic.adoptionPatch(podset, pod));
      } catch (error) {
        throw ReconcileError.from(error, `adopting pod ${pod.name}`);
      }
      log.info("adopted pod", { pod: pod.name });
    }

    /** @type {{failure: logic.Failure, error: unknown} | undefined} */
    let failed;
    const taken = new Set(pods.map((pod) => pod.name));
    let created = 0;
    for (let i = 0; i < plan.create; i++) {
      const name = freeName(`${request.name}-`, namespace, taken);
      try {
        apply(logic.podManifest(podset, name));
      } catch (error) {
        const message = `Error creating pod ${name}: ${error.message}`;
        record(request, "Warning", "FailedCreate", "Create", message);
        failed = { failure: { reason: "FailedCreate", message }, error };
        // Like the ReplicaSet controller's slow start: stop at the first failure.
        break;
      }
      created++;
      record(request, "Normal", "SuccessfulCreate", "Create", `Created pod: ${name}`);
    }

    const deleted = new Set();
    for (const pod of plan.delete) {
      try {
        ignoreNotFound(() => deleteObject(POD_KIND, namespace, pod.name, { uid: pod.uid }));
      } catch (error) {
        const message = `Error deleting pod ${pod.name}: ${error.message}`;
        record(request, "Warning", "FailedDelete", "Delete", message);
        failed ??= { failure: { reason: "FailedDelete", message }, error };
        continue;
      }
      deleted.add(pod.uid);
      record(request, "Normal", "SuccessfulDelete", "Delete", `Deleted pod: ${pod.name}`);
    }

    const live = plan.owned.filter((pod) => !deleted.has(pod.uid));
    writeStatus(podset, logic.status(podset, live, created, failed?.failure));
    if (failed) {
      throw failed.error;
    }
  },
});

/**
 * The pods the PodSet controls and the orphans its selector may adopt, in name order: read from
 * the host's indexes (`listControlled`, and a `list` by the selector's equalities), so a
 * reconcile costs its own pods, not its namespace. A selector that has no string form (it fails
 * validation in the plan anyway) reads the namespace.
 * @param {any} podset
 * @param {string | undefined} namespace
 * @returns {logic.PodView[]}
 */
function readPods(podset, namespace) {
  const controlled = cache.listControlled(POD_KIND, namespace, meta.uid(podset) ?? "");
  let query;
  try {
    query = selector.toQuery(logic.specOf(podset).selector);
  } catch (error) {
    if (!(error instanceof selector.SelectorError)) {
      throw error;
    }
  }
  const candidates = cache.list(POD_KIND, namespace, query);
  /** @type {Map<string, logic.PodView>} */
  const byName = new Map();
  for (const pod of [...controlled, ...candidates]) {
    const view = logic.podView(pod);
    if (view !== undefined && !byName.has(view.name)) {
      byName.set(view.name, view);
    }
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * A generated pod name that no pod has: neither one read for this reconcile (`taken`, to which
 * it is added) nor any other in the cache, since an apply to a taken name would change that pod.
 * @param {string} base
 * @param {string | undefined} namespace
 * @param {Set<string>} taken
 */
function freeName(base, namespace, taken) {
  for (;;) {
    const name = generateName(base);
    if (taken.has(name)) {
      continue;
    }
    taken.add(name);
    if (cache.get(POD_KIND, namespace, name) === undefined) {
      return name;
    }
  }
}

/**
 * @param {any} podset
 * @param {Record<string, unknown>} status
 */
function writeStatus(podset, status) {
  try {
    applyStatus(logic.statusObject(podset, status));
  } catch (error) {
    throw ReconcileError.from(error, "updating status");
  }
}

/**
 * Records an event about the PodSet; events are best effort, so failures are only logged.
 * @param {import("@kubewasm/guest/controller").Request} request
 * @param {"Normal" | "Warning"} type
 * @param {string} reason
 * @param {string} action
 * @param {string} note
 */
function record(request, type, reason, action, note) {
  try {
    recordEvent(PODSET_KIND, request.key, { type, reason, action, note });
  } catch (error) {
    log.debug("could not record event", { reason, error });
  }
}
