"""Measuring a build: one run of the benchmark (benchmark, binaries, cpu_pinning, duet),
whether its output is right (output_check), the A/B against the baseline and its
statistics (measure, stats, steadiness), and where the time goes (sampling,
attribution)."""
