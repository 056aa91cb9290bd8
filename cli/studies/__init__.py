"""Command lines of the studies (`python -m actorq.studies.X` hands over here)."""
