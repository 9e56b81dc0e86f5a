"""Feedback on runs and steps: thumbs, a score or a label from a feedback key a team defines in
the admin, and a note, given by a person (or, later, a named scorer). Shown beside each step on
the run page, filterable in the runs list, counted on the dashboard, carried in the run bundle
and sent to Phoenix as span annotations (docs/FEEDBACK.md)."""
