"""Does curiosity matter? PPO with and without curiosity on a sparse-reward task, same settings, seed by seed.

    python benchmarks/curiosity_seeds.py                     # --task lock --seeds 1401-1405
    python benchmarks/curiosity_seeds.py --task lock --seeds 1401-1410 --progress
    python benchmarks/curiosity_seeds.py --task lock3 --seeds 1501-1510 --progress
    python benchmarks/curiosity_seeds.py --task minigrid --seeds 501-505
    python benchmarks/curiosity_seeds.py --task minigrid_inner --seeds 701-705
    python benchmarks/curiosity_seeds.py --task minigrid_two_rooms --seeds 901-905
    python benchmarks/curiosity_seeds.py --task minigrid_door_key --seeds 1001-1005
    python benchmarks/curiosity_seeds.py --task minigrid_two_doors --seeds 401,1101
    python benchmarks/curiosity_seeds.py --task minigrid_snake --seeds 1201-1205
    python benchmarks/curiosity_seeds.py --task minigrid_snake --seeds 1301-1305 --steps 600000 \
        --set curiosity.learning_rate=1e-4
    python benchmarks/curiosity_seeds.py --task mountaincar --seeds 401-405
    python benchmarks/curiosity_seeds.py --task minigrid_ell3 --seeds 401-403 --progress

Both runs of a seed use ``SETTINGS`` (ML-Agents 0.9's default keys but a 2048-step buffer and 4
env copies) with the task's few changes and any ``--set KEY=VALUE`` (``curiosity.KEY`` for a
curiosity key); the "extrinsic" run drops its ``curiosity`` section, nothing else.

``lock`` (the default): a combination lock of 20 positions (``CombinationLock-v0``, built into
kerasrl: ``kerasrl.envs.lock``), two actions,
one of which, fixed by a code the same in every run, moves the agent on a position, the other
back to the start, without ending the episode; opening the lock (reaching position 20) ends it
with the only reward, 1 − 0.9 · steps / 60, and episodes stop after 60 steps. The observation is
the position, one-hot. 300k steps (5,000 episodes or more), curiosity strength 1, ``time_horizon``
128, ``beta`` 0.01, the settings the MiniGrid tasks below use; nothing tuned on the lock. A
uniformly random policy opens it in about 2 of 100,000 episodes and gets 26% of the way on
average. Developed on seeds 401–403 (extrinsic 0%, 0%, 0%; curiosity 100%, 100%, 100%, with
strength 0.1 too; with 0.01, 100%, 0% and 100%, the failure still going further at its end, 63% of
the way on average). Fresh seeds 1401–1410:

    seed   extrinsic only   with curiosity
    1401     0%              91%
    1402     0%             100%
    1403     0%             100%
    1404     0%             100%
    1405   100%             100%
    1406     0%             100%
    1407     0%             100%
    1408     0%             100%
    1409     0%             100%
    1410     0%             100%
    solved extrinsic=1/10 curiosity=10/10

Curiosity opened the lock on every seed within the first tenth of the run (``--progress``: 73–83%
of the way on average in that tenth, the whole way in the second; 1401 later fell back to
89–95%). Extrinsic reward alone opened it once (1405, whose policy went 38% of the way on average
in the first tenth, against 24–29% on the other seeds); the other runs ended 10–45% of the way
on average (1401 fell from 26% to 10%) as their policies settled on actions that ignore the
position. Each new position is an input the forward model has not seen, so its error is large
there until the model learns it: the bonus pays for the next position in turn.

``lock3``: 12 positions, three actions, 36 steps (a random policy opens it in
about 2 of 100,000 episodes too); development seeds 401–403: extrinsic 0%, 0%, 100%; curiosity
100%, 100%, 100%. Fresh seeds 1501–1510:

    seed   extrinsic only   with curiosity
    1501     0%               3%
    1502     0%             100%
    1503     0%             100%
    1504     0%             100%
    1505     0%             100%
    1506     0%             100%
    1507     0%             100%
    1508     0%             100%
    1509    90%             100%
    1510     0%             100%
    solved extrinsic=1/10 curiosity=9/10

Curiosity's failure (1501) went 81–85% of the way on average from the second tenth of the run on
and opened the lock now and then, but its policy did not settle on the last positions' code.
Extrinsic reward alone solved 1509 late: its first openings came in the fifth tenth of the run.
Over both locks' 20 fresh runs curiosity solved 19 and extrinsic reward alone 2 (Fisher's exact
test, one-sided, p = 3e-8).

``minigrid``: MiniGrid-Empty-16x16 (start in one corner, the only reward, 1 − 0.9 ·
steps / limit, on the goal square in the opposite one) with a 100-step time limit, observed as
the whole grid's codes (minigrid's ``FullyObsWrapper``), its seven actions, 300k steps, curiosity
strength 1, ``time_horizon`` 128, ``beta`` 0.01. Share of the last 100 episodes that reached
the goal:

    seed   extrinsic only   with curiosity
    501    100%             100%
    502      0%              98%
    503     75%             100%
    504      0%             100%
    505    100%             100%
    solved extrinsic=2/5 curiosity=5/5

Curiosity solves every seed; extrinsic reward alone solves two and is on its way on a third, so
on this task curiosity makes solving reliable rather than possible (short of "extrinsic solves at
most one of five").

A uniformly random policy never reaches the goal in 100 steps (0 of 600 episodes with the three
moving actions), so extrinsic PPO sees no reward unless its policy drifts: advantages normalised
over the buffer turn the value function's noise into updates of unit scale, and a policy that
mostly walks forward and turns follows the walls into the goal's corner (random policies over
the three moving actions that step forward with probability 0.7–0.9 reach it in 12–30% of
episodes). With only those three actions extrinsic PPO drifted there on 2 of seeds 501–504
(100%, 0%, 0%, 99%; curiosity 99%, 100%, 100%, 100%); the table's seven actions, tried next
so that a drift must also leave the four that do nothing, did not stop it.
With curiosity the agent's cell changes the observation, so the forward model errs most on
cells not yet visited: a novelty bonus that takes the agent across the room (seed 401, three
actions: the first goals within 40k steps; extrinsic alone never reached the goal in 300k).
Through the egocentric 7×7 view (``OneHotPartialObsWrapper``, not normalised, three actions)
curiosity of strength 1 did not help (seed 401, 200k steps: no episode reached the goal).

``minigrid_inner``: the same room, view, actions and settings with the goal moved off the walls
to (11, 11), 600k steps. Random policies over the three moving actions reach it in 100 steps
far less often than the corner (forward probability 0.7–0.9: 6–8% of episodes against
11–34%; uniform: 0.3% against 0), so a policy that drifts into following the walls misses it.
Developed on seeds 401–402 (curiosity needed more than 300k steps on 401: 28% at 300k, 100% at
600k); fresh seeds 701–705:

    seed   extrinsic only   with curiosity
    701    100%             100%
    702    100%             100%
    703      0%             100%
    704      0%             100%
    705      0%             100%
    solved extrinsic=2/5 curiosity=5/5

Moving the goal did not stop extrinsic PPO either: with twice the budget (6,000 episodes) even
rare random visits to the goal are enough for it to learn from.

``minigrid_two_rooms``: the same view, actions, settings and budget as ``minigrid_inner``, the room
split by a wall down column 8 with one door at (8, 12); start in the left room's top-left corner,
goal in the right room's bottom-right corner (14, 14). Random policies over the three moving
actions reach it in 0–1.4% of 100-step episodes (uniform 0%, forward probability 0.7–0.9 1.4%).
Development seed 401: curiosity 100%, extrinsic 0%. Fresh seeds 901–905:

    seed   extrinsic only   with curiosity
    901      0%             100%
    902    100%               3%
    903      0%              99%
    904    100%               1%
    905      0%              89%
    solved extrinsic=2/5 curiosity=2/5

Not a demonstration either: two curiosity runs never found the door within 600k steps.

``minigrid_door_key``: an 8×8 room split by a wall down column 4 whose only door, at (4, 5), is
locked; its key lies at (2, 4). The agent starts at (1, 1) and must pick the key up, open the door
with it and reach the goal at (6, 6): the same view, actions and settings, a 100-step limit,
1.2M steps. A uniformly random policy over the seven actions picks the key up in 26% of
episodes, opens the door in 0.3% and reached the goal in none of 1,000. Curiosity pays for each
new change to the grid: the key gone from its cell, the door open, the cells beyond it.
Developed on seed 401 (curiosity solved it by 300k steps; with a 600k budget, whose learning-rate
and entropy schedules decay twice as fast, it reached only 2%); fresh seeds 1001–1005:

    seed   extrinsic only   with curiosity
    1001   100%             100%
    1002     0%             100%
    1003     0%             100%
    1004   100%             100%
    1005    32%             100%
    solved extrinsic=2/5 curiosity=5/5

Again reliable rather than possible: over ~12,000 episodes extrinsic PPO still opens the door by
chance on some seeds and learns from it. Over all four MiniGrid layouts on their fresh seeds,
curiosity solved 17 of 20 runs and extrinsic reward alone 8 of 20 (Fisher's exact test,
one-sided, p = 0.004).

``minigrid_two_doors``: three rooms in a row (11×7), divided by walls down columns 4 and 7, each with
a locked door in row 3 that the one key (in the first room, at (2, 4)) opens; start at (1, 1), goal
in the last room's bottom-right corner (9, 5); same view, actions and settings, a 100-step limit,
1.5M steps. A uniformly random policy picks the key up in 25% of episodes, opens the first door in
1% and opened the second in none of 3,000. Not a demonstration either: on the development seed
401 both variants solved it (100%), on the first fresh seed, 1101, neither reached the goal
(0%), so it can no longer show "curiosity on ≥ 4 of 5 seeds where extrinsic solves ≤ 1" and the
other fresh seeds were not run. Two other layouts, tried on seed 401 only and not kept:
the 8×8 door-and-key room with a 50-step limit (random: key 10%, door 0.03%) — extrinsic alone
solved it (100%); a 10×10 room with the key on its bottom row, (2, 8), the locked door at (5, 7)
and the goal at (8, 1) (random: key 3%, door 0.05%) — neither variant reached the goal in 2M steps.

``minigrid_snake``: a 12×9 grid whose inner rows are one winding corridor, four rows of ten cells
joined through one gap at alternate ends; start at (1, 1) facing east, the goal at the last row's
far end (about 48 steps on the shortest way); same view, actions and settings, a 100-step limit,
300k steps, curiosity strength 0.1 (ML-Agents' usual range). No policy that ignores where it is
gets there: random policies over the seven actions or the three moving ones reached it in none of
2,000 episodes each, one that steps forward with probability 0.8 and turns otherwise in 0.25%.
Developed on seeds 401–404, following how far along the corridor each episode got (``--progress``): with strength 1
curiosity's agent went about a third of the way and stalled (seed 401; 0% also with five rows and
600k steps); with 0.1 it reached the goal on 401 and 403 within ~150k steps and stalled at the
second turn on 402, with 600k steps too; a larger entropy bonus (``beta`` 0.03) got 402 there but
made 404 stop moving, as extrinsic PPO does here. Fresh seeds 1201–1205:

    seed   extrinsic only   with curiosity
    1201     0%               0%
    1202     0%               0%
    1203     0%              86%
    1204     0%               0%
    1205     0%              84%
    solved extrinsic=0/5 curiosity=0/5

Extrinsic PPO never reached the goal: its policy drifts to the actions that do not move. Curiosity
took two of five runs there (most episodes, short of the 90% that counts as solved). With
``--progress`` the other three went 40–55% of the way on average by mid-run (79% at most), then
less far: once the cells they had seen no longer paid, their policies drifted as extrinsic PPO's
does. (The rerun with ``--progress`` reproduced every seed's result.)
A slower curiosity model (``--set curiosity.learning_rate=1e-4``, a third of the default), so that
the bonus for cells already seen fades more slowly, got further on the development seeds: at 300k
steps 87%, 44%, 80% and 0% with every run still going further at its end; at 500k 98%, 46%, 100%
and 100% (extrinsic alone: 0% on 401 and 402); at 600k 81% on 402. A rate of 3e-5 or strength 0.05
or 0.2 did worse, as did raw observations (``--set normalize=false``, the default rate, 300k): runs
went further early on, then none of 401–404 got beyond 46% of the way on average or reached the
goal in more than 1% of its last 100 episodes, though each reached it now and then. With the
slower model, on fresh seeds 1301–1305 at 600k steps, curiosity did no better than the default:

    seed   extrinsic only   with curiosity
    1301     0%               0%
    1302     0%               0%
    1303     0%              92%
    1304     0%               0%
    1305     0%             100%
    solved extrinsic=0/5 curiosity=2/5

The three failures got 26–39% of the way on average at best and ended at 24–29%; one (1304) never
went further than 29% in any episode. So on this corridor a run either finds the way within about
a third of its budget or not at all, and which it does depends on the seed more than on these keys.
Not kept (development seeds only): constant schedules in both variants (``--set
learning_rate_schedule=constant --set beta_end=0.01``, with the slower model) gave 89% and 0% on
402 and 404 at 300k steps, and 100%, 0%, 100% and 0% on 401–404 at 600k; on the door-and-key room
(600k) they made extrinsic PPO solve 401 and 402 and curiosity only 402. A stop-gradient on the
next observation's encoding in the forward loss, and a random-network-distillation bonus in place
of the forward error (both prototypes outside this script), did worse on 402 and 404.

``minigrid_ell``: an L-shaped corridor one cell wide (32×8): 30 cells east along the top row from
(1, 1), then 6 south to the goal; same view, actions and settings, 300k steps, strength 0.1.
Random policies over the seven actions never reached the goal in 2,000 episodes; one that steps
forward with probability 0.8 in 4%. ``minigrid_ell3``: the same corridor with the three moving
actions only. Development seeds 401–403, not run on fresh seeds because neither split cleanly:

    seed   ell: extrinsic   ell: curiosity   ell3: extrinsic   ell3: curiosity
    401      0%               0%               0%                0%
    402      0%             100%               0%              100%
    403    100%               —                100%              100%

(A straight corridor of 30 cells, tried outside this script, was solved by extrinsic PPO alone on
seed 401: its unrewarded drift towards stepping forward is enough there.) Where curiosity fails it
stalls: on ell3 seed 401 it got 52% of the way on average in the fourth tenth of the run and
ended at 44%. On ell seed 401 it stayed at 10%, less far than extrinsic PPO (20%); a 120k-step
rerun still took each of the seven actions 13–17% of the time at its end. Recording the unscaled
forward error of every transition (a temporary patch) shows that curiosity does see novelty, but
that little of the agent's experience reaches it. In a 60k-step run of ell seed 402, a step into
columns 8–11 of the corridor earned 4–5 times the error of a step that changed nothing (3.7e-2
against 7.9e-3 in the fourth fifth of the run) and columns 12–15 about 10 times, but only about
2% of the steps were there. Steps into the first four columns, where most of the experience is, earned the same as
standing still, so most transitions' rewards are alike and the few novel ones are a weak signal
after the advantages are normalised.

``mountaincar``: MountainCar-v0 with observations scaled to [−1, 1], 150k steps, curiosity
strength 0.1. Not a demonstration: on seed 401, curiosity of strength 0.1, 1 and 10 (raw
observations) and 1 and 100 (scaled) reached the flag no more often than extrinsic alone:
never. The curiosity model's forward error starts near 1e-3 per step and falls towards 0
within ~30 updates: MountainCar's two-dimensional dynamics are deterministic and quickly
predicted, so the reward vanishes before PPO has moved the car far.

Printed per run: the share of the last 100 episodes that reached the goal (a return above 0;
MountainCar's flag: above −200) and their mean return; with ``--progress`` (MiniGrid tasks and the locks), also how far
along the shortest way to the goal the run's episodes got, per tenth of the run (the mean and the
largest share), which shows where a run stalls. A run *solves* the task when at least 90
of its last 100 episodes reach the goal. The last line is machine-readable:
``solved extrinsic=<k>/<n> curiosity=<k>/<n>``. MiniGrid is a benchmark-only dependency
(``pip install minigrid``).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from typing import Any, Callable, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402
from seed_args import apply_overrides, parse_seeds  # noqa: E402

from kerasrl.envs.lock import CombinationLock  # noqa: E402

SOLVED_SHARE = 0.9
SETTINGS: dict[str, Any] = {
    "trainer": "ppo", "batch_size": 256, "buffer_size": 2048, "time_horizon": 64, "num_epoch": 3,
    "learning_rate": 3.0e-4, "beta": 5.0e-3, "epsilon": 0.2, "lambd": 0.95, "hidden_units": 128, "num_layers": 2,
    "normalize": True, "reward_signals": {
        "extrinsic": {"strength": 1.0, "gamma": 0.99},
        "curiosity": {"gamma": 0.99, "encoding_size": 64, "learning_rate": 3.0e-4}}}
NUM_ENVS = 4
MINIGRID_STEPS = 100
INNER_GOAL = (11, 11)
#: The two-room layout: the door in the dividing wall (column 8) and the goal in the far room's corner.
DOOR, FAR_GOAL = (8, 12), (14, 14)
#: The door-and-key layout (8×8): a wall down column 4 with a locked door at (4, 5), its key at (2, 4).
LOCKED_DOOR, KEY = (4, 5), (2, 4)
#: The two-door layout (11×7): walls down columns 4 and 7, each with a locked door in row 3, one key for both.
FIRST_DOOR, SECOND_DOOR, TWO_DOORS_KEY = (4, 3), (7, 3), (2, 4)
#: The winding corridor's grid (width, height): four corridors of ten cells, joined at alternate ends.
SNAKE = (12, 9)
ELL = (30, 6)
#: ``--progress``: how far along the way to the goal each finished episode got, in order.
FURTHEST: list[float] = []


class Task(NamedTuple):
    """One sparse-reward task: its registered id, the keys that differ from ``SETTINGS``, the
    default budget and the return above which an episode counts as reaching the goal."""

    env_id: str
    overrides: dict[str, Any]
    steps: int
    success_above: float
    goal: str
    curiosity_strength: float
    env_kwargs: dict[str, Any] = {}


def make_scaled_mountain_car(**kwargs: Any) -> Any:
    """MountainCar-v0 observing position and velocity scaled to [−1, 1] (curiosity's model reads
    raw observations, in which the velocity, at most 0.07, is all but invisible)."""
    env = gymnasium.make("MountainCar-v0", **kwargs)
    low, high = env.observation_space.low, env.observation_space.high
    space = gymnasium.spaces.Box(-1.0, 1.0, low.shape, np.float32)
    return gymnasium.wrappers.TransformObservation(
        env, lambda obs: (2.0 * (obs - low) / (high - low) - 1.0).astype(np.float32), space)


def make_minigrid_empty(**kwargs: Any) -> Any:
    """MiniGrid-Empty-16x16 with a ``MINIGRID_STEPS`` time limit, observed as the whole grid's
    (object, colour, state) codes flattened (16·16·3 numbers, the agent's cell among them)."""
    from minigrid.wrappers import FullyObsWrapper, ImgObsWrapper

    env = gymnasium.make("MiniGrid-Empty-16x16-v0", max_steps=MINIGRID_STEPS, **kwargs)
    env = gymnasium.wrappers.FlattenObservation(ImgObsWrapper(FullyObsWrapper(env)))
    return env


def walled_room(size: int | tuple[int, int], furnish: Callable[[Any, int, int], None], **kwargs: Any) -> Any:
    """A ``size``×``size`` (or ``(width, height)``) room with walls around it and the agent at (1, 1)
    facing east, which ``furnish(env, width, height)`` fills; observed as the whole grid, as
    ``make_minigrid_empty``."""
    from minigrid.core.grid import Grid
    from minigrid.envs import EmptyEnv
    from minigrid.wrappers import FullyObsWrapper, ImgObsWrapper

    class Room(EmptyEnv):  # type: ignore[misc]
        def _gen_grid(self, width: int, height: int) -> None:
            super()._gen_grid(width, height)  # places the agent
            self.grid = Grid(width, height)
            self.grid.wall_rect(0, 0, width, height)
            furnish(self, width, height)

    shape = {"size": size} if isinstance(size, int) else {"size": None, "width": size[0], "height": size[1]}
    env = Room(**shape, **{"max_steps": MINIGRID_STEPS, **kwargs})
    return gymnasium.wrappers.FlattenObservation(ImgObsWrapper(FullyObsWrapper(env)))


def make_minigrid_inner(**kwargs: Any) -> Any:
    """The same 16×16 room and view, with the goal moved off the walls to ``INNER_GOAL``, where a
    policy that drifts into following the walls does not pass."""
    from minigrid.core.world_object import Goal

    def furnish(env: Any, width: int, height: int) -> None:
        env.put_obj(Goal(), *INNER_GOAL)

    return walled_room(16, furnish, **kwargs)


def make_minigrid_two_rooms(**kwargs: Any) -> Any:
    """The 16×16 room split by a wall down column 8, with one door (``DOOR``) low in it: the agent
    starts in the left room's top-left corner, the goal is in the right room's bottom-right corner
    (``FAR_GOAL``). Same view as the other MiniGrid tasks."""
    from minigrid.core.world_object import Goal

    def furnish(env: Any, width: int, height: int) -> None:
        env.grid.vert_wall(DOOR[0], 0)
        env.grid.set(*DOOR, None)
        env.put_obj(Goal(), *FAR_GOAL)

    return walled_room(16, furnish, **kwargs)


def make_minigrid_door_key(**kwargs: Any) -> Any:
    """An 8×8 room split by a wall down column 4 whose only door (``LOCKED_DOOR``) is locked: the
    agent starts in the left room's top-left corner, must pick up the key (``KEY``), open the door
    with it and reach the goal in the right room's bottom-right corner. Same view as the other
    MiniGrid tasks (the key's cell empties once it is carried)."""
    from minigrid.core.world_object import Door, Goal, Key

    def furnish(env: Any, width: int, height: int) -> None:
        env.grid.vert_wall(LOCKED_DOOR[0], 0)
        env.put_obj(Door("yellow", is_locked=True), *LOCKED_DOOR)
        env.put_obj(Key("yellow"), *KEY)
        env.put_obj(Goal(), width - 2, height - 2)

    return walled_room(8, furnish, **kwargs)


def make_minigrid_two_doors(**kwargs: Any) -> Any:
    """An 11×7 grid of three rooms in a row, divided by walls down columns 4 and 7, each wall with
    one locked door (``FIRST_DOOR``, ``SECOND_DOOR``) that the same key (``TWO_DOORS_KEY``, in the
    first room) opens: the agent starts in the first room's top-left corner, picks the key up,
    opens both doors in turn and reaches the goal in the last room's bottom-right corner. Same
    view as the other MiniGrid tasks."""
    from minigrid.core.world_object import Door, Goal, Key

    def furnish(env: Any, width: int, height: int) -> None:
        for door in (FIRST_DOOR, SECOND_DOOR):
            env.grid.vert_wall(door[0], 0)
            env.put_obj(Door("yellow", is_locked=True), *door)
        env.put_obj(Key("yellow"), *TWO_DOORS_KEY)
        env.put_obj(Goal(), width - 2, height - 2)

    return walled_room((11, 7), furnish, **kwargs)


def make_minigrid_snake(**kwargs: Any) -> Any:
    """A ``SNAKE`` grid whose inner rows are one winding corridor: walls along every second row
    leave one gap each, at alternate ends, so the way from the agent's corner, (1, 1), to the goal
    at the last corridor's far end turns at every gap. Same view as the other MiniGrid tasks."""
    from minigrid.core.world_object import Goal

    def furnish(env: Any, width: int, height: int) -> None:
        for i, y in enumerate(range(2, height - 1, 2)):
            env.grid.horz_wall(1, y, width - 2)
            env.grid.set(width - 2 if i % 2 == 0 else 1, y, None)
        env.put_obj(Goal(), 1 if (height // 2 - 1) % 2 else width - 2, height - 2)

    return walled_room(SNAKE, furnish, **kwargs)


def make_minigrid_ell(**kwargs: Any) -> Any:
    """An L-shaped corridor one cell wide: ``ELL[0]`` cells east along the top row from the agent's
    corner, then ``ELL[1]`` cells south to the goal. Same view as the other MiniGrid tasks."""
    from minigrid.core.world_object import Goal

    def furnish(env: Any, width: int, height: int) -> None:
        for y in range(2, height - 1):
            env.grid.horz_wall(1, y, width - 3)
        env.put_obj(Goal(), width - 2, height - 2)

    return walled_room((ELL[0] + 2, ELL[1] + 2), furnish, **kwargs)


class MovingActions(gymnasium.ActionWrapper):  # type: ignore[misc]
    """A MiniGrid task with its three moving actions only: turn left, turn right, step forward."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.action_space = gymnasium.spaces.Discrete(3)

    def action(self, action: Any) -> Any:
        return action


def make_minigrid_ell3(**kwargs: Any) -> Any:
    """``make_minigrid_ell`` with the three moving actions only."""
    return MovingActions(make_minigrid_ell(**kwargs))


class LockProgress(gymnasium.Wrapper):  # type: ignore[misc]
    """A combination lock that records in ``FURTHEST`` the furthest position each episode reached,
    as a share of the lock's length."""

    def reset(self, **kwargs: Any) -> Any:
        self.furthest = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        self.furthest = max(self.furthest, self.env.unwrapped.position)
        if out[2] or out[3]:
            FURTHEST.append(self.furthest / self.env.unwrapped.length)
        return out


TASKS = {
    "mountaincar": Task("ScaledMountainCar-v0", {}, 150_000, -200.0, "reached the flag", 0.1),
    "minigrid": Task("MiniGridEmpty16Full-v0", {"time_horizon": 128, "beta": 0.01}, 300_000, 0.0, "reached the goal", 1.0),
    "minigrid_inner": Task("MiniGridInnerGoal16Full-v0", {"time_horizon": 128, "beta": 0.01}, 600_000, 0.0,
                           "reached the goal", 1.0),
    "minigrid_two_rooms": Task("MiniGridTwoRooms16Full-v0", {"time_horizon": 128, "beta": 0.01}, 600_000, 0.0,
                               "reached the goal", 1.0),
    "minigrid_door_key": Task("MiniGridDoorKey8Full-v0", {"time_horizon": 128, "beta": 0.01}, 1_200_000, 0.0,
                              "reached the goal", 1.0),
    "minigrid_snake": Task("MiniGridSnake12x9Full-v0", {"time_horizon": 128, "beta": 0.01}, 300_000, 0.0,
                           "reached the goal", 0.1),
    "minigrid_ell": Task("MiniGridEll30x6Full-v0", {"time_horizon": 128, "beta": 0.01}, 300_000, 0.0,
                         "reached the goal", 0.1),
    "minigrid_ell3": Task("MiniGridEll30x6Moves-v0", {"time_horizon": 128, "beta": 0.01}, 300_000, 0.0,
                          "reached the goal", 0.1),
    "lock": Task("CombinationLock20x2-v0", {"time_horizon": 128, "beta": 0.01}, 300_000, 0.0, "opened the lock", 1.0),
    "lock3": Task("CombinationLock12x3-v0", {"time_horizon": 128, "beta": 0.01}, 300_000, 0.0, "opened the lock", 1.0,
                  {"length": 12, "actions": 3, "max_steps": 36}),
    "minigrid_two_doors": Task("MiniGridTwoDoors11Full-v0", {"time_horizon": 128, "beta": 0.01}, 1_500_000, 0.0,
                               "reached the goal", 1.0),
}
FACTORIES = {"mountaincar": make_scaled_mountain_car, "minigrid": make_minigrid_empty,
             "minigrid_inner": make_minigrid_inner, "minigrid_two_rooms": make_minigrid_two_rooms,
             "minigrid_door_key": make_minigrid_door_key, "minigrid_two_doors": make_minigrid_two_doors,
             "minigrid_snake": make_minigrid_snake, "minigrid_ell": make_minigrid_ell, "minigrid_ell3": make_minigrid_ell3,
             "lock": CombinationLock, "lock3": CombinationLock}
#: The tasks ``--progress`` follows.
PROGRESS_TASKS = {name for name in TASKS if name.startswith(("minigrid", "lock"))}


class PathProgress(gymnasium.Wrapper):  # type: ignore[misc]
    """A MiniGrid task that records in ``FURTHEST`` the furthest its agent got each episode: the
    step distance from the start (over the cells no wall fills) of the furthest cell it stood on,
    as a share of the goal's. It shows where runs stall."""

    def reset(self, **kwargs: Any) -> Any:
        out = self.env.reset(**kwargs)
        self.distance = self.distances()
        goal = [cell for cell, _ in self.distance.items() if self.cell_type(cell) == "goal"]
        self.goal_distance = max(self.distance[goal[0]] if goal else max(self.distance.values()), 1)
        self.furthest = 0
        return out

    def cell_type(self, cell: tuple[int, int]) -> str:
        obj = self.env.unwrapped.grid.get(*cell)
        return "empty" if obj is None else str(obj.type)

    def distances(self) -> dict[tuple[int, int], int]:
        """Step distance from the agent's cell to every cell it could reach through cells no wall fills."""
        env = self.env.unwrapped
        start = (int(env.agent_pos[0]), int(env.agent_pos[1]))
        distance, frontier = {start: 0}, [start]
        while frontier:
            x, y = frontier.pop(0)
            for cell in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                inside = 0 <= cell[0] < env.width and 0 <= cell[1] < env.height
                if inside and cell not in distance and self.cell_type(cell) != "wall":
                    distance[cell] = distance[(x, y)] + 1
                    frontier.append(cell)
        return distance

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        cell = (int(self.env.unwrapped.agent_pos[0]), int(self.env.unwrapped.agent_pos[1]))
        self.furthest = max(self.furthest, self.distance.get(cell, 0))
        if out[2] or out[3]:
            FURTHEST.append(min(self.furthest / self.goal_distance, 1.0))
        return out


def progress_id(env_id: str) -> str:
    """The registered id of ``env_id`` wrapped in ``PathProgress``."""
    return env_id.replace("-v", "Progress-v")


def register() -> None:
    for name, task in TASKS.items():
        if task.env_id not in gymnasium.registry:
            limit = {"max_episode_steps": 200} if name == "mountaincar" else {}
            gymnasium.register(task.env_id, entry_point=FACTORIES[name], kwargs=task.env_kwargs, **limit)
        if name in PROGRESS_TASKS and progress_id(task.env_id) not in gymnasium.registry:
            factory, wrapper = FACTORIES[name], LockProgress if name.startswith("lock") else PathProgress
            gymnasium.register(progress_id(task.env_id), kwargs=task.env_kwargs,
                               entry_point=lambda factory=factory, wrapper=wrapper, **kwargs: wrapper(factory(**kwargs)))


def progress_line() -> str:
    """The mean (and largest) furthest share of ``FURTHEST`` in each tenth of the run, then empties it."""
    shares = np.asarray(FURTHEST, np.float64)
    FURTHEST.clear()
    tenths = [part for part in np.array_split(shares, 10) if len(part)]
    return " ".join(f"{part.mean():.2f}/{part.max():.2f}" for part in tenths)


def run(task: Task, seed: int, steps: int, curiosity: bool, workdir: str, strength: float = 0.0,
        progress: bool = False, overrides: tuple[str, ...] = ()) -> dict[str, float]:
    """Share of the last 100 episodes that reached the goal, and their mean return; with
    ``progress``, on the task wrapped in ``PathProgress``; ``overrides`` as ``--set`` takes them."""
    from kerasrl.envs import GymnasiumEnv, SimpleEnvManager
    from kerasrl.settings import RunContext, load_trainer_config
    from kerasrl.trainers import TrainerController, create_trainers

    section = {**SETTINGS, "summary_freq": 10**9, **task.overrides, "max_steps": steps}
    signals = {name: dict(signal) for name, signal in section["reward_signals"].items()}
    signals["curiosity"]["strength"] = strength or task.curiosity_strength
    section["reward_signals"] = signals
    apply_overrides(section, list(overrides))
    if not curiosity:
        del signals["curiosity"]
    env_id = progress_id(task.env_id) if progress else task.env_id
    manager = SimpleEnvManager(GymnasiumEnv(env_id, num_envs=NUM_ENVS, seed=seed))
    context = RunContext(run_id="curiosity", summaries_dir=os.path.join(workdir, "s"),
                         model_path=os.path.join(workdir, "m"), keep_checkpoints=1, seed=seed, max_steps=steps)
    trainers = create_trainers(load_trainer_config({"default": section}), manager.behavior_specs, context)
    TrainerController(trainers, os.path.join(workdir, "m"), os.path.join(workdir, "s"), "curiosity",
                      save_freq=10**9, train=True, training_seed=seed, export=lambda _: None).start_learning(manager)
    last = np.asarray(list(trainers[env_id].recent_returns), np.float64)
    return {"reached": float(np.mean(last > task.success_above)) if len(last) else 0.0,
            "mean": float(np.mean(last)) if len(last) else float("nan")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), default="lock")
    parser.add_argument("--seeds", default="1401-1405")
    parser.add_argument("--steps", type=int, default=0, help="steps per run (default: the task's)")
    parser.add_argument("--strength", type=float, default=0.0, help="curiosity's strength (default: the task's)")
    parser.add_argument("--only", choices=("extrinsic", "curiosity"), default=None, help="run one variant only")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a trainer key in both variants (curiosity.KEY: a curiosity key), "
                             "e.g. --set curiosity.learning_rate=1e-4")
    parser.add_argument("--progress", action="store_true",
                        help="MiniGrid tasks and the lock: also print, per tenth of each run, how far along the way to the goal "
                             "its episodes got (mean/largest share)")
    args = parser.parse_args()
    if args.task.startswith("minigrid") and importlib.util.find_spec("minigrid") is None:
        sys.exit("--task minigrid needs the minigrid package (pip install minigrid), a benchmark-only dependency")
    if args.progress and args.task not in PROGRESS_TASKS:
        sys.exit(f"--progress needs a MiniGrid task or a lock, not --task {args.task}")

    from kerasrl.cli.train import set_tf_threads

    set_tf_threads(1)
    register()
    task = TASKS[args.task]
    steps = args.steps or task.steps
    solved = {"extrinsic": 0, "curiosity": 0}
    seeds = parse_seeds(args.seeds)
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for name in (args.only,) if args.only else ("extrinsic", "curiosity"):
                start = time.perf_counter()
                r = run(task, seed, steps, name == "curiosity", os.path.join(tmp, f"{name}{seed}"), args.strength,
                        args.progress, tuple(args.set))
                solved[name] += r["reached"] >= SOLVED_SHARE
                print(f"seed {seed} {name:9s}: {r['reached']:.0%} of the last 100 episodes {task.goal}, "
                      f"mean return {r['mean']:.1f} ({time.perf_counter() - start:.0f} s)", flush=True)
                if args.progress:
                    print(f"    furthest share of the way, per tenth of the run: {progress_line()}", flush=True)
    print(f"solved extrinsic={solved['extrinsic']}/{len(seeds)} curiosity={solved['curiosity']}/{len(seeds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
