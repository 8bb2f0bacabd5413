"""Structured logging into the host's logs; the host tags every line with the controller and
the key being reconciled.

::

    from kubewasm import log
    log.info("created pod", pod="web-x7k2p", replicas=3)

Field values are converted with :func:`str`. What a controller prints to stdout or stderr
reaches the host's log too, as lines with a ``stream`` field."""

from __future__ import annotations

import enum

from . import _host


class Level(enum.Enum):
    """Severity of a log line."""

    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


def log(level: Level, message: str, **fields: object) -> None:
    """Writes one line at ``level`` with key/value ``fields``."""
    wit_level = getattr(_host.log.Level, level.name)
    _host.log.log(wit_level, message, [(key, str(value)) for key, value in fields.items()])


def trace(message: str, **fields: object) -> None:
    """Writes one line at :attr:`Level.TRACE`."""
    log(Level.TRACE, message, **fields)


def debug(message: str, **fields: object) -> None:
    """Writes one line at :attr:`Level.DEBUG`."""
    log(Level.DEBUG, message, **fields)


def info(message: str, **fields: object) -> None:
    """Writes one line at :attr:`Level.INFO`."""
    log(Level.INFO, message, **fields)


def warn(message: str, **fields: object) -> None:
    """Writes one line at :attr:`Level.WARN`."""
    log(Level.WARN, message, **fields)


def error(message: str, **fields: object) -> None:
    """Writes one line at :attr:`Level.ERROR`."""
    log(Level.ERROR, message, **fields)
