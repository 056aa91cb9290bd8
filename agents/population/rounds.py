"""PBT's synchronous ready rounds (Jaderberg et al. 2017, appendix A.1; case B20): when a
member is ready, what its evaluation records (pbt.csv's row), and when the learner's
exploit/explore runs. Population logic, whichever launcher steps the population.

Every `ready_every` actor steps of a member (its own transitions) the member is evaluated:
its k-th ready round; its last evaluation is at `steps`. Members reach their k-th ready
point at different vector steps (an episode's reset is no actor step), and a member ranked
alone against the others' older returns was almost never the worst: so the k-th round's
exploit/explore (`PopulationLearner.exploit`) waits until every member has been evaluated
in round k, and is then run on those N returns. A member past its last steps is never
replaced; a copy is written into the loser's row of that round (``copied_from``).

    rounds = ReadyRounds(learner, actor, ready_every=1000, steps=5000)
    ready = rounds.due()                        # members to evaluate now
    scalars = rounds.record(ready, returns)     # rows, then exploit/explore of whole rounds
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from actorq.agents.population import config as config_lib


class ReadyRounds:
  """The ready rounds of a population (see the module docstring).

  Attributes:
    next_ready: int [N], actor steps of each member at its next evaluation.
    last_eval: int [N], actor steps at each member's latest evaluation (-1: none yet).
    fitness: float [N], each member's latest evaluation return (nan: none yet).
    rows: pbt.csv's rows, in the order they were recorded: member, actor_steps,
      learner_steps, episode_return, the member's mutable values during the interval,
      precision, copied_from (the member it copied right after, or "").
    pending: ready round k -> {member: (its return there, its row's index)} until every
      member has been evaluated in round k.

  Args:
    learner: the `PopulationLearner` (values, learner steps, exploit).
    actor: the `PopulationActor` (actor steps, acting cost, `update_member` after a copy).
    ready_every: actor steps of a member between its evaluations (>= 1).
    steps: actor steps of each member in the run (its last evaluation is there).
  """

  def __init__(self, learner, actor, ready_every: int, steps: int):
    self.learner, self.actor = learner, actor
    self.n = learner.n
    self.ready_every, self.steps = int(ready_every), int(steps)
    self.next_ready = np.full(self.n, self.ready_every, np.int64)
    self.last_eval = np.full(self.n, -1, np.int64)
    self.fitness = np.full(self.n, np.nan)
    self.rows: List[Dict[str, Any]] = []
    self.pending: Dict[int, Dict[int, Tuple[float, int]]] = {}

  def due(self) -> List[int]:
    """The members to evaluate now: at a ready point, or at their last steps and not yet
    evaluated there."""
    steps = self.actor.actor_steps
    return [m for m in range(self.n) if steps[m] >= self.next_ready[m]
            or (steps[m] >= self.steps and self.last_eval[m] < self.steps)]

  def evaluating(self) -> bool:
    """Whether a member's evaluation at its last steps is still to come."""
    return bool((self.last_eval < self.steps).any())

  def record(self, members: Sequence[int], returns: np.ndarray) -> List[Dict[str, Any]]:
    """Records the members' evaluations (rows: the values they had during the interval)
    in their ready rounds, then runs exploit/explore for every round that all members
    have now reached. Returns the per-member scalars (the rows plus the measured actor
    cost per step, `actor_us_per_step`)."""
    learner, actor = self.learner, self.actor
    new_rows, scalars = {}, {}
    for m, value in zip(members, returns):
      self.fitness[m] = float(value)
      row = {"member": m, "actor_steps": int(actor.actor_steps[m]),
             "learner_steps": int(np.asarray(learner.state.steps)[m]),
             "episode_return": float(value)}
      row.update({k: v for k, v in learner.values[m].items()
                  if k != config_lib.PRECISION_FIELD})
      row.update(precision=learner.precision(m), copied_from="")
      new_rows[m] = row
      scalars[m] = {"actor_steps": row["actor_steps"], "learner_steps": row["learner_steps"],
                    "episode_return": row["episode_return"],
                    "actor_us_per_step": 1e6 * actor.take_cost(m),
                    **{k: v for k, v in learner.values[m].items()
                       if k in learner.members.LEARNER_FIELDS}}
      self.last_eval[m] = actor.actor_steps[m]
      self.next_ready[m] = (actor.actor_steps[m] // self.ready_every + 1) * self.ready_every
    for m in members:
      ready_round = sum(1 for r in self.rows if r["member"] == m)  # 0 for the first
      self.pending.setdefault(ready_round, {})[m] = (float(self.fitness[m]), len(self.rows))
      self.rows.append(new_rows[m])
    self._exploit()
    return [dict(scalars[m], member=m, copied_from=new_rows[m]["copied_from"])
            for m in members]

  def _exploit(self) -> None:
    """The learner's exploit/explore on every whole round, oldest first."""
    while self.pending and len(self.pending[min(self.pending)]) == self.n:
      evaluated = self.pending.pop(min(self.pending))
      for loser, winner in self.learner.exploit([evaluated[m][0] for m in range(self.n)],
                                                self.actor.actor_steps >= self.steps):
        self.actor.update_member(loser)
        self.rows[evaluated[loser][1]]["copied_from"] = int(winner)

  def final_returns(self) -> List[float]:
    """float [N]: each member's latest evaluation return (nan: none)."""
    final = [float("nan")] * self.n
    for row in self.rows:
      final[row["member"]] = row["episode_return"]
    return final

  # -- checkpoints ------------------------------------------------------------------------
  def save(self) -> Dict[str, Any]:
    """The rounds' part of a population checkpoint (plain Python)."""
    return {"next_ready": self.next_ready.tolist(), "last_eval": self.last_eval.tolist(),
            "fitness": self.fitness.tolist(), "rows": [dict(r) for r in self.rows],
            "rounds_pending": {k: dict(v) for k, v in self.pending.items()}}

  def restore(self, saved: Dict[str, Any]) -> None:
    """Takes back a `save()`."""
    self.next_ready = np.asarray(saved["next_ready"], np.int64)
    self.last_eval = np.asarray(saved["last_eval"], np.int64)
    self.fitness = np.asarray(saved["fitness"], np.float64)
    self.rows = [dict(r) for r in saved["rows"]]
    self.pending = {int(k): {int(m): tuple(e) for m, e in v.items()}
                    for k, v in saved.get("rounds_pending", {}).items()}
