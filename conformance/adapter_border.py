"""``--adapter`` at the border: load, check and time-limit a system under test before and while it runs.

:func:`resolve` turns ``module:factory`` into an :class:`Adapter` (text, factory, protocol) once, at the front;
everything below takes that object and never imports the module again. :func:`load_adapter` resolves and
checks it, or raises one :class:`AdapterError` line naming the
adapter and what is wrong (the module, the factory's signature, an exception raised while building one
adapter, a missing or ill-formed protocol method), before any example runs. :func:`limited_factory` wraps
the factory so that building an adapter and every call on it are stopped after ``seconds``
(``KVEXACT_CALL_TIMEOUT``, default :data:`DEFAULT_CALL_SECONDS`) by a timer signal.

Invariant: a call that overruns, or a factory that raises inside a machine, leaves the machine as
:class:`AdapterUnusable`, a ``BaseException`` that Hypothesis does not treat as a test failure (it is not
shrunk or replayed); the runner turns it back into the :class:`AdapterError` it carries. After a call
overran, every later call on that adapter raises the same error at once. The limit works on the main
thread only (elsewhere calls run unlimited) and stops code that returns to the interpreter; a call stuck
inside C code that never does cannot be stopped this way.
"""

from __future__ import annotations

import importlib
import inspect
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from kvexact.conformance.guard import AdapterFault, AdapterFaultError, freeze, log_build, log_call
from kvexact.reference.adapters import (
    AdapterError,
    AdapterFactory,
    AdapterProblem,
    adapter_protocol,
    check_adapter,
)
from kvexact.reference.hybrid_adapter import HybridCacheConfig, check_hybrid
from kvexact.reference.index import IndexConfig, check_index

DEFAULT_CALL_SECONDS = 60.0
DEFAULT_SHRINK_SECONDS = 30.0  # shrinking budget: a failure through --adapter reports within about a minute
CALL_TIMEOUT_ENV = "KVEXACT_CALL_TIMEOUT"
CHECKS: dict[str, Callable[[Any], None]] = {"prefix-index": check_index, "hybrid-cache": check_hybrid}


class AdapterUnusable(BaseException):
    """Raised inside a machine when the adapter cannot go on (a call overran, the factory raised)."""

    def __init__(self, error: AdapterError):
        super().__init__(str(error))
        self.error = error


class _Overran(BaseException):
    """The timer fired during an adapter call."""


def call_seconds(value: float | None = None) -> float:
    """The per-call limit: ``value``, else ``KVEXACT_CALL_TIMEOUT``, else the default (0: no limit)."""
    if value is not None:
        return value
    text = os.environ.get(CALL_TIMEOUT_ENV)
    if not text:
        return DEFAULT_CALL_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise AdapterError(AdapterProblem.CALL_TIMEOUT, f"{CALL_TIMEOUT_ENV}={text!r}: expected a number of "
                                                        "seconds >= 0 (0: no limit)")
    return seconds


