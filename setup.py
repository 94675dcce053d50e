"""Build script for kerasrl: the Python package plus its Cython cores (buffer; the kernels of the acting and trajectory loop)."""
import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

extensions = [
    Extension(
        f"kerasrl.{name}",
        [f"kerasrl/{name}.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for name in ("_buffer", "_kernels")
]

setup(
    name="kerasrl",
    version="0.1.0",
    description="The Unity ML-Agents trainer stack (PPO, BC, reward signals) on TensorFlow 2 and Keras 3",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["kerasrl", "kerasrl.*"]),
    # The sample configs are package data (kerasrl.configs.config_path finds them once installed);
    # the sdist adds tests/, examples/ and benchmarks/ (MANIFEST.in), the wheel only the package.
    package_data={"kerasrl": ["_buffer.pyx", "_kernels.pyx", "py.typed"], "kerasrl.configs": ["*.yaml"],
                  "kerasrl.protos": ["*.proto", "*.pyi"]},
    exclude_package_data={"kerasrl": ["*.c", "*.html"]},
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
    ),
    install_requires=[
        # ``tensorflow`` (not ``tensorflow-cpu``): its Linux wheels use GPUs when CUDA libraries are
        # present (the ``gpu`` extra installs them), for ``--gpus N``. 2.21 on x86_64: a 572 MB wheel
        # (tensorflow-cpu: 274 MB), 1.9 GB installed (README, "Several GPUs").
        "tensorflow>=2.16,<2.22",
        "keras>=3.3,<4",
        "numpy>=1.26,<3",
        "h5py>=3.10,<3.15",
        "pyyaml>=6.0,<7",
        "gymnasium>=1.0,<2",
        "tensorboard>=2.16,<3",
        # The Unity protocol (kerasrl/protos): its generated modules need these at least; TensorFlow
        # 2.21 pulls the same.
        "grpcio>=1.85.1,<2",
        "protobuf>=7.35.1,<8",
    ],
    extras_require={
        # setuptools and cython: tests/test_packaging.py builds the sdist from setup.py; pytest-xdist
        # runs the suite on two processes (README's `-n 2`).
        # pettingzoo: the multi-agent adapter's tests run with it (kerasrl[pettingzoo] for users).
        "test": ["pytest>=8,<10", "pytest-xdist>=3.5,<4", "hypothesis>=6.100,<7", "setuptools>=68", "cython>=3.0,<4",
                 "pettingzoo>=1.24,<2"],
        # tools/generate_protos.py (tests/test_unity_protos.py checks the checked-in modules are current).
        "dev-protos": ["grpcio-tools>=1.85.1,<2"],
        # The lint and type gates of .ci/run (configured in pyproject.toml).
        "dev": ["ruff>=0.15,<0.18", "mypy>=2.0,<3", "types-PyYAML>=6.0,<7"],
        # NVIDIA's CUDA and cuDNN wheels for tensorflow (Linux x86_64): several GB.
        "gpu": ["tensorflow[and-cuda]>=2.16,<2.22"],
        # tf2onnx 1.16 pins a protobuf that TensorFlow 2.21 rejects; 1.17 works with Keras 3.
        "onnx": ["tf2onnx>=1.17,<2", "onnxruntime>=1.20"],
        "plot": ["matplotlib>=3.8"],
        # The documentation site (mkdocs.yml; `python3 -m mkdocs build --strict`, run by .ci/run).
        "docs": ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "mkdocstrings>=0.30,<2", "mkdocstrings-python>=1.16,<3"],
        "ray": ["ray>=2.9,<3"],
        # PettingZoo games as environments (kerasrl.envs.pettingzoo_env, --env pettingzoo:<module>).
        "pettingzoo": ["pettingzoo>=1.24,<2"],
    },
    entry_points={"console_scripts": ["kerasrl-learn=kerasrl.cli:main", "kerasrl=kerasrl.cli.tools:main"]},
    zip_safe=False,
)
