"""Data-plane support: the CoflowId packet encoding, the emulated traffic manager (tc HTB),
a thin P4Runtime client and toolchain discovery for the BMv2 pipeline in p4src/."""
