"""Paper A's objects: the subspace F and W*, the loss and its excess, the F-bound, the regularization path."""
