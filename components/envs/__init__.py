"""Environments as `dm_env.Environment` from an id string (`gym:`, `dmc:`, `atari:`, ...):
the Gymnasium adapter, Atari preprocessing and vectorized (batched) environments."""
