"""python -m rn50.rank: a rank process, which rn50/pool.py starts (rn50/rank/run.py)."""

from rn50.heap import lasting_imports

with lasting_imports():
    from rn50.rank.run import main

main()
