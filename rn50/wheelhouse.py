"""python -m rn50.wheelhouse: a command whose code lives in rn50/tools/wheelhouse.py."""

from rn50.tools.wheelhouse import main

if __name__ == "__main__":
    main()
