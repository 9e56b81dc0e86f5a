"""Chat with an agent: conversations whose earlier turns are the agent's memory."""
