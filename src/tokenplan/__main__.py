"""``python -m tokenplan``: the same command line as the ``tokenplan`` script."""

from tokenplan.cli import main

if __name__ == "__main__":
    main()
