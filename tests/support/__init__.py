"""Test helpers and fixture files (agents, specs, bindings) shared by the suites."""
