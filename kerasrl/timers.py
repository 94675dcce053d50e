"""Hierarchical wall-clock timers and gauges (ML-Agents 0.9's timing tree).

A ``TimerStack`` holds a tree of ``TimerNode``s: entering ``hierarchical_timer("name")`` makes
"name" a child of the innermost open timer, so the tree records where time went as the code
nests. Gauges record named scalar values (latest, min, max, count). The module keeps one
global stack that ``hierarchical_timer``, ``timed``, ``set_gauge`` and friends use by default.

The timers wrap hot loops, so entering and leaving one is kept to a dictionary lookup, two
``time.perf_counter`` calls and a few attribute updates. Timers are not thread-safe: use one
stack per thread (``thread_timer_stack`` makes a stack the default of the thread that enters it)
or per process, merging the trees with ``merge_worker_tree``.
"""
from __future__ import annotations

import functools
import json
import math
import os
import tempfile
import threading
from contextlib import contextmanager
from time import perf_counter
from types import TracebackType
from typing import Any, Callable, Iterator, Mapping, Optional, TypeVar, Union

__all__ = [
    "GaugeNode", "TimerNode", "TimerStack", "get_timer_root", "get_timer_stack", "get_timer_tree",
    "hierarchical_timer", "merge_worker_tree", "reset_timers", "set_gauge", "thread_timer_stack", "timed",
    "write_timer_tree",
]


class TimerNode:
    """Accumulated time of one named block at one place in the tree."""

    __slots__ = ("children", "total", "count", "is_parallel")

    def __init__(self) -> None:
        self.children: dict[str, TimerNode] = {}
        self.total: float = 0.0
        self.count: int = 0
        self.is_parallel: bool = False

    def get_child(self, name: str) -> "TimerNode":
        """The child called ``name``, created (empty) on first use."""
        child = self.children.get(name)
        if child is None:
            child = self.children[name] = TimerNode()
        return child

    def add_time(self, elapsed: float) -> None:
        self.total += elapsed
        self.count += 1

    def merge(self, other: "TimerNode", root_name: Optional[str] = None, is_parallel: bool = True) -> None:
        """Add ``other``'s totals and counts into this node (or into child ``root_name``), recursively.

        ``is_parallel`` marks the merged nodes as having run alongside the main process (worker
        time), so their totals need not fit inside the parent's total.
        """
        node = self.get_child(root_name) if root_name is not None else self
        node.total += other.total
        node.count += other.count
        node.is_parallel |= is_parallel
        for name, child in other.children.items():
            node.get_child(name).merge(child, is_parallel=is_parallel)

    @property
    def self_time(self) -> float:
        """Time not accounted for by any child: ``max(0, total − Σ children totals)``."""
        return max(0.0, self.total - sum(c.total for c in self.children.values()))

    def to_dict(self, name: str) -> dict[str, Any]:
        """This subtree in ML-Agents 0.9's JSON format (children as a list in insertion order)."""
        out: dict[str, Any] = {"name": name, "total": self.total, "count": self.count}
        if self.is_parallel:
            out["is_parallel"] = True
        out["self"] = self.self_time
        if self.children:
            out["children"] = [child.to_dict(n) for n, child in self.children.items()]
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "TimerNode":
        """Rebuild a subtree from ``to_dict`` output (``self`` is derived, so it is ignored)."""
        node = TimerNode()
        node.total = float(data.get("total", 0.0))
        node.count = int(data.get("count", 0))
        node.is_parallel = bool(data.get("is_parallel", False))
        children = data.get("children", [])
        if isinstance(children, Mapping):
            children = [dict(c, name=n) for n, c in children.items()]
        for child in children:
            node.children[str(child["name"])] = TimerNode.from_dict(child)
        return node

    def __repr__(self) -> str:
        return f"TimerNode(total={self.total:.6f}, count={self.count}, children={list(self.children)})"


