"""What models learn from: NTP data in distinct-context form, sequence readers, synthetic generators."""

from .._lazy import lazy_exports

__all__ = ["NTPData"]
__getattr__, __dir__ = lazy_exports(__name__, {"NTPData": ".ntp"})
