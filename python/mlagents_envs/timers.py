"""Hierarchical timers, as in mlagents_envs 0.28: ``hierarchical_timer(name)`` times a block
under the block around it, ``@timed`` times a function by its name, ``get_timer_tree()`` gives
the tree with total seconds and counts, gauges and metadata."""

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Generator, Optional, TypeVar


class TimerNode:
    """One timed block: its children, total seconds and how often it ran."""

    __slots__ = ["children", "total", "count", "is_parallel"]

    def __init__(self):
        self.children: Dict[str, "TimerNode"] = {}
        self.total: float = 0.0
        self.count: int = 0
        self.is_parallel = False

    def get_child(self, name: str) -> "TimerNode":
        """The child ``name``, made on first use."""
        return self.children.setdefault(name, TimerNode())

    def add_time(self, elapsed: float) -> None:
        self.total += elapsed
        self.count += 1

    def merge(self, other: "TimerNode", root_name: Optional[str] = None, is_parallel: bool = True) -> None:
        """Adds ``other``'s times (under ``root_name`` if given)."""
        node = self.get_child(root_name) if root_name else self
        node.total += other.total
        node.count += other.count
        node.is_parallel |= is_parallel
        for name, child in other.children.items():
            node.get_child(name).merge(child, is_parallel=is_parallel)


class GaugeNode:
    """A value's latest, minimum, maximum and count."""

    __slots__ = ["value", "min_value", "max_value", "count", "_timestamp"]

    def __init__(self, value: float):
        self.value = self.min_value = self.max_value = value
        self.count = 1
        self._timestamp = time.time()

    def update(self, value: float) -> None:
        self.min_value = min(self.min_value, value)
        self.max_value = max(self.max_value, value)
        self.value = value
        self.count += 1

    def as_dict(self) -> Dict[str, float]:
        return {"value": self.value, "min": self.min_value, "max": self.max_value, "count": self.count}


class TimerStack:
    """The timers of one thread."""

    __slots__ = ["root", "stack", "start_time", "gauges", "metadata"]

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.root = TimerNode()
        self.stack = [self.root]
        self.start_time = time.perf_counter()
        self.gauges: Dict[str, GaugeNode] = {}
        self.metadata: Dict[str, str] = {}

    def push(self, name: str) -> TimerNode:
        node = self.stack[-1].get_child(name)
        self.stack.append(node)
        return node

    def pop(self) -> None:
        self.stack.pop()

    def get_root(self) -> TimerNode:
        """The root with the time since the stack started."""
        self.root.total = time.perf_counter() - self.start_time
        self.root.count = 1
        return self.root

    def get_timing_tree(self, node: Optional[TimerNode] = None) -> Dict[str, Any]:
        """The tree as nested dicts: total, count, self (time outside children), children."""
        if node is None:
            node = self.get_root()
            tree: Dict[str, Any] = {"name": "root"}
            if self.gauges:
                tree["gauges"] = {name: gauge.as_dict() for name, gauge in self.gauges.items()}
            if self.metadata:
                self.metadata["end_time_seconds"] = str(int(time.time()))
                tree["metadata"] = self.metadata
        else:
            tree = {}
        tree["total"] = node.total
        tree["count"] = node.count
        if node.is_parallel:
            tree["is_parallel"] = True
        children = {name: self.get_timing_tree(child) for name, child in node.children.items()}
        tree["self"] = max(0.0, node.total - sum(child["total"] for child in children.values()))
        if children:
            tree["children"] = children
        return tree

    def set_gauge(self, name: str, value: float) -> None:
        if name in self.gauges:
            self.gauges[name].update(value)
        else:
            self.gauges[name] = GaugeNode(value)

    def add_metadata(self, key: str, value: str) -> None:
        self.metadata[key] = value


_thread_timer_stacks: Dict[int, TimerStack] = {}


def _get_thread_timer() -> TimerStack:
    ident = threading.get_ident()
    if ident not in _thread_timer_stacks:
        _thread_timer_stacks[ident] = TimerStack()
    return _thread_timer_stacks[ident]


def get_timer_stack_for_thread(t: threading.Thread) -> Optional[TimerStack]:
    """The timers of thread ``t``, if it timed anything."""
    return _thread_timer_stacks.get(t.ident) if t.ident is not None else None


@contextmanager
def hierarchical_timer(name: str, timer_stack: Optional[TimerStack] = None) -> Generator:
    """Times the block under the innermost block being timed."""
    stack = timer_stack or _get_thread_timer()
    node = stack.push(name)
    start = time.perf_counter()
    try:
        yield node
    finally:
        node.add_time(time.perf_counter() - start)
        stack.pop()


FuncT = TypeVar("FuncT", bound=Callable[..., Any])


def timed(func: FuncT) -> FuncT:
    """Times every call of ``func`` under its qualified name."""

    def wrapped(*args, **kwargs):
        with hierarchical_timer(func.__qualname__):
            return func(*args, **kwargs)

    wrapped.__name__ = func.__name__
    wrapped.__qualname__ = func.__qualname__
    wrapped.__doc__ = func.__doc__
    return wrapped  # type: ignore


def set_gauge(name: str, value: float, timer_stack: Optional[TimerStack] = None) -> None:
    """Records a value of gauge ``name``."""
    (timer_stack or _get_thread_timer()).set_gauge(name, value)


def add_metadata(key: str, value: str, timer_stack: Optional[TimerStack] = None) -> None:
    """Records a metadata entry."""
    (timer_stack or _get_thread_timer()).add_metadata(key, value)


def get_timer_tree(timer_stack: Optional[TimerStack] = None) -> Dict[str, Any]:
    """This thread's timers as nested dicts."""
    return (timer_stack or _get_thread_timer()).get_timing_tree()


def get_timer_root(timer_stack: Optional[TimerStack] = None) -> TimerNode:
    """This thread's root timer."""
    return (timer_stack or _get_thread_timer()).get_root()


def reset_timers(timer_stack: Optional[TimerStack] = None) -> None:
    """Clears this thread's timers."""
    (timer_stack or _get_thread_timer()).reset()
