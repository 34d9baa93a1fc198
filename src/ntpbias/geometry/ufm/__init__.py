"""The log-bilinear (unconstrained-features) model's logit-space objects and its nuclear-norm NTP-SVM."""
