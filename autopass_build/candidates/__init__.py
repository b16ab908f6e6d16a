"""Building candidates from the store: a binary replayed with per-unit flags (replay,
replay_args, candidate), whole-program stages (stages, pgo, bolt, training,
steady_counts), whether replay is faithful (fidelity), and one evaluation: build,
then measure (evaluate)."""
