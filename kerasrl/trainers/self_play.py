"""Self-play (ML-Agents' ghost trainer): one trainer of any registered type learns for a behavior's
teams (``Name?team=0``, ``Name?team=1``...) while they play each other.

One team learns at a time (the :class:`League` of the run says which): its trajectories train the
inner trainer, whose step counts towards ``max_steps``; the other teams act with a snapshot of the
learning policy's past weights, in a second acting policy (a copy of the model). Every
``save_steps`` trainer steps the learning weights join a window of the last ``window`` snapshots;
every ``swap_steps`` steps of the teams that do not learn (ML-Agents' ghost steps) the opponents get
other weights: the learning policy's latest with probability ``play_against_latest_model_ratio``,
else a snapshot drawn uniformly from the window (a seeded generator); every ``team_change`` trainer
steps the next team learns. Each finished game of the learning team (its final reward > 0 a win,
0 a draw, < 0 a loss) moves the learning policy's ELO rating and its opponent's (K = 16), written
as ``Self-play/ELO`` and read by the curriculum measure ``Elo``.

Unlike ML-Agents, where a game against the latest policy leaves the rating where it is (the
opponent's rating is the learner's own), the latest policy plays with the rating the learner had
at the swap, so that every game counts. The league's state (snapshots, ratings, learning team,
counters, the generator) is saved atomically beside the inner trainer's checkpoints
(:mod:`kerasrl.trainers.self_play_state`), so that ``--resume`` continues it.
"""
from __future__ import annotations

import contextlib
import logging
from collections import deque
from typing import Any, Mapping, Optional

import numpy as np

from kerasrl.exception import TrainerConfigError
from kerasrl.settings.self_play import SelfPlaySettings
from kerasrl.spec import StepResult
from kerasrl.trainers.elo import game_result, rating_change
from kerasrl.trainers.self_play_state import SelfPlayState, read_self_play, write_self_play
from kerasrl.trainers.trainer import Trainer

logger = logging.getLogger("kerasrl.trainers")

#: Unity's suffix of a team's behavior (``Striker?team=1``).
TEAM_SUFFIX = "?team="


def team_of(behavior: str) -> int:
    """The team of a behavior named as Unity names them (``Name?team=1`` -> 1; no suffix: team 0)."""
    _, suffix, team = behavior.partition(TEAM_SUFFIX)
    return int(team) if suffix and team.isdigit() else 0


def base_name(behavior: str) -> str:
    """A behavior's name without its team suffix (``Name?team=1`` -> ``Name``)."""
    return behavior.split(TEAM_SUFFIX, 1)[0]


class League:
    """The teams of a run's self-play trainers and the one that learns (ML-Agents' ghost controller):
    the teams learn in turn, lowest id first, and a game's rating change is taken from the
    opponents' trainers. Trainers of several base names (an asymmetric game, or teams of several
    behaviors) share one league; a team's first trainer (its captain) changes the learning team
    and holds the rating its opponents play against, as the one ML-Agents subscribes per team."""

    def __init__(self) -> None:
        self.trainers: dict[int, list["SelfPlayTrainer"]] = {}
        self.learning_team: int = 0
        self.queue: deque[int] = deque()
        #: The state a checkpoint kept, applied once every one of its teams has joined.
        self._saved: Optional[dict[str, Any]] = None

    def join(self, team: int, trainer: "SelfPlayTrainer") -> None:
        """``trainer`` plays for ``team``; before any change, the lowest team learns first."""
        members = self.trainers.setdefault(team, [])
        if trainer not in members:
            members.append(trainer)
        teams = sorted(self.trainers)
        self.learning_team, self.queue = teams[0], deque(teams[1:])
        if self._saved is not None:
            self.restore(self._saved)

    def change_team(self) -> None:
        """The next team learns; the one that learned waits for its turn again."""
        if self.queue:
            self.queue.append(self.learning_team)
            self.learning_team = self.queue.popleft()

    def captain(self, team: int) -> "SelfPlayTrainer":
        """The first trainer that joined ``team``."""
        return self.trainers[team][0]

    def opponents(self) -> list["SelfPlayTrainer"]:
        """The captains of the teams that do not learn now (each once)."""
        out: list[SelfPlayTrainer] = []
        for team in self.trainers:
            if team != self.learning_team and self.captain(team) not in out:
                out.append(self.captain(team))
        return out

    def opponent_rating(self) -> float:
        """The rating of the policy the learning team plays against (with several opponents' trainers,
        the last one's, as ML-Agents)."""
        opponents = self.opponents()
        return opponents[-1].opponent_elo if opponents else 0.0

    def record(self, change: float) -> None:
        """A game moved the learner's rating by ``change``: the opponents' ratings move back by as much."""
        for trainer in self.opponents():
            trainer.opponent_elo -= change

    def state(self) -> dict[str, Any]:
        return {"learning_team": self.learning_team, "queue": list(self.queue)}

    def restore(self, state: Mapping[str, Any]) -> None:
        """The learning team and the turn order a checkpoint kept, once its teams have all joined."""
        self._saved = dict(state)
        teams = [int(state["learning_team"]), *map(int, state["queue"])]
        if sorted(teams) == sorted(self.trainers):
            self.learning_team, self.queue = teams[0], deque(teams[1:])


