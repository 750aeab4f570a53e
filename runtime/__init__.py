"""interlock.runtime: everything that touches files, processes, clocks and stores."""
