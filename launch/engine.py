"""`launch.run(spec)`: the one way a run described by a `RunSpec` is launched.

    outcome = engine.run(spec)          # spec.launch picks the row of `modes.MODES`

Before the mode runs it, the engine claims the run directory (one run per directory),
writes run.json (here and nowhere else: `RunSpec.save`) and says when the run will take no
learner step. ``actorq train`` parses its flags into the spec, calls `place` before that
(the learner's device must be chosen before anything starts a jax backend) and prints what
the run reports and the `modes.Outcome`; `local.run(config)` (Python) comes here too.
"""
from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any, Optional

from actorq import core
from actorq.components import atomic, checkpointing
from actorq.components import placement
from actorq.components import run_dir, tracking
from actorq.launch import modes
from actorq.launch import spec as spec_lib


def place(launch: str, learner_device: str, flag: str = "--learner-device") -> None:
  """Where this process's jax may compute, decided before anything starts a jax backend:
  a launcher whose learner runs elsewhere (`LaunchMode.in_process` False) and a CPU
  learner's process use the CPU only (no GPU backend, no GPU memory reserved); a GPU
  learner must have a GPU (checked here for in-process modes, in a child process with this
  environment for `local_mp`; a `hosts` learner's host decides).

  Raises:
    core.UsageError: an unknown launch mode; `learner_device` "gpu" and jax sees no GPU.
  """
  try:
    mode = modes.mode_for(launch)
  except ValueError as e:
    raise core.UsageError(str(e)) from None
  if not mode.in_process or learner_device == "cpu":
    placement.restrict_to_cpu()
  if mode.on_other_hosts:  # the learner runs on another machine: its host decides
    return
  try:
    placement.check_learner_device(learner_device, in_process=mode.in_process, name=flag)
  except placement.NoAcceleratorError as e:
    raise core.UsageError(str(e)) from None


def run(spec, *, config: Any = None, report: Optional[modes.Report] = None,
        dry_run: bool = False, claim: bool = True, overwrite: bool = False,
        track: Optional[str] = None, **mode_kwargs: Any) -> modes.Outcome:
  """Launches the run `spec` describes with its launch mode (`modes.mode_for(spec.launch)`).

  Args:
    spec: a `RunSpec`.
    config: the `ExperimentConfig` to run (default: `spec.build()`; `local.run` passes its own).
    report: told what happens while it runs (`modes.Report`); None: nothing is told.
    dry_run: only describe what would run (`LaunchMode.describe`); nothing is written.
    claim: refuse a `spec.logdir` that holds another run (`run_dir.claim_logdir`; with
      `overwrite` its entries are removed instead) unless resuming.
    track: also log to an experiment tracker (`tracking.TRACKERS`: "wandb", "mlflow"),
      checked installed before anything is written; its tracking.json is read by every
      process's loggers.
    mode_kwargs: passed to the mode's `run` (e.g. `on_learner_step` for `local`).

  Returns:
    the mode's `modes.Outcome`.

  Raises:
    core.UsageError: a bad spec, a directory that holds another run.
    checkpointing.CheckpointError: `spec.resume` and no readable checkpoint.
    core.RunFailure: a fault stopped the run (`failure` adds the environment id and how
      to continue); KeyboardInterrupt / stops.Preempted: Ctrl-C or SIGTERM, with
      `checkpoint_path` (`stop_message` says what to continue from).
  """
  mode = modes.mode_for(spec.launch)
  if spec.population and not getattr(mode, "populations", False):  # (a row may not say)
    raise core.UsageError(f"--launch {spec.launch}: a population does not run there (allowed: "
                          + ", ".join(n for n in modes.names() if getattr(
                              modes.mode_for(n), "populations", False)) + ")")
  mode.check(spec)  # what the mode cannot launch, before anything is written
  if track:
    tracking.check_tracker(track)  # installed, before anything is written
  if config is None:
    config = (dataclasses.replace(spec, logdir=None) if dry_run else spec).build()
  if dry_run:
    _warn_no_learning(spec, config, report)
    return modes.Outcome(0, [mode.describe(spec, config)])
  if spec.logdir is not None:
    spec = open_run_dir(spec, claim=claim, overwrite=overwrite)
    if track:  # components/tracking.py: tracking.json, read by every process's loggers
      tracking.start(spec.logdir, track)
  _warn_no_learning(spec, config, report)
  return mode.run(spec, config, report, **mode_kwargs)


