"""python -m rn50.upload: a command whose code lives in rn50/tracking/upload.py."""

from rn50.tracking.upload import main

if __name__ == "__main__":
    main()
