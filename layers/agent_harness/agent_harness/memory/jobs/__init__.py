"""The memory jobs that run after a turn or on a schedule: flush, consolidate, retain, forget."""
