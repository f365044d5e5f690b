"""python -m rn50.compare: a command whose code lives in rn50/results/compare.py."""

from rn50.results.compare import main

if __name__ == "__main__":
    main()
