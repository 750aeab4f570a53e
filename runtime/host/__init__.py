"""One process identity: owner ids, liveness on this host, /proc reads, orphan sweeping."""
