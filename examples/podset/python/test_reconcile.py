"""The controller of ``app.py`` over a fake host: what a reconcile reads and writes."""

import pytest

import app
import kubewasm
import logic
from kubewasm import DeniedError, HostError, ObjectKey, Permanent, Reason, Request, cache
from logic import POD, PodView

UID = "web-uid"


def podset(replicas, selector=None):
    return {
        "apiVersion": "kubewasm.dev/v1alpha1",
        "kind": "PodSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": UID, "generation": 1},
        "spec": {
            "replicas": replicas,
            "selector": selector or {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def pod(name, app_label, controller_uid=None):
    owners = []
    if controller_uid is not None:
        owners = [
            {
                "apiVersion": "kubewasm.dev/v1alpha1",
                "kind": "PodSet",
                "name": "x",
                "uid": controller_uid,
                "controller": True,
            }
        ]
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {"app": app_label},
            "ownerReferences": owners,
        },
        "status": {"phase": "Running"},
    }


class FakeHost:
    """Answers the reads of a reconcile from the pods of one namespace, as the host's indexes
    would, records what was asked and what was written."""

    def __init__(self, pods, names=(), generated=()):
        self.pods = pods
        #: Pods in the cache that neither list returns.
        self.names = set(names)
        self.generated = list(generated)
        self.asked = []
        self.writes = []
        self.error = None

    def list_controlled(self, kind, namespace, controller_uid):
        assert kind == POD
        self.asked.append(("list-controlled", namespace, controller_uid))
        self._fail()
        return [
            p
            for p in self.pods
            if any(
                r.get("controller") and r["uid"] == controller_uid
                for r in p["metadata"]["ownerReferences"]
            )
        ]

    def list(self, kind, namespace=None, label_selector=None):
        assert kind == POD
        self.asked.append(("list", namespace, label_selector))
        self._fail()
        if label_selector is None:
            return list(self.pods)
        assert label_selector == "app=web", "the fake serves no selector but app=web"
        return [p for p in self.pods if p["metadata"]["labels"].get("app") == "web"]

    def get(self, kind, namespace, name):
        assert kind == POD
        self.asked.append(("get", namespace, name))
        self._fail()
        found = next((p for p in self.pods if p["metadata"]["name"] == name), None)
        return found or ({"metadata": {"name": name}} if name in self.names else None)

    def _fail(self):
        if self.error is not None:
            raise self.error

    def write(self, name):
        def call(*args, **kwargs):
            self.writes.append((name, *args))
            return args[0] if args else None

        return call


@pytest.fixture
def host(monkeypatch):
    """Installs a :class:`FakeHost` in place of the host calls; returns a function that sets
    its pods."""

    def install(pods, names=(), generated=()):
        fake = FakeHost(pods, names, generated)
        monkeypatch.setattr(cache, "list_controlled", fake.list_controlled)
        monkeypatch.setattr(cache, "list", fake.list)
        monkeypatch.setattr(cache, "get", fake.get)
        for write in ("apply", "apply_status", "patch_json", "delete", "event"):
            monkeypatch.setattr(kubewasm, write, fake.write(write))
        monkeypatch.setattr(kubewasm, "generate_name", lambda base: fake.generated.pop(0))
        for level in ("info", "debug", "warn"):
            monkeypatch.setattr(kubewasm.log, level, lambda *args, **fields: None)
        return fake

    return install


def request(obj):
    return Request(ObjectKey("ns", "web"), Reason.CHANGED, 0, obj)


def reconcile(obj):
    return app.PodSetController().reconcile(request(obj))


def names(pods):
    return [p.name for p in pods]


def test_reconcile_reads_its_controlled_pods_and_its_selector_only(host, monkeypatch):
    pods = [
        pod("a-mine-relabelled", "db", UID),
        pod("b-orphan", "web"),
        pod("c-mine", "web", UID),
        pod("d-other-app", "db"),
        pod("e-foreign", "web", "other-uid"),
    ]
    fake = host(pods)
    planned = []
    plan = logic.plan

    def spy(source, views):
        planned.append(views)
        return plan(source, views)

    monkeypatch.setattr(logic, "plan", spy)
    assert reconcile(podset(3)) is None

    assert fake.asked == [("list-controlled", "ns", UID), ("list", "ns", "app=web")]
    # c-mine is in both lists and read once; d-other-app is in neither.
    assert names(planned[0]) == ["a-mine-relabelled", "b-orphan", "c-mine", "e-foreign"]
    # The plan of what was read is the plan of the whole namespace.
    views = [PodView.of(p) for p in pods]
    assert plan(podset(3), planned[0]) == plan(podset(3), views)

    adopted = [w for w in fake.writes if w[0] == "patch_json"]
    assert [w[3] for w in adopted] == ["b-orphan"]
    assert not [w for w in fake.writes if w[0] in ("apply", "delete")]
    [status] = [w[1] for w in fake.writes if w[0] == "apply_status"]
    assert status["status"]["replicas"] == 3


def test_a_selector_without_a_string_reads_the_namespace(host):
    fake = host([pod("a", "db"), pod("b", "web", UID)])
    invalid = podset(1, {"matchExpressions": [{"key": "app", "operator": "Near"}]})
    with pytest.raises(Permanent, match="unknown operator"):
        reconcile(invalid)
    assert fake.asked == [("list-controlled", "ns", UID), ("list", "ns", None)]
    assert names(app.read_pods(invalid, "ns")) == ["a", "b"]
    [status] = [w[1] for w in fake.writes if w[0] == "apply_status"]
    assert status["status"]["replicas"] == 1


def test_new_pods_get_names_no_pod_has(host):
    fake = host(
        [pod("web-read", "web", UID)],
        names={"web-cached"},
        generated=["web-read", "web-cached", "web-free"],
    )
    reconcile(podset(2))
    applied = [w[1]["metadata"]["name"] for w in fake.writes if w[0] == "apply"]
    assert applied == ["web-free"]
    # Names read in this reconcile are not asked for again.
    assert fake.asked[2:] == [("get", "ns", "web-cached"), ("get", "ns", "web-free")]


def test_free_name_skips_names_taken_in_this_reconcile(host):
    fake = host([], generated=["web-a", "web-a", "web-b"])
    taken: set[str] = set()
    assert app.free_name("web-", "ns", taken) == "web-a"
    assert app.free_name("web-", "ns", taken) == "web-b"
    assert taken == {"web-a", "web-b"}
    assert fake.asked == [("get", "ns", "web-a"), ("get", "ns", "web-b")]


def test_read_errors_end_the_reconcile(host):
    fake = host([pod("a", "web", UID)])
    fake.error = DeniedError("pods are not declared")
    with pytest.raises(HostError):
        reconcile(podset(1))
    assert fake.writes == []
