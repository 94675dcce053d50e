"""How a checkpoint's object graph lines up with the objects being restored: names, shapes and
paths of variables, and the lists that hold variables by position (an optimizer's list of the
model's weights, a model's list of layers), whose length tells a weight added or removed from a
reshaped one."""
from __future__ import annotations

import collections
from typing import AbstractSet, Any, NamedTuple, Optional, Sequence

import tensorflow as tf

#: A variable whose saved shape differs from its configured one: the object, both shapes, its path.
Mismatch = tuple[Any, tuple[Any, ...], tuple[Any, ...], str]


class Sides(NamedTuple):
    """Both sides of a restore: the checkpoint's object graph and shapes, and the objects' view and root."""

    graph: Any
    saved_shapes: Any
    view: Any
    root: Any


def variable_name(obj: Any, graph_path: str) -> str:
    """A variable's own name (a Keras variable's ``path``), else its path in the checkpoint."""
    name = getattr(obj, "path", None) or getattr(obj, "name", None)
    return str(name).removesuffix(":0") if name else graph_path


def shape_of(obj: Any) -> tuple[Optional[int], ...]:
    return tuple(tf.TensorShape(obj.shape))


def is_variable(obj: Any) -> bool:
    return isinstance(obj, tf.Variable) or (hasattr(obj, "assign") and hasattr(obj, "shape") and hasattr(obj, "path"))


def object_paths(view: Any, root: Any) -> list[tuple[Any, str]]:
    """Every object under ``root`` with its first path of children's names, breadth first."""
    seen = {id(root)}
    out: list[tuple[Any, str]] = []
    queue: collections.deque[tuple[Any, str]] = collections.deque([(root, "")])
    while queue:
        obj, path = queue.popleft()
        for name, child in view.children(obj).items():
            if id(child) not in seen:
                seen.add(id(child))
                child_path = f"{path}/{name}".lstrip("/")
                out.append((child, child_path))
                queue.append((child, child_path))
    return out


def model_weights(view: Any, root: Any) -> set[int]:
    """The ``id`` of every weight of ``root``'s ``model``."""
    return {id(v) for v in getattr(view.children(root).get("model"), "weights", [])}


class _ResizedList(NamedTuple):
    """A list that tracks variables by position (an optimizer's ``_trainable_variables``...) and is longer
    or shorter in the checkpoint: its path, the shapes of the checkpoint's entries, the configured entries."""

    path: str
    saved: list[Optional[tuple[Any, ...]]]
    configured: list[Any]


def resized_list_clause(sides: Sides, mismatches: list[Mismatch], weights: AbstractSet[int]) -> Optional[str]:
    """When a list of the model's weights, or one holding a mismatch, has another length in the
    checkpoint: both sides' counts and the first weight one side lacks; else None."""
    for path in dict.fromkeys(_weight_lists(sides, weights) + _list_paths(mismatches)):
        resized = _resized_list(sides, path)
        if resized is not None:
            return _count_clause(resized, weights)
    return None


def _weight_lists(sides: Sides, weights: AbstractSet[int]) -> list[str]:
    """The paths of the lists of the model's weights (an optimizer's ``_trainable_variables``...)."""
    return [path for obj, path in object_paths(sides.view, sides.root)
            if (children := sides.view.children(obj)) and all(k.isdigit() and id(v) in weights for k, v in children.items())]


def _list_paths(mismatches: list[Mismatch]) -> list[str]:
    """The paths of the lists that hold ``mismatches`` by position, in their order, once each."""
    parents = (m[3].rpartition("/") for m in mismatches)
    return list(dict.fromkeys(parent for parent, _, position in parents if position.isdigit()))


def _resized_list(sides: Sides, path: str) -> Optional[_ResizedList]:
    """The list at ``path`` (children named by position), when the checkpoint's and the configured differ in length."""
    node, obj = _node_at(sides.graph, path), _object_at(sides.view, sides.root, path)
    if node is None or obj is None:
        return None
    refs = sorted((r for r in node.children if r.local_name.isdigit()), key=lambda r: int(r.local_name))
    saved = [_saved_shape(sides, r.node_id) for r in refs]
    children = sides.view.children(obj)
    configured = [children[k] for k in sorted((k for k in children if k.isdigit()), key=int)]
    return _ResizedList(path, saved, configured) if len(saved) != len(configured) else None


def _node_at(graph: Any, path: str) -> Any:
    """The checkpoint's object at ``path`` (children's names from the root), or None."""
    node = graph.nodes[0]
    for name in path.split("/"):
        node = next((graph.nodes[r.node_id] for r in node.children if r.local_name == name), None)
        if node is None:
            return None
    return node


def _object_at(view: Any, root: Any, path: str) -> Any:
    """The configured object at ``path`` (trackable children's names from ``root``), or None."""
    obj = root
    for name in path.split("/"):
        obj = view.children(obj).get(name)
        if obj is None:
            return None
    return obj


def _saved_shape(sides: Sides, node_id: int) -> Optional[tuple[Any, ...]]:
    """The shape of the variable the checkpoint holds at node ``node_id``; None for another object."""
    for attribute in sides.graph.nodes[node_id].attributes:
        if attribute.name == "VARIABLE_VALUE" and attribute.checkpoint_key in sides.saved_shapes:
            return tuple(sides.saved_shapes[attribute.checkpoint_key])
    return None


def _count_clause(resized: _ResizedList, weights: AbstractSet[int]) -> str:
    """How many variables each side holds, and the first that one side lacks (:func:`_first_extra`)."""
    saved, configured, path = resized.saved, resized.configured, resized.path
    shapes = [shape_of(v) if is_variable(v) else None for v in configured]
    counts = _counts(resized, weights)
    if len(configured) > len(saved):
        i = _first_extra(shapes, saved)
        lacking = None if i is None else f"the checkpoint lacks {variable_name(configured[i], f'{path}/{i}')}"
    else:
        i = _first_extra(saved, shapes)
        lacking = None if i is None else f"this configuration lacks the checkpoint's {_saved_entry(resized, i)}"
    return counts if lacking is None else f"{counts} ({lacking})"


def _counts(resized: _ResizedList, weights: AbstractSet[int]) -> str:
    """Both sides' counts: of the model's weights when the list holds only those (the list's difference
    is the model's), else of the list's entries."""
    saved, configured = len(resized.saved), len(resized.configured)
    if all(id(v) in weights for v in resized.configured):
        return f"it holds {len(weights) + saved - configured} model weights and this configuration {len(weights)}"
    return f"it holds {saved} variables in {resized.path} and this configuration {configured}"


def _first_extra(longer: Sequence[Any], shorter: Sequence[Any]) -> Optional[int]:
    """The position in ``longer`` of the first entry that ``shorter`` lacks, when ``shorter`` is ``longer``
    with entries taken out (the first position where they differ); None when no such alignment exists."""
    matched, first = 0, None
    for i, item in enumerate(longer):
        if matched < len(shorter) and shorter[matched] == item:
            matched += 1
        elif first is None:
            first = i
    return first if matched == len(shorter) else None


def _saved_entry(resized: _ResizedList, i: int) -> str:
    """Entry ``i`` of the checkpoint's list, which has no counterpart here: its shape and the configured
    variable it follows (the checkpoint keeps no Keras path for it)."""
    shape, configured, path = resized.saved[i], resized.configured, resized.path
    what = f"variable of shape {list(shape)}" if shape is not None else f"object {path}/{i}"
    if i == 0:
        return f"{what} before {variable_name(configured[0], f'{path}/0')}" if configured else what
    return f"{what} after {variable_name(configured[i - 1], f'{path}/{i - 1}')}"
