"""Paper C's objects: the optimum of the one-layer transformer and its theorems' bounds."""
