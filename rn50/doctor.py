"""python -m rn50.doctor: a command whose code lives in rn50/tools/doctor.py."""

from rn50.tools.doctor import main

if __name__ == "__main__":
    main()
