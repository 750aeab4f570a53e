"""Fixtures of the interview tests."""
