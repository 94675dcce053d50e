"""Timers and gauges."""
from __future__ import annotations

import json
import math
import pickle
import time

import pytest

from kerasrl import timers
from kerasrl.timers import (
    GaugeNode,
    TimerNode,
    TimerStack,
    hierarchical_timer,
    merge_worker_tree,
    timed,
)


@pytest.fixture(autouse=True)
def _fresh_global_stack() -> None:
    timers.reset_timers()


def _child(tree: dict, name: str) -> dict:
    return next(c for c in tree.get("children", []) if c["name"] == name)


def test_nesting_counts_and_totals() -> None:
    stack = TimerStack()
    for _ in range(3):
        with hierarchical_timer("outer", stack):
            with hierarchical_timer("inner", stack):
                time.sleep(0.001)
            with hierarchical_timer("other", stack):
                pass
    outer = stack.root.children["outer"]
    assert outer.count == 3
    assert list(outer.children) == ["inner", "other"]
    inner = outer.children["inner"]
    assert inner.count == 3
    assert inner.total >= 0.003
    assert outer.total >= inner.total + outer.children["other"].total
    assert stack.stack == [stack.root]
    root = stack.get_root()
    assert root.count == 1
    assert root.total >= outer.total


def test_same_name_at_different_depths_is_a_different_node() -> None:
    stack = TimerStack()
    with hierarchical_timer("a", stack):
        with hierarchical_timer("a", stack):
            pass
    assert stack.root.children["a"].children["a"].count == 1
    assert stack.root.children["a"].count == 1


def test_exception_still_records_time_and_pops() -> None:
    stack = TimerStack()
    with pytest.raises(ValueError):
        with hierarchical_timer("boom", stack):
            time.sleep(0.001)
            raise ValueError("x")
    assert stack.stack == [stack.root]
    assert stack.root.children["boom"].count == 1
    assert stack.root.children["boom"].total >= 0.001


def test_context_manager_yields_node_and_global_default() -> None:
    with hierarchical_timer("g") as node:
        assert isinstance(node, TimerNode)
    assert timers.get_timer_root().children["g"] is node


def test_reset_inside_block_is_harmless() -> None:
    with hierarchical_timer("x"):
        timers.reset_timers()
    with hierarchical_timer("y"):
        pass
    assert list(timers.get_timer_root().children) == ["y"]


def test_timed_decorator_uses_qualname() -> None:
    class Thing:
        @timed
        def work(self, x: int) -> int:
            return x + 1

    assert Thing().work(1) == 2
    assert Thing().work(2) == 3
    name = Thing.work.__qualname__
    assert name.endswith("Thing.work")
    assert timers.get_timer_root().children[name].count == 2


def test_gauges_ignore_nan_and_track_min_max_count() -> None:
    timers.set_gauge("g", 3.0)
    timers.set_gauge("g", float("nan"))
    timers.set_gauge("g", -1.0)
    timers.set_gauge("g", 2.0)
    timers.set_gauge("only_nan", math.nan)
    gauges = timers.get_timer_stack().gauges
    assert "only_nan" not in gauges
    assert gauges["g"].as_dict() == {"value": 2.0, "min": -1.0, "max": 3.0, "count": 3}
    g = GaugeNode(5)
    assert g.as_dict() == {"value": 5.0, "min": 5.0, "max": 5.0, "count": 1}


def test_timer_node_merge() -> None:
    a, b = TimerNode(), TimerNode()
    a.get_child("x").add_time(1.0)
    b.get_child("x").add_time(2.0)
    b.get_child("x").get_child("y").add_time(0.5)
    b.total, b.count = 3.0, 1
    a.merge(b, root_name="w", is_parallel=True)
    w = a.children["w"]
    assert (w.total, w.count, w.is_parallel) == (3.0, 1, True)
    assert w.children["x"].children["y"].is_parallel
    a.merge(b, is_parallel=False)
    assert a.children["x"].total == 3.0 and a.children["x"].count == 2
    assert not a.children["x"].is_parallel


