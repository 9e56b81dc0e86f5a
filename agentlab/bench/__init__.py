"""Helpers of the benchmark commands (manage.py bench_*): processes they start and what they
measure with. Nothing in the product imports them."""
