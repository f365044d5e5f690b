"""python -m rn50.baseline: a command whose code lives in rn50/tools/baseline.py."""

from rn50.tools.baseline import main

if __name__ == "__main__":
    main()
