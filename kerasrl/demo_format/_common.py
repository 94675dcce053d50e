"""What the reader and the writer share: the format's constants and errors."""
from __future__ import annotations

import os
from typing import Union

import numpy as np

from kerasrl.exception import UnityTrainerException

#: The api_version kerasrl writes (the package's DemonstrationMetaData.ApiVersion).
API_VERSION = 1
#: The api_versions kerasrl reads (those ``mlagents`` reads).
SUPPORTED_API_VERSIONS = frozenset({0, 1})
#: Where the brain parameters start: 32 bytes reserved for the meta message, plus one.
BRAIN_PARAMETERS_OFFSET = 33
#: The first bytes of an HDF5 file (kerasrl's own demo format).
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: ObservationProto.dimension_properties as the package writes them (UNSPECIFIED 0, NONE 1,
#: TRANSLATIONAL_EQUIVARIANCE 2): a vector; an image of shape (channels, height, width), as
#: packages 2.x and 3.x send one (1.x sent (height, width, channels), marked (2, 2, 1) or not at all).
VECTOR_DIMENSIONS = (1,)
CHANNELS_FIRST = (1, 2, 2)
INV_255 = np.float32(1.0 / 255.0)
#: Images whose values all lie this close to multiples of 1/255 in [0, 1] are written as PNG (a
#: value k/255 computed one way or another differs from how a PNG pixel is read by float rounding).
PNG_TOLERANCE = 1e-6


class DemoError(UnityTrainerException):
    """A demo file is missing, foreign, truncated, or for another behavior spec; the message names it."""


class Corrupt(Exception):
    """Something wrong inside a file; the reader turns it into one DemoError naming the file."""


def is_hdf5(path: Union[str, os.PathLike[str]]) -> bool:
    """Whether the file at ``path`` starts with HDF5's signature (kerasrl's own demo format)."""
    with open(path, "rb") as f:
        return f.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE
