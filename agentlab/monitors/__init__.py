"""Live scorers: suite scorers watching finished runs of any source, their alerts
(docs/FEEDBACK.md "Scorers on live traffic")."""
