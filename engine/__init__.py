"""Node-side code: launch plans, drivers, parsers, preflight, diagnosis, the agent, and the simulator. No Django."""
