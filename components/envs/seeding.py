"""The seed streams of a run: which seeds its training and evaluation environments get
(case B14: they never coincide). Used by `actorq.launch.experiment` and by the
environment families of agents (`actorq.agents.multiagent_common.decentralized`)."""

# Seeds derived from `ExperimentConfig.seed`: the training actor (single process) uses
# the seed itself, actor i of a distributed run `seed + 1 + i`, a resumed run's actors
# those plus the actor steps done (`training_seed` moves any of them past the evaluation
# seeds), the evaluator `seed + EVAL_SEED_OFFSET` (and its vector rows the seeds after).
EVAL_SEED_OFFSET = 10_000
# The evaluation seeds of a run lie in [seed + EVAL_SEED_OFFSET, seed + EVAL_SEED_OFFSET +
# EVAL_SEED_ROWS); no training environment is ever seeded in that window.
EVAL_SEED_ROWS = EVAL_SEED_OFFSET // 2


def training_seed(run_seed: int, offset: int, rows: int = 1) -> int:
  """The seed of a training environment (of the first of `rows` environments, seeded
  seed, seed + 1, ...) `offset` into the run's training seeds: 0 for a single-process run,
  1 + i for actor i of a distributed run, plus the actor steps done for a resumed run.

  The training and evaluation streams never coincide (case B14: a run resumed at actor
  step 10,000 used to train on the evaluation episodes' start states): an offset whose
  rows would reach `EVAL_SEED_OFFSET` is moved past the evaluation window (+
  EVAL_SEED_OFFSET), so every training seed is below `seed + EVAL_SEED_OFFSET` or at or
  above `seed + 2 * EVAL_SEED_OFFSET - rows + 1 >= seed + EVAL_SEED_OFFSET + EVAL_SEED_ROWS`
  (rows <= EVAL_SEED_OFFSET - EVAL_SEED_ROWS). The mapping is one-to-one, and a fresh
  run's seeds (small offsets) are unchanged.

  Raises:
    ValueError: `offset` < 0, or `rows` outside [1, EVAL_SEED_OFFSET - EVAL_SEED_ROWS].
  """
  if offset < 0 or not 1 <= rows <= EVAL_SEED_OFFSET - EVAL_SEED_ROWS:
    raise ValueError(f"training_seed: offset {offset} must be >= 0 and rows {rows} in [1, "
                     f"{EVAL_SEED_OFFSET - EVAL_SEED_ROWS}]")
  if offset + rows > EVAL_SEED_OFFSET:
    offset += EVAL_SEED_OFFSET
  return run_seed + offset
