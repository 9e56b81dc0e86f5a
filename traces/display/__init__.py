"""How a step looks, for every page, socket and terminal (one home: see renderer.StepRenderer)."""
