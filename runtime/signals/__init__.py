"""Live signals: the mailbox protocol of seed 004."""
