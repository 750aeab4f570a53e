"""The Ralph runner (seed 004): configuration, session folder, subagents, signal semantics,
backpressure gates, limits and safety nets, and the live view of a session."""
