"""Checkpoints of a trainer's TensorFlow state: weights, optimizer slots, normalizer, counters.

A checkpoint is complete or absent, and a run resumes from the newest intact one.

What TensorFlow 2.21's ``CheckpointManager.save`` writes for ``model-N`` (observed by listing
the folder during saves, and in ``MergeBundles``), in order:

1. ``model-N_temp/part-00000-of-00001.{data-00000-of-00001,index}.tempstate<random>``, each
   renamed (atomically) to drop the ``.tempstate`` suffix;
2. ``MergeV2Checkpoints``: the data file is renamed to ``model-N.data-00000-of-00001``, then
   ``model-N.index`` is written in place (*not* atomically) and ``model-N_temp/`` is removed;
3. the ``checkpoint`` state file, through ``checkpoint.tmp<hex>`` and a rename (atomic), once
   before deleting the checkpoints beyond ``keep`` and once after.

So a process killed mid-save can leave a ``model-N_temp/`` folder, ``*.tempstate*`` and
``checkpoint.tmp*`` files, a ``model-N.data-*`` without its index, or a ``model-N.index``
cut short; the state file itself is always whole (TF writes it atomically, so we do not
rewrite it on each save) and still names the previous checkpoints, which nothing deletes
before the new one is recorded. The saver removes those leftovers before its first save
(not when it is created: a process that only restores must not touch a folder another
process is writing), adopts checkpoints the state file does not list (a killed save's, or
all of them when the state file is unreadable) so that ``keep`` applies to them, and
:meth:`CheckpointSaver.restore` checks every tensor of a checkpoint before using it. A save that
fails (a full disk, a folder that cannot be written) removes what it added and raises
:class:`CheckpointWriteError`, one line naming the folder and the cause.

Limitation: saving a step that already has a checkpoint (TF overwrites ``model-N`` in
place) leaves that one checkpoint damaged if the process is killed in the middle; older
checkpoints stay intact, so with ``keep >= 2`` a restore falls back to the previous one.

The folder's files are handled in :mod:`kerasrl.trainers.checkpoint_folder`, the writes beside the
checkpoints (write errors, the behavior record, weights export) in
:mod:`kerasrl.trainers.checkpoint_writes`; their public names are importable from here too.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import shutil
from typing import AbstractSet, Any, Callable, Mapping, NamedTuple, Optional, Sequence

import tensorflow as tf
from google.protobuf.message import DecodeError
from google.protobuf.text_format import ParseError
from tensorflow.core.protobuf import trackable_object_graph_pb2

from kerasrl import distribute
from kerasrl.exception import UnityTrainerException, describe
from kerasrl.interrupts import sigint_deferred
from kerasrl.trainers.checkpoint_folder import (
    CHECKPOINT_NAME,
    STALE_NAMES,
    STATE_FILE,
    adopt_untracked,
    checkpoint_candidates,
    folder_names,
    initialize_from_advice,
    read_state,
    remove_stale_files,
    state_prefixes,
    write_state,
)
from kerasrl.trainers.checkpoint_graph import (
    Mismatch,
    Sides,
    is_variable,
    model_weights,
    object_paths,
    resized_list_clause,
    shape_of,
    variable_name,
)
from kerasrl.trainers.checkpoint_writes import (
    BEHAVIOR_FILE,
    WRITE_ERRORS,
    CheckpointWriteError,
    export_weights,
    read_behavior_record,
    write_failure,
    write_json_atomically,
)

__all__ = [
    "BEHAVIOR_FILE", "CHECKPOINT_NAME", "INITIALIZE_FIX", "RESUME_FIX", "RUN_ID_ADVICE", "STATE_FILE", "WRITE_ERRORS",
    "CheckpointMismatch", "CheckpointSaver", "CheckpointWriteError", "LateState",
    "adopt_untracked", "check_fit", "checkpoint_candidates", "export_weights", "initialize_from_advice",
    "read_behavior_record", "read_state", "remove_stale_files", "verify_checkpoint", "write_failure",
    "write_json_atomically", "write_state",
]

logger = logging.getLogger("kerasrl.trainers")

#: What to check when a model folder holds no checkpoint, for kerasrl-learn (--resume and the like);
#: other commands pass their own advice to :meth:`CheckpointSaver.restore`.
RUN_ID_ADVICE = "Make sure you specified the right --run-id."
#: How to fix a checkpoint that does not fit the configuration, for kerasrl-learn (--resume);
#: --initialize-from passes :func:`initialize_from_advice`'s instead.
RESUME_FIX = "resume with the run's settings, or start afresh with --force or a new --run-id."
INITIALIZE_FIX = ("use the network settings of the run it initializes from (hidden_units, num_layers, ...), "
                  "or drop --initialize-from.")
#: What reading or restoring a damaged checkpoint raises in TF 2.21: ``OpError`` (its
#: ``DataLossError``, ``NotFoundError``...) for a bad index, a checksum mismatch or a missing
#: file, ``IndexError`` ("Read less bytes than requested") for a truncated data file,
#: ``AssertionError`` from ``assert_existing_objects_matched``, protobuf's errors for a bad
#: object graph.
_RESTORE_ERRORS = (tf.errors.OpError, ValueError, IndexError, KeyError, AssertionError, DecodeError, ParseError,
                   OSError)


class CheckpointMismatch(UnityTrainerException):
    """An intact checkpoint that does not fit the objects being restored (a setting that shapes
    the model changed since it was saved): one line naming the variable and both shapes (say
    ``hidden_units`` changed), or both sides' numbers of weights and the first that one of them
    lacks (say ``action_bias`` changed), or what the checkpoint has no value for."""



class _DamagedCheckpoint(Exception):
    """A checkpoint could not be used: ``file`` is the damaged file, ``reason`` one line."""

    def __init__(self, file: str, error: BaseException) -> None:
        super().__init__(file)
        self.file = file
        self.reason = describe(error, 200)



# -- the saver -------------------------------------------------------------------------
class LateState(NamedTuple):
    """Variables that checkpoints of an older kerasrl do not hold, and how to fill them when
    such a checkpoint is restored (``fill``), so that its run still resumes. ``what`` and
    ``filled_as`` name them and their new values in the warning."""

    what: str
    variables: Sequence[Any]
    fill: Callable[[], None]
    filled_as: str


class CheckpointSaver:
    """Saves and restores ``objects`` (trackable TF/Keras objects) plus the trainer's step and
    update count in ``model_path``, keeping the newest ``keep`` checkpoints. ``behavior_record``
    (JSON values) is written beside them at the first save, for ``kerasrl export``."""

    def __init__(self, model_path: str, keep: int, behavior_record: Optional[Mapping[str, Any]] = None,
                 **objects: Any) -> None:
        self.model_path = model_path
        #: What checkpoints of an older kerasrl lack, and how restoring one fills it.
        self.late_state: tuple[LateState, ...] = ()
        self._behavior_record = behavior_record
        self.keep = max(int(keep), 1)
        self._step = tf.Variable(0, dtype=tf.int64)
        self._updates = tf.Variable(0, dtype=tf.int64)
        self._checkpoint = tf.train.Checkpoint(**objects, step=self._step, updates=self._updates)
        self._manager: Optional[tf.train.CheckpointManager] = None

    def _checkpoint_manager(self) -> tf.train.CheckpointManager:
        """TF's manager, created at the first save after clearing what an interrupted save left."""
        if self._manager is None:
            os.makedirs(self.model_path, exist_ok=True)
            remove_stale_files(self.model_path)
            adopt_untracked(self.model_path)
            self._manager = tf.train.CheckpointManager(self._checkpoint, self.model_path, max_to_keep=self.keep,
                                                       checkpoint_name=CHECKPOINT_NAME)
        return self._manager

    def save(self, step: int, updates: int) -> str:
        """A new checkpoint numbered ``step``; returns its prefix. In the main thread, Ctrl-C
        waits until the checkpoint and the state file are written, then raises
        ``KeyboardInterrupt``; checkpoints beyond ``keep`` are deleted only after that.
        Under a multi-host strategy only the chief writes (the others return ``""``).

        A write that fails (a full disk, a folder that cannot be written) raises
        :class:`CheckpointWriteError` after removing what it added to the folder; the
        checkpoints written before stay intact, and the next save starts from the folder as it is."""
        if not distribute.is_chief():
            return ""
        with sigint_deferred(f"the checkpoint save in {self.model_path}"):
            self._step.assign(step)
            self._updates.assign(updates)
            before = folder_names(self.model_path)
            try:
                path = self._checkpoint_manager().save(checkpoint_number=step)
            except WRITE_ERRORS as e:
                self._manager = None  # TF's manager may hold this save's path: the next save reads the folder again
                self._remove_failed_save(step, before)
                raise CheckpointWriteError(
                    f"Checkpoint {CHECKPOINT_NAME}-{step} could not be written in {self.model_path}: {write_failure(e)}. "
                    "The checkpoints written before it are intact: free some space or make the folder writable, "
                    "then continue with --resume.") from e
            if self._behavior_record is not None:
                try:
                    write_json_atomically(os.path.join(self.model_path, BEHAVIOR_FILE), self._behavior_record)
                except OSError as e:
                    raise CheckpointWriteError(
                        f"{os.path.join(self.model_path, BEHAVIOR_FILE)} could not be written: {write_failure(e)}. "
                        "The checkpoints are intact: free some space or make the folder writable, then continue "
                        "with --resume.") from e
                self._behavior_record = None
        return path

    def _remove_failed_save(self, step: int, before: AbstractSet[str]) -> None:
        """Delete what the failed save of ``step`` added to the folder: TF's temporaries, and its
        ``model-N`` files unless the state file records them (TF failed after recording them, while
        deleting older checkpoints). Nothing that was there before the save is touched."""
        folder = os.path.abspath(self.model_path)
        own = re.compile(rf"^{CHECKPOINT_NAME}-{step}\.(index|data-\d{{5}}-of-\d{{5}})$")
        state = read_state(folder)
        recorded = state is not None and os.path.join(folder, f"{CHECKPOINT_NAME}-{step}") in state_prefixes(folder, state)
        for name in sorted(folder_names(folder) - before):
            if any(p.search(name) for p in STALE_NAMES) or (own.match(name) and not recorded):
                path = os.path.join(folder, name)
                with contextlib.suppress(OSError):  # what stays is removed before the next save (remove_stale_files)
                    shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)

    def restore(self, missing_advice: str = RUN_ID_ADVICE, mismatch_fix: str = RESUME_FIX) -> tuple[int, int]:
        """Restore the newest intact checkpoint; returns its ``(step, updates)``. With none,
        the error ends with ``missing_advice``, the caller's hint on what to check; one that
        does not fit, with ``mismatch_fix``.

        Candidates come newest first (:func:`checkpoint_candidates`); a damaged one is logged
        (a warning naming the file) and skipped. Every tensor of a candidate is read, checksums
        included, before anything is assigned, so a damaged file never reaches the variables.
        A candidate that is intact but does not fit the objects (another shape for one of
        their variables, or one of them missing: :func:`check_fit`, also before anything is
        assigned) raises :class:`CheckpointMismatch` at once, not "damaged": older checkpoints
        of the same run would not fit either. Should TF's restore still fail part-way (its
        ``assert_existing_objects_matched``), the candidate counts as damaged, and the restore
        that succeeds afterwards passes the same assertion, i.e. assigns every existing variable.
        """
        candidates = checkpoint_candidates(self.model_path)
        if not candidates:
            raise UnityTrainerException(
                f"The model {self.model_path} could not be found. {missing_advice}"
            )
        failures = []
        for n, prefix in enumerate(candidates, 1):
            try:
                self._restore_from(prefix, mismatch_fix)
            except _DamagedCheckpoint as e:
                next_step = "trying an older checkpoint" if n < len(candidates) else "it was the oldest"
                logger.warning("Checkpoint file %s is damaged (%s); %s.", e.file, e.reason, next_step)
                failures.append(f"{os.path.basename(e.file)} ({e.reason})")
                continue
            logger.info("Restored %s", prefix)
            return int(self._step.numpy()), int(self._updates.numpy())
        raise UnityTrainerException(f"No intact checkpoint in {self.model_path}: {'; '.join(failures)}")

    def _restore_from(self, prefix: str, mismatch_fix: str = RESUME_FIX) -> None:
        """Check, then restore ``prefix`` into the objects; raises :class:`_DamagedCheckpoint`
        or :class:`CheckpointMismatch`. Values the checkpoint holds that no object asks for
        (TF's ``save_counter``) are expected, so TF logs no warning about them."""
        verify_checkpoint(prefix)
        allowed = {id(v) for late in self.late_state for v in late.variables}
        lacking = check_fit(prefix, self._checkpoint, may_lack=allowed, fix=mismatch_fix)
        lacking_states = [late for late in self.late_state if any(id(v) in lacking for v in late.variables)]
        for late in lacking_states:
            if not all(id(v) in lacking for v in late.variables):
                raise _DamagedCheckpoint(prefix + ".index", ValueError(f"it holds only part of {late.what}"))
        try:
            status = self._checkpoint.restore(prefix)
            if not lacking:
                status.assert_existing_objects_matched()
            status.expect_partial()
        except _RESTORE_ERRORS as e:
            raise _DamagedCheckpoint(prefix + ".index", e) from e
        for late in lacking_states:
            late.fill()
            logger.warning("Checkpoint %s was written by an older kerasrl, which did not save %s: they start as %s.",
                           prefix, late.what, late.filled_as)


