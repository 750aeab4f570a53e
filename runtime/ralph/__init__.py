"""The Ralph runner (seed 004): session folder, subagents, signal semantics."""
