"""Options the tests' runs share."""

# The quick preset samples 0.15 s a round (methodology, "Sampling time"); a test that checks what a
# run does, not how well it measures, samples 0.05 s and keeps the suite's wall time down.
BRIEF_SAMPLING = ["--min-run-time", "0.05"]
