"""The run's folder: checked before anything is written, locked for the life of the run, and
what each start of a run records in it.

Safety of what is deleted and of who writes: a run id is a plain folder name; kerasrl writes a
marker file (``.kerasrl-run``) into each run folder it creates, and ``--force`` deletes only a
kerasrl run folder; a process that runs in a folder holds an OS lock (``flock``) on its
``.kerasrl-lock`` file, so a second process on the same folder stops at once. ``--force`` takes
effect once the environment has started: before a Unity player starts (it logs into the run folder)
the old run is moved aside into ``.kerasrl-replaced``, deleted once training starts and put back
when the start fails."""
from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import yaml

from kerasrl import __version__
from kerasrl.exception import TrainerError
from kerasrl.settings.run_context import HIDDEN_PREFIX

#: Written into a run folder when kerasrl prepares it: what ``--force`` may delete.
MARKER = f"{HIDDEN_PREFIX}run"
#: Its first line (the rest: the version that wrote it and when).
MARKER_TEXT = "kerasrl run folder"
#: Locked (``flock``) by the process running in the folder for as long as it lives; holds its PID.
LOCK = f"{HIDDEN_PREFIX}lock"
#: Where ``--force`` keeps the old run while a Unity player starts (:func:`prepare_run_dir`).
REPLACED = f"{HIDDEN_PREFIX}replaced"
#: Where a failed ``--force`` start's own files go when the restored old run has the same names (``run_logs``).
FAILED_START = f"{HIDDEN_PREFIX}failed-start"
#: The top-level names a run folder of a kerasrl without the marker could hold (besides ``*.csv``).
_LEGACY_NAMES = {"models", "summaries", "configuration.yaml", "configuration.yaml.tmp", "commands.log", "timers.json"}
#: ``configuration.yaml``'s keys that kerasrl has recorded since it first wrote the file.
_RECORD_KEYS = {"command_line", "kerasrl_version", "behaviors"}
#: Each behavior's step and the returns of its latest episodes (up to 100) when a training session ended.
RETURNS = "returns.json"
_CHECKPOINT_INDEX = re.compile(r"^model-\d+\.index$")
_PLAYER_LOG = re.compile(r"^Player-\d+\.log$")
#: The run folders whose lock this process holds (real path -> the lock file's descriptor); the
#: kernel releases them when the process ends, however it ends.
_held: dict[str, int] = {}
#: The run folders this process made (real path -> the topmost folder it made with it), which
#: :func:`discard_unstarted_run_dirs` removes again when no run started in them.
_made: dict[str, str] = {}
#: The run folders whose old run waits in :data:`REPLACED` for the environment to start.
_replaced: set[str] = set()


def check_run_name(flag: str, value: str) -> None:
    """A run id names one folder inside ``--results-dir``: not blank (empty or only whitespace), no
    path separator, not ``.`` or ``..`` (any of which would make ``--force`` delete, or a run write,
    elsewhere, or name a folder that looks like none)."""
    separators = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    if not value.strip() or value in (".", "..") or "\0" in value or any(s in value for s in separators):
        raise TrainerError(f"{flag} {shlex.quote(value)}: a run id must be a plain folder name "
                           "(not blank, no '/', not '.' or '..').")


