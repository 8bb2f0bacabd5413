import assert from "node:assert/strict";
import { test } from "node:test";

import {
  controllerOwnerOf,
  controllerRef,
  controllerReferenceTo,
  isControlledBy,
  ownerReferences,
} from "../src/owner.js";

const owner = {
  apiVersion: "kubewasm.dev/v1alpha1",
  kind: "PodSet",
  metadata: { name: "web", namespace: "ns", uid: "u1" },
};

test("finds the controller", () => {
  const reference = controllerReferenceTo(owner);
  assert.deepEqual(reference, {
    apiVersion: "kubewasm.dev/v1alpha1",
    kind: "PodSet",
    name: "web",
    uid: "u1",
    controller: true,
    blockOwnerDeletion: true,
  });
  const child = {
    metadata: {
      namespace: "ns",
      ownerReferences: [
        { apiVersion: "v1", kind: "ConfigMap", name: "other", uid: "u0", extra: 1 },
        { bogus: true },
        reference,
      ],
    },
  };
  assert.deepEqual(ownerReferences(child)[0], {
    apiVersion: "v1",
    kind: "ConfigMap",
    name: "other",
    uid: "u0",
  });
  assert.equal(ownerReferences(child).length, 2);
  assert.equal(controllerRef(child).name, "web");
  assert.deepEqual(controllerOwnerOf(child), { namespace: "ns", name: "web" });
  assert.ok(isControlledBy(child, "u1"));
  assert.ok(!isControlledBy(child, "u0"));
});

test("orphans have no controller", () => {
  const orphan = {
    metadata: {
      ownerReferences: [
        { apiVersion: "v1", kind: "ConfigMap", name: "other", uid: "u0", controller: false },
      ],
    },
  };
  assert.equal(controllerRef(orphan), undefined);
  assert.equal(controllerOwnerOf({}), undefined);
  assert.equal(controllerReferenceTo({ kind: "X" }), undefined);
});
