"""python -m rn50.config_docs: prints docs/configuration.md, generated from the schema (rn50/config/docs.py)."""

from rn50.config.docs import page

if __name__ == "__main__":
    print(page(), end="")
