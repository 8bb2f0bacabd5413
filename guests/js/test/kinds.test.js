import assert from "node:assert/strict";
import { test } from "node:test";

import {
  CHANGES,
  Mapping,
  Metadata,
  apiVersionOf,
  formatGvk,
  formatKey,
  gvk,
  gvkFromApiVersion,
  selection,
} from "../src/kinds.js";

test("api versions round-trip", () => {
  const deployment = gvkFromApiVersion("apps/v1", "Deployment");
  assert.deepEqual(deployment, gvk("apps", "v1", "Deployment"));
  assert.equal(apiVersionOf(deployment), "apps/v1");
  assert.equal(formatGvk(deployment), "apps/v1, Kind=Deployment");
  const pod = gvkFromApiVersion("v1", "Pod");
  assert.equal(pod.group, "");
  assert.equal(apiVersionOf(pod), "v1");
});

test("the metadata builder makes the WIT record", () => {
  const thing = gvk("a.io", "v1", "Thing");
  const secrets = selection(gvk("", "v1", "Secret"), { namespace: "ns" });
  const metadata = new Metadata("x", thing)
    .owns(gvk("", "v1", "Pod"))
    .watch(secrets, Mapping.label("thing"))
    .watch(gvk("", "v1", "ConfigMap"), Mapping.guest)
    .finalizer("a.io/cleanup")
    .maxConcurrency(0)
    .resyncEvery(1.5)
    .reconcileOn("generation", "annotations")
    .toWit();
  assert.deepEqual(metadata, {
    name: "x",
    primary: { kind: thing, namespace: undefined, labelSelector: undefined },
    owns: [gvk("", "v1", "Pod")],
    watches: [
      { selection: secrets, mapping: { tag: "label", val: "thing" } },
      {
        selection: {
          kind: gvk("", "v1", "ConfigMap"),
          namespace: undefined,
          labelSelector: undefined,
        },
        mapping: { tag: "guest" },
      },
    ],
    finalizer: "a.io/cleanup",
    maxConcurrency: 1,
    resyncSeconds: 1,
    reconcileOn: { generation: true, labels: false, annotations: true, any: false },
  });
  assert.equal(new Metadata("y", thing).toWit().maxConcurrency, 1);
  assert.equal(formatKey({ namespace: "ns", name: "n" }), "ns/n");
  assert.equal(formatKey({ name: "n" }), "n");
});

test("reconcileOn takes the names of the WIT flags only", () => {
  const metadata = new Metadata("x", gvk("", "v1", "ConfigMap"));
  assert.deepEqual(metadata.toWit().reconcileOn, {
    generation: false,
    labels: false,
    annotations: false,
    any: true,
  });
  assert.throws(
    () => metadata.reconcileOn(/** @type {any} */ ("spec"), "labels"),
    new TypeError("reconcileOn: unknown changes spec; use generation, labels, annotations, any"),
  );
  assert.throws(() => metadata.reconcileOn(), /reconcileOn: no change/);
  assert.deepEqual(CHANGES, ["generation", "labels", "annotations", "any"]);
});
