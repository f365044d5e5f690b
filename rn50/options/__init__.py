"""The config groups whose option names its class with `_target_`: data pipelines, precisions,
profilers and clusters (their common base: components), and the host checks they make (checks).
The launcher builds these objects, so nothing here imports torch: what an option builds in a rank
lives in the rank's layers (rn50/data, rn50/recipe, rn50/profiling, rn50/distributed), and each
option module reaches it through one deferred import, `in_rank()`, which only a rank calls."""
