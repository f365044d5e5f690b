"""The config groups whose option names its class with `_target_`: data pipelines, precisions,
profilers and clusters (their common base: components), with the host checks they make
(checks) and the compile keys' rules (compilation). The launcher builds these objects, so nothing
here imports torch; what an option builds in a rank lives in the rank's layers and is reached
through one deferred import per option module."""
