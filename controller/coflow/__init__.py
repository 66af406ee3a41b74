"""In-network coflow scheduling: scheduler core, simulator and control plane."""
import os

# PyPI's p4runtime ships generated modules that current protobuf loads only with the pure-Python
# implementation, and protobuf picks its implementation once, at its first import. Any process
# that imports this package may end up importing p4runtime (the controller, the emulation, the
# tests), so the choice is made here, before anything imports protobuf. An explicit setting in
# the environment wins. Our own generated code (coflow.api) works under both implementations.
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
