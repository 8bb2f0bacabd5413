"""Kinds, keys and the declaration a controller makes: plain Python values, converted to the
WIT records only when they cross into the host."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

#: The names ``reconcile_on`` accepts, one per part of a primary object whose update enqueues
#: its key: ``generation`` (``metadata.generation``: the spec, for kinds with a status
#: subresource; kinds without a generation never match), ``labels``, ``annotations``, and
#: ``any`` (every update, status and finalizers included).
CHANGES = ("generation", "labels", "annotations", "any")


@dataclass(frozen=True)
class Gvk:
    """A Kubernetes kind: its API group (``""`` for the core group), version and kind."""

    group: str
    version: str
    kind: str

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> Gvk:
        """A kind from an ``apiVersion`` (``apps/v1``, or ``v1`` for the core group)."""
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


@dataclass(frozen=True)
class ObjectKey:
    """The name of one object; ``namespace`` is ``None`` for a cluster-scoped object."""

    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace is not None else self.name


@dataclass(frozen=True)
class Selection:
    """A set of objects of one kind: in one namespace or all (``None``), optionally only those
    matching a label selector in the API server's syntax (``app=web,tier in (a,b),!legacy``)."""

    kind: Gvk
    namespace: str | None = None
    label_selector: str | None = None

    def in_namespace(self, namespace: str) -> Selection:
        """The same selection, only in ``namespace``."""
        return replace(self, namespace=namespace)

    def with_label_selector(self, selector: str) -> Selection:
        """The same selection, only objects matching ``selector``."""
        return replace(self, label_selector=selector)


@dataclass(frozen=True)
class Mapping:
    """How a change to a watched object turns into keys of the primary kind; build one with
    :meth:`owner`, :meth:`label` or :meth:`guest`."""

    how: str
    label_name: str | None = None

    @classmethod
    def owner(cls) -> Mapping:
        """Enqueue every owner in the object's ``ownerReferences`` of the primary kind."""
        return cls("owner")

    @classmethod
    def label(cls, name: str) -> Mapping:
        """Enqueue the primary object, in the same namespace, named by this label's value."""
        return cls("label", name)

    @classmethod
    def guest(cls) -> Mapping:
        """Call the controller's ``map_keys`` with the changed object."""
        return cls("guest")


@dataclass(frozen=True)
class Watch:
    """A kind the controller reads and reacts to without owning it."""

    selection: Selection
    mapping: Mapping


@dataclass
class Metadata:
    """What a controller declares: its name (lowercase letters, digits and ``-``; the field
    manager is ``kubewasm-<name>``), the primary kind, owned and watched kinds, a finalizer,
    the concurrency (at least 1), a resync period in whole seconds and which updates of a
    primary object enqueue it (``reconcile_on``, names from :data:`CHANGES`; every update by
    default).

    Build it with keywords or by chaining::

        Metadata("podset", PODSET).own(POD).watch(POD, Mapping.guest()).with_max_concurrency(4)
    """

    name: str
    primary: Selection | Gvk
    owns: list[Gvk] = field(default_factory=list)
    watches: list[Watch] = field(default_factory=list)
    finalizer: str | None = None
    max_concurrency: int = 1
    resync_seconds: int | None = None
    reconcile_on: Iterable[str] = frozenset({"any"})

    def __post_init__(self) -> None:
        if isinstance(self.primary, Gvk):
            self.primary = Selection(self.primary)
        self.max_concurrency = max(1, self.max_concurrency)
        self.reconcile_on = _changes(self.reconcile_on)

    def own(self, kind: Gvk) -> Metadata:
        """Adds a kind this controller creates and owns; a change to one enqueues its
        controller owner."""
        self.owns.append(kind)
        return self

    def watch(self, selection: Selection | Gvk, mapping: Mapping) -> Metadata:
        """Adds a watched kind whose changes enqueue keys through ``mapping``."""
        if isinstance(selection, Gvk):
            selection = Selection(selection)
        self.watches.append(Watch(selection, mapping))
        return self

    def with_finalizer(self, finalizer: str) -> Metadata:
        """Sets the finalizer the host adds to every primary object and removes once
        ``finalize`` returns done."""
        self.finalizer = finalizer
        return self

    def with_max_concurrency(self, max_concurrency: int) -> Metadata:
        """Sets how many keys may be reconciled at the same time (values below 1 become 1)."""
        self.max_concurrency = max(1, max_concurrency)
        return self

    def resync_every(self, seconds: float) -> Metadata:
        """Enqueues every primary object again after ``seconds`` without a change (whole
        seconds, rounded down, at least 1)."""
        self.resync_seconds = max(1, int(seconds))
        return self

    def with_reconcile_on(self, *changes: str) -> Metadata:
        """Reconciles a primary object only on updates that change one of ``changes``, e.g.
        ``with_reconcile_on("generation", "labels")`` to ignore updates of the status alone.
        Creation, deletion, the start of deletion, a missing finalizer, resync, reload and
        changes of owned or watched objects always enqueue it. Raises ``ValueError`` for an
        unknown name or none."""
        self.reconcile_on = _changes(changes)
        return self


def _changes(changes: Iterable[str]) -> frozenset[str]:
    """``changes`` (a name or names from :data:`CHANGES`) as a set; raises ``ValueError`` for
    an unknown name or none."""
    chosen = frozenset([changes] if isinstance(changes, str) else changes)
    unknown = sorted(chosen.difference(CHANGES))
    if unknown or not chosen:
        what = f"unknown changes {', '.join(unknown)}" if unknown else "no change"
        raise ValueError(f"reconcile_on: {what}; use {', '.join(CHANGES)}")
    return chosen


class Reason(enum.Enum):
    """Why a key was queued; when several reasons arrive before the key is handed out, the
    first one is kept."""

    ADDED = "added"
    CHANGED = "changed"
    DELETED = "deleted"
    OWNED_CHANGED = "owned-changed"
    WATCHED_CHANGED = "watched-changed"
    RESYNC = "resync"
    REQUEUE = "requeue"
    RELOAD = "reload"


@dataclass(frozen=True)
class Request:
    """One reconcile request: the primary object's key, why it was queued, the attempt (1 on
    the first try, counting up while reconciles keep failing) and the object as the cache
    holds it now (without ``metadata.managedFields``), or ``None`` once it no longer exists."""

    key: ObjectKey
    reason: Reason
    attempt: int
    object: dict | None

    @property
    def name(self) -> str:
        """The primary object's name."""
        return self.key.name

    @property
    def namespace(self) -> str | None:
        """The primary object's namespace; ``None`` for a cluster-scoped kind."""
        return self.key.namespace


@dataclass(frozen=True)
class RequeueAfter:
    """Returned by ``reconcile`` or ``finalize``: reconcile this key again after ``seconds``
    (millisecond precision). Returning ``None`` means done."""

    seconds: float
