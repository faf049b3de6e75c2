"""The workload catalogue: one module per operator family, collected in CASES."""
