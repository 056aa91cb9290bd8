"""What runs over trained checkpoints and finished runs: reward parity, the compression
sweep, the per-layer precision search, the quantization report, seed sweeps and their
aggregates. Studies read run directories through `actorq.components.run_dir` and never parse
command lines (that is `actorq.cli`)."""
