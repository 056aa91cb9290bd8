"""Pieces shared by the deterministic-policy-gradient agents (DDPG, D4PG): config base,
policy/critic networks, the learner skeleton and the builder. Each agent supplies only
its critic head and critic loss."""
