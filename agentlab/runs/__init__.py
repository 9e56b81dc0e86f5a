"""From an agent row to a running run (DESIGN.md "A run"): `snapshot` freezes the agent as JSON,
`build` turns a snapshot into a RunContext, `tasks` runs it as this process's asyncio task."""
