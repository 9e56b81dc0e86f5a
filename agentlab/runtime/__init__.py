"""The run loop every paradigm runs on (pure: no ORM): RunContext, scopes, budgets, slots, sinks.

A paradigm talks to `context.RunContext`; `loop.execute` runs one to its end. Nothing here
imports a paradigm: the lookup of paradigms by key is handed to the context.
"""
