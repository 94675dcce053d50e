"""A training (or inference, or demo-recording) run from parsed ``kerasrl-learn`` flags: the
environment, the trainers and the controller set up, run, and exported at the end."""
from __future__ import annotations

import argparse
import logging
import math
import os
import random
import shutil
import time
from dataclasses import replace
from typing import Any, Optional

import tensorflow as tf

from kerasrl import xla_cache
from kerasrl.cli.env_parameters import EnvParameters
from kerasrl.cli.multi_host import (
    check_multi_host_args,
    choose_strategy,
    host_seed_offset,
    join_cluster,
    warn_small_policies,
)
from kerasrl.cli.parser import DEFAULT_KEEP, DEFAULT_SAVE_FREQ, check_args
from kerasrl.cli.report import ProgressReport
from kerasrl.cli.run_folder import (
    RETURNS,
    RecordedRun,
    check_run_dir,
    discard_unstarted_run_dirs,
    initial_models,
    prepare_run_dir,
    record_returns,
    record_run,
    recorded_returns,
    recorded_run,
    release_run_dirs,
)
from kerasrl.configs import config_source
from kerasrl.distribute import cluster
from kerasrl.envs.ray_env_manager import ray_available
from kerasrl.envs.registry import EDITOR, UnityOptions, copies_per_worker, is_unity_env, make_env_manager
from kerasrl.envs.unity import find_player
from kerasrl.exception import EnvironmentException, TrainerError, UpdateThreadError
from kerasrl.export import export_trainers
from kerasrl.recording import record
from kerasrl.settings import RunContext, TrainerConfig, TrainerSettings, load_trainer_config, trainer_type
from kerasrl.trainers import TrainerController, create_trainers


def set_tf_threads(threads: int) -> bool:
    """Limit TensorFlow's thread pools (must run before TensorFlow executes anything).

    Small models spend their time in per-op overhead that a 2-thread pool only adds to.
    Returns False (and leaves the pools alone) if TensorFlow is already running.
    """
    if threads <= 0:
        return False
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        logging.getLogger("kerasrl").warning("TensorFlow is already initialized; --tf-threads %d ignored.", threads)
        return False
    return True



def unity_options(args: argparse.Namespace, env_params: Optional[EnvParameters] = None,
                  seed: int = 0) -> Optional[UnityOptions]:
    """The Unity flags, for a Unity ``--env``; players log to the run folder's ``run_logs``; the
    samplers of the config's ``environment_parameters`` go to the scene, which draws them each episode."""
    if not is_unity_env(args.env):
        return None
    return UnityOptions(base_port=args.base_port, no_graphics=args.no_graphics, timeout_wait=args.timeout_wait,
                        env_args=tuple(args.env_args or ()),
                        log_folder=os.path.join(args.results_dir, args.run_id, "run_logs"),
                        time_scale=args.time_scale, quality_level=args.quality_level, width=args.width,
                        height=args.height, target_frame_rate=args.target_frame_rate,
                        capture_frame_rate=args.capture_frame_rate, num_areas=getattr(args, "num_areas", 1),
                        samplers=env_params.episode_samplers(seed) if env_params is not None else (),
                        max_lifetime_restarts=args.max_lifetime_restarts, restarts_rate_limit_n=args.restarts_rate_limit_n,
                        restarts_rate_limit_period_s=args.restarts_rate_limit_period_s)


def _check_ray_args(args: argparse.Namespace) -> None:
    """Ray flags need ``--env-manager ray`` and Ray itself, before the run folder is touched."""
    if getattr(args, "env_manager", "subprocess") != "ray":
        flag = "--ray-address" if getattr(args, "ray_address", None) else "--ray-restart-workers"
        raise TrainerError(f"{flag} needs --env-manager ray.")
    if not ray_available():
        raise TrainerError('--env-manager ray needs Ray, which is not installed: pip install "kerasrl[ray]".')


def _with_targets(config: TrainerConfig, targets: dict[str, int], behaviors: list[str], hosts: Any) -> TrainerConfig:
    """``config`` with each behavior's ``max_steps`` set to the target that the run recorded
    (``--resume`` without ``--steps`` continues to it, with the same schedules); on several
    hosts, to the chief's."""
    sections = dict(config.sections)
    for name in behaviors:
        settings = config.settings_for(name)
        target = targets.get(name, settings.max_steps)
        target = hosts.chief_value(target) if hosts is not None else target
        if target != settings.max_steps:
            sections[name] = replace(settings, max_steps=target)
    return TrainerConfig(sections, config.source)


