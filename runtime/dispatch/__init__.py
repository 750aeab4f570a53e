"""Sub-agent dispatch: run a CLI agent, watch its output, decide when it is done."""
