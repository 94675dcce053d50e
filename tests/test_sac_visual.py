"""Visual SAC: the replay's camera next-observations, the encoders, acting, export, BC and learning."""
import numpy as np
import pytest

from kerasrl.buffer import BufferException
from kerasrl.sac.replay import VALID, ReplayBuffer

NEXT_OF = {"next_frame": "frame"}


def trajectory(start, n):
    """``n`` transitions whose frames are numbered ``start …`` (each frame a 2×2 image of its
    number) and whose next frame is the following number."""
    frames = np.arange(start, start + n + 1, dtype=np.float32)[:, None, None] * np.ones((1, 2, 2), np.float32)
    return {"frame": frames[:-1].copy(), "next_frame": frames[1:].copy(), "t": np.arange(start, start + n, dtype=np.int64)}


def check_rows(batch):
    np.testing.assert_array_equal(batch["frame"][..., 0, 0], batch["t"])
    np.testing.assert_array_equal(batch["next_frame"][..., 0, 0], batch["t"] + 1)


def test_visual_next_observations_are_the_following_rows_and_stored_once(tmp_path):
    replay = ReplayBuffer(10, NEXT_OF)
    for start, n in [(0, 4), (100, 3), (200, 5), (300, 1)]:  # wraps around: the first two are overwritten
        replay.add(trajectory(start, n))
    assert "next_frame" not in replay.columns and replay.columns["frame"].shape == (10, 2, 2)
    assert len(replay) == 6  # 5 + 1 transitions, each trajectory's extra row not counted
    rng = np.random.default_rng(0)
    batch = replay.sample(rng, (500, 3))
    check_rows(batch)
    assert set(np.unique(batch["t"])) == {200, 201, 202, 203, 204, 300}  # every transition, no extra row
    path = str(tmp_path / "replay.h5")
    replay.save(path)
    loaded = ReplayBuffer.load(path)
    assert loaded.next_of == NEXT_OF and len(loaded) == 6
    check_rows(loaded.sample(rng, (200,)))
    smaller = ReplayBuffer.load(path, capacity=4)  # the newest 4 rows: 203, 204, extra, 300, extra
    assert set(np.unique(smaller.sample(rng, (200,))["t"])) == {204, 300}
    assert smaller.columns[VALID].sum() == len(smaller) == 2


def test_visual_replay_refuses_rows_that_are_not_one_trajectory():
    replay = ReplayBuffer(10, NEXT_OF)
    rows = trajectory(0, 3)
    rows["next_frame"][0] += 5.0
    with pytest.raises(BufferException, match="next_frame"):
        replay.add(rows)
    with pytest.raises(BufferException, match="next_frame"):
        replay.add({k: v for k, v in trajectory(0, 3).items() if k != "next_frame"})
