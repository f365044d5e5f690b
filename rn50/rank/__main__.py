"""python -m rn50.rank: a rank process, which rn50/launcher/pool.py starts (rn50/rank/run.py); what crosses is in rn50/wire.py."""

from rn50.measure.settings import lasting_imports

with lasting_imports():
    from rn50.rank.run import main

main()