class GaugeNode:
    """A named scalar: its latest value, the min and max seen, and how often it was set."""

    __slots__ = ("value", "min_value", "max_value", "count")

    def __init__(self, value: float) -> None:
        self.value = float(value)
        self.min_value = self.value
        self.max_value = self.value
        self.count = 1

    def update(self, new_value: float) -> None:
        new_value = float(new_value)
        if new_value < self.min_value:
            self.min_value = new_value
        if new_value > self.max_value:
            self.max_value = new_value
        self.value = new_value
        self.count += 1

    def merge(self, other: "GaugeNode") -> None:
        """Fold in another process's gauge: min of mins, max of maxes, counts added, its value as latest."""
        self.min_value = min(self.min_value, other.min_value)
        self.max_value = max(self.max_value, other.max_value)
        self.count += other.count
        self.value = other.value

    def as_dict(self) -> dict[str, Union[float, int]]:
        return {"value": self.value, "min": self.min_value, "max": self.max_value, "count": self.count}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "GaugeNode":
        node = GaugeNode(data["value"])
        node.min_value = float(data.get("min", node.value))
        node.max_value = float(data.get("max", node.value))
        node.count = int(data.get("count", 1))
        return node

    def __repr__(self) -> str:
        return f"GaugeNode({self.as_dict()})"


class TimerStack:
    """A timer tree, the chain of currently open timers, the start time, and the gauges."""

    __slots__ = ("root", "stack", "start_time", "gauges")

    def __init__(self) -> None:
        self.root = TimerNode()
        self.stack: list[TimerNode] = [self.root]
        self.start_time = perf_counter()
        self.gauges: dict[str, GaugeNode] = {}

    def reset(self) -> None:
        """Forget all timings and gauges and restart the clock."""
        self.root = TimerNode()
        self.stack = [self.root]
        self.start_time = perf_counter()
        self.gauges = {}

    def push(self, name: str) -> TimerNode:
        """Open timer ``name`` under the innermost open timer and return its node."""
        node = self.stack[-1].get_child(name)
        self.stack.append(node)
        return node

    def pop(self) -> None:
        self.stack.pop()

    def get_root(self) -> TimerNode:
        """The root, with its total set to the time since the stack started and a count of 1."""
        self.root.total = perf_counter() - self.start_time
        self.root.count = 1
        return self.root

    def set_gauge(self, name: str, value: float) -> None:
        """Record ``value`` for gauge ``name``; NaN is ignored."""
        if math.isnan(value):
            return
        gauge = self.gauges.get(name)
        if gauge is None:
            self.gauges[name] = GaugeNode(value)
        else:
            gauge.update(value)

    def merge_gauges(self, gauges: Mapping[str, GaugeNode]) -> None:
        """Fold gauges from another stack (e.g. a worker process) into this one."""
        for name, other in gauges.items():
            mine = self.gauges.get(name)
            if mine is None:
                self.gauges[name] = GaugeNode.from_dict(other.as_dict())
            else:
                mine.merge(other)

    def get_timing_tree(self) -> dict[str, Any]:
        """The whole tree in ML-Agents 0.9's JSON format (root named "root", gauges listed first)."""
        root = self.get_root()
        out: dict[str, Any] = {"name": "root"}
        if self.gauges:
            out["gauges"] = [dict(name=name, **g.as_dict()) for name, g in self.gauges.items()]
        out.update(root.to_dict("root"))
        return out


class hierarchical_timer:  # noqa: N801 - used like a function, as in ML-Agents 0.9
    """Context manager that times its block as child ``name`` of the innermost open timer.

    ``with hierarchical_timer("name") as node:`` yields the ``TimerNode``. The elapsed time is
    added and the timer closed even when the block raises. A class rather than a generator
    context manager keeps enter/exit cheap.
    """

    __slots__ = ("_name", "_stack", "_node", "_start")

    def __init__(self, name: str, timer_stack: Optional[TimerStack] = None) -> None:
        self._name = name
        self._stack = timer_stack if timer_stack is not None else (_thread.stack or _global_timer_stack)
        self._node: Optional[TimerNode] = None
        self._start = 0.0

    def __enter__(self) -> TimerNode:
        node = self._node = self._stack.push(self._name)
        self._start = perf_counter()
        return node

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        elapsed = perf_counter() - self._start
        node = self._node
        node.total += elapsed  # type: ignore[union-attr]
        node.count += 1  # type: ignore[union-attr]
        stack = self._stack.stack
        if len(stack) > 1:  # the stack may have been reset inside the block
            stack.pop()


