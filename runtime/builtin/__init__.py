"""The built-in specs shipped in the wheel, and (later) their bindings."""
