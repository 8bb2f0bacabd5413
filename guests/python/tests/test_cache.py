"""The cache reads, over stand-ins for the bindings componentize-py generates: what reaches the
host, how its answers are parsed and how its errors are raised."""

from types import SimpleNamespace

import pytest

import kubewasm
from kubewasm import DeniedError, Gvk, _host, cache

POD = Gvk("", "v1", "Pod")
REPLICA_SET = Gvk("apps", "v1", "ReplicaSet")


class Err(Exception):
    """Stands in for componentize-py's ``Err``: the host's WIT ``error`` in ``value``."""

    def __init__(self, value):
        super().__init__(value)
        self.value = value


class Denied:
    def __init__(self, value):
        self.value = value


class FakeCache:
    """Answers every read with ``objects`` (or raises ``error``) and records the calls."""

    def __init__(self, objects=(), error=None):
        self.objects = list(objects)
        self.error = error
        self.calls = []

    def _answer(self, call):
        self.calls.append(call)
        if self.error is not None:
            raise Err(self.error)
        return list(self.objects)

    def get(self, kind, namespace, name):
        answer = self._answer(("get", kind, namespace, name))
        return answer[0] if answer else None

    def list(self, kind, namespace, label_selector):
        return self._answer(("list", kind, namespace, label_selector))

    def list_controlled(self, kind, namespace, controller_uid):
        return self._answer(("list-controlled", kind, namespace, controller_uid))


@pytest.fixture
def host(monkeypatch):
    """Installs a :class:`FakeCache` as the ``cache`` bindings; returns a function that sets
    its answers."""
    types = SimpleNamespace(
        Gvk=lambda group, version, kind: (group, version, kind),
        Error_Api=type("Error_Api", (), {}),
        Error_Denied=Denied,
        Error_Invalid=type("Error_Invalid", (), {}),
    )
    monkeypatch.setattr(_host, "types", types)
    monkeypatch.setattr(_host, "Err", Err)

    def install(fake):
        monkeypatch.setattr(_host, "cache", fake)
        return fake

    return install


def test_list_controlled_passes_the_owner_uid_and_parses(host):
    fake = host(FakeCache(['{"metadata": {"name": "a"}}', '{"metadata": {"name": "b"}}']))
    objects = cache.list_controlled(REPLICA_SET, "ns", "owner-uid")
    assert [o["metadata"]["name"] for o in objects] == ["a", "b"]
    assert kubewasm.cache.list_controlled(POD, None, "owner-uid") == objects
    assert fake.calls == [
        ("list-controlled", ("apps", "v1", "ReplicaSet"), "ns", "owner-uid"),
        ("list-controlled", ("", "v1", "Pod"), None, "owner-uid"),
    ]


def test_list_controlled_raises_host_errors(host):
    host(FakeCache(error=Denied("pods are not declared")))
    with pytest.raises(DeniedError, match="denied: pods are not declared") as raised:
        cache.list_controlled(POD, "ns", "owner-uid")
    assert not raised.value.transient


def test_list_controlled_refuses_objects_that_are_not_json(host):
    host(FakeCache(['{"metadata": {"name": "a"}}', "{"]))
    with pytest.raises(ValueError):
        cache.list_controlled(POD, "ns", "owner-uid")


def test_list_and_get_reach_the_cache(host):
    fake = host(FakeCache(['{"metadata": {"name": "a"}}']))
    assert cache.list(POD, "ns", "app=web") == [{"metadata": {"name": "a"}}]
    assert cache.get(POD, "ns", "a") == {"metadata": {"name": "a"}}
    assert fake.calls == [
        ("list", ("", "v1", "Pod"), "ns", "app=web"),
        ("get", ("", "v1", "Pod"), "ns", "a"),
    ]


def test_list_controlled_outside_a_component_raises():
    with pytest.raises(kubewasm.OutsideHostError, match="cache.list_controlled"):
        cache.list_controlled(POD, "ns", "owner-uid")
