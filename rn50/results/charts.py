"""matplotlib's names that rn50's charts use (report's and compare's PNGs). A Figure that pyplot
never saw draws with the Agg canvas and needs no closing; rn50/results/report.py imports this
module when a chart is drawn, so a run's launcher, which imports report for a sweep's end, never
pays for matplotlib's import."""

from matplotlib.figure import Figure  # noqa: F401
from matplotlib.ticker import NullLocator  # noqa: F401