def load_factory(spec: str) -> AdapterFactory:
    """``module:factory`` -> the factory; errors name the module or attribute that is wrong."""
    if ":" not in spec:
        raise AdapterError(AdapterProblem.NOT_MODULE_FACTORY, f"--adapter {spec}: expected MODULE:FACTORY")
    module_name, attr = spec.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise AdapterError(AdapterProblem.NOT_IMPORTABLE, f"--adapter {spec}: cannot import {module_name}: {exc}"
                           ) from None
    except SyntaxError as exc:
        raise AdapterError(AdapterProblem.IMPORT_FAILED, f"--adapter {spec}: {module_name} has a syntax error: "
                           f"{exc.msg} ({exc.filename}, line {exc.lineno})") from None
    except Exception as exc:
        raise AdapterError(AdapterProblem.IMPORT_FAILED, f"--adapter {spec}: importing {module_name} raised "
                           f"{type(exc).__name__}: {exc}") from None
    except SystemExit as exc:  # the module would end the command (with its own exit status) at import
        raise AdapterError(AdapterProblem.IMPORT_FAILED, f"--adapter {spec}: importing {module_name} called "
                           f"sys.exit({exc.code!r})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise AdapterError(AdapterProblem.NO_FACTORY, f"--adapter {spec}: {module_name} has no callable {attr!r}")
    return factory


@attrs.frozen
class Adapter:
    """An ``--adapter`` resolved once: the ``module:factory`` text the user gave, the factory it names and the
    protocol that factory serves. ``str()`` is the text, so reports and reproductions show what was typed."""

    spec: str
    factory: AdapterFactory = attrs.field(eq=False)
    protocol: str

    def __str__(self) -> str:
        return self.spec

    def __reduce__(self) -> Any:
        """Pickled as its text (a spawned machine run resolves it again there)."""
        return (resolve, (self.spec,))


def resolve(adapter: str | Adapter | None) -> Adapter | None:
    """``adapter`` as an :class:`Adapter` (None stays None: the reference is the system under test); an
    :class:`Adapter` is returned as it is, so resolving twice imports once."""
    if adapter is None or isinstance(adapter, Adapter):
        return adapter
    factory = load_factory(adapter)
    return Adapter(adapter, factory, adapter_protocol(factory))


def sample_config(protocol: str) -> Any:
    """The config a machine of ``protocol`` passes to the factory."""
    from kvexact.conformance.machines.allocator import MACHINE_CONFIG
    from kvexact.conformance.machines.radix import POOL_SLOTS

    if protocol == "hybrid-cache":
        return HybridCacheConfig()
    return IndexConfig(POOL_SLOTS) if protocol == "prefix-index" else MACHINE_CONFIG


def load_adapter(adapter: str | Adapter, seconds: float | None = None) -> Adapter:
    """``adapter`` resolved and checked: its factory callable as ``factory(config)``, building (within the call
    limit) an object with every method of its protocol, each taking the arguments the machines pass."""
    resolved = resolve(adapter)
    assert resolved is not None
    spec, factory, protocol = resolved.spec, resolved.factory, resolved.protocol
    config = sample_config(protocol)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(config)
        except TypeError as exc:
            raise AdapterError(AdapterProblem.FACTORY_SIGNATURE, f"--adapter {spec}: the factory{signature} cannot "
                               f"be called as factory(config) ({exc})") from None
    try:
        limited_factory(factory, spec, call_seconds(seconds))(config)  # builds one and checks its methods
    except AdapterUnusable as exc:
        raise exc.error from None
    return resolved


@contextmanager
def _limit(seconds: float, what: Callable[[], str], label: str) -> Iterator[None]:
    """Stop the block after ``seconds`` with :class:`AdapterUnusable` (main thread, seconds > 0 only). An
    outer timer (pytest-timeout's, say) is kept: it is re-armed with what is left of it afterwards, and when
    it would fire first, the block runs under it alone."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    outer_delay, outer_interval = signal.getitimer(signal.ITIMER_REAL)
    if outer_delay and outer_delay <= seconds:
        yield
        return

    def overran(signum: int, frame: Any) -> None:
        raise _Overran()

    previous = signal.signal(signal.SIGALRM, overran)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    except _Overran:
        raise AdapterUnusable(AdapterError(AdapterProblem.CALL_TIMEOUT, f"--adapter {label}: {what()} did not return "
                              f"within {seconds:g} s (--call-timeout / {CALL_TIMEOUT_ENV}); it was stopped")) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay:
            left = max(outer_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


class LimitedAdapter:
    """An adapter whose every method call is time-limited; attributes pass through unchanged. ``problems``
    is shared with the factory that built it: after one problem, every call raises it at once."""

    def __init__(self, adapter: Any, label: str, seconds: float, problems: list[AdapterError]):
        self.wrapped = adapter
        self._label = label
        self._seconds = seconds
        self._problems = problems

    @property
    def wrapped_kind(self) -> str:
        return type(self.wrapped).__name__

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.wrapped, name)
        if name.startswith("__") or not callable(value):
            return value

        def call(*args: Any) -> Any:
            if self._problems:
                raise AdapterUnusable(self._problems[0])
            args = freeze(args)  # the adapter gets copies: it cannot change the machine's lists

            def text() -> str:
                return f"{name}({', '.join(map(repr, args))})"

            log_call(text())
            try:
                with _limit(self._seconds, text, self._label):
                    return value(*args)
            except AdapterUnusable as exc:
                self._problems.append(exc.error)
                raise
            except SystemExit as exc:  # an adapter must not end the check (nor pass it by ending it with 0)
                raise AdapterFaultError(AdapterFault.EXITED, f"--adapter {self._label}: {text()} called "
                                        f"sys.exit({exc.code!r}) ({AdapterFault.EXITED.name})") from None

        call.__wrapped__ = value  # type: ignore[attr-defined]  # inspect.signature sees the method's own parameters
        return call


def limited_factory(factory: AdapterFactory, label: str, seconds: float) -> Callable[[Any], LimitedAdapter]:
    """``factory`` whose construction and adapters are time-limited; an exception while building one is
    :class:`AdapterUnusable` (``FACTORY_RAISED``). The wrapper's ``problems`` list holds what went wrong, for
    :func:`first_problem` (Hypothesis may report a ``BaseException`` raised while it builds a machine as
    something else)."""
    problems: list[AdapterError] = []
    protocol = adapter_protocol(factory)
    protocol_check = CHECKS.get(protocol, check_adapter)

    def build(config: Any) -> LimitedAdapter:
        if problems:
            raise AdapterUnusable(problems[0])
        log_build(config)
        try:
            with _limit(seconds, lambda: f"the factory({config!r})", label):
                adapter = factory(config)
        except AdapterUnusable as exc:
            problems.append(exc.error)
            raise
        except Exception as exc:
            problems.append(AdapterError(AdapterProblem.FACTORY_RAISED,
                                         f"--adapter {label}: the factory raised {type(exc).__name__}: {exc}"))
            raise AdapterUnusable(problems[0]) from None
        except SystemExit as exc:
            problems.append(AdapterError(AdapterProblem.FACTORY_RAISED,
                                         f"--adapter {label}: the factory called sys.exit({exc.code!r})"))
            raise AdapterUnusable(problems[0]) from None
        try:  # every adapter it builds has its protocol's methods, each callable as the machines call it
            protocol_check(adapter)
        except AdapterError as exc:
            problems.append(AdapterError(exc.problem, f"--adapter {label}: {exc}"))
            raise AdapterUnusable(problems[0]) from None
        return LimitedAdapter(adapter, label, seconds, problems)

    build.adapter_protocol = protocol  # type: ignore[attr-defined]
    build.problems = problems  # type: ignore[attr-defined]
    return build


def first_problem(factory: Any) -> AdapterError | None:
    """The first problem a :func:`limited_factory` (or one of its adapters) met, if any."""
    problems = getattr(factory, "problems", None)
    return problems[0] if problems else None