def record_run(args: argparse.Namespace, context: Any, trainers: dict[str, Any]) -> None:
    """Save what this start of the run used in its folder: ``configuration.yaml`` (the command
    line, seed, each behavior's target step count (``target_steps``), versions and every
    behavior's resolved settings, rewritten atomically at each start of training) and one line
    per start in ``commands.log``. An ``--inference`` start only adds its line: the record stays
    the training run's, which ``--resume`` continues."""
    run_dir = os.path.join(args.results_dir, args.run_id)
    argv = getattr(args, "argv", None)
    words = [os.path.basename(sys.argv[0]) or "kerasrl-learn", *sys.argv[1:]] if argv is None else argv
    command = " ".join(map(shlex.quote, words))
    if not args.inference:
        record = {"command_line": command, "seed": context.seed,
                  "target_steps": {name: int(t.get_max_steps) for name, t in trainers.items()},
                  "kerasrl_version": __version__, "run_context": asdict(context),
                  "behaviors": {name: t.parameters for name, t in trainers.items()}}
        tmp = os.path.join(run_dir, "configuration.yaml.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            yaml.safe_dump(record, f, sort_keys=False)
        os.replace(tmp, os.path.join(run_dir, "configuration.yaml"))
    with open(os.path.join(run_dir, "commands.log"), "a", encoding="utf-8") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {command}\n")


def record_returns(run_dir: str, trainers: dict[str, Any]) -> None:
    """Keep in ``returns.json`` each behavior's step and the returns of its latest episodes, as
    this training session ends (atomically; a behavior with none keeps its earlier entry): a
    resumed run reports them until its own episodes end (:func:`recorded_returns`)."""
    record = {name: (int(step), list(returns)) for name, (step, returns) in recorded_returns(run_dir).items()}
    record.update({name: (int(t.get_step), [float(r) for r in t.recent_returns])
                   for name, t in trainers.items() if len(t.recent_returns)})
    if not record:
        return
    path = os.path.join(run_dir, RETURNS)
    try:
        with open(f"{path}.tmp", "w", encoding="utf-8") as f:
            json.dump({name: {"step": step, "returns": returns} for name, (step, returns) in record.items()}, f)
        os.replace(f"{path}.tmp", path)
    except OSError as e:  # the run is saved: only a later report's figure is lost
        with contextlib.suppress(OSError):
            os.unlink(f"{path}.tmp")
        logging.getLogger("kerasrl").warning("%s could not be written (%s).", path, e.strerror or e)


def recorded_returns(run_dir: str) -> dict[str, tuple[int, list[float]]]:
    """What ``returns.json`` keeps: behavior -> (its step, the returns of its latest episodes);
    nothing for a folder without the file, or one that cannot be read (it only informs the report)."""
    try:
        with open(os.path.join(run_dir, RETURNS), encoding="utf-8") as f:
            record = json.load(f)
        return {str(name): (int(entry["step"]), [float(r) for r in entry["returns"]]) for name, entry in record.items()}
    except (OSError, UnicodeDecodeError, ValueError, AttributeError, KeyError, TypeError):
        return {}


def _contents(run_dir: str) -> list[str]:
    """The names in ``run_dir`` besides the marker and the lock file (none if it is missing)."""
    if not os.path.isdir(run_dir):
        return []
    return sorted(set(os.listdir(run_dir)) - {MARKER, LOCK})


def _run_contents(run_dir: str) -> list[str]:
    """:func:`_contents`, or none when they are only what a start that failed before training
    left there (its players' logs, ``run_logs/Player-N.log``): such a folder holds no run, and
    the same command run again starts one there (its players' new logs replace the old)."""
    names, logs = _contents(run_dir), os.path.join(run_dir, "run_logs")
    if names != ["run_logs"] or os.path.islink(logs) or not os.path.isdir(logs):
        return names
    return names if any(not (_PLAYER_LOG.match(n) and os.path.isfile(os.path.join(logs, n))) for n in os.listdir(logs)) \
        else []


def _has_marker(run_dir: str) -> bool:
    try:
        with open(os.path.join(run_dir, MARKER), encoding="utf-8", errors="replace") as f:
            return f.readline().strip() == MARKER_TEXT
    except OSError:
        return False


def _has_run_record(run_dir: str) -> bool:
    """``configuration.yaml`` as kerasrl writes it (a mapping with kerasrl's keys)."""
    try:
        with open(os.path.join(run_dir, "configuration.yaml"), encoding="utf-8") as f:
            record = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(record, dict) and _RECORD_KEYS <= set(record)


def _has_only_checkpoints(run_dir: str, names: list[str]) -> bool:
    """Only kerasrl's names at the top, and ``models/<behavior>/model-N.index`` checkpoints."""
    if not all(n in _LEGACY_NAMES or n.endswith(".csv") for n in names):
        return False
    models = os.path.join(run_dir, "models")
    if not os.path.isdir(models):
        return False
    for behavior in os.listdir(models):
        folder = os.path.join(models, behavior)
        if os.path.isdir(folder) and any(_CHECKPOINT_INDEX.match(n) for n in os.listdir(folder)):
            return True
    return False


def is_run_folder(run_dir: str) -> bool:
    """Whether ``run_dir`` is a kerasrl run folder that ``--force`` may delete and ``--resume``
    continue: it has the marker kerasrl writes when it prepares a run folder, or, for a folder
    of a kerasrl from before the marker, it holds kerasrl's own files: a ``configuration.yaml``
    with the keys kerasrl records (``command_line``, ``kerasrl_version``, ``behaviors``), or
    ``models/<behavior>/model-N.index`` checkpoints with nothing at the top but kerasrl's names
    (``models``, ``summaries``, ``configuration.yaml``, ``commands.log``, ``timers.json``, the
    metrics ``*.csv``). A folder kerasrl accepts this way gets the marker at that start. A
    missing or empty folder (or one with only the marker and lock files) counts: it holds
    nothing to lose."""
    names = _contents(run_dir)
    return not names or _has_marker(run_dir) or _has_run_record(run_dir) or _has_only_checkpoints(run_dir, names)


def _holder(fd: int) -> str:
    """The PID written in a held lock file (the holder writes it just after locking)."""
    for _ in range(20):
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        if text:
            return text
        time.sleep(0.05)
    return "unknown"


def _same_file(fd: int, path: str) -> bool:
    try:
        held, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def lock_run_dir(run_dir: str) -> None:
    """Take the run folder's lock until the run ends (:func:`release_run_dirs`), or stop with
    the PID of the process that holds it. ``flock`` locks die with their process (a killed run
    never blocks the next one); a folder that this process already holds is taken again."""
    key = os.path.realpath(run_dir)
    path = os.path.join(run_dir, LOCK)
    fd = _held.pop(key, None)
    if fd is not None:
        if _same_file(fd, path):
            _held[key] = fd
            return
        os.close(fd)  # the folder was removed and made again since (a non-chief host's scratch)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            os.close(fd)
            logging.getLogger("kerasrl").warning("The run folder %s cannot be locked (%s); a second run in it "
                                                 "would not be stopped.", run_dir, e.strerror or e)
            return
        holder = _holder(fd)
        os.close(fd)
        raise TrainerError(f"The run folder {run_dir} is in use by process {holder} (it holds {path}): wait for "
                           "it to end, or choose another --run-id; nothing was changed.") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    _held[key] = fd


def _topmost_missing(path: str) -> Optional[str]:
    """The outermost folder of ``path`` that does not exist yet (None when ``path`` exists)."""
    path, top = os.path.realpath(path), None
    while not os.path.lexists(path):
        top, parent = path, os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return top


def _holds_files(folder: str) -> bool:
    """Whether ``folder`` holds anything but kerasrl's marker and lock and empty folders."""
    for root, dirs, names in os.walk(folder):
        if set(names) - ({MARKER, LOCK} if root == folder else set()):
            return True
        if any(os.path.islink(os.path.join(root, d)) for d in dirs):
            return True
    return False


def _restore_replaced(run_dir: str) -> None:
    """Put back the old run that ``--force`` moved aside for a start that did not reach training
    (or that was killed); what that start made under one of its names (its players' ``run_logs``)
    goes to :data:`FAILED_START`, replacing an earlier failed start's."""
    _replaced.discard(os.path.realpath(run_dir))
    aside = os.path.join(run_dir, REPLACED)
    if not os.path.isdir(aside) or os.path.islink(aside):
        return
    names = sorted(os.listdir(aside))
    clashes = [n for n in names if os.path.lexists(os.path.join(run_dir, n))]
    if clashes:
        if FAILED_START in names:  # made by an earlier failed start
            _delete_contents(aside, [FAILED_START])
            names.remove(FAILED_START)
        os.makedirs(os.path.join(run_dir, FAILED_START), exist_ok=True)
        for name in clashes:
            os.replace(os.path.join(run_dir, name), os.path.join(run_dir, FAILED_START, name))
    for name in names:
        os.replace(os.path.join(aside, name), os.path.join(run_dir, name))
    os.rmdir(aside)


def restore_replaced_runs() -> None:
    """Put back each old run that ``--force`` moved aside in this process for a start that failed."""
    while _replaced:
        run_dir = _replaced.pop()
        try:
            _restore_replaced(run_dir)
        except OSError as e:  # the next start puts it back (check_run_dir); the run's own error stays the one line
            logging.getLogger("kerasrl").warning("The old run in %s could not be put back yet (%s).",
                                                 os.path.join(run_dir, REPLACED), e.strerror or e)


def discard_unstarted_run_dirs() -> None:
    """Remove each run folder this process made (and the folders above it that it made too)
    when no run started in it: it holds nothing but the marker, the lock and empty folders (a
    run that starts writes ``commands.log`` at once). A folder that existed before is left
    alone, and nothing but those files and empty folders is ever deleted. An old run that
    ``--force`` moved aside is put back first (:func:`restore_replaced_runs`)."""
    restore_replaced_runs()
    while _made:
        run_dir, top = _made.popitem()
        if not os.path.isdir(run_dir) or _holds_files(run_dir):
            continue
        with contextlib.suppress(OSError):
            for name in (MARKER, LOCK):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(run_dir, name))
            for root, _, _ in sorted(os.walk(run_dir), key=lambda entry: -len(entry[0])):
                os.rmdir(root)  # deepest first; fails (and stops) on anything that appeared meanwhile
            folder = os.path.dirname(run_dir)
            while len(folder) >= len(top):  # both are run_dir or a folder above it
                os.rmdir(folder)  # only empty folders that this process made
                folder = os.path.dirname(folder)


