"""Unity ML-Agents' demonstration files (``.demo``, as the package's DemonstrationRecorder writes
them and ``mlagents`` reads them): read into, and written from, kerasrl's demonstration data.

The file (the messages are in ``kerasrl/protos/unity_protocol.proto``)::

    byte 0    DemonstrationMetaProto, length-delimited (a varint byte count, then the message):
              api_version (0 or 1), demonstration_name, number_steps, number_episodes, mean_reward
    byte 33   BrainParametersProto, length-delimited: the behavior's name and actions
    then      number_steps AgentInfoActionPairProto, each length-delimited: what an agent saw
              (observations, the reward since its last decision, done, max_step_reached, action
              mask, its id) and the action it then took

Unity appends the meta message's bytes once more at the end of the file (it rewrites the header
when it closes the file); only ``number_steps`` steps are read (every step to the end of the file
when the header counts no step and no episode: a recording that was never closed).

A step's reward and done flags belong to the action of the agent's previous step, so each
kerasrl row is one step of an agent with the next step of the same agent (``id``): the row's
observations, action and action mask come from the first, its next observations, reward and
done flags from the second. A done step ends an episode and starts no row; the last step of an
agent that did not end its episode has no outcome and starts no row either. Episodes are
ordered by the file position of their last step (as kerasrl's recordings order them, by the time
they ended) and numbered 0, 1, ... (``Field.EPISODE_ID``). ``max_step_reached`` is
``Field.TRUNCATED``, a done step without it ``Field.TERMINATED``.

Visual observations are PNG images (decoded here by a small zlib-based decoder: 8-bit,
non-interlaced) or floats. An image's shape is (channels, height, width) when its
``dimension_properties`` say so (NONE, TRANSLATIONAL_EQUIVARIANCE twice: packages 2.x and 3.x),
else (height, width, channels) (1.x); kerasrl's spec and arrays are (height, width, channels).

kerasrl writes its rows episode after episode, each episode's steps followed by the step that
ends it (done, or not when the episode was cut short: its last row's next observations and
reward), the ``id`` of every step its episode's number (the package writes its agent's episode
id, which is new in each episode); images channels first (as packages 2.x and 3.x do), as PNG
when that is lossless (every value a multiple of 1/255 in [0, 1], up to float rounding: such
values read back within 1e-6, as kerasrl's Unity environment decodes PNG pixels), else as floats.
The file is made in memory and written atomically (:func:`kerasrl.buffer.write_atomically`).

The package: ``_common`` (constants, errors), ``png`` (the PNG codec), ``reader``, ``writer``.
"""
from __future__ import annotations

from kerasrl.demo_format._common import (
    API_VERSION,
    BRAIN_PARAMETERS_OFFSET,
    HDF5_SIGNATURE,
    SUPPORTED_API_VERSIONS,
    DemoError,
    is_hdf5,
)
from kerasrl.demo_format.png import decode_png, encode_png
from kerasrl.demo_format.reader import read_unity_demo
from kerasrl.demo_format.writer import write_unity_demo

__all__ = ["API_VERSION", "BRAIN_PARAMETERS_OFFSET", "DemoError", "HDF5_SIGNATURE", "SUPPORTED_API_VERSIONS",
           "decode_png", "encode_png", "is_hdf5", "read_unity_demo", "write_unity_demo"]
