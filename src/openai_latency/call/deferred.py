"""Stream ends that the garbage collector starts, carried out on a worker thread instead.

A stream dropped unread and unclosed ends in a finalizer: the weakref callback on its HTTP response
(:func:`.operation.Operation.returned`) or the ``GeneratorExit`` of its wrapped generator
(:mod:`.streams`). Finalizers run inside whatever allocation set the collector off, in any thread.
Ending an operation there would run span processors, metric readers and exporters in the middle of
someone else's code: ``SimpleSpanProcessor`` attaches a context, and on CPython <= 3.11 setting a
``ContextVar`` from a collection that interrupted ``ContextVar.set`` frees the context's data while
it is still being read (CPython gh-148891: a segmentation fault); other processors take locks the
interrupted code may hold. So a finalizer only calls :func:`abandon`, which puts the operation
on a :class:`queue.SimpleQueue` (its ``put`` is reentrant and documented as safe in weakref callbacks
and ``__del__``), and a daemon thread ends it. The end time is the stream's last activity, recorded
before, so the hand-over changes when the span is exported, never what it says.

The thread starts at the first stream (:func:`watch`, outside any finalizer). At interpreter exit the
streams still open are ended as abandoned and the queue is drained, before the SDK's providers shut
down (their exit handlers were registered earlier and run later). :func:`flush` waits for everything
handed over so far (tests, or an application that wants it before ``force_flush``). A forked child
drops what its parent had queued (those operations are the parent's to end) and starts its own thread.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import weakref
from typing import Protocol, TypeAlias

from .._guard import report
from ..clock import clock
from ..model import StreamStats


class Ending(Protocol):
    """What this module needs of an :class:`.operation.Operation` (which imports this module)."""

    stream: StreamStats

    @property
    def finished(self) -> bool: ...

    def finish(self, end_ns: int, *, end_state: str) -> None: ...


EXIT_TIMEOUT_S = 5.0
"""How long the exit handler waits for the worker's current end before giving up."""

_Item: TypeAlias = "tuple[Ending, int] | threading.Event"  # (operation, its end), or a flush mark

_queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
_worker: threading.Thread | None = None
_start_lock = threading.Lock()
_exit_registered = False
_open: weakref.WeakSet[Ending] = weakref.WeakSet()  # streaming operations, for the exit handler


def watch(response: object, op: Ending) -> None:
    """``op`` returned a stream over ``response``: if nobody closes it, the collector will notice.
    Call outside finalizers (the first call starts the worker)."""
    if _worker is None:
        _start()
    _open.add(op)
    weakref.finalize(response, abandon, op)


def abandon(op: Ending) -> None:
    """``op``'s stream was dropped unread and unclosed: it ends as abandoned, at its last activity,
    on the worker thread. Safe inside any finalizer: a clock read and one reentrant queue put."""
    try:
        if not op.finished:
            _queue.put((op, _last_activity(op)))
    except Exception:
        report("deferred.abandon")


def flush(timeout: float | None = None) -> bool:
    """Waits until every end handed over before this call is done; False if ``timeout`` ran out.

    Without a worker (none started, or it died) the queue is drained in the calling thread."""
    worker = _worker
    if worker is None or not worker.is_alive():
        _drain()
        return True
    done = threading.Event()
    _queue.put(done)
    return done.wait(timeout)


def _start() -> None:
    global _worker, _exit_registered
    with _start_lock:
        if _worker is not None:
            return
        if not _exit_registered:  # first: without a thread, the exit handler still ends what is queued
            _exit_registered = True
            atexit.register(_at_exit)
        worker = threading.Thread(target=_run, name="openai-latency-stream-ends", daemon=True)
        worker.start()
        _worker = worker


def _run() -> None:
    while True:
        _handle(_queue.get())


def _drain() -> None:
    while True:
        try:
            item = _queue.get_nowait()
        except queue.Empty:
            return
        _handle(item)


def _handle(item: _Item) -> None:
    if isinstance(item, threading.Event):
        item.set()
        return
    op, end_ns = item
    try:
        op.finish(end_ns=end_ns, end_state="abandoned")
    except Exception:  # finish catches its own errors; this keeps the worker alive regardless
        report("deferred stream end")


def _at_exit() -> None:
    """Streams still open at exit were abandoned; end them and what the queue holds, here and now."""
    try:
        for op in list(_open):
            if not op.finished:
                op.finish(end_ns=_last_activity(op), end_state="abandoned")
        _drain()
        flush(EXIT_TIMEOUT_S)  # the end the worker may be in the middle of
    except Exception:
        report("deferred exit")


def _last_activity(op: Ending) -> int:
    return op.stream.last_activity_ns or clock()


def _after_fork_in_child() -> None:
    global _queue, _worker, _start_lock, _open
    _queue = queue.SimpleQueue()
    _open = weakref.WeakSet()
    _worker = None
    _start_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