def release_run_dirs() -> None:
    """Let go of every run folder this process locked: its run has ended (a later run of the
    same Python process, or another process, may then take it); an old run still moved aside by
    ``--force`` is put back first."""
    restore_replaced_runs()
    _made.clear()
    while _held:
        _, fd = _held.popitem()
        os.close(fd)


def _mark(run_dir: str) -> None:
    if not _has_marker(run_dir):
        with open(os.path.join(run_dir, MARKER), "w", encoding="utf-8") as f:
            f.write(f"{MARKER_TEXT}\nkerasrl_version: {__version__}\ncreated: {time.strftime('%Y-%m-%dT%H:%M:%S')}\n")


def _delete_contents(run_dir: str, names: list[str]) -> None:
    """``--force``: everything in the run folder but its lock file (which this process holds:
    deleting it would let a second process take a new one)."""
    for name in names:
        path = os.path.join(run_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


@dataclass
class RecordedRun:
    """What a run's ``configuration.yaml`` says its training started with: the seed and each
    behavior's target step count (``--steps``, else the config's ``max_steps``)."""

    seed: Optional[int] = None
    targets: dict[str, int] = field(default_factory=dict)


def recorded_run(run_dir: str) -> RecordedRun:
    """The seed and targets recorded in ``run_dir/configuration.yaml`` (older folders: the
    behaviors' ``max_steps``); nothing for a folder without the file. A file that cannot be read
    is a one-line error: ``--steps`` and ``--seed`` resume without it."""
    path = os.path.join(run_dir, "configuration.yaml")
    if not os.path.exists(path):
        return RecordedRun()
    try:
        with open(path, encoding="utf-8") as f:
            record = yaml.safe_load(f)
        behaviors = record.get("behaviors") or {}
        targets = record.get("target_steps") or {name: b["max_steps"] for name, b in behaviors.items()}
        seed = record.get("seed")
        return RecordedRun(None if seed is None else int(seed), {str(k): int(v) for k, v in targets.items()})
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError) as e:
        raise TrainerError(f"--resume: {path} cannot be read ({type(e).__name__}); give --steps and --seed to "
                           "continue without it.") from e


