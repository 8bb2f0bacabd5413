import assert from "node:assert/strict";
import { test } from "node:test";

import * as meta from "../src/meta.js";

test("reads metadata", () => {
  const pod = {
    metadata: {
      name: "p",
      namespace: "ns",
      uid: "u",
      resourceVersion: "7",
      generation: 3,
      creationTimestamp: "2024-01-01T00:00:00Z",
      labels: { app: "web", bad: 1 },
    },
  };
  assert.equal(meta.name(pod), "p");
  assert.equal(meta.namespace(pod), "ns");
  assert.equal(meta.uid(pod), "u");
  assert.equal(meta.resourceVersion(pod), "7");
  assert.equal(meta.generation(pod), 3);
  assert.equal(meta.creationTimestamp(pod), "2024-01-01T00:00:00Z");
  assert.equal(meta.isDeleting(pod), false);
  assert.deepEqual(meta.labels(pod), { app: "web" });
  assert.deepEqual(meta.key(pod), { namespace: "ns", name: "p" });
  assert.equal(meta.key({}), undefined);
  assert.deepEqual(meta.labels(null), {});
  assert.equal(meta.isDeleting({ metadata: { deletionTimestamp: "2024-01-02T00:00:00Z" } }), true);
});
