import assert from "node:assert/strict";
import { test } from "node:test";

import {
  InvalidSpec,
  MAX_BURST,
  REPLICA_FAILURE,
  adopters,
  adoptionPatch,
  deletionOrder,
  plan,
  podManifest,
  podView,
  status,
  statusObject,
} from "../src/logic.js";

const UID = "podset-uid";

function podset(replicas) {
  return {
    apiVersion: "kubewasm.dev/v1alpha1",
    kind: "PodSet",
    metadata: { name: "web", namespace: "ns", uid: UID, generation: 2 },
    spec: {
      replicas,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web", tier: "fe" } },
        spec: { containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }] },
      },
    },
  };
}

/** A pending pod `name` labelled `app=web`, changed by `options`. */
function pod(name, options = {}) {
  const json = {
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: "10",
      labels: options.labels ?? { app: "web" },
      creationTimestamp: options.created ?? "2024-01-01T00:00:00Z",
    },
    spec: {},
    status: { phase: options.phase ?? "Pending" },
  };
  const controller = options.owned ? UID : options.controlledBy;
  if (controller) {
    json.metadata.ownerReferences = [
      {
        apiVersion: "kubewasm.dev/v1alpha1",
        kind: "PodSet",
        name: "x",
        uid: controller,
        controller: true,
      },
    ];
  }
  if (options.node) {
    json.spec.nodeName = options.node;
    json.status.phase = options.phase ?? "Running";
  }
  if (options.readySince) {
    json.status.conditions = [
      { type: "Ready", status: "True", lastTransitionTime: options.readySince },
    ];
  }
  if (options.restarts !== undefined) {
    json.status.containerStatuses = [{ restartCount: 0 }, { restartCount: options.restarts }];
  }
  if (options.deleting) {
    json.metadata.deletionTimestamp = "2024-01-02T00:00:00Z";
  }
  if (options.created === null) {
    delete json.metadata.creationTimestamp;
  }
  return podView(json);
}

const names = (pods) => pods.map((p) => p.name);

test("reads pods", () => {
  const view = pod("a", {
    owned: true,
    node: "node-1",
    readySince: "2024-01-01T00:01:00Z",
    restarts: 3,
  });
  assert.equal(view.uid, "uid-a");
  assert.equal(view.ready, true);
  assert.equal(view.readySince, "2024-01-01T00:01:00Z");
  assert.equal(view.restarts, 3);
  assert.equal(view.ownerReferences[0].uid, UID);
  assert.equal(podView({ metadata: { name: "no-uid" } }), undefined);
});

test("creates missing replicas", () => {
  const result = plan(podset(3), [pod("a", { owned: true })]);
  assert.equal(result.create, 2);
  assert.deepEqual(result.delete, []);
  assert.deepEqual(result.adopt, []);
  assert.deepEqual(names(result.owned), ["a"]);
});

test("ignores deleting, terminated and foreign pods", () => {
  const pods = [
    pod("deleting", { owned: true, deleting: true }),
    pod("done", { owned: true, phase: "Succeeded" }),
    pod("failed", { owned: true, phase: "Failed" }),
    pod("foreign", { controlledBy: "other" }),
    pod("mine", { owned: true }),
  ];
  const result = plan(podset(2), pods);
  assert.deepEqual(names(result.owned), ["mine"]);
  assert.deepEqual(result.adopt, []);
  assert.equal(result.create, 1);
});

test("adopts matching orphans only", () => {
  const pods = [
    pod("orphan"),
    pod("other-app", { labels: { app: "db" } }),
    pod("orphan-deleting", { deleting: true }),
    pod("mine", { owned: true }),
  ];
  const result = plan(podset(2), pods);
  assert.deepEqual(names(result.adopt), ["orphan"]);
  assert.deepEqual(names(result.owned), ["mine", "orphan"]);
  assert.equal(result.create, 0);
  assert.deepEqual(result.delete, []);
});

test("deletes pending and unready pods first", () => {
  const pods = [
    pod("old-ready", { owned: true, node: "n1", readySince: "2024-01-01T00:00:00Z" }),
    pod("new-ready", { owned: true, node: "n1", readySince: "2024-01-03T00:00:00Z" }),
    pod("unready", { owned: true, node: "n1" }),
    pod("pending", { owned: true }),
  ];
  const result = plan(podset(1), pods);
  assert.deepEqual(names(result.delete), ["pending", "unready", "new-ready"]);
  assert.equal(result.create, 0);
});

test("deletion prefers unscheduled, restarting and newer pods", () => {
  const unscheduled = pod("unscheduled");
  const scheduled = { ...pod("scheduled"), nodeName: "n1" };
  assert.ok(deletionOrder(unscheduled, scheduled) < 0);

  assert.ok(deletionOrder(pod("crashy", { restarts: 5 }), pod("calm")) < 0);

  const newer = pod("newer", { created: "2024-02-01T00:00:00Z" });
  const older = pod("older", { created: "2024-01-01T00:00:00Z" });
  assert.ok(deletionOrder(newer, older) < 0);
  assert.ok(deletionOrder(older, newer) > 0);

  assert.ok(deletionOrder(pod("unknown-age", { created: null }), newer) < 0);
  assert.ok(deletionOrder(pod("calm"), pod("twin")) < 0);
});