def _check_not_held(run_dir: str) -> None:
    """Stop at once, writing nothing, when another process holds the folder's lock."""
    path = os.path.join(run_dir, LOCK)
    key = os.path.realpath(run_dir)
    if key in _held or not os.path.exists(path):
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise TrainerError(f"The run folder {run_dir} is in use by process {_holder(fd)} (it holds {path}): wait "
                               "for it to end, or choose another --run-id; nothing was changed.") from None
    finally:
        os.close(fd)


def check_run_dir(args: argparse.Namespace) -> str:
    """Every check of the run's folder that needs no writing (made before the environment
    starts): an existing run is continued only with ``--resume`` (or run with
    ``--inference``) and replaced only with ``--force``; a folder that is not a kerasrl run
    (:func:`is_run_folder`) is never used, let alone deleted; no other process runs in it. Its
    one write: an old run that a killed ``--force`` start left moved aside is put back."""
    check_run_name("--run-id", args.run_id)
    run_dir = os.path.join(args.results_dir, args.run_id)
    if args.inference and not _run_contents(run_dir):
        raise TrainerError(f"--inference: there is no trained model in {run_dir}; train run {args.run_id} first.")
    if not is_run_folder(run_dir):
        if args.force:
            raise TrainerError(f"--force: {run_dir} is not a kerasrl run folder (no marker {MARKER}); "
                               "nothing was deleted.")
        raise TrainerError(f"{run_dir} exists and is not a kerasrl run folder (no marker {MARKER}): choose another "
                           "--run-id or --results-dir; nothing was changed.")
    _check_not_held(run_dir)
    if os.path.realpath(run_dir) not in _replaced:  # a start killed while the old run was moved aside
        try:
            _restore_replaced(run_dir)
        except OSError as e:
            raise TrainerError(f"{os.path.join(run_dir, REPLACED)} (an old run that --force moved aside) cannot be "
                               f"put back: {e.strerror or e}; move its contents back into {run_dir}.") from e
    if _run_contents(run_dir) and not (args.load or args.inference or args.force):
        raise TrainerError(f"The run folder {run_dir} already exists: continue it with --resume, or start it "
                           "afresh with --force (which deletes it).")
    return run_dir