def open_run_dir(spec, *, claim: bool = True, overwrite: bool = False):
  """`spec` with its run directory made ready to run in: claimed (`run_dir.claim_logdir`:
  one run per directory, case B8; with `overwrite` another run's entries are removed) and
  run.json (a population's pbt.json: `spec.info_file`) written unless resuming. The one
  writer of a new run's run.json: `run` calls it, and so does whatever runs specs without
  `run` (`actorq sweep --launch anakin`'s seeds).

  Returns:
    `spec` with `logdir` the checked, writable directory.

  Raises:
    core.UsageError: the directory holds another run (without `overwrite`) or cannot be
      written.
  """
  if claim and not spec.resume:  # one run per directory (case B8), of one kind (B19)
    run_dir.claim_logdir(spec.logdir, overwrite=overwrite, kind=spec.run_kind)
  spec = dataclasses.replace(spec, logdir=atomic.ensure_writable_dir(spec.logdir))
  if not spec.resume:
    spec.save(spec.logdir)  # run.json (a population's pbt.json): its one writer
  return spec


def record_resumed_settings(spec, report: Optional[modes.Report] = None) -> None:
  """A resume that changes a train setting (`--steps` extended, `--eval-every`, `--launch`,
  ...) writes it into run.json, and says so, once the launch has taken the run's
  checkpoint (the launch modes call it: at the first actor step in one process, after
  `make_program` for a Launchpad program): the run directory describes the run it now
  holds, and a later plain `--resume` ends at the new total (case B13). A resume that is
  refused (no checkpoint, one of another launch) writes nothing."""
  if not spec.resume or spec.logdir is None:
    return
  with warnings.catch_warnings():  # (`from_args` has warned of its unknown keys once)
    warnings.simplefilter("ignore")
    saved = type(spec).from_json(run_dir.read_info(spec.logdir, spec.info_file))
  changes = spec_lib.recorded_changes(saved, spec)
  if changes and checkpointing.list_checkpoints(os.path.join(spec.logdir, run_dir.CHECKPOINTS)):
    spec.save(spec.logdir)
    if report is not None:
      report.say(f"actorq: --resume: {spec.info_file} now records {'; '.join(changes)}")


def _warn_no_learning(spec, config, report: Optional[modes.Report]) -> None:
  warning = no_learning_warning(spec.steps, config.steps_before_learning(), spec.resume)
  if warning and report is not None:
    report.warn(warning)


def no_learning_warning(steps: int, needed: int, resume: bool = False) -> "str | None":
  """The line `actorq train` prints (to stderr; the run goes on) when `steps` (`--steps`,
  summed over actors and environments) is below `needed`, the actor steps before the
  learner's first step (`ExperimentConfig.steps_before_learning`); None otherwise. A
  warning, not an error, as Acme's rate limiter and SB3's `learning_starts` do not refuse
  such a run: smoke runs and acting-only runs are legitimate. `resume`: the config is the
  run's own (no `--set`), so only `--steps` is offered."""
  if steps >= needed:
    return None
  change = "" if resume else f" or --set min_replay_size=N with N below {steps}"
  return (f"actorq: warning: --steps {steps} ends before the learner's first step: it starts "
          f"once replay holds min_replay_size={needed} items, one per actor step at most "
          f"(summed over actors and environments), so this run will not learn; give --steps "
          f"above {needed}{change}")


def failure(spec, error: core.RunFailure) -> core.RunFailure:
  """`error` (same type) with the environment id before an environment's fault and, when
  the run has a readable checkpoint, how to continue from it."""
  message = f"{spec.env}: {error}" if isinstance(error, core.EnvironmentFailure) else str(error)
  ckpt_dir = os.path.join(spec.logdir, run_dir.CHECKPOINTS) if spec.logdir else None
  if ckpt_dir and checkpointing.list_checkpoints(ckpt_dir):
    message += f"; continue from the newest checkpoint with: actorq train --resume {spec.logdir}"
  return type(error)(message)


def stop_message(logdir: str, saved: "str | None") -> str:
  """What a stopped run (Ctrl-C, SIGTERM) says about its checkpoints, truthfully (case
  B9): the checkpoint `saved` at the stop, else the newest earlier one, else that there
  is nothing to resume."""
  if saved:
    return (f"actorq: checkpoint saved ({os.path.basename(saved)}); continue with: "
            f"actorq train --resume {logdir}")
  if checkpointing.list_checkpoints(os.path.join(logdir, run_dir.CHECKPOINTS)):
    return (f"actorq: no checkpoint was written at the stop; continue from the newest "
            f"earlier one with: actorq train --resume {logdir}")
  return (f"actorq: stopped before the first checkpoint, nothing to resume; start again "
          f"with the same flags and --overwrite (--logdir {logdir})")
