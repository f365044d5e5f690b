"""python -m rn50.fake_imagenet: a command whose code lives in rn50/tools/fake_imagenet.py."""

from rn50.tools.fake_imagenet import main

if __name__ == "__main__":
    main()
