"""The command line: every `actorq` command, and the only home of argparse, printing and
exit codes. `main` builds the parser from one module per command (`COMMANDS`); each
command turns its arguments into a run description and hands it to the engine
(`actorq.launch`), the studies over trained checkpoints (`actorq.studies`) or the
benchmarks (`actorq.benchmarks`)."""
