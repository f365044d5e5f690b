"""A point of a sweep as a whole config: whether it can run (validate) and what it is (identity:
the hash and the keys that count, the run's name)."""
