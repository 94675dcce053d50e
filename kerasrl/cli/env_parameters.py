"""What ``--curriculum`` and ``--sampler`` name, read and checked before TensorFlow loads and
before the run folder is touched."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from kerasrl.curriculum import MetaCurriculum, load_lessons
from kerasrl.exception import TrainerError
from kerasrl.samplers import SamplerManager, load_sampler_file, resume_draws


@dataclass
class EnvParameters:
    """What ``--curriculum`` and ``--sampler`` give: lessons, sampler entries and interval."""

    meta_curriculum: Any = None
    sampler_config: Optional[dict[str, Any]] = None
    resampling_interval: Optional[int] = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "EnvParameters":
        """Read and check the files (before the run folder is touched)."""
        if getattr(args, "lesson", None) is not None and (args.lesson < 0 or not args.curriculum):
            raise TrainerError(f"--lesson {args.lesson}: needs --curriculum and a lesson >= 0.")
        meta = MetaCurriculum(args.curriculum) if getattr(args, "curriculum", None) else None
        if meta is not None and args.lesson is not None:
            meta.check_lesson(args.lesson)
        if getattr(args, "sampler", None) is None:
            return cls(meta)
        sampler, interval = load_sampler_file(args.sampler)
        return cls(meta, sampler.reset_param_dict, interval)

    def reward_buff_caps(self) -> dict[str, int]:
        """Each curriculum's behavior keeps the returns of its last ``min_lesson_length`` episodes."""
        curricula = self.meta_curriculum.curricula if self.meta_curriculum is not None else {}
        return {name: c.min_lesson_length for name, c in curricula.items()}

    def controller_kwargs(self, args: argparse.Namespace, model_path: str, seed: int,
                          steps: Optional[Mapping[str, int]] = None) -> dict[str, Any]:
        """The controller's curriculum and sampler arguments; the lessons start at ``--lesson``,
        else (with ``--resume``) where the checkpoint the trainers restored (at ``steps``) left them."""
        meta = self.meta_curriculum
        if meta is not None:
            if args.lesson is not None:
                meta.set_all_curriculums_to_lesson_num(args.lesson)
            elif args.load and load_lessons(meta, model_path, steps):
                print(f"Resumed the curricula at lessons {meta.lesson_nums}.", flush=True)
        sampler = SamplerManager(self.sampler_config, seed) if self.sampler_config is not None else None
        if sampler is not None and args.load and resume_draws(sampler, model_path, steps or {}):
            print(f"Resumed the samplers: their next draw is number {sampler.draws + 1}.", flush=True)
        return {"meta_curriculum": meta, "sampler_manager": sampler,
                "resampling_interval": self.resampling_interval if sampler is not None else None}
