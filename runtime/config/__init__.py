"""interlock.yaml: one reader (:mod:`.project_file`), one loader per section."""
