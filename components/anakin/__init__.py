"""Compiled training for JAX environments (`--launch anakin`): acting, replay and learning
of one agent in one jitted program, vmapped over environments and seeds (the "Anakin"
architecture of Hessel et al. 2021). `acting` holds the in-graph policy (fp32 or emulated
int8) and evaluation; the per-agent systems (the agents' own networks and pure update
functions) are `actorq.agents.anakin_common.systems`; the launcher is `actorq.launch.anakin`."""
