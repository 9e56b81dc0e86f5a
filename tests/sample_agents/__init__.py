"""A stand-in for a developer's app: its agents.py declares agents in code (tests import it,
and test_code_agents.py's discovery test finds it the way an installed app's is found)."""
