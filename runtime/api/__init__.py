"""The façade's implementation, one module per concern; import from ``interlock.runtime``."""
