"""In-network coflow scheduling: scheduler core, simulator and control plane."""