def threaded_sections(config: TrainerConfig) -> TrainerConfig:
    """``--threaded``: ``threaded: true`` in every section whose trainer type updates in a thread
    of its own (its class's ``supports_threaded``; the others have no update thread)."""
    def threads(section: TrainerSettings) -> bool:
        return bool(getattr(trainer_type(section.trainer).trainer_cls, "supports_threaded", False))

    return TrainerConfig({name: replace(section, threaded=True) if threads(section) else section
                          for name, section in config.sections.items()}, config.source)


def checkpoint_plan(args: argparse.Namespace, config: TrainerConfig) -> tuple[int, int]:
    """``--save-freq`` and ``--keep-checkpoints``, else what the config's sections set (the smallest
    ``checkpoint_interval``, the largest ``keep_checkpoints``: one plan saves every behavior), else
    the defaults."""
    sections = config.sections.values()
    intervals = [s.checkpoint_interval for s in sections if s.checkpoint_interval is not None]
    keeps = [s.keep_checkpoints for s in sections if s.keep_checkpoints is not None]
    save = args.save_freq if args.save_freq is not None else min(intervals, default=DEFAULT_SAVE_FREQ)
    keep = getattr(args, "keep_checkpoints", None)
    return save, keep if keep is not None else max(keeps, default=DEFAULT_KEEP)


def _setup(args: argparse.Namespace, default_config: Optional[str],
           env_params: Optional[EnvParameters] = None) -> tuple[Any, Any, dict[str, Any], int]:
    """The run context, the env manager, the trainers and the number of agents that ``args`` describe."""
    config = load_trainer_config(config_source(args.trainer_config_path or default_config))
    args.save_freq, args.keep_checkpoints = checkpoint_plan(args, config)
    if getattr(args, "threaded", False):
        config = threaded_sections(config)
    workers = getattr(args, "workers", 1)
    env_manager = getattr(args, "env_manager", "subprocess")
    if env_manager != "subprocess" or getattr(args, "ray_address", None) or getattr(args, "ray_restart_workers", False):
        _check_ray_args(args)
    if workers > 1 or env_manager == "ray":
        copies_per_worker(args.env, args.num_envs, workers)  # a layout error before the run folder is touched
    init = initial_models(args)
    check_run_dir(args)  # written to only once the environment has started and accepted its parameters
    if is_unity_env(args.env):
        if args.env.lower() != EDITOR:
            find_player(args.env)  # a missing player is an error before its run folder is made
        prepare_run_dir(args, started=False)  # except for Unity players, which log into it from their start
    seed_given = getattr(args, "seed_given", args.seed >= 0)
    recorded = RecordedRun()
    if (args.load or args.inference) and not (seed_given and args.steps is not None):  # inference: its seed too
        recorded = recorded_run(os.path.join(args.results_dir, args.run_id))
    seed = args.seed if seed_given or recorded.seed is None else recorded.seed
    seed = seed if seed >= 0 else random.randrange(10000)
    hosts = cluster()
    seed = hosts.chief_value(seed) if hosts is not None else seed  # the chief's folder holds the record
    env_seed = seed + host_seed_offset(args)
    manager, n_agents = make_env_manager(args.env, args.num_envs, env_seed, workers, env_manager,
                                         getattr(args, "ray_address", None), getattr(args, "ray_restart_workers", False),
                                         unity=unity_options(args, env_params, seed) if hasattr(args, "base_port") else None)
    context = RunContext.in_results_dir(args.results_dir, args.run_id, keep_checkpoints=args.keep_checkpoints,
                                        train_model=not args.inference, load_model=args.load or args.inference,
                                        seed=seed, max_steps=args.steps, initialize_from=init,
                                        environment_in_other_processes=workers > 1 or env_manager == "ray"
                                        or is_unity_env(args.env))
    env_params = env_params or EnvParameters()
    try:
        if env_params.meta_curriculum is not None:
            env_params.meta_curriculum.check_behaviors(manager.behavior_specs)
        if args.steps is None and not args.inference:
            config = _with_targets(config, recorded.targets, sorted(manager.behavior_specs), hosts)
        trainers = create_trainers(config, manager.behavior_specs, context, env_params.reward_buff_caps())
        return context, manager, trainers, n_agents
    except BaseException:
        manager.close()
        raise


