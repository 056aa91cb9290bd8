"""The command lines of the benchmarks in `actorq.benchmarks` (argparse lives in cli/):
one module per benchmark, `main(argv)` parsing its flags and calling the benchmark's
functions with typed arguments. `python -m actorq.benchmarks.<name>` runs the same."""
