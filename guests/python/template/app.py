"""A minimal kubewasm controller guest. It reconciles ConfigMaps labelled
``kubewasm.dev/greeter=true`` and only logs what it sees; replace the body of ``reconcile``
with your own logic."""

import kubewasm
from kubewasm import Gvk, Metadata, Request, Selection, log, meta


class Greeter(kubewasm.Controller):
    """The controller."""

    def metadata(self) -> Metadata:
        primary = Selection(Gvk("", "v1", "ConfigMap")).with_label_selector(
            "kubewasm.dev/greeter=true"
        )
        return Metadata("greeter", primary, max_concurrency=2)

    def reconcile(self, req: Request) -> None:
        if req.object is None:
            # Deleted: owned objects are garbage-collected by Kubernetes.
            return
        log.info(
            "reconciled",
            key=req.key,
            resourceVersion=meta.resource_version(req.object) or "",
            dataKeys=len(req.object.get("data") or {}),
        )


Guest = kubewasm.export(Greeter)