@pytest.mark.parametrize("form", ["stack", "dict", "pickled_stack", "json"])
def test_merge_worker_tree_with_gauges(form: str) -> None:
    main = TimerStack()
    main.set_gauge("shared", 1.0)
    main.set_gauge("shared", 2.0)
    worker = TimerStack()
    with hierarchical_timer("env.step", worker):
        pass
    with hierarchical_timer("env.step", worker):
        pass
    worker.set_gauge("shared", 0.5)
    worker.set_gauge("shared", 1.5)
    worker.set_gauge("worker_only", 7.0)
    payload: object = worker
    if form == "dict":
        payload = worker.get_timing_tree()
    elif form == "pickled_stack":
        payload = pickle.loads(pickle.dumps(worker))
    elif form == "json":
        payload = json.loads(json.dumps(worker.get_timing_tree()))
    for _ in range(2):
        with hierarchical_timer("workers", main) as node:
            merge_worker_tree(payload, timer_stack=main)  # type: ignore[arg-type]
    merged = node.children["worker_root"]
    assert merged.is_parallel and merged.count == 2
    assert merged.children["env.step"].count == 4
    assert merged.children["env.step"].is_parallel
    shared = main.gauges["shared"].as_dict()
    assert shared == {"value": 1.5, "min": 0.5, "max": 2.0, "count": 6}
    assert main.gauges["worker_only"].as_dict() == {"value": 7.0, "min": 7.0, "max": 7.0, "count": 2}
    # the main stack's copy is independent of the worker's gauge objects
    worker.set_gauge("worker_only", 100.0)
    assert main.gauges["worker_only"].max_value == 7.0


def test_json_format(tmp_path) -> None:
    stack = TimerStack()
    with hierarchical_timer("a", stack):
        with hierarchical_timer("b", stack):
            time.sleep(0.001)
        with hierarchical_timer("c", stack):
            pass
    with hierarchical_timer("z", stack):
        pass
    stack.root.children["z"].is_parallel = True
    tree = stack.get_timing_tree()
    assert list(tree) == ["name", "total", "count", "self", "children"]  # no gauges, not parallel
    assert tree["name"] == "root" and tree["count"] == 1
    assert [c["name"] for c in tree["children"]] == ["a", "z"]
    a = _child(tree, "a")
    assert set(a) == {"name", "total", "count", "self", "children"}
    assert [c["name"] for c in a["children"]] == ["b", "c"]
    b = _child(a, "b")
    assert "children" not in b and "is_parallel" not in b
    assert b["self"] == pytest.approx(b["total"])
    assert a["self"] == pytest.approx(max(0.0, a["total"] - b["total"] - _child(a, "c")["total"]))
    assert _child(tree, "z")["is_parallel"] is True
    assert tree["self"] == pytest.approx(max(0.0, tree["total"] - a["total"] - _child(tree, "z")["total"]))

    stack.set_gauge("q", 4.0)
    tree = stack.get_timing_tree()
    assert list(tree)[:2] == ["name", "gauges"]
    assert tree["gauges"] == [{"name": "q", "value": 4.0, "min": 4.0, "max": 4.0, "count": 1}]

    path = tmp_path / "timers.json"
    timers.write_timer_tree(path, stack)
    on_disk = json.loads(path.read_text())
    assert on_disk["children"][0]["name"] == "a"
    assert path.read_text().startswith('{\n  "name": "root"')
    assert [p.name for p in tmp_path.iterdir()] == ["timers.json"]


def test_self_time_never_negative() -> None:
    node = TimerNode()
    node.total = 1.0
    node.get_child("parallel").total = 5.0
    assert node.to_dict("n")["self"] == 0.0


def test_from_dict_round_trip() -> None:
    stack = TimerStack()
    with hierarchical_timer("a", stack):
        with hierarchical_timer("b", stack):
            pass
    tree = stack.get_timing_tree()
    rebuilt = TimerNode.from_dict(tree)
    assert rebuilt.to_dict("root") == {k: v for k, v in tree.items() if k != "gauges"}
