"""The PodSet decisions, natively: no component, no host."""

import copy
import functools

import pytest

import logic
from kubewasm import ObjectKey
from logic import MAX_BURST, REPLICA_FAILURE, Failure, InvalidSpec, PodView

UID = "podset-uid"


def podset(replicas):
    return {
        "apiVersion": "kubewasm.dev/v1alpha1",
        "kind": "PodSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": UID, "generation": 2},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web", "tier": "fe"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


class Pod:
    """Builds pod JSON for the tests."""

    def __init__(self, name):
        self.pod = {
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "resourceVersion": "10",
                "labels": {"app": "web"},
                "creationTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {},
            "status": {"phase": "Pending"},
        }

    def controlled_by(self, uid):
        self.pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "kubewasm.dev/v1alpha1",
                "kind": "PodSet",
                "name": "x",
                "uid": uid,
                "controller": True,
            }
        ]
        return self

    def owned(self):
        return self.controlled_by(UID)

    def labels(self, labels):
        self.pod["metadata"]["labels"] = labels
        return self

    def running(self, node, ready_since=None):
        self.pod["spec"]["nodeName"] = node
        self.pod["status"]["phase"] = "Running"
        if ready_since:
            self.pod["status"]["conditions"] = [
                {"type": "Ready", "status": "True", "lastTransitionTime": ready_since}
            ]
        return self

    def phase(self, phase):
        self.pod["status"]["phase"] = phase
        return self

    def created(self, at):
        self.pod["metadata"]["creationTimestamp"] = at
        return self

    def restarts(self, n):
        self.pod["status"]["containerStatuses"] = [{"restartCount": 0}, {"restartCount": n}]
        return self

    def deleting(self):
        self.pod["metadata"]["deletionTimestamp"] = "2024-01-02T00:00:00Z"
        return self

    def build(self):
        return PodView.of(self.pod)


def names(pods):
    return [pod.name for pod in pods]


def test_reads_pods():
    pod = Pod("a").owned().running("node-1", "2024-01-01T00:01:00Z").restarts(3).build()
    assert pod.uid == "uid-a"
    assert pod.ready and pod.active
    assert pod.ready_since == "2024-01-01T00:01:00Z"
    assert pod.restarts == 3
    assert pod.controller["uid"] == UID
    assert PodView.of({"metadata": {"name": "no-uid"}}) is None


def test_creates_missing_replicas():
    plan = logic.plan(podset(3), [Pod("a").owned().build()])
    assert plan.create == 2
    assert plan.delete == [] and plan.adopt == []
    assert names(plan.owned) == ["a"]


def test_ignores_deleting_terminated_and_foreign_pods():
    pods = [
        Pod("deleting").owned().deleting().build(),
        Pod("done").owned().phase("Succeeded").build(),
        Pod("failed").owned().phase("Failed").build(),
        Pod("foreign").controlled_by("other").build(),
        Pod("mine").owned().build(),
    ]
    plan = logic.plan(podset(2), pods)
    assert names(plan.owned) == ["mine"]
    assert plan.adopt == []
    assert plan.create == 1


def test_adopts_matching_orphans_only():
    pods = [
        Pod("orphan").build(),
        Pod("other-app").labels({"app": "db"}).build(),
        Pod("orphan-deleting").deleting().build(),
        Pod("mine").owned().build(),
    ]
    plan = logic.plan(podset(2), pods)
    assert names(plan.adopt) == ["orphan"]
    assert names(plan.owned) == ["mine", "orphan"]
    assert plan.create == 0
    assert plan.delete == []


def test_deletes_pending_and_unready_pods_first():
    pods = [
        Pod("old-ready").owned().running("n1", "2024-01-01T00:00:00Z").build(),
        Pod("new-ready").owned().running("n1", "2024-01-03T00:00:00Z").build(),
        Pod("unready").owned().running("n1").build(),
        Pod("pending").owned().build(),
    ]
    plan = logic.plan(podset(1), pods)
    assert names(plan.delete) == ["pending", "unready", "new-ready"]
    assert plan.create == 0


def test_deletion_prefers_unscheduled_restarting_and_newer_pods():
    unscheduled = Pod("unscheduled").build()
    scheduled = Pod("scheduled").build()
    scheduled = PodView(**{**scheduled.__dict__, "node_name": "n1"})
    assert logic.deletion_order(unscheduled, scheduled) < 0

    crashy, calm = Pod("crashy").restarts(5).build(), Pod("calm").build()
    assert logic.deletion_order(crashy, calm) < 0

    newer = Pod("newer").created("2024-02-01T00:00:00Z").build()
    older = Pod("older").created("2024-01-01T00:00:00Z").build()
    assert logic.deletion_order(newer, older) < 0
    assert logic.deletion_order(older, newer) > 0

    unknown_age = PodView(**{**Pod("unknown-age").build().__dict__, "created": None})
    assert logic.deletion_order(unknown_age, newer) < 0

    twin = Pod("twin").build()
    assert logic.deletion_order(calm, twin) < 0
    assert logic.deletion_order(twin, twin) == 0