def prepare_run_dir(args: argparse.Namespace, started: bool = True) -> str:
    """The run's folder, checked again (:func:`check_run_dir`: it may have changed since),
    made, locked (:func:`lock_run_dir`), emptied with ``--force`` and marked; it must be
    writable, and so must its ``models`` folders when the run trains. The command line calls it
    once every other check has passed, just before the run writes its first file; again, it
    changes nothing in a folder this process holds but deletes the old run that ``--force`` moved
    aside. ``started=False`` (before a Unity player starts): ``--force`` only moves the old run
    aside (:data:`REPLACED`), restored if the start fails."""
    run_dir = os.path.join(args.results_dir, args.run_id)
    held = _held.get(os.path.realpath(run_dir))
    if held is not None and _same_file(held, os.path.join(run_dir, LOCK)):
        if started and os.path.realpath(run_dir) in _replaced:
            _replaced.discard(os.path.realpath(run_dir))
            try:
                _delete_contents(run_dir, [REPLACED])
            except OSError as e:
                raise TrainerError(f"--force: the old run in {os.path.join(run_dir, REPLACED)} cannot be deleted: "
                                   f"{e.strerror or e}.") from e
        return run_dir
    check_run_dir(args)
    try:
        top = _topmost_missing(run_dir)
        os.makedirs(run_dir, exist_ok=True)
        if top is not None:
            _made[os.path.realpath(run_dir)] = top
        lock_run_dir(run_dir)
        names = _contents(run_dir)
        if _run_contents(run_dir) and not (args.load or args.inference or args.force):
            raise TrainerError(f"The run folder {run_dir} already exists: continue it with --resume, or start it "
                               "afresh with --force (which deletes it).")
        if names and not _run_contents(run_dir) and not args.force:  # a failed start's player logs
            _delete_contents(run_dir, names)
            names = []
        _mark(run_dir)  # first: an old run moved aside stays in a marked folder
        if args.force and started:
            _delete_contents(run_dir, names)
        elif args.force and names:
            os.mkdir(os.path.join(run_dir, REPLACED))
            _replaced.add(os.path.realpath(run_dir))
            for name in names:
                os.replace(os.path.join(run_dir, name), os.path.join(run_dir, REPLACED, name))
        with tempfile.TemporaryFile(dir=run_dir):
            pass
    except OSError as e:
        raise TrainerError(f"The run folder {run_dir} cannot be written: {e.strerror or e}.") from e
    if not args.inference:
        _check_models_writable(run_dir)
    return run_dir


def _check_models_writable(run_dir: str) -> None:
    """The run's ``models`` folder and each behavior's folder in it, where they exist, take new
    files: a checkpoint that cannot be written is reported before training, not after it."""
    models = os.path.join(run_dir, "models")
    if not os.path.lexists(models):
        return
    folder = models
    try:
        if not os.path.isdir(models):
            raise NotADirectoryError(errno.ENOTDIR, "it is not a folder")
        behaviors = sorted(os.path.join(models, name) for name in os.listdir(models))
        for folder in [models] + [path for path in behaviors if os.path.isdir(path)]:
            with tempfile.TemporaryFile(dir=folder):
                pass
    except OSError as e:
        raise TrainerError(f"The run folder {run_dir} cannot be written: {folder}: {e.strerror or e}.") from e


def initial_models(args: argparse.Namespace) -> Optional[str]:
    """The models folder of the run named by ``--initialize-from`` (which must exist)."""
    if args.initialize_from is None:
        return None
    check_run_name("--initialize-from", args.initialize_from)
    if args.initialize_from == args.run_id:
        raise TrainerError("--initialize-from names this run; continue it with --resume instead.")
    models = os.path.join(args.results_dir, args.initialize_from, "models")
    if not os.path.isdir(models):
        raise TrainerError(f"--initialize-from {args.initialize_from}: there is no run folder {models}.")
    return models
