"""The OpenAI-compatible gateway: any agent whose base URL points here is recorded, held at
breakpoints, replayed and forked (docs/GATEWAY.md)."""
