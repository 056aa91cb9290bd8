"""`python -m actorq.cli ARGS`: the `actorq` command."""
import sys

from actorq.cli import main

sys.exit(main.main())
