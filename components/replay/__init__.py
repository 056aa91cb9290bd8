"""Replay: Reverb tables, datasets and adders (with actorq's corrections), rollout queues,
validated priorities, and the seeded in-process replay of single-process runs (tables,
writer and sum tree behind the `reverb.Client` methods)."""