test("zero replicas deletes everything", () => {
  const result = plan(podset(0), [pod("a", { owned: true }), pod("b")]);
  assert.deepEqual(names(result.adopt), ["b"]);
  assert.equal(result.delete.length, 2);
});

test("caps bursts", () => {
  assert.equal(plan(podset(10_000), []).create, MAX_BURST);
  const many = Array.from({ length: 600 }, (_, i) => pod(`p${i}`, { owned: true }));
  assert.equal(plan(podset(0), many).delete.length, MAX_BURST);
});

test("rejects invalid specs", () => {
  const empty = podset(1);
  empty.spec.selector = {};
  assert.throws(
    () => plan(empty, []),
    (e) => e instanceof InvalidSpec && /must not be empty/.test(e.message),
  );

  const mismatch = podset(1);
  mismatch.spec.template.metadata.labels = { app: "db" };
  assert.throws(() => plan(mismatch, []), /does not match/);

  const bad = podset(1);
  bad.spec.selector = { matchExpressions: [{ key: "app", operator: "Near", values: ["x"] }] };
  assert.throws(
    () => plan(bad, []),
    (e) => e instanceof InvalidSpec && /unknown operator/.test(e.message),
  );
});

test("finds adopters of orphans", () => {
  const db = podset(1);
  db.metadata.name = "db";
  db.spec.selector = { matchLabels: { app: "db" } };
  db.spec.template.metadata.labels = { app: "db" };
  const deleting = podset(1);
  deleting.metadata.name = "going";
  deleting.metadata.deletionTimestamp = "2024-01-02T00:00:00Z";
  const invalid = podset(1);
  invalid.metadata.name = "invalid";
  invalid.spec.selector = {};
  const podsets = [podset(1), db, deleting, invalid];
  assert.deepEqual(adopters(podsets, { app: "web" }), [{ namespace: "ns", name: "web" }]);
  assert.deepEqual(adopters(podsets, { app: "cache" }), []);
});

test("adoption patch sets the controller with a precondition", () => {
  const orphan = pod("orphan");
  orphan.ownerReferences.push({ apiVersion: "v1", kind: "ConfigMap", name: "cm", uid: "cm-uid" });
  assert.deepEqual(adoptionPatch(podset(1), orphan), [
    { op: "replace", path: "/metadata/resourceVersion", value: "10" },
    {
      op: "add",
      path: "/metadata/ownerReferences",
      value: [
        { apiVersion: "v1", kind: "ConfigMap", name: "cm", uid: "cm-uid" },
        {
          apiVersion: "kubewasm.dev/v1alpha1",
          kind: "PodSet",
          name: "web",
          uid: UID,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
  ]);
});

test("pod manifest copies the template", () => {
  assert.deepEqual(podManifest(podset(1), "web-abcde"), {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web-abcde", namespace: "ns", labels: { app: "web", tier: "fe" } },
    spec: { containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }] },
  });
});

test("status counts live pods and reports failures", () => {
  const live = [
    pod("a", { owned: true, node: "n", readySince: "2024-01-01T00:00:00Z" }),
    pod("b", { owned: true }),
  ];
  const failure = { reason: "FailedCreate", message: "quota exceeded" };
  const set = podset(3);
  const failed = status(set, live, 0, failure);
  assert.equal(failed.replicas, 2);
  assert.equal(failed.readyReplicas, 1);
  assert.equal(failed.observedGeneration, 2);
  assert.equal(failed.selector, "app=web");
  assert.equal(failed.conditions[0].type, REPLICA_FAILURE);
  assert.equal(failed.conditions[0].reason, "FailedCreate");
  assert.equal(failed.conditions[0].observedGeneration, 2);

  set.status = failed;
  const healed = status(set, live, 1, undefined);
  assert.equal(healed.replicas, 3);
  assert.equal(healed.conditions, undefined);
  assert.equal(set.status.conditions.length, 1, "the PodSet read from the cache is not changed");

  const object = statusObject(set, healed);
  assert.deepEqual(object.metadata, { name: "web", namespace: "ns" });
  assert.equal(object.status.readyReplicas, 1);
});

test("a failure that persists keeps its transition time", () => {
  const set = podset(3);
  set.status = {
    conditions: [
      {
        type: REPLICA_FAILURE,
        status: "True",
        lastTransitionTime: "2024-01-01T00:00:00Z",
        reason: "FailedCreate",
        message: "old",
      },
    ],
  };
  const again = status(set, [], 0, { reason: "FailedCreate", message: "quota exceeded" });
  assert.equal(again.conditions[0].lastTransitionTime, "2024-01-01T00:00:00Z");
  assert.equal(again.conditions[0].message, "quota exceeded");
});
