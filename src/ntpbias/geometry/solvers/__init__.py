"""Solver machinery of the max-margin programs: the dual and working-set methods, their operators and HiGHS LPs."""