F = TypeVar("F", bound=Callable[..., Any])


def timed(func: F) -> F:
    """Decorator: time every call of ``func`` on the global stack under ``func.__qualname__``."""
    name = func.__qualname__

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with hierarchical_timer(name):
            return func(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


_global_timer_stack = TimerStack()


class _ThreadStack(threading.local):
    """The stack that a thread's timers use by default (None: the global one)."""

    stack: Optional[TimerStack] = None


_thread = _ThreadStack()


@contextmanager
def thread_timer_stack(stack: TimerStack) -> Iterator[TimerStack]:
    """Make ``stack`` the default of the calling thread's timers and gauges while the block runs
    (a thread of its own, e.g. a trainer's update thread, then keeps a tree of its own)."""
    previous, _thread.stack = _thread.stack, stack
    try:
        yield stack
    finally:
        _thread.stack = previous


def get_timer_stack() -> TimerStack:
    """The global stack (e.g. for a worker process to send its tree and gauges back)."""
    return _global_timer_stack


def set_gauge(name: str, value: float, timer_stack: Optional[TimerStack] = None) -> None:
    (timer_stack or _thread.stack or _global_timer_stack).set_gauge(name, value)


def get_timer_tree(timer_stack: Optional[TimerStack] = None) -> dict[str, Any]:
    """The tree of ``timer_stack`` (default: the global one) as a JSON-ready dict."""
    return (timer_stack or _global_timer_stack).get_timing_tree()


def get_timer_root(timer_stack: Optional[TimerStack] = None) -> TimerNode:
    return (timer_stack or _global_timer_stack).get_root()


def reset_timers(timer_stack: Optional[TimerStack] = None) -> None:
    (timer_stack or _global_timer_stack).reset()


def merge_worker_tree(
    tree: Union[TimerStack, TimerNode, Mapping[str, Any]],
    root_name: Optional[str] = "worker_root",
    into: Optional[TimerNode] = None,
    timer_stack: Optional[TimerStack] = None,
) -> None:
    """Merge a tree received from a worker process into ``timer_stack`` (default: the global one).

    ``tree`` is a worker's ``TimerStack`` (root and gauges), its root ``TimerNode`` (no gauges)
    or the dict of ``get_timer_tree`` (with its "gauges" list, if any). The timings are merged
    with ``is_parallel=True`` into child ``root_name`` of ``into`` (default: the innermost
    open timer, so calling this inside ``hierarchical_timer("workers")`` files them there); the
    gauges merge into the stack's gauges (min of mins, max of maxes, counts added, the
    worker's value as the latest).
    """
    stack = timer_stack or _global_timer_stack
    gauges: dict[str, GaugeNode] = {}
    if isinstance(tree, TimerStack):
        node = tree.get_root()
        gauges = tree.gauges
    elif isinstance(tree, TimerNode):
        node = tree
    else:
        node = TimerNode.from_dict(tree)
        raw = tree.get("gauges", [])
        if isinstance(raw, Mapping):
            gauges = {str(n): GaugeNode.from_dict(g) for n, g in raw.items()}
        else:
            gauges = {str(g["name"]): GaugeNode.from_dict(g) for g in raw}
    target = into if into is not None else stack.stack[-1]
    target.merge(node, root_name=root_name, is_parallel=True)
    stack.merge_gauges(gauges)


def write_timer_tree(path: Union[str, os.PathLike[str]], timer_stack: Optional[TimerStack] = None) -> None:
    """Write the timer tree as JSON (indent 2), atomically: a temp file renamed over ``path``."""
    tree = get_timer_tree(timer_stack)
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".timers-", suffix=".json.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(tree, f, indent=2)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
