"""ntpbias: the implicit optimization bias of next-token prediction and attention training, computed.

Layers (each imports only the ones below it): ``data`` -> ``geometry`` -> ``models`` -> ``training`` ->
``experiments`` -> ``report`` -> ``cli``. See README.md for the command line.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ntpbias")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"
