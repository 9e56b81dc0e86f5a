"""The dashboard (/dashboard/): how agents, paradigms and models do over a period, as database
aggregates drawn with the vendored Chart.js. Not an app: no models, only queries and a page."""
