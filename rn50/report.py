"""python -m rn50.report: a command whose code lives in rn50/results/report.py."""

from rn50.results.report import main

if __name__ == "__main__":
    main()
