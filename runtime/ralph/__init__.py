"""The Ralph runner's engine-side parts: its configuration, backpressure gates, limits and
safety nets, and the live view of a session (``interlock watch``)."""