def test_deletion_order_is_a_total_order():
    pods = [
        Pod("a").running("n1", "2024-01-01T00:00:00Z").build(),
        Pod("b").running("n1").restarts(2).build(),
        Pod("c").phase("Unknown").build(),
        Pod("d").build(),
        Pod("e").created("2025-01-01T00:00:00Z").build(),
    ]
    ordered = sorted(pods, key=functools.cmp_to_key(logic.deletion_order))
    assert names(ordered) == ["e", "d", "c", "b", "a"]
    assert sorted(reversed(pods), key=functools.cmp_to_key(logic.deletion_order)) == ordered


def test_zero_replicas_deletes_everything():
    plan = logic.plan(podset(0), [Pod("a").owned().build(), Pod("b").build()])
    assert names(plan.adopt) == ["b"]
    assert len(plan.delete) == 2


def test_negative_replicas_count_as_zero():
    assert logic.plan(podset(-3), [Pod("a").owned().build()]).delete[0].name == "a"


def test_caps_bursts():
    assert logic.plan(podset(10_000), []).create == MAX_BURST
    pods = [Pod(f"p{i}").owned().build() for i in range(MAX_BURST + 20)]
    assert len(logic.plan(podset(0), pods).delete) == MAX_BURST


def test_rejects_invalid_specs():
    empty = podset(1)
    empty["spec"]["selector"] = {}
    with pytest.raises(InvalidSpec, match="must not be empty"):
        logic.plan(empty, [])

    mismatch = podset(1)
    mismatch["spec"]["template"]["metadata"]["labels"] = {"app": "db"}
    with pytest.raises(InvalidSpec, match="does not match"):
        logic.plan(mismatch, [])

    bad = podset(1)
    bad["spec"]["selector"] = {
        "matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]
    }
    with pytest.raises(InvalidSpec, match="unknown operator"):
        logic.plan(bad, [])


def test_finds_adopters_of_orphans():
    db = podset(1)
    db["metadata"]["name"] = "db"
    db["spec"]["selector"] = {"matchLabels": {"app": "db"}}
    db["spec"]["template"]["metadata"]["labels"] = {"app": "db"}
    going = podset(1)
    going["metadata"]["name"] = "going"
    going["metadata"]["deletionTimestamp"] = "2024-01-02T00:00:00Z"
    invalid = podset(1)
    invalid["metadata"]["name"] = "invalid"
    invalid["spec"]["selector"] = {}
    podsets = [podset(1), db, going, invalid]
    assert logic.adopters(podsets, {"app": "web"}) == [ObjectKey("ns", "web")]
    assert logic.adopters(podsets, {"app": "cache"}) == []


def test_adoption_patch_sets_controller_with_precondition():
    pod = Pod("orphan")
    pod.pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-uid"}
    ]
    assert logic.adoption_patch(podset(1), pod.build()) == [
        {"op": "replace", "path": "/metadata/resourceVersion", "value": "10"},
        {
            "op": "add",
            "path": "/metadata/ownerReferences",
            "value": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-uid"},
                {
                    "apiVersion": "kubewasm.dev/v1alpha1",
                    "kind": "PodSet",
                    "name": "web",
                    "uid": UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                },
            ],
        },
    ]


def test_pod_manifest_copies_the_template():
    source = podset(1)
    pod = logic.pod_manifest(source, "web-abcde")
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-abcde",
            "namespace": "ns",
            "labels": {"app": "web", "tier": "fe"},
        },
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }
    pod["metadata"]["labels"]["x"] = "y"
    assert "x" not in source["spec"]["template"]["metadata"]["labels"]


def test_status_counts_live_pods_and_reports_failures():
    live = [
        Pod("a").owned().running("n", "2024-01-01T00:00:00Z").build(),
        Pod("b").owned().build(),
    ]
    source = podset(3)
    failed = logic.status(source, live, 0, Failure("FailedCreate", "quota exceeded"))
    assert (failed["replicas"], failed["readyReplicas"]) == (2, 1)
    assert failed["observedGeneration"] == 2
    assert failed["selector"] == "app=web"
    assert failed["conditions"][0]["type"] == REPLICA_FAILURE
    assert failed["conditions"][0]["reason"] == "FailedCreate"
    assert failed["conditions"][0]["observedGeneration"] == 2

    source["status"] = copy.deepcopy(failed)
    again = logic.status(source, live, 0, Failure("FailedCreate", "quota exceeded"))
    assert again == failed

    healed = logic.status(source, live, 1, None)
    assert healed["replicas"] == 3
    assert "conditions" not in healed
    assert source["status"]["conditions"][0]["type"] == REPLICA_FAILURE

    status = logic.status_object(source, healed)
    assert status["metadata"] == {"name": "web", "namespace": "ns"}
    assert status["status"]["readyReplicas"] == 1
