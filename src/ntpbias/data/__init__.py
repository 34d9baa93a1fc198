"""What models learn from: NTP data in distinct-context form, sequence readers, synthetic generators."""

from .ntp import NTPData

__all__ = ["NTPData"]
