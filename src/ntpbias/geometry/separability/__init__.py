"""NTP-separability: the verdict with its certificate, the cokernel LP and the large-m thresholds."""
