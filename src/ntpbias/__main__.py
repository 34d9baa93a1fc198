"""``python -m ntpbias`` is the ``ntpbias`` command."""

from .cli import main

if __name__ == "__main__":
    main()
