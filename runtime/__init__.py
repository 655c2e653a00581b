"""tensorplay's handwritten runtime: one Cython module per concept, cimported by generated/."""
