"""In-network coflow scheduling: scheduler core, simulator and control plane.

The P4Runtime modules come from :mod:`coflow.dataplane.pb` (generated at first use, C protobuf);
nothing here imports PyPI's ``p4.v1`` modules, which would need the pure-Python protobuf.
"""