def run_training(args: argparse.Namespace, default_config: Optional[str] = None,
                 env_params: Optional[EnvParameters] = None) -> dict[str, float]:
    """Train as ``args`` say; print progress and the final machine-readable summary line.
    ``env_params``: the curriculum and sampler files, when already read (else read here)."""
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(message)s")
    check_args(args)
    multi_host = check_multi_host_args(args)
    set_tf_threads(args.tf_threads)
    xla_cache.enable(args.xla_cache)
    choose_strategy(args, multi_host)
    start = time.perf_counter()
    env_params = env_params or EnvParameters.from_args(args)
    resume = args.load
    args.seed_given = args.seed >= 0  # before the hosts agree on a seed: --resume keeps the recorded one
    scratch = join_cluster(args, default_config) if multi_host else None
    try:
        context, manager, trainers, n_agents = _setup(args, default_config, env_params)
        warn_small_policies(args, trainers)
        try:
            for trainer in trainers.values() if multi_host and resume else ():
                trainer.sync_from_chief()
            return _train(args, context, manager, trainers, n_agents, start, env_params)
        finally:
            if getattr(manager, "closed", True) is False:  # worker processes never outlive a failed set-up
                manager.close()
    finally:
        discard_unstarted_run_dirs()  # a folder made for a run that never started (a Unity scene that never connected)
        release_run_dirs()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _train(args: argparse.Namespace, context: Any, manager: Any, trainers: dict[str, Any], n_agents: int,
           start: float, env_params: Optional[EnvParameters] = None) -> dict[str, float]:
    """The training (or inference) run itself, once everything is set up."""
    target = args.steps if args.inference else max(t.get_max_steps for t in trainers.values())
    run_dir = os.path.join(args.results_dir, args.run_id)
    report = ProgressReport(trainers, n_agents, args.inference, target, recorded=recorded_returns(run_dir))
    tc = report.controller = _controller(args, context, trainers, n_agents, report, env_params)
    tc.reset_environment(manager)
    prepare_run_dir(args)
    for trainer in trainers.values() if args.load and not args.inference else ():
        if trainer.writes_results:  # the steps after the restored checkpoint are trained again
            trainer.drop_results_after(trainer.get_step)
    record_run(args, context, trainers)
    print(f"kerasrl: {_start_line(args, trainers, n_agents)}, seed {context.seed}, results in "
          f"{_results_folder(trainers, run_dir)} (set-up {report.start - start:.1f} s)", flush=True)
    report.resumed(context.seed)
    end_error: Optional[Exception] = None
    try:
        tc.start_learning(manager)
    except Exception as e:
        end_error = _after_training_error(tc, e)
    finally:
        report.close()
    if not args.inference:
        record_returns(run_dir, trainers)
    result = {**report.summary(), "trace_s": report.trace_seconds(), "interrupted": float(tc.interrupted)}
    _print_final(args, result, tc, report, trainers)
    if end_error is not None:
        raise end_error
    return result


