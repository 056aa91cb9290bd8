"""Agents compiled for JAX environments (`--launch anakin`): the table `systems.SYSTEMS` of
each agent's system, built from the agent's own networks and pure update functions."""
