"""Evaluation suites: cases with scorers, experiments that run a suite against several agents."""