def _controller(args: argparse.Namespace, context: Any, trainers: dict[str, Any], n_agents: int,
                report: ProgressReport, env_params: Optional[EnvParameters]) -> TrainerController:
    """The controller of this run, as the flags set it up."""
    minutes = args.save_every_minutes
    timers = "inference_timers.json" if args.inference else "timers.json"
    return TrainerController(
        trainers, context.model_path, context.summaries_dir, f"{args.run_id}-0", args.save_freq,
        train=not args.inference, training_seed=context.seed, progress=report.progress,
        progress_freq=max(args.progress_every // n_agents, 1), save_every_seconds=60.0 * minutes if minutes else None,
        inference_steps=max(args.steps // n_agents, 1) if args.inference and args.steps else None,
        timers_path=os.path.join(args.results_dir, args.run_id, timers), export=export_trainers,
        **(env_params or EnvParameters()).controller_kwargs(args, context.model_path, context.seed,
                                                            {name: t.get_step for name, t in trainers.items()}))


def _start_line(args: argparse.Namespace, trainers: dict[str, Any], n_agents: int) -> str:
    """``PPO on CartPole-v1 x8 in 2 worker processes``: the trainer types, the environment, where it runs."""
    workers = getattr(args, "workers", 1)
    where = f" in {workers} worker processes" if workers > 1 else ""
    if getattr(args, "env_manager", "subprocess") == "ray":
        where = f" in {workers} Ray actor{'s' if workers > 1 else ''}"
    hosts = getattr(next(iter(trainers.values()), None), "cluster", None)
    if hosts is not None:
        where += f", {hosts}"
    algorithm = " + ".join(kind.upper() for kind in sorted({t.settings.trainer for t in trainers.values()}))
    return f"{algorithm} on {args.env} x{n_agents}{where}"


def _results_folder(trainers: dict[str, Any], run_dir: str) -> str:
    hosts = getattr(next(iter(trainers.values()), None), "cluster", None)
    return run_dir if hosts is None or hosts.chief else "the chief's folder"


def _after_training_error(tc: TrainerController, e: Exception) -> Exception:
    """An error once training finished (the export, closing the environment) is kept for after
    the returns and the final line; one during training is raised, saying where to resume."""
    if tc.finished:
        return e
    if not (tc.train_model and tc.saved_steps):
        raise e
    step = max(tc.saved_steps.values())
    if isinstance(e, EnvironmentException):  # the controller checkpoints before an env error propagates
        raise EnvironmentException(f"{e} The model was saved at step {step}; continue with --resume.") from e
    if isinstance(e, UpdateThreadError):  # the learner's state is the failed update's: the newest checkpoint stays
        raise UpdateThreadError(f"{e} The newest checkpoint is at step {step}; continue with --resume.") from e
    raise e


def _print_final(args: argparse.Namespace, result: dict[str, float], tc: TrainerController, report: ProgressReport,
                 trainers: dict[str, Any]) -> None:
    """The interruption notice, the final summary line and each trainer's own summary."""
    if tc.interrupted:
        print("Interrupted: nothing to save in an inference run." if args.inference
              else "Interrupted: the model was saved; continue with --resume.", flush=True)
    print(f"final steps={int(result['steps'])} mean_return={result['mean_return']:.3f} "
          f"steps_per_sec={result['steps_per_sec']:.1f} wall_s={result['wall_s']:.2f}", flush=True)
    if math.isnan(result["mean_return"]) and not args.inference and any(report.first_step.values()):
        print("kerasrl: mean_return is not known: no episode ended in this session, and the run folder keeps no "
              f"earlier return (no {RETURNS}, no summary in the behaviors' CSVs).", flush=True)
    for trainer in trainers.values():
        line = trainer.summary_line() if hasattr(trainer, "summary_line") else None
        if line is not None:  # (several hosts)
            print(f"kerasrl: {line}", flush=True)


def record_demo(args: argparse.Namespace, default_config: Optional[str] = None) -> dict[str, float]:
    """``--record-demo PATH --steps N --resume``: the run's restored policy acts for N steps (of
    its one behavior) and ``kerasrl.demos.record`` writes them to PATH; nothing is trained. An
    existing PATH is replaced only with ``--force`` (which here leaves the run folder alone)."""
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(message)s")
    check_args(args)
    if not args.load:
        raise TrainerError("--record-demo records the policy of a trained run: add --resume (with its --run-id).")
    if args.steps is None:
        raise TrainerError("--record-demo needs --steps N, the number of steps to record.")
    if os.path.isdir(args.record_demo):
        raise TrainerError(f"--record-demo {args.record_demo} is a folder; name the demo file to write.")
    if os.path.lexists(args.record_demo) and not args.force:
        raise TrainerError(f"--record-demo {args.record_demo} already exists: add --force to overwrite it, or "
                           "name another file.")
    check_multi_host_args(args)
    set_tf_threads(args.tf_threads)
    run_args = argparse.Namespace(**{**vars(args), "inference": True, "force": False})
    context, manager, trainers, _ = _setup(run_args, default_config)
    try:
        prepare_run_dir(run_args)
        if len(trainers) != 1:
            raise TrainerError(f"--record-demo records one behavior; the environment has {sorted(trainers)}.")
        name, trainer = next(iter(trainers.items()))
        record(manager, trainer.policy, args.steps, args.record_demo, behavior=name, seed=context.seed)
    finally:
        manager.close()
        release_run_dirs()
    print(f"Recorded {args.steps} steps of {name} (run {args.run_id}, step {trainer.get_step}) to {args.record_demo}.",
          flush=True)
    return {"interrupted": 0.0}
