"""Agents: the offline demo agents (real CLI adapters come with invoke)."""
