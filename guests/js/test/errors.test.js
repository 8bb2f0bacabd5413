import assert from "node:assert/strict";
import { test } from "node:test";

import {
  HostError,
  PermanentError,
  ReconcileError,
  TransientError,
  call,
  ignoreNotFound,
  parseJson,
} from "../src/errors.js";

const api = (code, reason) =>
  HostError.fromWit({ tag: "api", val: { code, reason, message: "m" } });

test("classifies host errors", () => {
  assert.ok(api(404, "NotFound").isNotFound);
  assert.ok(api(409, "Conflict").isConflict);
  assert.ok(!api(409, "Conflict").isNotFound);
  assert.ok(!api(409, "Conflict").isAlreadyExists);
  assert.ok(api(409, "AlreadyExists").isAlreadyExists);
  assert.ok(api(409, "AlreadyExists").isConflict);
  assert.ok(!HostError.fromWit({ tag: "denied", val: "AlreadyExists" }).isAlreadyExists);
  assert.ok(api(409, "Conflict").isTransient);
  assert.ok(api(503, "ServiceUnavailable").isTransient);
  assert.ok(!api(422, "Invalid").isTransient);
  assert.ok(!HostError.fromWit({ tag: "denied", val: "no" }).isTransient);
  assert.ok(HostError.fromWit({ tag: "unavailable", val: "timeout" }).isTransient);
  assert.equal(api(404, "NotFound").message, "API server answered 404 NotFound: m");
  assert.throws(
    () => parseJson("{"),
    (e) => e instanceof HostError && e.kind === "json" && !e.isTransient,
  );
});

test("rethrows what host calls throw as host errors", () => {
  const thrown = Object.assign(new Error("component error"), {
    payload: { tag: "invalid", val: "bad" },
  });
  assert.throws(
    () =>
      call(() => {
        throw thrown;
      }),
    (e) => e instanceof HostError && e.kind === "invalid" && e.message === "invalid request: bad",
  );
  assert.throws(
    () =>
      call(() => {
        throw new TypeError("bug");
      }),
    TypeError,
  );
  assert.equal(
    call(() => 1),
    1,
  );
});

test("turns whatever was thrown into reconcile errors", () => {
  assert.deepEqual(ReconcileError.from(api(409, "Conflict")).toWit(), {
    tag: "transient",
    val: "API server answered 409 Conflict: m",
  });
  assert.deepEqual(ReconcileError.from(api(422, "Invalid")).toWit().tag, "permanent");
  const withContext = ReconcileError.from(api(404, "NotFound"), "get pod");
  assert.ok(withContext instanceof TransientError);
  assert.equal(withContext.message, "get pod: API server answered 404 NotFound: m");
  const permanent = new PermanentError("bad spec");
  assert.equal(ReconcileError.from(permanent), permanent);
  assert.ok(ReconcileError.from(permanent, "checking") instanceof PermanentError);
  assert.deepEqual(ReconcileError.from(new TypeError("x is undefined")).toWit(), {
    tag: "transient",
    val: "TypeError: x is undefined",
  });
});

test("ignores not found only", () => {
  assert.equal(
    ignoreNotFound(() => {
      throw api(404, "NotFound");
    }),
    undefined,
  );
  assert.equal(
    ignoreNotFound(() => 1),
    1,
  );
  assert.throws(
    () =>
      ignoreNotFound(() => {
        throw api(409, "Conflict");
      }),
    HostError,
  );
});