def check_fit(prefix: str, root: Any, may_lack: AbstractSet[int] = frozenset(), fix: str = RESUME_FIX) -> set[int]:
    """Raise :class:`CheckpointMismatch` (one line, ending with ``fix``) when checkpoint ``prefix`` holds another
    shape for one of ``root``'s variables, or lacks one of them (unless its ``id`` is in
    ``may_lack``: those it lacks are returned); before anything is assigned,
    so TF neither half-restores nor warns. Objects are matched as TF's restore matches them: by
    walking the checkpoint's object graph and ``root``'s trackable children in step. An object
    graph that cannot be read makes the checkpoint damaged (:class:`_DamagedCheckpoint`)."""
    saved_shapes, graph = _read_object_graph(prefix)
    view = tf.train.TrackableView(root)
    matched, mismatches = _match_object_graph(graph, saved_shapes, view, root)
    if mismatches:
        weights = model_weights(view, root)
        mismatches.sort(key=lambda m: id(m[0]) not in weights)  # a weight of the model rather than an optimizer's slot
        _raise_count_mismatch(prefix, Sides(graph, saved_shapes, view, root), mismatches, weights, fix)
        _raise_shape_mismatch(prefix, mismatches, fix)
    missing = [(obj, path) for obj, path in object_paths(view, root) if is_variable(obj) and id(obj) not in matched]
    lacking = {id(obj) for obj, _ in missing if id(obj) in may_lack}
    missing = [(obj, path) for obj, path in missing if id(obj) not in lacking]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointMismatch(
            f"Checkpoint {prefix} does not fit this configuration: it has no {missing[0][1]}{more}, as when a setting "
            f"that adds to the model (a reward signal, a recurrent layer...) changed; {fix}")
    return lacking