class SelfPlayTrainer(Trainer):
    """The ghost of ``inner`` (a trainer of the behavior's registered type, named by the base name) that
    acts for ``behaviors``, the teams' behaviors. The inner trainer owns the step, the statistics and
    the files; what this class does not define is read from it."""

    def __init__(self, inner: Trainer, behaviors: list[str], league: League, settings: SelfPlaySettings) -> None:
        # Trainer.__init__ is not called: its step, statistics and summary writers are the inner trainer's.
        self.inner = inner
        self.self_play = settings
        self.league = league
        self.teams = {b: team_of(b) for b in behaviors}
        self.rng = np.random.default_rng(inner.context.seed)
        self.state = SelfPlayState(elo=settings.initial_elo, latest_elo=settings.initial_elo, last_save=inner.step,
                                   last_team_change=inner.step)
        self.snapshots: list[list[np.ndarray]] = []
        self.opponent_weights: list[np.ndarray] = []
        self._changed = True
        for team in sorted(set(self.teams.values())):
            league.join(team, self)
        #: The learning team this trainer last saw (None: it follows the league's from its first step).
        self._playing: Optional[int] = None
        self._opponent_model, self._opponent_policy = self._opponent_copy()
        if not (inner.context.load_model and self._restore()):
            self._save_snapshot()
            self._swap()

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # read before __init__ set it (copy, pickle)
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __str__(self) -> str:
        return f"{self.inner} (self-play of {', '.join(self.teams)})"

    # -- what the controller reads ----------------------------------------------------------
    @property
    def step(self) -> int:
        return int(self.inner.step)

    @step.setter
    def step(self, value: int) -> None:
        self.inner.step = value

    @property
    def elo(self) -> float:
        """The learning policy's ELO rating (the curriculum measure ``Elo``)."""
        return self.state.elo

    @property
    def opponent_elo(self) -> float:
        """The rating of the snapshot the other teams play with now."""
        index = self.state.opponent
        return self.state.latest_elo if index is None else self.state.snapshot_elos[index]

    @opponent_elo.setter
    def opponent_elo(self, value: float) -> None:
        index = self.state.opponent
        if index is None:
            self.state.latest_elo = float(value)
        else:
            self.state.snapshot_elos[index] = float(value)

    @property
    def behaviors(self) -> list[str]:
        return list(self.teams)

    @property
    def learning_behaviors(self) -> list[str]:
        """The behaviors of the team that learns now (none while another trainer's team learns)."""
        return [b for b, team in self.teams.items() if team == self.league.learning_team]

    def policy_for(self, behavior: str) -> Any:
        """The learning team's: the inner trainer's policy; the others': the opponent's."""
        return self.inner.policy if self.teams[behavior] == self.league.learning_team else self._opponent_policy

    @property
    def policy(self) -> Any:
        return self.inner.policy

    @property
    def trained_model(self) -> Any:
        """The learning policy's model (the one exported)."""
        return self.inner.trained_model

    @property
    def writes_results(self) -> bool:
        return self.inner.writes_results

    @property
    def parameters(self) -> dict[str, Any]:
        return self.inner.parameters

    def take_policy_change(self) -> bool:
        changed, self._changed = self._changed, False
        return changed

    # -- experience --------------------------------------------------------------------------
    def add_step(self, previous: Mapping[str, StepResult], current: Mapping[str, StepResult],
                 outputs: Optional[dict[str, Any]]) -> None:
        """Every behavior's step (only the learning team's reach the inner trainer)."""
        for behavior in self.teams:
            self.add_behavior_step(behavior, previous, current, outputs)

    def add_behavior_step(self, behavior: str, previous: Mapping[str, StepResult], current: Mapping[str, StepResult],
                          outputs: Optional[dict[str, Any]]) -> None:
        """The learning team's step goes to the inner trainer under its name, and its finished games
        are rated; the other teams' experience is not kept (they act with fixed weights)."""
        if self.teams[behavior] != self.league.learning_team:
            return
        name, before, after = self.inner.behavior_name, previous.get(behavior), current.get(behavior)
        self.inner.add_step({} if before is None else {name: before}, {} if after is None else {name: after}, outputs)
        if after is not None:
            self._rate_games(after)

    def _rate_games(self, result: StepResult) -> None:
        """Each game that ended at this step moves both ratings (``Self-play/ELO``)."""
        for reward in result.rewards[result.terminated | result.truncated]:
            change = rating_change(self.state.elo, self.league.opponent_rating(), game_result(float(reward)))
            self.state.elo += change
            self.league.record(change)
            self.inner.stats["Self-play/ELO"].append(self.state.elo)

    def process_trajectories(self) -> None:
        self.inner.process_trajectories()

    def end_episode(self) -> None:
        self.inner.end_episode()

    def is_ready_update(self) -> bool:
        return self.inner.is_ready_update()

    def update_policy(self) -> None:
        self.inner.update_policy()

    def finish_updates(self, drain: bool) -> None:
        self.inner.finish_updates(drain)

    # -- the league's clock ------------------------------------------------------------------
    def increment_step(self, n_steps: int) -> None:
        self.inner.increment_step(n_steps)

    def increment_behavior_steps(self, steps: Mapping[str, int]) -> None:
        """The learning team's steps are the inner trainer's, the others' ghost steps (by the team that
        learned when they were taken: another trainer may have changed it since); then snapshot,
        change the learning team and swap the opponents as they are due."""
        playing = self.league.learning_team if self._playing is None else self._playing
        learning = sum(n for b, n in steps.items() if self.teams.get(b) == playing)
        self.state.ghost_step += sum(steps.values()) - learning
        self.inner.increment_step(learning)
        self._follow_league()
        state, step = self.state, self.inner.step
        if step - state.last_save >= self.self_play.save_steps:
            self._save_snapshot()
        team_change = int(self.self_play.team_change or 5 * self.self_play.save_steps)
        captain = self.league.captain(self.league.learning_team) is self
        if captain and step - state.last_team_change >= team_change:
            state.last_team_change = step
            self.league.change_team()
            self._follow_league()
        if state.ghost_step - state.last_swap >= self.self_play.swap_steps:
            self._swap()

    def _follow_league(self) -> None:
        """When the league's learning team changed: a trainer that stops learning keeps its policy as
        a snapshot, one that starts counts its turn from now, and the opponents are drawn again. The
        inner trainer drops its unfinished trajectories (another team's agents act for it now)."""
        learning = self.league.learning_team
        if self._playing is None:
            self._playing = learning
        if learning == self._playing:
            return
        was, now = self._playing in self.teams.values(), learning in self.teams.values()
        self._playing = learning
        if was:
            self._save_snapshot()
        if now:
            self.state.last_team_change = self.inner.step
        if was or now:
            self.inner.end_episode()
        self._swap()
        logger.info("%s: team %d learns from step %d.", self.inner.behavior_name, learning, self.inner.step)

    def _learning_weights(self) -> list[np.ndarray]:
        """A copy of the learning model's weights (read whole, between two updates)."""
        with getattr(self.inner, "learner_lock", contextlib.nullcontext()):
            return [np.array(w, copy=True) for w in self.inner.trained_model.get_weights()]

    def _save_snapshot(self) -> None:
        """The learning weights into the window (the oldest snapshot gives way), rated as the learner now."""
        state, window = self.state, self.self_play.window
        slot = state.saved_snapshots % window
        weights = self._learning_weights()
        if slot < len(self.snapshots):
            self.snapshots[slot] = weights
            state.snapshot_elos[slot] = state.elo
            if state.opponent == slot:  # the opponent plays on with the weights it had, rated apart
                state.opponent, state.latest_elo = None, self.opponent_elo
        else:
            self.snapshots.append(weights)
            state.snapshot_elos.append(state.elo)
        state.saved_snapshots += 1
        state.last_save = self.inner.step

    def _swap(self) -> None:
        """New weights for the other teams: the latest with probability ``play_against_latest_model_ratio``,
        else a snapshot of the window drawn uniformly."""
        state = self.state
        state.last_swap = state.ghost_step
        if self.rng.random() < self.self_play.play_against_latest_model_ratio or not self.snapshots:
            state.opponent, state.latest_elo = None, state.elo
            self.opponent_weights = self._learning_weights()
        else:
            state.opponent = int(self.rng.integers(len(self.snapshots)))
            self.opponent_weights = self.snapshots[state.opponent]
        self._load_opponent()

    # -- the opponents' policy -----------------------------------------------------------------
    def _opponent_copy(self) -> tuple[Any, Any]:
        """A second model of the inner trainer's type and its acting policy (``with_model``)."""
        inner = self.inner
        make = getattr(inner.policy, "with_model", None)
        if make is None:
            raise TrainerConfigError(f"Behavior {inner.behavior_name}: the {inner.settings.trainer} trainer's policy "
                                     "cannot act with another model's weights, so it cannot train by self-play; "
                                     "remove the self_play block.")
        model, _ = type(inner).checkpointed_model(inner.behavior_name, inner.spec, inner.settings, inner.context.seed)
        return model, make(model, seed=inner.context.seed + 1)

    def _load_opponent(self) -> None:
        """The opponents' policy acts with ``opponent_weights`` from its next step on."""
        self._opponent_model.set_weights(self.opponent_weights)
        self._opponent_policy.refresh()
        refresh_normalizer = getattr(self._opponent_policy, "refresh_normalizer", None)
        if refresh_normalizer is not None:
            refresh_normalizer()
        self._changed = True

    # -- checkpoints -------------------------------------------------------------------------
    def save_model(self) -> str:
        """The inner trainer's checkpoint, then the league's state beside it."""
        prefix = self.inner.save_model()
        if self.inner.writes_results:
            self.state.step, self.state.league = self.inner.step, self.league.state()
            self.state.rng = dict(self.rng.bit_generator.state)
            write_self_play(self.inner.model_path, self.state, self.snapshots, self.opponent_weights)
        return prefix

    def _restore(self) -> bool:
        """The league's state that the resumed checkpoint kept; False when there is none."""
        saved = read_self_play(self.inner.model_path)
        if saved is None:
            return False
        self.state, self.snapshots, self.opponent_weights = saved
        if self.state.step != self.inner.step:
            logger.warning("%s: the self-play state was saved at step %d and the checkpoint restored is of step %d; "
                           "the league goes on from its state.", self.inner.behavior_name, self.state.step,
                           self.inner.step)
        self.rng.bit_generator.state = self.state.rng
        self.league.restore(self.state.league)
        self._load_opponent()
        logger.info("%s: resumed self-play with %d snapshots, ELO %.1f.", self.inner.behavior_name,
                    len(self.snapshots), self.state.elo)
        return True

    def close(self) -> None:
        self.inner.close()

    def drop_results_after(self, step: int) -> None:
        self.inner.drop_results_after(step)

    def write_hyperparameters(self) -> None:
        self.inner.write_hyperparameters()

    def write_summary(self, global_step: int, delta_train_start: float, lesson_num: Optional[int] = None) -> None:
        self.inner.write_summary(global_step, delta_train_start, lesson_num)
