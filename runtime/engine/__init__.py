"""The engine: sessions (run to completion), the runner that drives one from a store,
snapshots, clocks and bindings."""
