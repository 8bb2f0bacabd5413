// A minimal kubewasm controller guest. It reconciles ConfigMaps labelled
// `kubewasm.dev/greeter=true` and only logs what it sees; replace the body of `reconcile` with
// your own logic.

import { Metadata, defineController, formatKey, gvk, log, selection } from "@kubewasm/guest";

import { summary } from "./summary.js";

export const guest = defineController({
  metadata: new Metadata(
    "greeter",
    selection(gvk("", "v1", "ConfigMap"), { labelSelector: "kubewasm.dev/greeter=true" }),
  ).maxConcurrency(2),

  reconcile(request) {
    if (request.object === undefined) {
      // Deleted: owned objects are garbage-collected by Kubernetes.
      return;
    }
    log.info("reconciled", { key: formatKey(request.key), ...summary(request.object) });
  },
});
