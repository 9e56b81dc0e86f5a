"""Review queues (docs/REVIEW.md): staff gather runs (or pairs of runs) for people to review
with a rubric, one item at a time; the answers are feedback (agentlab/feedback/)."""