def _read_object_graph(prefix: str) -> tuple[dict[str, Any], Any]:
    """Checkpoint ``prefix``'s variable shapes and object graph; :class:`_DamagedCheckpoint` when unreadable."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        saved_shapes = reader.get_variable_to_shape_map()
        graph = trackable_object_graph_pb2.TrackableObjectGraph()
        graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    except _RESTORE_ERRORS as e:
        raise _DamagedCheckpoint(prefix + ".index", e) from e
    return saved_shapes, graph


def _match_object_graph(graph: Any, saved_shapes: Mapping[str, Any], view: Any,
                        root: Any) -> tuple[set[int], list[Mismatch]]:
    """Walk the checkpoint's object ``graph`` and ``root``'s trackable children in step: the ``id``
    of every object matched, and the variables whose saved shape differs from theirs."""
    matched: set[int] = set()
    visited: set[int] = set()
    queue: collections.deque[tuple[int, Any, str]] = collections.deque([(0, root, "")])
    mismatches: list[Mismatch] = []
    while queue:
        node_id, obj, path = queue.popleft()
        if node_id in visited or node_id >= len(graph.nodes):
            continue
        visited.add(node_id)
        matched.add(id(obj))
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if (attribute.name != "VARIABLE_VALUE" or attribute.checkpoint_key not in saved_shapes
                    or not hasattr(obj, "shape")):
                continue
            saved, configured = tuple(saved_shapes[attribute.checkpoint_key]), shape_of(obj)
            if saved != configured:
                mismatches.append((obj, saved, configured, path))
        children = view.children(obj)
        for ref in node.children:
            if ref.local_name in children:
                queue.append((ref.node_id, children[ref.local_name], f"{path}/{ref.local_name}".lstrip("/")))
    return matched, mismatches


def _raise_shape_mismatch(prefix: str, mismatches: list[Mismatch], fix: str) -> None:
    """Raise :class:`CheckpointMismatch` naming the first of ``mismatches`` and both its shapes."""
    obj, saved, configured, path = mismatches[0]
    more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
    raise CheckpointMismatch(
        f"Checkpoint {prefix} does not fit this configuration: variable {variable_name(obj, path)} has shape "
        f"{list(saved)} there and {list(configured)} here{more}, as when a setting such as hidden_units "
        f"changed; {fix}")


def _raise_count_mismatch(prefix: str, sides: Sides, mismatches: list[Mismatch], weights: AbstractSet[int],
                          fix: str) -> None:
    """Raise :class:`CheckpointMismatch` when a list of the model's weights, or one holding a mismatch, has
    another length in the checkpoint: a variable added or removed there shifts every later one, so their
    shapes say nothing about a reshape."""
    clause = resized_list_clause(sides, mismatches, weights)
    if clause is not None:
        raise CheckpointMismatch(
            f"Checkpoint {prefix} does not fit this configuration: {clause}, as when a setting that adds or removes "
            f"weights (action_bias, a recurrent layer, a reward signal...) changed; {fix}")


def verify_checkpoint(prefix: str) -> None:
    """Read every tensor of checkpoint ``prefix`` (TF checks each one's CRC32C and size);
    raises :class:`_DamagedCheckpoint` naming the index or the data file at fault."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        keys = list(reader.get_variable_to_dtype_map())
    except _RESTORE_ERRORS as e:
        raise _DamagedCheckpoint(prefix + ".index", e) from e
    try:
        for key in keys:
            reader.get_tensor(key)
    except _RESTORE_ERRORS as e:
        raise _DamagedCheckpoint(_data_file(prefix), e) from e


def _data_file(prefix: str) -> str:
    """The data file of ``prefix`` (the pattern when there is not exactly one)."""
    folder, base = os.path.split(prefix)
    names = sorted(n for n in (os.listdir(folder or ".") if os.path.isdir(folder or ".") else [])
                   if n.startswith(base + ".data-"))
    return os.path.join(folder, names[0]) if len(names) == 1 else prefix + ".data-*"
