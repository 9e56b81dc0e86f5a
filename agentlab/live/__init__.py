"""Live runs: control of the runs this process executes (pause, step, breakpoints, approvals,
edits) and the WebSocket consumer that watches and steers one run."""
