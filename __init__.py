"""actorq: Acme-style actor-learner RL with 8-bit quantized actors."""
